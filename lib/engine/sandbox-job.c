/* Commands and descriptor transfers of a READY sandbox as jobs: a handle, a cancel and a
 * completion over the transport's own (sshexec.h on the sandbox's pool, the descriptor
 * streams of sshfile.h on its file session). See sandbox-io.h. */
#include "macro.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api-limits.h"
#include "list.h"
#include "sandbox-internal.h"
#include "sandbox-io.h"
#include "sshuser.h"

/* ---- transfer slots ---- */

/* A free slot of [first, first + n) for uid: at most per_uid of them its own, and the last
 * SLOTS_RESERVED free ones only for a uid that holds none yet, so that the uids already in
 * cannot take them all. -EUSERS past per_uid, -EBUSY when none is free for uid. */
static int slot_take(struct engine *e, uid_t uid, unsigned first, unsigned n, unsigned per_uid,
                     unsigned *ret)
{
    unsigned free_slot = UINT_MAX, mine = 0, free_n = 0;

    for (unsigned i = first; i < first + n; i++) {
        if (!e->transfer_slots[i].used) {
            free_slot = MIN(free_slot, i);
            free_n++;
        } else if (e->transfer_slots[i].uid == uid)
            mine++;
    }
    if (mine >= per_uid)
        return -EUSERS;
    if (free_slot == UINT_MAX || (mine > 0 && free_n <= SLOTS_RESERVED))
        return -EBUSY;
    e->transfer_slots[free_slot].used = true;
    e->transfer_slots[free_slot].uid = uid;
    *ret = free_slot;
    return 0;
}

int transfer_slot_take(struct engine *e, uid_t uid, unsigned *ret, struct engine_error *ret_err)
{
    int r = slot_take(e, uid, 0, TRANSFER_MAX, TRANSFER_MAX_PER_UID, ret);

    if (r < 0) {
        /* No errno: the reply carries the reason only. */
        *ret_err = (struct engine_error){
            .kind = ENGINE_E_BUSY,
            .message = r == -EUSERS
                           ? "too many transfers through descriptors for this uid (limit 4)"
                           : "too many transfers through descriptors running (limit 8, "
                             "the last 2 kept for other uids)",
        };
        return -EBUSY;
    }
    return 0;
}

int pump_slot_take(struct engine *e, uid_t uid, unsigned *ret, struct engine_error *ret_err)
{
    int r = slot_take(e, uid, TRANSFER_MAX, PUMP_MAX, PUMP_MAX_PER_UID, ret);

    if (r < 0) {
        *ret_err = (struct engine_error){
            .kind = ENGINE_E_BUSY,
            .message = r == -EUSERS ? "too many processes with descriptors for this uid (limit 4)"
                                    : "too many processes with descriptors running (limit 6, "
                                      "the last 2 kept for other uids)",
        };
        return -EBUSY;
    }
    return 0;
}

void transfer_slot_put(struct engine *e, unsigned slot)
{
    if (slot < TRANSFER_MAX + PUMP_MAX)
        e->transfer_slots[slot].used = false;
}

/* ---- jobs ---- */

struct sandbox_job {
    struct sandbox_job *next, *prev; /* a transfer's, in e->transfers */
    struct sandbox *sb;              /* held (a reference) while a command runs on its pool */
    struct engine *e;                /* a transfer's, for its slot */
    struct sshexec *exec;            /* a command on the pool */
    struct sshfile *f;               /* a transfer's session, for the cancel */
    unsigned slot;                   /* a transfer's; UINT_MAX: none */
    bool long_poll;                  /* counted in sb->long_polls */
    sandbox_exec_cb exec_cb;
    sandbox_count_cb count_cb;
    sandbox_output_cb on_output;
    /* A command of the engine's own (sandbox-process.c): gets the raw result instead. */
    void (*raw_cb)(int error, struct sshexec_result *res, void *userdata);
    void *userdata;
};

static struct sandbox_job *job_new(void *userdata)
{
    struct sandbox_job *j = calloc(1, sizeof *j);

    if (j) {
        j->slot = UINT_MAX;
        j->userdata = userdata;
    }
    return j;
}

static void job_free(struct sandbox_job *j)
{
    if (j->e) {
        LIST_REMOVE(j->e->transfers, j);
        transfer_slot_put(j->e, j->slot);
    }
    if (j->sb) {
        if (j->long_poll)
            j->sb->long_polls--;
        sandbox_unref(j->sb);
    }
    free(j);
}

void sandbox_job_cancel(struct sandbox_job *j)
{
    if (!j)
        return;
    if (j->exec)
        (void)sshexec_cancel(j->exec);
    else if (j->f)
        sshfile_cancel(j->f, j); /* runs the callback now */
}

/* ---- commands on the pool ---- */

static void on_output(struct sshexec *x, enum sshexec_stream stream, const void *data, size_t len,
                      void *userdata)
{
    struct sandbox_job *j = userdata;

    j->on_output(stream == SSHEXEC_STDERR ? SANDBOX_STDERR : SANDBOX_STDOUT, data, len,
                 j->userdata);
}

/* The engine's name for the transport's user error (sshuser.h). */
static int user_error_public(enum sshuser_error e)
{
    return e == SSHUSER_NOUSER     ? SANDBOX_USER_UNKNOWN
           : e == SSHUSER_NOSWITCH ? SANDBOX_USER_NO_SWITCH
                                   : SANDBOX_USER_OK;
}

static void on_exec_done(struct sshexec *x, int error, struct sshexec_result *res, void *userdata)
{
    struct sandbox_job *j = userdata;
    struct sandbox_exec_result r;

    j->exec = NULL;
    if (j->raw_cb) {
        j->raw_cb(error, res, j->userdata);
    } else if (error < 0) {
        j->exec_cb(error, NULL, j->userdata);
    } else {
        r = (struct sandbox_exec_result){
            .exit_code = res->exit_code,
            .signal = res->signal,
            .timed_out = res->timed_out,
            .started = res->started,
            .user_error = user_error_public(res->user_error),
            .out = res->out,
            .out_len = res->out_len,
            .out_truncated = res->out_truncated,
            .err = res->err,
            .err_len = res->err_len,
            .err_truncated = res->err_truncated,
            .duration_ms = res->duration_ms,
        };
        j->exec_cb(0, &r, j->userdata);
    }
    job_free(j);
}

/* The sandbox's pool for a command: READY (the pool of a re-attached sandbox is made on first
 * use), else ret_err filled. */
static int exec_pool(struct sandbox *sb, struct engine_error *ret_err)
{
    if (engine_refuse_rolling_back(sb, ret_err) < 0)
        return -EBUSY;
    if (sb->state == SANDBOX_READY && !sb->pool && !sb->create_op && !sb->engine->closing &&
        sandbox_pool_lazy(sb) < 0)
        return engine_refuse_not_ready(ret_err, sb->state);
    if (sb->state != SANDBOX_READY || !sb->pool || sb->engine->closing)
        return engine_refuse_not_ready(ret_err, sb->state);
    return 0;
}

/* Starts j's command (sp) on sb's pool; j is freed on failure. */
static int job_exec(struct sandbox *sb, struct sandbox_job *j, const struct sshexec_params *sp,
                    struct engine_error *ret_err)
{
    int r = exec_pool(sb, ret_err);

    if (r == 0 && j->long_poll && sb->long_polls >= SANDBOX_LONG_POLLS_MAX) {
        *ret_err = (struct engine_error){
            .kind = ENGINE_E_BUSY,
            .message = "too many long-polls on this sandbox at once (limit 16)",
        };
        r = -EBUSY;
    }
    if (r == 0) {
        r = sshexec_start(sb->pool, sp, on_exec_done, j, &j->exec);
        if (r == -EINVAL || r == -E2BIG)
            engine_refuse(ret_err, ENGINE_E_INVALID, r, "the command is too large or malformed",
                          "params");
        else if (r < 0)
            engine_error_from_io(r, false, ret_err);
    }
    if (r < 0) {
        free(j);
        return r;
    }
    j->sb = sb;
    sb->refs++;
    if (j->long_poll)
        sb->long_polls++;
    return 0;
}

int sandbox_job_exec_raw(struct sandbox *sb, const struct sshexec_params *sp, bool long_poll,
                         void (*cb)(int error, struct sshexec_result *res, void *userdata),
                         void *userdata, struct sandbox_job **ret, struct engine_error *ret_err)
{
    struct sandbox_job *j = job_new(userdata);
    int r;

    if (!j)
        return engine_refuse_oom(ret_err);
    j->raw_cb = cb;
    j->long_poll = long_poll;
    r = job_exec(sb, j, sp, ret_err);
    if (r == 0 && ret)
        *ret = j;
    return r;
}

static void exec_params_to(const struct sandbox_exec_params *p, struct sshexec_params *ret)
{
    *ret = (struct sshexec_params){
        .command = p->command,
        .argv = p->argv,
        .env = p->env,
        .cwd = p->cwd,
        .user = p->user,
        .stdin_data = p->stdin_data,
        .stdin_len = p->stdin_len,
        .timeout_ms = p->timeout_ms,
        .has_max_output = p->has_max_output,
        .max_output_bytes = p->max_output_bytes,
        .container_pid_namespace = p->container_pid_namespace,
    };
}

int sandbox_exec(struct sandbox *sb, const struct sandbox_exec_params *p, sandbox_exec_cb cb,
                 void *userdata, struct sandbox_job **ret, struct engine_error *ret_err)
{
    struct sandbox_job *j = job_new(userdata);
    struct sshexec_params sp;
    int r;

    if (!j)
        return engine_refuse_oom(ret_err);
    exec_params_to(p, &sp);
    if (p->on_output)
        sp.on_output = on_output;
    j->exec_cb = cb;
    j->on_output = p->on_output;
    r = job_exec(sb, j, &sp, ret_err);
    if (r == 0 && ret)
        *ret = j;
    return r;
}

/* ---- descriptor transfers on the file session ---- */

/* A job for a transfer of uid, with its slot; NULL with ret_err filled. */
static struct sandbox_job *transfer_job(struct sandbox *sb, uid_t uid, void *userdata,
                                        struct engine_error *ret_err)
{
    struct sandbox_job *j = job_new(userdata);

    if (!j) {
        (void)engine_refuse_oom(ret_err);
        return NULL;
    }
    if (transfer_slot_take(sb->engine, uid, &j->slot, ret_err) < 0) {
        free(j);
        return NULL;
    }
    j->e = sb->engine;
    return j;
}

/* Ends the transfers still running: the engine closes. */
static void transfers_stop(struct engine *e)
{
    struct sandbox_job *j, *next;

    for (j = e->transfers; j; j = next) {
        next = j->next;
        sshfile_cancel(j->f, j); /* runs the callback now, which frees j */
    }
}

/* A transfer's submission (r) is over: on success the job runs (*ret), else it is freed. */
static int transfer_started(struct sandbox_job *j, struct sshfile *f, int r, bool write,
                            struct sandbox_job **ret, struct engine_error *ret_err)
{
    if (r < 0) {
        job_free(j);
        return sandbox_file_refused(r, write, ret_err);
    }
    j->f = f;
    LIST_PREPEND(j->e->transfers, j);
    j->e->transfers_stop = transfers_stop;
    if (ret)
        *ret = j;
    return 0;
}

static void on_stream_done(int error, uint64_t bytes, void *userdata)
{
    struct sandbox_job *j = userdata;

    j->count_cb(error, bytes, j->userdata);
    job_free(j);
}

int sandbox_file_write_fd(struct sandbox *sb, uid_t uid, const char *path, int fd, mode_t mode,
                          bool make_parents, sandbox_count_cb cb, void *userdata,
                          struct sandbox_job **ret, struct engine_error *ret_err)
{
    struct sshfile_write_fd_params wp = {
        .path = path,
        .fd = fd,
        .mode = mode,
        .make_parents = make_parents,
    };
    struct sandbox_job *j = transfer_job(sb, uid, userdata, ret_err);
    struct sshfile *f = NULL;
    int r;

    if (!j)
        return ret_err->error < 0 ? ret_err->error : -EBUSY;
    j->count_cb = cb;
    r = sandbox_file_session(sb, &f, ret_err);
    if (r == 0)
        r = sshfile_write_fd(f, &wp, on_stream_done, j);
    return transfer_started(j, f, r, true, ret, ret_err);
}

int sandbox_file_read_fd(struct sandbox *sb, uid_t uid, const char *path, uint64_t offset,
                         uint64_t length, int fd, sandbox_count_cb cb, void *userdata,
                         struct sandbox_job **ret, struct engine_error *ret_err)
{
    struct sandbox_job *j = transfer_job(sb, uid, userdata, ret_err);
    struct sshfile *f = NULL;
    int r;

    if (!j)
        return ret_err->error < 0 ? ret_err->error : -EBUSY;
    j->count_cb = cb;
    r = sandbox_file_session(sb, &f, ret_err);
    if (r == 0)
        r = sshfile_read_fd(f, path, offset, length, fd, on_stream_done, j);
    return transfer_started(j, f, r, false, ret, ret_err);
}

/* The user error an exec reported (sshuser.h): its stderr, when captured, is the sentinel. */
static int user_error_of(const struct sshfile_exec_fd *x)
{
    return user_error_public(
        x->exit_code == 125 && x->err ? sshuser_error(x->err, x->err_len, x->marker) : SSHUSER_OK);
}

static void on_exec_fd_done(int error, struct sshfile_exec_fd *x, void *userdata)
{
    struct sandbox_job *j = userdata;
    struct sandbox_exec_result r;

    if (error < 0) {
        j->exec_cb(error, NULL, j->userdata);
    } else {
        r = (struct sandbox_exec_result){
            .exit_code = x->exit_code,
            .user_error = user_error_of(x),
            .timed_out = x->timed_out,
            .started = true,
            .out = x->out,
            .out_len = x->out_len,
            .out_truncated = x->out_truncated,
            .err = x->err,
            .err_len = x->err_len,
            .err_truncated = x->err_truncated,
            .out_bytes = x->out_bytes,
            .err_bytes = x->err_bytes,
        };
        j->exec_cb(0, &r, j->userdata);
    }
    job_free(j);
}

/* The descriptor exec of p (its remote command line built here); NULL with ret_err filled. */
static struct sshfile_exec_fd *exec_fd_new(const struct sandbox_exec_params *p, const int fds[3],
                                           struct engine_error *ret_err)
{
    struct sshexec_params sp;
    struct sshfile_exec_fd *x = calloc(1, sizeof *x);
    int r;

    if (!x) {
        (void)engine_refuse_oom(ret_err);
        return NULL;
    }
    exec_params_to(p, &sp);
    util_random_hex(x->marker, 16);
    r = sshexec_build_command(&sp, x->marker, &x->command);
    if (r == 0)
        r = sshexec_command_stdin(&sp, x->marker, &x->prelude, &x->prelude_len);
    if (r < 0) {
        sshfile_exec_fd_free(x);
        (void)engine_refuse(ret_err, ENGINE_E_INVALID, r,
                            r == -E2BIG ? "too long" : "cannot be run", "command");
        return NULL;
    }
    x->fd_in = fds[0];
    x->fd_out = fds[1];
    x->fd_err = fds[2];
    x->timeout_ms = p->timeout_ms;
    x->max_output = p->max_output_bytes;
    return x;
}

int sandbox_exec_fds(struct sandbox *sb, uid_t uid, const struct sandbox_exec_params *p,
                     const int fds[3], sandbox_exec_cb cb, void *userdata, struct sandbox_job **ret,
                     struct engine_error *ret_err)
{
    struct sshfile_exec_fd *x = exec_fd_new(p, fds, ret_err);
    struct sandbox_job *j;
    struct sshfile *f = NULL;
    int r;

    if (!x)
        return ret_err->error;
    j = transfer_job(sb, uid, userdata, ret_err);
    if (!j) {
        sshfile_exec_fd_free(x); /* the descriptors are left to the caller */
        return -EBUSY;
    }
    j->exec_cb = cb;
    r = sandbox_file_session(sb, &f, ret_err);
    if (r == 0)
        r = sshfile_exec_fd(f, x, on_exec_fd_done, j);
    if (r < 0)
        sshfile_exec_fd_free(x);
    return transfer_started(j, f, r, false, ret, ret_err);
}
