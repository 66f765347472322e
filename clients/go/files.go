package sandbox

import (
	"context"
	"fmt"
)

// WriteFile replaces the file at path (absolute) with content, atomically,
// creating missing parent folders. content may hold any bytes.
func (s *Sandbox) WriteFile(ctx context.Context, path, content string) error {
	if max := s.m.limit(ctx, limitDataMaxBytes); max > 0 && int64(len(content)) > max {
		return fmt.Errorf("sandbox: %s: %w", methodFileWrite, &RPCError{Code: CodeInvalidParams,
			Message: "Invalid params",
			Data:    map[string]any{"param": "content", "reason": fmt.Sprintf("larger than %d bytes", max)}})
	}
	params := map[string]any{"id": s.ID(), "path": path}
	putData(params, "content", content)
	return s.m.call(ctx, methodFileWrite, params, nil)
}

// ReadFile returns the whole file at path (absolute), whatever its bytes.
func (s *Sandbox) ReadFile(ctx context.Context, path string) (string, error) {
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
