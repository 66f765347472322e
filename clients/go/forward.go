package sandbox

import (
	"context"
	"errors"
)

const (
	methodForward   = "sandbox.forward"
	methodForwards  = "sandbox.forwards"
	methodUnforward = "sandbox.unforward"
)

// Forward is a port forward (Sandbox.Forward): the daemon relays each
// connection to Socket (a Unix socket only this uid may use) or Address
// (loopback TCP, which any local user can reach) to 127.0.0.1:Port in the
// sandbox.
type Forward struct {
	ID      string `json:"forward"`
	Port    int    `json:"port"`
	Socket  string `json:"socket,omitempty"`
	Address string `json:"address,omitempty"`
	sb      *Sandbox
}

// Forward asks the daemon to forward the sandbox's port. listen "" gives a
// Unix socket; "127.0.0.1:0" (or a port from 1024) a loopback TCP port.
func (s *Sandbox) Forward(ctx context.Context, port int, listen string) (*Forward, error) {
	params := map[string]any{"id": s.ID(), "port": port}
	if listen != "" {
		params["listen"] = listen
	}
	f := &Forward{sb: s}
	if err := s.m.call(ctx, methodForward, params, f); err != nil {
		return nil, err
	}
	return f, nil
}

// Forwards lists the sandbox's forwards as the daemon reports them.
func (s *Sandbox) Forwards(ctx context.Context) ([]map[string]any, error) {
	var r struct {
		Forwards []map[string]any `json:"forwards"`
	}
	err := s.m.call(ctx, methodForwards, map[string]any{"id": s.ID()}, &r)
	return r.Forwards, err
}

// Close ends the forward; one already gone (the sandbox destroyed) is fine.
func (f *Forward) Close(ctx context.Context) error {
	err := f.sb.m.call(ctx, methodUnforward, map[string]any{"id": f.sb.ID(), "forward": f.ID}, nil)
	if errors.Is(err, ErrInvalidParams) || errors.Is(err, ErrNoSuchSandbox) {
		return nil
	}
	return err
}
