/* Every fixed limit a client of sandboxd can run into, in one place. Each one's comment
 * names, as doc: "ROW", the row of the "Limits" table of docs/protocol.md that documents
 * it (tests/systemd/test-protocol-doc.py checks that the row exists and shows the value);
 * the README's limits table points here. The headers that used to hold these (proto/params.h,
 * proto/exec-limits.h, proto/params-file.h, proto/params-process.h, proto/rpc.h, lib/ssh/sshfile.h,
 * lib/ssh/sshfile-fs.h, lib/ssh/sshexec.h, lib/engine/sandbox.h, daemon/req.h, daemon/conn.h,
 * daemon/events.h, daemon/methods-transfer.h) include this one, so the old names keep working.
 *
 * Not here: limits the operator sets (max_request_bytes, max_inflight_per_connection, quotas
 * and caps, file_timeout_ms, max_processes, process_output_max_bytes), which are
 * configuration (lib/config/config.h, docs/sandboxd.conf.5.scd); and the long-polls per sandbox
 * (SANDBOX_LONG_POLLS_MAX, 16, in lib/engine/sandbox-io.h; doc: "long-polls per sandbox").
 *
 * The engine (lib/) checks caps of its own as a backstop; they are never below what the
 * params validation (proto/) publishes, as the assertions at the end check at compile time.
 * Header only, no dependencies but <stdint.h>. */
#pragma once

#include <stdint.h>

/* ---- the wire ---------------------------------------------------------------------- */

/* doc: "nesting depth" */
#define RPC_MAX_DEPTH 32
/* doc: "batch entries" */
#define RPC_MAX_BATCH 64

/* ---- sandboxes ---------------------------------------------------------------------- */

/* [a-z0-9-]{1,64}. doc: "sandbox `id`" */
#define PARAMS_ID_MAX 64
/* One DNS label (RFC 1123). doc: "`hostname`" */
#define PARAMS_HOSTNAME_MAX 63
/* Label pairs per sandbox or filter. doc: "labels" */
#define PARAMS_LABELS_MAX 16
/* [A-Za-z0-9._-], the first alphanumeric. doc: "labels" */
#define PARAMS_LABEL_KEY_MAX 63
/* Bytes, no control characters. doc: "labels" */
#define PARAMS_LABEL_VALUE_MAX 255
/* Printable ASCII, no space. doc: "`idempotency_key`" */
#define PARAMS_IDEMPOTENCY_KEY_MAX 64
/* sandbox.create's env: variables every exec and process of the sandbox gets, within
 * process.start's env size, so that any sandbox's env alone fits every call.
 * doc: "`sandbox.create` `env`" */
#define PARAMS_CREATE_ENV_MAX 64
/* Sum of names and values. doc: "`sandbox.create` `env`" */
#define PARAMS_CREATE_ENV_BYTES_MAX 4096
/* A template's name. doc: "`template`" */
#define PARAMS_TEMPLATE_MAX 32
/* template.create's defaults: env variables, like sandbox.create's env.
 * doc: "`template.create` `defaults`" */
#define PARAMS_TEMPLATE_ENV_MAX 64
/* Sum of the env names and values, the cwd and the user: the defaults travel in the
 * template's Proxmox description. doc: "`template.create` `defaults`" */
#define PARAMS_TEMPLATE_DEFAULTS_BYTES_MAX 4096
/* A Proxmox node's name. doc: "`node`" */
#define PARAMS_NODE_MAX 63
/* Sanity bounds; the operator's caps (max_cores, ...) apply too.
 * doc: "`cores`, `memory_mb`, `disk_gb`, `ttl_s`" */
#define PARAMS_CORES_MAX 1024
/* doc: "`cores`, `memory_mb`, `disk_gb`, `ttl_s`" */
#define PARAMS_MEMORY_MB_MAX (4 * 1024 * 1024)
/* doc: "`cores`, `memory_mb`, `disk_gb`, `ttl_s`" */
#define PARAMS_DISK_GB_MAX (64 * 1024)
/* doc: "`cores`, `memory_mb`, `disk_gb`, `ttl_s`" */
#define PARAMS_TTL_S_MAX (366 * 24 * 3600)
/* Mbit/s; the operator's max_net_rate_mbps applies too. doc: "`net_rate_mbps`" */
#define PARAMS_NET_RATE_MBPS_MAX 100000
/* sandbox.set_internet. doc: "`wait_timeout_s`" */
#define PARAMS_INTERNET_WAIT_S_MAX 600
/* Past it ENGINE_E_BUSY (-32007). doc: "internet changes waiting per sandbox" */
#define ENGINE_FW_QUEUE_MAX 64u

/* ---- sandbox.exec ------------------------------------------------------------------- */
/* The whole request (cwd, env, command or argv) travels as one remote command line, which
 * sshd hands to the login shell as a single `-c` argument, and Linux refuses any single
 * exec argument of MAX_ARG_STRLEN (131072) bytes or more, terminating NUL included. Every
 * string is quoted for a POSIX shell on that line. lib/ssh/sshexec.c checks at compile time
 * that a request with every field at its limit, quoted in the worst case, still fits
 * EXEC_LINE_MAX (docs/protocol.md: the paragraph after the Limits table). */

/* Longest remote command line, without its terminating NUL (MAX_ARG_STRLEN - 1). */
#define EXEC_LINE_MAX (128 * 1024 - 1)

/* Bytes of `command`. Up to EXEC_COMMAND_INLINE_MAX it travels on the remote command line;
 * a longer one through the channel's stdin, ahead of the request's own stdin (and still
 * runs in its own PID namespace, under its timeout). doc: "`command`" */
#define EXEC_COMMAND_MAX (2 * 1024 * 1024)
/* The longest command put on the remote command line itself. */
#define EXEC_COMMAND_INLINE_MAX (48 * 1024)
/* Entries of `argv`. doc: "`argv`" */
#define EXEC_ARGV_MAX 4096
/* Sum over argv of (length + 1). doc: "`argv`" */
#define EXEC_ARGV_BYTES_MAX (48 * 1024)
/* Variables in `env`. doc: "`env`" */
#define EXEC_ENV_MAX 256
/* Bytes of one name. doc: "`env`" */
#define EXEC_ENV_NAME_MAX 255
/* Sum of names and values. doc: "`env`" */
#define EXEC_ENV_BYTES_MAX (16 * 1024)
/* Bytes of `cwd`. doc: "paths" */
#define EXEC_CWD_MAX 4095
/* Bytes of a `user` name (a uid is 0..EXEC_UID_MAX). doc: "`user`" */
#define EXEC_USER_MAX 32
#define EXEC_UID_MAX 2147483647

/* Longest shell quoting of n bytes: the shorter of '...' (where ' costs 4 bytes: '\'') and
 * "..." (where each of " $ ` \ costs 2). With a bytes ' and b bytes of the other four,
 * a + b <= n, the shorter is at most (single + 3 * double) / 4 = n + 2 + 3(a + b)/4. */
#define EXEC_QUOTED_MAX(n) ((n) + (n)*3 / 4 + 2)

/* The params' names for the same numbers. */
#define PARAMS_COMMAND_MAX EXEC_COMMAND_MAX
#define PARAMS_ARGV_MAX EXEC_ARGV_MAX
#define PARAMS_ARGV_BYTES_MAX EXEC_ARGV_BYTES_MAX
#define PARAMS_ENV_MAX EXEC_ENV_MAX
#define PARAMS_ENV_NAME_MAX EXEC_ENV_NAME_MAX /* [A-Za-z_][A-Za-z0-9_]* */
#define PARAMS_ENV_BYTES_MAX EXEC_ENV_BYTES_MAX

/* doc: "`timeout_ms`" */
#define PARAMS_TIMEOUT_MS_MAX (24 * 3600 * 1000)
#define PARAMS_TIMEOUT_MS_DEFAULT 60000
/* Per stream. doc: "`max_output_bytes`" */
#define PARAMS_MAX_OUTPUT_MAX (16 * 1024 * 1024)
#define PARAMS_MAX_OUTPUT_DEFAULT (1024 * 1024)

/* ---- data and files ----------------------------------------------------------------- */

/* An absolute path or cwd, bytes. doc: "paths" */
#define PARAMS_PATH_MAX 4095
/* Decoded stdin or content. doc: "`stdin`, `content` (decoded)" */
#define PARAMS_DATA_MAX (16 * 1024 * 1024)
/* doc: "`file.read` `length`" */
#define PARAMS_READ_LENGTH_MAX (8 * 1024 * 1024)
/* file.write offset + content bytes. doc: "`file.write` `offset`" */
#define PARAMS_WRITE_END_MAX ((INT64_C(1) << 53) - 1)
/* doc: "`file.list` `limit`" */
#define PARAMS_LIST_LIMIT_MAX 10000
/* Entries one recursive file.remove removes. doc: "`file.remove` `recursive`" */
#define SSHFILE_REMOVE_MAX 100000u

/* The engine's backstops (lib/ssh/sshfile.h, lib/ssh/sshfile-fs.h, lib/ssh/sshexec.h). */
#define SSHFILE_WRITE_MAX (64u * 1024u * 1024u) /* one write (published: PARAMS_DATA_MAX) */
#define SSHFILE_READ_MAX ((unsigned)PARAMS_READ_LENGTH_MAX)
#define SSHFILE_PATH_MAX 4096u /* bytes of a path (published: PARAMS_PATH_MAX) */
#define SSHFILE_OFFSET_MAX ((uint64_t)PARAMS_WRITE_END_MAX) /* end of an in-place write */
#define SSHFILE_LIST_MAX ((unsigned)PARAMS_LIST_LIMIT_MAX)  /* entries one list returns */
#define SSHEXEC_OUTPUT_MAX (64u * 1024u * 1024u) /* max_output_bytes (published: 16 MiB) */
#define SSHEXEC_STDIN_MAX ((unsigned)PARAMS_DATA_MAX)

/* ---- descriptors passed with a request (SCM_RIGHTS) --------------------------------- */

/* More: -32600 and the connection closed; params name them by index
 * 0..PARAMS_FD_INDEX_MAX. doc: "descriptors with one request line" */
#define REQ_FDS_MAX 8
#define PARAMS_FD_INDEX_MAX (REQ_FDS_MAX - 1)
/* doc: "descriptors waiting for their line, per connection" */
#define CONN_FDS_WAITING_MAX 32
/* Past them -32007; each holds a thread of libuv's pool (daemon/methods-transfer.h).
 * doc: "transfers through descriptors running" */
#define TRANSFER_MAX 8
/* doc: "transfers through descriptors running" */
#define TRANSFER_MAX_PER_UID 4
/* Of both the transfers' and the pumps' slots, the last SLOTS_RESERVED free ones go only
 * to a uid that holds none of them yet (past it -32007): uids already in cannot take all.
 * doc: "descriptor slots kept for uids holding none" */
#define SLOTS_RESERVED 2
/* The pumps of processes started with descriptors have slots of their own, apart from the
 * transfers' (a pump lasts as long as its process): past them -32007; each holds a thread
 * of libuv's pool too. doc: "processes with descriptors running" */
#define PUMP_MAX 6
/* doc: "processes with descriptors running" */
#define PUMP_MAX_PER_UID 4

/* ---- background processes (process.*) ----------------------------------------------- */
/* process.start takes exec's command/argv/env/cwd with tighter sizes: the command runs from
 * a wrapper script that must fit one exec line. */

/* Bytes of `command`. doc: "`process.start` `command` / `argv` / `env`" */
#define PARAMS_PROCESS_COMMAND_MAX 8192
/* Sum of argv entry lengths + 1 each. doc: "`process.start` `command` / `argv` / `env`" */
#define PARAMS_PROCESS_ARGV_BYTES_MAX 8192
/* Sum of env names and values. doc: "`process.start` `command` / `argv` / `env`" */
#define PARAMS_PROCESS_ENV_BYTES_MAX 4096
#define PARAMS_PROCESS_READ_DEFAULT (64 * 1024)
/* doc: "`process.read` `length` / `wait_ms`" */
#define PARAMS_PROCESS_READ_MAX (1024 * 1024)
/* doc: "`process.read` `length` / `wait_ms`" */
#define PARAMS_PROCESS_WAIT_MS_MAX 60000
/* Decoded. doc: "`process.write` data (decoded)" */
#define PARAMS_PROCESS_WRITE_MAX (1024 * 1024)
/* doc: "`process.wait` `timeout_ms`" */
#define PARAMS_PROCESS_TIMEOUT_MS_MAX (600 * 1000)
#define PARAMS_PROCESS_TIMEOUT_MS_DEFAULT 30000
/* Columns and rows, 1..1000 each (process.start pty, process.resize).
 * doc: "`process.start` `pty` `cols` / `rows`, `process.resize` `cols` / `rows`" */
#define PARAMS_PROCESS_PTY_MAX 1000

/* ---- subscriptions (daemon.subscribe) ----------------------------------------------- */

/* Past it the subscription ends with -32007 (daemon.subscribe's `queue_max`).
 * doc: "events waiting per subscription" */
#define EVENTS_QUEUE_MAX 1024u

/* ---- preview URLs (sandbox.preview) ------------------------------------------------- */

/* Bytes of the request line and headers of a preview connection's first request (431 past
 * it; proto/preview-http.h). doc: "preview request head" */
#define PREVIEW_HEAD_MAX (16u * 1024u)

/* ---- egress allow-lists (internet: {"allow": [...]}, proto/egress.h) ------------------ */

/* Entries of one list. doc: "`internet.allow`, `allow` (allow-lists)" */
#define EGRESS_ALLOW_MAX 64
/* Bytes of one entry as given (a name of 253 with "*." and a port fit).
 * doc: "`internet.allow`, `allow` (allow-lists)" */
#define EGRESS_ENTRY_MAX 260

/* ---- one set of numbers: what is published passes the engine's backstops ------------ */
_Static_assert(PARAMS_PATH_MAX <= EXEC_CWD_MAX, "a valid cwd must fit the exec line");
_Static_assert(PARAMS_PATH_MAX <= SSHFILE_PATH_MAX, "a valid path must pass the SFTP layer");
_Static_assert(PARAMS_DATA_MAX <= SSHFILE_WRITE_MAX, "valid content must pass the SFTP layer");
_Static_assert(PARAMS_DATA_MAX <= SSHEXEC_STDIN_MAX, "valid stdin must pass the exec layer");
_Static_assert(PARAMS_MAX_OUTPUT_MAX <= SSHEXEC_OUTPUT_MAX, "a valid output cap must pass");
_Static_assert(PARAMS_CREATE_ENV_MAX <= EXEC_ENV_MAX &&
                   PARAMS_CREATE_ENV_BYTES_MAX <= PARAMS_PROCESS_ENV_BYTES_MAX,
               "a sandbox's env fits every exec and process on its own");
_Static_assert(PARAMS_PROCESS_COMMAND_MAX <= EXEC_COMMAND_INLINE_MAX &&
                   PARAMS_PROCESS_ARGV_BYTES_MAX <= EXEC_ARGV_BYTES_MAX &&
                   PARAMS_PROCESS_ENV_BYTES_MAX <= EXEC_ENV_BYTES_MAX,
               "process.start sizes are within exec's");
