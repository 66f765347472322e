/* The helpers every file of the engine may call and that call nothing else of the engine:
 * state names, the loop's clock, notices to the engine's hook, errors from Proxmox results
 * and the errors of refused requests. Keeping them here lets the files sandbox.c itself
 * calls (sandbox-obs.c, sandbox-probe.c) use them without calling back into sandbox.c. */
#include "macro.h"

#include "sandbox.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "pve.h"
#include "sandbox-internal.h"

#define COMP "sandbox"

static const char *const state_names[_SANDBOX_STATE_MAX] = {
    [SANDBOX_PENDING] = "pending",
    [SANDBOX_CLONING] = "cloning",
    [SANDBOX_CONFIGURING] = "configuring",
    [SANDBOX_STARTING] = "starting",
    [SANDBOX_WAITING_IP] = "waiting_ip",
    [SANDBOX_CONNECTING] = "connecting",
    [SANDBOX_READY] = "ready",
    [SANDBOX_DESTROYING] = "destroying",
    [SANDBOX_GONE] = "gone",
    [SANDBOX_FAILED] = "failed",
    [SANDBOX_PAUSED] = "paused",
};

const char *sandbox_state_to_string(enum sandbox_state s)
{
    return (unsigned)s < _SANDBOX_STATE_MAX ? state_names[s] : NULL;
}

const char *sandbox_state_to_public(enum sandbox_state s)
{
    switch (s) {
    case SANDBOX_READY:
        return "ready";
    case SANDBOX_DESTROYING:
        return "destroying";
    case SANDBOX_GONE:
        return "destroyed";
    case SANDBOX_FAILED:
        return "failed";
    case SANDBOX_PAUSED:
        return "paused";
    default:
        return "creating";
    }
}

void engine_noticef(struct engine *e, int level, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_debug(COMP, "%s", buf);
    if (e->hooks.notice)
        e->hooks.notice(level, buf, e->hooks.userdata);
}

uint64_t now_ms(struct engine *e)
{
    uv_update_time(e->loop);
    return uv_now(e->loop);
}

void error_from_pve(const struct pve_result *res, bool closing, struct engine_error *ret)
{
    *ret = (struct engine_error){.error = res->error};
    if (res->error == -EREMOTEIO && res->perr) {
        ret->kind = ENGINE_E_PROXMOX;
        ret->http_status = res->perr->http_status;
        ret->message = res->perr->message;
        ret->upid = res->perr->upid ? res->perr->upid : res->upid;
    } else if (res->error == -ECANCELED || closing) {
        ret->kind = ENGINE_E_SHUTDOWN;
        ret->message = "the daemon is shutting down";
    } else if (res->error == -ETIMEDOUT) {
        ret->kind = ENGINE_E_DEADLINE;
        ret->message = "Proxmox did not answer within the deadline";
        ret->upid = res->upid;
    } else {
        ret->kind = ENGINE_E_PROXMOX;
        ret->message = strerror(-res->error);
        ret->upid = res->upid;
    }
}

int engine_refuse(struct engine_error *ret_err, enum engine_err_kind kind, int r, const char *msg,
                  const char *param)
{
    *ret_err = (struct engine_error){.kind = kind, .error = r, .message = msg, .param = param};
    return r;
}

int engine_refuse_unavailable(const struct engine *e, struct engine_error *ret_err)
{
    if (e->closing)
        return engine_refuse(ret_err, ENGINE_E_SHUTDOWN, -ESHUTDOWN, "the daemon is shutting down",
                             NULL);
    if (!e->configured || !e->pve)
        return engine_refuse(ret_err, ENGINE_E_NOT_CONFIGURED, -ENXIO,
                             "Proxmox is not configured ([proxmox] section)", NULL);
    return 0;
}

int engine_refuse_oom(struct engine_error *ret_err)
{
    return engine_refuse(ret_err, ENGINE_E_INTERNAL, -ENOMEM, "out of memory", NULL);
}

int engine_refuse_not_ready(struct engine_error *ret_err, enum sandbox_state state)
{
    /* The one refusal of every call that needs the container running (sandbox.resume). */
    engine_refuse(ret_err, ENGINE_E_STATE, -EAGAIN,
                  state == SANDBOX_PAUSED ? ENGINE_PAUSED_MESSAGE : "the sandbox is not ready",
                  NULL);
    ret_err->state = sandbox_state_to_public(state);
    return -EAGAIN;
}

int engine_refuse_ttl(struct engine_error *ret_err, int64_t ttl, unsigned max, const char *msg,
                      const char *cap)
{
    if (ttl >= 1 && ttl <= (int64_t)max)
        return 0;
    engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, msg, "ttl_s");
    ret_err->cap = cap;
    ret_err->limit = max;
    return -EINVAL;
}

int engine_refuse_rolling_back(const struct sandbox *sb, struct engine_error *ret_err)
{
    if (!sb->rolling_back)
        return 0;
    return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                         "a rollback, or a volume attach or detach, restarts this sandbox", NULL);
}
