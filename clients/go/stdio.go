package sandbox

import (
	"fmt"
	"os"
)

// filesKey holds, in the params an option fills, the local files to pass
// with the request; it never reaches the wire (see takeFiles).
const filesKey = "\x00files"

// putFile records f to be passed for the descriptor parameter name.
func putFile(params map[string]any, name string, f *os.File) {
	files, _ := params[filesKey].(map[string]*os.File)
	if files == nil {
		files = map[string]*os.File{}
		params[filesKey] = files
	}
	files[name] = f
}

// takeFiles removes the files options recorded in params, sets each
// parameter to its index and returns duplicates of the descriptors in that
// order (the call closes them once sent; the caller keeps its files).
func takeFiles(params map[string]any) ([]*os.File, error) {
	files, _ := params[filesKey].(map[string]*os.File)
	delete(params, filesKey)
	var out []*os.File
	for _, name := range []string{"stdin_fd", "stdout_fd", "stderr_fd"} {
		f := files[name]
		if f == nil {
			continue
		}
		dup, err := dupFile(f)
		if err != nil {
			for _, d := range out {
				d.Close()
			}
			return nil, fmt.Errorf("sandbox: %s: %w", name, err)
		}
		params[name] = len(out)
		out = append(out, dup)
	}
	return out, nil
}

// WithStdinFile feeds the command's stdin from f (a file, a pipe, a socket)
// until its end, passed to the daemon as a descriptor (stdin_fd): no size
// limit. Not with WithStdin or a streamed exec.
func WithStdinFile(f *os.File) ExecOption {
	return func(p map[string]any) { putFile(p, "stdin_fd", f) }
}

// WithStdoutFile writes the command's stdout into f as it comes (stdout_fd),
// without a cap; the result's Stdout is then empty.
func WithStdoutFile(f *os.File) ExecOption {
	return func(p map[string]any) { putFile(p, "stdout_fd", f) }
}

// WithStderrFile writes the command's stderr into f as it comes (stderr_fd).
func WithStderrFile(f *os.File) ExecOption {
	return func(p map[string]any) { putFile(p, "stderr_fd", f) }
}

// WithProcessStdinFile feeds the process's stdin from f until its end, then
// closes it (stdin_fd; implies a stdin pipe that Write may feed as well).
func WithProcessStdinFile(f *os.File) ProcessOption {
	return func(p map[string]any) { putFile(p, "stdin_fd", f) }
}

// WithProcessStdoutFile copies the process's stdout into f from its start
// until it ended, then the daemon closes its copy of f (stdout_fd); the
// output stays readable with Read as well.
func WithProcessStdoutFile(f *os.File) ProcessOption {
	return func(p map[string]any) { putFile(p, "stdout_fd", f) }
}

// WithProcessStderrFile does the same for stderr (stderr_fd).
func WithProcessStderrFile(f *os.File) ProcessOption {
	return func(p map[string]any) { putFile(p, "stderr_fd", f) }
}
