/* Remote command execution over exec channels of an sshpool (sshs.h).
 *
 * Owns: building the remote command line (cwd, env and argv quoted for a POSIX shell, so no
 * SSH env requests are needed), stdin, stdout/stderr capture with caps, exit status or
 * signal, the timeout, and killing the whole process tree on timeout or cancel.
 * Never: logs above debug, blocks, buffers output past the caps.
 * Threading: loop thread only.
 *
 * How "kill everything it started" works. Every exec carries a marker, SANDBOXD_EXEC_ID=<128-bit
 * random hex>, in the environment of the processes sandboxd starts for it, and runs in a PID
 * namespace of its own where the container allows it (the user may create PID namespaces, as
 * root in a container may).
 *
 * With the exec helper (nsexec/sandboxd-nsexec.c, a small static binary the first exec on a
 * pool puts in the container as /root/.sandboxd-nsexec-<hash>, see sshexec.c): the login shell
 * execs it (no other process), it makes the namespace, forks its init and the command, and
 * ends as the command ended; its end (or its death) ends init and with it the namespace:
 *
 *   login shell: cd CWD; export the marker; exec sandboxd-nsexec -- [SWITCH] VECTOR
 *     ├─ init (pid 1)                  waits for EOF on a pipe from the helper
 *     └─ [env K=V] /bin/sh -c CMD      pid 2, with the namespace's own /proc where allowed
 *
 * Until the helper is in place, where it cannot be (no exec from /root, another architecture),
 * or when its file is gone, the shell wrapper does the same with unshare(1) and nsenter(1)
 * (util-linux or busybox):
 *
 *   login shell: cd CWD; export the marker; probe: `unshare -p mkfifo FIFO`; then
 *   exec unshare -p /bin/sh            the wrapper; its children go to the new namespace
 *     ├─ init (pid 1, a shell)         holds FIFO's read end, waits for EOF, reaps orphans
 *     └─ exec nsenter --pid=...        forks the command into the namespace, waits for it and
 *          └─ [exec unshare -m         ends the same way (exit code or signal), for sshd;
 *              --mount-proc]           a mount namespace with the namespace's own /proc,
 *                                      where allowed (else the container's /proc)
 *             [SWITCH]                 with a user: setpriv, su or nsenter (sshuser.h)
 *             [env K=V] /bin/sh -c     only the wrapper keeps FIFO's write end (fd 3)
 *               'exec 3>&-;CMD'
 *
 * The command cannot leave the namespace, cannot signal the wrapper's side except its own
 * process group, and cannot kill init (a namespace's init ignores signals from inside it).
 * When the command ends the wrapper (or the helper) exits, init sees EOF and exits, and the
 * kernel kills everything left in the namespace: background processes end with the command.
 * On timeout or cancel a second channel runs a small POSIX sh script that finds the marker
 * holders (the wrapper or helper and init among them), SIGKILLs every process of each namespace
 * such a holder made (killing init kills the namespace and those nested in it), then stops and
 * kills the holders and their process groups, until no holder is left. Without unshare/nsenter, or
 * when the probe fails (not permitted), the exec runs as
 * `[env K=V] /bin/sh -c CMD` directly and the kill falls back to the marker and process groups:
 * then a process that both leaves its process group and drops the marker (env -u, env -i)
 * escapes, and background processes outlive the command.
 *
 * Inside the namespace process ids are the namespace's own ($$ is small), while /proc still
 * shows the container's numbering.
 *
 * Errors passed to sshexec_done_cb (result NULL unless error == 0):
 *   0            the exec completed or timed out; see result (timed_out, started, exit_code,
 *                signal)
 *   -ECONNRESET  the session was lost while the command ran (other sshs.h errors when the
 *                pool could not connect: -EBADE, -EKEYREJECTED, -ECONNREFUSED, -ETIMEDOUT...)
 *   -EPROTO      the server refused the channel or the exec request
 *   -ECANCELED   sshexec_cancel() or sshpool_close()
 * sshexec_start() itself returns -EINVAL (bad params), -E2BIG (limits), -ENOMEM (or another
 * negative errno from getrandom(2) or libuv), and never calls the callback then. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api-limits.h"
#include "sshs.h"

#define SSHEXEC_OUTPUT_MAX_DEFAULT (1024u * 1024u) /* per stream */
/* SSHEXEC_OUTPUT_MAX, SSHEXEC_STDIN_MAX, and the sizes of command, argv, env and cwd
 * (EXEC_*): proto/api-limits.h; the remote line is at most EXEC_LINE_MAX bytes. */
#define SSHEXEC_TIMEOUT_MAX_MS (24u * 3600u * 1000u)
/* After the kill script ran, how long the command's channel gets to close by itself. */
#define SSHEXEC_KILL_GRACE_MS 2000u

enum sshexec_stream {
    SSHEXEC_STDOUT = 1,
    SSHEXEC_STDERR = 2,
};

struct sshexec;

/* Streaming: called for each chunk of output as it arrives, before the done callback,
 * never past max_output_bytes per stream (the rest is counted as truncated and dropped).
 * data is valid only during the call. Must not call sshexec_cancel() on e (may call
 * sshpool_close(), which cancels). */
typedef void (*sshexec_output_cb)(struct sshexec *e, enum sshexec_stream stream, const void *data,
                                  size_t len, void *userdata);

struct sshexec_params {
    /* Exactly one of command (run by /bin/sh -c) and argv (NULL-terminated, argv[0] looked up
     * in PATH by the remote shell) is set. */
    const char *command;
    const char *const *argv;
    const char *const *env; /* NULL or NULL-terminated "NAME=value"; NAME is
                             * [A-Za-z_][A-Za-z0-9_]*; values may hold anything but NUL */
    const char *cwd;        /* NULL = the user's home directory */
    const char *user;       /* NULL or "": the login user (root); else a name or a uid in the
                             * container (sshuser.h): the command runs as that user */
    const void *stdin_data; /* copied; NULL/0 = empty stdin (EOF at once) */
    size_t stdin_len;
    uint64_t timeout_ms;          /* 0 = no timeout; else ≤ SSHEXEC_TIMEOUT_MAX_MS; counts from
                                   * sshexec_start(): queueing and connecting included */
    bool has_max_output;          /* false: SSHEXEC_OUTPUT_MAX_DEFAULT */
    size_t max_output_bytes;      /* per stream when has_max_output; 0 keeps no output at all */
    sshexec_output_cb on_output;  /* NULL = capture into the result. Set = stream: the result
                                   * then carries no output (out/err NULL), only the flags. */
    bool container_pid_namespace; /* run in the container's own PID namespace, without the
                                   * per-exec one: what the command leaves running outlives it
                                   * (background processes, lib/ssh/process.h; the daemon's own
                                   * scripts that signal a container process, e.g. sshd); the
                                   * kill on timeout or cancel then falls back to the marker
                                   * and process groups */
};

struct sshexec_result {
    int exit_code;      /* 0..255, or -1 when killed by a signal, timed out, or no status */
    const char *signal; /* "SIGKILL", "SIGTERM", ... or NULL (always NULL when timed_out) */
    bool timed_out;     /* the timeout fired before the exec completed; whatever had started
                         * was killed; exit_code is -1 and signal NULL then */
    int user_error;     /* enum sshuser_error: not 0 when the user could not be switched to
                         * (no such user, no tool): nothing ran, and exit_code says 125 */
    bool started;       /* the exec request reached the server: the command ran, or (when the
                         * timeout fired while the server had not yet confirmed) may have */
    char *out;          /* stdout bytes (NUL-terminated for convenience, may hold NULs) */
    size_t out_len;
    bool out_truncated;
    char *err; /* stderr, same rules */
    size_t err_len;
    bool err_truncated;
    uint64_t duration_ms; /* from sshexec_start() to completion */
};

/* Called exactly once per successful sshexec_start(), from the loop, never from inside
 * sshexec_start() or sshexec_cancel(); sshpool_close() runs the done callbacks of the pool's
 * execs (with -ECANCELED) before it returns.
 * result (when error == 0) is owned by the exec: the callback may take out/err (set the
 * field to NULL, then free() it later); everything else is freed when the callback returns.
 * e is freed when the callback returns. */
typedef void (*sshexec_done_cb)(struct sshexec *e, int error, struct sshexec_result *result,
                                void *userdata);

/* Validates params, copies everything it needs (strings, stdin), queues the exec on the pool
 * and returns at once. *ret (optional) is valid until the done callback returns. */
int sshexec_start(struct sshpool *pool, const struct sshexec_params *params, sshexec_done_cb cb,
                  void *userdata, struct sshexec **ret);

/* Cancels (e.g. the client went away): kills the remote process tree like a timeout, then
 * the done callback runs with -ECANCELED from a later loop iteration. -EALREADY if the exec
 * already finished or is being cancelled. */
int sshexec_cancel(struct sshexec *e);

/* Builds the remote command line (exposed for tests): *ret is a shell command for the login
 * shell. marker is the SANDBOXD_EXEC_ID value ([0-9a-f]+). -EINVAL/-E2BIG as above. */
int sshexec_build_command(const struct sshexec_params *params, const char *marker, char **ret);
/* A command longer than EXEC_COMMAND_INLINE_MAX is not on the command line: the channel's
 * stdin must carry *ret (*ret_len bytes, to free) first, then the request's own stdin. For
 * a shorter one (or argv), *ret is NULL and *ret_len 0. */
int sshexec_command_stdin(const struct sshexec_params *params, const char *marker, char **ret,
                          size_t *ret_len);
/* The command line that kills every process of the exec with this marker (the script a
 * timeout runs; exposed for execs run on another session, such as sshfile-stream.c's). */
int sshexec_kill_command(const char *marker, char **ret);
/* Quotes s as one POSIX shell word, the shorter of 'single' ('it'\''s') and "double"
 * ("it's") quoting, single on a tie; never longer than EXEC_QUOTED_MAX(strlen(s)). */
int sshexec_shell_quote(const char *s, char **ret);
