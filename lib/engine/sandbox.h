/* The sandbox engine: one `struct engine` on the caller's loop owns the Proxmox client,
 * the registry (write-ahead records in the state folder), the SSH pools of the sandboxes
 * and the in-memory table of sandboxes.
 *
 * Lifecycle of a sandbox, one sandbox_set_state():
 *   PENDING → CLONING → CONFIGURING → STARTING → WAITING_IP → CONNECTING → READY
 *   → DESTROYING → GONE, plus FAILED; READY ⇄ PAUSED (sandbox-pause.h: the container
 *   stopped, its disk kept).
 * Every step runs under the create deadline (create_timeout_s) and a per-step cap; any
 * failure ends in a destroy attempt with its own deadline (ENGINE_CLEANUP_TIMEOUT_MS),
 * then the create callback reports the first failure.
 *
 * Errors reach callbacks as a struct engine_error (NULL on success); the daemon maps
 * the kind onto its wire codes. Loop thread only; lib/ logs at debug level only (the
 * caller may pass a notice hook for what the operator must see). */
#pragma once

#include "macro.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <uv.h>

#include "config.h"
#include "util.h"

#define ENGINE_CLEANUP_TIMEOUT_MS 120000u /* a destroy, on its own deadline */
#define ENGINE_STEP_CLONE_MS 180000u      /* per-step caps (also capped by create_timeout_s) */
#define ENGINE_STEP_CONFIG_MS 60000u
/* ENGINE_FW_QUEUE_MAX (internet changes waiting per sandbox; past it: ENGINE_E_BUSY):
 * proto/api-limits.h */
#define ENGINE_STEP_START_MS 120000u
#define ENGINE_STEP_IP_MS 120000u
#define ENGINE_IP_POLL_MIN_MS 50u
#define ENGINE_IP_POLL_MAX_MS 1000u
#define ENGINE_PROBE_INTERVAL_MS 15000u /* GET /version for daemon.status */
#define ENGINE_PROBE_RETRY_MS 2000u     /* ... while Proxmox is unreachable */
/* one probe, retries included: longer than the 3 s pveproxy holds back every 401, so that a
 * refused token reads as such, not as a timeout */
#define ENGINE_PROBE_TIMEOUT_MS 10000u
#define ENGINE_CONNECT_ATTEMPTS 5u /* SSH connects dropped by a starting sshd, retried */
#define ENGINE_CONNECT_RETRY_MS 200u
#define ENGINE_TOMBSTONES_MAX 4096u /* destroyed ids remembered for idempotent destroy */
#define ENGINE_LABELS_MAX 16u

enum sandbox_state {
    SANDBOX_PENDING,
    SANDBOX_CLONING,
    SANDBOX_CONFIGURING,
    SANDBOX_STARTING,
    SANDBOX_WAITING_IP,
    SANDBOX_CONNECTING,
    SANDBOX_READY,
    SANDBOX_DESTROYING,
    SANDBOX_GONE,
    SANDBOX_FAILED,
    SANDBOX_PAUSED, /* after FAILED: its pumps and forwards end as the sandbox's do */
    _SANDBOX_STATE_MAX,
};
/* "pending", "cloning", ... (internal names). */
const char *sandbox_state_to_string(enum sandbox_state s);
/* The refusal of a call that needs the container running, on a paused sandbox (docs/protocol.md:
 * -32002 with state "paused"). */
#define ENGINE_PAUSED_MESSAGE "the sandbox is paused (sandbox.resume starts it again)"
/* docs/protocol.md's coarse state: "creating", "ready", "paused", "destroying", "destroyed",
 * "failed". */
const char *sandbox_state_to_public(enum sandbox_state s);

enum engine_err_kind {
    ENGINE_E_NOT_FOUND = 1, /* no such sandbox, or not the caller's */
    ENGINE_E_STATE,         /* state does not allow it (state set) */
    ENGINE_E_QUOTA,         /* max_per_uid / max_total */
    ENGINE_E_PROXMOX,       /* http_status, message, upid */
    ENGINE_E_SSH,           /* connect, auth, host key, session lost */
    ENGINE_E_DEADLINE,      /* a deadline passed */
    ENGINE_E_BUSY,          /* capacity / an operation of the same kind is running */
    ENGINE_E_FILE,          /* errno names the file error */
    ENGINE_E_INVALID,       /* bad parameter: param names it */
    ENGINE_E_NOT_CONFIGURED,
    ENGINE_E_SHUTDOWN,
    ENGINE_E_INTERNAL,
};

struct engine_error {
    enum engine_err_kind kind;
    int error;           /* negative errno behind it */
    int http_status;     /* PROXMOX: 0 for a failed task */
    const char *message; /* human text, never NULL */
    const char *upid;    /* PROXMOX: the task, or NULL */
    const char *state;   /* STATE: the sandbox's public state */
    const char *param;   /* INVALID: the parameter */
    const char *cap;     /* INVALID: the operator cap exceeded ("max_cores"), or NULL */
    uint64_t limit;      /* INVALID: the cap's value, or the template's disk size */
    bool templates;      /* INVALID: an unknown template (engine_template_name() lists them) */
};

/* A sandbox. Its fields are the engine's (lib/engine/sandbox-internal.h); the daemon reads
 * them through sandbox_view() below. */
struct sandbox;

/* One lifecycle transition of a sandbox (lib/engine/sandbox-obs.c). Strings are borrowed for the
 * duration of the call. */
struct sandbox_event {
    const char *id;
    uid_t owner_uid;
    const char *state;     /* public state (sandbox_state_to_public) */
    const char *old_state; /* NULL: the create was just requested */
    const char *step;      /* internal state (sandbox_state_to_string) */
    const char *old_step;  /* NULL with old_state */
    const char *reason;    /* failed: the error; destroying/destroyed: why; else NULL */
    const char *node;
    uint32_t vmid; /* 0 until the clone chose one */
    time_t at;
};

struct engine_hooks {
    /* Something the operator must see (firewall disabled, Proxmox unreachable, orphans):
     * level is syslog's. May be NULL. */
    void (*notice)(int level, const char *msg, void *userdata);
    /* A create interrupted by a restart and resumed (engine_resume_creates()) ended: err
     * NULL and sb READY, or the failure (sb being cleaned up). May be NULL. */
    void (*resumed)(const struct engine_error *err, struct sandbox *sb, void *userdata);
    /* Every lifecycle transition of a sandbox, in order (not while the engine closes).
     * May be NULL. */
    void (*event)(const struct sandbox_event *ev, void *userdata);
    void *userdata;
};

struct engine;

/* Creates the engine on loop. cfg is borrowed and must outlive the engine (the daemon's
 * live config). Starts the datacenter firewall check and the /version probe. Without a
 * [proxmox] section the engine exists but every create is ENGINE_E_NOT_CONFIGURED.
 * Returns 0 or a negative errno with *ret_error (malloc'ed text) when not NULL. */
int engine_new(uv_loop_t *loop, const struct config *cfg, const struct engine_hooks *hooks,
               struct engine **ret, char **ret_error);
/* Closes everything (sandboxes are kept in Proxmox: they outlive the daemon). Operations in
 * flight complete with ENGINE_E_SHUTDOWN; cb (may be NULL) runs once every handle is
 * closed. NULL accepted. */
void engine_close(struct engine *e, void (*cb)(void *userdata), void *userdata);

/* ---- lookup and ownership ---- */
/* Visible to uid: owner, or admin (root and admin_group members: decided by the caller). */
struct sandbox *engine_lookup(struct engine *e, const char *id, uid_t uid, bool admin);
/* Iteration over every sandbox (GONE ones excluded). */
struct sandbox *engine_first(struct engine *e);
struct sandbox *engine_next(struct engine *e, struct sandbox *sb);
/* Counts per internal state (n must be _SANDBOX_STATE_MAX). */
void engine_count_states(const struct engine *e, unsigned counts[_SANDBOX_STATE_MAX]);
/* Proxmox reachability from the periodic /version probe. last_error NULL when fine. */
void engine_proxmox_status(const struct engine *e, int *ret_reachable, const char **ret_last_error);
bool engine_configured(const struct engine *e);
/* Reads the isolation prerequisites again (the templates' configurations and the
 * datacenter firewall): at reload. */
void engine_recheck(struct engine *e);
/* daemon.status "checks": the datacenter firewall and each template's isolation check. */
void engine_checks_status_add(struct engine *e, json_object *status);
/* The shell command that probes a TCP connect to ip:port (host order) from inside a sandbox:
 * `nc` when the sandbox has it, else bash's /dev/tcp, bounded by timeout_s seconds; exit
 * status 0 means the address was reached. Into buf; -ENOBUFS when it does not fit. Used by
 * the create's isolation check and sandbox.set_internet's wait. */
int isolation_probe_command(uint32_t ip, unsigned port, unsigned timeout_s, char *buf, size_t size);
const struct config *engine_config(const struct engine *e);

/* ---- create ---- */
/* A volume to mount in a new sandbox (docs/protocol.md sandbox.create "volumes"). */
#define ENGINE_VOLUME_PATH_MAX 255
#define ENGINE_VOLUMES_MAX 8
struct engine_volume_mount {
    char name[ID_MAX + 1];
    char path[ENGINE_VOLUME_PATH_MAX + 1];
    bool read_only;
};

struct sandbox_create_opts {
    uid_t owner_uid;
    const char *hostname; /* NULL: the id */
    int cores;            /* -1: default */
    int memory_mb;
    int disk_gb;
    int net_rate_mbps; /* -1: default_net_rate_mbps; 0: no cap */
    bool internet;
    json_object *internet_allow; /* borrowed, with internet: the allow-list (egress.h normal
                                  * form); NULL: none. Never from the warm pool */
    int64_t ttl_s;               /* -1: default_ttl_s; > max_ttl_s is ENGINE_E_INVALID */
    json_object *labels;         /* borrowed object of strings, may be NULL */
    json_object *env; /* borrowed object of strings (registry_env_ok), may be NULL: set for
                       * every exec and process (sandbox_env_merge, sandbox-io.h) */
    const char *idempotency_key; /* NULL: none (<= REG_KEY_MAX) */
    const char *params_hash;     /* NULL: none; 64 hex (registry_params_hash) */
    const char *template;        /* NULL: the default template; unknown: ENGINE_E_INVALID */
    const char *node; /* NULL: placement; else that node (ENGINE_E_INVALID "node" when unknown) */
    bool pool;        /* internal: a warm pool member (lib/engine/pool.c) */
    bool no_pool;     /* internal: never served from the warm pool */
    /* internal (sandbox-fork.c): a fork child, cloned from this container's snapshot
     * fork_snap (on opts->node) instead of the template; its first SSH connect accepts the
     * host key pin fork_pin (the parent's; "" or NULL: the template's pins). fork_slot: its
     * place in the queue of the source's clones (the create deadline counts that many more). */
    uint32_t fork_vmid;
    const char *fork_snap;
    const char *fork_pin;
    unsigned fork_slot;
    /* calls that need the container resume a paused sandbox (sandbox-pause.h); paused after
     * auto_pause_s idle (-1: never; 1..max_paused_ttl_s, else ENGINE_E_INVALID) */
    bool resume_on_use;
    int64_t auto_pause_s;
    /* volumes to mount before the first start (volume.h): never from the warm pool */
    const struct engine_volume_mount *volumes;
    size_t n_volumes;
};
/* sb is valid only during the callback (state READY on success). */
typedef void (*engine_sandbox_cb)(const struct engine_error *err, struct sandbox *sb,
                                  void *userdata);
/* Starts a create. Returns 0 (cb runs later exactly once) or an error through *ret_err
 * synchronously (quota, invalid, not configured: returns -EINVAL/-EDQUOT/...; cb never
 * runs). err_out is filled for synchronous failures. */
int engine_create(struct engine *e, const struct sandbox_create_opts *opts, engine_sandbox_cb cb,
                  void *userdata, struct engine_error *ret_err);

/* ---- templates (lib/engine/sandbox-template.c) ---- */
/* The i-th template's name (the default one first), NULL past the last. */
const char *engine_template_name(const struct engine *e, size_t i);

/* ---- resize ---- */
/* Changes a READY sandbox's cores, memory and bandwidth cap (live) and grows its disk; -1
 * leaves one as it is. Caps and a shrinking disk are ENGINE_E_INVALID (synchronous). cb
 * gets sb. */
struct engine_resize_sizes {
    int cores, memory_mb, disk_gb;
    int net_rate_mbps; /* 0: no cap */
};
int engine_resize(struct engine *e, struct sandbox *sb, const struct engine_resize_sizes *sz,
                  engine_sandbox_cb cb, void *userdata, struct engine_error *ret_err);

/* ---- warm pool (lib/engine/pool.c) ---- */
struct engine_pool_stats {
    const char *template;
    unsigned target, ready, filling;
    uint64_t hits, misses;
};
/* Stats of the i-th template's pool: the configured templates, then the templates made from
 * sandboxes that [pool] warm.NAME names; false past the last. */
bool engine_pool_stats(const struct engine *e, size_t i, struct engine_pool_stats *ret);
/* Applies [pool] after a reload (or at start): fills up to the targets, destroys surplus. */
void engine_pool_apply(struct engine *e);
/* Stops filling (the daemon stops): members stay as they are; creates are served cold. */
void engine_pool_pause(struct engine *e);

/* ---- destroy ---- */
typedef void (*engine_done_cb)(const struct engine_error *err, void *userdata);
/* Destroys sb (any state; a create in progress is stopped and cleaned up). cb runs once the
 * container is gone (or the destroy failed). Several destroys of one sandbox share the
 * outcome. A destroy that cannot start (SHUTDOWN, INTERNAL) fills ret_err; cb never runs. */
int engine_destroy(struct engine *e, struct sandbox *sb, engine_done_cb cb, void *userdata,
                   struct engine_error *ret_err);
/* Why sb is (about to be) destroyed, for the audit trail, metrics and events: one of
 * "caller", "lease_expired", "rollback", "retry", "shutdown" (static strings); the first
 * reason given wins. Without one, a destroy is "rollback" while a create runs, else
 * "other". caller_uid: who asked, or -1 when the daemon acts on its own. */
void engine_destroy_reason(struct sandbox *sb, const char *reason, int64_t caller_uid);
/* True when id was destroyed by this engine and belonged to uid (admin: any owner). */
bool engine_was_destroyed(const struct engine *e, const char *id, uid_t uid, bool admin);

/* ---- internet ---- */
/* allow (borrowed, with enabled; NULL: none): the allow-list (egress.h normal form). */
int engine_set_internet(struct engine *e, struct sandbox *sb, bool enabled, json_object *allow,
                        engine_sandbox_cb cb, void *userdata, struct engine_error *ret_err);

/* ---- work in a READY sandbox (commands, files, transfers, background processes):
 * sandbox-io.h ---- */

/* ---- static addresses (lib/engine/sandbox-addr.c) ---- */
bool engine_static_addresses(const struct engine *e);
/* The reconcile saw vmid in the pool with net0 (a property string): its address, when it is
 * static and in the range, is not handed out until engine_addr_release(vmid). */
void engine_addr_hold(struct engine *e, uint32_t vmid, const char *net0);
void engine_addr_release(struct engine *e, uint32_t vmid);

/* ---- for lib/engine/reconcile.c (registry, leases, recovery) ---- */
struct pve_client;
struct registry;
struct registry_record;
uv_loop_t *engine_loop(const struct engine *e);
struct pve_client *engine_pve(const struct engine *e);
struct registry *engine_registry(const struct engine *e);
bool engine_closing(const struct engine *e);
/* Whether a container (vmid, of sandbox `self`, NULL: none in the table) may have the
 * IPv4 address ip, as reported by Proxmox from inside it (any mode; sandbox-addr.c): 0, or
 * -EPERM with the reason in why. Refused: not an IPv4 address; the gateway; an address of
 * the daemon's host; the address of another sandbox of the table (its container not yet
 * gone) or held by another container (engine_addr_hold()); outside [network] addresses
 * (when set), else outside the gateway's prefix (when both set). -EBUSY (why set) when
 * the only objection is a sandbox being destroyed: its delete may have freed the lease
 * before the daemon saw the delete end, so the answer is "not yet", to be asked again. */
int engine_addr_check(struct engine *e, const struct sandbox *self, uint32_t vmid, const char *ip,
                      char *why, size_t size);
/* A refused address: logged and audited ("sandbox.address_refused"). sandbox may be NULL. */
void engine_addr_refused(const char *sandbox, uint32_t vmid, const char *node, const char *ip,
                         const char *why);
/* Puts a READY sandbox rebuilt from a record into the table (re-attach after a restart);
 * its SSH pool connects on first use. A record in state paused gives a PAUSED sandbox (its
 * address may be unknown). -EEXIST when the id is already there. A READY one whose record
 * says it has volumes has its mount points checked (engine_attach_recover()). */
int engine_adopt(struct engine *e, const struct registry_record *r, struct sandbox **ret);
/* At start, before the first reconcile: the keyed creates of recs interrupted while cloning
 * (state cloning or configuring, vmid and clone UPID recorded, lease alive) go back into
 * the table and run on from the wait for their clone task (sandbox-resume.c); each such
 * record is freed and its slot set to NULL. Their outcome goes to the resumed hook. Returns
 * how many were resumed. */
size_t engine_resume_creates(struct engine *e, struct registry_record **recs, size_t n);
/* Saves sb's record now (asynchronously; cb may be NULL, errors then only logged). */
int engine_save(struct sandbox *sb, void (*cb)(int r, void *userdata), void *userdata);
/* True while a create, destroy or internet change of sb is running. */
bool sandbox_busy(const struct sandbox *sb);

/* ---- read-only view of a sandbox (lib/engine/sandbox-view.c) ----
 * What the daemon reads of a sandbox, so that it never touches struct sandbox's
 * fields. Strings are borrowed and valid while the sandbox is; NULL when unknown. */
struct sandbox_info {
    const char *id;
    enum sandbox_state state;
    /* The public state, or "unreachable" for a ready sandbox whose node is down. */
    const char *public_state;
    uid_t owner;
    uint32_t vmid; /* 0 until the clone chose one */
    const char *node;
    const char *hostname;
    const char *ip;
    bool internet;
    json_object *internet_allow; /* borrowed array, NULL: none */
    unsigned cores;
    unsigned memory_mb;
    unsigned disk_gb;
    unsigned net_rate_mbps; /* 0: no cap */
    json_object *labels;    /* object of strings, borrowed */
    time_t created_at;
    time_t expires_at;
    const char *error; /* last failure text */
    /* marker_key_hash(owner, idempotency key) and the create params' hash; "" = none. */
    const char *idem_hash;
    const char *params_hash;
    const char *template; /* the template's name */
    bool pool;            /* a warm pool member */
};
/* Fills *ret with what sb is now. */
void sandbox_view(const struct sandbox *sb, struct sandbox_info *ret);
