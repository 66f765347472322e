package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// treeTimeoutMs is a tree transfer's exec timeout when the context has no
// deadline: the longest the daemon allows (a day).
const treeTimeoutMs = 24 * 3600 * 1000

// UploadDir copies the folder local into the folder remote (made when
// missing), as `sandboxctl put -r` does: a local tar writes the tree into a
// pipe passed to the daemon as the stdin of a tar in the sandbox (sandbox.exec
// with stdin_fd), keeping symbolic links, modes and empty folders.
func (s *Sandbox) UploadDir(ctx context.Context, local, remote string) error {
	if st, err := os.Stat(local); err != nil {
		return fmt.Errorf("sandbox: upload: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("sandbox: upload: %s: not a folder", local)
	}
	return s.tree(ctx, []string{"-C", local, "-cf", "-", "."},
		`mkdir -p "$1" && exec tar -C "$1" -xpf -`, remote, true)
}

// DownloadDir copies the folder remote into the folder local (made when
// missing), as `sandboxctl get -r` does (the reverse of UploadDir).
func (s *Sandbox) DownloadDir(ctx context.Context, remote, local string) error {
	if err := os.MkdirAll(local, 0o755); err != nil {
		return fmt.Errorf("sandbox: download: %w", err)
	}
	return s.tree(ctx, []string{"-C", local, "-xpf", "-"}, `exec tar -C "$1" -cf - .`, remote,
		false)
}

// tree runs a local tar with args and script in the sandbox on the two ends of
// a pipe (up: the local tar feeds the remote one).
func (s *Sandbox) tree(ctx context.Context, args []string, script, remote string, up bool) error {
	ctx, cancel := s.m.withDefaultTimeout(ctx)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	tar := exec.Command("tar", args...)
	var stderr bytes.Buffer
	tar.Stderr = &stderr
	mine, theirs, fdParam := pw, pr, "stdout_fd"
	if up {
		mine, theirs, fdParam = pr, pw, "stdin_fd"
		tar.Stdout = theirs
	} else {
		tar.Stdin = theirs
	}
	if err := tar.Start(); err != nil {
		pr.Close()
		pw.Close()
		return fmt.Errorf("sandbox: local tar: %w", err)
	}
	theirs.Close() // tar holds it now
	// as root, as file writes are, whatever the template's default user
	params := map[string]any{"id": s.ID(), "argv": []string{"sh", "-c", script, "sh", remote},
		"timeout_ms": int64(treeTimeoutMs), fdParam: 0, "user": "0"}
	if dl, ok := ctx.Deadline(); ok {
		params["timeout_ms"] = msCeil(time.Until(dl))
	}
	res, err := s.exec(ctx, params, callOpts{files: []*os.File{mine}})
	if err != nil {
		tar.Process.Kill()
	}
	werr := tar.Wait()
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || res.TimedOut {
		why := res.Signal
		if why == "" {
			why = fmt.Sprintf("exit %d", res.ExitCode)
		}
		if res.TimedOut {
			why = "timed out"
		}
		return fmt.Errorf("sandbox: %s: %w", methodExec, &RPCError{Code: CodeFileError,
			Message: "File error", Data: map[string]any{"path": remote,
				"reason": fmt.Sprintf("tar in the sandbox failed (%s): %s", why,
					strings.TrimSpace(res.Stderr))}})
	}
	if werr != nil {
		return fmt.Errorf("sandbox: local tar for %s failed: %w: %s", args[1], werr,
			strings.TrimSpace(stderr.String()))
	}
	return nil
}
