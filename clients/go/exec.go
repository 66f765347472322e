package sandbox

import (
	"context"
	"time"
)

// ExecResult is the outcome of a command.
type ExecResult struct {
	// ExitCode is the command's exit status, or -1 when a signal ended it.
	ExitCode int
	// Output is Stdout followed by Stderr.
	Output string
	Stdout string
	Stderr string
	// Signal names the signal that ended the command ("SIGKILL"), if one did.
	Signal string
	// TimedOut: the timeout passed and the command, with everything it
	// started, was killed.
	TimedOut        bool
	StdoutTruncated bool
	StderrTruncated bool
	Duration        time.Duration
}

// ExecOption sets a parameter of Exec.
type ExecOption func(params map[string]any)

// WithEnv adds environment variables.
func WithEnv(env map[string]string) ExecOption {
	return func(p map[string]any) { p["env"] = env }
}

// WithCwd sets the working folder (absolute).
func WithCwd(dir string) ExecOption { return func(p map[string]any) { p["cwd"] = dir } }

// WithStdin gives the command standard input.
func WithStdin(data string) ExecOption { return func(p map[string]any) { putData(p, "stdin", data) } }

// WithTimeout kills the command, and everything it started, after d. Without
// it the context's deadline is used, else the daemon's default (60 s).
func WithTimeout(d time.Duration) ExecOption {
	return func(p map[string]any) { p["timeout_ms"] = msCeil(d) }
}

// WithMaxOutput caps each output stream at n bytes (the rest is cut and flagged).
func WithMaxOutput(n int) ExecOption { return func(p map[string]any) { p["max_output_bytes"] = n } }

func msCeil(d time.Duration) int64 {
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	if ms < 1 {
		ms = 1
	}
	return ms
}

// Exec runs cmd with /bin/sh -c in the sandbox and waits for it to end. A
// command that exits non-zero is not an error: see ExitCode.
func (s *Sandbox) Exec(ctx context.Context, cmd string, opts ...ExecOption) (ExecResult, error) {
	params := map[string]any{"id": s.ID(), "command": cmd}
	for _, o := range opts {
		o(params)
	}
	if _, ok := params["timeout_ms"]; !ok {
		if dl, ok := ctx.Deadline(); ok {
			ms := msCeil(time.Until(dl))
			if max := s.m.limit(ctx, limitTimeoutMsMax); max > 0 && ms > max {
				ms = max
			}
			params["timeout_ms"] = ms
		}
	}
	var r struct {
		ExitCode        *int    `json:"exit_code"`
		Signal          *string `json:"signal"`
		TimedOut        bool    `json:"timed_out"`
		Stdout          *string `json:"stdout"`
		StdoutB64       *string `json:"stdout_b64"`
		Stderr          *string `json:"stderr"`
		StderrB64       *string `json:"stderr_b64"`
		StdoutTruncated bool    `json:"stdout_truncated"`
		StderrTruncated bool    `json:"stderr_truncated"`
		DurationMs      int64   `json:"duration_ms"`
	}
	if err := s.m.call(ctx, methodExec, params, &r); err != nil {
		return ExecResult{}, err
	}
	res := ExecResult{ExitCode: -1, TimedOut: r.TimedOut, StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated, Duration: time.Duration(r.DurationMs) * time.Millisecond}
	if r.ExitCode != nil {
		res.ExitCode = *r.ExitCode
	}
	if r.Signal != nil {
		res.Signal = *r.Signal
	}
	var err error
	if res.Stdout, err = getData(r.Stdout, r.StdoutB64); err != nil {
		return ExecResult{}, err
	}
	if res.Stderr, err = getData(r.Stderr, r.StderrB64); err != nil {
		return ExecResult{}, err
	}
	res.Output = res.Stdout + res.Stderr
	return res, nil
}
