/* The SSH connect step of the create (and of its rekey, sandbox-rekey.c), a row of its step
 * table (op-step.h): the sandbox's SSH pool connects to its address, pinned to the
 * template's host keys or to the sandbox's own (sandbox_ssh_config()). It completes through
 * the driver, so nothing here calls into sandbox-create.c. */
#include "macro.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "op-step.h"
#include "sandbox-internal.h"
#include "sshs.h"
#include "testhook.h"

static void on_connected(struct sshpool *pool, int error, void *userdata)
{
    struct sandbox *sb = userdata;
    const char *detail;
    char buf[512];
    struct engine_error err = {.kind = ENGINE_E_SSH, .error = error, .message = buf};

    if (error >= 0) {
        test_crash_point("create-before-ready");
        op_step_done(sb, NULL);
        return;
    }
    if (error == -ETIMEDOUT && op_step_left(sb) == 0) {
        err = op_step_deadline_error(sb, buf, sizeof buf);
        op_step_done(sb, &err);
        return;
    }
    /* A fresh container's sshd may drop the first connections while it starts: retry those
     * (never a host key or auth refusal) while the create deadline allows. */
    if ((error == -EPROTO || error == -ECONNRESET) && sb->run.attempts < ENGINE_CONNECT_ATTEMPTS &&
        op_step_left(sb) > ENGINE_CONNECT_RETRY_MS) {
        sb->run.attempts++;
        sshpool_close(TAKE_PTR(sb->pool), NULL, NULL);
        op_step_again(sb, ENGINE_CONNECT_RETRY_MS);
        return;
    }
    detail = sshpool_last_error(pool);
    snprintf(buf, sizeof buf, "SSH connect to %s failed: %s%s%s", sb->ip,
             error == -EBADE ? "host key mismatch" : strerror(-error),
             detail && *detail ? ": " : "", detail ? detail : "");
    op_step_done(sb, &err);
}

int connect_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct engine *e = sb->engine;
    struct sshs_config sc;
    int r;

    assert(!sb->pool); /* a retry or the reconnect closed the previous one */
    sandbox_ssh_config(sb, &sc);
    r = sshpool_new(e->loop, &sc, e->cfg->ssh.sessions_per_sandbox, &sb->pool);
    if (r < 0) {
        *ret_fail = "cannot set up the SSH pool";
        return r;
    }
    return sshpool_connect(sb->pool, timeout_ms, on_connected, sb);
}
