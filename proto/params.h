/* Typed parsing and validation of the params of every method of docs/protocol.md.
 * Pure: no loop, no I/O. The parse() of each params kind (struct params_spec below)
 * takes the request's "params" (NULL when absent; borrowed), fills a caller-owned
 * struct on success and otherwise
 * describes the offending parameter in a params_error, from which the daemon
 * builds the -32602 response with rpc_invalid_params_new(id, e.param, e.reason).
 *
 * Unknown parameters, wrong JSON types (null included: leave an optional
 * parameter out instead) and values outside the limits below are rejected.
 * Defaults fixed by docs/protocol.md are filled in here; limits and defaults that
 * come from the configuration (ttl, cores, memory, disk) are not: such fields
 * stay "unset" (-1 / NULL) and the engine applies its configured values. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api-limits.h"

/* ---- limits: proto/api-limits.h (published in sandboxd.openrpc.json) ---------- */
#define PARAMS_MODE_DEFAULT 0644

/* What was wrong: param names the parameter ("params" for the container
 * itself), reason says why in a sentence fragment; variable names the variable of an "env"
 * at fault ("" otherwise); min..max is the range a value missed (has_range). The daemon
 * reports it as params_error_data() (params-internal.h) describes. */
struct params_error {
    char param[64];
    char reason[192];
    char variable[PARAMS_ENV_NAME_MAX + 1];
    bool has_range;
    int64_t min, max;
};

struct params_volume_mount;

struct params_kv {
    char *key;
    char *value;
};

struct params_kv_list {
    size_t n;
    struct params_kv *items; /* labels: sorted by key; env: as given */
};

/* sandbox.create */
struct params_sandbox_create {
    char *hostname;              /* NULL: derived from the id */
    int cores;                   /* -1: config default_cores */
    int memory_mb;               /* -1: config default_memory_mb */
    int disk_gb;                 /* -1: config default_disk_gb */
    int net_rate_mbps;           /* -1: config default_net_rate_mbps; 0: no cap */
    bool internet;               /* default false */
    json_object *internet_allow; /* internet: {"allow": [...]}: the entries in normal form
                                  * (egress.h), owned; NULL: none */
    int64_t ttl_s;               /* -1: config default_ttl_s (max_ttl_s applies) */
    struct params_kv_list labels;
    char *idempotency_key;     /* NULL: none */
    char *template;            /* NULL: the default template; [a-z0-9-], <= PARAMS_TEMPLATE_MAX */
    char *node;                /* NULL: placement; [A-Za-z0-9._-], <= PARAMS_NODE_MAX */
    struct params_kv_list env; /* for every exec and process: <= PARAMS_CREATE_ENV_MAX, as given */
    bool resume_on_use;        /* a call that needs the container resumes a paused sandbox */
    int64_t auto_pause_s; /* -1: never; else paused after that long idle (<= max_paused_ttl_s) */
    /* "volumes": n_volumes mounts (params-volume.h params_volume_mounts()), owned; NULL: none */
    struct params_volume_mount *volumes;
    size_t n_volumes;
};

/* sandbox.resize: -1 leaves a size as it is; at least one is given. */
struct params_sandbox_resize {
    char id[PARAMS_ID_MAX + 1];
    int cores;
    int memory_mb;
    int disk_gb;
    int net_rate_mbps; /* -1: unchanged; 0: no cap */
};

/* sandbox.get, sandbox.destroy */
struct params_sandbox_id {
    char id[PARAMS_ID_MAX + 1];
};

/* sandbox.destroy */
struct params_sandbox_destroy {
    char id[PARAMS_ID_MAX + 1];
    bool wait; /* false: reply once the destroy has begun */
};

/* sandbox.list */
struct params_sandbox_list {
    bool all;
    struct params_kv_list labels; /* filter: every pair must match */
};

/* sandbox.renew */
struct params_sandbox_renew {
    char id[PARAMS_ID_MAX + 1];
    int64_t ttl_s; /* > 0; config max_ttl_s applies */
};

/* sandbox.set_internet */
struct params_sandbox_set_internet {
    char id[PARAMS_ID_MAX + 1];
    bool enabled;
    bool wait;              /* return once a probe from inside confirms the new state */
    int64_t wait_timeout_s; /* 1..PARAMS_INTERNET_WAIT_S_MAX; 0: the default */
    json_object *allow;     /* an allow-list (egress.h normal form), owned; NULL: none */
};
void params_sandbox_set_internet_done(struct params_sandbox_set_internet *p);

/* sandbox.exec: exactly one of command / argv. */
struct params_sandbox_exec {
    char id[PARAMS_ID_MAX + 1];
    char *command; /* run by /bin/sh -c; NULL when argv is used */
    char **argv;   /* NULL-terminated, argc >= 1; NULL when command is used */
    size_t argc;
    struct params_kv_list env;
    char *cwd;                    /* NULL: the login directory (the user's home with user) */
    char user[EXEC_USER_MAX + 1]; /* "" (the default, root), a name or a decimal uid */
    uint8_t *stdin_data;          /* NUL-terminated copy; NULL when has_stdin is false */
    size_t stdin_len;
    bool has_stdin;
    int64_t timeout_ms;       /* default PARAMS_TIMEOUT_MS_DEFAULT */
    int64_t max_output_bytes; /* per stream, default PARAMS_MAX_OUTPUT_DEFAULT */
    bool stream;
    int64_t stdin_fd, stdout_fd, stderr_fd; /* indexes of passed descriptors; -1: absent */
};

/* file.write: exactly one of content / content_b64 / content_fd. */
struct params_file_write {
    char id[PARAMS_ID_MAX + 1];
    char *path;
    uint8_t *content; /* NUL-terminated copy, never NULL on success unless content_fd */
    size_t content_len;
    int64_t content_fd; /* index of a passed descriptor; -1 when absent */
    unsigned mode;      /* <= 07777, default 0644 */
    bool make_parents;  /* default true */
    int64_t offset;     /* 0..PARAMS_WRITE_END_MAX - content_len; -1: not given */
    bool append;        /* default false; not with offset */
};

/* file.read */
struct params_file_read {
    char id[PARAMS_ID_MAX + 1];
    char *path;
    int64_t offset; /* >= 0, default 0 */
    int64_t length; /* 0..PARAMS_READ_LENGTH_MAX, default PARAMS_READ_LENGTH_MAX; with
                     * to_fd 0..INT64_MAX, default INT64_MAX (to the end of the file) */
    int64_t to_fd;  /* index of a passed descriptor; -1 when absent */
};

/* Each struct is filled by the parse() of its params kind below; free it with its *_done(). */
void params_kv_list_done(struct params_kv_list *l);
void params_sandbox_create_done(struct params_sandbox_create *p);
void params_sandbox_list_done(struct params_sandbox_list *p);
void params_sandbox_exec_done(struct params_sandbox_exec *p);
void params_file_write_done(struct params_file_write *p);
void params_file_read_done(struct params_file_read *p);

/* Same request, for idempotency keys: every field but the key compared as
 * given (unset stays distinct from an explicit default). */
bool params_sandbox_create_equal(const struct params_sandbox_create *a,
                                 const struct params_sandbox_create *b);

/* ---- params kinds ---------------------------------------------------------- */

/* One kind of params, type-erased for a method table: parse() fills the struct of
 * `size` bytes at ret (nothing when size is 0) and returns 0, -EINVAL with *err
 * filled (err may be NULL) or -ENOMEM; on an error the struct is left zeroed, owning
 * nothing. After a success done() (NULL: nothing to free) releases it. */
struct params_spec {
    size_t size;
    int (*parse)(json_object *params, void *ret, struct params_error *err);
    void (*done)(void *p);
};

extern const struct params_spec params_sandbox_create_spec;
extern const struct params_spec params_sandbox_id_spec; /* sandbox.get and others */
extern const struct params_spec params_sandbox_destroy_spec;
extern const struct params_spec params_sandbox_list_spec;
extern const struct params_spec params_sandbox_renew_spec;
extern const struct params_spec params_sandbox_resize_spec;
extern const struct params_spec params_sandbox_set_internet_spec;
extern const struct params_spec params_sandbox_exec_spec;
extern const struct params_spec params_file_write_spec;
extern const struct params_spec params_file_read_spec;
extern const struct params_spec params_none_spec; /* daemon.status, rpc.discover */

/* The data of the -32602 error for e (docs/protocol.md "Errors"): "reason", a sentence that
 * names its subject (`unknown parameter "foo"`, `ttl_s: must be between 1 and 31622400`),
 * "param", and "variable", "min" and "max" when e has them. NULL on ENOMEM. */
json_object *params_error_data(const struct params_error *e);

/* ---- the protocol's method names ------------------------------------------- */

/* docs/protocol.md's names and the params kind each takes. This is the schema, not a
 * dispatch table: the daemon's one table (daemon/methods.h) holds the handlers,
 * and its registration refuses a row whose params kind differs from this. */
struct rpc_method_info {
    const char *name;
    bool planned;                     /* name reserved by docs/protocol.md, not specified yet */
    const struct params_spec *params; /* NULL for planned methods */
};

/* The entry for a method name, or NULL when docs/protocol.md has no such name. */
const struct rpc_method_info *rpc_method_find(const char *name);
/* Every entry, in docs/protocol.md's order (planned names last). */
const struct rpc_method_info *rpc_methods(size_t *ret_n);
