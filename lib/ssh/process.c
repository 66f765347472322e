/* Background process scripts. See process.h. */
#include "process.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "macro.h"
#include "sshexec.h"
#include "sshuser.h"

/* The folder of every process, the status helper and the sleep without a fork: `read -t`
 * (ash, bash) on a FIFO nobody writes; where read has no -t (dash), sleep(1). */
#define PRELUDE                                                                                    \
    "B=\"$HOME/.sandboxd-proc\"\n"                                                                 \
    "tk() { read -t \"$1\" q <>\"$B/.tick\" 2>/dev/null; [ $? -gt 128 ] || sleep \"$1\"; }\n"      \
    "st() { if [ -e \"$1/exit\" ]; then read -r x <\"$1/exit\";\n"                                 \
    "  elif read -r v 2>/dev/null <\"$1/wpid\" && ! kill -0 \"$v\" 2>/dev/null; then\n"            \
    "    if [ -e \"$1/exit\" ]; then read -r x <\"$1/exit\"; else x=lost; fi\n"                    \
    "  else x=-; fi; }\n"
#define ENTER(id) "cd \"$B/" id "\" 2>/dev/null || { echo '@ E nosuch' >&2; exit 0; }\n"

/* The wrapper, in its own session with the process's folder as cwd, detached by a double
 * setsid rather than `&`: a shell without job control starts a `&` command with SIGINT and
 * SIGQUIT ignored, a disposition every program under it would inherit and no shell can undo
 * (process.kill SIGINT, and Ctrl-C on a terminal, would do nothing). The first setsid makes
 * a session leader, so the second forks (busybox and util-linux alike) and its parent returns
 * at once. The wrapper is started without the
 * launching exec's SANDBOXD_EXEC_ID (/proc/PID/environ keeps what exec(2) got, so an `unset`
 * would not hide it from that exec's kill script):
 * $1 segment size, $2 bytes kept per stream, $3 1 when stdin is a FIFO, the rest the command.
 * Relays copy out.p/err.p into segments, each read written as it comes (head and cat buffer
 * or cannot stop at a segment's end). A read of a full 64 KiB (the command writes faster than
 * the relay copies) switches to one dd of up to 64 reads for the next round, so a fast stream
 * costs a few forks per MiB rather than two per read; a short round's size comes from dd's
 * report (else stat(1), not wc, which busybox's reads whole), and the busy file (below) is
 * written when it changes. After each round the relay writes a line into every long-poll's FIFO
 * (.w.PID, process.read) and, at the end, the wrapper into every waiter's (.x.PID,
 * process.wait); a long round that stalls (the command paused) is covered by the trimmer,
 * which wakes the long-polls every 50 ms while a stream's busy file says a round runs. The
 * trimmer also removes old segments every second (and a relay at each new segment), and
 * FIFOs whose reader is gone; the
 * stdin holder keeps `in` open for writing until process.write closes it; the command runs
 * in a PID namespace of its own when the container allows (as sshexec.h's wrapper does),
 * else in a session of its own; then the exit status is written once the relays saw EOF
 * (everything that held the output ended). */
static const char wrapper[] =
    "S=$1; C=$2; I=$3; shift 3\n"
    "read -r p _ </proc/self/stat; echo \"$p\" >wpid\n"
    "B=${PWD%/*}\n"
    "tk() { read -t \"$1\" q <>\"$B/.tick\" 2>/dev/null; [ $? -gt 128 ] || sleep \"$1\"; }\n"
    "fz() { stat -c %s \"$1\" 2>/dev/null || wc -c <\"$1\"; }\n"
    "ntf() { for q in \"$@\"; do [ -p \"$q\" ] && echo o 1<>\"$q\"; done 2>/dev/null; }\n"
    "bn() { b=${m#*records out?}; b=${b%% *}\n"
    "  case $b in ''|*[!0-9]*) b=$(($(fz \"$s.$k\") - n));; esac; }\n"
    "rl() { s=$1; k=0; n=0; b=0; u=0; : >\"$s.0\"; while :; do\n"
    "  r=$((S - n)); c=$((r / 65536))\n"
    "  if [ \"$b\" -ge 65536 ] && [ \"$c\" -gt 0 ]; then [ \"$c\" -gt 64 ] && c=64\n"
    "    [ $u = 1 ] || { u=1; echo 1 >\"$s.busy\"; }\n"
    "    m=$(LC_ALL=C dd bs=65536 count=$c 2>&1 >>\"$s.$k\") || break\n"
    "    case $m in \"$c+0 records in\"*) b=$((c * 65536));; *) bn;; esac\n"
    "  else [ $u = 0 ] || { u=0; echo 0 >\"$s.busy\"; }; [ \"$r\" -gt 65536 ] && r=65536\n"
    "    m=$(LC_ALL=C dd bs=$r count=1 2>&1 >>\"$s.$k\") || break\n"
    "    case $m in '0+0 records in'*) break;; '1+0 records in'*) b=$r;; *) bn;; esac; fi\n"
    "  [ \"$b\" -gt 0 ] || break; ntf .w.*\n"
    "  n=$((n + b)); if [ \"$n\" -ge \"$S\" ]; then k=$((k+1)); n=0; : >\"$s.$k\"; tr \"$s\"; fi\n"
    "  done; echo 0 >\"$s.busy\"; }\n"
    "tr() { f=; l=; for y in \"$1\".[0-9]*; do [ -e \"$y\" ] || continue; i=${y##*.}\n"
    "  if [ -z \"$f\" ] || [ \"$i\" -lt \"$f\" ]; then f=$i; fi\n"
    "  if [ -z \"$l\" ] || [ \"$i\" -gt \"$l\" ]; then l=$i; fi; done\n"
    "  [ -n \"$f\" ] || return 0; m=$l\n"
    "  if read -r y i 2>/dev/null <\"$1.pin\" && [ -n \"$i\" ] && kill -0 \"$y\" 2>/dev/null; "
    "then\n"
    "    [ \"$i\" -lt \"$m\" ] && m=$i; fi\n"
    "  while [ $(( (l - f - 1) * S )) -ge \"$C\" ] && [ \"$f\" -lt \"$m\" ]; do rm -f \"$1.$f\"; "
    "f=$((f+1)); done; }\n"
    "rl out <out.p & o=$!\n"
    "rl err <err.p & e=$!\n"
    "gc() { for q in .w.* .x.*; do [ -p \"$q\" ] || continue\n"
    "  kill -0 \"${q#.?.}\" 2>/dev/null || rm -f \"$q\"; done; }\n"
    "( while [ ! -e exit ]; do y=; read -r y 2>/dev/null <out.busy; v=; read -r v 2>/dev/null "
    "<err.busy\n"
    "  case $y$v in *1*) tk 0.05; ntf .w.*;; *) tk 1; gc;; esac\n"
    "  tr out; tr err; done ) & t=$!\n"
    "h=; i=/dev/null\n"
    "if [ \"$I\" = 1 ]; then sleep 2147483647 >in 2>/dev/null & h=$!; echo \"$h\" >hpid; i=in; "
    "fi\n"
    "if command -v nsenter >/dev/null && unshare -p mkfifo -m 600 nsf 2>/dev/null; then\n"
    "  unshare -p /bin/sh -c '"
    "f=$1; shift; { exec 4<\"$f\"; rm -f \"$f\"; (read x <&4); :; } </dev/null >/dev/null 2>&1 & "
    "echo $! >ipid; exec 3>\"$f\"; "
    "exec nsenter --pid=/proc/self/ns/pid_for_children -- setsid \"$@\"' "
    "sandboxd-process \"$PWD/nsf\" \"$@\" <\"$i\" >out.p 2>err.p\n"
    "else\n"
    "  setsid \"$@\" <\"$i\" >out.p 2>err.p\n"
    "fi\n"
    "s=$?\n"
    "[ -n \"$h\" ] && kill \"$h\" 2>/dev/null\n"
    "wait \"$o\" \"$e\"\n"
    "echo \"$s\" >exit.t && mv exit.t exit\n"
    "ntf .w.* .x.*\n"
    "kill \"$t\" 2>/dev/null; tr out; tr err\n";

/* What the command's shell does first: closes the namespace FIFO, records its pid (as the
 * container numbers it: /proc is the container's), forgets the folder, enters cwd. */
#define CMD_PREFIX                                                                                 \
    "exec 3>&-; read -r p _ </proc/self/stat; echo \"$p\" >\"$SANDBOXD_PROCESS_DIR/cpid\"; "       \
    "unset SANDBOXD_PROCESS_DIR; "

static const char *const signals[] = {"KILL", "TERM", "INT",  "HUP",  "QUIT",
                                      "USR1", "USR2", "STOP", "CONT", NULL};

bool process_signal_valid(const char *name)
{
    for (size_t i = 0; name && signals[i]; i++)
        if (strcmp(name, signals[i]) == 0)
            return true;
    return false;
}

int process_id_new(time_t now, char buf[static PROCESS_ID_LEN + 1])
{
    uint32_t rnd;

    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
        return errno ? -errno : -EIO;
    snprintf(buf, PROCESS_ID_LEN + 1, "pr-%08x%08x", (uint32_t)now, rnd);
    return 0;
}

bool process_id_valid(const char *s)
{
    if (!s || strlen(s) != PROCESS_ID_LEN || strncmp(s, "pr-", 3) != 0)
        return false;
    return strspn(s + 3, "0123456789abcdef") == PROCESS_ID_LEN - 3;
}

uint64_t process_segment_size(uint64_t output_max)
{
    return MAX(output_max / 8, (uint64_t)PROCESS_SEGMENT_MIN);
}

char *process_display(const char *command, const char *const *argv)
{
    char *d = malloc(PROCESS_DISPLAY_MAX + 1);
    size_t n = 0;

    if (!d)
        return NULL;
    for (size_t a = 0; command ? a < 1 : argv && argv[a]; a++) {
        const char *s = command ? command : argv[a];

        if (a > 0 && n < PROCESS_DISPLAY_MAX)
            d[n++] = ' ';
        for (; *s && n < PROCESS_DISPLAY_MAX; s++)
            d[n++] = (unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : *s;
    }
    d[n] = 0;
    return d;
}

/* A script under construction: errors stick, the first one is returned by finish. */
struct script {
    FILE *f;
    char *buf;
    size_t len;
    int error;
};

static int script_open(struct script *s)
{
    *s = (struct script){};
    s->f = open_memstream(&s->buf, &s->len);
    return s->f ? 0 : -ENOMEM;
}

/* A script on the process id (validated), its prelude written. */
static int script_begin(const char *id, struct script *s)
{
    if (!process_id_valid(id))
        return -EINVAL;
    if (script_open(s) < 0)
        return -ENOMEM;
    fputs(PRELUDE, s->f);
    return 0;
}

/* script_begin(), then into the process's folder (or "@ E nosuch" when it is gone). */
static int script_enter(const char *id, struct script *s)
{
    int r = script_begin(id, s);

    if (r >= 0)
        fprintf(s->f, ENTER("%s"), id);
    return r;
}

static void script_quote(struct script *s, const char *word)
{
    char *q = NULL;
    int r;

    if (s->error)
        return;
    r = sshexec_shell_quote(word, &q);
    if (r < 0) {
        s->error = r;
        return;
    }
    fputs(q, s->f);
    free(q);
}

static int script_finish(struct script *s, char **ret)
{
    if (fclose(s->f) != 0 && !s->error)
        s->error = -ENOMEM;
    if (!s->error && s->len > EXEC_COMMAND_INLINE_MAX)
        s->error = -E2BIG;
    if (s->error) {
        free(s->buf);
        return s->error;
    }
    *ret = s->buf;
    return 0;
}

/* With a user: a root shell does CMD_PREFIX (the records stay root's and out of the user's
 * reach), then sshuser.h's switch execs in place, so the pid recorded is the command's. */
static void script_user(struct script *s, const char *user)
{
    char *sw = NULL, *rec = NULL;

    if (sshuser_script(user, NULL, false, &sw) < 0 ||
        asprintf(&rec, "%sue() { exit 125; }; %s; exec \"$@\"", CMD_PREFIX, sw) < 0) {
        free(sw);
        s->error = s->error ?: -EINVAL;
        return;
    }
    fputs(" /bin/sh -c ", s->f);
    script_quote(s, rec);
    fputs(" sh", s->f);
    free(sw);
    free(rec);
}

/* The command vector after the wrapper's arguments: [env K=V...] /bin/sh -c PREFIX...,
 * with a user behind script_user()'s shell. */
static void script_vector(struct script *s, const struct process_start_spec *p)
{
    char *pre = NULL, *cd = NULL;
    bool user = p->user && *p->user;

    if (user)
        script_user(s, p->user);
    if (p->env && p->env[0]) {
        fputs(" env", s->f);
        for (size_t i = 0; p->env[i]; i++) {
            fputc(' ', s->f);
            script_quote(s, p->env[i]);
        }
    }
    if (p->cwd && sshexec_shell_quote(p->cwd, &cd) < 0)
        s->error = s->error ?: -ENOMEM;
    /* Without a cwd: the user's home, as for sandbox.exec (the process's own folder, the
     * shell's cwd until here, holds its records). */
    if (asprintf(&pre, "%s%s%s%s%s", user ? "" : CMD_PREFIX,
                 cd ? "cd " : "cd \"${HOME:-/}\" 2>/dev/null || cd /", cd ? cd : "",
                 cd ? " || exit 126; " : "; ", p->command ? p->command : "exec \"$@\"") < 0) {
        free(cd);
        s->error = s->error ?: -ENOMEM;
        return;
    }
    free(cd);
    fputs(" /bin/sh -c ", s->f);
    script_quote(s, pre);
    free(pre);
    if (!p->command) {
        fputs(" sh", s->f);
        for (size_t i = 0; p->argv[i]; i++) {
            fputc(' ', s->f);
            script_quote(s, p->argv[i]);
        }
    }
}

/* On a terminal: util-linux script(1) makes the pty (its stdin is the terminal's input, the
 * terminal's output its stdout) and runs, by /bin/sh, a line that restores SHELL, sets the
 * size and sources the file `pty` of the process's folder (its cwd), which execs the vector
 * above. The file is written by a quoted here-document, so the vector is quoted once, as
 * without a terminal, and every request within the limits still fits one exec line. TERM
 * defaults to xterm (env may override it). */
static void script_pty_file(struct script *s, const struct process_start_spec *p)
{
    struct script b;
    char *body = NULL;
    int r;

    if (s->error)
        return;
    r = script_open(&b);
    if (r < 0) {
        s->error = r;
        return;
    }
    fputs("exec", b.f);
    script_vector(&b, p);
    r = script_finish(&b, &body);
    if (r < 0) {
        s->error = r;
        return;
    }
    /* The delimiter holds the process id, random: quoted user text cannot hold it by chance;
     * if it does anyway, the request is refused. */
    if (strstr(body, p->id))
        s->error = -E2BIG;
    else
        fprintf(s->f, "cat >pty <<'SANDBOXD_PTY_%s'\n%s\nSANDBOXD_PTY_%s\n", p->id, body, p->id);
    free(body);
}

static void script_pty_vector(struct script *s, const struct process_start_spec *p)
{
    fprintf(s->f,
            " env SANDBOXD_SHELL=\"$SHELL\" SHELL=/bin/sh TERM=xterm script -q -e -f -c "
            "'if [ -n \"$SANDBOXD_SHELL\" ]; then SHELL=$SANDBOXD_SHELL; else unset SHELL; fi; "
            "unset SANDBOXD_SHELL; stty cols %u rows %u 2>/dev/null; "
            "tty >tty.t 2>/dev/null && mv tty.t tty; . ./pty' /dev/null",
            p->pty_cols, p->pty_rows);
}

/* The start script fails early, with "@ E nopty", where no terminal can be made: no script
 * of util-linux (busybox's has no -e), or no pty (devpts). */
#define PTY_CHECK                                                                                  \
    "if ! command -v script >/dev/null 2>&1 || "                                                   \
    "! script -q -e -c : /dev/null </dev/null >/dev/null 2>&1; then\n"                             \
    "  echo '@ E nopty' >&2; exit 0; fi\n"

int process_script_start(const struct process_start_spec *p, char **ret)
{
    struct script s;
    char *display;
    int r;

    if (!p || !process_id_valid(p->id) || !p->command == !p->argv || p->max_processes == 0 ||
        !p->pty_cols != !p->pty_rows || (p->pty_cols && !p->has_stdin))
        return -EINVAL;
    display = process_display(p->command, p->argv);
    if (!display)
        return -ENOMEM;
    r = script_open(&s);
    if (r < 0) {
        free(display);
        return r;
    }
    fputs(PRELUDE, s.f);
    if (p->pty_cols)
        fputs(PTY_CHECK, s.f);
    if (p->user && *p->user) {
        /* Nothing is made for a user the sandbox cannot run as. */
        char *check = NULL;

        r = sshuser_script(p->user, NULL, false, &check);
        if (r < 0)
            s.error = r;
        else
            fprintf(s.f, "ue() { echo \"@ E $1\" >&2; exit 0; }\n%s\n", check);
        free(check);
    }
    fputs("umask 077; mkdir -p \"$B\" || exit 1\n"
          "[ -p \"$B/.tick\" ] || mkfifo \"$B/.tick\" 2>/dev/null\n"
          "i=0; until mkdir \"$B/.lock\" 2>/dev/null; do i=$((i+1))\n"
          "  if [ $i -ge 500 ]; then rmdir \"$B/.lock\"; i=0; fi; sleep 0.01; done\n"
          "n=0; t=0; for d in \"$B\"/pr-*; do [ -d \"$d\" ] || continue; t=$((t+1))\n"
          "  st \"$d\"; [ \"$x\" = - ] && n=$((n+1)); done\n",
          s.f);
    fprintf(s.f,
            "if [ $n -ge %u ]; then rmdir \"$B/.lock\"; echo \"@ E limit $n\" >&2; exit 0; fi\n"
            "for d in \"$B\"/pr-*; do [ $t -ge %u ] || break\n"
            "  st \"$d\"; [ \"$x\" != - ] && { rm -rf \"$d\"; t=$((t-1)); }; done\n",
            p->max_processes, 2 * p->max_processes);
    fputs("c=", s.f);
    script_quote(&s, p->cwd ? p->cwd : "");
    fprintf(s.f,
            "\nif [ -n \"$c\" ] && ! [ -d \"$c\" ]; then rmdir \"$B/.lock\"; "
            "echo '@ E cwd' >&2; exit 0; fi\n"
            "d=\"$B/%s\"; mkdir \"$d\" && cd \"$d\" || { rmdir \"$B/.lock\"; exit 1; }\n"
            "rmdir \"$B/.lock\"\n"
            "printf '%%s\\n' ",
            p->id);
    script_quote(&s, display);
    fprintf(s.f,
            " >cmd; echo %lld >started; mkfifo out.p err.p || exit 1\n"
            "%s",
            (long long)p->started_at, p->has_stdin ? "mkfifo in || exit 1\n" : "");
    if (p->pin_out || p->pin_err)
        fprintf(s.f,
                "env -u SANDBOXD_EXEC_ID setsid sleep %u </dev/null >/dev/null 2>&1 &\n"
                "%s%s",
                PROCESS_PIN_WAIT_S, p->pin_out ? "echo \"$! 0\" >out.pin\n" : "",
                p->pin_err ? "echo \"$! 0\" >err.pin\n" : "");
    if (p->pty_cols)
        script_pty_file(&s, p);
    fprintf(s.f,
            "export SANDBOXD_PROCESS_DIR=\"$d\" SANDBOXD_PROCESS=%s\n"
            "env -u SANDBOXD_EXEC_ID setsid setsid /bin/sh -c ",
            p->id);
    script_quote(&s, wrapper);
    fprintf(s.f, " sandboxd-process %llu %llu %d",
            (unsigned long long)process_segment_size(p->output_max),
            (unsigned long long)p->output_max, p->has_stdin ? 1 : 0);
    if (p->pty_cols)
        script_pty_vector(&s, p);
    else
        script_vector(&s, p);
    fputs(" </dev/null >/dev/null 2>&1\necho '@ OK' >&2\n", s.f);
    free(display);
    return script_finish(&s, ret);
}

int process_script_read(const char *id, enum process_stream stream, uint64_t offset,
                        uint64_t length, unsigned wait_ms, uint64_t output_max, char **ret)
{
    struct script s;
    int r = script_enter(id, &s);

    if (r < 0)
        return r;
    fprintf(s.f, "S=%llu; s=%s; a=%llu; L=%llu; w=%u.%03u\n",
            (unsigned long long)process_segment_size(output_max),
            stream == PROCESS_STDOUT ? "out" : "err", (unsigned long long)offset,
            (unsigned long long)length, wait_ms / 1000, wait_ms % 1000);
    /* sz: f = first segment kept, z = bytes written so far. Waiting: a FIFO .w.PID that the
     * relays write a line into after each round (process.c's wrapper) and a sleep holds open
     * for writing until wait_ms is over (its end is the FIFO's end of file); nothing runs while
     * nothing comes. The size is looked at again once the FIFO is open, so a round that ended
     * before is not missed. */
    fputs("sz() { f=; l=; for y in \"$s\".[0-9]*; do [ -e \"$y\" ] || continue; i=${y##*.}\n"
          "  if [ -z \"$f\" ] || [ \"$i\" -lt \"$f\" ]; then f=$i; fi\n"
          "  if [ -z \"$l\" ] || [ \"$i\" -gt \"$l\" ]; then l=$i; fi; done\n"
          "  if [ -z \"$l\" ]; then f=0; z=0; else\n"
          "    z=$(stat -c %s \"$s.$l\" 2>/dev/null || wc -c <\"$s.$l\"); z=$((l * S + z)); fi; }\n"
          "sz\n"
          "if [ \"$a\" -gt \"$z\" ]; then echo \"@ E range 0 0 $z\" >&2; exit 0; fi\n"
          "if [ \"$a\" = \"$z\" ] && [ \"$w\" != 0.000 ] && [ ! -e exit ]; then\n"
          "  read -r q _ </proc/self/stat; q=.w.$q; rm -f \"$q\"\n"
          "  if mkfifo -m 600 \"$q\" 2>/dev/null; then\n"
          "    sleep \"$w\" >\"$q\" 2>/dev/null & t=$!\n"
          "    exec 3<\"$q\"\n"
          "    while sz; [ \"$a\" = \"$z\" ] && [ ! -e exit ]; do read -r _ <&3 || break; done\n"
          "    exec 3<&-; kill \"$t\" 2>/dev/null; wait \"$t\" 2>/dev/null; rm -f \"$q\"\n"
          "  fi\n"
          "fi\n",
          s.f);
    /* The bytes: dd seeks (tail -c +N reads from the start, as busybox's does), tail and head
     * where dd has no byte flags. */
    fputs("st .; sz\n"
          "[ \"$a\" -lt $((f * S)) ] && a=$((f * S))\n"
          "k=$((a / S)); p=$((a % S)); n=$((z - a))\n"
          "[ \"$n\" -gt $((S - p)) ] && n=$((S - p)); [ \"$n\" -gt \"$L\" ] && n=$L\n"
          "[ \"$n\" -gt 0 ] && { dd if=\"$s.$k\" bs=65536 skip=\"$p\" count=\"$n\" "
          "iflag=skip_bytes,count_bytes 2>/dev/null ||\n"
          "  tail -c +$((p + 1)) \"$s.$k\" 2>/dev/null | head -c \"$n\"; }\n"
          "echo \"@ OK $((f * S)) $a $z $x\" >&2\n",
          s.f);
    return script_finish(&s, ret);
}

/* A whole script on the process id: script_enter(), then body (a printf format). */
static int script_on(const char *id, char **ret, const char *body, ...) _printf_(3, 4);
static int script_on(const char *id, char **ret, const char *body, ...)
{
    struct script s;
    va_list ap;
    int r = script_enter(id, &s);

    if (r < 0)
        return r;
    va_start(ap, body);
    vfprintf(s.f, body, ap);
    va_end(ap);
    return script_finish(&s, ret);
}

/* process.write's close: the holder goes, and once this script's descriptor closes too the
 * command reads EOF after the data. The command must hold its end first (its shell has written
 * cpid, after the wrapper opened `in` as its stdin; or it ended): a pipe that nobody holds
 * loses what it buffered, and the command's later open would wait forever. */
#define CLOSE_STDIN                                                                                \
    "i=0; until [ -e cpid ] || [ -e exit ] || [ $i -ge 1000 ]; do i=$((i+1)); tk 0.01; done\n"     \
    ": >in.closed; [ -n \"$h\" ] && kill \"$h\" 2>/dev/null\n"

int process_script_write(const char *id, bool close, char **ret)
{
    return script_on(id, ret,
                     "st .; [ \"$x\" = - ] || { echo '@ E exited' >&2; exit 0; }\n"
                     "[ -p in ] || { echo '@ E nostdin' >&2; exit 0; }\n"
                     "[ -e in.closed ] && { echo '@ E closed' >&2; exit 0; }\n"
                     "h=; i=0; until read -r h 2>/dev/null <hpid || [ $i -ge 500 ]; do\n"
                     "  i=$((i+1)); tk 0.01; done\n"
                     "exec 4<>in; cat >&4\n"
                     "i=0; while [ -n \"$h\" ] && [ $i -lt 500 ]; do\n"
                     "  case $(readlink /proc/$h/fd/1 2>/dev/null) in */in) break;; esac\n"
                     "  i=$((i+1)); tk 0.01; done\n"
                     "%s"
                     "exec 4>&-\n"
                     "echo '@ OK 0 0 0 -' >&2\n",
                     close ? CLOSE_STDIN : "");
}

/* process.wait: a FIFO .x.PID that the wrapper writes a line into once the exit status is
 * there, and a sleep of at most a second holding it (its end is the FIFO's end of file), then
 * the status is looked at again (a wrapper that was killed writes nothing: "lost"). Where no
 * FIFO can be made, a look every 50 ms. */
int process_script_wait(const char *id, unsigned timeout_ms, char **ret)
{
    return script_on(
        id, ret,
        "n=%u; r=%u.%03u; w=%u; st .; read -r q _ </proc/self/stat; q=.x.$q\n"
        "if [ \"$x\" = - ] && rm -f \"$q\" && mkfifo -m 600 \"$q\" 2>/dev/null; then w=0\n"
        "  while [ \"$x\" = - ]; do\n"
        "    if [ \"$n\" -gt 0 ]; then d=1; n=$((n-1))\n"
        "    elif [ \"$r\" != 0.000 ]; then d=$r; r=0.000; else break; fi\n"
        "    sleep \"$d\" >\"$q\" 2>/dev/null & t=$!\n"
        "    exec 3<\"$q\"; st .; [ \"$x\" = - ] && read -r _ <&3\n"
        "    exec 3<&-; kill \"$t\" 2>/dev/null; wait \"$t\" 2>/dev/null; st .; done; rm -f "
        "\"$q\"\n"
        "fi\n"
        "while [ \"$x\" = - ] && [ \"$w\" -gt 0 ]; do tk 0.05; w=$((w-1)); st .; done\n"
        "echo \"@ OK 0 0 0 $x\" >&2\n",
        timeout_ms / 1000, 0u, timeout_ms % 1000, (timeout_ms + 49) / 50);
}

int process_script_kill(const char *id, const char *sig, char **ret)
{
    if (!process_signal_valid(sig))
        return -EINVAL;
    /* The command's process group (a just-started command may not have recorded its pid
     * yet); for KILL the namespace's init too, which ends everything in the namespace. Then
     * up to 2 s for the status. The report's first number says whether a signal was sent
     * (0: the process had already ended and was left alone). */
    return script_on(id, ret,
                     "st .; [ \"$x\" = - ] || { echo \"@ OK 0 0 0 $x\" >&2; exit 0; }\n"
                     "i=0; c=; until read -r c 2>/dev/null <cpid; do i=$((i+1))\n"
                     "  [ $i -gt 200 ] && break; tk 0.01; done\n"
                     "if [ -n \"$c\" ]; then kill -s %s -$c 2>/dev/null || "
                     "kill -s %s -- -$c 2>/dev/null || kill -s %s $c 2>/dev/null; fi\n"
                     "[ %s = KILL ] && read -r n 2>/dev/null <ipid && kill -s KILL \"$n\" "
                     "2>/dev/null\n"
                     "w=40; st .; while [ \"$x\" = - ] && [ $w -gt 0 ]; do tk 0.05; w=$((w-1)); "
                     "st .; done\n"
                     "echo \"@ OK 1 0 0 $x\" >&2\n",
                     sig, sig, sig, sig);
}

int process_script_resize(const char *id, unsigned cols, unsigned rows, char **ret)
{
    if (cols < 1 || cols > 1000 || rows < 1 || rows > 1000)
        return -EINVAL;
    /* A process with a terminal has its pty script; the terminal's name comes once the
     * command started on it (up to 5 s after the start). Setting the size on the terminal
     * (TIOCSWINSZ through stty) signals its foreground process group (SIGWINCH). */
    return script_on(
        id, ret,
        "[ -e pty ] || { echo '@ E notty' >&2; exit 0; }\n"
        "st .; [ \"$x\" = - ] || { echo '@ E exited' >&2; exit 0; }\n"
        "t=; i=0; until read -r t 2>/dev/null <tty || [ $i -ge 500 ]; do\n"
        "  i=$((i+1)); tk 0.01; st .; [ \"$x\" = - ] || break; done\n"
        "case $t in /dev/*) ;; *) st .\n"
        "  [ \"$x\" = - ] && echo '@ E notty' >&2 || echo '@ E exited' >&2; exit 0;; esac\n"
        "stty cols %u rows %u <\"$t\" 2>/dev/null || "
        "{ st .; [ \"$x\" = - ] && echo '@ E notty' >&2 || echo '@ E exited' >&2; exit 0; }\n"
        "st .; echo \"@ OK 0 0 0 $x\" >&2\n",
        cols, rows);
}

/* The attach script (process_script_attach()). Its stdin goes into the process's stdin: cat
 * into the FIFO held open by fd 4 (as process.write does), and at the end of the input the
 * process's stdin is closed once the holder holds it. Only at the end of the input: when the
 * SSH connection drops (the daemon was killed), sshd exits and its pipes close, which cat
 * also sees as an end; so lv checks that the script's parent is still the sshd session that
 * started it (P0), for a quarter of a second after cat ended, and a script whose session is
 * gone leaves stdin open (process.write goes on) and ends. Followers end with the session too.
 * Followers copy each stream from offset 0 into the script's stdout and stderr, one segment at a
 * time as it grows, until the exit status exists and everything is copied; a follower pins the
 * segment it is at ("pid index" in out.pin, err.pin), so the wrapper's trimmer keeps what it has
 * not copied yet, and skips to the first segment kept if it came too late. A follower keeps its
 * segment open on fd 5 and copies it with one cat to its current end (the offset stays where
 * cat stopped: fdinfo's pos, else the size); once the next segment exists (the relay starts it
 * after the last byte of this one) one more cat copies what is left of this one and the follower
 * moves on, so a follower that is behind forks one cat a segment. When nothing is new (and after
 * each cat that copied something, so as not to fork a cat that finds nothing) it waits as a
 * long-poll does (process_script_read()): on its FIFO .w.PID, which the relay writes a line into
 * after each round, held open for writing by a sleep of a second (then lv is checked again); the
 * size is looked at once more after the FIFO is open, so a round that ended before is not missed.
 * The script ends when the followers are done (without followers: at the end of the input or of the
 * process); a cat still reading then is killed. */
#define ATTACH_FOLLOW                                                                              \
    "fw() { s=$1; k=0; o=; exec 2>/dev/null; read -r m _ </proc/self/stat; w=.w.$m\n"              \
    "  rm -f \"$w\"; mkfifo -m 600 \"$w\" || w=\n"                                                 \
    "  while :; do g=; if [ -e exit ]; then d=1; else d=; fi\n"                                    \
    "  if [ -z \"$o\" ]; then\n"                                                                   \
    "    if [ -e \"$s.$k\" ] && command exec 5<\"$s.$k\"; then o=1; p=0\n"                         \
    "    else j=; for y in \"$s\".[0-9]*; do [ -e \"$y\" ] || continue; i=${y##*.}\n"              \
    "      [ \"$i\" -gt \"$k\" ] && { [ -z \"$j\" ] || [ \"$i\" -lt \"$j\" ]; } && j=$i; done\n"   \
    "      if [ -n \"$j\" ]; then k=$j; pn; continue; fi; fi; fi\n"                                \
    "  if [ -n \"$o\" ]; then\n"                                                                   \
    "    if [ -e \"$s.$((k + 1))\" ]; then cat <&5 || break; k=$((k + 1)); o=; pn; continue; fi\n" \
    "    cat <&5 || break; c=; read -r _ c </proc/self/fdinfo/5 ||\n"                              \
    "      c=$(stat -c %%s \"$s.$k\" || wc -c <\"$s.$k\")\n"                                       \
    "    if [ -n \"$c\" ] && [ \"$c\" -gt \"$p\" ]; then p=$c; g=1; fi\n"                          \
    "  fi\n"                                                                                       \
    "  [ -z \"$g\" ] && [ -n \"$d\" ] && { rm -f \"$w\"; return 0; }; lv || break\n"               \
    "  if [ -n \"$w\" ] && [ -p \"$w\" ]; then sleep 1 >\"$w\" & t=$!; exec 6<\"$w\"\n"            \
    "    if [ -n \"$o\" ]; then c=$(stat -c %%s \"$s.$k\" || wc -c <\"$s.$k\")\n"                  \
    "    else p=0; c=0; for y in \"$s\".[0-9]*; do [ -e \"$y\" ] && c=1; done; fi\n"               \
    "    [ \"$c\" -gt \"$p\" ] || [ -e exit ] || [ -e \"$s.$((k + 1))\" ] || read -r _ <&6\n"      \
    "    exec 6<&-; kill \"$t\"; wait \"$t\"\n"                                                    \
    "  elif [ -z \"$g\" ]; then tk 0.05; fi; done; rm -f \"$w\"; return 1; }\n"                    \
    "pn() { echo \"$$ $k\" >\"$s.pin.t\" && mv -f \"$s.pin.t\" \"$s.pin\"; }\n"                    \
    "lv() { read -r _ _ _ q _ 2>/dev/null </proc/$$/stat && [ \"$q\" = \"$P0\" ]; }\n"

int process_script_attach(const char *id, uint64_t output_max, bool in, bool out, bool err,
                          char **ret)
{
    struct script s;
    int r = script_begin(id, &s);

    if (r < 0)
        return r;
    if (!in && !out && !err) {
        fclose(s.f);
        free(s.buf);
        return -EINVAL;
    }
    fprintf(s.f, "cd \"$B/%s\" 2>/dev/null || exit 1\nS=%llu; O=; E=; c=; P0=$PPID\n" ATTACH_FOLLOW,
            id, (unsigned long long)process_segment_size(output_max));
    /* The pins the start left (held by a sleep) become this script's, then that sleep ends. */
    fprintf(s.f,
            "y=; read -r y _ 2>/dev/null <out.pin || read -r y _ 2>/dev/null <err.pin\n"
            "%s%s[ -n \"$y\" ] && [ \"$y\" != $$ ] && kill \"$y\" 2>/dev/null\n"
            "exec 3<&0 </dev/null\n",
            out ? "echo \"$$ 0\" >out.pin\n" : "", err ? "echo \"$$ 0\" >err.pin\n" : "");
    if (out)
        fputs("fw out & O=$!\n", s.f);
    if (err)
        fputs("fw err >&2 & E=$!\n", s.f);
    if (in)
        fputs("h=; i=0; until read -r h 2>/dev/null <hpid || [ $i -ge 500 ]; do\n"
              "  i=$((i+1)); tk 0.01; done\n"
              "exec 4<>in; cat <&3 >&4 2>/dev/null & c=$!; exec 3<&-\n"
              "while :; do read -r _ _ z _ 2>/dev/null </proc/$c/stat || z=Z\n"
              "  [ \"$z\" = Z ] && break; [ -e exit ] && break; tk 0.05; done\n"
              "if [ \"$z\" = Z ]; then wait \"$c\"; c=\n"
              "  i=0; while lv && [ $i -lt 5 ]; do i=$((i+1)); tk 0.05; done\n"
              "  if ! lv; then exec 4>&-; kill $O $E 2>/dev/null; exit 0; fi\n"
              "  i=0; while [ -n \"$h\" ] && [ $i -lt 500 ] && [ ! -e exit ]; do\n"
              "    case $(readlink /proc/$h/fd/1 2>/dev/null) in */in) break;; esac\n"
              "    i=$((i+1)); tk 0.01; done\n"
              "  exec 4>&-; : >in.closed; [ -n \"$h\" ] && kill \"$h\" 2>/dev/null\n"
              "fi\n",
              s.f);
    fputs("[ -n \"$O\" ] && wait \"$O\"\n"
          "[ -n \"$E\" ] && wait \"$E\"\n"
          "[ -n \"$c\" ] && kill \"$c\" 2>/dev/null\n"
          "rm -f out.pin err.pin\n"
          "exit 0\n",
          s.f);
    return script_finish(&s, ret);
}

int process_script_list(char **ret)
{
    struct script s;
    int r;

    r = script_open(&s);
    if (r < 0)
        return r;
    fputs(PRELUDE "for d in \"$B\"/pr-*; do [ -d \"$d\" ] && cd \"$d\" || continue; st .\n"
                  "  s=0; read -r s <started; c=; read -r c <cmd\n"
                  "  printf '%s %s %s %s\\n' \"${d##*/}\" \"$s\" \"$x\" \"$c\"; done\n"
                  "echo '@ OK' >&2\n",
          s.f);
    return script_finish(&s, ret);
}

void process_status_from(const char *t, struct process_status *ret)
{
    char *end;
    long v;

    *ret = (struct process_status){.state = "running", .exit_code = -1};
    if (!t || strcmp(t, "-") == 0)
        return;
    if (strcmp(t, "lost") == 0) {
        ret->state = "lost";
        return;
    }
    ret->state = "exited";
    errno = 0;
    v = strtol(t, &end, 10);
    if (errno || *end || end == t || v < 0 || v > 255)
        return;
    if (v > 128 && v - 128 <= 64)
        ret->signal = (int)(v - 128);
    else
        ret->exit_code = (int)v;
}

enum process_report process_parse_report(const char *err, size_t len, uint64_t nums[3],
                                         struct process_status *status)
{
    static const struct {
        const char *word;
        enum process_report r;
    } errs[] = {
        {"nosuch", PROCESS_R_NO_SUCH},
        {"limit", PROCESS_R_LIMIT},
        {"cwd", PROCESS_R_CWD},
        {"range", PROCESS_R_RANGE},
        {"exited", PROCESS_R_EXITED},
        {"nostdin", PROCESS_R_NO_STDIN},
        {"closed", PROCESS_R_CLOSED},
        {"nopty", PROCESS_R_NO_PTY},
        {"notty", PROCESS_R_NO_TTY},
        {"nouser", PROCESS_R_NO_USER},
        {"noswitch", PROCESS_R_NO_SWITCH},
    };
    const char *line = NULL;
    char buf[256], word[16] = "", x[16] = "-";
    unsigned long long a = 0, b = 0, c = 0;
    int n;

    for (size_t i = 0; err && i + 1 < len; i++)
        if ((i == 0 || err[i - 1] == '\n') && err[i] == '@' && err[i + 1] == ' ')
            line = err + i;
    if (!line)
        return PROCESS_R_MALFORMED;
    n = (int)MIN((size_t)(err + len - line), sizeof buf - 1);
    memcpy(buf, line, (size_t)n);
    buf[n] = 0;
    buf[strcspn(buf, "\n")] = 0;
    if (strncmp(buf, "@ OK", 4) == 0) {
        n = sscanf(buf + 4, "%llu %llu %llu %15s", &a, &b, &c, x);
        if (n != EOF && n != 0 && n != 4)
            return PROCESS_R_MALFORMED;
        if (nums) {
            nums[0] = a;
            nums[1] = b;
            nums[2] = c;
        }
        if (status)
            process_status_from(x, status);
        return PROCESS_R_OK;
    }
    if (sscanf(buf, "@ E %15s %llu %llu %llu", word, &a, &b, &c) < 1)
        return PROCESS_R_MALFORMED;
    if (nums) {
        nums[0] = a;
        nums[1] = b;
        nums[2] = c;
    }
    for (size_t i = 0; i < ELEMENTSOF(errs); i++)
        if (strcmp(word, errs[i].word) == 0)
            return errs[i].r;
    return PROCESS_R_MALFORMED;
}

int process_parse_list(const char *out, size_t len, struct process_row **ret, size_t *ret_n)
{
    struct process_row *v = NULL;
    size_t n = 0;
    const char *p = out, *end = out + len;

    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char line[PROCESS_ID_LEN + 64 + PROCESS_DISPLAY_MAX], id[32], ex[16];
        long long started;
        int off = 0;

        if (l < sizeof line) {
            memcpy(line, p, l);
            line[l] = 0;
            if (sscanf(line, "%31s %lld %15s %n", id, &started, ex, &off) == 3 &&
                process_id_valid(id)) {
                struct process_row *nv = realloc(v, (n + 1) * sizeof *v);

                if (!nv) {
                    free(v);
                    return -ENOMEM;
                }
                v = nv;
                memset(&v[n], 0, sizeof v[n]);
                memcpy(v[n].id, id, PROCESS_ID_LEN + 1);
                v[n].started_at = (time_t)started;
                process_status_from(ex, &v[n].status);
                snprintf(v[n].command, sizeof v[n].command, "%s", off > 0 ? line + off : "");
                n++;
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}
