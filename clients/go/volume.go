package sandbox

import "context"

const (
	methodVolumeCreate = "volume.create"
	methodVolumeList   = "volume.list"
	methodVolumeDelete = "volume.delete"
	methodAttach       = "sandbox.attach"
	methodDetach       = "sandbox.detach"
)

// Volume is storage of a uid's that outlives sandboxes (docs/protocol.md,
// "Volumes and their holder").
type Volume struct {
	Name     string `json:"name"`
	SizeGB   int    `json:"size_gb"`
	OwnerUID int64  `json:"owner_uid"`
	// AttachedTo is the id of the sandbox the volume is mounted in; nil while
	// the daemon keeps it.
	AttachedTo *string `json:"attached_to"`
}

// VolumeMount is one volume of Create's WithVolumes: the caller's volume Name
// mounted at Path (absolute), read-only with ReadOnly.
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// WithVolumes mounts the caller's volumes (at most 8) before the sandbox first
// starts.
func WithVolumes(v ...VolumeMount) Option {
	return func(p map[string]any) { p["volumes"] = v }
}

// CreateVolume makes an empty volume of sizeGB GiB owned by the caller.
func (m *Manager) CreateVolume(ctx context.Context, name string, sizeGB int) (Volume, error) {
	var r struct {
		Volume Volume `json:"volume"`
	}
	err := m.call(ctx, methodVolumeCreate, map[string]any{"name": name, "size_gb": sizeGB}, &r)
	return r.Volume, err
}

// Volumes lists the caller's volumes (an admin's: every uid's), by name.
func (m *Manager) Volumes(ctx context.Context) ([]Volume, error) {
	var r struct {
		Volumes []Volume `json:"volumes"`
	}
	if err := m.call(ctx, methodVolumeList, map[string]any{}, &r); err != nil {
		return nil, err
	}
	return r.Volumes, nil
}

// DeleteVolume deletes a volume with its data; refused (ErrBadState) while a
// sandbox has it.
func (m *Manager) DeleteVolume(ctx context.Context, name string) error {
	return m.call(ctx, methodVolumeDelete, map[string]any{"name": name}, nil)
}

// Attach mounts the owner's volume at path while the sandbox runs (read-only
// with readOnly); the sandbox keeps running (it restarts when Proxmox could not hot-plug
// the mount point).
func (s *Sandbox) Attach(ctx context.Context, volume, path string, readOnly bool) error {
	return s.update(ctx, methodAttach,
		map[string]any{"volume": volume, "path": path, "read_only": readOnly})
}

// Detach takes the volume out of the sandbox back to the daemon. The sandbox
// restarts: its processes, sessions and forwards end; Info().State is "ready"
// again.
func (s *Sandbox) Detach(ctx context.Context, volume string) error {
	return s.update(ctx, methodDetach, map[string]any{"volume": volume})
}
