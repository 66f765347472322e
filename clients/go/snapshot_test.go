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

// A file written, a fork of two: each child has it, its own id and address;
// a child's change does not reach the parent.
func TestFork(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "/root/fork.txt", "parent"); err != nil {
		t.Fatal(err)
	}
	kids, err := sb.Fork(ctx, sandbox.ForkOptions{Count: 2})
	if err != nil || len(kids) != 2 {
		t.Fatalf("fork: %v %v", kids, err)
	}
	for _, k := range kids {
		defer k.Destroy(ctx)
		if k.ID() == sb.ID() || k.IP() == sb.IP() || k.Info().State != "ready" {
			t.Fatalf("child %+v of %+v", k.Info(), sb.Info())
		}
		if s, err := k.ReadFile(ctx, "/root/fork.txt"); err != nil || s != "parent" {
			t.Fatalf("child's file: %q %v", s, err)
		}
	}
	if err := kids[0].WriteFile(ctx, "/root/fork.txt", "child"); err != nil {
		t.Fatal(err)
	}
	if s, err := sb.ReadFile(ctx, "/root/fork.txt"); err != nil || s != "parent" {
		t.Fatalf("the parent's file: %q %v", s, err)
	}
	if _, err := sb.Fork(ctx, sandbox.ForkOptions{Snapshot: "nope"}); !errors.Is(err, sandbox.ErrInvalidParams) {
		t.Fatalf("unknown snapshot: %v", err)
	}
}

// A volume: made, mounted at create, written; detached (the sandbox restarts,
// ready), attached again read-only in another sandbox and read; refusals are
// typed; deleted once free.
func TestVolumes(t *testing.T) {
	m := manager(t)
	ctx := context.Background()
	v, err := m.CreateVolume(ctx, "go-vol", 1)
	if err != nil || v.Name != "go-vol" || v.SizeGB != 1 || v.AttachedTo != nil {
		t.Fatalf("create: %+v %v", v, err)
	}
	defer m.DeleteVolume(ctx, "go-vol")
	if _, err := m.CreateVolume(ctx, "go-vol", 1); !errors.Is(err, sandbox.ErrInvalidParams) {
		t.Fatalf("a name in use: %v", err)
	}
	sb := create(t, m, sandbox.WithVolumes(sandbox.VolumeMount{Name: "go-vol", Path: "/mnt/go"}))
	if err := sb.WriteFile(ctx, "/mnt/go/f", "from go"); err != nil {
		t.Fatal(err)
	}
	list, err := m.Volumes(ctx)
	if err != nil || len(list) != 1 || list[0].AttachedTo == nil || *list[0].AttachedTo != sb.ID() {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := m.DeleteVolume(ctx, "go-vol"); !errors.Is(err, sandbox.ErrBadState) {
		t.Fatalf("delete while attached: %v", err)
	}
	if err := sb.Detach(ctx, "go-vol"); err != nil || sb.Info().State != "ready" {
		t.Fatalf("detach: %v %+v", err, sb.Info())
	}
	if err := sb.Detach(ctx, "go-vol"); !errors.Is(err, sandbox.ErrInvalidParams) {
		t.Fatalf("detach again: %v", err)
	}
	other := create(t, m)
	if err := other.Attach(ctx, "go-vol", "/data", true); err != nil || other.Info().State != "ready" {
		t.Fatalf("attach: %v", err)
	}
	if err := sb.Attach(ctx, "go-vol", "/mnt/go", false); !errors.Is(err, sandbox.ErrInvalidParams) {
		t.Fatalf("attached elsewhere: %v", err)
	}
	if s, err := other.ReadFile(ctx, "/data/f"); err != nil || s != "from go" {
		t.Fatalf("read: %q %v", s, err)
	}
	if err := other.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if list, err := m.Volumes(ctx); err != nil || len(list) != 1 || list[0].AttachedTo != nil {
		t.Fatalf("after the destroy: %+v %v", list, err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
}
