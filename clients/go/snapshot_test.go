package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"sandboxd/sandbox"
)

// A file written, a snapshot, the file changed, a rollback: the file is back.
func TestSnapshotRollback(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "/root/snap.txt", "before"); err != nil {
		t.Fatal(err)
	}
	snap, err := sb.Snapshot(ctx, "go1")
	if err != nil || snap.Name != "go1" || snap.CreatedAt == 0 {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	if err := sb.WriteFile(ctx, "/root/snap.txt", "after"); err != nil {
		t.Fatal(err)
	}
	if list, err := sb.Snapshots(ctx); err != nil || len(list) != 1 || list[0].Name != "go1" {
		t.Fatalf("snapshots: %+v %v", list, err)
	}
	if err := sb.Rollback(ctx, "go1"); err != nil || sb.Info().State != "ready" {
		t.Fatalf("rollback: %v %+v", err, sb.Info())
	}
	if s, err := sb.ReadFile(ctx, "/root/snap.txt"); err != nil || s != "before" {
		t.Fatalf("after the rollback: %q %v", s, err)
	}
	if err := sb.Rollback(ctx, "nope"); !errors.Is(err, sandbox.ErrInvalidParams) {
		t.Fatalf("unknown snapshot: %v", err)
	}
	if err := sb.DeleteSnapshot(ctx, "go1"); err != nil {
		t.Fatal(err)
	}
	if list, err := sb.Snapshots(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after delete: %+v %v", list, err)
	}
}
