package sandbox

import (
	"context"
	"fmt"
)

const methodFork = "sandbox.fork"

// ForkOptions are the params of Fork. Zero values: one child, a snapshot
// taken for the fork (and deleted afterwards), the parent's lease length.
type ForkOptions struct {
	Count    int    // 1..32
	Snapshot string // the parent's snapshot to fork from
	TTL      int64  // the children's lease in seconds
}

// ForkError says that some children of a Fork failed (each was rolled back);
// Fork still returns the children made.
type ForkError struct {
	Failed int
	Reason string // "N of M children failed: ..." (the first failure)
}

func (e *ForkError) Error() string {
	return fmt.Sprintf("sandbox.fork: %s", e.Reason)
}

// Fork makes new sandboxes with this sandbox's disk as of a snapshot (or of
// now); this one keeps running. Each child has its own host key, address and
// lease, and this one's labels. When some children failed it returns those
// made and a *ForkError; when none was made, the first failure's error.
func (s *Sandbox) Fork(ctx context.Context, o ForkOptions) ([]*Sandbox, error) {
	params := map[string]any{"id": s.ID()}
	if o.Count > 0 {
		params["count"] = o.Count
	}
	if o.Snapshot != "" {
		params["snapshot"] = o.Snapshot
	}
	if o.TTL > 0 {
		params["ttl_s"] = o.TTL
	}
	var r struct {
		Sandboxes []Info `json:"sandboxes"`
		Failed    int    `json:"failed"`
		Reason    string `json:"reason"`
	}
	if err := s.m.call(ctx, methodFork, params, &r); err != nil {
		return nil, err
	}
	out := make([]*Sandbox, 0, len(r.Sandboxes))
	for _, info := range r.Sandboxes {
		out = append(out, &Sandbox{m: s.m, info: info})
	}
	if r.Failed > 0 {
		return out, &ForkError{Failed: r.Failed, Reason: r.Reason}
	}
	return out, nil
}
