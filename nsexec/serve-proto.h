/* The framing between the daemon (lib/ssh/sshexec-super.c) and the exec supervisor
 * (nsexec/serve.c, `sandboxd-nsexec --serve DIR`), over one stream per exec: an SSH
 * direct-tcpip channel that sshd connects to the supervisor's port on the container's
 * 127.0.0.1 (what the template's `PermitOpen 127.0.0.1:*` allows; sshd refuses every
 * direct-streamlocal channel under a PermitOpen restriction). Any uid in the container can
 * connect there: a request runs only with the supervisor's token, which only root can read
 * (DIR/addr, DIR mode 0700) and the daemon learns from the --serve line. The port is one
 * only root can bind (SERVE_PORT_MIN..SERVE_PORT_MAX), so no other uid can stand in for a
 * supervisor that died and receive the requests.
 *
 * Every frame is a type byte, a payload length (4 bytes, big-endian) and the payload.
 *
 * Daemon to supervisor:
 *   'Q' the request, first and once: NUL-terminated entries, each a tag byte and its text:
 *       't' the token, 'm' the marker (SANDBOXD_EXEC_ID's value), 'c' the working directory
 *       (absent: the supervisor's, root's home), 'a' one argument (argv[0] first, looked up
 *       in PATH),
 *       'e' one NAME=value added to the environment. At most SERVE_REQUEST_MAX bytes.
 *   'I' stdin bytes (at most SERVE_CHUNK_MAX), 'E' stdin ends (no payload),
 *   'K' kill everything the command started (no payload).
 *   The stream's end before the exit frame (the daemon went away) kills as 'K' does.
 * Supervisor to daemon:
 *   'O' stdout bytes, 'R' stderr bytes (at most SERVE_CHUNK_MAX each),
 *   'X' the command exited: its exit code (4 bytes, big-endian),
 *   'S' the command (or the supervisor's process for this exec) was killed by a signal:
 *       its number (4 bytes, big-endian).
 *   After 'X' or 'S' the supervisor closes the stream. */
#pragma once

#define SERVE_HEADER_LEN 5
#define SERVE_CHUNK_MAX (64u * 1024u)
/* A request at every exec limit of proto/api-limits.h fits (checked in sshexec-super.c). */
#define SERVE_REQUEST_MAX (3u * 1024u * 1024u)
/* The stdin one exec may carry (the daemon's own limit is lower, checked there). */
#define SERVE_STDIN_MAX (64u * 1024u * 1024u)
/* How long a connection may take to send its request. */
#define SERVE_REQUEST_TIMEOUT_S 10
#define SERVE_TOKEN_LEN 32 /* hex digits */
/* The supervisor's port: below 1024, which only root may bind (serve.c). */
#define SERVE_PORT_MIN 700
#define SERVE_PORT_MAX 999
/* Connections served at once; more wait in the listen queue. */
#define SERVE_CONN_MAX 1024
/* The --serve line after the check line: SERVE_LINE PORT TOKEN\n */
#define SERVE_LINE "sandboxd-nsexec serving "
