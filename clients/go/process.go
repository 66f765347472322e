package sandbox

import (
	"context"
	"fmt"
	"time"
)

// The background process methods (docs/protocol.md, "Background processes").
const (
	methodProcessStart  = "process.start"
	methodProcessRead   = "process.read"
	methodProcessWrite  = "process.write"
	methodProcessWait   = "process.wait"
	methodProcessKill   = "process.kill"
	methodProcessResize = "process.resize"
	methodProcessList   = "process.list"
)

// ProcessOption sets a parameter of StartProcess.
type ProcessOption func(params map[string]any)

// WithProcessEnv adds environment variables to a process.
func WithProcessEnv(env map[string]string) ProcessOption {
	return func(p map[string]any) { p["env"] = env }
}

// WithProcessCwd sets a process's working folder (absolute; default: the home folder).
func WithProcessCwd(dir string) ProcessOption { return func(p map[string]any) { p["cwd"] = dir } }

// WithProcessUser runs the process as a user of the container: a name, or a
// uid given as its decimal digits (default: root).
func WithProcessUser(user string) ProcessOption { return func(p map[string]any) { p["user"] = user } }

// WithProcessStdin gives the process a stdin pipe that Process.Write feeds
// (otherwise its stdin is /dev/null).
func WithProcessStdin() ProcessOption { return func(p map[string]any) { p["stdin"] = true } }

// WithPTY runs the process on a terminal of cols x rows (1 to 1000 each); its
// stdout then carries what the terminal shows, and Write types into it.
func WithPTY(cols, rows int) ProcessOption {
	return func(p map[string]any) { p["pty"] = map[string]int{"cols": cols, "rows": rows} }
}

// ProcessInfo describes a background process.
type ProcessInfo struct {
	ID        string    `json:"process"`
	State     string    `json:"state"` // "running", "exited" or "lost"
	Command   string    `json:"command"`
	StartedAt time.Time `json:"started_at"`
	Stdin     bool      `json:"stdin"`
	ExitCode  *int      `json:"exit_code"` // nil while running, or when a signal ended it
	Signal    *string   `json:"signal"`    // the signal that ended it, if one did
}

// ProcessStatus is the state of a process after Wait or Kill.
type ProcessStatus struct {
	State    string  `json:"state"`
	ExitCode *int    `json:"exit_code"`
	Signal   *string `json:"signal"`
	// Sent is the signal Kill sent ("" when the process had already ended).
	Sent *string `json:"sent"`
}

// ProcessOutput is a piece of a process's output stream.
type ProcessOutput struct {
	Data string // any bytes, from Offset
	// Offset is where Data starts: the offset asked for, or AvailableFrom
	// when older bytes were dropped.
	Offset        int64
	NextOffset    int64 // read on from here
	AvailableFrom int64
	Size          int64 // bytes the stream carried so far
	EOF           bool  // the process ended and NextOffset reached Size
	State         string
	ExitCode      *int
	Signal        *string
}

// Process is a background process of a sandbox. It runs on whatever happens
// to the client that started it, until it ends or the sandbox does.
type Process struct {
	sb   *Sandbox
	id   string
	info ProcessInfo
}

// StartProcess runs cmd with /bin/sh -c in the background (process.start) and
// returns once it runs.
func (s *Sandbox) StartProcess(ctx context.Context, cmd string,
	opts ...ProcessOption) (*Process, error) {
	params := map[string]any{"id": s.ID(), "command": cmd}
	for _, o := range opts {
		o(params)
	}
	files, err := takeFiles(params)
	if err != nil {
		return nil, err
	}
	var info ProcessInfo
	if err := s.m.callWith(ctx, methodProcessStart, params, &info,
		callOpts{files: files}); err != nil {
		return nil, err
	}
	return &Process{sb: s, id: info.ID, info: info}, nil
}

// Process returns a handle on a process started before, by any client of the
// sandbox's owner.
func (s *Sandbox) Process(id string) *Process {
	return &Process{sb: s, id: id, info: ProcessInfo{ID: id}}
}

// Processes lists the processes the sandbox keeps, oldest first.
func (s *Sandbox) Processes(ctx context.Context) ([]ProcessInfo, error) {
	var r struct {
		Processes []ProcessInfo `json:"processes"`
	}
	if err := s.m.call(ctx, methodProcessList, map[string]any{"id": s.ID()}, &r); err != nil {
		return nil, err
	}
	return r.Processes, nil
}

// ID returns the process's id ("pr-…").
func (p *Process) ID() string { return p.id }

// Info is what process.start answered (for a handle from Sandbox.Process: the
// id only; Sandbox.Processes has the rest).
func (p *Process) Info() ProcessInfo { return p.info }

func (p *Process) params(extra map[string]any) map[string]any {
	extra["id"] = p.sb.ID()
	extra["process"] = p.id
	return extra
}

// Read returns up to length bytes (0: 65536) of stream ("stdout" or
// "stderr") from offset; with wait it waits, at most that long, for a byte
// past offset or the process's end.
func (p *Process) Read(ctx context.Context, stream string, offset int64, length int,
	wait time.Duration) (ProcessOutput, error) {
	params := p.params(map[string]any{"offset": offset})
	if stream != "" {
		params["stream"] = stream
	}
	if length > 0 {
		params["length"] = length
	}
	if wait > 0 {
		params["wait_ms"] = msCeil(wait)
	}
	var r struct {
		Data          *string `json:"data"`
		DataB64       *string `json:"data_b64"`
		Offset        int64   `json:"offset"`
		NextOffset    int64   `json:"next_offset"`
		AvailableFrom int64   `json:"available_from"`
		Size          int64   `json:"size"`
		EOF           bool    `json:"eof"`
		State         string  `json:"state"`
		ExitCode      *int    `json:"exit_code"`
		Signal        *string `json:"signal"`
	}
	if err := p.sb.m.call(ctx, methodProcessRead, params, &r); err != nil {
		return ProcessOutput{}, err
	}
	data, err := getData(r.Data, r.DataB64)
	if err != nil {
		return ProcessOutput{}, fmt.Errorf("sandbox: %s: %w", methodProcessRead, err)
	}
	return ProcessOutput{Data: data, Offset: r.Offset, NextOffset: r.NextOffset,
		AvailableFrom: r.AvailableFrom, Size: r.Size, EOF: r.EOF, State: r.State,
		ExitCode: r.ExitCode, Signal: r.Signal}, nil
}

// Write feeds data into the process's stdin (started WithProcessStdin or
// WithPTY; at most 1 MiB a call); close then closes its stdin. It returns the
// bytes written.
func (p *Process) Write(ctx context.Context, data string, close bool) (int64, error) {
	params := p.params(map[string]any{"close": close})
	if data != "" {
		putData(params, "data", data)
	}
	var r struct {
		Written int64 `json:"written"`
	}
	if err := p.sb.m.call(ctx, methodProcessWrite, params, &r); err != nil {
		return 0, err
	}
	return r.Written, nil
}

// Wait waits, at most timeout (0 only looks; at most 10 minutes), for the
// process to end; a process still running has State "running".
func (p *Process) Wait(ctx context.Context, timeout time.Duration) (ProcessStatus, error) {
	params := p.params(map[string]any{"timeout_ms": int64(0)})
	if timeout > 0 {
		params["timeout_ms"] = msCeil(timeout)
	}
	var st ProcessStatus
	err := p.sb.m.call(ctx, methodProcessWait, params, &st)
	return st, err
}

// Resize gives the terminal of a process started WithPTY cols x rows; the
// program in its foreground gets SIGWINCH.
func (p *Process) Resize(ctx context.Context, cols, rows int) error {
	return p.sb.m.call(ctx, methodProcessResize, p.params(map[string]any{"cols": cols, "rows": rows}), nil)
}

// Kill sends signal ("" means SIGKILL, which ends everything the process
// started) and waits up to 2 s for the process to end.
func (p *Process) Kill(ctx context.Context, signal string) (ProcessStatus, error) {
	params := p.params(map[string]any{})
	if signal != "" {
		params["signal"] = signal
	}
	var st ProcessStatus
	err := p.sb.m.call(ctx, methodProcessKill, params, &st)
	return st, err
}
