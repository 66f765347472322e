package sandbox

import (
	"context"
	"errors"
)

const (
	methodPreview   = "sandbox.preview"
	methodPreviews  = "sandbox.previews"
	methodUnpreview = "sandbox.unpreview"
)

// Preview is a preview URL (Sandbox.Preview): URL, with its signed token,
// reaches 127.0.0.1:Port in the sandbox through the daemon's preview listener
// until ExpiresAt (Unix seconds), Close or the sandbox's end. Whoever holds
// the URL reaches the port.
type Preview struct {
	ID        string `json:"preview"`
	Port      int    `json:"port"`
	URL       string `json:"url"`
	ExpiresAt int64  `json:"expires_at"`
	sb        *Sandbox
}

// Preview asks the daemon for a URL to the sandbox's port, valid for ttlS
// seconds (0: the daemon's default_ttl_s).
func (s *Sandbox) Preview(ctx context.Context, port int, ttlS int) (*Preview, error) {
	params := map[string]any{"id": s.ID(), "port": port}
	if ttlS > 0 {
		params["ttl_s"] = ttlS
	}
	p := &Preview{sb: s}
	if err := s.m.call(ctx, methodPreview, params, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Previews lists the sandbox's previews as the daemon reports them.
func (s *Sandbox) Previews(ctx context.Context) ([]map[string]any, error) {
	var r struct {
		Previews []map[string]any `json:"previews"`
	}
	err := s.m.call(ctx, methodPreviews, map[string]any{"id": s.ID()}, &r)
	return r.Previews, err
}

// Close revokes the preview; one already gone (expired, the sandbox
// destroyed) is fine.
func (p *Preview) Close(ctx context.Context) error {
	err := p.sb.m.call(ctx, methodUnpreview, map[string]any{"id": p.sb.ID(), "preview": p.ID}, nil)
	if errors.Is(err, ErrInvalidParams) || errors.Is(err, ErrNoSuchSandbox) {
		return nil
	}
	return err
}
