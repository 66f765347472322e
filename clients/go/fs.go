package sandbox

import (
	"context"
	"fmt"
)

// The file system methods (docs/protocol.md).
const (
	methodFileList   = "file.list"
	methodFileStat   = "file.stat"
	methodFileRemove = "file.remove"
	methodFileMkdir  = "file.mkdir"
	methodFileRename = "file.rename"
)

// FileEntry describes one path: an entry of List, or the result of Stat.
type FileEntry struct {
	Name  string // the last component of the path; any bytes
	Type  string // "file", "dir", "symlink" or "other"
	Size  int64
	Mode  string // permission bits, four octal digits
	MTime int64  // seconds since the Unix epoch
	// Target is a symbolic link's target (Stat without follow only).
	Target string
}

type fileEntryJSON struct {
	Name      *string `json:"name"`
	NameB64   *string `json:"name_b64"`
	Type      string  `json:"type"`
	Size      int64   `json:"size"`
	Mode      string  `json:"mode"`
	MTime     int64   `json:"mtime"`
	Target    *string `json:"target"`
	TargetB64 *string `json:"target_b64"`
}

func (j *fileEntryJSON) entry() (FileEntry, error) {
	name, err := getData(j.Name, j.NameB64)
	if err != nil {
		return FileEntry{}, err
	}
	target, err := getData(j.Target, j.TargetB64)
	if err != nil {
		return FileEntry{}, err
	}
	return FileEntry{Name: name, Type: j.Type, Size: j.Size, Mode: j.Mode, MTime: j.MTime,
		Target: target}, nil
}

// Listing is the result of List.
type Listing struct {
	Entries []FileEntry // sorted by name; symbolic links are not followed
	// Truncated says the folder held more entries than the limit.
	Truncated bool
}

// List lists the folder at path (absolute): at most limit entries (0: the
// daemon's maximum, 10000).
func (s *Sandbox) List(ctx context.Context, path string, limit int) (Listing, error) {
	var r struct {
		Entries   []fileEntryJSON `json:"entries"`
		Truncated bool            `json:"truncated"`
	}
	params := map[string]any{"id": s.ID(), "path": path}
	if limit > 0 {
		params["limit"] = limit
	}
	if err := s.m.call(ctx, methodFileList, params, &r); err != nil {
		return Listing{}, err
	}
	out := Listing{Entries: make([]FileEntry, 0, len(r.Entries)), Truncated: r.Truncated}
	for i := range r.Entries {
		e, err := r.Entries[i].entry()
		if err != nil {
			return Listing{}, fmt.Errorf("sandbox: %s: %w", methodFileList, err)
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

// Stat describes path: a symbolic link itself, or with follow what it points to.
func (s *Sandbox) Stat(ctx context.Context, path string, follow bool) (FileEntry, error) {
	var r fileEntryJSON
	params := map[string]any{"id": s.ID(), "path": path, "follow": follow}
	if err := s.m.call(ctx, methodFileStat, params, &r); err != nil {
		return FileEntry{}, err
	}
	e, err := r.entry()
	if err != nil {
		return FileEntry{}, fmt.Errorf("sandbox: %s: %w", methodFileStat, err)
	}
	return e, nil
}

// Remove removes a file, a symbolic link (never what it points to), an empty
// folder or, with recursive, a whole tree without following links. It returns
// the number of entries removed.
func (s *Sandbox) Remove(ctx context.Context, path string, recursive bool) (int64, error) {
	var r struct {
		Removed int64 `json:"removed"`
	}
	params := map[string]any{"id": s.ID(), "path": path, "recursive": recursive}
	if err := s.m.call(ctx, methodFileRemove, params, &r); err != nil {
		return 0, err
	}
	return r.Removed, nil
}

// Mkdir makes the folder path with exactly mode (0: 0755); with parents the
// missing parents too, and an existing folder is no error (created false).
func (s *Sandbox) Mkdir(ctx context.Context, path string, parents bool, mode uint32) (bool, error) {
	var r struct {
		Created bool `json:"created"`
	}
	params := map[string]any{"id": s.ID(), "path": path, "parents": parents}
	if mode != 0 {
		params["mode"] = fmt.Sprintf("%04o", mode)
	}
	if err := s.m.call(ctx, methodFileMkdir, params, &r); err != nil {
		return false, err
	}
	return r.Created, nil
}

// Rename renames from to to; an existing regular file to is replaced
// atomically, an existing folder is refused.
func (s *Sandbox) Rename(ctx context.Context, from, to string) error {
	params := map[string]any{"id": s.ID(), "from": from, "to": to}
	return s.m.call(ctx, methodFileRename, params, nil)
}

// WriteFileAt writes content into the file at path in place, at offset (not
// atomic); a missing file is created. Bytes past the end extend the file.
func (s *Sandbox) WriteFileAt(ctx context.Context, path, content string, offset int64) error {
	params := map[string]any{"id": s.ID(), "path": path, "offset": offset}
	putData(params, "content", content)
	return s.m.call(ctx, methodFileWrite, params, nil)
}

// AppendFile writes content at the end of the file at path (not atomic); a
// missing file is created.
func (s *Sandbox) AppendFile(ctx context.Context, path, content string) error {
	params := map[string]any{"id": s.ID(), "path": path, "append": true}
	putData(params, "content", content)
	return s.m.call(ctx, methodFileWrite, params, nil)
}
