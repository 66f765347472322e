// Package sandbox is the Go client of sandboxd: ephemeral Linux sandboxes
// (Proxmox LXC containers) that a local daemon creates, runs commands in and
// destroys, spoken to over JSON-RPC 2.0 on a Unix socket (docs/protocol.md).
//
//	mgr, _ := sandbox.NewManager(sandbox.Config{})
//	sb, _ := mgr.Create(ctx, sandbox.WithHostname("user-abc"), sandbox.WithInternet(true))
//	defer sb.Destroy(ctx)
//	res, _ := sb.Exec(ctx, "uname -a")
//	fmt.Printf("exit %d: %s\n", res.ExitCode, res.Output)
//
// Every call opens its own connection, so a Manager and its Sandboxes are safe
// for concurrent use and keep working across daemon restarts. Cancelling a
// call's context closes its connection, and the daemon cancels the request (a
// command is killed with everything it started). Errors from the daemon wrap
// *RPCError.
package sandbox

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultSocket is used when neither Config.Socket nor $SANDBOXD_SOCKET is set.
const DefaultSocket = "/run/sandboxd.sock"

// defaultMaxConns bounds the calls of one Manager running at once (each holds a
// connection; the daemon allows 64 per user by default).
const defaultMaxConns = 16

// Config says where the daemon is.
type Config struct {
	// Socket is the daemon's socket: "" means $SANDBOXD_SOCKET, else DefaultSocket.
	Socket string
	// MaxConns bounds concurrent calls (0: 16); further calls wait their turn.
	MaxConns int
	// Timeout bounds each call whose context has no deadline (0: no bound).
	// A call's own context, with a deadline, always wins.
	Timeout time.Duration
}

// Manager creates and finds sandboxes.
type Manager struct {
	socket  string
	slots   chan struct{}
	timeout time.Duration

	mu     sync.Mutex
	limits map[string]any // x-limits of the daemon's OpenRPC document, once fetched
}

// NewManager returns a Manager for cfg. It does not connect: the first call does.
func NewManager(cfg Config) (*Manager, error) {
	socket := cfg.Socket
	if socket == "" {
		socket = os.Getenv("SANDBOXD_SOCKET")
	}
	if socket == "" {
		socket = DefaultSocket
	}
	if len(socket) >= 108 {
		return nil, fmt.Errorf("sandbox: socket path too long: %s", socket)
	}
	n := cfg.MaxConns
	if n <= 0 {
		n = defaultMaxConns
	}
	return &Manager{socket: socket, slots: make(chan struct{}, n), timeout: cfg.Timeout}, nil
}

// Socket returns the socket path in use.
func (m *Manager) Socket() string { return m.socket }

// Call calls any method of the daemon with params (marshalled to JSON; nil for
// none) and unmarshals its result into result (nil to drop it).
func (m *Manager) Call(ctx context.Context, method string, params, result any) error {
	return m.call(ctx, method, params, result)
}

// Status returns daemon.status.
func (m *Manager) Status(ctx context.Context) (map[string]any, error) {
	var st map[string]any
	err := m.call(ctx, methodStatus, nil, &st)
	return st, err
}

// limit returns an integer of the daemon's published limits (0 when unknown).
func (m *Manager) limit(ctx context.Context, key string) int64 {
	m.mu.Lock()
	l := m.limits
	m.mu.Unlock()
	if l == nil {
		var doc struct {
			Limits map[string]any `json:"x-limits"`
		}
		if m.call(ctx, methodDiscover, nil, &doc) != nil || doc.Limits == nil {
			return 0
		}
		m.mu.Lock()
		m.limits, l = doc.Limits, doc.Limits
		m.mu.Unlock()
	}
	if f, ok := l[key].(float64); ok {
		return int64(f)
	}
	return 0
}

// Option sets a parameter of Create.
type Option func(params map[string]any)

// WithTemplate picks one of the daemon's templates by name (default: its default template).
func WithTemplate(name string) Option { return func(p map[string]any) { p["template"] = name } }

// WithNode creates the sandbox on that Proxmox node instead of the one the daemon would
// choose (admins only, unless the daemon's [proxmox] node_param says otherwise).
func WithNode(name string) Option { return func(p map[string]any) { p["node"] = name } }

// WithHostname names the sandbox (one DNS label; default: its id).
func WithHostname(h string) Option { return func(p map[string]any) { p["hostname"] = h } }

// WithInternet allows outbound HTTP, HTTPS and DNS from the start (default off).
func WithInternet(on bool) Option { return func(p map[string]any) { p["internet"] = on } }

// WithAllow lets out only the allow-list's entries (IPv4 CIDR[:PORT], e.g.
// "203.0.113.0/24:443") instead of internet on or off: internet {"allow": [...]}.
func WithAllow(entries ...string) Option {
	return func(p map[string]any) { p["internet"] = map[string]any{"allow": entries} }
}

// WithCores sets the number of CPU cores.
func WithCores(n int) Option { return func(p map[string]any) { p["cores"] = n } }

// WithMemory sets the memory in MiB.
func WithMemory(mb int) Option { return func(p map[string]any) { p["memory_mb"] = mb } }

// WithDisk sets the disk size in GiB.
func WithDisk(gb int) Option { return func(p map[string]any) { p["disk_gb"] = gb } }

// WithNetRate caps the sandbox's bandwidth at mbps Mbit/s in each direction (0: no
// cap; the default comes from the daemon's configuration).
func WithNetRate(mbps int) Option { return func(p map[string]any) { p["net_rate_mbps"] = mbps } }

// WithTTL sets the lease, rounded up to whole seconds: at its end the daemon
// destroys the sandbox.
func WithTTL(d time.Duration) Option {
	return func(p map[string]any) { p["ttl_s"] = int64((d + time.Second - 1) / time.Second) }
}

// WithLabels attaches labels (at most 16 pairs).
func WithLabels(l map[string]string) Option { return func(p map[string]any) { p["labels"] = l } }

// WithIdempotencyKey makes a retried Create return the same sandbox.
func WithIdempotencyKey(k string) Option {
	return func(p map[string]any) { p["idempotency_key"] = k }
}

// WithSandboxEnv sets environment variables for every later command and
// process of the sandbox (sandbox.create's env; the daemon keeps them out of
// its logs and never returns them). Sent only when env is not nil.
func WithSandboxEnv(env map[string]string) Option {
	return func(p map[string]any) {
		if env != nil {
			p["env"] = env
		}
	}
}

// Info is the daemon's view of a sandbox (docs/protocol.md, "The sandbox object").
type Info struct {
	ID       string  `json:"id"`
	VMID     int     `json:"vmid"`
	Node     string  `json:"node"`
	Hostname string  `json:"hostname"`
	IP       *string `json:"ip"`
	State    string  `json:"state"`
	Internet bool    `json:"internet"`
	// InternetAllow is the allow-list in force with Internet; nil: none.
	InternetAllow []string          `json:"internet_allow"`
	Cores         int               `json:"cores"`
	MemoryMB      int               `json:"memory_mb"`
	DiskGB        int               `json:"disk_gb"`
	NetRate       int               `json:"net_rate_mbps"` // bandwidth cap in Mbit/s, 0: none
	OwnerUID      int               `json:"owner_uid"`
	Labels        map[string]string `json:"labels"`
	CreatedAt     time.Time         `json:"created_at"`
	ExpiresAt     time.Time         `json:"expires_at"`
	Template      string            `json:"template"`
}

// Sandbox is one sandbox.
type Sandbox struct {
	m    *Manager
	mu   sync.Mutex
	info Info
}

// Create makes a sandbox and returns when it is ready.
func (m *Manager) Create(ctx context.Context, opts ...Option) (*Sandbox, error) {
	params := map[string]any{}
	for _, o := range opts {
		o(params)
	}
	sb := &Sandbox{m: m}
	if err := m.call(ctx, methodCreate, params, &sb.info); err != nil {
		return nil, err
	}
	return sb, nil
}

// Get returns the sandbox with this id.
func (m *Manager) Get(ctx context.Context, id string) (*Sandbox, error) {
	sb := &Sandbox{m: m}
	if err := m.call(ctx, methodGet, map[string]any{"id": id}, &sb.info); err != nil {
		return nil, err
	}
	return sb, nil
}

// List returns the caller's sandboxes that carry every label in labels (nil: all).
func (m *Manager) List(ctx context.Context, labels map[string]string) ([]*Sandbox, error) {
	params := map[string]any{}
	if labels != nil {
		params["labels"] = labels
	}
	var res struct {
		Sandboxes []Info `json:"sandboxes"`
	}
	if err := m.call(ctx, methodList, params, &res); err != nil {
		return nil, err
	}
	out := make([]*Sandbox, 0, len(res.Sandboxes))
	for _, info := range res.Sandboxes {
		out = append(out, &Sandbox{m: m, info: info})
	}
	return out, nil
}

// ID returns the sandbox's id.
func (s *Sandbox) ID() string { return s.Info().ID }

// IP returns the sandbox's IPv4 address ("" while it has none).
func (s *Sandbox) IP() string {
	if ip := s.Info().IP; ip != nil {
		return *ip
	}
	return ""
}

// Info returns the last state received from the daemon.
func (s *Sandbox) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

func (s *Sandbox) update(ctx context.Context, method string, params map[string]any) error {
	params["id"] = s.ID()
	var info Info
	if err := s.m.call(ctx, method, params, &info); err != nil {
		return err
	}
	s.mu.Lock()
	s.info = info
	s.mu.Unlock()
	return nil
}

// Refresh fetches the sandbox's state again.
func (s *Sandbox) Refresh(ctx context.Context) error {
	return s.update(ctx, methodGet, map[string]any{})
}

// SetInternet allows or blocks outbound HTTP, HTTPS and DNS.
func (s *Sandbox) SetInternet(ctx context.Context, on bool) error {
	return s.update(ctx, methodSetInternet, map[string]any{"enabled": on})
}

// SetInternetAllow lets out only the allow-list's entries (IPv4 CIDR[:PORT]), replacing
// internet on or off or the list before.
func (s *Sandbox) SetInternetAllow(ctx context.Context, entries []string) error {
	return s.update(ctx, methodSetInternet, map[string]any{"enabled": true, "allow": entries})
}

// Resize changes the running sandbox's cores and memory (live) and grows its disk; a
// zero value leaves that size as it is.
func (s *Sandbox) Resize(ctx context.Context, cores, memoryMB, diskGB int) error {
	p := map[string]any{}
	for k, v := range map[string]int{"cores": cores, "memory_mb": memoryMB, "disk_gb": diskGB} {
		if v > 0 {
			p[k] = v
		}
	}
	return s.update(ctx, methodResize, p)
}

// SetNetRate changes the running sandbox's bandwidth cap to mbps Mbit/s (0: no cap),
// live (sandbox.resize net_rate_mbps).
func (s *Sandbox) SetNetRate(ctx context.Context, mbps int) error {
	return s.update(ctx, methodResize, map[string]any{"net_rate_mbps": mbps})
}

// Renew sets the lease to ttl from now (rounded up to whole seconds).
func (s *Sandbox) Renew(ctx context.Context, ttl time.Duration) error {
	return s.update(ctx, methodRenew,
		map[string]any{"ttl_s": int64((ttl + time.Second - 1) / time.Second)})
}

// Destroy stops and deletes the sandbox; destroying it again succeeds.
func (s *Sandbox) Destroy(ctx context.Context) error {
	if err := s.m.call(ctx, methodDestroy, map[string]any{"id": s.ID()}, nil); err != nil {
		return err
	}
	s.mu.Lock()
	s.info.State = "destroyed"
	s.mu.Unlock()
	return nil
}

// DestroyNoWait starts the destroy and returns once it has begun (state
// "destroying"); the daemon finishes it without the caller.
func (s *Sandbox) DestroyNoWait(ctx context.Context) error {
	var r struct {
		State string `json:"state"`
	}
	if err := s.m.call(ctx, methodDestroy, map[string]any{"id": s.ID(), "wait": false}, &r); err != nil {
		return err
	}
	s.mu.Lock()
	s.info.State = r.State
	s.mu.Unlock()
	return nil
}

// putData sets params[name] to data as text, or params[name+"_b64"] when data
// is not UTF-8 (docs/protocol.md, "Binary data").
func putData(params map[string]any, name, data string) {
	if utf8.ValidString(data) {
		params[name] = data
	} else {
		params[name+"_b64"] = base64.StdEncoding.EncodeToString([]byte(data))
	}
}

// getData returns the bytes of a `name` / `name_b64` pair.
func getData(text, b64 *string) (string, error) {
	if text != nil {
		return *text, nil
	}
	if b64 != nil {
		b, err := base64.StdEncoding.DecodeString(*b64)
		return string(b), err
	}
	return "", nil
}
