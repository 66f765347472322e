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
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// call runs one request on a connection of its own: cancelling ctx closes the
// connection, and sandboxd cancels what a closed connection left running (an
// exec is killed with everything it started). One connection per call also
// means nothing to restore after the daemon restarts or closes idle
// connections.
func (m *Manager) call(ctx context.Context, method string, params, result any) error {
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
	err = exchange(c, method, params, result)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("sandbox: %s: %w", method, ctx.Err())
	}
	return err
}

func exchange(c net.Conn, method string, params, result any) error {
	line, err := json.Marshal(request{JSONRPC: "2.0", ID: 1, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", method, err)
	}
	if _, err := c.Write(append(line, '\n')); err != nil {
		// The daemon may have refused the line and said why (a line over its
		// limit): that reply comes first.
		if rerr := readReply(bufio.NewReader(c), method, result); rerr != nil &&
			!errors.Is(rerr, ErrConnectionLost) {
			return rerr
		}
		return fmt.Errorf("sandbox: %s: sending: %w", method, err)
	}
	return readReply(bufio.NewReaderSize(c, 1<<16), method, result)
}

// readReply reads lines until the reply to request 1, skipping notifications.
// An error with id null (one the daemon could not tie to a request) is this
// call's error: the daemon closes the connection after it.
func readReply(r *bufio.Reader, method string, result any) error {
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
			continue // a notification (exec.output): not asked for
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
