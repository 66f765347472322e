package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sandboxd/sandbox"
)

func sha(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// 20 MiB (past the 16 MiB request line) through passed descriptors, both ways,
// checked by checksum on either side.
func TestBigFileRoundTrip(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	data := randomBytes(t, 20<<20)
	t0 := time.Now()
	if err := sb.WriteFile(ctx, "/root/big/20m", string(data)); err != nil {
		t.Fatal(err)
	}
	t.Logf("WriteFile 20 MiB: %v", time.Since(t0))
	res := run(t, sb, "sha256sum /root/big/20m; stat -c %s /root/big/20m")
	if f := strings.Fields(res.Stdout); len(f) < 3 || f[0] != sha(data) || f[2] != "20971520" {
		t.Fatalf("in the sandbox: %q", res.Stdout)
	}
	t0 = time.Now()
	back, err := sb.ReadFile(ctx, "/root/big/20m")
	if err != nil || len(back) != len(data) || sha([]byte(back)) != sha(data) {
		t.Fatalf("ReadFile: %d bytes, %v", len(back), err)
	}
	t.Logf("ReadFile 20 MiB: %v", time.Since(t0))

	// Local files are passed as they are.
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, data[:5<<20], 0o600); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(src)
	defer f.Close()
	if n, err := sb.WriteFileFrom(ctx, "/root/big/5m", f); err != nil || n != 5<<20 {
		t.Fatalf("WriteFileFrom: %d %v", n, err)
	}
	out, _ := os.Create(filepath.Join(dir, "out"))
	defer out.Close()
	if n, err := sb.ReadFileTo(ctx, "/root/big/5m", out); err != nil || n != 5<<20 {
		t.Fatalf("ReadFileTo: %d %v", n, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "out")); !bytes.Equal(got, data[:5<<20]) {
		t.Fatal("ReadFileTo: the bytes differ")
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	_, err = sb.ReadFileTo(ctx, "/root/big/missing", io.Discard)
	var e *sandbox.RPCError
	if !errors.As(err, &e) || e.Errno() != "ENOENT" || !errors.Is(err, sandbox.ErrFile) {
		t.Fatalf("missing file: %v", err)
	}
}

// With every transfer slot of the caller taken (writes that wait for input on
// another sandbox), the daemon says Busy: WriteFile and ReadFile then go in
// pieces and still move 20 MiB intact.
func TestBigFileWithoutTransferSlot(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	holder := create(t, m)
	ctx := context.Background()
	var wg sync.WaitGroup
	var feeds []*io.PipeWriter
	for i := 0; i < 4; i++ {
		pr, pw := io.Pipe()
		feeds = append(feeds, pw)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := holder.WriteFileFrom(ctx, fmt.Sprintf("/root/hold%d", i), pr); err != nil {
				t.Errorf("holder %d: %v", i, err)
			}
		}(i)
	}
	release := func() {
		for _, pw := range feeds {
			pw.Close()
		}
		feeds = nil
		wg.Wait()
	}
	defer release()
	time.Sleep(1500 * time.Millisecond) // the holders reach the daemon first
	busy := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		_, err := sb.WriteFileFrom(ctx, "/root/probe", strings.NewReader("x"))
		if errors.Is(err, sandbox.ErrBusy) {
			busy = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !busy {
		t.Fatal("the transfer slots were never all taken")
	}
	data := randomBytes(t, 20<<20)
	if err := sb.WriteFile(ctx, "/root/busy/20m", string(data)); err != nil {
		t.Fatal(err)
	}
	back, err := sb.ReadFile(ctx, "/root/busy/20m")
	if err != nil || sha([]byte(back)) != sha(data) {
		t.Fatalf("ReadFile: %d bytes, %v", len(back), err)
	}
	res := run(t, sb, "sha256sum /root/busy/20m; ls -A /root/busy")
	if f := strings.Fields(res.Stdout); len(f) != 3 || f[0] != sha(data) || f[2] != "20m" {
		t.Fatalf("in the sandbox (no temporary file left): %q", res.Stdout)
	}
	release()
	if s, err := holder.ReadFile(ctx, "/root/hold0"); err != nil || s != "" {
		t.Fatalf("holder's file: %q %v", s, err)
	}
}

type node struct {
	mode   fs.FileMode
	data   string
	target string
}

func walk(t *testing.T, root string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		n := node{mode: fi.Mode()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			n.target, err = os.Readlink(p)
		case fi.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			n.data = string(b)
		}
		out[rel] = n
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A tree with a symbolic link, modes 0640/0755/0700 and empty folders goes up
// and comes back the same.
func TestUploadDownloadDir(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	local := filepath.Join(t.TempDir(), "tree")
	mk := func(p string, mode fs.FileMode, data string) {
		full := filepath.Join(local, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if mode.IsDir() {
			if err := os.Mkdir(full, 0o755); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(full, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode.Perm()); err != nil {
			t.Fatal(err)
		}
	}
	mk("a/notes.txt", 0o640, "notes\n")
	mk("a/run.sh", 0o755, "#!/bin/sh\necho run\n")
	mk("private", fs.ModeDir|0o700, "")
	mk("private/key", 0o600, "\x00\xffkey")
	mk("empty", fs.ModeDir|0o755, "")
	mk("deep/er/est", fs.ModeDir|0o755, "")
	if err := os.Symlink("a/notes.txt", filepath.Join(local, "link")); err != nil {
		t.Fatal(err)
	}
	if err := sb.UploadDir(ctx, local, "/root/up/tree"); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a/notes.txt": "0640", "a/run.sh": "0755",
		"private": "0700", "empty": "0755", "deep/er/est": "0755"} {
		if st, err := sb.Stat(ctx, "/root/up/tree/"+p, false); err != nil || st.Mode != want {
			t.Fatalf("%s: %+v %v", p, st, err)
		}
	}
	if st, err := sb.Stat(ctx, "/root/up/tree/link", false); err != nil || st.Type != "symlink" ||
		st.Target != "a/notes.txt" {
		t.Fatalf("link: %+v %v", st, err)
	}
	if res := run(t, sb, "/root/up/tree/a/run.sh"); res.Stdout != "run\n" {
		t.Fatalf("run.sh: %+v", res)
	}
	back := filepath.Join(t.TempDir(), "back")
	if err := sb.DownloadDir(ctx, "/root/up/tree", back); err != nil {
		t.Fatal(err)
	}
	want, got := walk(t, local), walk(t, back)
	if len(want) != len(got) {
		t.Fatalf("entries: want %v, got %v", want, got)
	}
	for p, n := range want {
		if got[p] != n {
			t.Fatalf("%s: want %+v, got %+v", p, n, got[p])
		}
	}

	// Errors name their subject.
	err := sb.DownloadDir(ctx, "/root/no/such", filepath.Join(t.TempDir(), "x"))
	var e *sandbox.RPCError
	if !errors.As(err, &e) || e.Code != sandbox.CodeFileError || e.Path() != "/root/no/such" {
		t.Fatalf("missing remote folder: %v", err)
	}
	if err := sb.UploadDir(ctx, filepath.Join(local, "a/run.sh"), "/root/x"); err == nil ||
		!strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("upload of a file: %v", err)
	}
}

// Commands and processes read and write local descriptors directly.
func TestExecAndProcessDescriptors(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	data := randomBytes(t, 3<<20)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		pw.Write(data)
		pw.Close()
	}()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	res, err := sb.Exec(ctx, "sha256sum; head -c 2000000 /dev/zero >&2",
		sandbox.WithStdinFile(pr), sandbox.WithStderrFile(out))
	pr.Close()
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, sha(data)) || res.Stderr != "" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if st, _ := out.Stat(); st.Size() != 2000000 {
		t.Fatalf("stderr file: %d bytes", st.Size())
	}

	pr, pw, err = os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	p, err := sb.StartProcess(ctx, "echo a; sleep 0.3; echo b", sandbox.WithProcessStdoutFile(pw))
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { pr.Close() }) // no hang if it never ends
	defer timer.Stop()
	got, err := io.ReadAll(pr) // ends when the process ended and the daemon closed its copy
	if err != nil || string(got) != "a\nb\n" {
		t.Fatalf("process stdout: %q %v", got, err)
	}
	if st, err := p.Wait(ctx, 10*time.Second); err != nil || st.State != "exited" {
		t.Fatalf("wait: %+v %v", st, err)
	}
}
