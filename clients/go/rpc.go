package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
)

// maxReplyBytes bounds one reply line (the daemon's largest replies are exec
// results with two 16 MiB streams in base64).
const maxReplyBytes = 64 << 20

type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type reply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// call runs one request on a connection of its own: cancelling ctx closes the
// connection, and sandboxd cancels what a closed connection left running (an
// exec is killed with everything it started). One connection per call also
// means nothing to restore after the daemon restarts or closes idle
// connections.
func (m *Manager) call(ctx context.Context, method string, params, result any) error {
	return m.callWith(ctx, method, params, result, callOpts{})
}

// callOpts are the extras of a call: descriptors passed with the request line
// and a handler of the notifications that come before the reply.
type callOpts struct {
	// files are passed with the request line (SCM_RIGHTS), named by index in
	// params; they are closed once sent (or when sending failed).
	files []*os.File
	// notify gets each notification on the connection (exec.output), in order,
	// on the goroutine of the call: while it runs, nothing more is read.
	notify func(method string, params json.RawMessage)
}

// closeFiles closes the files of o (those a call passes, once passed).
func (o *callOpts) closeFiles() {
	for _, f := range o.files {
		f.Close()
	}
	o.files = nil
}

// withDefaultTimeout applies Config.Timeout to a context without a deadline.
func (m *Manager) withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || m.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, m.timeout)
}

func (m *Manager) callWith(ctx context.Context, method string, params, result any, o callOpts) error {
	defer o.closeFiles()
	ctx, cancel := m.withDefaultTimeout(ctx)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: %s: %w", method, err)
	}
	select {
	case m.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("sandbox: %s: %w", method, ctx.Err())
	}
	defer func() { <-m.slots }()

	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", m.socket)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("sandbox: %s: %w", method, ctx.Err())
		}
		return fmt.Errorf("sandbox: cannot connect to sandboxd at %s: %w", m.socket, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			c.Close()
		case <-done:
			c.Close()
		}
	}()
	err = exchange(c, method, params, result, &o)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("sandbox: %s: %w", method, ctx.Err())
	}
	return err
}

func exchange(c net.Conn, method string, params, result any, o *callOpts) error {
	line, err := json.Marshal(request{JSONRPC: "2.0", ID: 1, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", method, err)
	}
	err = send(c, append(line, '\n'), o.files)
	o.closeFiles() // the daemon holds its own copies now
	if err != nil {
		// The daemon may have refused the line and said why (a line over its
		// limit): that reply comes first.
		if rerr := readReply(bufio.NewReader(c), method, result, o.notify); rerr != nil &&
			!errors.Is(rerr, ErrConnectionLost) {
			return rerr
		}
		return fmt.Errorf("sandbox: %s: sending: %w", method, err)
	}
	return readReply(bufio.NewReaderSize(c, 1<<16), method, result, o.notify)
}

// send writes line, with files as SCM_RIGHTS in the same sendmsg as the
// line's first bytes (docs/protocol.md, "Passing descriptors"); a part the
// kernel did not take at once follows without descriptors.
func send(c net.Conn, line []byte, files []*os.File) error {
	if len(files) == 0 {
		_, err := c.Write(line)
		return err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return errors.New("descriptors need a Unix socket")
	}
	fds := make([]int, 0, len(files))
	for _, f := range files {
		rc, err := f.SyscallConn()
		if err != nil {
			return err
		}
		if err := rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) }); err != nil {
			return err
		}
	}
	n, _, err := uc.WriteMsgUnix(line, syscall.UnixRights(fds...), nil)
	runtime.KeepAlive(files)
	if err == nil && n < len(line) {
		_, err = c.Write(line[n:])
	}
	return err
}

// readReply reads lines until the reply to request 1, skipping notifications.
// An error with id null (one the daemon could not tie to a request) is this
// call's error: the daemon closes the connection after it.
func readReply(r *bufio.Reader, method string, result any,
	notify func(string, json.RawMessage)) error {
	for {
		line, err := readLine(r)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("sandbox: %s: %w", method, ErrConnectionLost)
			}
			return fmt.Errorf("sandbox: %s: %w: %v", method, ErrConnectionLost, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rep reply
		if err := json.Unmarshal(line, &rep); err != nil {
			return fmt.Errorf("sandbox: %s: sandboxd sent something that is not JSON-RPC: %w",
				method, err)
		}
		if rep.Method != "" {
			if notify != nil {
				notify(rep.Method, rep.Params)
			}
			continue
		}
		id := string(bytes.TrimSpace(rep.ID))
		if id != "1" && !(rep.Error != nil && (id == "" || id == "null")) {
			continue
		}
		if rep.Error != nil {
			return fmt.Errorf("sandbox: %s: %w", method, rep.Error)
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(rep.Result, result); err != nil {
			return fmt.Errorf("sandbox: %s: unexpected result: %w", method, err)
		}
		return nil
	}
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxReplyBytes {
			return nil, fmt.Errorf("reply longer than %d bytes", maxReplyBytes)
		}
		line = append(line, chunk...)
		if err == nil {
			return line, nil
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
	}
}
