package sandbox

import "context"

const (
	methodTemplateList    = "template.list"
	methodTemplateCreate  = "template.create"
	methodTemplateDelete  = "template.delete"
	methodTemplatePublish = "template.publish"
)

// TemplateOrigin is where a template made from a sandbox came from.
type TemplateOrigin struct {
	Sandbox   string `json:"sandbox"`
	UID       int64  `json:"uid"`
	CreatedAt int64  `json:"created_at"` // Unix seconds
}

// TemplateInfo is one template of template.list: a configured one (Origin
// nil, Configured true) or one made from a sandbox.
type TemplateInfo struct {
	Name       string
	Node       string
	VMID       int64
	DiskGB     *int64 // nil: not known yet (a configured template before its first clone)
	Configured bool
	Origin     *TemplateOrigin
	OwnerUID   *int64
	Published  bool
	Defaults   map[string]any
	UsedBy     struct {
		Sandboxes int `json:"sandboxes"`
		Pool      int `json:"pool"`
		PoolReady int `json:"pool_ready"`
	}
}

type templateWire struct {
	Name      string         `json:"name"`
	Node      *string        `json:"node"`
	VMID      int64          `json:"vmid"`
	DiskGB    *int64         `json:"disk_gb"`
	Origin    any            `json:"origin"`
	OwnerUID  *int64         `json:"owner_uid"`
	Published bool           `json:"published"`
	Defaults  map[string]any `json:"defaults"`
	UsedBy    struct {
		Sandboxes int `json:"sandboxes"`
		Pool      int `json:"pool"`
		PoolReady int `json:"pool_ready"`
	} `json:"used_by"`
}

func (w templateWire) info() TemplateInfo {
	t := TemplateInfo{Name: w.Name, VMID: w.VMID, DiskGB: w.DiskGB, OwnerUID: w.OwnerUID,
		Published: w.Published, Defaults: w.Defaults}
	if w.Node != nil {
		t.Node = *w.Node
	}
	t.UsedBy = w.UsedBy
	if o, ok := w.Origin.(map[string]any); ok {
		org := &TemplateOrigin{}
		if s, ok := o["sandbox"].(string); ok {
			org.Sandbox = s
		}
		if u, ok := o["uid"].(float64); ok {
			org.UID = int64(u)
		}
		if c, ok := o["created_at"].(float64); ok {
			org.CreatedAt = int64(c)
		}
		t.Origin = org
	} else {
		t.Configured = true
	}
	return t
}

// Templates lists the templates the caller may use (admins: all).
func (m *Manager) Templates(ctx context.Context) ([]TemplateInfo, error) {
	var r struct {
		Templates []templateWire `json:"templates"`
	}
	if err := m.call(ctx, methodTemplateList, map[string]any{}, &r); err != nil {
		return nil, err
	}
	out := make([]TemplateInfo, 0, len(r.Templates))
	for _, w := range r.Templates {
		out = append(out, w.info())
	}
	return out, nil
}

// MakeTemplate turns the sandbox into template name: the sandbox stops and
// ends, its container becomes the template. Create with WithTemplate(name)
// clones it.
func (s *Sandbox) MakeTemplate(ctx context.Context, name string) (TemplateInfo, error) {
	var r struct {
		Template templateWire `json:"template"`
	}
	err := s.m.call(ctx, methodTemplateCreate, map[string]any{"id": s.ID(), "name": name}, &r)
	return r.Template.info(), err
}

// DeleteTemplate deletes a template made from a sandbox; ErrBadState while
// sandboxes or warm pool members use it.
func (m *Manager) DeleteTemplate(ctx context.Context, name string) error {
	return m.call(ctx, methodTemplateDelete, map[string]any{"name": name}, nil)
}

// PublishTemplate lets every uid use the template (admins only).
func (m *Manager) PublishTemplate(ctx context.Context, name string) (TemplateInfo, error) {
	var r struct {
		Template templateWire `json:"template"`
	}
	err := m.call(ctx, methodTemplatePublish, map[string]any{"name": name}, &r)
	return r.Template.info(), err
}
