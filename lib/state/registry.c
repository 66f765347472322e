/* The registry's state folder: the instance id, synchronous saves and removals,
 * the writer thread behind the asynchronous ones, and loading every record.
 * Records and their JSON format are registry-record.c's. */
#include "macro.h"
#include "registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

/* Application id for sd_id128_get_machine_app_specific(): instance ids derived
 * from the machine id never reveal it. */
#define INSTANCE_APP_ID                                                                            \
    SD_ID128_MAKE(00, 03, b6, ab, 9f, 11, 4e, 99, 8d, 58, 40, a8, 7b, b6, 2f, 6d)

enum registry_op {
    REG_OP_SAVE,
    REG_OP_REMOVE,
};

/* One asynchronous save or remove. */
struct registry_job {
    struct registry_job *next;
    struct registry *reg;
    uv_async_t done; /* sent by the writer thread when the write is over */
    enum registry_op op;
    char name[ID_MAX + sizeof(RECORD_SUFFIX) + 1];
    char *data;
    size_t n;
    int result;
    registry_done_fn cb;
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
    struct registry_job *todo, **todo_tail;
    bool stop;
};

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

int registry_open(const char *state_dir, struct registry **ret)
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
    registry_free(reg);
    return r;
}

static struct registry *registry_unref(struct registry *reg)
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

struct registry *registry_free(struct registry *reg)
{
    return registry_unref(reg);
}

const char *registry_instance_id(const struct registry *reg)
{
    return reg ? reg->instance : NULL;
}

const char *registry_state_dir(const struct registry *reg)
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

int registry_save(struct registry *reg, const struct registry_record *r)
{
    _cleanup_free_ char *json = NULL;
    char name[ID_MAX + sizeof(RECORD_SUFFIX) + 1];
    int k;

    if (!reg || !r)
        return -EINVAL;
    k = registry_record_to_json(r, &json);
    if (k < 0)
        return k;
    k = record_name(r->id, name, sizeof(name));
    if (k < 0)
        return k;
    k = atomic_write_file(reg->sb_fd, name, json, strlen(json), 0600);
    if (k < 0)
        return k;
    log_debug(COMPONENT, "saved %s (%s)", r->id, registry_state_to_string(r->state));
    return 0;
}

int registry_remove(struct registry *reg, const char *id)
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

static void job_write(struct registry_job *j)
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
        struct registry_job *j;

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
    struct registry_job *j = container_of((uv_async_t *)h, struct registry_job, done);
    struct registry *reg = j->reg;

    free(j->data);
    free(j);
    registry_unref(reg);
}

static void job_done(uv_async_t *a)
{
    struct registry_job *j = container_of(a, struct registry_job, done);
    int r = j->result;

    j->reg->n_pending--;
    if (r < 0)
        log_debug_errno(r, COMPONENT, "%s %s: %m", j->op == REG_OP_SAVE ? "save" : "remove",
                        j->name);
    if (j->cb)
        j->cb(r, j->userdata);
    uv_close((uv_handle_t *)&j->done, job_closed);
}

static int job_submit(struct registry *reg, uv_loop_t *loop, struct registry_job *j)
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

/* Queues one write of sandboxes/<id>.json; data (the record's JSON, NULL for a removal) is
 * taken on success only. */
static int job_queue(struct registry *reg, uv_loop_t *loop, enum registry_op op, const char *id,
                     char *data, registry_done_fn cb, void *userdata)
{
    _cleanup_free_ struct registry_job *j = NULL;
    int k;

    j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    k = record_name(id, j->name, sizeof(j->name));
    if (k < 0)
        return k;
    /* Every field is set before the job can reach the writer thread. */
    j->op = op;
    j->data = data;
    j->n = data ? strlen(data) : 0;
    j->cb = cb;
    j->userdata = userdata;
    k = job_submit(reg, loop, j);
    if (k < 0)
        return k;
    TAKE_PTR(j);
    return 0;
}

int registry_save_async(struct registry *reg, uv_loop_t *loop, const struct registry_record *r,
                        registry_done_fn cb, void *userdata)
{
    char *data = NULL;
    int k;

    if (!reg || !loop || !r)
        return -EINVAL;
    k = registry_record_to_json(r, &data);
    if (k < 0)
        return k;
    k = job_queue(reg, loop, REG_OP_SAVE, r->id, data, cb, userdata);
    if (k < 0)
        free(data);
    return k;
}

int registry_remove_async(struct registry *reg, uv_loop_t *loop, const char *id,
                          registry_done_fn cb, void *userdata)
{
    if (!reg || !loop)
        return -EINVAL;
    return job_queue(reg, loop, REG_OP_REMOVE, id, NULL, cb, userdata);
}

size_t registry_pending(const struct registry *reg)
{
    return reg ? reg->n_pending : 0;
}

/* --- loading --- */

struct load_ctx {
    struct registry_record **records;
    size_t n, cap;
    struct registry_problem *problems;
    size_t n_problems, cap_problems;
};

static int push_record(struct load_ctx *c, struct registry_record *r)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct registry_record **v = realloc(c->records, cap * sizeof(*v));
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
    struct registry_problem *p;

    if (c->n_problems == c->cap_problems) {
        size_t cap = c->cap_problems ? c->cap_problems * 2 : 4;
        struct registry_problem *v = realloc(c->problems, cap * sizeof(*v));
        if (!v) {
            free(moved_to);
            return -ENOMEM;
        }
        c->problems = v;
        c->cap_problems = cap;
    }
    p = &c->problems[c->n_problems];
    *p = (struct registry_problem){.error = error, .moved_to = moved_to};
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
    _cleanup_record_ struct registry_record *r = NULL;
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
    k = registry_record_from_json(data, n, &r);
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
    const struct registry_record *x = *(struct registry_record *const *)a;
    const struct registry_record *y = *(struct registry_record *const *)b;
    return strcmp(x->id, y->id);
}

static void closedirp(DIR **d)
{
    if (*d)
        closedir(*d);
}

int registry_load(struct registry *reg, struct registry_record ***ret_records, size_t *ret_n,
                  struct registry_problem **ret_problems, size_t *ret_n_problems)
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
        registry_records_free(c.records, c.n);
        registry_problems_free(c.problems, c.n_problems);
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
        registry_problems_free(c.problems, c.n_problems);
    }
    return 0;
}
