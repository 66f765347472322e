/* Background processes inside a sandbox: the shell scripts that start, read, feed, wait
 * for, signal and list them, and the parsing of what those scripts report.
 *
 * Everything about a process lives in the container, under $HOME/.sandboxd-proc/<id>/, so
 * it survives the client, the SSH session and the daemon (a restart, kill -9): the daemon
 * holds no process state and every method is one short exec (sshexec.h, plain mode) of a
 * script built here. A process's folder holds:
 *
 *   cmd, started          what process.list shows (display text, start time in seconds)
 *   wpid, cpid, ipid      the wrapper, the command (its own session and process group), and
 *                         the init of the command's PID namespace (absent without one)
 *   out.N, err.N          the output, in segments of `segment` bytes: byte offset X of a
 *                         stream is in segment X / segment at X % segment; old segments are
 *                         removed to keep about output_max bytes (at least output_max, at
 *                         most output_max + 2 segments), so offsets never move
 *   out.p, err.p          FIFOs the command writes to; a relay per stream copies them into
 *                         the segments
 *   out.busy, err.busy    1 while a relay copies a fast stream in long rounds, else 0
 *   .w.PID, .x.PID        FIFOs of a waiting process.read and process.wait, and of an
 *                         attach script's followers (PID: the script's or the follower's,
 *                         as the container numbers it): the relays write a line
 *                         into each .w.* after each round, the wrapper into both kinds once
 *                         the exit status is there; a reader that is gone loses its FIFO
 *                         within a second
 *   in, hpid, in.closed   stdin (when asked for): a FIFO held open by a holder process until
 *                         process.write closes it
 *   tick                  a FIFO nobody writes: `read -t` on it sleeps without a fork
 *   out.pin, err.pin      "pid index" of an attach script (process_script_attach()): while
 *                         that pid lives, segments from index on are not removed
 *   pty, tty              with a terminal: the command's script, and the terminal's device
 *                         (/dev/pts/N, as `tty` prints it inside) that process.resize sets
 *   exit                  the exit status as the shell reports it (128+N for signal N),
 *                         written by the wrapper once the command and everything left in its
 *                         PID namespace ended and the output was copied
 *
 * The wrapper runs the command as the exec layer does (sshexec.h): in a PID namespace of its
 * own when the container allows it, so what the command leaves behind ends with it and a
 * SIGKILL to the namespace's init ends the whole tree; otherwise in a session of its own,
 * signalled by process group.
 *
 * Scripts report on stderr one line "@ OK ..." or "@ E <what> ..." (parsed here); process
 * reads put the data on stdout. Pure: no loop, no I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define PROCESS_ID_LEN 19 /* "pr-" + 16 hex: 8 of the start time, 8 random */
/* Segment size: output_max / 8, at least this. */
#define PROCESS_SEGMENT_MIN (64u * 1024u)
/* Display text kept for process.list (bytes). */
#define PROCESS_DISPLAY_MAX 256
/* How long a start keeps the output for an attach script that has not come yet (s). */
#define PROCESS_PIN_WAIT_S 60u

enum process_stream {
    PROCESS_STDOUT,
    PROCESS_STDERR,
};

struct process_start_spec {
    const char *id; /* process_id_new() */
    const char *command;
    const char *const *argv; /* NULL-terminated; exactly one of command/argv */
    const char *const *env;  /* NULL or NULL-terminated "NAME=value" (validated by the caller) */
    const char *cwd;         /* NULL: the home directory (the user's, with user) */
    const char *user;        /* NULL or "": root; else a name or uid (sshuser.h) */
    bool has_stdin;
    unsigned pty_cols, pty_rows; /* both 0, or a terminal of that size (has_stdin then true) */
    time_t started_at;
    unsigned max_processes; /* running processes allowed in the sandbox */
    uint64_t output_max;    /* bytes kept per stream */
    /* An attach script will follow stdout / stderr (process_script_attach()): the output is
     * kept from offset 0 until it comes, for at most PROCESS_PIN_WAIT_S. */
    bool pin_out, pin_err;
};

/* A new id "pr-XXXXXXXXYYYYYYYY" (time-ordered); buf has PROCESS_ID_LEN + 1 bytes. */
int process_id_new(time_t now, char buf[static PROCESS_ID_LEN + 1]);
bool process_id_valid(const char *s);
uint64_t process_segment_size(uint64_t output_max);
/* The display text of a command or argv: one line, at most PROCESS_DISPLAY_MAX bytes. */
char *process_display(const char *command, const char *const *argv);

/* Scripts (malloc'd, for sshexec's `command`). -ENOMEM, -E2BIG. */
int process_script_start(const struct process_start_spec *s, char **ret);
int process_script_read(const char *id, enum process_stream stream, uint64_t offset,
                        uint64_t length, unsigned wait_ms, uint64_t output_max, char **ret);
/* Data comes on the script's stdin; close ends the process's stdin afterwards. */
int process_script_write(const char *id, bool close, char **ret);
int process_script_wait(const char *id, unsigned timeout_ms, char **ret);
/* signame: "KILL", "TERM", ... (process_signal_valid()). */
int process_script_kill(const char *id, const char *signame, char **ret);
int process_script_list(char **ret);
/* Attaches the caller's streams, run on an exec channel of its own: the channel's stdin goes
 * into the process's stdin (which is closed at its end) when in, and its stdout and stderr
 * get the process's stdout and stderr from offset 0 (when out, err) until the process has
 * exited and all of it was copied. Segments not copied yet are kept while it runs. At least
 * one of in/out/err. -EINVAL, -ENOMEM. */
int process_script_attach(const char *id, uint64_t output_max, bool in, bool out, bool err,
                          char **ret);
/* Sets the size of the process's terminal (1..1000 each; -EINVAL otherwise): the kernel
 * sends SIGWINCH to the terminal's foreground process group. Reports "notty" for a process
 * started without a terminal, "exited" once it ended. */
int process_script_resize(const char *id, unsigned cols, unsigned rows, char **ret);
/* True for the signal names process.kill takes, without "SIG" ("KILL", "TERM", ...). */
bool process_signal_valid(const char *name);

/* The state a script reports. */
struct process_status {
    const char *state; /* "running", "exited", "lost" (static) */
    int exit_code;     /* -1 unless exited normally */
    int signal;        /* 0 unless ended by a signal */
};

/* What the report line said. */
enum process_report {
    PROCESS_R_OK,
    PROCESS_R_NO_SUCH,   /* no such process */
    PROCESS_R_LIMIT,     /* too many running processes (start) */
    PROCESS_R_CWD,       /* cwd is not a directory (start) */
    PROCESS_R_RANGE,     /* offset past the end (read) */
    PROCESS_R_EXITED,    /* the process ended (write) */
    PROCESS_R_NO_STDIN,  /* started without stdin (write) */
    PROCESS_R_CLOSED,    /* stdin already closed (write) */
    PROCESS_R_NO_PTY,    /* no terminal can be made in the sandbox (start with a pty) */
    PROCESS_R_NO_TTY,    /* the process has no terminal (resize) */
    PROCESS_R_NO_USER,   /* no such user in the sandbox (start with a user) */
    PROCESS_R_NO_SWITCH, /* no setpriv, su or nsenter to change user (start with a user) */
    PROCESS_R_MALFORMED, /* no report line, or one that does not parse */
};

/* Parses the report line in a script's stderr (the last line starting "@ "). For read:
 * ret_nums gets first, start, size (first byte still kept, where the data starts, bytes
 * written so far); for a status: ret_status. Either may be NULL. For PROCESS_R_LIMIT,
 * ret_nums[0] is the number of running processes; for PROCESS_R_RANGE, ret_nums[2] the size. */
enum process_report process_parse_report(const char *err, size_t len, uint64_t ret_nums[3],
                                         struct process_status *ret_status);
/* Status from the raw "exit" text ("-" running, "lost", or a number). */
void process_status_from(const char *exit_text, struct process_status *ret);

/* One row of process.list output. */
struct process_row {
    char id[PROCESS_ID_LEN + 1];
    time_t started_at;
    struct process_status status;
    char command[PROCESS_DISPLAY_MAX + 1];
};
/* Parses the list script's stdout (one line per process; malformed lines skipped). */
int process_parse_list(const char *out, size_t len, struct process_row **ret, size_t *ret_n);
