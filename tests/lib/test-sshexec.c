/* lib/ssh/sshexec: remote commands over pooled sessions against a throwaway sshd. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <uv.h>

#include "sshexec-internal.h"
#include "sshexec.h"
#include "log.h"
#include "macro.h"
#include "sshs.h"
#include "ssh-fixture/fixture.h"
#include "tests/check-util.h"

static uv_loop_t loop;
static struct sshd_fixture fx;
static struct sshpool *pool;
static bool pool_closed;

static void setup_loop(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
}

static void teardown_loop(void)
{
    check_loop_done(&loop);
}

static void on_pool_closed(void *userdata)
{
    pool_closed = true;
}

static void setup_sshd(void)
{
    struct sshs_config cfg;

    setup_loop();
    fixture_start(&fx);
    cfg = fixture_config(&fx);
    ck_assert_int_eq(sshpool_new(&loop, &cfg, 2, &pool), 0);
    pool_closed = false;
}

static void teardown_sshd(void)
{
    if (pool) {
        sshpool_close(pool, on_pool_closed, NULL);
        fixture_run_until(&loop, &pool_closed, 5000);
        pool = NULL;
    }
    teardown_loop();
    fixture_stop(&fx);
}

struct run {
    bool done;
    int error;
    int exit_code;
    char signal[32];
    bool timed_out, started;
    char *out, *err;
    size_t out_len, err_len;
    bool out_trunc, err_trunc;
    uint64_t duration_ms;
    /* streaming */
    char stream_out[4096];
    size_t stream_out_len;
    unsigned chunks;
    bool chunk_before_done;
    uint64_t first_chunk_ns, done_ns;
};

static void run_clear(struct run *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

static void on_done(struct sshexec *e, int error, struct sshexec_result *res, void *userdata)
{
    struct run *r = userdata;

    ck_assert(!r->done);
    r->done = true;
    r->done_ns = uv_hrtime();
    r->error = error;
    if (error != 0) {
        ck_assert_ptr_null(res);
        return;
    }
    r->exit_code = res->exit_code;
    if (res->signal)
        snprintf(r->signal, sizeof(r->signal), "%s", res->signal);
    r->timed_out = res->timed_out;
    r->started = res->started;
    /* Take the buffers: they are ours now. */
    r->out = res->out;
    r->out_len = res->out_len;
    r->err = res->err;
    r->err_len = res->err_len;
    res->out = res->err = NULL;
    r->out_trunc = res->out_truncated;
    r->err_trunc = res->err_truncated;
    r->duration_ms = res->duration_ms;
}

static void on_output(struct sshexec *e, enum sshexec_stream stream, const void *data, size_t len,
                      void *userdata)
{
    struct run *r = userdata;

    if (!r->done && r->chunks == 0) {
        r->chunk_before_done = true;
        r->first_chunk_ns = uv_hrtime();
    }
    r->chunks++;
    if (stream == SSHEXEC_STDOUT && r->stream_out_len + len < sizeof(r->stream_out)) {
        memcpy(r->stream_out + r->stream_out_len, data, len);
        r->stream_out_len += len;
    }
}

static void run_params(const struct sshexec_params *p, struct run *r, uint64_t wait_ms)
{
    memset(r, 0, sizeof(*r));
    ck_assert_int_eq(sshexec_start(pool, p, on_done, r, NULL), 0);
    ck_assert(!r->done);
    fixture_run_until(&loop, &r->done, wait_ms);
}

static void run_cmd(const char *cmd, struct run *r)
{
    struct sshexec_params p = {.command = cmd, .timeout_ms = 20000};

    run_params(&p, r, 30000);
}

/* Processes whose environment holds NAME=VALUE (via /proc, like the kill script). */
static int count_env_procs(const char *name_value)
{
    char cmd[512], line[64] = "";
    FILE *f;

    snprintf(cmd, sizeof(cmd), "grep -l -s -z -x -F '%s' /proc/[0-9]*/environ 2>/dev/null | wc -l",
             name_value);
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    pclose(f);
    return atoi(line);
}

static int count_pgrep(const char *pattern)
{
    char cmd[512], line[64] = "";
    FILE *f;

    snprintf(cmd, sizeof(cmd), "pgrep -f '%s' | wc -l", pattern);
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    pclose(f);
    return atoi(line);
}

/* ---- unit: command building ---- */

/* Runs argv (argv[0] a path) with envp, stdout into out; returns the wait status, or -errno
 * when execve() itself failed (reported by the child through a pipe). */
static int spawn_capture(const char *const *argv, const char *const *envp, char *out, size_t size)
{
    int outp[2], errp[2], status, err = 0;
    size_t n = 0;
    ssize_t k;
    pid_t pid;

    ck_assert_int_eq(pipe(outp), 0);
    ck_assert_int_eq(pipe2(errp, O_CLOEXEC), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(outp[1], 1);
        close(outp[0]);
        close(outp[1]);
        execve(argv[0], (char *const *)argv, (char *const *)envp);
        err = errno;
        (void)!write(errp[1], &err, sizeof(err));
        _exit(127);
    }
    close(outp[1]);
    close(errp[1]);
    while (n + 1 < size && (k = read(outp[0], out + n, size - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = 0;
    close(outp[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (read(errp[0], &err, sizeof(err)) == (ssize_t)sizeof(err))
        status = -err;
    close(errp[0]);
    return status;
}

/* Runs a built line the way sshd does: the login shell with -c LINE. */
static int run_line_local(const char *line, const char *path_env, char *out, size_t size)
{
    const char *argv[] = {"/bin/sh", "-c", line, NULL};
    const char *envp[] = {path_env, "HOME=/root", NULL};

    return spawn_capture(argv, envp, out, size);
}

/* Whether this host lets the tests' sshd user make PID namespaces (else the fallback runs). */
static bool pidns_supported(void)
{
    return system("command -v nsenter >/dev/null && unshare -p true 2>/dev/null") == 0;
}

START_TEST(test_shell_quote)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"it's", "\"it's\""},
        {"", "''"},
        {"a b", "'a b'"},
        {"$$$", "'$$$'"},
        {"'''", "\"'''\""},
        {"a'b$c", "\"a'b\\$c\""},
        {"'\"\"\"", "''\\''\"\"\"'"}, /* a tie: single quotes */
        {"\\`\"$", "'\\`\"$'"},
    };
    static const char *const roundtrip[] = {
        "it's",
        "\"$HOME\" `id` \\ \\\\ \n2nd line",
        "'\"'\"'",
        "!x ${a:-b} $(id) *?[a] ~ # ;&|<>()",
        "trailing backslash \\",
        "tab\tand \r",
        "",
        "plain",
        "'",
        "''",
        "a b\tc",
        "$(echo pwned)",
        "`id`",
        "\\n",
        "\"q\"",
        "*",
        "a\nb",
        "; rm -rf /",
        "$HOME",
        "--",
    };
    char *q = NULL;

    ck_assert_int_eq(sshexec_shell_quote(NULL, &q), -EINVAL);

    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        ck_assert_int_eq(sshexec_shell_quote(cases[i].in, &q), 0);
        ck_assert_str_eq(q, cases[i].out);
        ck_assert_uint_le(strlen(q), EXEC_QUOTED_MAX(strlen(cases[i].in)));
        free(q);
    }
    /* The shell reads every quoting back as the original bytes. */
    for (size_t i = 0; i < ELEMENTSOF(roundtrip); i++) {
        const char *argv[] = {"/bin/sh", "-c", NULL, NULL};
        char *script = NULL, out[512];

        ck_assert_int_eq(sshexec_shell_quote(roundtrip[i], &q), 0);
        ck_assert_int_gt(asprintf(&script, "printf %%s %s", q), 0);
        argv[2] = script;
        ck_assert_int_eq(spawn_capture(argv, NULL, out, sizeof(out)), 0);
        ck_assert_str_eq(out, roundtrip[i]);
        free(script);
        free(q);
    }
}
END_TEST

/* n bytes of the worst mix for the quoting (one ' to three of " $ `), NUL-terminated. */
static void fill_worst(char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = "'\"$`"[i % 4];
    p[n] = 0;
}

/* Makes a folder whose absolute path is exactly len bytes, mostly worst-case characters;
 * returns the path (free it). */
static char *make_worst_dir(size_t len)
{
    char *path = malloc(len + 1);
    size_t at;

    at = (size_t)snprintf(path, len + 1, "/tmp/sandboxd-sshexec-lim-%d", (int)getpid());
    ck_assert(mkdir(path, 0755) == 0 || errno == EEXIST);
    while (at < len) {
        size_t comp = MIN((size_t)200, len - at - 1);

        if (len - at - 1 - comp == 1) /* never leave room for a lone '/' */
            comp--;
        path[at] = '/';
        fill_worst(path + at + 1, comp);
        at += 1 + comp;
        ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir: %s", strerror(errno));
    }
    ck_assert_uint_eq(strlen(path), len);
    return path;
}

static void free_strv(char **v)
{
    for (size_t i = 0; v[i]; i++)
        free(v[i]);
    free(v);
}

/* Every variable V<i>=<worst mix>, names and values summing to EXEC_ENV_BYTES_MAX. */
static char **worst_env(void)
{
    char **env = calloc(EXEC_ENV_MAX + 2, sizeof(char *));
    size_t per = EXEC_ENV_BYTES_MAX / EXEC_ENV_MAX;

    for (size_t i = 0; i < EXEC_ENV_MAX; i++) {
        int name = snprintf(NULL, 0, "V%zu", i);

        env[i] = malloc(per + 2);
        snprintf(env[i], per + 2, "V%zu=", i);
        fill_worst(env[i] + name + 1, per - (size_t)name);
    }
    return env;
}

/* The largest valid request, worst-case quoted, fits one exec argument (sshd's `-c LINE`) and
 * runs; one byte or item more of any field is refused. */
START_TEST(test_build_command_limits)
{
    const char *marker = "0123456789abcdef0123456789abcdef", *path = "PATH=/usr/bin:/bin";
    char **env = worst_env(), **argv = calloc(EXEC_ARGV_MAX + 2, sizeof(char *));
    char *command = malloc(EXEC_COMMAND_MAX + 2), *cwd = make_worst_dir(EXEC_CWD_MAX);
    char *big = malloc(EXEC_LINE_MAX + 2), *line = NULL, out[256];
    const char *argvx[] = {"/bin/true", big, NULL};
    struct sshexec_params p = {.env = (const char *const *)env, .cwd = cwd, .command = command};
    size_t per = EXEC_ARGV_BYTES_MAX / EXEC_ARGV_MAX;

    /* The kernel's limit itself: one byte under MAX_ARG_STRLEN passes, MAX_ARG_STRLEN not. */
    memset(big, 'a', EXEC_LINE_MAX + 1);
    big[EXEC_LINE_MAX] = 0;
    ck_assert_int_eq(spawn_capture(argvx, NULL, out, sizeof(out)), 0);
    big[EXEC_LINE_MAX] = 'a';
    big[EXEC_LINE_MAX + 1] = 0;
    ck_assert_int_eq(spawn_capture(argvx, NULL, out, sizeof(out)), -E2BIG);
    free(big);

    fill_worst(command, EXEC_COMMAND_INLINE_MAX); /* longer ones come on stdin */
    memcpy(command, "echo ok #", 9);              /* the rest is a comment */
    ck_assert_int_eq(sshexec_build_command(&p, marker, &line), 0);
    printf("sshexec: worst-case line with command, env and cwd at their limits: %zu bytes "
           "(limit %d)\n",
           strlen(line), EXEC_LINE_MAX);
    ck_assert_uint_le(strlen(line), EXEC_LINE_MAX);
    ck_assert_int_eq(run_line_local(line, path, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "ok\n");
    free(line);

    /* argv: EXEC_ARGV_MAX entries whose lengths + 1 sum to EXEC_ARGV_BYTES_MAX. */
    for (size_t i = 0; i < EXEC_ARGV_MAX; i++) {
        argv[i] = malloc(2 * per);
        fill_worst(argv[i], per - 1);
    }
    memcpy(argv[0], "true", 5);
    fill_worst(argv[1], 2 * (per - 1) - 4); /* the bytes argv[0] does not use */
    p.command = NULL;
    p.argv = (const char *const *)argv;
    ck_assert_int_eq(sshexec_build_command(&p, marker, &line), 0);
    printf("sshexec: worst-case line with argv, env and cwd at their limits: %zu bytes\n",
           strlen(line));
    ck_assert_uint_le(strlen(line), EXEC_LINE_MAX);
    ck_assert_int_eq(run_line_local(line, path, out, sizeof(out)), 0);
    free(line);
    line = NULL;

    /* One more of anything is refused. */
    strcat(argv[1], "x");
    ck_assert_int_eq(sshexec_build_command(&p, marker, &line), -E2BIG); /* argv bytes */
    argv[1][strlen(argv[1]) - 1] = 0;
    argv[EXEC_ARGV_MAX] = strdup("");
    ck_assert_int_eq(sshexec_build_command(&p, marker, &line), -E2BIG); /* argv entries */
    p.argv = NULL;
    p.command = command;
    fill_worst(command, EXEC_COMMAND_MAX);
    ck_assert_int_eq(sshexec_build_command(&p, marker, &line), 0);
    ck_assert_uint_le(strlen(line), EXEC_LINE_MAX);
    free(line);
    line = NULL;
    strcat(command, "x");
    ck_assert_int_eq(sshexec_build_command(&p, marker, &line), -E2BIG);
    command[EXEC_COMMAND_INLINE_MAX] = 0;
    cwd = realloc(cwd, EXEC_CWD_MAX + 2);
    p.cwd = strcat(cwd, "x");
    ck_assert_int_eq(sshexec_build_command(&p, marker, &line), -E2BIG);
    cwd[EXEC_CWD_MAX] = 0;
    env[0] = realloc(env[0], strlen(env[0]) + 2);
    strcat(env[0], "x");
    ck_assert_int_eq(sshexec_build_command(&p, marker, &line), -E2BIG); /* env bytes */
    env[0][strlen(env[0]) - 1] = 0;
    env[EXEC_ENV_MAX] = strdup("X=");
    ck_assert_int_eq(sshexec_build_command(&p, marker, &line), -E2BIG); /* variables */
    ck_assert_ptr_null(line);

    free_strv(env);
    free_strv(argv);
    free(command);
    free(cwd);
    ck_assert_int_eq(system("rm -rf /tmp/sandboxd-sshexec-lim-*"), 0);
}
END_TEST

/* The exec marker of the local runs: the exec's FIFO is /tmp/.sandboxd-exec-<marker>, so a
 * marker of this process's own keeps runs side by side (or a stale FIFO) apart. */
static const char *local_marker(void)
{
    static char m[16];

    if (!m[0])
        snprintf(m, sizeof m, "%08x", (unsigned)getpid());
    return m;
}

/* What the test commands print after "$$": " <marker>\n". */
static const char *local_marker_line(void)
{
    static char l[24];

    snprintf(l, sizeof l, " %s\n", local_marker());
    return l;
}

/* Without nsenter or unshare the line falls back to running the command directly. */
START_TEST(test_build_command_fallback_local)
{
    struct sshexec_params p = {.command = "echo \"$$\" \"$SANDBOXD_EXEC_ID\"; exit 3"};
    char *line = NULL, out[256];
    int status;

    ck_assert_int_eq(sshexec_build_command(&p, local_marker(), &line), 0);
    /* No PATH: command -v finds nothing; the fallback's words are absolute. */
    status = run_line_local(line, "PATH=/nonexistent", out, sizeof(out));
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    ck_assert_str_eq(out + strcspn(out, " "), local_marker_line());
    ck_assert_int_gt(atoi(out), 4); /* the container's numbering: no namespace of its own */
    /* unshare present but not permitted (an unprivileged user): the probe fails, the command
     * runs all the same. */
    if (getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0 && pidns_supported()) {
        const char *argv[] = {"/usr/bin/setpriv",
                              "--reuid=65534",
                              "--regid=65534",
                              "--clear-groups",
                              "/bin/sh",
                              "-c",
                              line,
                              NULL};
        const char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

        status = spawn_capture(argv, envp, out, sizeof(out));
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
        ck_assert_str_eq(out + strcspn(out, " "), local_marker_line());
        ck_assert_int_gt(atoi(out), 4);
    }
    if (pidns_supported()) {
        status = run_line_local(line, "PATH=/usr/sbin:/usr/bin:/sbin:/bin", out, sizeof(out));
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
        ck_assert_str_eq(out + strcspn(out, " "), local_marker_line());
        ck_assert_int_le(atoi(out), 4); /* after init and its two helpers */
    }
    free(line);
}
END_TEST

/* container_pid_namespace: the command runs in the caller's PID namespace even where
 * unshare and nsenter work (the daemon's own scripts that signal sshd). */
START_TEST(test_build_command_container_pidns_local)
{
    struct sshexec_params p = {.command = "echo \"$$\" \"$SANDBOXD_EXEC_ID\"; exit 3",
                               .container_pid_namespace = true};
    char *line = NULL, out[256];
    int status;

    ck_assert_int_eq(sshexec_build_command(&p, local_marker(), &line), 0);
    ck_assert_ptr_null(strstr(line, "unshare"));
    status = run_line_local(line, "PATH=/usr/sbin:/usr/bin:/sbin:/bin", out, sizeof(out));
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    ck_assert_str_eq(out + strcspn(out, " "), local_marker_line());
    ck_assert_int_gt(atoi(out), 4); /* the caller's numbering: no namespace of its own */
    free(line);
}
END_TEST

/* The built line, run by a local shell, passes env, cwd and argv through untouched. */
START_TEST(test_build_command_roundtrip_local)
{
    const char *env[] = {"A=it's \"q\" $HOME `id` \\ \n2nd line", "B=  spaces  ", "C=", NULL};
    const char *argv[] = {"printf", "[%s]", "a b", "it's", "$x", "*", "-n", NULL};
    char dir[] = "/tmp/sandboxd exec 'cwd' $X-XXXXXX";
    struct sshexec_params p = {.env = env};
    char *line = NULL, *q = NULL, cmd[8192], out[4096] = "";
    char expect[4096];
    size_t n;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    p.cwd = dir;
    p.command = "printf '%s|%s|%s|%s' \"$A\" \"$B\" \"$(pwd)\" \"$SANDBOXD_EXEC_ID\"";
    ck_assert_int_eq(sshexec_build_command(&p, "0123abcd", &line), 0);
    ck_assert_int_eq(sshexec_shell_quote(line, &q), 0);
    snprintf(cmd, sizeof(cmd), "sh -c %s", q);
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = 0;
    pclose(f);
    snprintf(expect, sizeof(expect), "%s|%s|%s|0123abcd", env[0] + 2, env[1] + 2, dir);
    ck_assert_str_eq(out, expect);
    free(line);
    free(q);

    p.command = NULL;
    p.argv = argv;
    p.cwd = NULL;
    ck_assert_int_eq(sshexec_build_command(&p, "ff", &line), 0);
    ck_assert_int_eq(sshexec_shell_quote(line, &q), 0);
    snprintf(cmd, sizeof(cmd), "sh -c %s", q);
    f = popen(cmd, "r");
    n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = 0;
    pclose(f);
    ck_assert_str_eq(out, "[a b][it's][$x][*][-n]");
    free(line);
    free(q);
    rmdir(dir);
}
END_TEST

/* With the exec helper: the line execs it while its file is there, the shell wrapper after it
 * otherwise; only a plain path is taken; the worst case still fits. */
START_TEST(test_build_command_helper)
{
    static const char helper[] = "/root/.sandboxd-nsexec-0123456789abcdef";
    static const char *const bad[] = {"", "rel ative", "/x/$(id)", "/x/a;b", "/x/\"q\"", "/X"};
    struct sshexec_params p = {.command = "echo hi"};
    char *line = NULL, *plain = NULL, want[256];

    ck_assert_int_eq(sshexec_build_command_with(&p, "ab12", helper, &line), 0);
    ck_assert_int_eq(sshexec_build_command(&p, "ab12", &plain), 0);
    snprintf(want, sizeof(want), " && { [ -x %s ] && exec %s -- \"$@\"; :; }", helper, helper);
    ck_assert_ptr_nonnull(strstr(line, want));
    ck_assert_ptr_null(strstr(plain, helper));
    /* The shell wrapper follows, whole. */
    ck_assert_str_eq(strstr(line, want) + strlen(want), strstr(plain, " && f=/tmp/"));
    free(line);
    free(plain);
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        ck_assert_int_eq(sshexec_build_command_with(&p, "ab12", bad[i], &line), -EINVAL);
    memset(want, 'a', 65);
    want[0] = '/';
    want[65] = 0;
    ck_assert_int_eq(sshexec_build_command_with(&p, "ab12", want, &line), -EINVAL);
    /* Without a namespace (the daemon's own scripts) there is no helper either. */
    p.container_pid_namespace = true;
    ck_assert_int_eq(sshexec_build_command_with(&p, "ab12", helper, &line), 0);
    ck_assert_ptr_null(strstr(line, helper));
    free(line);
}
END_TEST

START_TEST(test_build_command_rejects)
{
    const char *bad_env[] = {"1A=x", NULL};
    const char *bad_env2[] = {"A-B=x", NULL};
    const char *no_eq[] = {"A", NULL};
    const char *empty_argv[] = {NULL};
    struct sshexec_params p = {.command = "true"};
    char *line = NULL;

    p.env = bad_env;
    ck_assert_int_eq(sshexec_build_command(&p, "ab", &line), -EINVAL);
    p.env = bad_env2;
    ck_assert_int_eq(sshexec_build_command(&p, "ab", &line), -EINVAL);
    p.env = no_eq;
    ck_assert_int_eq(sshexec_build_command(&p, "ab", &line), -EINVAL);
    p.env = NULL;
    p.argv = empty_argv;
    ck_assert_int_eq(sshexec_build_command(&p, "ab", &line), -EINVAL); /* both set */
    p.command = NULL;
    ck_assert_int_eq(sshexec_build_command(&p, "ab", &line), -EINVAL); /* argv empty */
    p.argv = NULL;
    p.command = "true";
    p.cwd = "";
    ck_assert_int_eq(sshexec_build_command(&p, "ab", &line), -EINVAL);
    p.cwd = NULL;
    ck_assert_int_eq(sshexec_build_command(&p, "'; rm -rf /", &line), -EINVAL);
    p.has_max_output = true;
    p.max_output_bytes = SSHEXEC_OUTPUT_MAX + 1;
    ck_assert_int_eq(sshexec_build_command(&p, "ab", &line), -E2BIG);
    p.max_output_bytes = 0;
    ck_assert_int_eq(sshexec_build_command(&p, "0123456789abcdef0123456789abcdef0", &line),
                     -EINVAL); /* longer than a marker */
    ck_assert_ptr_null(line);
}
END_TEST

/* ---- against sshd ---- */

START_TEST(test_exec_true_echo)
{
    struct run r;

    run_cmd("true", &r);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_eq(r.exit_code, 0);
    ck_assert_str_eq(r.signal, "");
    ck_assert(!r.timed_out);
    ck_assert_uint_eq(r.out_len, 0);
    ck_assert_uint_eq(r.err_len, 0);
    run_clear(&r);

    run_cmd("echo hello", &r);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_eq(r.exit_code, 0);
    ck_assert_uint_eq(r.out_len, 6);
    ck_assert_str_eq(r.out, "hello\n");
    run_clear(&r);
}
END_TEST

START_TEST(test_exec_stdout_stderr_exit)
{
    struct run r;

    run_cmd("echo out; echo err >&2; echo out2; exit 3", &r);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_eq(r.exit_code, 3);
    ck_assert_str_eq(r.out, "out\nout2\n");
    ck_assert_str_eq(r.err, "err\n");
    run_clear(&r);
}
END_TEST

START_TEST(test_exec_signal)
{
    struct run r;

    run_cmd("echo before; kill -9 $$", &r);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_eq(r.exit_code, -1);
    ck_assert_str_eq(r.signal, "SIGKILL");
    ck_assert_str_eq(r.out, "before\n");
    ck_assert(!r.timed_out);
    run_clear(&r);

    run_cmd("kill -TERM $$", &r);
    ck_assert_str_eq(r.signal, "SIGTERM");
    run_clear(&r);
}
END_TEST

START_TEST(test_exec_stdin)
{
    struct sshexec_params p = {.command = "cat", .timeout_ms = 20000};
    size_t big = 3 * 1024 * 1024 + 17;
    unsigned char bin[256];
    char *data;
    struct run r;

    p.stdin_data = "hello\nworld";
    p.stdin_len = 11;
    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.error, 0);
    ck_assert_str_eq(r.out, "hello\nworld");
    run_clear(&r);

    for (int i = 0; i < 256; i++)
        bin[i] = (unsigned char)i;
    p.stdin_data = bin;
    p.stdin_len = sizeof(bin);
    run_params(&p, &r, 30000);
    ck_assert_uint_eq(r.out_len, 256);
    ck_assert_int_eq(memcmp(r.out, bin, 256), 0);
    run_clear(&r);

    /* Bigger than the SSH window: written as the window opens. */
    data = malloc(big);
    ck_assert_int_eq(getrandom(data, big, 0) > 0, 1);
    for (size_t off = 0; off < big;) {
        ssize_t n = getrandom(data + off, big - off, 0);
        ck_assert_int_gt(n, 0);
        off += (size_t)n;
    }
    p.stdin_data = data;
    p.stdin_len = big;
    p.has_max_output = true;
    p.max_output_bytes = 4 * 1024 * 1024;
    run_params(&p, &r, 60000);
    ck_assert_int_eq(r.error, 0);
    ck_assert_uint_eq(r.out_len, big);
    ck_assert_int_eq(memcmp(r.out, data, big), 0);
    ck_assert(!r.out_trunc);
    run_clear(&r);
    free(data);

    /* No stdin: EOF at once, cat ends. */
    p.stdin_data = NULL;
    p.stdin_len = 0;
    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.exit_code, 0);
    ck_assert_uint_eq(r.out_len, 0);
    run_clear(&r);
}
END_TEST

START_TEST(test_exec_env_cwd_quoting)
{
    const char *env[] = {"A=it's \"q\" $HOME `id` \\ \n2nd line", "B=  spaces  ", "EMPTY=", NULL};
    char dir[] = "/tmp/sandboxd exec 'cwd' $X\n-XXXXXX";
    struct sshexec_params p = {.env = env, .timeout_ms = 20000};
    char expect[1024];
    struct run r;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    p.cwd = dir;
    p.command = "printf '%s|%s|%s|%s' \"$A\" \"$B\" \"$(pwd)\" \"${EMPTY-unset}\"";
    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_eq(r.exit_code, 0);
    snprintf(expect, sizeof(expect), "%s|%s|%s|", env[0] + 2, env[1] + 2, dir);
    ck_assert_str_eq(r.out, expect);
    run_clear(&r);

    /* A missing cwd is the command's failure, not an SSH error. */
    p.cwd = "/nonexistent/dir";
    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_ne(r.exit_code, 0);
    ck_assert_uint_gt(r.err_len, 0);
    run_clear(&r);
    rmdir(dir);
}
END_TEST

START_TEST(test_exec_argv)
{
    const char *argv[] = {"printf", "[%s]", "a b", "it's", "$HOME", "*", ";", "-n", NULL};
    struct sshexec_params p = {.argv = argv, .timeout_ms = 20000};
    struct run r;

    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.error, 0);
    ck_assert_str_eq(r.out, "[a b][it's][$HOME][*][;][-n]");
    run_clear(&r);
}
END_TEST

#define N_CONCURRENT 200

START_TEST(test_exec_concurrent)
{
    static struct run runs[N_CONCURRENT];
    static char cmds[N_CONCURRENT][64];
    struct sshpool_stats st;
    unsigned done = 0;
    bool all = false;
    uint64_t t0 = uv_hrtime(), end = t0 + 120ull * 1000000000ull;

    /* No explicit connect: the first execs connect the pool lazily and queue. */
    for (int i = 0; i < N_CONCURRENT; i++) {
        struct sshexec_params p = {.command = cmds[i], .timeout_ms = 60000};
        snprintf(cmds[i], sizeof(cmds[i]), "echo %d; echo e%d >&2; exit %d", i, i, i % 7);
        memset(&runs[i], 0, sizeof(runs[i]));
        ck_assert_int_eq(sshexec_start(pool, &p, on_done, &runs[i], NULL), 0);
    }
    sshpool_get_stats(pool, &st);
    /* and the first exec's check of the exec helper (sshexec.c) */
    ck_assert_uint_eq(st.queued, N_CONCURRENT + 1);
    while (!all) {
        ck_assert(uv_hrtime() < end);
        uv_run(&loop, UV_RUN_ONCE);
        sshpool_get_stats(pool, &st);
        /* Never more channels than the per-session cap allows (sshd MaxSessions 10). */
        ck_assert_uint_le(st.channels, 2 * (SSHS_CHANNELS_PER_SESSION_DEFAULT + 2));
        done = 0;
        for (int i = 0; i < N_CONCURRENT; i++)
            done += runs[i].done;
        all = done == N_CONCURRENT;
    }
    for (int i = 0; i < N_CONCURRENT; i++) {
        char out[32], err[32];
        snprintf(out, sizeof(out), "%d\n", i);
        snprintf(err, sizeof(err), "e%d\n", i);
        ck_assert_msg(runs[i].error == 0, "exec %d: %s", i, strerror(-runs[i].error));
        ck_assert_str_eq(runs[i].out, out);
        ck_assert_str_eq(runs[i].err, err);
        ck_assert_int_eq(runs[i].exit_code, i % 7);
        run_clear(&runs[i]);
    }
    sshpool_get_stats(pool, &st);
    ck_assert_uint_le(st.connects, 2);
    ck_assert_uint_eq(st.channels, 0);
    printf("sshexec: %d concurrent execs on 2 sessions in %.0f ms\n", N_CONCURRENT,
           (double)(uv_hrtime() - t0) / 1e6);
}
END_TEST

START_TEST(test_exec_truncation)
{
    struct sshexec_params p = {
        .timeout_ms = 30000, .has_max_output = true, .max_output_bytes = 1000};
    struct run r;

    p.command = "head -c 100000 /dev/zero; echo small >&2";
    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_eq(r.exit_code, 0);
    ck_assert_uint_eq(r.out_len, 1000);
    ck_assert(r.out_trunc);
    ck_assert_str_eq(r.err, "small\n");
    ck_assert(!r.err_trunc);
    run_clear(&r);

    /* Far past the cap on both streams: read and dropped, the channel never stalls. */
    p.command = "head -c 8000000 /dev/zero; head -c 3000000 /dev/zero >&2; exit 4";
    p.max_output_bytes = 1000;
    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.exit_code, 4);
    ck_assert_uint_eq(r.out_len, 1000);
    ck_assert_uint_eq(r.err_len, 1000);
    ck_assert(r.out_trunc && r.err_trunc);
    run_clear(&r);

    /* Exactly the cap is not truncated. */
    p.command = "head -c 1000 /dev/zero";
    run_params(&p, &r, 30000);
    ck_assert_uint_eq(r.out_len, 1000);
    ck_assert(!r.out_trunc);
    run_clear(&r);
}
END_TEST

/* Waits up to ms for no process to match pattern; returns how many still match. */
static int wait_pgrep_gone(const char *pattern, unsigned ms)
{
    int n = count_pgrep(pattern);

    for (unsigned waited = 0; n > 0 && waited < ms; waited += 100) {
        usleep(100 * 1000);
        n = count_pgrep(pattern);
    }
    return n;
}

/* A command longer than the command line takes comes on stdin, ahead of the request's own
 * stdin, which the command still reads whole; its timeout still kills its tree; one byte
 * over EXEC_COMMAND_MAX is refused. */
START_TEST(test_exec_long_command)
{
    const char head[] = "printf %s '", tail[] = "' | wc -c; cat\n\n";
    size_t n = 1024 * 1024;
    char *cmd = malloc(EXEC_COMMAND_MAX + 2);
    struct sshexec_params p = {.command = cmd, .timeout_ms = 20000};
    struct run r;

    memcpy(cmd, head, sizeof(head) - 1);
    memset(cmd + sizeof(head) - 1, 'a', n);
    memcpy(cmd + sizeof(head) - 1 + n, tail, sizeof(tail));
    p.stdin_data = "the request's stdin";
    p.stdin_len = strlen(p.stdin_data);
    run_params(&p, &r, 60000);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_eq(r.exit_code, 0);
    ck_assert_str_eq(r.out, "1048576\nthe request's stdin");
    run_clear(&r);

    /* Without stdin too. */
    p.stdin_data = NULL;
    p.stdin_len = 0;
    run_params(&p, &r, 60000);
    ck_assert_str_eq(r.out, "1048576\n");
    run_clear(&r);

    /* The timeout kills what a long command started. */
    snprintf(cmd, EXEC_COMMAND_MAX, "%s", "echo started; setsid sleep 3091 & sleep 3090 #");
    memset(cmd + strlen(cmd), 'x', 100 * 1024);
    cmd[strlen("echo started; setsid sleep 3091 & sleep 3090 #") + 100 * 1024] = 0;
    p.timeout_ms = 2000;
    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.error, 0);
    ck_assert(r.timed_out);
    ck_assert_str_eq(r.out, "started\n");
    ck_assert_uint_lt(r.duration_ms, 15000);
    if (pidns_supported())
        ck_assert_int_eq(wait_pgrep_gone("^sleep 309[01]$", 3000), 0);
    else
        (void)system("pkill -KILL -f '^sleep 309[01]$'");
    run_clear(&r);

    memset(cmd, ' ', EXEC_COMMAND_MAX + 1);
    cmd[EXEC_COMMAND_MAX + 1] = 0;
    ck_assert_int_eq(sshexec_start(pool, &p, on_done, &r, NULL), -E2BIG);
    free(cmd);
}
END_TEST

START_TEST(test_exec_timeout_kills_tree)
{
    char mark[64], cmd[2048];
    const char *env[] = {mark, NULL};
    struct sshexec_params p = {.env = env, .timeout_ms = 2000};
    uint8_t rnd[8];
    struct run r;

    ck_assert_int_eq(getrandom(rnd, sizeof(rnd), 0), (ssize_t)sizeof(rnd));
    snprintf(mark, sizeof(mark), "TESTMARK=%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
             rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    /* Every way out of the process group and the marker that a command has. */
    snprintf(cmd, sizeof(cmd), "%s",
             "echo started; sleep 3071 & setsid sleep 3072 & "
             "(setsid sh -c 'sleep 3073 & sleep 3074' &); "
             "env -u TESTMARK sleep 3075 & "
             "env -u SANDBOXD_EXEC_ID setsid sleep 3076 & "
             "env -i /bin/sh -c 'setsid sleep 3077 &'; "
             "(env -u SANDBOXD_EXEC_ID setsid sh -c 'sleep 3078 &' &); "
             "(cd /; env -u SANDBOXD_EXEC_ID setsid sh -c "
             "'exec </dev/null >/dev/null 2>&1; sleep 3079 &' &); "
             "env -u SANDBOXD_EXEC_ID setsid nohup sleep 3080 >/dev/null 2>&1 & "
             "bash -c 'env -u SANDBOXD_EXEC_ID setsid sleep 3081 & disown'; "
             "env -u SANDBOXD_EXEC_ID setsid unshare -pf sleep 3082 >/dev/null 2>&1 & "
             "sleep 3070");
    p.command = cmd;
    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.error, 0);
    ck_assert(r.timed_out);
    ck_assert(r.started);
    ck_assert_int_eq(r.exit_code, -1);
    ck_assert_str_eq(r.signal, "");
    ck_assert_str_eq(r.out, "started\n");
    ck_assert_uint_ge(r.duration_ms, 2000);
    ck_assert_uint_lt(r.duration_ms, 15000);
    /* Nothing the command started is left: not in its group, not after setsid, not without
     * the marker (when the host lets the exec have a PID namespace). */
    ck_assert_int_eq(count_env_procs(mark), 0);
    ck_assert_int_eq(wait_pgrep_gone("^sleep 307[1-4]$", 3000), 0);
    if (pidns_supported())
        ck_assert_int_eq(wait_pgrep_gone("^sleep 30(7[0-9]|8[0-2])$", 3000), 0);
    else
        (void)system("pkill -KILL -f '^sleep 30(7[0-9]|8[0-2])$'");
    run_clear(&r);

    /* The pool still works afterwards. */
    run_cmd("echo ok", &r);
    ck_assert_str_eq(r.out, "ok\n");
    run_clear(&r);
}
END_TEST

START_TEST(test_exec_max_output_zero)
{
    struct sshexec_params p = {.command = "echo out; echo err >&2",
                               .timeout_ms = 20000,
                               .has_max_output = true,
                               .max_output_bytes = 0};
    struct run r;

    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_eq(r.exit_code, 0);
    ck_assert_uint_eq(r.out_len, 0);
    ck_assert_uint_eq(r.err_len, 0);
    ck_assert(r.out_trunc && r.err_trunc);
    run_clear(&r);

    p.command = "true";
    run_params(&p, &r, 30000);
    ck_assert(!r.out_trunc && !r.err_trunc);
    run_clear(&r);

    /* Without the flag: the default cap. */
    p.command = "echo out";
    p.has_max_output = false;
    run_params(&p, &r, 30000);
    ck_assert_str_eq(r.out, "out\n");
    ck_assert(!r.out_trunc);
    run_clear(&r);
}
END_TEST

/* A timed-out exec has one shape: no exit code, no signal; started says whether it ran. */
START_TEST(test_exec_timeout_shape)
{
    enum { LONG = 2 * SSHS_CHANNELS_PER_SESSION_DEFAULT + 2 };
    static struct run runs[LONG];
    struct sshexec_params p = {.command = "true", .timeout_ms = 1};
    struct run r;
    bool all;

    run_cmd("true", &r); /* warm both sessions' first channel */
    run_clear(&r);
    for (int i = 0; i < 20; i++) {
        run_params(&p, &r, 30000);
        ck_assert_int_eq(r.error, 0);
        if (r.timed_out) {
            ck_assert_int_eq(r.exit_code, -1);
            ck_assert_str_eq(r.signal, "");
        } else {
            ck_assert_int_eq(r.exit_code, 0);
            ck_assert(r.started);
        }
        run_clear(&r);
    }

    /* Every channel busy: an exec that never leaves the queue says it never started. */
    p.command = "sleep 3051";
    p.timeout_ms = 4000;
    for (int i = 0; i < LONG; i++) {
        memset(&runs[i], 0, sizeof(runs[i]));
        ck_assert_int_eq(sshexec_start(pool, &p, on_done, &runs[i], NULL), 0);
    }
    p.command = "echo never";
    p.timeout_ms = 1000;
    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.error, 0);
    ck_assert(r.timed_out);
    ck_assert(!r.started);
    ck_assert_int_eq(r.exit_code, -1);
    ck_assert_str_eq(r.signal, "");
    ck_assert_uint_ge(r.duration_ms, 990); /* the timer runs on the loop's millisecond clock */
    ck_assert_uint_eq(r.out_len, 0);
    run_clear(&r);
    do {
        uv_run(&loop, UV_RUN_ONCE);
        all = true;
        for (int i = 0; i < LONG; i++)
            all = all && runs[i].done;
    } while (!all);
    for (int i = 0, started = 0; i < LONG; i++) {
        ck_assert(runs[i].timed_out);
        started += runs[i].started;
        if (i == LONG - 1)
            ck_assert_int_ge(started, 2 * SSHS_CHANNELS_PER_SESSION_DEFAULT);
        ck_assert_int_eq(runs[i].exit_code, -1);
        ck_assert_str_eq(runs[i].signal, "");
        run_clear(&runs[i]);
    }
    ck_assert_int_eq(count_pgrep("^sleep 3051$"), 0);
}
END_TEST

/* Background processes end with the command when the exec has a namespace of its own: the
 * exec returns at once instead of waiting for them (they hold its output open). */
START_TEST(test_exec_background_ends_with_command)
{
    struct run r;

    if (!pidns_supported())
        return;
    run_cmd("sleep 3061 & (setsid sleep 3062 >/dev/null 2>&1 &); echo started", &r);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_eq(r.exit_code, 0);
    ck_assert_str_eq(r.out, "started\n");
    ck_assert_uint_lt(r.duration_ms, 5000);
    ck_assert_int_eq(wait_pgrep_gone("^sleep 306[12]$", 2000), 0);
    run_clear(&r);

    /* Orphans handed to the namespace's init are reaped while the command runs. */
    run_cmd("i=0; while [ $i -lt 20 ]; do (sleep 0.05 &); i=$((i+1)); done; sleep 1; n=0; "
            "for s in /proc/[0-9]*/stat; do read -r l <$s 2>/dev/null || continue; "
            "set -- ${l##*) }; [ \"$1\" = Z ] && grep -qs sandboxd-exec /proc/$2/cmdline && "
            "n=$((n+1)); done; echo $n",
            &r);
    ck_assert_str_eq(r.out, "0\n");
    run_clear(&r);

    /* A process of the command that kills the command's process group (the wrapper among
     * it): the exec ends killed, and what it had detached ends too. */
    run_cmd("env -u SANDBOXD_EXEC_ID setsid sleep 3063 & sleep 0.2; kill -KILL 0", &r);
    ck_assert_int_eq(r.error, 0);
    ck_assert_str_eq(r.signal, "SIGKILL");
    ck_assert_int_eq(wait_pgrep_gone("^sleep 3063$", 2000), 0);
    run_clear(&r);
}
END_TEST

START_TEST(test_exec_streaming)
{
    struct sshexec_params p = {.timeout_ms = 20000, .on_output = on_output};
    struct run r;

    p.command = "echo a; sleep 0.4; echo b >&2; sleep 0.4; echo c";
    run_params(&p, &r, 30000);
    ck_assert_int_eq(r.error, 0);
    ck_assert_int_eq(r.exit_code, 0);
    ck_assert(r.chunk_before_done);
    ck_assert_uint_ge(r.chunks, 3);
    /* The first chunk came well before the end. */
    ck_assert_uint_gt((r.done_ns - r.first_chunk_ns) / 1000000u, 500);
    ck_assert_uint_eq(r.stream_out_len, 4);
    ck_assert_int_eq(memcmp(r.stream_out, "a\nc\n", 4), 0);
    /* Streamed output is not repeated in the result. */
    ck_assert_ptr_null(r.out);
    ck_assert_ptr_null(r.err);
    run_clear(&r);

    /* The cap applies to streamed bytes too. */
    p.command = "head -c 100000 /dev/zero";
    p.has_max_output = true;
    p.max_output_bytes = 10;
    run_params(&p, &r, 30000);
    ck_assert(r.out_trunc);
    run_clear(&r);
}
END_TEST

static void on_start_next(struct sshexec *e, int error, struct sshexec_result *res, void *ud);

/* Idle sessions send keepalives (SSH_MSG_IGNORE) and stay usable. */
START_TEST(test_keepalive_idle_session)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sshpool *ka = NULL, *saved = pool;
    struct sshpool_stats st;
    bool closed = false;
    uint64_t until;
    struct run r;

    cfg.keepalive_ms = 50;
    ck_assert_int_eq(sshpool_new(&loop, &cfg, 1, &ka), 0);
    pool = ka;
    run_cmd("echo 1", &r);
    ck_assert_str_eq(r.out, "1\n");
    run_clear(&r);
    until = uv_hrtime() + 600 * 1000000ull;
    while (uv_hrtime() < until)
        uv_run(&loop, UV_RUN_ONCE); /* the keepalive timer wakes the loop */
    run_cmd("echo 2", &r);
    ck_assert_str_eq(r.out, "2\n");
    run_clear(&r);
    sshpool_get_stats(ka, &st);
    ck_assert_uint_eq(st.sessions_lost, 0);
    ck_assert_uint_eq(st.connects, 1);
    pool = saved;
    sshpool_close(ka, on_pool_closed, &closed);
    fixture_run_until(&loop, &pool_closed, 5000);
    pool_closed = false;
}
END_TEST

/* A second session left without channels is closed after idle_close_ms (one stays ready,
 * nothing counts as lost), and execs go on over the one left. */
START_TEST(test_idle_surplus_session_closed)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sshpool *two = NULL, *saved = pool;
    struct sshpool_stats st;
    bool closed = false;
    uint64_t until;
    struct run r;

    cfg.idle_close_ms = 100;
    ck_assert_int_eq(sshpool_new(&loop, &cfg, 2, &two), 0);
    pool = two;
    run_cmd("echo 1", &r);
    ck_assert_str_eq(r.out, "1\n");
    run_clear(&r);
    until = uv_hrtime() + 5000 * 1000000ull;
    do {
        uv_run(&loop, UV_RUN_ONCE);
        sshpool_get_stats(two, &st);
    } while (st.connects < 2 && uv_hrtime() < until);
    ck_assert_uint_eq(st.connects, 2);
    until = uv_hrtime() + 600 * 1000000ull;
    while (uv_hrtime() < until)
        uv_run(&loop, UV_RUN_ONCE); /* the session timers wake the loop */
    sshpool_get_stats(two, &st);
    ck_assert_uint_eq(st.sessions_ready, 1);
    ck_assert_uint_eq(st.sessions_lost, 0);
    run_cmd("echo 2", &r);
    ck_assert_str_eq(r.out, "2\n");
    run_clear(&r);
    sshpool_get_stats(two, &st);
    ck_assert_uint_eq(st.connects, 2);
    pool = saved;
    sshpool_close(two, on_pool_closed, &closed);
    fixture_run_until(&loop, &pool_closed, 5000);
    pool_closed = false;
}
END_TEST

START_TEST(test_exec_session_lost_and_reconnect)
{
    struct sshexec_params p = {.command = "echo up; sleep 30", .timeout_ms = 60000};
    struct sshpool_stats st;
    struct run r1 = {}, r2 = {}, r3 = {};
    uint64_t until;

    run_cmd("true", &r1); /* warm */
    run_clear(&r1);
    ck_assert_int_eq(sshexec_start(pool, &p, on_done, &r1, NULL), 0);
    ck_assert_int_eq(sshexec_start(pool, &p, on_done, &r2, NULL), 0);
    until = uv_hrtime() + 500 * 1000000ull;
    while (uv_hrtime() < until)
        uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert(!r1.done && !r2.done);
    ck_assert_int_eq(fixture_sshd_run(&fx, "stop"), 0);
    fixture_run_until(&loop, &r1.done, 10000);
    fixture_run_until(&loop, &r2.done, 10000);
    ck_assert_int_eq(r1.error, -ECONNRESET);
    ck_assert_int_eq(r2.error, -ECONNRESET);
    ck_assert(sshs_error_is_ssh(r1.error));
    sshpool_get_stats(pool, &st);
    ck_assert_uint_ge(st.sessions_lost, 1);
    ck_assert_uint_eq(st.channels, 0);
    run_clear(&r1);
    run_clear(&r2);

    /* sshd down: the next exec tries to reconnect and reports why it could not. */
    run_cmd("true", &r3);
    ck_assert_int_eq(r3.error, -ECONNREFUSED);
    run_clear(&r3);

    /* sshd back: the next exec reconnects. */
    ck_assert_int_eq(fixture_sshd_run(&fx, "start"), 0);
    run_cmd("echo again", &r3);
    ck_assert_int_eq(r3.error, 0);
    ck_assert_str_eq(r3.out, "again\n");
    run_clear(&r3);
}
END_TEST

START_TEST(test_exec_cancel)
{
    struct sshexec_params p = {.command = "sleep 3021 & sleep 3022", .timeout_ms = 60000};
    struct sshexec *e = NULL;
    struct run r = {};
    uint64_t until;

    ck_assert_int_eq(sshexec_start(pool, &p, on_done, &r, &e), 0);
    until = uv_hrtime() + 20000 * 1000000ull;
    while (uv_hrtime() < until && count_pgrep("^sleep 302[12]$") < 2)
        for (int i = 0; i < 20; i++)
            uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert(!r.done);
    ck_assert_int_eq(count_pgrep("^sleep 302[12]$"), 2);
    ck_assert_int_eq(sshexec_cancel(e), 0);
    ck_assert(!r.done); /* never synchronously */
    ck_assert_int_eq(sshexec_cancel(e), -EALREADY);
    fixture_run_until(&loop, &r.done, 15000);
    ck_assert_int_eq(r.error, -ECANCELED);
    ck_assert_int_eq(count_pgrep("^sleep 302[12]$"), 0);

    /* Cancel while still queued. */
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(sshexec_start(pool, &p, on_done, &r, &e), 0);
    ck_assert_int_eq(sshexec_cancel(e), 0);
    ck_assert(!r.done);
    fixture_run_until(&loop, &r.done, 5000);
    ck_assert_int_eq(r.error, -ECANCELED);
}
END_TEST

START_TEST(test_pool_close_cancels_execs)
{
    struct sshexec_params p = {.command = "sleep 30", .timeout_ms = 60000};
    struct run r1 = {}, r2 = {};
    uint64_t until;

    ck_assert_int_eq(sshexec_start(pool, &p, on_done, &r1, NULL), 0);
    until = uv_hrtime() + 400 * 1000000ull;
    while (uv_hrtime() < until)
        uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert_int_eq(sshexec_start(pool, &p, on_done, &r2, NULL), 0);
    sshpool_close(pool, on_pool_closed, NULL);
    pool = NULL;
    ck_assert(r1.done && r2.done);
    ck_assert_int_eq(r1.error, -ECANCELED);
    ck_assert_int_eq(r2.error, -ECANCELED);
    fixture_run_until(&loop, &pool_closed, 5000);
}
END_TEST

/* A done callback that starts the next exec (common in the daemon). */
static int chain_left;
static bool chain_done;

static void on_start_next(struct sshexec *e, int error, struct sshexec_result *res, void *ud)
{
    struct sshexec_params p = {.command = "true"};

    ck_assert_int_eq(error, 0);
    ck_assert_int_eq(res->exit_code, 0);
    if (--chain_left > 0)
        ck_assert_int_eq(sshexec_start(pool, &p, on_start_next, NULL, NULL), 0);
    else
        chain_done = true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(test_exec_latency)
{
    struct sshexec_params p = {.command = "true"};
    enum { N = 500 };
    static uint64_t lat[N];
    struct run r;

    chain_left = 20;
    chain_done = false;
    ck_assert_int_eq(sshexec_start(pool, &p, on_start_next, NULL, NULL), 0);
    fixture_run_until(&loop, &chain_done, 60000);

    for (int i = 0; i < N; i++) {
        uint64_t t0 = uv_hrtime();
        run_params(&p, &r, 10000);
        ck_assert_int_eq(r.error, 0);
        lat[i] = uv_hrtime() - t0;
        run_clear(&r);
    }
    qsort(lat, N, sizeof(lat[0]), cmp_u64);
    printf("sshexec: round trip of `true` over a warm session, %d runs: p50 %.2f ms, "
           "p90 %.2f ms, p99 %.2f ms, max %.2f ms\n",
           N, lat[N / 2] / 1e6, lat[N * 9 / 10] / 1e6, lat[N * 99 / 100] / 1e6, lat[N - 1] / 1e6);
}
END_TEST

static Suite *sshexec_suite(void)
{
    Suite *s = suite_create("sshexec");
    TCase *tc;

    tc = tcase_create("unit");
    tcase_add_checked_fixture(tc, setup_loop, teardown_loop);
    tcase_add_test(tc, test_shell_quote);
    tcase_add_test(tc, test_build_command_roundtrip_local);
    tcase_add_test(tc, test_build_command_rejects);
    tcase_add_test(tc, test_build_command_helper);
    tcase_add_test(tc, test_build_command_limits);
    tcase_add_test(tc, test_build_command_fallback_local);
    tcase_add_test(tc, test_build_command_container_pidns_local);
    suite_add_tcase(s, tc);

    tc = tcase_create("sshd");
    tcase_add_checked_fixture(tc, setup_sshd, teardown_sshd);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, test_exec_true_echo);
    tcase_add_test(tc, test_exec_stdout_stderr_exit);
    tcase_add_test(tc, test_exec_signal);
    tcase_add_test(tc, test_exec_stdin);
    tcase_add_test(tc, test_exec_env_cwd_quoting);
    tcase_add_test(tc, test_exec_argv);
    tcase_add_test(tc, test_exec_concurrent);
    tcase_add_test(tc, test_exec_truncation);
    tcase_add_test(tc, test_exec_timeout_kills_tree);
    tcase_add_test(tc, test_exec_long_command);
    tcase_add_test(tc, test_exec_max_output_zero);
    tcase_add_test(tc, test_exec_timeout_shape);
    tcase_add_test(tc, test_exec_background_ends_with_command);
    tcase_add_test(tc, test_exec_streaming);
    tcase_add_test(tc, test_exec_session_lost_and_reconnect);
    tcase_add_test(tc, test_exec_cancel);
    tcase_add_test(tc, test_keepalive_idle_session);
    tcase_add_test(tc, test_idle_surplus_session_closed);
    tcase_add_test(tc, test_pool_close_cancels_execs);
    suite_add_tcase(s, tc);

    tc = tcase_create("bench");
    tcase_add_checked_fixture(tc, setup_sshd, teardown_sshd);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, test_exec_latency);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (getenv("SANDBOXD_TEST_DEBUG"))
        log_set_max_level(LOG_DEBUG);
    return check_run_suite(sshexec_suite());
}
