package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"sandboxd/sandbox"
)

// A sandbox with a file becomes a template; a sandbox made from it has the
// file; the delete is refused while it is used, done after.
func TestTemplateFromSandbox(t *testing.T) {
	m := manager(t)
	ctx := context.Background()
	src := create(t, m)
	if err := src.WriteFile(ctx, "/root/tmpl.txt", "baked"); err != nil {
		t.Fatal(err)
	}
	tmpl, err := src.MakeTemplate(ctx, "go-tmpl")
	if err != nil || tmpl.Name != "go-tmpl" || tmpl.Origin == nil || tmpl.Origin.Sandbox != src.ID() {
		t.Fatalf("make template: %+v %v", tmpl, err)
	}
	sb := create(t, m, sandbox.WithTemplate("go-tmpl"))
	if s, err := sb.ReadFile(ctx, "/root/tmpl.txt"); err != nil || s != "baked" {
		t.Fatalf("in the clone: %q %v", s, err)
	}
	list, err := m.Templates(ctx)
	found := false
	for _, x := range list {
		found = found || (x.Name == "go-tmpl" && x.UsedBy.Sandboxes == 1 && !x.Configured)
	}
	if err != nil || !found || !list[0].Configured {
		t.Fatalf("templates: %+v %v", list, err)
	}
	if err := m.DeleteTemplate(ctx, "go-tmpl"); !errors.Is(err, sandbox.ErrBadState) {
		t.Fatalf("delete while used: %v", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteTemplate(ctx, "go-tmpl"); err != nil {
		t.Fatal(err)
	}
}
