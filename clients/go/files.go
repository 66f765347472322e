package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// inlineMax: content up to this size travels in the request line (file.write's
// content); larger content goes through a passed descriptor.
const inlineMax = 1 << 20

// chunkMax is the size of one file.write when a file goes in pieces (no
// transfer slot was free): its line stays well within the daemon's 16 MiB.
const chunkMax = 4 << 20

// WriteFile replaces the file at path (absolute) with content, atomically,
// creating missing parent folders. content may hold any bytes and be of any
// size: past 1 MiB it goes through a pipe passed to the daemon (file.write
// with content_fd); when the daemon has no transfer slot free (Busy) it goes
// in pieces into a temporary file next to path, renamed over path at the end.
func (s *Sandbox) WriteFile(ctx context.Context, path, content string) error {
	max := int64(inlineMax)
	if l := s.m.limit(ctx, limitDataMaxBytes); l > 0 && l < max {
		max = l
	}
	if int64(len(content)) <= max {
		params := map[string]any{"id": s.ID(), "path": path}
		putData(params, "content", content)
		return s.m.call(ctx, methodFileWrite, params, nil)
	}
	_, err := s.WriteFileFrom(ctx, path, strings.NewReader(content))
	if errors.Is(err, ErrBusy) {
		return s.writeChunks(ctx, path, content, max)
	}
	return err
}

// writeChunks writes content into a temporary file next to path in pieces of
// at most max bytes, then renames it over path; on failure it removes it.
func (s *Sandbox) writeChunks(ctx context.Context, target, content string, max int64) error {
	if max > chunkMax {
		max = chunkMax
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := path.Join(path.Dir(target), "."+path.Base(target)+".sandboxd-go-"+hex.EncodeToString(rnd[:]))
	for off := int64(0); off == 0 || off < int64(len(content)); off += max {
		end := off + max
		if end > int64(len(content)) {
			end = int64(len(content))
		}
		var err error
		if off == 0 {
			err = s.writeInline(ctx, tmp, content[:end], -1)
		} else {
			err = s.writeInline(ctx, tmp, content[off:end], off)
		}
		if err != nil {
			_, _ = s.Remove(context.Background(), tmp, false)
			return err
		}
	}
	if err := s.Rename(ctx, tmp, target); err != nil {
		_, _ = s.Remove(context.Background(), tmp, false)
		return err
	}
	return nil
}

func (s *Sandbox) writeInline(ctx context.Context, path, content string, offset int64) error {
	params := map[string]any{"id": s.ID(), "path": path}
	if offset >= 0 {
		params["offset"] = offset
	}
	putData(params, "content", content)
	return s.m.call(ctx, methodFileWrite, params, nil)
}

// WriteFileFrom replaces the file at path with everything r yields, through a
// descriptor passed to the daemon (file.write with content_fd): no size limit,
// nothing held in memory. An *os.File is passed as it is (read from its
// current position to its end); any other reader is copied into a pipe. The
// file is replaced only once r ended; it returns the bytes written. When the
// daemon has no transfer slot free the error wraps ErrBusy and the file is
// left as it was (part of r, at most what a pipe holds, may have been read).
func (s *Sandbox) WriteFileFrom(ctx context.Context, path string, r io.Reader) (int64, error) {
	params := map[string]any{"id": s.ID(), "path": path, "content_fd": 0}
	var res struct {
		Bytes int64 `json:"bytes"`
	}
	if f, ok := r.(*os.File); ok {
		dup, err := dupFile(f)
		if err != nil {
			return 0, err
		}
		err = s.m.callWith(ctx, methodFileWrite, params, &res, callOpts{files: []*os.File{dup}})
		return res.Bytes, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(pw, r)
		pw.Close()
		copied <- err
	}()
	err = s.m.callWith(ctx, methodFileWrite, params, &res, callOpts{files: []*os.File{pr}})
	if err != nil {
		pw.Close() // ends the copy (a reader that blocks keeps its goroutine until it returns)
		return 0, err
	}
	if cerr := <-copied; cerr != nil {
		return res.Bytes, fmt.Errorf("sandbox: %s: reading the content: %w", methodFileWrite, cerr)
	}
	return res.Bytes, nil
}

// ReadFile returns the whole file at path (absolute), whatever its bytes and
// size. The bytes come through a pipe passed to the daemon (file.read with
// to_fd); when the daemon has no transfer slot free (Busy) the file is read in
// file.read pieces instead.
func (s *Sandbox) ReadFile(ctx context.Context, path string) (string, error) {
	var buf bytes.Buffer
	_, err := s.ReadFileTo(ctx, path, &buf)
	if errors.Is(err, ErrBusy) && buf.Len() == 0 {
		return s.readChunks(ctx, path)
	}
	if err != nil {
		return "", err
	}
	return buf.String(), nil
}

func (s *Sandbox) readChunks(ctx context.Context, path string) (string, error) {
	var out []byte
	for {
		var r struct {
			Content    *string `json:"content"`
			ContentB64 *string `json:"content_b64"`
			EOF        bool    `json:"eof"`
		}
		params := map[string]any{"id": s.ID(), "path": path, "offset": len(out)}
		if err := s.m.call(ctx, methodFileRead, params, &r); err != nil {
			return "", err
		}
		chunk, err := getData(r.Content, r.ContentB64)
		if err != nil {
			return "", fmt.Errorf("sandbox: %s: %w", methodFileRead, err)
		}
		out = append(out, chunk...)
		if r.EOF || chunk == "" {
			return string(out), nil
		}
	}
}

// ReadFileTo writes the file at path into w through a descriptor passed to the
// daemon (file.read with to_fd): no size limit, nothing held in memory. An
// *os.File is passed as it is (written at its current position); any other
// writer is fed from a pipe. It returns the bytes written.
func (s *Sandbox) ReadFileTo(ctx context.Context, path string, w io.Writer) (int64, error) {
	params := map[string]any{"id": s.ID(), "path": path, "to_fd": 0}
	var res struct {
		Bytes int64 `json:"bytes"`
	}
	if f, ok := w.(*os.File); ok {
		dup, err := dupFile(f)
		if err != nil {
			return 0, err
		}
		err = s.m.callWith(ctx, methodFileRead, params, &res, callOpts{files: []*os.File{dup}})
		return res.Bytes, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	type copyResult struct {
		n   int64
		err error
	}
	copied := make(chan copyResult, 1)
	go func() {
		n, err := io.Copy(w, pr)
		copied <- copyResult{n, err}
	}()
	err = s.m.callWith(ctx, methodFileRead, params, &res, callOpts{files: []*os.File{pw}})
	if err != nil {
		pr.Close() // the copy ends now, not when the daemon lets go of its end
	}
	c := <-copied
	pr.Close()
	if err != nil {
		return c.n, err
	}
	if c.err != nil {
		return c.n, fmt.Errorf("sandbox: %s: writing the content: %w", methodFileRead, c.err)
	}
	return c.n, nil
}

// dupFile returns a copy of f's descriptor as a file of its own (a call closes
// the files it passes, and the caller keeps f).
func dupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var derr error
	if err := rc.Control(func(fd uintptr) { nfd, derr = dupCloexec(int(fd)) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("sandbox: dup: %w", derr)
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}
