package sandbox_test

// These tests need a running sandboxd (tests/clients/test_go.py starts one
// against the Proxmox simulator and sets SANDBOXD_SOCKET); without
// SANDBOXD_SOCKET they are skipped, and that harness fails on any skip.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sandboxd/sandbox"
)

func manager(t *testing.T) *sandbox.Manager {
	t.Helper()
	if os.Getenv("SANDBOXD_SOCKET") == "" {
		t.Skip("SANDBOXD_SOCKET is not set: no sandboxd to test against")
	}
	m, err := sandbox.NewManager(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func create(t *testing.T, m *sandbox.Manager, opts ...sandbox.Option) *sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := m.Create(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	return sb
}

func run(t *testing.T, sb *sandbox.Sandbox, cmd string, opts ...sandbox.ExecOption) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), cmd, opts...)
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return res
}

func TestCreateGetList(t *testing.T) {
	m := manager(t)
	ctx := context.Background()
	label := fmt.Sprintf("go-%d", time.Now().UnixNano())
	sb := create(t, m, sandbox.WithHostname("user-abc"), sandbox.WithInternet(true),
		sandbox.WithCores(1), sandbox.WithMemory(256), sandbox.WithDisk(10),
		sandbox.WithTTL(10*time.Minute), sandbox.WithLabels(map[string]string{"run": label}))
	info := sb.Info()
	if !strings.HasPrefix(sb.ID(), "sb-") || sb.IP() == "" || info.State != "ready" ||
		info.Hostname != "user-abc" || !info.Internet || info.Cores != 1 || info.MemoryMB != 256 ||
		info.DiskGB != 10 || info.Labels["run"] != label {
		t.Fatalf("info: %+v", info)
	}
	if ttl := info.ExpiresAt.Sub(info.CreatedAt); ttl < 599*time.Second || ttl > 601*time.Second {
		t.Fatalf("ttl %v", ttl)
	}
	got, err := m.Get(ctx, sb.ID())
	if err != nil || got.ID() != sb.ID() || got.IP() != sb.IP() {
		t.Fatalf("get: %v %v", got, err)
	}
	list, err := m.List(ctx, map[string]string{"run": label})
	if err != nil || len(list) != 1 || list[0].ID() != sb.ID() {
		t.Fatalf("list: %v %v", list, err)
	}
	if all, err := m.List(ctx, nil); err != nil || len(all) < 1 {
		t.Fatalf("list all: %v %v", all, err)
	}
	if err := sb.Renew(ctx, 20*time.Minute); err != nil ||
		sb.Info().ExpiresAt.Sub(time.Now()) < 19*time.Minute {
		t.Fatalf("renew: %v %+v", err, sb.Info())
	}
	if err := sb.Resize(ctx, 0, 320, 0); err != nil || sb.Info().MemoryMB != 320 ||
		sb.Info().Template != "default" {
		t.Fatalf("resize: %v %+v", err, sb.Info())
	}
	if err := sb.Refresh(ctx); err != nil || sb.Info().State != "ready" {
		t.Fatalf("refresh: %v", err)
	}
	if st, err := m.Status(ctx); err != nil || st["version"] == nil {
		t.Fatalf("status: %v %v", st, err)
	}
	var doc map[string]any
	if err := m.Call(ctx, "rpc.discover", nil, &doc); err != nil || doc["openrpc"] == nil {
		t.Fatalf("call: %v", err)
	}
}

func TestExec(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	res := run(t, sb, "echo out; echo err >&2; exit 3")
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" ||
		res.Output != "out\nerr\n" || res.Signal != "" || res.TimedOut {
		t.Fatalf("%+v", res)
	}
	res = run(t, sb, "pwd; echo $A; cat", sandbox.WithCwd("/tmp"),
		sandbox.WithEnv(map[string]string{"A": "b c"}), sandbox.WithStdin("in\xff"))
	if res.Stdout != "/tmp\nb c\nin\xff" {
		t.Fatalf("%q", res.Stdout)
	}
	if res = run(t, sb, "kill -9 $$"); res.ExitCode != -1 || res.Signal != "SIGKILL" {
		t.Fatalf("%+v", res)
	}
	if res = run(t, sb, "sleep 5", sandbox.WithTimeout(300*time.Millisecond)); !res.TimedOut {
		t.Fatalf("%+v", res)
	}
	res = run(t, sb, "head -c 3000 /dev/zero | tr '\\0' x", sandbox.WithMaxOutput(100))
	if res.Stdout != strings.Repeat("x", 100) || !res.StdoutTruncated || res.Duration <= 0 {
		t.Fatalf("%+v", res)
	}
	// A context deadline becomes the command's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	res, err := sb.Exec(ctx, "sleep 0.2; echo ok")
	if err != nil || res.Stdout != "ok\n" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestFiles(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "/var/www/html/index.html", "<h1>Hello</h1>"); err != nil {
		t.Fatal(err)
	}
	if s, err := sb.ReadFile(ctx, "/var/www/html/index.html"); err != nil || s != "<h1>Hello</h1>" {
		t.Fatalf("%q %v", s, err)
	}
	bin := string([]byte{0, 1, 0xff, 0xfe, '\n'})
	if err := sb.WriteFile(ctx, "/root/bin", bin); err != nil {
		t.Fatal(err)
	}
	if s, err := sb.ReadFile(ctx, "/root/bin"); err != nil || s != bin {
		t.Fatalf("%q %v", s, err)
	}
	// Larger than one file.read: ReadFile reads on to the end.
	res := run(t, sb, "head -c 9000000 /dev/urandom > /root/big; sha256sum /root/big")
	big, err := sb.ReadFile(ctx, "/root/big")
	if err != nil || len(big) != 9000000 ||
		fmt.Sprintf("%x", sha256.Sum256([]byte(big))) != strings.Fields(res.Stdout)[0] {
		t.Fatalf("big file: %d bytes, %v", len(big), err)
	}
	_, err = sb.ReadFile(ctx, "/no/such/file")
	var e *sandbox.RPCError
	if !errors.As(err, &e) || e.Code != sandbox.CodeFileError || e.Data["errno"] != "ENOENT" {
		t.Fatalf("missing file: %v", err)
	}
}

func TestFileSystem(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	if made, err := sb.Mkdir(ctx, "/root/fs/a/b", true, 0); err != nil || !made {
		t.Fatalf("mkdir -p: %v %v", made, err)
	}
	if made, err := sb.Mkdir(ctx, "/root/fs/a/b", true, 0); err != nil || made {
		t.Fatalf("mkdir -p again: %v %v", made, err)
	}
	if _, err := sb.Mkdir(ctx, "/root/fs/m", false, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "/root/fs/a/f", "abc"); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFileAt(ctx, "/root/fs/a/f", "Z", 1); err != nil {
		t.Fatal(err)
	}
	if err := sb.AppendFile(ctx, "/root/fs/a/f", "\xff"); err != nil {
		t.Fatal(err)
	}
	if s, err := sb.ReadFile(ctx, "/root/fs/a/f"); err != nil || s != "aZc\xff" {
		t.Fatalf("%q %v", s, err)
	}
	run(t, sb, "ln -s f /root/fs/a/l")
	l, err := sb.List(ctx, "/root/fs/a", 0)
	if err != nil || l.Truncated || len(l.Entries) != 3 || l.Entries[0].Name != "b" ||
		l.Entries[0].Type != "dir" || l.Entries[1].Size != 4 || l.Entries[2].Type != "symlink" {
		t.Fatalf("%+v %v", l, err)
	}
	if l, err = sb.List(ctx, "/root/fs/a", 2); err != nil || !l.Truncated || len(l.Entries) != 2 {
		t.Fatalf("limit: %+v %v", l, err)
	}
	if st, err := sb.Stat(ctx, "/root/fs/a/l", false); err != nil || st.Target != "f" {
		t.Fatalf("%+v %v", st, err)
	}
	if st, err := sb.Stat(ctx, "/root/fs/m", true); err != nil || st.Mode != "0700" || st.Type != "dir" {
		t.Fatalf("%+v %v", st, err)
	}
	if err := sb.Rename(ctx, "/root/fs/a/f", "/root/fs/g"); err != nil {
		t.Fatal(err)
	}
	_, err = sb.Remove(ctx, "/root/fs/a", false)
	var e *sandbox.RPCError
	if !errors.As(err, &e) || e.Code != sandbox.CodeFileError || e.Data["errno"] != "ENOTEMPTY" {
		t.Fatalf("not empty: %v", err)
	}
	if n, err := sb.Remove(ctx, "/root/fs", true); err != nil || n != 6 {
		t.Fatalf("remove -r: %d %v", n, err)
	}
}

func TestSetInternet(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	if err := sb.SetInternet(ctx, true); err != nil || !sb.Info().Internet {
		t.Fatalf("on: %v", err)
	}
	if err := sb.SetInternet(ctx, false); err != nil || sb.Info().Internet {
		t.Fatalf("off: %v", err)
	}
}

// Cancelling the context ends the call at once, and the daemon kills the command.
func TestCancel(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := sb.Exec(ctx, "sleep 2; touch /root/flag")
	if !errors.Is(err, context.Canceled) || time.Since(t0) > 1500*time.Millisecond {
		t.Fatalf("got %v after %v", err, time.Since(t0))
	}
	time.Sleep(2500 * time.Millisecond)
	if res := run(t, sb, "test -e /root/flag"); res.ExitCode == 0 {
		t.Fatal("the cancelled command ran on")
	}
}

func TestErrors(t *testing.T) {
	m := manager(t)
	ctx := context.Background()
	_, err := m.Get(ctx, "sb-nosuchthing")
	var e *sandbox.RPCError
	if !errors.As(err, &e) || e.Code != sandbox.CodeNoSuchSandbox || e.Message == "" ||
		e.Data["reason"] == nil {
		t.Fatalf("get: %v", err)
	}
	_, err = m.Create(ctx, sandbox.WithCores(0))
	if !errors.As(err, &e) || e.Code != sandbox.CodeInvalidParams || e.Data["param"] != "cores" {
		t.Fatalf("create: %v", err)
	}
	if err := m.Call(ctx, "no.such.method", nil, nil); !sandbox.IsCode(err, sandbox.CodeMethodNotFound) {
		t.Fatalf("call: %v", err)
	}
	bad, _ := sandbox.NewManager(sandbox.Config{Socket: "/run/sandboxd-nonexistent.sock"})
	_, err = bad.Create(ctx)
	if !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("unreachable: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := sb.Exec(context.Background(), fmt.Sprintf("echo %d", i))
			if err == nil && res.Stdout != fmt.Sprintf("%d\n", i) {
				err = fmt.Errorf("exec %d: %q", i, res.Stdout)
			}
			if err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDestroy(t *testing.T) {
	m := manager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Destroy(ctx); err != nil || sb.Info().State != "destroyed" {
		t.Fatalf("destroy: %v", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("destroy again: %v", err)
	}
	_, err = sb.Exec(ctx, "true")
	if !sandbox.IsCode(err, sandbox.CodeNoSuchSandbox) && !sandbox.IsCode(err, sandbox.CodeBadState) {
		t.Fatalf("exec after destroy: %v", err)
	}
	nw, err := m.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := nw.DestroyNoWait(ctx); err != nil || nw.Info().State != "destroying" {
		t.Fatalf("destroy without waiting: %v, state %q", err, nw.Info().State)
	}
	if err := nw.Destroy(ctx); err != nil || nw.Info().State != "destroyed" {
		t.Fatalf("destroy after destroy without waiting: %v", err)
	}
}
