/* What the files of the sandbox engine share (sandbox.c, sandbox-create.c,
 * sandbox-destroy.c, sandbox-probe.c, sandbox-io.c, sandbox-view.c; reconcile.c and the
 * engine's tests read sandboxes too): struct sandbox, the engine itself, the operations
 * attached to a sandbox, and the helpers every step uses. Engine code only. */
#pragma once

#include "macro.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "api-limits.h"
#include "json-util.h"
#include "op-step.h"
#include "pve.h"
#include "sandbox.h"
#include "sshexec.h"
#include "sshfile.h"
#include "sshs.h"
#include "util.h"

struct pve_result;
struct pve_vm_list;
struct registry_record;
struct sandbox_job;
struct sandbox_pump;
struct relay_ep;
struct volumes;

struct sandbox {
    char id[ID_MAX + 1];
    enum sandbox_state state;
    uid_t owner_uid;
    uint32_t vmid; /* 0 until the clone chose one */
    char *node;
    char *hostname;
    char *ip; /* NULL until known */
    bool internet;
    json_object *internet_allow;   /* with internet: the allow-list (egress.h normal form), owned;
                                    * NULL: none (internet on is the internet group) */
    struct egress_run *egress_run; /* the firewall change running (sandbox-egress.c) */
    unsigned cores;
    unsigned memory_mb;
    unsigned disk_gb;
    unsigned net_rate_mbps; /* net0 rate=, in Mbit/s; 0: no cap */
    json_object *labels;    /* object of strings, never NULL */
    json_object *env;       /* sandbox.create's env: object of strings, NULL: none. Secret: only
                             * in the registry record and the commands it goes to */
    time_t created_at;
    time_t expires_at;
    char *error;                       /* last failure text, or NULL */
    char idem_hash[SHA256_HEX_SIZE];   /* marker_key_hash(owner, idempotency key); "" = none */
    char params_hash[SHA256_HEX_SIZE]; /* hash of the create params; "" = none */
    char *idempotency_key;             /* the key as sent (NULL: none, or known by hash only) */
    char host_key[64];         /* its own SSH host key pin (hostkey.h); "": the template's pins */
    char *upid;                /* the clone task, recorded once it started (NULL: none yet) */
    char template[ID_MAX + 1]; /* the template's name */
    bool pool_member;          /* a warm pool member (owned by the pool) */
    bool disk_explicit;        /* disk_gb was asked for: smaller than the template fails */
    /* engine-private below */
    struct engine *engine;
    struct sandbox *next, *prev;
    struct sshpool *pool;
    struct sshfile *file;
    struct sb_op *create_op;
    struct sb_waiter *destroy_waiters;
    struct pve_call *call;
    uv_timer_t timer; /* a create step's poll or retry; its close frees the sandbox */
    bool close_counted;
    bool destroy_requested;
    bool fw_busy;             /* a firewall call for an internet change runs */
    struct fw_op *fw_waiting; /* internet changes queued behind it, oldest first */
    unsigned n_fw_waiting;
    struct op_run run;           /* the running operation's steps (op-step.h) */
    unsigned vmid_attempts;      /* vmids found taken at clone time so far */
    bool resumed;                /* a create interrupted by a restart, finished after it */
    bool clone_issued;           /* the clone call went out: vmid may name a container of ours */
    uint64_t rootfs_gb;          /* the clone's disk size (0: unknown), read while configuring */
    char *net0;                  /* static mode: the clone's net0, read while configuring */
    uint64_t ct_started_ms;      /* the container's start completed (uv_now scale); 0: not yet */
    uint64_t started_ms;         /* create start (uv_now scale) */
    struct resize_op *resize_op; /* a sandbox.resize or a pool take running */
    struct snap_op *snap_op;     /* a snapshot, rollback or snapshot delete running */
    struct tmpl_op *tmpl_op;     /* a template.create running (template-create.c) */
    bool rolling_back;           /* a rollback runs: no new session, no command */
    struct pause_op *pause_op;   /* a pause or resume running (sandbox-pause.c) */
    struct attach_op *attach_op; /* a sandbox.attach or sandbox.detach running */
    bool marker_paused;          /* the marker to write says paused=1 */
    bool resume_on_use;          /* sandbox.create's: calls that need the container resume it */
    unsigned auto_pause_s;       /* sandbox.create's: paused after that long idle (0: never) */
    uint64_t last_use_ms;        /* the last request on it began (uv_now scale; 0: none yet) */
    bool auto_pause_probe;       /* auto_pause_s: its background processes are being listed */
    bool auto_pause_quiet;       /* ... and none ran: paused at the next tick if still idle */
    uint64_t auto_pause_next_ms; /* ... not again before (uv_now scale) */
    unsigned refs;               /* held by in-flight engine operations */
    unsigned long_polls;         /* process long-polls running (sandbox-job.c) */
    /* observability (sandbox-obs.c) */
    const char *end_reason; /* why the destroy (static string), NULL until one is known */
    bool end_by_caller;     /* end_uid asked for it */
    uid_t end_uid;
    uint64_t state_since_ms; /* when the current state began (uv_now scale) */
    /* placement again on another node (sandbox-create.c) */
    unsigned replacements; /* times the create moved to another node */
    bool no_replace;       /* moving failed: the create fails as usual */
    bool node_asked;       /* the caller (or the pool, per node) chose the node: no move */
    /* a fork child (sandbox-fork.c): cloned from fork_vmid's snapshot fork_snap */
    uint32_t fork_vmid;
    char fork_snap[41];
    char fork_pin[64]; /* the parent's host key pin, for the connect before the rekey */
    unsigned fork_slot;
    /* a fork's parent (sandbox-fork.c): the snapshot taken for a fork, recorded before it is
     * taken and until it is deleted; the forks of it running (busy meanwhile: no lease
     * expiry, no delete of that snapshot); the next retry of a delete left over (uv_now
     * scale) */
    char fork_pending[41];
    char detaching[33]; /* a detach's volume until it moved (registry.h REG_VOLUME_MAX) */
    unsigned forks;
    uint64_t fork_retry_ms;
    /* sandbox.create's volumes (volume-attach.c): the mounts asked for (in memory: they
     * reserve their volumes while the sandbox lives), how many are attached; had_volumes:
     * a sandbox adopted from a record that had some */
    struct engine_volume_mount *vol_mounts;
    size_t n_vol_mounts, n_vol_attached;
    bool had_volumes;
};

/* sb asked for volumes, or was rebuilt with some: no snapshot, rollback, fork or template of
 * it (a volume in a snapshot could not move back to the holder). */
static inline bool sandbox_has_volumes(const struct sandbox *sb)
{
    return sb->n_vol_mounts > 0 || sb->had_volumes;
}
#define SANDBOX_VOLUMES_REFUSED                                                                    \
    "a sandbox with volumes cannot be snapshotted, rolled back, forked or made a template"

/* A create in progress: its callback and its first failure. It outlives the create's steps
 * while the destroy that cleans up after a failed create runs. */
struct sb_op {
    engine_sandbox_cb cb;
    void *userdata;
    /* Reports the create's outcome (the cleanup destroy ended, or the engine closes): set by
     * create_op_new(), so sandbox-destroy.c and sandbox.c never call into sandbox-create.c.
     * A destroy asked for while a step waits between polls is checked through
     * op_step_check_abort(). */
    void (*finish)(struct sandbox *sb);
    bool failed;
    struct engine_error err; /* first failure; strings below */
    char *msg;
    char *upid;
};

/* A caller waiting for a destroy. */
struct sb_waiter {
    engine_done_cb cb;
    void *userdata;
    struct sb_waiter *next;
};

/* A static address a container of the pool has in net0 (sandbox-addr.c). */
struct addr_hold {
    uint32_t vmid;
    uint32_t ip; /* host order */
};

/* ---- sandbox-addr.c: static addresses ([network] mode = static) ---- */
/* A free address of the range (malloc'ed dotted quad); -ENOSPC when every one is in use. */
int engine_addr_allocate(struct engine *e, char **ret_ip);
/* net0 with its ip/gw replaced by ip/prefix and the gateway (malloc'ed). */
int net0_with_address(const char *net0, const char *ip, const struct config_network *n, char **ret);
/* net0 with its rate= for a cap of mbps Mbit/s (Proxmox's MB/s are MiB/s: mbps / 8.388608,
 * to the nearest thousandth), or without rate= for 0. 0 or -ENOMEM. */
int net0_with_rate(const char *net0, unsigned mbps, char **ret);
/* The cap in Mbit/s of net0's rate= (MiB/s), rounded; 0 without one (or NULL). */
unsigned net0_rate_mbps(const char *net0);
/* The cap a create or resize asking net_rate_mbps (-1: none) gets, and the operator's check
 * of it (ENGINE_E_INVALID past max_net_rate_mbps; 0, no cap, too when a maximum is set). */
unsigned engine_net_rate(const struct engine *e, int net_rate_mbps);
int engine_check_net_rate(const struct engine *e, int net_rate_mbps, struct engine_error *ret_err);

/* A destroyed id, for idempotent destroys; its container id, kept out of new creates for a
 * while (tomb_vmid_recent()). */
struct tomb {
    char id[ID_MAX + 1];
    uid_t uid;
    uint32_t vmid;
    uint64_t gone_ms; /* now_ms() at the destroy's end */
};

/* ---- the way out in the firewall (sandbox-egress.c) ---- */
struct egress_run;
/* Replaces what the sandbox's firewall lets out by internet off, on (the internet group) or
 * the allow-list allow (a JSON array in normal form, with internet): the old rules and sets
 * removed, then the new ones added (never more allowed than the old or the new state). cb
 * runs once with the outcome (res->error, res->perr), unless sb->call is cancelled. 0 when
 * started, else -errno (cb not called). */
int egress_fw_apply(struct sandbox *sb, bool internet, json_object *allow, uint64_t timeout_ms,
                    pve_done_fn cb, void *userdata);
void egress_run_free(struct egress_run *run);
/* The allow-list a container's firewall holds, read back from its sandboxd-egress rules
 * (rules: its rule list), their IP sets and the proxy rule's names (a lost state folder,
 * reconcile.c). 1 when rules hold none (cb not called); 0 when started: cb gets 0 and the
 * list (borrowed; NULL when the sets are empty) or -errno; for a list of names only, cb is
 * called before this returns. */
typedef void (*egress_read_fn)(int error, json_object *allow, void *userdata);
int egress_fw_read(struct pve_client *pve, const char *node, uint32_t vmid,
                   const struct pve_fw_rules *rules, uint64_t timeout_ms, egress_read_fn cb,
                   void *userdata);
/* The proxy variables (HTTP_PROXY, HTTPS_PROXY, their lower-case forms, NO_PROXY) every
 * exec and process of sb gets, as a JSON object (owned), when [egress] listen is set and
 * sb's allow-list holds a name; else NULL. */
json_object *egress_proxy_env(const struct sandbox *sb);

/* True when sb's allow-list lets ip:port (host order, TCP) through. */
bool egress_sandbox_allows(const struct sandbox *sb, uint32_t ip, unsigned port);

/* An internet change, running or queued behind the running one. */
struct fw_op {
    struct sandbox *sb;
    bool enabled;
    json_object *allow; /* owned; NULL: no list */
    engine_sandbox_cb cb;
    void *userdata;
    struct fw_op *next; /* in sb->fw_waiting */
};

/* A template sandboxes are cloned from (lib/engine/sandbox-template.c), and its warm pool. */
struct engine_template_copy {
    uint32_t vmid;
    char node[CONFIG_NODE_NAME_MAX + 1];
};
/* A replica of a configured template (lib/engine/replica.c): a template of its own in the
 * pool, cloned like a configured copy while not retiring. */
struct engine_replica {
    char name[ID_MAX + 1]; /* the configured template it copies */
    char node[CONFIG_NODE_NAME_MAX + 1];
    uint32_t vmid;
    uint32_t origin; /* the configured vmid it copies (its marker's sandbox=replica-of-VMID) */
    bool retiring;   /* past the template's replicas (or its template is gone): no new clone */
    bool deleting;
    int64_t known_since; /* unix seconds */
};
struct replicas;

struct engine_template {
    char name[ID_MAX + 1];
    uint32_t vmid;
    /* A copy per node (VMID@node,...); none: the one vmid lives on home (lib/engine/cluster.c
     * learns it from /cluster/resources; "" until known, then the first node is used). */
    struct engine_template_copy *copies;
    size_t n_copies;
    char home[CONFIG_NODE_NAME_MAX + 1];
    char *pins;       /* host key pins ("SHA256:..,..") */
    uint64_t disk_gb; /* the template's disk, learnt from the first clone (0: unknown) */
    /* Its isolation prerequisites (sandbox-isolation.c), read at start and at reload: -1
     * not read yet, 0 refused (check_error says why), 1 fine. */
    int check_state;
    char *check_error;
    uint64_t hits, misses;
    unsigned filling;  /* pool creates running */
    unsigned replicas; /* [templates] NAME.replicas (configured templates only) */
    /* A template made from a sandbox (template.create; lib/engine/template-rt.c): heap
     * allocated in engine.rt, on home, its marker in its Proxmox description. */
    bool runtime;
    bool published;                    /* visible to every uid */
    bool deleting;                     /* template.delete runs: no new clone */
    uid_t owner_uid;                   /* who made it */
    char origin[ID_MAX + 1];           /* the sandbox it was made from */
    int64_t created_at;                /* unix seconds */
    char hostkey_hex[SHA256_HEX_SIZE]; /* its pinned host key, as the marker holds it */
    /* What every exec and process of its sandboxes gets unless the call says otherwise
     * (params_template_defaults(): env, cwd, user; template-defaults.c); NULL: none. Kept in
     * its Proxmox description beside the marker. Owned. */
    json_object *defaults;
};

struct engine {
    uv_loop_t *loop;
    const struct config *cfg;
    struct engine_hooks hooks;
    struct pve_client *pve;
    struct registry *reg;
    struct sshs_key *key;
    bool configured;
    struct engine_template *templates; /* the default one first */
    size_t n_templates;
    struct engine_template **rt; /* templates made from sandboxes (template-rt.c) */
    size_t n_rt;
    struct pool *pool;         /* lib/engine/pool.c */
    struct filepool *filepool; /* file call workers (lib/ssh/filepool.h), made at first use */
    struct cluster *cluster;   /* lib/engine/cluster.c: nodes, placement, node health */

    struct sandbox *sandboxes;
    unsigned n_sandboxes;

    uv_timer_t probe;
    bool probe_open;
    struct pve_call *probe_call;
    struct pve_call *fw_call;
    int dc_firewall; /* the datacenter firewall: -1 unknown, 0 off, 1 on (last read) */
    /* the template checks (sandbox-isolation.c): the running read, the template and copy it
     * reads, the first problem of that template, and a new run asked for meanwhile */
    struct pve_call *tmpl_call;
    size_t tmpl_i, tmpl_j;
    char *tmpl_problem;
    bool tmpl_again, tmpl_done;
    int reachable; /* -1 unknown, 0, 1 */
    char *last_error;

    struct tomb *tombs;
    size_t n_tombs, tomb_next;

    struct addr_hold *held; /* static mode: addresses of pool containers not in the table */
    size_t n_held;
    uint32_t addr_next; /* where the next address search starts, in the range */

    /* transfers through descriptors running, by uid (sandbox-job.c): TRANSFER_MAX for
     * transfers, then PUMP_MAX for the pumps of processes */
    struct {
        uid_t uid;
        bool used;
    } transfer_slots[TRANSFER_MAX + PUMP_MAX];
    struct sandbox_job *transfers; /* running descriptor transfers (sandbox-job.c) */
    struct sandbox_pump *pumps;    /* running descriptor pumps (sandbox-pump.c) */
    /* Installed by sandbox-job.c with the first transfer, so that engine_close() in
     * sandbox.c, below it, ends the transfers still running (their callbacks run now with
     * -ECANCELED) and none outlives the engine; NULL while there was none. */
    void (*transfers_stop)(struct engine *e);
    /* Installed by sandbox-pump.c with the first pump, so that sandbox.c, below it, stops
     * the pumps of a sandbox that goes away (sb) or of the engine closing (NULL), their ends
     * reported now, without calling into it; NULL while there was none. */
    void (*pumps_stop)(struct engine *e, const struct sandbox *sb);
    /* SSH-relayed endpoints (sandbox-relay.c: port forwards and preview URLs), and their
     * hook installed with the first one, so that sandbox.c closes the endpoints of a
     * sandbox that goes away (sb) or of the engine closing (NULL) without calling into it;
     * NULL while there was none. */
    struct relay_ep *relays;
    void (*relays_stop)(struct engine *e, const struct sandbox *sb);
    /* The preview listener (preview-listen.c) and its hook for engine_close(); the preview
     * URLs' signing key. */
    struct preview_srv *preview_srv;
    void (*preview_srv_stop)(struct engine *e);
    uint8_t preview_key[64];
    size_t preview_key_len;
    /* The egress proxy ([egress] listen, egress-proxy.c) and its hook, so that sandbox.c
     * closes the proxied connections of a sandbox that goes away (sb) or all of them and
     * the listener when the engine closes (NULL). */
    struct eproxy_srv *eproxy;
    void (*eproxy_stop)(struct engine *e, const struct sandbox *sb);

    /* Volumes (volume.c) and their hook, installed with the first volume call, so that
     * engine_close() in sandbox.c ends the calls waiting or running (ENGINE_E_SHUTDOWN)
     * without calling into it; NULL while there was none. */
    struct volumes *volumes;
    void (*volumes_stop)(struct engine *e);

    bool closing;
    unsigned close_pending;
    struct close_notify closed; /* engine_close()'s callback, run once the engine is freed */

    /* Installed by lib/engine/pool.c with the pool (engine_pool_apply), so the create and the close
     * below it reach the pool without calling into pool.c; NULL while there is none. */
    /* A create that fits a ready pool member takes it: 1 (cb runs later), 0 when none fits. */
    int (*pool_take)(struct engine *e, const struct sandbox_create_opts *opts, int64_t ttl,
                     engine_sandbox_cb cb, void *userdata, struct engine_error *ret_err);
    void (*pool_close)(struct engine *e);
    /* The replicas of configured templates (replica.c; read by engine_template_vmids()), and
     * their builder with its close hook, installed by engine_replicas_apply(). */
    struct engine_replica *repl;
    size_t n_repl;
    struct replicas *replicas;
    void (*replicas_close)(struct engine *e);
    /* Installed by sandbox-create.c with the first create, so lib/engine/cluster.c, below it, moves
     * the creates of a node that went down (creates_replace) without calling into it. */
    void (*creates_replace)(struct engine *e);
    /* Installed by sandbox-destroy.c with the first destroy, likewise: the destroys waiting on
     * a node that went down end (destroys_yield). */
    void (*destroys_yield)(struct engine *e);
};

/* ---- sandbox-base.c: what every engine file may call (it calls nothing of the engine) ---- */
void engine_noticef(struct engine *e, int level, const char *fmt, ...) _printf_(3, 4);
uint64_t now_ms(struct engine *e);
/* An engine_error from a Proxmox result (strings borrowed from res). */
void error_from_pve(const struct pve_result *res, bool closing, struct engine_error *ret);
/* A request refused before it started: fills *ret_err (message and param are static
 * strings) and returns r, a negative errno. */
int engine_refuse(struct engine_error *ret_err, enum engine_err_kind kind, int r, const char *msg,
                  const char *param);
/* engine_refuse() for an allocation that failed: ENGINE_E_INTERNAL, -ENOMEM. */
int engine_refuse_oom(struct engine_error *ret_err);
/* engine_refuse() for an operation the engine cannot start now: ENGINE_E_SHUTDOWN while it
 * closes, ENGINE_E_NOT_CONFIGURED without Proxmox. 0 when it can. */
int engine_refuse_unavailable(const struct engine *e, struct engine_error *ret_err);
/* engine_refuse() for a sandbox not in a state to take the request: ENGINE_E_STATE, -EAGAIN,
 * with the public name of state (a paused one: ENGINE_PAUSED_MESSAGE, state "paused"). */
int engine_refuse_not_ready(struct engine_error *ret_err, enum sandbox_state state);
/* engine_refuse() for a lease of ttl seconds outside 1..max: ENGINE_E_INVALID, -EINVAL on
 * "ttl_s" with msg, naming cap, the configuration key that sets max; 0 when it is within. */
int engine_refuse_ttl(struct engine_error *ret_err, int64_t ttl, unsigned max, const char *msg,
                      const char *cap);
/* engine_refuse() for a command or a file call while a rollback of sb runs: ENGINE_E_BUSY,
 * -EBUSY; 0 when none runs. */
int engine_refuse_rolling_back(const struct sandbox *sb, struct engine_error *ret_err);

/* ---- sandbox.c: table, state, registry, errors ---- */
/* The one place a sandbox's state changes: logged, and saved to the registry (except
 * PENDING, GONE, and while the engine closes). */
void sandbox_set_state(struct sandbox *sb, enum sandbox_state s);
/* The same, with the save's callback: 0 when the save was issued (cb runs then), else a
 * negative errno (no change, a state that is not saved, the engine closing, no save). */
int sandbox_set_state_saved(struct sandbox *sb, enum sandbox_state s, void (*cb)(int r, void *ud),
                            void *userdata);
int sandbox_save(struct sandbox *sb, void (*cb)(int r, void *userdata), void *userdata);
void save_logged(int r, void *userdata);
void sandbox_link(struct sandbox *sb);
void sandbox_unlink(struct sandbox *sb);
void sandbox_maybe_free(struct sandbox *sb);
/* sandbox-adopt.c: a new sandbox, not yet in the table, in state, with what record r holds
 * (id, owner, vmid, node, hostname, internet, sizes, lease, labels, idempotency key and its
 * hash, params hash) and its timer. -EEXIST when r's id is in the table, -ENOMEM. */
int sandbox_from_record(struct engine *e, const struct registry_record *r, enum sandbox_state state,
                        struct sandbox **ret);
/* Drops a sandbox sandbox_from_record() made that is not in the table yet (GONE, freed). */
void sandbox_discard(struct sandbox *sb);
/* A new sandbox's idempotency key (copied, NULL: none) with its hash under owner, and the
 * hash of the params it was created with (kept only when it is SHA256_HEX_SIZE - 1 hex
 * digits). 0, or -ENOMEM. */
int sandbox_set_idempotency(struct sandbox *sb, uid_t owner, const char *key,
                            const char *params_hash);
void sandbox_unref(struct sandbox *sb);
void tomb_add(struct engine *e, const struct sandbox *sb);
/* Whether a sandbox's container of that id was deleted less than two firewall cycles ago. The
 * node's firewall keeps the deleted container's rules (named by its id, with its addresses)
 * until its next cycle, and applies them to a new container of the same id meanwhile. */
bool tomb_vmid_recent(struct engine *e, uint32_t vmid);
int labels_copy(json_object *in, json_object **ret);
/* A copy of an env (registry_env_ok()) into *ret: NULL for NULL or no variables; -EINVAL. */
int env_copy(json_object *in, json_object **ret);
void op_set_error(struct sb_op *op, const struct engine_error *err);
void op_free(struct sb_op *op);
/* The SSH settings for sb's address (strings borrowed from the engine and sb). */
void sandbox_ssh_config(const struct sandbox *sb, struct sshs_config *ret);
void sandbox_close_ssh(struct sandbox *sb);

/* ---- sandbox-obs.c: audit records, metrics and lifecycle events ---- */
/* After every state change (sandbox_set_state). */
void sandbox_observe(struct sandbox *sb, enum sandbox_state old);
/* The sandbox's node went out of placement (reachable false: reported "unreachable") or
 * came back ("ready" again): an event and an audit record. */
void sandbox_observe_reachability(struct sandbox *sb, bool reachable);
/* Once a create is accepted (engine_create). */
void sandbox_observe_requested(struct sandbox *sb);
/* The SSH pool observer of sb's pools (sandbox_ssh_config). */
void sandbox_observe_ssh(int event, unsigned session, void *userdata);

/* ---- sandbox-create.c ---- */
/* A zeroed create operation with its hooks set; NULL when out of memory. */
struct sb_op *create_op_new(void);
/* Reports the create's outcome to its caller (op->failed: the first failure). */
void create_finish(struct sandbox *sb);

/* A new sandbox on node for opts, its intent saved and its create begun (op reports its
 * outcome): 0, or the refusal (op not taken). The caller checked quota and ttl. */
int create_launch(struct engine *e, const struct sandbox_create_opts *opts, int64_t ttl,
                  const char *node, struct sb_op *op, struct engine_error *ret_err);
/* ---- sandbox-fork.c ---- */
/* Deletes the fork snapshots left over by a restart (reconcile's lease tick). */
void fork_cleanup_tick(struct engine *e);
/* sandbox-new.c: a new sandbox filled from opts (the caller checked quota and ttl): 0 or
 * -EINVAL (bad labels), -ENOMEM; and what a create refuses before it looks at the pool. */
int create_sandbox_new(struct engine *e, const struct sandbox_create_opts *opts, int64_t ttl,
                       const char *node, struct sandbox **ret);
int create_check(struct engine *e, const struct sandbox_create_opts *opts, int64_t ttl,
                 struct engine_error *ret_err);
/* A new sandbox's fork fields from opts (none unless opts->fork_vmid). */
void fork_child_init(struct sandbox *sb, const struct sandbox_create_opts *opts);
/* A fork child's clone: from the parent's snapshot, in full, its step's deadline moved past
 * the clones of the siblings ahead of it. Returns the time left to the step. */
struct pve_clone_params;
uint64_t fork_clone_params(struct sandbox *sb, struct pve_clone_params *cp);

/* Runs a resumed create (sandbox-resume.c) from the wait for its recorded clone task. */
void create_resume(struct sandbox *sb);
/* Runs the create again from the choice of a container id. */
void create_restart(struct sandbox *sb);
/* Fails the create (and cleans up), without placing it again. */
void create_fail_now(struct sandbox *sb, const struct engine_error *err);

/* ---- sandbox-create.c: placing a create again when its node goes down ---- */
/* The create's node is down: true when it will be placed again on another node (soon, from
 * the loop; the caller then stops), false when it fails as usual. */
bool create_replace(struct sandbox *sb);
/* A node went down: creates on it waiting for Proxmox move to other nodes now. */
void creates_replace(struct engine *e);

/* ---- sandbox-connect.c: the SSH connect step of the create (an op-step.h row) ---- */
/* Connects a new sb->pool to the sandbox's address (sandbox_ssh_config()); connects a
 * starting sshd drops are retried (ENGINE_CONNECT_ATTEMPTS) within the step's deadline. */
int connect_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);
/* sandbox-restart.c: the steps that bring a stopped sandbox back (rollback, resume, detach): its
 * container started, its address awaited and checked (a new one is taken); a new session. */
int restart_step_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);
int reconnect_step_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);
/* The record saved as it is now: an operation's intent written ahead (an attach), or the
 * address a restart may have changed, in the registry before the caller hears of READY. */
int save_step_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);
/* The registry's callback of a step's save (userdata: the sandbox, a reference taken for
 * the save): the step done, or failed when the record could not be written. */
void save_step_saved(int r, void *userdata);

/* ---- sandbox-rekey.c: the per-sandbox host key steps (op-step.h rows of the create) ---- */
/* True when [ssh] rekey is off: the sandbox keeps the template's host key. */
bool rekey_skip(const struct sandbox *sb);
/* Regenerates the host key over sb->pool (the pin into sb->host_key). */
int rekey_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);
/* Writes the sandbox's marker as it is now into its config (after a rekey: the new pin; a
 * pause: paused=1), the call in sb->call. */
int marker_write_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);
/* Connects again over SSH, with the sandbox's own host key pinned (the session pinned to the
 * template's key is dropped first). */
int rekey_reconnect_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);
/* The container's description for sb: its marker (with the pinned host key once known) and
 * its labels. */
int sandbox_description(const struct sandbox *sb, char **ret);

/* ---- sandbox-isolation-steps.c: the isolation steps of the create (op-step.h rows) ---- */
/* Reads the datacenter firewall's options: the step succeeds when it is enabled, else fails
 * with the refusal (ENGINE_E_NOT_CONFIGURED). The call is in sb->call. */
int isolation_dc_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);
/* Proves the isolation from inside (over sb->pool): the step succeeds once the probe address
 * of the sandbox's case cannot be reached, or a firewall cycle passed since the container
 * started when none is configured; it probes again (op_step_again()) meanwhile, and fails
 * when the address stays reachable up to the step's deadline. */
int isolation_probe_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);

/* ---- sandbox-isolation.c: the isolation prerequisites ---- */
#define ENGINE_DC_FIREWALL_OFF                                                                     \
    "the Proxmox datacenter firewall is disabled (/cluster/firewall/options enable != 1): "        \
    "sandboxes would not be isolated"
/* The isolation prerequisites of a container's (or template's) configuration: unprivileged,
 * and firewall=1 on net0 (Proxmox filters no NIC without it). NULL when it meets them, else
 * what is wrong (a static string naming the key). */
const char *isolation_config_problem(json_object *conf);
/* Reads every template's (and per-node copy's) configuration and checks it; a template
 * that fails is refused (check_error) until a later run finds it fixed. Again when a run is
 * in flight: it reruns once that ends. */
void engine_templates_check(struct engine *e);
/* Frees the template checks' state (engine teardown; the call is cancelled by then). */
void engine_templates_check_free(struct engine *e);
/* Records what the datacenter firewall's options said (a warning when it went off). */
void engine_set_dc_firewall(struct engine *e, bool enabled);

/* ---- sandbox-io.c: the sessions commands and files run on ---- */
/* A re-attached sandbox's SSH pool, created on first use (it connects lazily). */
int sandbox_pool_lazy(struct sandbox *sb);
/* The sandbox's file session (made on first use) for a request: -EAGAIN with ret_err filled
 * unless READY; another negative errno (ret_err not filled) when it cannot be made. */
int sandbox_file_session(struct sandbox *sb, struct sshfile **ret, struct engine_error *ret_err);
/* Fills ret_err for a file request whose submission failed with r (not for -EAGAIN: filled
 * already); returns r. */
int sandbox_file_refused(int r, bool write, struct engine_error *ret_err);
/* A file session of its own (not the sandbox's shared one), for a stream that may last long
 * (a pump): the caller sshfile_close()s it. -EAGAIN (ret_err filled) unless READY. */
int sandbox_sshfile_own(struct sandbox *sb, struct sshfile **ret, struct engine_error *ret_err);

/* ---- sandbox-job.c: commands and descriptor transfers ---- */
/* A transfer slot for uid; ENGINE_E_BUSY past TRANSFER_MAX or TRANSFER_MAX_PER_UID. */
int transfer_slot_take(struct engine *e, uid_t uid, unsigned *ret, struct engine_error *ret_err);
/* A pump slot for uid; ENGINE_E_BUSY past PUMP_MAX or PUMP_MAX_PER_UID. Given back with
 * transfer_slot_put(). */
int pump_slot_take(struct engine *e, uid_t uid, unsigned *ret, struct engine_error *ret_err);
void transfer_slot_put(struct engine *e, unsigned slot);
/* A command of the engine's own on sb's pool, whose callback gets the transport's result
 * (long_poll: counted against SANDBOX_LONG_POLLS_MAX). */
int sandbox_job_exec_raw(struct sandbox *sb, const struct sshexec_params *sp, bool long_poll,
                         void (*cb)(int error, struct sshexec_result *res, void *userdata),
                         void *userdata, struct sandbox_job **ret, struct engine_error *ret_err);

/* ---- sandbox-pump.c ---- */
/* Whether p (NULL: none) follows stdout / stderr. */
void sandbox_pump_pins(const struct sandbox_pump *p, bool *ret_out, bool *ret_err);
/* Starts p for process of sb (takes p; one that cannot start reports its end). */
void pump_start(struct sandbox *sb, struct sandbox_pump *p, const char *process);

/* ---- sandbox-destroy.c ---- */
/* Runs the destroy steps (the state becomes DESTROYING). */
void destroy_start(struct sandbox *sb);

/* ---- sandbox-template.c ---- */
int engine_templates_init(struct engine *e, char **ret_error);
void engine_templates_free(struct engine *e);
/* By name (NULL: the default); NULL when unknown. */
struct engine_template *engine_template_find(struct engine *e, const char *name);
/* template-rt.c: the runtime template named name (NULL: none); frees them all. */
struct engine_template *engine_rt_find(struct engine *e, const char *name);
void engine_rt_free(struct engine *e);
/* Adds a runtime template (its fields copied from *t, pins from its hostkey_hex): 0, -EEXIST,
 * -ENOMEM. */
int engine_rt_add(struct engine *e, const struct engine_template *t);
/* Whether uid may clone from t (configured, published, its own, or admin). */
bool engine_template_visible(const struct engine_template *t, uid_t uid, bool admin);
/* The template a create of uid (pool: a warm pool fill, for nobody) may clone: NULL when
 * unknown, another uid's unpublished one, or one being deleted. */
struct engine_template *engine_template_for(struct engine *e, const char *name, uid_t uid,
                                            bool pool);
/* The template of sb (the default one when its template left the configuration). */
struct engine_template *sandbox_template(const struct sandbox *sb);
/* Refuses what exceeds an operator cap (or a disk below the template's): fills ret_err. */
int engine_check_caps(struct engine *e, const struct engine_template *t, int cores, int memory_mb,
                      int disk_gb, struct engine_error *ret_err);

/* ---- pool.c (sandbox-create.c and sandbox.c, below it, reach its take and close through
 * the hooks it installs on struct engine: pool_take, pool_close) ---- */
/* Something changed (a member ready, failed, destroyed, taken): refill in the background. */
void pool_kick(struct engine *e);

/* ---- cluster.c: nodes, placement and node health ---- */
/* Starts the node table and its refresh (engine_new). */
int cluster_init(struct engine *e);
/* Stops the refresh; its handle's close is one of engine_close()'s pending handles. */
void cluster_close(struct engine *e, void (*closed)(struct engine *e));
/* The node a new sandbox of t goes to: want (NULL: placement; an unknown node or one
 * without t is ENGINE_E_INVALID on "node"), or the refusal in *ret_err (borrowed strings). */
int cluster_place(struct engine *e, const struct engine_template *t, const char *want,
                  unsigned memory_mb, const char **ret_node, struct engine_error *ret_err);
/* The template's copies on node (its one vmid when it has no copies there), then its
 * replicas there that are not retiring, at most max, into out; returns how many. */
size_t engine_template_vmids(struct engine *e, const struct engine_template *t, const char *node,
                             uint32_t *out, size_t max);
/* True while node is taken out (offline in the report, or failed calls in backoff). */
bool cluster_node_down(struct engine *e, const char *node);
/* The nodes that hold t and are up, in [proxmox] nodes order (the warm pool's). */
size_t cluster_nodes_of(struct engine *e, const struct engine_template *t, const char **ret,
                        size_t max);
/* The node placement would choose for a sandbox of t now (memory_mb <= 0: the default), or
 * NULL when none qualifies. Nothing is counted. */
const char *cluster_best_node(struct engine *e, const struct engine_template *t, int memory_mb);
/* True when there is more than one node (node health and moving creates apply). */
bool cluster_alternatives(struct engine *e);
/* For reconcile: the container on node (status as listed) cannot be read now (its node is
 * down, or Proxmox lists it "unknown"): it is neither gone nor an orphan. */
bool cluster_vm_unreachable(struct engine *e, const char *node, const char *status);
/* For reconcile: a marked container of sandbox id that is not vmid lives on (in the table,
 * or recorded in recs): vmid is a leftover and the record stays. */
bool engine_id_elsewhere(struct engine *e, struct registry_record *const *recs, size_t n_recs,
                         const char *id, uint32_t vmid);
/* For reconcile's first run: record r had no readable container. When Proxmox still lists
 * it (members) the record stays (true); a ready, leased one is re-attached, reported
 * unreachable until its node answers. */
bool engine_adopt_unreachable(struct engine *e, const struct registry_record *r,
                              const struct pve_vm_list *members);
/* For engine_close(): a handle of the engine closed. */
void engine_handle_closed(struct engine *e);

/* ---- replica.c: replicas of configured templates ([templates] NAME.replicas) ---- */
/* Starts (or looks again at) the background builds and deletes of replicas: after the first
 * reconcile, so that the replicas already made are known. */
void engine_replicas_apply(struct engine *e);
/* The reconcile read the config of a template in the pool: a replica (a replica marker of this
 * instance's) is known from now on (retiring when past its template's replicas); anything
 * else is left alone. */
int engine_replica_adopt(struct engine *e, uint32_t vmid, const char *node, json_object *conf);
/* Forgets the replicas no longer in the pool listing members (deleted behind the daemon's
 * back): they are made again. */
void engine_replica_prune(struct engine *e, const struct pve_vm_list *members);
/* True while a replica build of this process may own the container vmid (the reconcile leaves
 * it alone). */
bool engine_replica_building(struct engine *e, uint32_t vmid);

/* ---- sandbox-probe.c ---- */
/* Runs the /version probe in ms (0: now). */
void probe_schedule(struct engine *e, uint64_t ms);
