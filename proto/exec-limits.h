/* Size limits of sandbox.exec: the one set of numbers that the params validation
 * (proto/params.c) publishes and enforces and that the SSH layer (lib/sshexec.c) builds
 * its remote command line from. Header only, no dependencies.
 *
 * Why these numbers: the whole request (cwd, env, command or argv) travels as one remote
 * command line, which sshd hands to the login shell as a single `-c` argument, and Linux
 * refuses any single exec argument of MAX_ARG_STRLEN (131072) bytes or more, terminating NUL
 * included. Every string is quoted for a POSIX shell on that line. lib/sshexec.c checks at
 * compile time that a request with every field at its limit, quoted in the worst case, still
 * fits EXEC_LINE_MAX. */
#pragma once

/* Longest remote command line, without its terminating NUL (MAX_ARG_STRLEN - 1). */
#define EXEC_LINE_MAX (128 * 1024 - 1)

#define EXEC_COMMAND_MAX (48 * 1024)    /* bytes of `command` */
#define EXEC_ARGV_MAX 4096              /* entries of `argv` */
#define EXEC_ARGV_BYTES_MAX (48 * 1024) /* sum over argv of (length + 1) */
#define EXEC_ENV_MAX 256                /* variables in `env` */
#define EXEC_ENV_NAME_MAX 255           /* bytes of one name */
#define EXEC_ENV_BYTES_MAX (16 * 1024)  /* sum over env of (name length + value length) */
#define EXEC_CWD_MAX 4095               /* bytes of `cwd` */

/* Longest shell quoting of n bytes: the shorter of '...' (where ' costs 4 bytes: '\'') and
 * "..." (where each of " $ ` \ costs 2). With a bytes ' and b bytes of the other four,
 * a + b <= n, the shorter is at most (single + 3 * double) / 4 = n + 2 + 3(a + b)/4. */
#define EXEC_QUOTED_MAX(n) ((n) + (n)*3 / 4 + 2)
