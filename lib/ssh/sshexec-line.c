/* The remote command line of an exec (see sshexec.h): quoting, the limits, the wrapper. */
#include <string.h>

#include "macro.h"
#include "sshexec-internal.h"
#include "sshexec.h"
#include "sshuser.h"
#include "util.h"

/* ---- command building ---- */

/* The remote line (see sshexec.h), run by the login shell, in pieces:
 *   [cd Q(cwd) && ]export SANDBOXD_EXEC_ID=<marker> && set -- [env Q(K=V)...] CMDV
 *     && f=/tmp/.sandboxd-exec-<marker> && p= && { command -v nsenter >/dev/null
 *     && { unshare -p -f -m --mount-proc mkfifo -m 600 $f 2>/dev/null && p=1
 *          || unshare -p mkfifo -m 600 $f 2>/dev/null; }
 *     && exec unshare -p /bin/sh -c Q(stage2) sandboxd-exec $f "$p" "$@"; exec "$@"; }
 * where CMDV is /bin/sh -c Q(exec 3>&-;CMD), or for argv
 * /bin/sh -c Q(exec 3>&-;exec "$@") sh Q(ARG0) Q(ARG1)...
 * The probe both tests that this user may make a PID namespace (and that unshare exists) and
 * makes the FIFO; when it fails the line runs CMDV directly, as before namespaces. */
#define LINE_CD "cd "
#define LINE_CD_END " && "
#define LINE_EXPORT "export " MARKER_VAR "="
#define LINE_SET " && set --"
#define LINE_ENV " env"
#define LINE_SH " /bin/sh -c "
#define CMD_PREFIX "exec 3>&-;"
#define ARGV_SCRIPT CMD_PREFIX "exec \"$@\""
/* A command longer than EXEC_COMMAND_INLINE_MAX comes on stdin, followed by the marker, ahead
 * of the request's own stdin: the shell reads exactly that many bytes (dd with fullblock
 * makes no read past them), refuses them unless they end with the marker (a channel cut
 * short), and evaluates them. %zu: the bytes, %s: the marker (twice). */
#define LONG_SCRIPT                                                                                \
    "__sandboxd_c=$(dd bs=%zu count=1 iflag=fullblock 2>/dev/null;echo .);"                        \
    "case $__sandboxd_c in *%s.);;*)echo 'sandboxd: the command did not arrive whole' >&2;"        \
    "exit 126;;esac;eval \"${__sandboxd_c%%%s.}\""
#define LONG_SCRIPT_MAX (SLEN(LONG_SCRIPT) + 20 + 2 * MARKER_LEN)
#define ARGV_ZERO " sh"
#define LINE_FIFO " && f=/tmp/.sandboxd-exec-"
/* The probe also tells whether the command may have a /proc of its own (p=1): a mount
 * namespace with a fresh proc of a new PID namespace, what the command's `unshare -m
 * --mount-proc` does (procps' ps and top need /proc to be the namespace's: they look
 * themselves up by getpid()). Else the command sees the container's /proc. */
#define LINE_NS                                                                                    \
    " && p= && { command -v nsenter >/dev/null && { unshare -p -f -m --mount-proc mkfifo -m 600 "  \
    "$f 2>/dev/null && p=1 || unshare -p mkfifo -m 600 $f 2>/dev/null; } && exec "                 \
    "unshare -p /bin/sh -c "
#define LINE_END " sandboxd-exec $f \"$p\" \"$@\"; exec \"$@\"; }"
/* With the exec helper (sshexec.c), ahead of LINE_FIFO: it runs the vector in a PID
 * namespace of its own with no shell between (nsexec/sandboxd-nsexec.c); the shell wrapper
 * after it runs only when the file is not there. */
#define LINE_HELPER " && { [ -x "
#define LINE_HELPER_EXEC " ] && exec "
#define LINE_HELPER_END " -- \"$@\"; :; }"
#define HELPER_PATH_MAX 64
#define HELPER_PATH_CHARS "abcdefghijklmnopqrstuvwxyz0123456789/.-_"
/* Instead of LINE_FIFO...LINE_END when the exec keeps the container's PID namespace. */
#define LINE_DIRECT " && exec \"$@\""
/* With a user: " && { SSHUSER_SCRIPT; }" after the vector (sshuser.h). */
#define LINE_USER " && { "
#define LINE_USER_END "; }"

/* The wrapper, after `unshare -p`: $1 is the FIFO, $2 1 when the command gets its own /proc
 * (above), the rest the command. Its first child is the namespace's init: it opens the FIFO
 * (meeting the wrapper's open for writing), removes it, and waits for a subshell that reads the
 * FIFO until EOF, which comes when the last writer (the wrapper, after the command ends) closes.
 * The read runs in a subshell that has no children, so no SIGCHLD cuts it short (dash ends `read`
 * on any trapped signal), and while init waits for it in the foreground it reaps the orphans the
 * namespace hands it (a background job and `wait` would not do: busybox ash can then miss the
 * reader's end; the `:` keeps the subshell from being the group's last command, which ash would run
 * without a fork, leaving nobody to reap). Then the wrapper becomes nsenter, which forks the
 * command into the namespace and ends as the command ended (exit code or signal), which is what
 * sshd reports. */
#define STAGE2                                                                                     \
    "f=$1; p=$2; shift 2; { exec 4<$f; rm -f $f; (read x <&4); :; } >/dev/null 2>&1 & "            \
    "exec 3>$f; exec nsenter --pid=/proc/self/ns/pid_for_children -- "                             \
    "${p:+unshare -m --mount-proc} \"$@\""

#define MARKER_LEN 32
#define SLEN(s) (sizeof(s) - 1)

/* Worst cases, from proto/api-limits.h: each quoted item i of n_i bytes costs at most
 * n_i + 3 n_i / 4 + 2, plus a separating space. env: n_i = name + 1 + value, so the items sum
 * to at most EXEC_ENV_BYTES_MAX + EXEC_ENV_MAX; argv: the lengths sum to at most
 * EXEC_ARGV_BYTES_MAX - (number of entries). More items only cost more: take the maxima. */
#define WORST_CWD (SLEN(LINE_CD) + EXEC_QUOTED_MAX(EXEC_CWD_MAX) + SLEN(LINE_CD_END))
#define WORST_ENV                                                                                  \
    (SLEN(LINE_ENV) + 3 * EXEC_ENV_MAX + (EXEC_ENV_BYTES_MAX + EXEC_ENV_MAX) +                     \
     (EXEC_ENV_BYTES_MAX + EXEC_ENV_MAX) * 3 / 4)
#define WORST_COMMAND                                                                              \
    (SLEN(LINE_SH) +                                                                               \
     EXEC_QUOTED_MAX(SLEN(CMD_PREFIX) + MAX(EXEC_COMMAND_INLINE_MAX, LONG_SCRIPT_MAX)))
#define WORST_ARGV                                                                                 \
    (SLEN(LINE_SH) + EXEC_QUOTED_MAX(SLEN(ARGV_SCRIPT)) + SLEN(ARGV_ZERO) + 3 * EXEC_ARGV_MAX +    \
     (EXEC_ARGV_BYTES_MAX - EXEC_ARGV_MAX) + (EXEC_ARGV_BYTES_MAX - EXEC_ARGV_MAX) * 3 / 4)
#define WORST_FIXED                                                                                \
    (SLEN(LINE_EXPORT) + MARKER_LEN + SLEN(LINE_SET) + SLEN(LINE_FIFO) + MARKER_LEN +              \
     SLEN(LINE_NS) + EXEC_QUOTED_MAX(SLEN(STAGE2)) + SLEN(LINE_END) + SLEN(LINE_HELPER) +          \
     SLEN(LINE_HELPER_EXEC) + SLEN(LINE_HELPER_END) + 2 * HELPER_PATH_MAX + SLEN(LINE_USER) +      \
     SSHUSER_SCRIPT_MAX + SLEN(LINE_USER_END))
_Static_assert(WORST_FIXED + WORST_CWD + WORST_ENV + MAX(WORST_COMMAND, WORST_ARGV) <=
                   EXEC_LINE_MAX,
               "a request at every exec limit, worst-case quoted, must fit the remote line");

void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (!b->error)
        b->error = buf_append(&b->buf, s, n);
}

/* The line built (*ret, to free) or the first error. */
int sb_finish(struct sbuf *b, char **ret)
{
    if (b->error) {
        buf_clear(&b->buf, true);
        return b->error;
    }
    *ret = buf_steal(&b->buf);
    return 0;
}

void sb_puts(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* One POSIX shell word for s: '...' with ' written as '\'', or "..." with " $ ` \ escaped
 * by a backslash, whichever is shorter. */
void sb_quote(struct sbuf *b, const char *s)
{
    size_t singles = 0, specials = 0;
    const char *run = s;

    for (const char *p = s; *p; p++) {
        singles += *p == '\'';
        specials += *p == '"' || *p == '$' || *p == '`' || *p == '\\';
    }
    if (3 * singles <= specials) {
        sb_add(b, "'", 1);
        for (const char *p = s; *p; p++)
            if (*p == '\'') {
                sb_add(b, run, (size_t)(p - run));
                sb_add(b, "'\\''", 4);
                run = p + 1;
            }
        sb_puts(b, run);
        sb_add(b, "'", 1);
        return;
    }
    sb_add(b, "\"", 1);
    for (const char *p = s; *p; p++)
        if (*p == '"' || *p == '$' || *p == '`' || *p == '\\') {
            sb_add(b, run, (size_t)(p - run));
            sb_add(b, "\\", 1);
            run = p; /* the character itself starts the next run */
        }
    sb_puts(b, run);
    sb_add(b, "\"", 1);
}

int sshexec_shell_quote(const char *s, char **ret)
{
    struct sbuf b = SBUF_INIT;

    if (!s || !ret)
        return -EINVAL;
    sb_quote(&b, s);
    return sb_finish(&b, ret);
}

static bool env_name_valid(const char *kv)
{
    const char *eq = strchr(kv, '=');

    if (!eq || eq == kv || (size_t)(eq - kv) > EXEC_ENV_NAME_MAX)
        return false;
    if (!(kv[0] == '_' || (kv[0] >= 'A' && kv[0] <= 'Z') || (kv[0] >= 'a' && kv[0] <= 'z')))
        return false;
    for (const char *p = kv + 1; p < eq; p++)
        if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
              (*p >= '0' && *p <= '9')))
            return false;
    return true;
}

/* The limits of proto/api-limits.h, as the params validation applies them. */
int sshexec_params_validate(const struct sshexec_params *p)
{
    size_t n, bytes = 0;

    if (!p || (!p->command == !p->argv))
        return -EINVAL;
    if (p->command && strlen(p->command) > EXEC_COMMAND_MAX)
        return -E2BIG;
    if (p->argv) {
        if (!p->argv[0] || !*p->argv[0])
            return -EINVAL;
        for (n = 0; p->argv[n]; n++) {
            bytes += strlen(p->argv[n]) + 1;
            if (n >= EXEC_ARGV_MAX || bytes > EXEC_ARGV_BYTES_MAX)
                return -E2BIG;
        }
    }
    bytes = 0;
    if (p->env)
        for (n = 0; p->env[n]; n++) {
            if (n >= EXEC_ENV_MAX)
                return -E2BIG;
            if (!env_name_valid(p->env[n]))
                return -EINVAL;
            bytes += strlen(p->env[n]) - 1; /* name and value, without the '=' */
            if (bytes > EXEC_ENV_BYTES_MAX)
                return -E2BIG;
        }
    if (p->cwd && !*p->cwd)
        return -EINVAL;
    if (p->cwd && strlen(p->cwd) > EXEC_CWD_MAX)
        return -E2BIG;
    if (p->user && *p->user && !sshuser_valid(p->user))
        return -EINVAL;
    if (p->stdin_len > SSHEXEC_STDIN_MAX)
        return -E2BIG;
    if (p->stdin_len > 0 && !p->stdin_data)
        return -EINVAL;
    if (p->timeout_ms > SSHEXEC_TIMEOUT_MAX_MS)
        return -EINVAL;
    if (p->has_max_output && p->max_output_bytes > SSHEXEC_OUTPUT_MAX)
        return -E2BIG;
    return 0;
}

/* The command vector (everything after `set --`). */
static void sb_command_vector(struct sbuf *b, const struct sshexec_params *params,
                              const char *marker)
{
    if (params->env && params->env[0]) {
        /* env(1) sets any name, even ones a login shell (bash) keeps read-only. */
        sb_puts(b, LINE_ENV);
        for (size_t i = 0; params->env[i]; i++) {
            sb_puts(b, " ");
            sb_quote(b, params->env[i]);
        }
    }
    sb_puts(b, LINE_SH);
    if (params->command && strlen(params->command) > EXEC_COMMAND_INLINE_MAX) {
        char *cmd = NULL;

        if (asprintf(&cmd, CMD_PREFIX LONG_SCRIPT, strlen(params->command) + strlen(marker), marker,
                     marker) < 0) {
            b->error = b->error ?: -ENOMEM;
            return;
        }
        sb_quote(b, cmd);
        free(cmd);
    } else if (params->command) {
        /* Concatenated before quoting: one word. The command's shell closes the wrapper's
         * end of the FIFO first, so only the wrapper holds it. */
        char *cmd = NULL;

        if (asprintf(&cmd, "%s%s", CMD_PREFIX, params->command) < 0) {
            b->error = b->error ?: -ENOMEM;
            return;
        }
        sb_quote(b, cmd);
        free(cmd);
    } else {
        sb_quote(b, ARGV_SCRIPT);
        sb_puts(b, ARGV_ZERO);
        for (size_t i = 0; params->argv[i]; i++) {
            sb_puts(b, " ");
            sb_quote(b, params->argv[i]);
        }
    }
}

int sshexec_build_command(const struct sshexec_params *params, const char *marker, char **ret)
{
    return sshexec_build_command_with(params, marker, NULL, ret);
}

int sshexec_build_command_with(const struct sshexec_params *params, const char *marker,
                               const char *helper, char **ret)
{
    struct sbuf b = SBUF_INIT;
    size_t mlen;
    int r;

    r = sshexec_params_validate(params);
    if (r < 0)
        return r;
    if (!marker || !ret)
        return -EINVAL;
    mlen = strlen(marker);
    if (mlen == 0 || mlen > MARKER_LEN || strspn(marker, "0123456789abcdef") != mlen)
        return -EINVAL;
    if (helper && (!*helper || strlen(helper) > HELPER_PATH_MAX ||
                   strspn(helper, HELPER_PATH_CHARS) != strlen(helper)))
        return -EINVAL;
    if (params->cwd) {
        sb_puts(&b, LINE_CD);
        sb_quote(&b, params->cwd);
        sb_puts(&b, LINE_CD_END);
    }
    sb_puts(&b, LINE_EXPORT);
    sb_puts(&b, marker);
    sb_puts(&b, LINE_SET);
    sb_command_vector(&b, params, marker);
    if (params->user && *params->user) {
        char *script = NULL;

        r = sshuser_script(params->user, marker, !params->cwd, &script);
        if (r < 0 && !b.error)
            b.error = r;
        sb_puts(&b, LINE_USER);
        if (script)
            sb_puts(&b, script);
        sb_puts(&b, LINE_USER_END);
        free(script);
    }
    if (params->container_pid_namespace) {
        sb_puts(&b, LINE_DIRECT);
    } else {
        if (helper) {
            sb_puts(&b, LINE_HELPER);
            sb_puts(&b, helper);
            sb_puts(&b, LINE_HELPER_EXEC);
            sb_puts(&b, helper);
            sb_puts(&b, LINE_HELPER_END);
        }
        sb_puts(&b, LINE_FIFO);
        sb_puts(&b, marker);
        sb_puts(&b, LINE_NS);
        sb_quote(&b, STAGE2);
        sb_puts(&b, LINE_END);
    }
    return sb_finish(&b, ret);
}

int sshexec_command_stdin(const struct sshexec_params *params, const char *marker, char **ret,
                          size_t *ret_len)
{
    size_t n, m;
    char *p;

    if (!params || !marker || !ret || !ret_len)
        return -EINVAL;
    if (!params->command || strlen(params->command) <= EXEC_COMMAND_INLINE_MAX) {
        *ret = NULL;
        *ret_len = 0;
        return 0;
    }
    n = strlen(params->command);
    m = strlen(marker);
    p = malloc(n + m + 1);
    if (!p)
        return -ENOMEM;
    memcpy(p, params->command, n);
    memcpy(p + n, marker, m + 1);
    *ret = p;
    *ret_len = n + m;
    return 0;
}
