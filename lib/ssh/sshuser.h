/* Running a command as another user of the container: the shell that resolves the user and
 * puts the switch in front of the command vector.
 *
 * Owns: the resolver (the container's /etc/passwd, read by the shell, no getent needed),
 * the choice of switch tool, and the sentinel by which sandbox.exec learns that nothing ran.
 * The script runs in a root shell whose positional parameters ("$@") hold the command
 * vector; it prepends to them, in this order:
 *   SWITCH env HOME=<home> USER=<name> LOGNAME=<name> "$@"
 * where SWITCH is the first that works: util-linux `setpriv --reuid --regid --init-groups`
 * (uid, primary gid and supplementary groups); busybox `su -s /bin/sh -c 'exec "$@"' -- NAME sh`
 * (it calls initgroups too; a user with a passwd entry; `--` ends su's options, which
 * busybox would otherwise look for among the command's words); `nsenter -S UID -G GID` (busybox or
 * util-linux; a bare uid: no supplementary groups). A uid without a passwd entry runs with
 * gid = uid, HOME=/, USER and LOGNAME unset. Every SWITCH execs in place, so the pid the
 * root shell had is the command's (process.c records it before the switch).
 *
 * On failure the script calls the shell function `ue` with `nouser` (a name that is not in
 * /etc/passwd) or `noswitch` (no tool can switch); the caller defines ue. With a marker
 * (sandbox.exec), the script defines ue itself: it writes SSHUSER sentinel line to stderr
 * and exits 125, and sshuser_error() recognises that line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "api-limits.h"

enum sshuser_error {
    SSHUSER_OK = 0,
    SSHUSER_NOUSER,   /* no such user name in the container's /etc/passwd */
    SSHUSER_NOSWITCH, /* neither setpriv, su nor nsenter could switch */
};

/* The longest script (a user of EXEC_USER_MAX bytes, a marker of 32). */
#define SSHUSER_SCRIPT_MAX 1400

/* True for a user name of sandbox.exec's `user` ([A-Za-z0-9._-], not starting with '-',
 * 1..EXEC_USER_MAX bytes; a uid is all digits). */
bool sshuser_valid(const char *user);

/* The script for user (see above), to free. marker: NULL (the caller defines ue) or the
 * exec's marker (lowercase hex, at most 32). cd_home: also enter the user's home (or /). */
int sshuser_script(const char *user, const char *marker, bool cd_home, char **ret);

/* What the first stderr bytes of an exec with a user, data/len, say: SSHUSER_OK (the command
 * ran; the bytes are its own) or the error the script reported for marker. */
enum sshuser_error sshuser_error(const void *data, size_t len, const char *marker);
