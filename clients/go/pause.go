package sandbox

import "context"

const (
	methodPause  = "sandbox.pause"
	methodResume = "sandbox.resume"
)

// Pause stops the sandbox's container and keeps its disk: Info().State is
// "paused"; its commands, processes, sessions and forwards end, and calls that
// need the container fail (ErrBadState, state "paused") until Resume.
func (s *Sandbox) Pause(ctx context.Context) error {
	return s.update(ctx, methodPause, map[string]any{})
}

// Resume starts a paused sandbox again: Info().State is "ready", with its
// disk, host key and address as they were.
func (s *Sandbox) Resume(ctx context.Context) error {
	return s.update(ctx, methodResume, map[string]any{})
}
