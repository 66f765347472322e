package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeDaemon serves one scripted reply per connection: reply gets the request
// and writes what it wants on the connection.
func fakeDaemon(t *testing.T, reply func(c net.Conn, req map[string]any)) *Manager {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbx-go-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadBytes('\n')
				if err != nil {
					return
				}
				var req map[string]any
				if json.Unmarshal(line, &req) != nil {
					return
				}
				reply(c, req)
			}()
		}
	}()
	m, err := NewManager(Config{Socket: path})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNotificationsAreSkipped(t *testing.T) {
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) {
		c.Write([]byte(`{"jsonrpc":"2.0","method":"exec.output","params":{"request_id":1,"stream":"stdout","data":"x"}}` + "\n"))
		c.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":{"wrong":"id"}}` + "\n"))
		c.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"version":"9"}}` + "\n"))
	})
	st, err := m.Status(context.Background())
	if err != nil || st["version"] != "9" {
		t.Fatalf("status: %v %v", st, err)
	}
}

func TestErrorWithNullIDIsTheCallsError(t *testing.T) {
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) {
		c.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":{"reason":"line too long"}}}` + "\n"))
	})
	_, err := m.Status(context.Background())
	var e *RPCError
	if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Data["reason"] != "line too long" {
		t.Fatalf("want -32600, got %v", err)
	}
	if !IsCode(err, CodeInvalidRequest) || !strings.Contains(err.Error(), "line too long") {
		t.Fatalf("error text: %v", err)
	}
}

func TestConnectionLost(t *testing.T) {
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) {})
	_, err := m.Status(context.Background())
	if !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("want ErrConnectionLost, got %v", err)
	}
}

func TestNotJSONRPC(t *testing.T) {
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) { c.Write([]byte("hello\n")) })
	if _, err := m.Status(context.Background()); err == nil ||
		!strings.Contains(err.Error(), "not JSON-RPC") {
		t.Fatalf("got %v", err)
	}
}

func TestErrorDataNotAnObject(t *testing.T) {
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) {
		c.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":"text"}}` + "\n"))
	})
	_, err := m.Status(context.Background())
	var e *RPCError
	if !errors.As(err, &e) || e.Code != CodeInternalError || e.Data["value"] != "text" {
		t.Fatalf("got %#v", err)
	}
}

// Cancelling the context closes the connection: the daemon sees it go.
func TestCancelClosesTheConnection(t *testing.T) {
	closed := make(chan struct{})
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) {
		buf := make([]byte, 1)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(buf); err != nil {
			close(closed)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := m.Status(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 5*time.Second {
		t.Fatalf("got %v after %v", err, time.Since(t0))
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not see the connection close")
	}
	cancelled, stop := context.WithCancel(context.Background())
	stop()
	if _, err := m.Status(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("already cancelled: got %v", err)
	}
}

// The request on the wire: JSON-RPC 2.0, the method names and the data spellings.
func TestRequests(t *testing.T) {
	got := make(chan map[string]any, 16)
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) {
		got <- req
		var result string
		switch req["method"] {
		case methodCreate, methodGet, methodSetInternet, methodRenew:
			result = `{"id":"sb-1","ip":"10.0.0.2","state":"ready","created_at":"2026-01-02T03:04:05Z","expires_at":"2026-01-02T04:04:05Z"}`
		case methodExec:
			result = `{"exit_code":null,"signal":"SIGKILL","timed_out":false,"stdout":"a","stderr_b64":"/w==","duration_ms":5}`
		case methodDiscover:
			result = `{"x-limits":{"timeout_ms_max":1000,"data_max_bytes":4}}`
		case methodFileWrite:
			if _, ok := req["params"].(map[string]any)["content_fd"]; ok {
				c.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32007,"message":"Busy","data":{"reason":"no transfer slot free"}}}` + "\n"))
				return
			}
			result = `{"bytes":1}`
		default:
			result = `{}`
		}
		c.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":` + result + "}\n"))
	})
	ctx := context.Background()
	sb, err := m.Create(ctx, WithHostname("h"), WithInternet(true), WithCores(2), WithMemory(256),
		WithDisk(4), WithTTL(1500*time.Millisecond), WithLabels(map[string]string{"a": "b"}),
		WithIdempotencyKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	req := <-got
	p := req["params"].(map[string]any)
	if req["jsonrpc"] != "2.0" || req["method"] != "sandbox.create" || p["hostname"] != "h" ||
		p["internet"] != true || p["cores"] != 2.0 || p["memory_mb"] != 256.0 || p["disk_gb"] != 4.0 ||
		p["ttl_s"] != 2.0 || p["labels"].(map[string]any)["a"] != "b" || p["idempotency_key"] != "k" {
		t.Fatalf("create request: %v", req)
	}
	if sb.ID() != "sb-1" || sb.IP() != "10.0.0.2" || sb.Info().ExpiresAt.Sub(sb.Info().CreatedAt) != time.Hour {
		t.Fatalf("info: %+v", sb.Info())
	}
	dl, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	res, err := sb.Exec(dl, "x", WithEnv(map[string]string{"A": "1"}), WithCwd("/tmp"), WithUser("ann"),
		WithStdin("\xff"), WithMaxOutput(10))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != -1 || res.Signal != "SIGKILL" || res.Stdout != "a" || res.Stderr != "\xff" ||
		res.Output != "a\xff" || res.Duration != 5*time.Millisecond {
		t.Fatalf("exec result: %+v", res)
	}
	<-got // rpc.discover, for the timeout cap
	req = <-got
	p = req["params"].(map[string]any)
	if p["command"] != "x" || p["stdin_b64"] != "/w==" || p["cwd"] != "/tmp" || p["user"] != "ann" ||
		p["timeout_ms"] != 1000.0 || p["max_output_bytes"] != 10.0 {
		t.Fatalf("exec request (timeout capped by x-limits): %v", req)
	}
	if _, err := sb.Exec(ctx, "y", WithTimeout(1500*time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	if p = (<-got)["params"].(map[string]any); p["timeout_ms"] != 2.0 {
		t.Fatalf("timeout: %v", p)
	}
	// Over data_max_bytes: through a descriptor, and when the daemon is busy,
	// in pieces into a temporary file renamed at the end.
	if err := sb.WriteFile(ctx, "/d/f", "12345"); err != nil {
		t.Fatalf("over data_max_bytes: %v", err)
	}
	if p = (<-got)["params"].(map[string]any); p["content_fd"] != 0.0 || p["content"] != nil {
		t.Fatalf("write through a descriptor: %v", p)
	}
	p = (<-got)["params"].(map[string]any)
	tmp, _ := p["path"].(string)
	if !strings.HasPrefix(tmp, "/d/.f.sandboxd-go-") || p["content"] != "1234" || p["offset"] != nil {
		t.Fatalf("first piece: %v", p)
	}
	if p = (<-got)["params"].(map[string]any); p["path"] != tmp || p["content"] != "5" ||
		p["offset"] != 4.0 {
		t.Fatalf("second piece: %v", p)
	}
	if p = (<-got)["params"].(map[string]any); p["from"] != tmp || p["to"] != "/d/f" {
		t.Fatalf("rename: %v", p)
	}
	if err := sb.WriteFile(ctx, "/f", "\x00\xfe"); err != nil {
		t.Fatal(err)
	}
	if p = (<-got)["params"].(map[string]any); p["content_b64"] != "AP4=" || p["path"] != "/f" {
		t.Fatalf("write request: %v", p)
	}
}

func TestNewManager(t *testing.T) {
	t.Setenv("SANDBOXD_SOCKET", "/run/x.sock")
	m, err := NewManager(Config{})
	if err != nil || m.Socket() != "/run/x.sock" {
		t.Fatalf("%v %v", m, err)
	}
	t.Setenv("SANDBOXD_SOCKET", "")
	if m, _ = NewManager(Config{}); m.Socket() != DefaultSocket {
		t.Fatal(m.Socket())
	}
	if _, err := NewManager(Config{Socket: "/" + strings.Repeat("x", 200)}); err == nil {
		t.Fatal("long path accepted")
	}
}

// sandbox.create's env is sent only when set.
func TestCreateEnv(t *testing.T) {
	got := make(chan map[string]any, 4)
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) {
		got <- req["params"].(map[string]any)
		c.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"id":"sb-1","state":"ready"}}` + "\n"))
	})
	ctx := context.Background()
	if _, err := m.Create(ctx, WithSandboxEnv(map[string]string{"TOKEN": "s3cret"})); err != nil {
		t.Fatal(err)
	}
	if env, _ := (<-got)["env"].(map[string]any); env["TOKEN"] != "s3cret" {
		t.Fatalf("env not sent")
	}
	if _, err := m.Create(ctx, WithSandboxEnv(nil), WithHostname("h")); err != nil {
		t.Fatal(err)
	}
	if p := <-got; p["env"] != nil || p["hostname"] != "h" {
		t.Fatalf("env sent unset: %v", p)
	}
}

// Errors are typed: errors.As gives the RPCError with its code, message and
// data; errors.Is matches the sentinel of its code.
func TestTypedErrors(t *testing.T) {
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) {
		c.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32009,"message":"File error","data":{"reason":"no such file","errno":"ENOENT","path":"/x","param":"path"}}}` + "\n"))
	})
	_, err := m.Status(context.Background())
	var e *RPCError
	if !errors.As(err, &e) || e.Code != CodeFileError || e.Message != "File error" ||
		e.Reason() != "no such file" || e.Errno() != "ENOENT" || e.Path() != "/x" ||
		e.Param() != "path" {
		t.Fatalf("got %#v", err)
	}
	if !errors.Is(err, ErrFile) || errors.Is(err, ErrBusy) || errors.Is(err, ErrConnectionLost) {
		t.Fatalf("errors.Is: %v", err)
	}
	// The text names the subject when the reason does not.
	want := "sandboxd: File error (-32009): no such file (param path) (path /x)"
	if !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("text: %q", err.Error())
	}
	e = &RPCError{Code: CodeInvalidParams, Message: "Invalid params",
		Data: map[string]any{"param": "ttl_s", "reason": "ttl_s: must be 1..3600"}}
	if e.Error() != "sandboxd: Invalid params (-32602): ttl_s: must be 1..3600" {
		t.Fatalf("text: %q", e.Error())
	}
}

// A streamed exec hands each exec.output to the callback, in order, text or base64.
func TestExecStreamNotifications(t *testing.T) {
	got := make(chan map[string]any, 1)
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) {
		got <- req["params"].(map[string]any)
		c.Write([]byte(`{"jsonrpc":"2.0","method":"exec.output","params":{"request_id":1,"stream":"stdout","data":"a"}}` + "\n"))
		c.Write([]byte(`{"jsonrpc":"2.0","method":"exec.output","params":{"request_id":1,"stream":"stderr","data_b64":"/w=="}}` + "\n"))
		c.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"exit_code":3,"signal":null,"timed_out":false,"duration_ms":1}}` + "\n"))
	})
	sb := &Sandbox{m: m, info: Info{ID: "sb-1"}}
	var chunks []OutputChunk
	res, err := sb.ExecStream(context.Background(), "x", func(o OutputChunk) { chunks = append(chunks, o) })
	if err != nil || res.ExitCode != 3 || len(chunks) != 2 || chunks[0] != (OutputChunk{"stdout", "a"}) ||
		chunks[1] != (OutputChunk{"stderr", "\xff"}) {
		t.Fatalf("%+v %v %v", res, chunks, err)
	}
	if p := <-got; p["stream"] != true || p["command"] != "x" {
		t.Fatalf("request: %v", p)
	}
}

// Descriptor options become indexes in params; the files themselves never
// reach the JSON.
func TestDescriptorParams(t *testing.T) {
	got := make(chan map[string]any, 2)
	m := fakeDaemon(t, func(c net.Conn, req map[string]any) {
		got <- req["params"].(map[string]any)
		c.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"exit_code":0,"process":"pr-1","state":"running"}}` + "\n"))
	})
	sb := &Sandbox{m: m, info: Info{ID: "sb-1"}}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	if _, err := sb.Exec(ctx, "x", WithStderrFile(f), WithStdinFile(f)); err != nil {
		t.Fatal(err)
	}
	if p := <-got; p["stdin_fd"] != 0.0 || p["stderr_fd"] != 1.0 || p["stdout_fd"] != nil ||
		len(p) != 4 {
		t.Fatalf("exec params: %v", p)
	}
	if _, err := sb.StartProcess(ctx, "x", WithProcessStdoutFile(f)); err != nil {
		t.Fatal(err)
	}
	if p := <-got; p["stdout_fd"] != 0.0 || len(p) != 3 {
		t.Fatalf("process params: %v", p)
	}
	if _, err := f.Stat(); err != nil {
		t.Fatalf("the caller's file was closed: %v", err)
	}
}
