/* The steps that bring a stopped sandbox back (a rollback, a resume, a detach): its container
 * started with its address awaited and checked (reconcile_restart()), a new SSH session with
 * the pinned host key, and the record saved with the address. See sandbox-internal.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "op-step.h"
#include "reconcile-restart.h"
#include "sandbox-internal.h"

#define COMP "sandbox"

static void on_restarted(int error, const char *ip, const char *reason, void *userdata)
{
    struct sandbox *sb = userdata;
    char buf[256];
    struct engine_error err = {.kind = ENGINE_E_PROXMOX, .error = error, .message = buf};
    char *copy;

    if (error < 0) {
        snprintf(buf, sizeof buf, "starting the sandbox failed: %s",
                 reason ? reason : strerror(-error));
        op_step_done(sb, &err);
        return;
    }
    if (!sb->ip || strcmp(sb->ip, ip) != 0) {
        copy = strdup(ip);
        if (!copy) {
            err = (struct engine_error){
                .kind = ENGINE_E_INTERNAL, .error = -ENOMEM, .message = "out of memory"};
            op_step_done(sb, &err);
            return;
        }
        log_info(COMP, "%s: new address %s after its container started again", sb->id, ip);
        free(sb->ip);
        sb->ip = copy;
    }
    op_step_done(sb, NULL);
}

int restart_step_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return reconcile_restart(sb->engine, sb->node, sb->vmid, sb->ip, on_restarted, sb);
}

int reconnect_step_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    sandbox_close_ssh(sb); /* the sessions of before the stop are gone with it */
    return connect_start(sb, timeout_ms, ret_fail);
}

void save_step_saved(int r, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err = {
        .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot write the registry record"};

    sb->refs--;
    op_step_done(sb, r < 0 ? &err : NULL);
}

int save_step_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    int r;

    sb->refs++;
    r = sandbox_save(sb, save_step_saved, sb);
    if (r < 0)
        sb->refs--;
    return r;
}
