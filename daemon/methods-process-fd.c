/* process.start with stdin_fd / stdout_fd / stderr_fd: the pumps between the client's
 * descriptors and a background process. See methods-process-fd.h. */
#include "methods-process-fd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "process.h"
#include "sandbox.h"
#include "sshfile.h"
#include "sshexec.h"
#include "util.h"
#include "methods-sandbox.h"
#include "methods-transfer.h"

#define COMP "process"
/* How often the pumps look whether their sandbox is still there (ms). */
#define PUMP_CHECK_MS 1000u

struct process_pump {
    struct process_pump *next;
    char id[PARAMS_ID_MAX + 1];
    char process[PROCESS_ID_LEN + 1];
    struct engine *engine; /* of the daemon the request came to */
    uid_t uid;
    bool admin;
    unsigned slot;
    int fd_in, fd_out, fd_err;
    struct sshfile *f; /* the pump's own session, once running */
    bool stopping;     /* cancelled: the sandbox went away or the daemon stops */
};

static struct process_pump *pumps; /* running */
static uv_timer_t check_timer;
static bool check_timer_ready;
static bool stopped; /* the daemon stops: no new pump */

static void fds_close(struct process_pump *pm)
{
    CLOSE_MANY(&pm->fd_in, &pm->fd_out, &pm->fd_err);
}

struct process_pump *process_pump_prepare(struct req *r, const struct params_process_start *p)
{
    struct process_pump *pm;

    if (p->stdin_fd < 0 && p->stdout_fd < 0 && p->stderr_fd < 0)
        return NULL;
    pm = calloc(1, sizeof *pm);
    if (!pm) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    pm->fd_in = pm->fd_out = pm->fd_err = -1;
    if ((p->stdin_fd >= 0 &&
         !transfer_take_fd(r, "stdin_fd", p->stdin_fd, REQ_FD_READ, &pm->fd_in)) ||
        (p->stdout_fd >= 0 &&
         !transfer_take_fd(r, "stdout_fd", p->stdout_fd, REQ_FD_WRITE, &pm->fd_out)) ||
        (p->stderr_fd >= 0 &&
         !transfer_take_fd(r, "stderr_fd", p->stderr_fd, REQ_FD_WRITE, &pm->fd_err)) ||
        !transfer_slot_take(r, &pm->slot)) {
        fds_close(pm);
        free(pm);
        return NULL;
    }
    snprintf(pm->id, sizeof pm->id, "%s", p->id);
    pm->engine = methods_sandbox(r)->engine;
    pm->uid = req_uid(r);
    pm->admin = req_is_admin(r);
    return pm;
}

void process_pump_abort(struct process_pump *pm)
{
    if (!pm)
        return;
    fds_close(pm);
    transfer_slot_put(pm->slot);
    free(pm);
}

static void pump_unlink(struct process_pump *pm)
{
    for (struct process_pump **pp = &pumps; *pp; pp = &(*pp)->next)
        if (*pp == pm) {
            *pp = pm->next;
            break;
        }
    if (!pumps && check_timer_ready)
        (void)uv_timer_stop(&check_timer);
}

static void on_pump_done(int error, struct sshfile_exec_fd *x, void *userdata)
{
    struct process_pump *pm = userdata;

    if (error < 0 && !pm->stopping)
        log_info(COMP, "%s %s: the descriptor pump ended early: %s", pm->id, pm->process,
                 strerror(-error));
    else
        log_debug(COMP, "%s %s: descriptor pump over (in %s, out %llu, err %llu bytes)", pm->id,
                  pm->process, pm->fd_in >= 0 ? "yes" : "no",
                  (unsigned long long)(x ? x->out_bytes : 0),
                  (unsigned long long)(x ? x->err_bytes : 0));
    pump_unlink(pm);
    /* The descriptors were the job's; it closes them once its worker is over. */
    pm->fd_in = pm->fd_out = pm->fd_err = -1;
    sshfile_close(TAKE_PTR(pm->f), NULL, NULL);
    process_pump_abort(pm);
}

/* Cancels the pumps whose sandbox is gone, being destroyed or failed (all of them when all). */
static void pumps_check(bool all)
{
    struct process_pump *pm = pumps, *next;

    for (; pm; pm = next) {
        struct engine *e = pm->engine;
        struct sandbox *sb = e && !all ? engine_lookup(e, pm->id, pm->uid, pm->admin) : NULL;
        struct sandbox_info v = {.state = SANDBOX_GONE};

        if (sb)
            sandbox_view(sb, &v);
        next = pm->next;
        if (pm->stopping || (sb && v.state != SANDBOX_DESTROYING && v.state != SANDBOX_GONE &&
                             v.state != SANDBOX_FAILED))
            continue;
        pm->stopping = true;
        log_debug(COMP, "%s %s: stopping the descriptor pump (%s)", pm->id, pm->process,
                  all ? "the daemon stops" : "the sandbox is gone");
        sshfile_cancel(pm->f, pm); /* runs on_pump_done now */
    }
}

static void on_check(uv_timer_t *t)
{
    pumps_check(false);
}

static void check_arm(uv_loop_t *loop)
{
    if (!check_timer_ready) {
        if (uv_timer_init(loop, &check_timer) < 0)
            return;
        check_timer_ready = true;
    }
    if (!uv_is_active((uv_handle_t *)&check_timer))
        (void)uv_timer_start(&check_timer, on_check, PUMP_CHECK_MS, PUMP_CHECK_MS);
}

/* The attach script as an exec with descriptors; NULL on failure. */
static struct sshfile_exec_fd *pump_exec(struct process_pump *pm, uint64_t output_max)
{
    struct sshexec_params sp = {.container_pid_namespace = true};
    struct sshfile_exec_fd *x = calloc(1, sizeof *x);
    _cleanup_free_ char *script = NULL;

    if (!x)
        return NULL;
    x->fd_in = pm->fd_in;
    x->fd_out = pm->fd_out;
    x->fd_err = pm->fd_err;
    util_random_hex(x->marker, 16);
    if (process_script_attach(pm->process, output_max, pm->fd_in >= 0, pm->fd_out >= 0,
                              pm->fd_err >= 0, &script) < 0) {
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

void process_pump_start(struct process_pump *pm, const char *process, uint64_t output_max)
{
    struct engine *e = pm->engine;
    struct sandbox *sb = e ? engine_lookup(e, pm->id, pm->uid, pm->admin) : NULL;
    struct sshfile_exec_fd *x = NULL;
    struct engine_error err;
    int k = -ENODEV;

    snprintf(pm->process, sizeof pm->process, "%s", process);
    if (sb && !stopped && sandbox_sshfile_own(sb, &pm->f, &err) == 0) {
        x = pump_exec(pm, output_max);
        k = x ? sshfile_exec_fd(pm->f, x, on_pump_done, pm) : -ENOMEM;
    }
    if (k < 0) {
        log_warning(COMP, "%s %s: cannot start the descriptor pump: %s", pm->id, process,
                    strerror(-k));
        sshfile_exec_fd_free(x);
        if (pm->f)
            sshfile_close(TAKE_PTR(pm->f), NULL, NULL);
        process_pump_abort(pm);
        return;
    }
    pm->next = pumps;
    pumps = pm;
    check_arm(engine_loop(e));
}

void process_pumps_init(void)
{
    stopped = false;
}

void process_pumps_stop(void)
{
    stopped = true;
    pumps_check(true);
    if (check_timer_ready) {
        check_timer_ready = false;
        uv_close((uv_handle_t *)&check_timer, NULL);
    }
}
