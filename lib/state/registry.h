/* The write-ahead registry: durable storage of sandbox records in the state
 * folder, one JSON file per sandbox, and the daemon instance id.
 *
 *   <state_dir>/instance               the daemon instance id ("i-..." + '\n')
 *   <state_dir>/sandboxes/<id>.json    one record per sandbox (format version 1)
 *   <state_dir>/sandboxes/<id>.json.corrupt[.N]   records moved aside by registry_load()
 *
 * Every write is atomic and durable (temp file, fsync, rename, fsync of the
 * folder); a removal is unlink + fsync of the folder. The module only stores
 * and (de)serialises: lookups by id or idempotency key are the caller's, in
 * memory. registry_save()/registry_remove() are synchronous file I/O with two fsyncs
 * (measured here 1-8 ms per save, worst cases tens of ms): on the loop thread
 * use registry_save_async()/registry_remove_async(), which run on the registry's own
 * writer thread (never on libuv's thread pool, where remote file I/O may wait
 * for its deadline). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <json-c/json.h>
#include <uv.h>

#include "macro.h"
#include "util.h"

#define REG_FORMAT_VERSION 1
/* A record file larger than this is corrupt. */
#define REG_RECORD_MAX (64 * 1024)
/* Files in sandboxes/ looked at by one registry_load(); past it the rest are
 * reported as one problem and left alone. */
#define REG_FILES_MAX 100000
/* Limits on stored strings (the protocol's limits are lower). */
#define REG_KEY_MAX 64     /* idempotency key */
#define REG_NODE_MAX 64    /* Proxmox node name */
#define REG_UPID_MAX 512   /* Proxmox UPID */
#define REG_HOST_MAX 253   /* hostname */
#define REG_IP_MAX 64      /* textual IP address */
#define REG_ERROR_MAX 1024 /* last error text */
#define REG_LABELS_MAX 16
#define REG_LABEL_LEN_MAX 256
#define REG_TEMPLATE_MAX 32 /* template name: [a-z0-9-] */

/* a Proxmox snapshot name */
#define REG_FORK_SNAPSHOT_MAX 40

/* a volume's name ([a-z0-9-], proto/params-volume.h PARAMS_VOLUME_NAME_MAX) */
#define REG_VOLUME_MAX 32

/* sandbox.create's env (proto/api-limits.h PARAMS_CREATE_ENV_*): names [A-Za-z_][A-Za-z0-9_]* */
#define REG_ENV_MAX 64
#define REG_ENV_NAME_MAX 255
#define REG_ENV_BYTES_MAX 4096 /* names and values */
/* Canonical params JSON longer than this is refused by registry_params_hash(). */
#define REG_PARAMS_MAX (64 * 1024)
#define REG_PARAMS_DEPTH_MAX 32

/* Where a sandbox is in its life, as recorded. Mirrors the lifecycle:
 * PENDING is the intent (id and vmid chosen, nothing created in Proxmox yet);
 * CLONING onward a container may exist. A sandbox that is gone has no record. */
enum registry_state {
    REG_PENDING,
    REG_CLONING,
    REG_CONFIGURING,
    REG_STARTING,
    REG_WAITING_IP,
    REG_CONNECTING,
    REG_READY,
    REG_DESTROYING,
    REG_FAILED,
    REG_PAUSED, /* stopped with its disk kept (sandbox.pause); written before the stop */
    _REG_STATE_MAX,
};
/* "pending", "cloning", "configuring", "starting", "waiting_ip", "connecting",
 * "ready", "destroying", "failed", "paused"; NULL for anything else. */
const char *registry_state_to_string(enum registry_state s);
/* The enum value, or -EINVAL. */
int registry_state_from_string(const char *s);

/* One sandbox. Strings are owned (free()d by registry_record_free), NULL = unset.
 * labels is an owned reference to a JSON object of string values, or NULL. */
struct registry_record {
    char *id;       /* required: [a-z0-9-], <= ID_MAX */
    char *instance; /* required: daemon instance id that created it */
    uid_t owner_uid;
    char *idempotency_key; /* optional, <= REG_KEY_MAX bytes */
    char *params_hash;     /* optional: 64 hex (registry_params_hash) */
    int vmid;              /* 0 = not chosen yet; else 100..999999999 */
    char *node;            /* optional until chosen */
    enum registry_state state;
    char *upid;     /* optional: the task being waited for (clone, start, destroy) */
    char *hostname; /* optional */
    char *ip;       /* optional: last known address */
    unsigned cores;
    uint64_t memory_mb;
    uint64_t disk_gb;
    unsigned net_rate_mbps; /* 0: no cap (the field is left out) */
    bool internet;
    json_object *internet_allow; /* optional: with internet, the allow-list (an owned array of
                                  * entries in egress.h's normal form) */
    bool internet_pending;       /* a firewall change was starting: internet and internet_allow
                                  * are the state before it (left out when false) */
    json_object *labels;
    time_t created_at; /* required */
    time_t expires_at; /* required: lease expiry */
    char *error;       /* optional: why it failed */
    char *host_key;    /* optional: the sandbox's own SSH host key pin ("SHA256:...",
                        * hostkey.h); unset: the template's pins apply */
    char *template;    /* optional: the template's name (NULL: the default one) */
    bool pool;         /* a warm pool member: owned by the pool, not by owner_uid */
    json_object *env;  /* optional: an owned object of strings, the variables every exec and
                        * process gets (secrets: this file is the only place they are kept) */
    /* optional: a snapshot taken for a fork, deleted once the fork ended (after a restart:
     * by the lease tick, lib/engine/sandbox-fork.c) */
    char *fork_snapshot;
    /* sandbox.create's resume_on_use (left out when false) and auto_pause_s (0: none, left
     * out) */
    bool resume_on_use;
    unsigned auto_pause_s;
    /* sandbox.create asked for volumes (left out when false): an interrupted create is then
     * rolled back, never resumed (lib/engine/volume-attach.c) */
    bool volumes;
    /* optional: the volume a sandbox.detach takes back, written before the container's stop
     * and left out once the volume moved: a re-attach finishes the detach
     * (lib/engine/sandbox-attach.c) */
    char *detaching;
};

struct registry_record *registry_record_new(void);
struct registry_record *registry_record_free(struct registry_record *r);
static inline void registry_record_freep(struct registry_record **r)
{
    registry_record_free(*r);
}
#define _cleanup_record_ _cleanup_(registry_record_freep)
/* A deep copy, or NULL on ENOMEM. */
struct registry_record *registry_record_dup(const struct registry_record *r);
/* Frees an array returned by registry_load() and its records. Returns NULL. */
struct registry_record **registry_records_free(struct registry_record **v, size_t n);
/* An env as a record keeps it (NULL included): the limits above. */
bool registry_env_ok(json_object *env);
/* Checks every field against the limits above. 0 or -EINVAL. */
int registry_record_validate(const struct registry_record *r);
/* (De)serialisation, exposed for tests and tools. The JSON is an object with
 * "version": REG_FORMAT_VERSION. from_json returns -EBADMSG for a wrong shape,
 * missing field or bad value, -EPROTONOSUPPORT for another version. */
int registry_record_to_json(const struct registry_record *r, char **ret_json);
int registry_record_from_json(const char *json, size_t n, struct registry_record **ret);

/* A record file that registry_load() could not use. */
struct registry_problem {
    char *file;     /* name inside sandboxes/ */
    int error;      /* -EBADMSG (torn, corrupt, incomplete, name/id mismatch),
                       -EPROTONOSUPPORT (version), -EFBIG (size), -errno (unreadable) */
    char *reason;   /* human text */
    char *moved_to; /* new name inside sandboxes/, NULL if it could not be moved */
};
struct registry_problem *registry_problems_free(struct registry_problem *v, size_t n);

struct registry;

/* The registry is reference counted only so that asynchronous operations can
 * finish after registry_free(): registry_free() drops the caller's reference. */
/* Opens (creating with mode 0700 as needed) state_dir and state_dir/sandboxes
 * and loads the instance id, creating it on first use. A new instance id is
 * derived from the machine id and the state folder's path when the machine has
 * one, so a host that lost its state folder gets the same id back (its markers
 * stay recognisable); otherwise it is random. An unreadable or invalid
 * instance file is moved aside to instance.corrupt and replaced. */
int registry_open(const char *state_dir, struct registry **ret);
struct registry *registry_free(struct registry *reg);
const char *registry_instance_id(const struct registry *reg);
const char *registry_state_dir(const struct registry *reg);

/* Reads every record in sandboxes/. Records that cannot be used (torn,
 * corrupt JSON, unknown version, missing fields, file name not matching the
 * id, too large) never make this fail: each is renamed to
 * "<name>.corrupt" (".corrupt.N" if taken), and returned in ret_problems so
 * that reconcile resolves the sandbox from Proxmox. Temp files left by a crash
 * in the middle of a save are removed (the previous record, if any, is intact;
 * not while asynchronous operations of this registry are running).
 * The records come sorted by id. ret_problems/ret_n_problems may be NULL (the
 * problems are then only logged at debug level). */
int registry_load(struct registry *reg, struct registry_record ***ret_records, size_t *ret_n,
                  struct registry_problem **ret_problems, size_t *ret_n_problems);
/* Durably writes r (validated first: -EINVAL) as sandboxes/<id>.json. */
int registry_save(struct registry *reg, const struct registry_record *r);
/* Durably removes the record. -ENOENT if there was none, -EINVAL for a bad id. */
int registry_remove(struct registry *reg, const char *id);

/* Asynchronous registry_save()/registry_remove() for the loop thread. The record is
 * validated and serialised during the call (r may change or be freed right
 * after); the write and fsyncs run on the registry's writer thread (started by
 * the first call, joined when the registry is freed), one at a time in issue
 * order; cb (may be NULL) then runs on the loop with 0 or a negative errno (as
 * the synchronous call would return). Operations complete in the order they
 * were issued, so the last state saved is the one on disk. Each pending
 * operation holds a uv_async_t on the loop until its callback has run.
 * All operations of one registry must use the same loop (-EINVAL otherwise).
 * On error (-EINVAL, -ENOMEM, -EAGAIN: no thread) cb is not called. Do not mix synchronous and
 * asynchronous writes of the same id while operations are pending.
 * registry_free() with operations pending is allowed: they finish, their callbacks
 * run, and the registry is freed after the last one. Run the loop until
 * registry_pending() is 0 before closing it. */
typedef void (*registry_done_fn)(int r, void *userdata);
int registry_save_async(struct registry *reg, uv_loop_t *loop, const struct registry_record *r,
                        registry_done_fn cb, void *userdata);
int registry_remove_async(struct registry *reg, uv_loop_t *loop, const char *id,
                          registry_done_fn cb, void *userdata);
/* Asynchronous operations issued and not yet completed (callback not yet run). */
size_t registry_pending(const struct registry *reg);

/* SHA-256 hex of params serialised canonically: object keys sorted bytewise,
 * no whitespace, integral doubles written as integers, strings escaped the
 * same way every time. Same params in any key order give the same hash.
 * -E2BIG past REG_PARAMS_MAX bytes or REG_PARAMS_DEPTH_MAX nesting. The caller
 * decides which params take part (e.g. without idempotency_key). */
int registry_params_hash(json_object *params, char ret[SHA256_HEX_SIZE]);
