package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
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

// WithUser runs the command as a user of the container: a name, or a uid
// given as its decimal digits (default: root).
func WithUser(user string) ExecOption { return func(p map[string]any) { p["user"] = user } }

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

// execResultJSON is sandbox.exec's result on the wire.
type execResultJSON struct {
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

func (r *execResultJSON) result() (ExecResult, error) {
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
		return ExecResult{}, fmt.Errorf("sandbox: %s: %w", methodExec, err)
	}
	if res.Stderr, err = getData(r.Stderr, r.StderrB64); err != nil {
		return ExecResult{}, fmt.Errorf("sandbox: %s: %w", methodExec, err)
	}
	res.Output = res.Stdout + res.Stderr
	return res, nil
}

// execParams builds sandbox.exec's params; without WithTimeout the context's
// deadline (capped at the daemon's longest timeout) becomes timeout_ms.
func (s *Sandbox) execParams(ctx context.Context, params map[string]any,
	opts []ExecOption) map[string]any {
	params["id"] = s.ID()
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
	return params
}

func (s *Sandbox) exec(ctx context.Context, params map[string]any, o callOpts) (ExecResult, error) {
	files, err := takeFiles(params)
	if err != nil {
		return ExecResult{}, err
	}
	o.files = append(o.files, files...)
	var r execResultJSON
	if err := s.m.callWith(ctx, methodExec, params, &r, o); err != nil {
		return ExecResult{}, err
	}
	return r.result()
}

// Exec runs cmd with /bin/sh -c in the sandbox and waits for it to end. A
// command that exits non-zero is not an error: see ExitCode.
func (s *Sandbox) Exec(ctx context.Context, cmd string, opts ...ExecOption) (ExecResult, error) {
	ctx, cancel := s.m.withDefaultTimeout(ctx)
	defer cancel()
	return s.exec(ctx, s.execParams(ctx, map[string]any{"command": cmd}, opts), callOpts{})
}

// ExecArgv runs argv directly (no shell; each entry passed as it is).
func (s *Sandbox) ExecArgv(ctx context.Context, argv []string, opts ...ExecOption) (ExecResult, error) {
	ctx, cancel := s.m.withDefaultTimeout(ctx)
	defer cancel()
	return s.exec(ctx, s.execParams(ctx, map[string]any{"argv": argv}, opts), callOpts{})
}

// OutputChunk is a piece of a streamed command's output, as it came.
type OutputChunk struct {
	Stream string // "stdout" or "stderr"
	Data   string // any bytes
}

// ExecStream runs cmd as Exec does, but hands its output to onOutput while it
// runs (sandbox.exec with stream: true and its exec.output notifications), in
// the order the daemon sent it, on the calling goroutine: while onOutput runs,
// the daemon waits (nothing is dropped). The result then has no Stdout, Stderr
// or Output. Other calls on the Manager and the Sandbox go on meanwhile (each
// call has a connection of its own).
func (s *Sandbox) ExecStream(ctx context.Context, cmd string, onOutput func(OutputChunk),
	opts ...ExecOption) (ExecResult, error) {
	ctx, cancel := s.m.withDefaultTimeout(ctx)
	defer cancel()
	params := s.execParams(ctx, map[string]any{"command": cmd}, opts)
	params["stream"] = true
	var badChunk error
	notify := func(method string, raw json.RawMessage) {
		if method != "exec.output" || onOutput == nil {
			return
		}
		var p struct {
			Stream  string  `json:"stream"`
			Data    *string `json:"data"`
			DataB64 *string `json:"data_b64"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			badChunk = err
			return
		}
		data, err := getData(p.Data, p.DataB64)
		if err != nil {
			badChunk = err
			return
		}
		onOutput(OutputChunk{Stream: p.Stream, Data: data})
	}
	res, err := s.exec(ctx, params, callOpts{notify: notify})
	if err == nil && badChunk != nil {
		err = fmt.Errorf("sandbox: exec.output: %w", badChunk)
	}
	return res, err
}

// Execution is a streamed command started by StartExec.
type Execution struct {
	// C delivers the output as it comes; it is closed when the command ended
	// (or the call failed). Read it until it closes, or cancel the context:
	// while nobody reads, the command's output waits.
	C    <-chan OutputChunk
	done chan struct{}
	res  ExecResult
	err  error
}

// StartExec starts cmd as ExecStream does and returns at once: the output
// arrives on the Execution's channel, the result from Wait.
func (s *Sandbox) StartExec(ctx context.Context, cmd string, opts ...ExecOption) *Execution {
	c := make(chan OutputChunk, 64)
	e := &Execution{C: c, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		defer close(c)
		e.res, e.err = s.ExecStream(ctx, cmd, func(o OutputChunk) {
			select {
			case c <- o:
			case <-ctx.Done():
			}
		}, opts...)
	}()
	return e
}

// Wait returns the result once the command ended. Output not yet read from C
// is dropped.
func (e *Execution) Wait() (ExecResult, error) {
	for {
		select {
		case <-e.done:
			return e.res, e.err
		case _, ok := <-e.C:
			if !ok {
				<-e.done
				return e.res, e.err
			}
		}
	}
}
