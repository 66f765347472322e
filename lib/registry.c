#include "macro.h"
#include "registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-id128.h>

#include "log.h"
#include "macro.h"

#define COMPONENT "registry"
#define SANDBOXES_DIR "sandboxes"
#define INSTANCE_FILE "instance"
#define RECORD_SUFFIX ".json"
#define CORRUPT_SUFFIX ".corrupt"
#define INSTANCE_PREFIX "i-"
#define VMID_MIN 100
#define VMID_MAX 999999999
#define CORES_MAX 8192
#define MEMORY_MB_MAX (UINT64_C(1) << 40)
#define DISK_GB_MAX (UINT64_C(1) << 30)

/* Application id for sd_id128_get_machine_app_specific(): instance ids derived
 * from the machine id never reveal it. */
#define INSTANCE_APP_ID                                                                            \
    SD_ID128_MAKE(00, 03, b6, ab, 9f, 11, 4e, 99, 8d, 58, 40, a8, 7b, b6, 2f, 6d)

enum reg_op {
    REG_OP_SAVE,
    REG_OP_REMOVE,
};

/* One asynchronous save or remove. */
struct reg_job {
    struct reg_job *next;
    struct registry *reg;
    uv_async_t done; /* sent by the writer thread when the write is over */
    enum reg_op op;
    char name[ID_MAX + sizeof(RECORD_SUFFIX) + 1];
    char *data;
    size_t n;
    int result;
    reg_done_fn cb;
    void *userdata;
};

struct registry {
    unsigned n_ref;
    char *state_dir;
    int dir_fd;
    int sb_fd;
    char instance[ID_MAX + 1];
    uv_loop_t *loop;
    size_t n_pending; /* issued, callback not yet run (loop thread only) */
    /* The writer thread, started by the first asynchronous operation. Shared with it under
     * mu: the FIFO of jobs to write and the stop request. */
    bool sync_ready;
    bool writer_started;
    uv_mutex_t mu;
    uv_cond_t cond;
    uv_thread_t writer;
    struct reg_job *todo, **todo_tail;
    bool stop;
};

static const char *const state_names[_REG_STATE_MAX] = {
    [REG_PENDING] = "pending",   [REG_CLONING] = "cloning",       [REG_CONFIGURING] = "configuring",
    [REG_STARTING] = "starting", [REG_WAITING_IP] = "waiting_ip", [REG_CONNECTING] = "connecting",
    [REG_READY] = "ready",       [REG_DESTROYING] = "destroying", [REG_FAILED] = "failed",
};

const char *reg_state_to_string(enum reg_state s)
{
    if ((unsigned)s >= _REG_STATE_MAX)
        return NULL;
    return state_names[s];
}

int reg_state_from_string(const char *s)
{
    if (!s)
        return -EINVAL;
    for (int i = 0; i < _REG_STATE_MAX; i++)
        if (strcmp(s, state_names[i]) == 0)
            return i;
    return -EINVAL;
}

struct reg_record *reg_record_new(void)
{
    return calloc(1, sizeof(struct reg_record));
}

struct reg_record *reg_record_free(struct reg_record *r)
{
    if (!r)
        return NULL;
    free(r->id);
    free(r->instance);
    free(r->idempotency_key);
    free(r->params_hash);
    free(r->node);
    free(r->upid);
    free(r->hostname);
    free(r->ip);
    free(r->error);
    json_object_put(r->labels);
    free(r);
    return NULL;
}

static void reg_record_freep(struct reg_record **r)
{
    reg_record_free(*r);
}
#define _cleanup_record_ _cleanup_(reg_record_freep)

static void json_putp(json_object **o)
{
    json_object_put(*o);
}
#define _cleanup_json_ _cleanup_(json_putp)

struct reg_record *reg_record_dup(const struct reg_record *r)
{
    _cleanup_record_ struct reg_record *c = NULL;

    if (!r)
        return NULL;
    c = reg_record_new();
    if (!c)
        return NULL;
    *c = *r;
    c->id = c->instance = c->idempotency_key = c->params_hash = c->node = c->upid = NULL;
    c->hostname = c->ip = c->error = NULL;
    c->labels = NULL;
    if (strdup_replace(&c->id, r->id) < 0 || strdup_replace(&c->instance, r->instance) < 0 ||
        strdup_replace(&c->idempotency_key, r->idempotency_key) < 0 ||
        strdup_replace(&c->params_hash, r->params_hash) < 0 ||
        strdup_replace(&c->node, r->node) < 0 || strdup_replace(&c->upid, r->upid) < 0 ||
        strdup_replace(&c->hostname, r->hostname) < 0 || strdup_replace(&c->ip, r->ip) < 0 ||
        strdup_replace(&c->error, r->error) < 0)
        return NULL;
    if (r->labels && json_object_deep_copy(r->labels, &c->labels, NULL) < 0)
        return NULL;
    return TAKE_PTR(c);
}

struct reg_record **reg_records_free(struct reg_record **v, size_t n)
{
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        reg_record_free(v[i]);
    free(v);
    return NULL;
}

struct reg_problem *reg_problems_free(struct reg_problem *v, size_t n)
{
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        free(v[i].file);
        free(v[i].reason);
        free(v[i].moved_to);
    }
    free(v);
    return NULL;
}

/* A printable string without control characters, 1..max bytes. */
static bool text_ok(const char *s, size_t max, bool allow_empty)
{
    size_t n;

    if (!s)
        return false;
    n = strlen(s);
    if (n > max || (!allow_empty && n == 0))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

static bool labels_ok(json_object *labels)
{
    size_t count = 0;

    if (!labels)
        return true;
    if (!json_object_is_type(labels, json_type_object))
        return false;
    json_object_object_foreach(labels, k, v)
    {
        if (++count > REG_LABELS_MAX)
            return false;
        if (strlen(k) == 0 || strlen(k) > REG_LABEL_LEN_MAX)
            return false;
        if (!json_object_is_type(v, json_type_string) ||
            json_object_get_string_len(v) > REG_LABEL_LEN_MAX ||
            strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
            return false;
    }
    return true;
}

int reg_record_validate(const struct reg_record *r)
{
    if (!r)
        return -EINVAL;
    if (!id_is_valid(r->id) || !id_is_valid(r->instance))
        return -EINVAL;
    if (r->owner_uid == (uid_t)-1)
        return -EINVAL;
    if (r->idempotency_key && !text_ok(r->idempotency_key, REG_KEY_MAX, false))
        return -EINVAL;
    if (r->params_hash && !hex_is_valid(r->params_hash, 64))
        return -EINVAL;
    if (r->vmid != 0 && (r->vmid < VMID_MIN || r->vmid > VMID_MAX))
        return -EINVAL;
    if (r->node && !text_ok(r->node, REG_NODE_MAX, false))
        return -EINVAL;
    if ((unsigned)r->state >= _REG_STATE_MAX)
        return -EINVAL;
    if (r->upid && !text_ok(r->upid, REG_UPID_MAX, false))
        return -EINVAL;
    if (r->hostname && !text_ok(r->hostname, REG_HOST_MAX, false))
        return -EINVAL;
    if (r->ip && !text_ok(r->ip, REG_IP_MAX, false))
        return -EINVAL;
    if (r->error && !text_ok(r->error, REG_ERROR_MAX, true))
        return -EINVAL;
    if (r->cores > CORES_MAX || r->memory_mb > MEMORY_MB_MAX || r->disk_gb > DISK_GB_MAX)
        return -EINVAL;
    if (!labels_ok(r->labels))
        return -EINVAL;
    if (r->created_at < 0 || r->expires_at < 0)
        return -EINVAL;
    {
        char buf[RFC3339_MAX];
        if (time_format_rfc3339(r->created_at, buf, sizeof(buf)) < 0 ||
            time_format_rfc3339(r->expires_at, buf, sizeof(buf)) < 0)
            return -EINVAL;
    }
    return 0;
}

static int add(json_object *o, const char *key, json_object *v)
{
    if (!v)
        return -ENOMEM;
    if (json_object_object_add(o, key, v) < 0) {
        json_object_put(v);
        return -ENOMEM;
    }
    return 0;
}

static int add_str(json_object *o, const char *key, const char *s)
{
    if (!s)
        return 0;
    return add(o, key, json_object_new_string(s));
}

static int add_time(json_object *o, const char *key, time_t t)
{
    char buf[RFC3339_MAX];
    int r = time_format_rfc3339(t, buf, sizeof(buf));
    if (r < 0)
        return r;
    return add_str(o, key, buf);
}

int reg_record_to_json(const struct reg_record *r, char **ret_json)
{
    _cleanup_json_ json_object *o = NULL;
    const char *s;
    char *out;
    int k;

    if (!ret_json)
        return -EINVAL;
    k = reg_record_validate(r);
    if (k < 0)
        return k;
    o = json_object_new_object();
    if (!o)
        return -ENOMEM;
    if ((k = add(o, "version", json_object_new_int(REG_FORMAT_VERSION))) < 0 ||
        (k = add_str(o, "id", r->id)) < 0 || (k = add_str(o, "instance", r->instance)) < 0 ||
        (k = add(o, "owner_uid", json_object_new_int64(r->owner_uid))) < 0 ||
        (k = add_str(o, "idempotency_key", r->idempotency_key)) < 0 ||
        (k = add_str(o, "params_hash", r->params_hash)) < 0 ||
        (k = add(o, "vmid", json_object_new_int(r->vmid))) < 0 ||
        (k = add_str(o, "node", r->node)) < 0 ||
        (k = add_str(o, "state", reg_state_to_string(r->state))) < 0 ||
        (k = add_str(o, "upid", r->upid)) < 0 || (k = add_str(o, "hostname", r->hostname)) < 0 ||
        (k = add_str(o, "ip", r->ip)) < 0 ||
        (k = add(o, "cores", json_object_new_int64(r->cores))) < 0 ||
        (k = add(o, "memory_mb", json_object_new_int64((int64_t)r->memory_mb))) < 0 ||
        (k = add(o, "disk_gb", json_object_new_int64((int64_t)r->disk_gb))) < 0 ||
        (k = add(o, "internet", json_object_new_boolean(r->internet))) < 0 ||
        (k = add_time(o, "created_at", r->created_at)) < 0 ||
        (k = add_time(o, "expires_at", r->expires_at)) < 0 ||
        (k = add_str(o, "error", r->error)) < 0)
        return k;
    if (r->labels && (k = add(o, "labels", json_object_get(r->labels))) < 0)
        return k;
    s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                              JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!s)
        return -ENOMEM;
    if (asprintf(&out, "%s\n", s) < 0)
        return -ENOMEM;
    *ret_json = out;
    return 0;
}

/* Field getters: -EBADMSG for a wrong type or bad value; a missing optional
 * field leaves the output as it is. */
static int get_str(json_object *o, const char *key, bool required, char **ret)
{
    json_object *v;
    char *c;

    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return required ? -EBADMSG : 0;
    if (!json_object_is_type(v, json_type_string))
        return -EBADMSG;
    if (strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
        return -EBADMSG; /* embedded NUL */
    c = strdup(json_object_get_string(v));
    if (!c)
        return -ENOMEM;
    free(*ret);
    *ret = c;
    return 0;
}

static int get_int(json_object *o, const char *key, bool required, int64_t min, int64_t max,
                   int64_t *ret)
{
    json_object *v;
    int64_t x;

    if (!json_object_object_get_ex(o, key, &v))
        return required ? -EBADMSG : 0;
    if (!json_object_is_type(v, json_type_int))
        return -EBADMSG;
    errno = 0;
    x = json_object_get_int64(v);
    if (errno != 0 || x < min || x > max)
        return -EBADMSG;
    *ret = x;
    return 0;
}

static int get_time(json_object *o, const char *key, time_t *ret)
{
    _cleanup_free_ char *s = NULL;
    int r;

    r = get_str(o, key, true, &s);
    if (r < 0)
        return r;
    return time_parse_rfc3339(s, ret) < 0 ? -EBADMSG : 0;
}

int reg_record_from_json(const char *json, size_t n, struct reg_record **ret)
{
    _cleanup_record_ struct reg_record *r = NULL;
    _cleanup_json_ json_object *o = NULL;
    _cleanup_free_ char *state = NULL;
    json_tokener *tok;
    json_object *v;
    int64_t x;
    int k;

    if (!json || !ret)
        return -EINVAL;
    if (n > REG_RECORD_MAX)
        return -EFBIG;
    tok = json_tokener_new_ex(8);
    if (!tok)
        return -ENOMEM;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    o = json_tokener_parse_ex(tok, json, (int)n);
    if (o && json_tokener_get_error(tok) == json_tokener_success) {
        /* Only whitespace may follow. */
        for (size_t i = json_tokener_get_parse_end(tok); i < n; i++)
            if (!strchr(" \t\r\n", json[i])) {
                json_object_put(o);
                o = NULL;
                break;
            }
    } else {
        json_object_put(o);
        o = NULL;
    }
    json_tokener_free(tok);
    if (!o || !json_object_is_type(o, json_type_object))
        return -EBADMSG;

    if (!json_object_object_get_ex(o, "version", &v) || !json_object_is_type(v, json_type_int))
        return -EBADMSG;
    if (json_object_get_int64(v) != REG_FORMAT_VERSION)
        return -EPROTONOSUPPORT;

    r = reg_record_new();
    if (!r)
        return -ENOMEM;
    if ((k = get_str(o, "id", true, &r->id)) < 0 ||
        (k = get_str(o, "instance", true, &r->instance)) < 0 ||
        (k = get_str(o, "idempotency_key", false, &r->idempotency_key)) < 0 ||
        (k = get_str(o, "params_hash", false, &r->params_hash)) < 0 ||
        (k = get_str(o, "node", false, &r->node)) < 0 ||
        (k = get_str(o, "state", true, &state)) < 0 ||
        (k = get_str(o, "upid", false, &r->upid)) < 0 ||
        (k = get_str(o, "hostname", false, &r->hostname)) < 0 ||
        (k = get_str(o, "ip", false, &r->ip)) < 0 ||
        (k = get_str(o, "error", false, &r->error)) < 0 ||
        (k = get_time(o, "created_at", &r->created_at)) < 0 ||
        (k = get_time(o, "expires_at", &r->expires_at)) < 0)
        return k == -ENOMEM ? k : -EBADMSG;

    x = 0;
    if ((k = get_int(o, "owner_uid", true, 0, (int64_t)UINT32_MAX - 1, &x)) < 0)
        return k;
    r->owner_uid = (uid_t)x;
    x = 0;
    if ((k = get_int(o, "vmid", false, 0, VMID_MAX, &x)) < 0)
        return k;
    r->vmid = (int)x;
    x = 0;
    if ((k = get_int(o, "cores", false, 0, CORES_MAX, &x)) < 0)
        return k;
    r->cores = (unsigned)x;
    x = 0;
    if ((k = get_int(o, "memory_mb", false, 0, (int64_t)MEMORY_MB_MAX, &x)) < 0)
        return k;
    r->memory_mb = (uint64_t)x;
    x = 0;
    if ((k = get_int(o, "disk_gb", false, 0, (int64_t)DISK_GB_MAX, &x)) < 0)
        return k;
    r->disk_gb = (uint64_t)x;

    if (json_object_object_get_ex(o, "internet", &v)) {
        if (!json_object_is_type(v, json_type_boolean))
            return -EBADMSG;
        r->internet = json_object_get_boolean(v);
    }
    if (json_object_object_get_ex(o, "labels", &v) && !json_object_is_type(v, json_type_null))
        r->labels = json_object_get(v);

    k = reg_state_from_string(state);
    if (k < 0)
        return -EBADMSG;
    r->state = (enum reg_state)k;

    if (reg_record_validate(r) < 0)
        return -EBADMSG;
    *ret = TAKE_PTR(r);
    return 0;
}

/* --- the state folder --- */

static int instance_derive(const char *state_dir, char *buf, size_t n)
{
    static const char alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";
    _cleanup_free_ char *real = NULL, *seed = NULL;
    char app[SD_ID128_STRING_MAX];
    char hash[SHA256_HEX_SIZE];
    sd_id128_t id;
    int r;

    r = sd_id128_get_machine_app_specific(INSTANCE_APP_ID, &id);
    if (r < 0)
        return r;
    real = realpath(state_dir, NULL);
    if (!real)
        return -errno;
    if (asprintf(&seed, "%s\n%s", sd_id128_to_string(id, app), real) < 0)
        return -ENOMEM;
    r = sha256_hex(seed, strlen(seed), hash);
    if (r < 0)
        return r;
    if (n < strlen(INSTANCE_PREFIX) + ID_RANDOM_CHARS + 1)
        return -ENOBUFS;
    strcpy(buf, INSTANCE_PREFIX);
    for (size_t i = 0; i < ID_RANDOM_CHARS; i++) {
        unsigned byte = (unsigned)strtoul((char[]){hash[2 * i], hash[2 * i + 1], 0}, NULL, 16);
        buf[strlen(INSTANCE_PREFIX) + i] = alphabet[byte & 31];
    }
    buf[strlen(INSTANCE_PREFIX) + ID_RANDOM_CHARS] = '\0';
    return 0;
}

/* Renames name (inside dir_fd) to name + suffix, or name + suffix + ".N" if
 * taken; returns the new name. */
static int move_aside(int dir_fd, const char *name, const char *suffix, char **ret_name)
{
    for (int i = 0; i < 100; i++) {
        _cleanup_free_ char *target = NULL;
        int k;

        if (i == 0)
            k = asprintf(&target, "%s%s", name, suffix);
        else
            k = asprintf(&target, "%s%s.%d", name, suffix, i);
        if (k < 0)
            return -ENOMEM;
        if (renameat2(dir_fd, name, dir_fd, target, RENAME_NOREPLACE) == 0) {
            (void)fsync(dir_fd);
            if (ret_name)
                *ret_name = TAKE_PTR(target);
            return 0;
        }
        if (errno == EINVAL) {
            /* no RENAME_NOREPLACE on this file system */
            if (faccessat(dir_fd, target, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                continue;
            if (renameat(dir_fd, name, dir_fd, target) < 0)
                return -errno;
            (void)fsync(dir_fd);
            if (ret_name)
                *ret_name = TAKE_PTR(target);
            return 0;
        }
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

static int instance_load(struct registry *reg)
{
    _cleanup_free_ char *data = NULL;
    char id[ID_MAX + 2];
    size_t n = 0;
    int r;

    r = read_file_max(reg->dir_fd, INSTANCE_FILE, 256, &data, &n);
    if (r >= 0) {
        while (n > 0 && (data[n - 1] == '\n' || data[n - 1] == ' ' || data[n - 1] == '\r'))
            data[--n] = '\0';
        if (id_is_valid(data)) {
            strcpy(reg->instance, data);
            return 0;
        }
        r = -EBADMSG;
    }
    if (r != -ENOENT) {
        log_debug_errno(r, COMPONENT, "instance file unusable (%m), moving it aside");
        r = move_aside(reg->dir_fd, INSTANCE_FILE, CORRUPT_SUFFIX, NULL);
        if (r < 0 && r != -ENOENT)
            return r;
    }

    r = instance_derive(reg->state_dir, id, sizeof(id));
    if (r < 0) {
        log_debug_errno(r, COMPONENT, "no machine id (%m), using a random instance id");
        r = id_random(id, sizeof(id), INSTANCE_PREFIX);
        if (r < 0)
            return r;
    }
    {
        char line[ID_MAX + 3];
        snprintf(line, sizeof(line), "%s\n", id);
        r = atomic_write_file(reg->dir_fd, INSTANCE_FILE, line, strlen(line), 0600);
        if (r < 0)
            return r;
    }
    strcpy(reg->instance, id);
    log_debug(COMPONENT, "created instance id %s", id);
    return 0;
}

static void writer_stop(struct registry *reg);

int reg_open(const char *state_dir, struct registry **ret)
{
    struct registry *reg;
    int r;

    if (!state_dir || !*state_dir || !ret)
        return -EINVAL;
    r = mkdir_p(state_dir, 0700);
    if (r < 0)
        return r;
    reg = calloc(1, sizeof(*reg));
    if (!reg)
        return -ENOMEM;
    reg->n_ref = 1;
    reg->dir_fd = reg->sb_fd = -1;
    reg->todo_tail = &reg->todo;
    if (uv_mutex_init(&reg->mu) < 0) {
        free(reg);
        return -ENOMEM;
    }
    if (uv_cond_init(&reg->cond) < 0) {
        uv_mutex_destroy(&reg->mu);
        free(reg);
        return -ENOMEM;
    }
    reg->sync_ready = true;
    reg->state_dir = strdup(state_dir);
    if (!reg->state_dir) {
        r = -ENOMEM;
        goto fail;
    }
    reg->dir_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (reg->dir_fd < 0) {
        r = -errno;
        goto fail;
    }
    if (mkdirat(reg->dir_fd, SANDBOXES_DIR, 0700) < 0 && errno != EEXIST) {
        r = -errno;
        goto fail;
    }
    reg->sb_fd = openat(reg->dir_fd, SANDBOXES_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (reg->sb_fd < 0) {
        r = -errno;
        goto fail;
    }
    (void)fsync(reg->dir_fd);
    r = instance_load(reg);
    if (r < 0)
        goto fail;
    *ret = reg;
    return 0;
fail:
    reg_free(reg);
    return r;
}

static struct registry *reg_unref(struct registry *reg)
{
    if (!reg)
        return NULL;
    if (--reg->n_ref > 0)
        return NULL;
    /* No job holds a reference any more: the writer is idle or about to wait. */
    writer_stop(reg);
    if (reg->sync_ready) {
        uv_cond_destroy(&reg->cond);
        uv_mutex_destroy(&reg->mu);
    }
    if (reg->sb_fd >= 0)
        close(reg->sb_fd);
    if (reg->dir_fd >= 0)
        close(reg->dir_fd);
    free(reg->state_dir);
    free(reg);
    return NULL;
}

struct registry *reg_free(struct registry *reg)
{
    return reg_unref(reg);
}

const char *reg_instance_id(const struct registry *reg)
{
    return reg ? reg->instance : NULL;
}

const char *reg_state_dir(const struct registry *reg)
{
    return reg ? reg->state_dir : NULL;
}

static int record_name(const char *id, char *buf, size_t n)
{
    if (!id_is_valid(id))
        return -EINVAL;
    if ((size_t)snprintf(buf, n, "%s" RECORD_SUFFIX, id) >= n)
        return -ENAMETOOLONG;
    return 0;
}

int reg_save(struct registry *reg, const struct reg_record *r)
{
    _cleanup_free_ char *json = NULL;
    char name[ID_MAX + sizeof(RECORD_SUFFIX) + 1];
    int k;

    if (!reg || !r)
        return -EINVAL;
    k = reg_record_to_json(r, &json);
    if (k < 0)
        return k;
    k = record_name(r->id, name, sizeof(name));
    if (k < 0)
        return k;
    k = atomic_write_file(reg->sb_fd, name, json, strlen(json), 0600);
    if (k < 0)
        return k;
    log_debug(COMPONENT, "saved %s (%s)", r->id, reg_state_to_string(r->state));
    return 0;
}

int reg_remove(struct registry *reg, const char *id)
{
    char name[ID_MAX + sizeof(RECORD_SUFFIX) + 1];
    int k;

    if (!reg)
        return -EINVAL;
    k = record_name(id, name, sizeof(name));
    if (k < 0)
        return k;
    if (unlinkat(reg->sb_fd, name, 0) < 0)
        return -errno;
    k = RET_NERRNO(fsync(reg->sb_fd));
    if (k < 0)
        return k;
    log_debug(COMPONENT, "removed %s", id);
    return 0;
}

/* --- asynchronous writes ---
 *
 * One writer thread per registry, owned by it (not libuv's thread pool, which SFTP work can
 * keep busy for as long as its deadline): jobs are written one at a time in issue order, so
 * operations on the same id complete in order. Each job carries its own uv_async_t, sent by
 * the writer when the write is over; its callback runs the caller's callback on the loop and
 * closes the handle, whose close callback frees the job. */

static void job_write(struct reg_job *j)
{
    int sb_fd = j->reg->sb_fd; /* stays open while the job holds a reference */

    if (j->op == REG_OP_SAVE) {
        j->result = atomic_write_file(sb_fd, j->name, j->data, j->n, 0600);
    } else if (unlinkat(sb_fd, j->name, 0) < 0) {
        j->result = -errno;
    } else {
        j->result = RET_NERRNO(fsync(sb_fd));
    }
}

static void writer_main(void *arg)
{
    struct registry *reg = arg;
    sigset_t all;

    /* Signals are the loop thread's business. */
    sigfillset(&all);
    (void)pthread_sigmask(SIG_BLOCK, &all, NULL);
    uv_mutex_lock(&reg->mu);
    for (;;) {
        struct reg_job *j;

        while (!reg->todo && !reg->stop)
            uv_cond_wait(&reg->cond, &reg->mu);
        j = reg->todo;
        if (!j)
            break;
        reg->todo = j->next;
        if (!reg->todo)
            reg->todo_tail = &reg->todo;
        uv_mutex_unlock(&reg->mu);
        job_write(j);
        /* The loop may free j from here on. */
        (void)uv_async_send(&j->done);
        uv_mutex_lock(&reg->mu);
    }
    uv_mutex_unlock(&reg->mu);
}

static int writer_start(struct registry *reg)
{
    int r;

    if (reg->writer_started)
        return 0;
    r = uv_thread_create(&reg->writer, writer_main, reg);
    if (r < 0)
        return r; /* libuv's codes are negative errnos here */
    reg->writer_started = true;
    return 0;
}

static void writer_stop(struct registry *reg)
{
    if (!reg->writer_started)
        return;
    uv_mutex_lock(&reg->mu);
    reg->stop = true;
    uv_cond_signal(&reg->cond);
    uv_mutex_unlock(&reg->mu);
    (void)uv_thread_join(&reg->writer);
    reg->writer_started = false;
}

static void job_closed(uv_handle_t *h)
{
    struct reg_job *j = container_of((uv_async_t *)h, struct reg_job, done);
    struct registry *reg = j->reg;

    free(j->data);
    free(j);
    reg_unref(reg);
}

static void job_done(uv_async_t *a)
{
    struct reg_job *j = container_of(a, struct reg_job, done);
    int r = j->result;

    j->reg->n_pending--;
    if (r < 0)
        log_debug_errno(r, COMPONENT, "%s %s: %m", j->op == REG_OP_SAVE ? "save" : "remove",
                        j->name);
    if (j->cb)
        j->cb(r, j->userdata);
    uv_close((uv_handle_t *)&j->done, job_closed);
}

static int job_submit(struct registry *reg, uv_loop_t *loop, struct reg_job *j)
{
    int r;

    if (reg->loop && reg->loop != loop)
        return -EINVAL;
    r = writer_start(reg);
    if (r < 0)
        return r;
    r = uv_async_init(loop, &j->done, job_done);
    if (r < 0)
        return r;
    reg->loop = loop;
    j->reg = reg;
    reg->n_ref++;
    reg->n_pending++;
    uv_mutex_lock(&reg->mu);
    *reg->todo_tail = j;
    reg->todo_tail = &j->next;
    uv_cond_signal(&reg->cond);
    uv_mutex_unlock(&reg->mu);
    return 0;
}

int reg_save_async(struct registry *reg, uv_loop_t *loop, const struct reg_record *r,
                   reg_done_fn cb, void *userdata)
{
    _cleanup_free_ struct reg_job *j = NULL;
    int k;

    if (!reg || !loop || !r)
        return -EINVAL;
    j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    k = record_name(r->id, j->name, sizeof(j->name));
    if (k < 0)
        return k;
    k = reg_record_to_json(r, &j->data);
    if (k < 0)
        return k;
    /* Every field is set before the job can reach a worker. */
    j->op = REG_OP_SAVE;
    j->n = strlen(j->data);
    j->cb = cb;
    j->userdata = userdata;
    k = job_submit(reg, loop, j);
    if (k < 0) {
        free(j->data);
        return k;
    }
    TAKE_PTR(j);
    return 0;
}

int reg_remove_async(struct registry *reg, uv_loop_t *loop, const char *id, reg_done_fn cb,
                     void *userdata)
{
    _cleanup_free_ struct reg_job *j = NULL;
    int k;

    if (!reg || !loop)
        return -EINVAL;
    j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    k = record_name(id, j->name, sizeof(j->name));
    if (k < 0)
        return k;
    j->op = REG_OP_REMOVE;
    j->cb = cb;
    j->userdata = userdata;
    k = job_submit(reg, loop, j);
    if (k < 0)
        return k;
    TAKE_PTR(j);
    return 0;
}

size_t reg_pending(const struct registry *reg)
{
    return reg ? reg->n_pending : 0;
}

/* --- loading --- */

struct load_ctx {
    struct reg_record **records;
    size_t n, cap;
    struct reg_problem *problems;
    size_t n_problems, cap_problems;
};

static int push_record(struct load_ctx *c, struct reg_record *r)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct reg_record **v = realloc(c->records, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        c->records = v;
        c->cap = cap;
    }
    c->records[c->n++] = r;
    return 0;
}

static int push_problem(struct load_ctx *c, const char *file, int error, const char *reason,
                        char *moved_to)
{
    struct reg_problem *p;

    if (c->n_problems == c->cap_problems) {
        size_t cap = c->cap_problems ? c->cap_problems * 2 : 4;
        struct reg_problem *v = realloc(c->problems, cap * sizeof(*v));
        if (!v) {
            free(moved_to);
            return -ENOMEM;
        }
        c->problems = v;
        c->cap_problems = cap;
    }
    p = &c->problems[c->n_problems];
    *p = (struct reg_problem){.error = error, .moved_to = moved_to};
    p->file = strdup(file);
    p->reason = strdup(reason);
    if (!p->file || !p->reason) {
        free(p->file);
        free(p->reason);
        free(moved_to);
        return -ENOMEM;
    }
    c->n_problems++;
    return 0;
}

static int problem(struct registry *reg, struct load_ctx *c, const char *name, int error,
                   const char *reason)
{
    char *moved = NULL;
    int r;

    r = move_aside(reg->sb_fd, name, CORRUPT_SUFFIX, &moved);
    if (r < 0)
        log_debug_errno(r, COMPONENT, "could not move %s aside: %m", name);
    log_debug(COMPONENT, "record %s unusable (%s): %s", name, reason, strna(moved));
    return push_problem(c, name, error, reason, moved);
}

static int load_one(struct registry *reg, struct load_ctx *c, const char *name)
{
    _cleanup_record_ struct reg_record *r = NULL;
    _cleanup_free_ char *data = NULL;
    char want[ID_MAX + sizeof(RECORD_SUFFIX) + 1];
    size_t n = 0;
    int k;

    k = read_file_max(reg->sb_fd, name, REG_RECORD_MAX, &data, &n);
    if (k == -ENOENT)
        return 0; /* gone meanwhile */
    if (k == -ENOMEM)
        return k;
    if (k == -EBADFD) {
        log_debug(COMPONENT, "%s is not a regular file, ignored", name);
        return 0;
    }
    if (k == -EFBIG)
        return problem(reg, c, name, k, "record too large");
    if (k < 0)
        return problem(reg, c, name, k, "record unreadable");
    k = reg_record_from_json(data, n, &r);
    if (k == -ENOMEM)
        return k;
    if (k == -EPROTONOSUPPORT)
        return problem(reg, c, name, k, "unknown record version");
    if (k < 0)
        return problem(reg, c, name, k, "record torn, corrupt or incomplete");
    if (record_name(r->id, want, sizeof(want)) < 0 || strcmp(want, name) != 0)
        return problem(reg, c, name, -EBADMSG, "file name does not match the record's id");
    k = push_record(c, r);
    if (k < 0)
        return k;
    TAKE_PTR(r);
    return 0;
}

static int cmp_records(const void *a, const void *b)
{
    const struct reg_record *x = *(struct reg_record *const *)a;
    const struct reg_record *y = *(struct reg_record *const *)b;
    return strcmp(x->id, y->id);
}

static void closedirp(DIR **d)
{
    if (*d)
        closedir(*d);
}

int reg_load(struct registry *reg, struct reg_record ***ret_records, size_t *ret_n,
             struct reg_problem **ret_problems, size_t *ret_n_problems)
{
    _cleanup_(closedirp) DIR *d = NULL;
    struct load_ctx c = {0};
    struct dirent *de;
    size_t seen = 0;
    bool removed_temp = false;
    int fd, r = 0;

    if (!reg || !ret_records || !ret_n)
        return -EINVAL;
    fd = openat(reg->sb_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    d = fdopendir(fd);
    if (!d) {
        r = -errno;
        close(fd);
        return r;
    }
    for (;;) {
        errno = 0;
        de = readdir(d);
        if (!de) {
            if (errno != 0)
                r = -errno;
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (++seen > REG_FILES_MAX) {
            r = push_problem(&c, de->d_name, -E2BIG, "too many files; the rest were not read",
                             NULL);
            break;
        }
        if (de->d_type == DT_DIR)
            continue;
        if (atomic_is_temp_name(de->d_name)) {
            /* A save that never reached its rename: the record before it
             * (if any) is intact. Unless it is one of ours in flight. */
            if (reg->n_pending == 0 && unlinkat(reg->sb_fd, de->d_name, 0) == 0) {
                removed_temp = true;
                log_debug(COMPONENT, "removed leftover temp file %s", de->d_name);
            }
            continue;
        }
        if (!endswith(de->d_name, RECORD_SUFFIX))
            continue;
        r = load_one(reg, &c, de->d_name);
        if (r < 0)
            break;
    }
    if (removed_temp)
        (void)fsync(reg->sb_fd);
    if (r < 0) {
        reg_records_free(c.records, c.n);
        reg_problems_free(c.problems, c.n_problems);
        return r;
    }
    if (c.n > 1)
        qsort(c.records, c.n, sizeof(*c.records), cmp_records);
    *ret_records = c.records;
    *ret_n = c.n;
    if (ret_problems) {
        *ret_problems = c.problems;
        *ret_n_problems = c.n_problems;
    } else {
        reg_problems_free(c.problems, c.n_problems);
    }
    return 0;
}

/* --- params hash --- */

struct sbuf {
    char *p;
    size_t len, cap;
};

static int sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->len + n > REG_PARAMS_MAX)
        return -E2BIG;
    if (b->len + n + 1 > b->cap) {
        size_t cap = MAX(b->cap * 2, b->len + n + 1);
        char *p;
        cap = MIN(cap, (size_t)REG_PARAMS_MAX + 1);
        p = realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static int sb_str(struct sbuf *b, const char *s, size_t n)
{
    int r = sb_add(b, "\"", 1);

    for (size_t i = 0; r >= 0 && i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        if (ch == '"')
            r = sb_add(b, "\\\"", 2);
        else if (ch == '\\')
            r = sb_add(b, "\\\\", 2);
        else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof(esc), "\\u%04x", ch);
            r = sb_add(b, esc, 6);
        } else
            r = sb_add(b, (const char *)&s[i], 1);
    }
    if (r >= 0)
        r = sb_add(b, "\"", 1);
    return r;
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int canon(struct sbuf *b, json_object *o, int depth)
{
    char num[64];

    if (depth > REG_PARAMS_DEPTH_MAX)
        return -E2BIG;
    switch (json_object_get_type(o)) {
    case json_type_null:
        return sb_add(b, "null", 4);
    case json_type_boolean:
        return json_object_get_boolean(o) ? sb_add(b, "true", 4) : sb_add(b, "false", 5);
    case json_type_int: {
        int64_t v = json_object_get_int64(o);
        if (v == INT64_MAX)
            snprintf(num, sizeof(num), "%" PRIu64, json_object_get_uint64(o));
        else
            snprintf(num, sizeof(num), "%" PRId64, v);
        return sb_add(b, num, strlen(num));
    }
    case json_type_double: {
        double d = json_object_get_double(o);
        if (!isfinite(d))
            return -EINVAL;
        if (d == floor(d) && fabs(d) < 9007199254740992.0)
            snprintf(num, sizeof(num), "%" PRId64, (int64_t)d);
        else
            snprintf(num, sizeof(num), "%.17g", d);
        return sb_add(b, num, strlen(num));
    }
    case json_type_string:
        return sb_str(b, json_object_get_string(o), (size_t)json_object_get_string_len(o));
    case json_type_array: {
        size_t n = json_object_array_length(o);
        int r = sb_add(b, "[", 1);
        for (size_t i = 0; r >= 0 && i < n; i++) {
            if (i > 0)
                r = sb_add(b, ",", 1);
            if (r >= 0)
                r = canon(b, json_object_array_get_idx(o, i), depth + 1);
        }
        return r < 0 ? r : sb_add(b, "]", 1);
    }
    case json_type_object: {
        _cleanup_free_ const char **keys = NULL;
        size_t n = (size_t)json_object_object_length(o), i = 0;
        int r;

        if (n > REG_PARAMS_MAX / 4)
            return -E2BIG;
        if (n > 0) {
            keys = calloc(n, sizeof(*keys));
            if (!keys)
                return -ENOMEM;
            json_object_object_foreach(o, k, v_unused)
            {
                (void)v_unused;
                keys[i++] = k;
            }
            qsort(keys, n, sizeof(*keys), cmp_strp);
        }
        r = sb_add(b, "{", 1);
        for (i = 0; r >= 0 && i < n; i++) {
            if (i > 0)
                r = sb_add(b, ",", 1);
            if (r >= 0)
                r = sb_str(b, keys[i], strlen(keys[i]));
            if (r >= 0)
                r = sb_add(b, ":", 1);
            if (r >= 0)
                r = canon(b, json_object_object_get(o, keys[i]), depth + 1);
        }
        return r < 0 ? r : sb_add(b, "}", 1);
    }
    }
    return -EINVAL;
}

int reg_params_hash(json_object *params, char ret[SHA256_HEX_SIZE])
{
    struct sbuf b = {0};
    char hash[SHA256_HEX_SIZE];
    int r;

    if (!ret)
        return -EINVAL;
    r = canon(&b, params, 0);
    if (r >= 0)
        r = sha256_hex(b.p ? b.p : "", b.len, hash);
    free(b.p);
    if (r < 0)
        return r;
    memcpy(ret, hash, SHA256_HEX_SIZE);
    return 0;
}
