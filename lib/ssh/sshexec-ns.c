/* The exec helper (nsexec/sandboxd-nsexec.c) in a pool's container.
 *
 * The first exec on a pool starts putting the helper in place, in the background: a check
 * exec looks for /tmp/.sandboxd-nsexec-<first 16 hex digits of its SHA-256> with the
 * expected SHA-256 (sha256sum, coreutils or busybox) and runs it with --check; when that
 * does not print the helper's line, a second exec writes the binary there (from its stdin,
 * to a temporary name renamed into place) and runs the check again. Execs go on with the
 * shell wrapper meanwhile. Then:
 *   the check printed the line   every later exec on the pool runs through the helper;
 *   it did not (no sha256sum is fine, but a /tmp that is read-only or noexec, another
 *   architecture, no room)       the pool keeps the shell wrapper for good;
 *   the session failed           the next exec starts again.
 * A binary of another build has another name: both can live side by side. The line of each
 * exec execs the helper only while the file is there ([ -x ]), else the shell wrapper runs. */
#include <string.h>

#include "log.h"
#include "macro.h"
#include "nsexec-blob.h"
#include "sshexec-internal.h"
#include "sshs-internal.h"

#define COMP "exec"
#define NS_DIR "/tmp/.sandboxd-nsexec-"
#define NS_HASH_CHARS 16
#define NS_CHECK_LINE "sandboxd-nsexec ok\n"
#define NS_TIMEOUT_MS 30000u

enum ns_state {
    NS_UNKNOWN = 0,
    NS_CHECKING,
    NS_PUSHING,
    NS_READY,
    NS_UNAVAILABLE,
    _NS_STATE_MAX,
};

static const char *ns_state_to_string(enum ns_state s)
{
    static const char *const names[_NS_STATE_MAX] = {
        [NS_UNKNOWN] = "unknown", [NS_CHECKING] = "checking",       [NS_PUSHING] = "pushing",
        [NS_READY] = "ready",     [NS_UNAVAILABLE] = "unavailable",
    };
    return (unsigned)s < _NS_STATE_MAX ? names[s] : "invalid";
}

static void ns_set_state(struct sshpool *pool, enum ns_state state)
{
    enum ns_state old = (enum ns_state)sshpool_get_nsexec(pool);

    if (old == state)
        return;
    log_debug(COMP, "exec helper: %s -> %s", ns_state_to_string(old), ns_state_to_string(state));
    sshpool_set_nsexec(pool, (int)state);
}

static const char *ns_path(void)
{
    static char path[sizeof(NS_DIR) + NS_HASH_CHARS];

    if (!path[0])
        snprintf(path, sizeof(path), NS_DIR "%.*s", NS_HASH_CHARS, nsexec_blob_sha256);
    return path;
}

static int ns_start(struct sshpool *pool, bool push);

static void on_ns_done(struct sshexec *e, int error, struct sshexec_result *res, void *userdata)
{
    struct sshpool *pool = userdata;
    bool pushing = sshpool_get_nsexec(pool) == NS_PUSHING;
    bool ok = error == 0 && res->exit_code == 0 && res->out && !strcmp(res->out, NS_CHECK_LINE);

    if (ok) {
        ns_set_state(pool, NS_READY);
        return;
    }
    if (error < 0) {
        /* Lost or closing: the next exec tries again. */
        log_debug(COMP, "exec helper: %s", strerror(-error));
        ns_set_state(pool, NS_UNKNOWN);
        return;
    }
    if (pushing || ns_start(pool, true) < 0) {
        log_debug(COMP, "exec helper cannot run in this container (exit %d): the shell wrapper",
                  res->exit_code);
        ns_set_state(pool, NS_UNAVAILABLE);
    }
}

/* The check (push false) or the copy and check (push true). */
static int ns_start(struct sshpool *pool, bool push)
{
    struct sshexec_params p = {
        .timeout_ms = NS_TIMEOUT_MS,
        .has_max_output = true,
        .max_output_bytes = 256,
        .container_pid_namespace = true,
    };
    char cmd[512];
    int r;

    if (push) {
        snprintf(cmd, sizeof(cmd),
                 "P=%s; t=$P.$$; umask 022; cat >$t && chmod 755 $t && mv -f $t $P && exec $P "
                 "--check; rm -f $t; exit 1",
                 ns_path());
        p.stdin_data = nsexec_blob;
        p.stdin_len = nsexec_blob_len;
    } else {
        snprintf(cmd, sizeof(cmd),
                 "P=%s; h=$(sha256sum $P 2>/dev/null) && [ \"${h%%%% *}\" = %s ] && exec $P "
                 "--check; exit 1",
                 ns_path(), nsexec_blob_sha256);
    }
    p.command = cmd;
    ns_set_state(pool, push ? NS_PUSHING : NS_CHECKING);
    r = sshexec_start(pool, &p, on_ns_done, pool, NULL);
    if (r < 0)
        ns_set_state(pool, NS_UNKNOWN);
    return r;
}

const char *sshexec_ns_helper(struct sshpool *pool)
{
    switch ((enum ns_state)sshpool_get_nsexec(pool)) {
    case NS_READY:
        return ns_path();
    case NS_UNKNOWN:
        (void)ns_start(pool, false);
        return NULL;
    default:
        return NULL;
    }
}
