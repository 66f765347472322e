/* Running a command as another user of the container. See sshuser.h. */
#include "sshuser.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

/* $u is the user. Reads /etc/passwd (a last line without a newline too): a name matches the
 * first field, a uid the third. */
#define RESOLVE                                                                                    \
    "n= i=; { while IFS=: read -r a x b c x d x || [ -n \"$a\" ]; do "                             \
    "case $u in *[!0-9]*) [ \"$u\" = \"$a\" ];; *) [ \"$u\" = \"$b\" ];; esac && "                 \
    "{ n=$a i=$b g=$c h=${d:-/}; break; }; done; } 2>/dev/null </etc/passwd; "                     \
    "if [ -z \"$i\" ]; then case $u in *[!0-9]*) ue nouser;; esac; i=$u g=$u h=/; fi; "            \
    "if [ -n \"$n\" ]; then set -- env HOME=\"$h\" USER=\"$n\" LOGNAME=\"$n\" \"$@\"; "            \
    "else set -- env -u USER -u LOGNAME HOME=/ \"$@\"; fi; "
#define CD_HOME "cd \"$h\" 2>/dev/null || cd /; "
/* busybox has a setpriv without --reuid: the probe tells them apart. */
#define SWITCH                                                                                     \
    "if setpriv --reuid=0 --regid=0 --clear-groups true 2>/dev/null; then y=--clear-groups; "      \
    "[ -n \"$n\" ] && y=--init-groups; set -- setpriv --reuid=\"$i\" --regid=\"$g\" $y -- "        \
    "\"$@\"; "                                                                                     \
    "elif [ -n \"$n\" ] && command -v su >/dev/null; then "                                        \
    "set -- su -s /bin/sh -c 'exec \"$@\"' -- \"$n\" sh \"$@\"; "                                  \
    "elif [ -z \"$n\" ] && nsenter -S 0 -G 0 true 2>/dev/null; then "                              \
    "set -- nsenter -S \"$i\" -G \"$g\" -- \"$@\"; else ue noswitch; fi"
#define UE_HEAD "ue() { echo \"sandboxd: $1 ["
#define UE_TAIL "]\" >&2; exit 125; }; "
#define SENTINEL "sandboxd: %s [%s]\n"
#define MARKER_MAX 32

_Static_assert(sizeof(UE_HEAD) + MARKER_MAX + sizeof(UE_TAIL) + sizeof("u=") + EXEC_USER_MAX +
                       sizeof("; ") + sizeof(RESOLVE) + sizeof(CD_HOME) + sizeof(SWITCH) <=
                   SSHUSER_SCRIPT_MAX,
               "SSHUSER_SCRIPT_MAX bounds every script");

bool sshuser_valid(const char *user)
{
    size_t n = user ? strlen(user) : 0;

    return n > 0 && n <= EXEC_USER_MAX && user[0] != '-' &&
           strspn(user, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

int sshuser_script(const char *user, const char *marker, bool cd_home, char **ret)
{
    char *s = NULL;

    if (!sshuser_valid(user) || !ret ||
        (marker &&
         (strlen(marker) > MARKER_MAX || strspn(marker, "0123456789abcdef") != strlen(marker))))
        return -EINVAL;
    /* The user needs no quoting: its characters are none of the shell's. */
    if (asprintf(&s, "%s%s%su=%s; " RESOLVE "%s" SWITCH, marker ? UE_HEAD : "",
                 marker ? marker : "", marker ? UE_TAIL : "", user, cd_home ? CD_HOME : "") < 0)
        return -ENOMEM;
    *ret = s;
    return 0;
}

enum sshuser_error sshuser_error(const void *data, size_t len, const char *marker)
{
    static const char *const names[] = {
        [SSHUSER_NOUSER] = "nouser", [SSHUSER_NOSWITCH] = "noswitch"};
    char want[64];

    for (size_t i = SSHUSER_NOUSER; i < ELEMENTSOF(names); i++) {
        int n = snprintf(want, sizeof want, SENTINEL, names[i], marker);

        if (n > 0 && (size_t)n == len && memcmp(want, data, len) == 0)
            return (enum sshuser_error)i;
    }
    return SSHUSER_OK;
}
