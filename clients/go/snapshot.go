package sandbox

import "context"

const (
	methodSnapshot       = "sandbox.snapshot"
	methodSnapshots      = "sandbox.snapshots"
	methodRollback       = "sandbox.rollback"
	methodSnapshotDelete = "sandbox.snapshot_delete"
)

// SnapshotInfo is one snapshot of a sandbox's disk (files, not memory or
// processes). Proxmox keeps it with the container; a destroy deletes it.
type SnapshotInfo struct {
	Name        string `json:"name"`
	CreatedAt   int64  `json:"created_at"` // Unix seconds
	Description string `json:"description,omitempty"`
}

// Snapshot takes snapshot name of the sandbox's disk. name: a letter, then
// letters, digits, _ or -, 2..40 characters.
func (s *Sandbox) Snapshot(ctx context.Context, name string) (SnapshotInfo, error) {
	var r struct {
		Snapshot SnapshotInfo `json:"snapshot"`
	}
	err := s.m.call(ctx, methodSnapshot, map[string]any{"id": s.ID(), "name": name}, &r)
	return r.Snapshot, err
}

// Snapshots lists the sandbox's snapshots, oldest first.
func (s *Sandbox) Snapshots(ctx context.Context) ([]SnapshotInfo, error) {
	var r struct {
		Snapshots []SnapshotInfo `json:"snapshots"`
	}
	err := s.m.call(ctx, methodSnapshots, map[string]any{"id": s.ID()}, &r)
	return r.Snapshots, err
}

// Rollback puts the sandbox's disk back to snapshot name. The sandbox
// restarts and is ready again (Info updated); its commands, processes and
// sessions of before end.
func (s *Sandbox) Rollback(ctx context.Context, name string) error {
	return s.update(ctx, methodRollback, map[string]any{"name": name})
}

// DeleteSnapshot deletes snapshot name.
func (s *Sandbox) DeleteSnapshot(ctx context.Context, name string) error {
	return s.m.call(ctx, methodSnapshotDelete, map[string]any{"id": s.ID(), "name": name}, nil)
}
