/* file.write content_fd, file.read to_fd, sandbox.exec stdin_fd/stdout_fd. See
 * methods-transfer.h and docs/protocol.md ("Passing descriptors"). */
#include "methods-transfer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "macro.h"
#include "util.h"
#include "b64.h"
#include "rpc.h"
#include "methods-common.h"

/* One transfer in flight. */
struct xfer {
    struct req *req; /* NULL once the client went away */
    bool write;
    uint64_t start_ns;
    struct sandbox_job *job; /* for the cancel */
    bool fd_out, fd_err;     /* an exec's output goes into passed descriptors */
};

/* The client went away: answer, and stop the transfer (its descriptors may be the
 * client's terminal or pipes nobody reads any more; an exec's command is killed). The
 * callback then runs with -ECANCELED and frees x. */
static void xfer_detach(struct req *r, void *userdata)
{
    struct xfer *x = userdata;

    (void)methods_detach(r, &x->req, x->job);
}

static struct xfer *xfer_new(struct req *r, bool write)
{
    struct xfer *x = calloc(1, sizeof *x);

    if (!x) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    x->req = r;
    x->write = write;
    x->start_ns = uv_hrtime();
    return x;
}

/* Takes descriptor index for access, or answers -32602 naming param. */
static bool take_fd(struct req *r, const char *param, int64_t index, enum req_fd_access access,
                    int *ret_fd)
{
    const char *reason;

    if (req_take_fd(r, index, access, ret_fd, &reason) < 0) {
        req_invalid_params(r, param, reason);
        return false;
    }
    return true;
}

/* Errors of a transfer: the descriptor's own, and the inactivity deadline. */
static void reply_transfer_error(struct req *r, int error, bool write)
{
    json_object *d;
    char reason[160];

    if (error != -EBADFD && error != -ETIME) {
        methods_sandbox_reply_file_error(r, error, write);
        return;
    }
    d = json_object_new_object();
    if (error == -EBADFD) {
        json_object_object_add(d, "reason",
                               json_object_new_string(write ? "reading the passed descriptor failed"
                                                            : "writing into the passed descriptor "
                                                              "failed (closed by its reader?)"));
        json_object_object_add(d, "errno", json_object_new_string("EBADFD"));
        req_error_data(r, RPC_FILE_ERROR, NULL, d);
        return;
    }
    snprintf(reason, sizeof reason, "no byte moved for %u ms (the transfer's inactivity deadline)",
             req_config(r)->ssh.file_timeout_ms);
    json_object_object_add(d, "reason", json_object_new_string(reason));
    json_object_object_add(d, "timeout_ms",
                           json_object_new_int64(req_config(r)->ssh.file_timeout_ms));
    req_error_data(r, RPC_DEADLINE_EXCEEDED, NULL, d);
}

static void on_stream_done(int error, uint64_t bytes, void *userdata)
{
    struct xfer *x = userdata;
    json_object *o;

    x->job = NULL;
    if (x->req) {
        if (error < 0) {
            reply_transfer_error(x->req, error, x->write);
        } else {
            o = json_object_new_object();
            json_object_object_add(o, "bytes", json_object_new_int64((int64_t)bytes));
            req_reply(x->req, o);
        }
    }
    free(x);
}

/* Starts the stream of file.write (from the descriptor into the file) or file.read (from the
 * file into the descriptor) on fd; 0 or a negative errno with *err filled in. */
static int file_stream_start(struct sandbox *sb, bool write, const void *params, int fd,
                             struct xfer *x, struct engine_error *err)
{
    const struct params_file_read *rd = params;
    const struct params_file_write *w = params;
    uid_t uid = req_uid(x->req);

    if (!write)
        return sandbox_file_read_fd(sb, uid, rd->path, (uint64_t)rd->offset, (uint64_t)rd->length,
                                    fd, on_stream_done, x, &x->job, err);
    return sandbox_file_write_fd(sb, uid, w->path, fd, w->mode, w->make_parents, on_stream_done, x,
                                 &x->job, err);
}

void transfer_file(struct req *r, struct sandbox *sb, bool write, const void *params)
{
    const struct params_file_read *rd = params;
    const struct params_file_write *w = params;
    struct engine_error err;
    struct xfer *x;
    int fd;

    if (!take_fd(r, write ? "content_fd" : "to_fd", write ? w->content_fd : rd->to_fd,
                 write ? REQ_FD_READ : REQ_FD_WRITE, &fd))
        return;
    x = xfer_new(r, write);
    if (!x) {
        close(fd);
        return;
    }
    if (file_stream_start(sb, write, params, fd, x, &err) < 0) {
        close(fd);
        free(x);
        methods_sandbox_reply_error(r, &err);
        return;
    }
    req_on_disconnect(r, xfer_detach, x);
}

static void on_exec_done(int error, const struct sandbox_exec_result *res, void *userdata)
{
    struct xfer *x = userdata;
    json_object *o;

    x->job = NULL;
    if (!x->req) {
        free(x);
        return;
    }
    if (error < 0) {
        reply_transfer_error(x->req, error, false);
        free(x);
        return;
    }
    if (res->user_error) {
        req_invalid_params(x->req, "user",
                           res->user_error == SANDBOX_USER_UNKNOWN ? SANDBOX_USER_UNKNOWN_REASON
                                                                   : SANDBOX_USER_NO_SWITCH_REASON);
        free(x);
        return;
    }
    o = json_object_new_object();
    json_object_object_add(o, "exit_code",
                           res->exit_code >= 0 ? json_object_new_int(res->exit_code) : NULL);
    json_object_object_add(o, "signal", NULL);
    json_object_object_add(o, "timed_out", json_object_new_boolean(res->timed_out));
    json_object_object_add(o, "started", json_object_new_boolean(true));
    (void)b64_object_add_data(o, "stdout", res->out ? res->out : "", res->out_len);
    (void)b64_object_add_data(o, "stderr", res->err ? res->err : "", res->err_len);
    json_object_object_add(o, "stdout_truncated", json_object_new_boolean(res->out_truncated));
    json_object_object_add(o, "stderr_truncated", json_object_new_boolean(res->err_truncated));
    if (x->fd_out)
        json_object_object_add(o, "stdout_bytes", json_object_new_int64((int64_t)res->out_bytes));
    if (x->fd_err)
        json_object_object_add(o, "stderr_bytes", json_object_new_int64((int64_t)res->err_bytes));
    json_object_object_add(
        o, "duration_ms", json_object_new_int64((int64_t)((uv_hrtime() - x->start_ns) / 1000000u)));
    req_reply(x->req, o);
    free(x);
}

void transfer_exec(struct req *r, struct sandbox *sb, const struct sandbox_exec_params *sp,
                   const struct params_sandbox_exec *p)
{
    struct sandbox_exec_params xp = *sp;
    struct engine_error err;
    int fds[3] = {-1, -1, -1};
    struct xfer *x;

    if ((p->stdin_fd >= 0 && !take_fd(r, "stdin_fd", p->stdin_fd, REQ_FD_READ, &fds[0])) ||
        (p->stdout_fd >= 0 && !take_fd(r, "stdout_fd", p->stdout_fd, REQ_FD_WRITE, &fds[1])) ||
        (p->stderr_fd >= 0 && !take_fd(r, "stderr_fd", p->stderr_fd, REQ_FD_WRITE, &fds[2])))
        goto fail_quiet;
    x = xfer_new(r, false);
    if (!x)
        goto fail_quiet;
    x->fd_out = fds[1] >= 0;
    x->fd_err = fds[2] >= 0;
    xp.timeout_ms = (uint64_t)p->timeout_ms;
    xp.max_output_bytes = (size_t)p->max_output_bytes;
    if (sandbox_exec_fds(sb, req_uid(r), &xp, fds, on_exec_done, x, &x->job, &err) < 0) {
        free(x);
        methods_sandbox_reply_error(r, &err);
        goto fail_quiet;
    }
    req_on_disconnect(r, xfer_detach, x);
    return;

fail_quiet: /* r is answered */
    CLOSE_MANY(&fds[0], &fds[1], &fds[2]);
}

bool transfer_take_fd(struct req *r, const char *param, int64_t index, enum req_fd_access access,
                      int *ret_fd)
{
    return take_fd(r, param, index, access, ret_fd);
}
