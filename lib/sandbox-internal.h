/* What the files of the sandbox engine share (sandbox.c, sandbox-create.c,
 * sandbox-destroy.c, sandbox-probe.c, sandbox-io.c, sandbox-view.c; reconcile.c and the
 * engine's tests read sandboxes too): struct sandbox, the engine itself, the operations
 * attached to a sandbox, and the helpers every step uses. Engine code only. */
#pragma once

#include "macro.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "json-util.h"
#include "sandbox.h"

struct pve_result;

struct sandbox {
    char id[ID_MAX + 1];
    enum sandbox_state state;
    uid_t owner_uid;
    uint32_t vmid; /* 0 until the clone chose one */
    char *node;
    char *hostname;
    char *ip; /* NULL until known */
    bool internet;
    unsigned cores;
    unsigned memory_mb;
    unsigned disk_gb;
    json_object *labels; /* object of strings, never NULL */
    time_t created_at;
    time_t expires_at;
    char *error;                       /* last failure text, or NULL */
    char idem_hash[SHA256_HEX_SIZE];   /* marker_key_hash(owner, idempotency key); "" = none */
    char params_hash[SHA256_HEX_SIZE]; /* hash of the create params; "" = none */
    char *idempotency_key;             /* the key as sent (NULL: none, or known by hash only) */
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
    unsigned step;             /* the running row of the create or destroy step table */
    uint64_t step_deadline_ms; /* the running create step's deadline (uv_now scale) */
    unsigned ip_poll_ms;       /* the address wait's next poll interval */
    unsigned connect_attempts; /* SSH connects retried so far */
    uint64_t rootfs_gb;        /* the clone's disk size (0: unknown), read while configuring */
    uint64_t started_ms;       /* create start (uv_now scale) */
    uint64_t deadline_ms;      /* create deadline (uv_now scale) */
    uint64_t destroy_deadline_ms;
    unsigned refs; /* held by in-flight engine operations */
    /* observability (sandbox-obs.c) */
    const char *end_reason; /* why the destroy (static string), NULL until one is known */
    bool end_by_caller;     /* end_uid asked for it */
    uid_t end_uid;
    uint64_t state_since_ms; /* when the current state began (uv_now scale) */
};

/* A create in progress: its callback and its first failure. */
struct sb_op {
    engine_sandbox_cb cb;
    void *userdata;
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

/* A destroyed id, for idempotent destroys. */
struct tomb {
    char id[ID_MAX + 1];
    uid_t uid;
};

/* An internet change, running or queued behind the running one. */
struct fw_op {
    struct sandbox *sb;
    bool enabled;
    engine_sandbox_cb cb;
    void *userdata;
    struct fw_op *next; /* in sb->fw_waiting */
};

struct engine {
    uv_loop_t *loop;
    const struct config *cfg;
    struct engine_hooks hooks;
    struct pve_client *pve;
    struct registry *reg;
    struct sshs_key *key;
    char *pins;
    bool configured;

    struct sandbox *sandboxes;
    unsigned n_sandboxes;

    uv_timer_t probe;
    bool probe_open;
    struct pve_call *probe_call;
    struct pve_call *fw_call;
    bool fw_checked;
    int reachable; /* -1 unknown, 0, 1 */
    char *last_error;

    struct tomb *tombs;
    size_t n_tombs, tomb_next;

    bool closing;
    unsigned close_pending;
    void (*close_cb)(void *userdata);
    void *close_userdata;
};

/* ---- sandbox.c: table, state, registry, errors ---- */
void engine_noticef(struct engine *e, int level, const char *fmt, ...) _printf_(3, 4);
uint64_t now_ms(struct engine *e);
/* The one place a sandbox's state changes: logged, and saved to the registry (except
 * PENDING, GONE, and while the engine closes). */
void sandbox_set_state(struct sandbox *sb, enum sandbox_state s);
int sandbox_save(struct sandbox *sb, void (*cb)(int r, void *userdata), void *userdata);
void save_logged(int r, void *userdata);
void sandbox_link(struct sandbox *sb);
void sandbox_unlink(struct sandbox *sb);
void sandbox_maybe_free(struct sandbox *sb);
void sandbox_unref(struct sandbox *sb);
void tomb_add(struct engine *e, const struct sandbox *sb);
int labels_copy(json_object *in, json_object **ret);
void op_set_error(struct sb_op *op, const struct engine_error *err);
void op_free(struct sb_op *op);
/* An engine_error from a Proxmox result (strings borrowed from res). */
void error_from_pve(const struct pve_result *res, bool closing, struct engine_error *ret);
/* The SSH settings for sb's address (strings borrowed from the engine and sb). */
void sandbox_ssh_config(const struct sandbox *sb, struct sshs_config *ret);
void sandbox_close_ssh(struct sandbox *sb);

/* ---- sandbox-obs.c: audit records, metrics and lifecycle events ---- */
/* After every state change (sandbox_set_state). */
void sandbox_observe(struct sandbox *sb, enum sandbox_state old);
/* Once a create is accepted (engine_create). */
void sandbox_observe_requested(struct sandbox *sb);
/* The SSH pool observer of sb's pools (sandbox_ssh_config). */
void sandbox_observe_ssh(int event, unsigned session, void *userdata);

/* ---- sandbox-create.c ---- */
/* Reports the create's outcome to its caller (op->failed: the first failure). */
void create_finish(struct sandbox *sb);
/* Checks a running create for the daemon closing or a destroy request; when either holds,
 * the create fails (and cleans up). Returns true then. */
bool create_check_abort(struct sandbox *sb);

/* ---- sandbox-destroy.c ---- */
/* Runs the destroy steps (the state becomes DESTROYING). */
void destroy_start(struct sandbox *sb);

/* ---- sandbox-probe.c ---- */
/* Runs the /version probe in ms (0: now). */
void probe_schedule(struct engine *e, uint64_t ms);
