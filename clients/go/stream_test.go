package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"sandboxd/sandbox"
)

// A streamed command's output arrives while it runs, and other calls on the
// same Manager and Sandbox complete meanwhile.
func TestExecStreamWithConcurrentCalls(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	e := sb.StartExec(ctx, "for i in 1 2 3 4 5 6; do echo out$i; echo err$i >&2; sleep 0.3; done; exit 4")
	var out, errs strings.Builder
	others := 0
	for o := range e.C {
		switch o.Stream {
		case "stdout":
			out.WriteString(o.Data)
		case "stderr":
			errs.WriteString(o.Data)
		default:
			t.Fatalf("stream %q", o.Stream)
		}
		// While the command runs: an exec, a file method and a daemon call.
		if others < 2 && strings.Contains(out.String(), "out1") {
			others++
			if res := run(t, sb, "echo side"); res.Stdout != "side\n" {
				t.Fatalf("side exec: %+v", res)
			}
			if st, err := sb.Stat(ctx, "/root", true); err != nil || st.Type != "dir" {
				t.Fatalf("side stat: %+v %v", st, err)
			}
			if _, err := m.Status(ctx); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out.String(), "out6") {
				t.Fatal("the side calls waited for the streamed command")
			}
		}
	}
	res, err := e.Wait()
	if err != nil || res.ExitCode != 4 || res.Stdout != "" {
		t.Fatalf("result: %+v %v", res, err)
	}
	if out.String() != "out1\nout2\nout3\nout4\nout5\nout6\n" ||
		errs.String() != "err1\nerr2\nerr3\nerr4\nerr5\nerr6\n" || others != 2 {
		t.Fatalf("stdout %q stderr %q (%d side rounds)", out.String(), errs.String(), others)
	}

	// The callback form, with binary output and a timeout.
	var got []byte
	first := time.Time{}
	res, err = sb.ExecStream(ctx, "printf '\\377\\376'; sleep 0.5; echo late; sleep 5",
		func(o sandbox.OutputChunk) {
			if first.IsZero() {
				first = time.Now()
			}
			got = append(got, o.Data...)
		}, sandbox.WithTimeout(2*time.Second))
	if err != nil || !res.TimedOut || string(got) != "\xff\xfelate\n" || first.IsZero() {
		t.Fatalf("%+v %q %v", res, got, err)
	}

	// Cancelling the context ends a streamed command too.
	cctx, cancel := context.WithCancel(ctx)
	e = sb.StartExec(cctx, "echo go; sleep 30")
	<-e.C
	cancel()
	if _, err := e.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled stream: %v", err)
	}
}

func TestProcesses(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	p, err := sb.StartProcess(ctx, "read x; echo got-$x; cat >/dev/null; echo eof; echo $V >&2; sleep 60",
		sandbox.WithProcessStdin(), sandbox.WithProcessEnv(map[string]string{"V": "v1"}))
	if err != nil || !strings.HasPrefix(p.ID(), "pr-") || p.Info().State != "running" ||
		!p.Info().Stdin {
		t.Fatalf("start: %+v %v", p, err)
	}
	if n, err := p.Write(ctx, "hello\n", false); err != nil || n != 6 {
		t.Fatalf("write: %d %v", n, err)
	}
	off := readUntil(t, p, 0, "got-hello\n")
	if _, err := p.Write(ctx, "", true); err != nil {
		t.Fatalf("close: %v", err)
	}
	readUntil(t, p, off, "eof\n")
	list, err := sb.Processes(ctx)
	if err != nil || len(list) != 1 || list[0].ID != p.ID() || list[0].State != "running" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if st, err := p.Wait(ctx, 0); err != nil || st.State != "running" {
		t.Fatalf("wait 0: %+v %v", st, err)
	}
	st, err := p.Kill(ctx, "")
	if err != nil || st.State != "exited" || st.Signal == nil || *st.Signal != "SIGKILL" ||
		st.Sent == nil || *st.Sent != "SIGKILL" {
		t.Fatalf("kill: %+v %v", st, err)
	}
	if r, err := sb.Process(p.ID()).Read(ctx, "stderr", 0, 0, 0); err != nil ||
		!strings.HasPrefix(r.Data, "v1\n") || !r.EOF {
		t.Fatalf("stderr: %+v %v", r, err)
	}

	// Its own folder, and an exit status through Wait.
	q, err := sb.StartProcess(ctx, "sleep 0.3; pwd; exit 3", sandbox.WithProcessCwd("/tmp"))
	if err != nil {
		t.Fatal(err)
	}
	st, err = q.Wait(ctx, 20*time.Second)
	if err != nil || st.State != "exited" || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Fatalf("wait: %+v %v", st, err)
	}
	if r, err := q.Read(ctx, "", 0, 0, 0); err != nil || r.Data != "/tmp\n" || !r.EOF ||
		r.Size != 5 || r.NextOffset != 5 {
		t.Fatalf("read: %+v %v", r, err)
	}
	if _, err := q.Write(ctx, "x", false); !errors.Is(err, sandbox.ErrBadState) {
		t.Fatalf("write to an ended process: %v", err)
	}

	// A terminal.
	tp, err := sb.StartProcess(ctx, "stty size; tty", sandbox.WithPTY(100, 30))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Wait(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if r, err := tp.Read(ctx, "stdout", 0, 0, 0); err != nil ||
		!strings.HasPrefix(r.Data, "30 100\r\n/dev/pts/") {
		t.Fatalf("pty: %+v %v", r, err)
	}

	// A terminal resized while its program waits.
	rp, err := sb.StartProcess(ctx, "read -r x; stty size", sandbox.WithPTY(80, 24), sandbox.WithProcessStdin())
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Resize(ctx, 100, 30); err != nil {
		t.Fatal(err)
	}
	if _, err := rp.Write(ctx, "go\n", false); err != nil {
		t.Fatal(err)
	}
	if _, err := rp.Wait(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if r, err := rp.Read(ctx, "stdout", 0, 0, 0); err != nil || !strings.Contains(r.Data, "30 100") {
		t.Fatalf("resized pty: %+v %v", r, err)
	}

	_, err = sb.Process("pr-0000000000000000").Wait(ctx, 0)
	var e *sandbox.RPCError
	if !errors.As(err, &e) || e.Code != sandbox.CodeInvalidParams || e.Param() != "process" ||
		!errors.Is(err, sandbox.ErrInvalidParams) {
		t.Fatalf("unknown process: %v", err)
	}
}

// readUntil reads p's stdout from offset until it holds exactly want, and
// returns the offset after it.
func readUntil(t *testing.T, p *sandbox.Process, offset int64, want string) int64 {
	t.Helper()
	var out string
	for deadline := time.Now().Add(30 * time.Second); len(out) < len(want); {
		if time.Now().After(deadline) {
			t.Fatalf("stdout from %d: %q after 30 s, want %q", offset, out, want)
		}
		r, err := p.Read(context.Background(), "stdout", offset, 0, 5*time.Second)
		if err != nil || r.State != "running" {
			t.Fatalf("read: %+v %v", r, err)
		}
		out += r.Data
		offset = r.NextOffset
	}
	if out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
	return offset
}
