/* The descriptor pumps of background processes: one exec channel each (the attach script of
 * process.h) on an SSH session of its own, run as a descriptor stream of sshfile.h, in a
 * pump slot for its whole length (apart from the transfers' slots, so that long-lived pumps
 * never keep a short transfer from running). The engine stops a sandbox's pumps when the sandbox
 * leaves READY (sandbox_set_state()) and every pump when it closes. See sandbox-io.h. */
#include "macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api-limits.h"
#include "list.h"
#include "log.h"
#include "process.h"
#include "sandbox-internal.h"
#include "sandbox-io.h"

#define COMP "process"

struct sandbox_pump {
    struct sandbox_pump *next, *prev; /* in e->pumps, once running */
    struct engine *e;
    struct sandbox *sb; /* running: the sandbox it pumps for */
    char id[ID_MAX + 1];
    char process[SANDBOX_PROCESS_ID_LEN + 1];
    int fds[3];
    unsigned slot;
    struct sshfile *f; /* its own session, once running */
    bool stopping;     /* stopped: the sandbox went away or the engine closes */
    sandbox_pump_cb cb;
    void *userdata;
};

static void pumps_stop(struct engine *e, const struct sandbox *sb);

int sandbox_pump_new(struct engine *e, uid_t uid, const int fds[3], sandbox_pump_cb cb,
                     void *userdata, struct sandbox_pump **ret, struct engine_error *ret_err)
{
    struct sandbox_pump *p = calloc(1, sizeof *p);
    int r;

    if (!p)
        return engine_refuse_oom(ret_err);
    r = pump_slot_take(e, uid, &p->slot, ret_err);
    if (r < 0) {
        free(p);
        return r;
    }
    p->e = e;
    e->pumps_stop = pumps_stop;
    memcpy(p->fds, fds, sizeof p->fds);
    p->cb = cb;
    p->userdata = userdata;
    *ret = p;
    return 0;
}

void sandbox_pump_free(struct sandbox_pump *p)
{
    if (!p)
        return;
    CLOSE_MANY(&p->fds[0], &p->fds[1], &p->fds[2]);
    transfer_slot_put(p->e, p->slot);
    free(p);
}

void sandbox_pump_pins(const struct sandbox_pump *p, bool *ret_out, bool *ret_err)
{
    *ret_out = p && p->fds[1] >= 0;
    *ret_err = p && p->fds[2] >= 0;
}

/* Reports the end (error: why; x: the stream's counts, NULL when it never ran) and frees p. */
static void pump_end(struct sandbox_pump *p, int error, bool started,
                     const struct sshfile_exec_fd *x)
{
    struct sandbox_pump_end end = {
        .sandbox = p->id,
        .process = p->process,
        .started = started,
        .stopped = p->stopping,
        .in = p->fds[0] >= 0,
        .out_bytes = x ? x->out_bytes : 0,
        .err_bytes = x ? x->err_bytes : 0,
    };

    if (p->cb)
        p->cb(error, &end, p->userdata);
    sandbox_pump_free(p);
}

static void on_pump_done(int error, struct sshfile_exec_fd *x, void *userdata)
{
    struct sandbox_pump *p = userdata;

    LIST_REMOVE(p->e->pumps, p);
    /* The descriptors were the stream's; it closes them once its worker is over. */
    p->fds[0] = p->fds[1] = p->fds[2] = -1;
    sshfile_close(TAKE_PTR(p->f), NULL, NULL);
    pump_end(p, error, true, x);
}

/* The attach script as an exec with descriptors; NULL on failure. */
static struct sshfile_exec_fd *pump_exec(struct sandbox_pump *p, uint64_t output_max)
{
    struct sshexec_params sp = {.container_pid_namespace = true};
    struct sshfile_exec_fd *x = calloc(1, sizeof *x);
    _cleanup_free_ char *script = NULL;

    if (!x)
        return NULL;
    x->fd_in = p->fds[0];
    x->fd_out = p->fds[1];
    x->fd_err = p->fds[2];
    util_random_hex(x->marker, 16);
    if (process_script_attach(p->process, output_max, p->fds[0] >= 0, p->fds[1] >= 0,
                              p->fds[2] >= 0, &script) < 0) {
        free(x);
        return NULL;
    }
    sp.command = script;
    if (sshexec_build_command(&sp, x->marker, &x->command) < 0) {
        free(x);
        return NULL;
    }
    return x; /* timeout 0: none; max_output 0: nothing captured */
}

void pump_start(struct sandbox *sb, struct sandbox_pump *p, const char *process)
{
    struct engine *e = sb->engine;
    struct sshfile_exec_fd *x = NULL;
    struct engine_error err;
    int k = -ENODEV;

    snprintf(p->id, sizeof p->id, "%s", sb->id);
    snprintf(p->process, sizeof p->process, "%s", process);
    if (sandbox_sshfile_own(sb, &p->f, &err) == 0) {
        x = pump_exec(p, e->cfg->sandbox.process_output_max_bytes);
        k = x ? sshfile_exec_fd(p->f, x, on_pump_done, p) : -ENOMEM;
    }
    if (k < 0) {
        sshfile_exec_fd_free(x);
        if (p->f)
            sshfile_close(TAKE_PTR(p->f), NULL, NULL);
        pump_end(p, k, false, NULL);
        return;
    }
    p->sb = sb;
    LIST_PREPEND(e->pumps, p);
}

/* Stops the running pumps of sb (NULL: every one); their ends are reported now. */
static void pumps_stop(struct engine *e, const struct sandbox *sb)
{
    struct sandbox_pump *p, *next;

    for (p = e->pumps; p; p = next) {
        next = p->next;
        if (p->stopping || (sb && p->sb != sb))
            continue;
        p->stopping = true;
        log_debug(COMP, "%s %s: stopping the descriptor pump (%s)", p->id, p->process,
                  sb ? "the sandbox is gone" : "the daemon stops");
        sshfile_cancel(p->f, p); /* runs on_pump_done now */
    }
}
