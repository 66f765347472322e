/* lib/ssh/process: the background process scripts run over sshexec against a throwaway sshd on
 * this host, whose /bin/sh (dash here), coreutils and util-linux are those of a Debian
 * container (the e2e tests run them on pve-sim's busybox): start with stdin, write, a
 * long-poll read, close, wait for the exit code, stderr, kill, retention, list. $HOME
 * points at a temporary folder. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "macro.h"
#include "process.h"
#include "sshexec.h"
#include "sshs.h"
#include "ssh-fixture/fixture.h"
#include "tests/check-util.h"

static uv_loop_t loop;
static struct sshd_fixture fx;
static struct sshpool *pool;
static bool pool_closed;
static char home[64], home_env[80];
static char started[4][PROCESS_ID_LEN + 1];
static size_t n_started;

static void on_pool_closed(void *userdata)
{
    pool_closed = true;
}

static void setup(void)
{
    struct sshs_config cfg;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    fixture_start(&fx);
    cfg = fixture_config(&fx);
    ck_assert_int_eq(sshpool_new(&loop, &cfg, 2, &pool), 0);
    pool_closed = false;
    snprintf(home, sizeof home, "/tmp/sandboxd-proc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(home));
    snprintf(home_env, sizeof home_env, "HOME=%s", home);
}

static enum process_report run(char *script, const char *stdin_data, uint64_t nums[3],
                               struct process_status *st, char **ret_out, size_t *ret_len);

static void teardown(void)
{
    char cmd[128], *script;

    /* What a failed test left running ends (SIGKILL ends its whole tree). */
    for (size_t i = 0; i < n_started; i++)
        if (process_script_kill(started[i], "KILL", &script) == 0)
            (void)run(script, NULL, NULL, NULL, NULL, NULL);
    n_started = 0;
    sshpool_close(pool, on_pool_closed, NULL);
    fixture_run_until(&loop, &pool_closed, 5000);
    pool = NULL;
    check_loop_done(&loop);
    fixture_stop(&fx);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", home);
    (void)system(cmd);
}

struct out {
    bool done;
    int error;
    char *out, *err;
    size_t out_len, err_len;
};

static void on_done(struct sshexec *e, int error, struct sshexec_result *res, void *userdata)
{
    struct out *o = userdata;

    o->done = true;
    o->error = error;
    if (res) {
        o->out = TAKE_PTR(res->out);
        o->out_len = res->out_len;
        o->err = TAKE_PTR(res->err);
        o->err_len = res->err_len;
    }
}

/* Runs script (taken) with HOME set; returns the report; *ret_out gets stdout. */
static enum process_report run(char *script, const char *stdin_data, uint64_t nums[3],
                               struct process_status *st, char **ret_out, size_t *ret_len)
{
    const char *env[] = {home_env, NULL};
    struct sshexec_params p = {.command = script,
                               .env = env,
                               .container_pid_namespace = true,
                               .timeout_ms = 60000,
                               .stdin_data = stdin_data,
                               .stdin_len = stdin_data ? strlen(stdin_data) : 0};
    struct out o = {};
    enum process_report rep;

    ck_assert_int_eq(sshexec_start(pool, &p, on_done, &o, NULL), 0);
    free(script);
    fixture_run_until(&loop, &o.done, 70000);
    ck_assert_int_eq(o.error, 0);
    rep = process_parse_report(o.err, o.err_len, nums, st);
    ck_assert_msg(rep != PROCESS_R_MALFORMED, "report: %.*s", (int)MIN(o.err_len, (size_t)2000),
                  o.err);
    if (ret_out) {
        *ret_out = o.out;
        *ret_len = o.out_len;
    } else {
        free(o.out);
    }
    free(o.err);
    return rep;
}

static void start(const char *id, const char *command, bool has_stdin, uint64_t output_max)
{
    struct process_start_spec s = {.id = id,
                                   .command = command,
                                   .has_stdin = has_stdin,
                                   .started_at = time(NULL),
                                   .max_processes = 4,
                                   .output_max = output_max};
    char *script;

    ck_assert_uint_lt(n_started, ELEMENTSOF(started));
    memcpy(started[n_started++], id, PROCESS_ID_LEN + 1);
    ck_assert_int_eq(process_script_start(&s, &script), 0);
    ck_assert_int_eq(run(script, NULL, NULL, NULL, NULL, NULL), PROCESS_R_OK);
}

/* Reads from offset (waiting up to wait_ms); returns the data (malloc'd) and nums. */
static char *read_at(const char *id, enum process_stream s, uint64_t off, unsigned wait_ms,
                     uint64_t output_max, uint64_t nums[3], struct process_status *st,
                     size_t *ret_len)
{
    char *script, *data;

    ck_assert_int_eq(process_script_read(id, s, off, 1u << 20, wait_ms, output_max, &script), 0);
    ck_assert_int_eq(run(script, NULL, nums, st, &data, ret_len), PROCESS_R_OK);
    return data;
}

START_TEST(test_stdin_wait_exit)
{
    char id[PROCESS_ID_LEN + 1], *script, *d;
    struct process_status st;
    uint64_t nums[3];
    size_t n;

    ck_assert_int_eq(process_id_new(time(NULL), id), 0);
    start(id, "echo ready; while read -r l; do echo \"<$l>\"; done; echo bye >&2; exit 5", true,
          65536);
    d = read_at(id, PROCESS_STDOUT, 0, 20000, 65536, nums, &st, &n);
    ck_assert_uint_eq(n, 6);
    ck_assert(memcmp(d, "ready\n", 6) == 0);
    free(d);
    /* The long-poll returns with what arrives after it began. */
    ck_assert_int_eq(process_script_write(id, false, &script), 0);
    ck_assert_int_eq(run(script, "a\n", NULL, NULL, NULL, NULL), PROCESS_R_OK);
    d = read_at(id, PROCESS_STDOUT, 6, 20000, 65536, nums, &st, &n);
    ck_assert_uint_eq(nums[1], 6);
    ck_assert_uint_eq(n, 4);
    ck_assert(memcmp(d, "<a>\n", 4) == 0);
    ck_assert_str_eq(st.state, "running");
    free(d);
    ck_assert_int_eq(process_script_write(id, true, &script), 0);
    ck_assert_int_eq(run(script, "b\n", NULL, NULL, NULL, NULL), PROCESS_R_OK);
    ck_assert_int_eq(process_script_write(id, false, &script), 0);
    ck_assert_int_ne(run(script, "c\n", NULL, NULL, NULL, NULL), PROCESS_R_OK);
    ck_assert_int_eq(process_script_wait(id, 20000, &script), 0);
    ck_assert_int_eq(run(script, NULL, NULL, &st, NULL, NULL), PROCESS_R_OK);
    ck_assert_str_eq(st.state, "exited");
    ck_assert_int_eq(st.exit_code, 5);
    d = read_at(id, PROCESS_STDOUT, 0, 0, 65536, nums, &st, &n);
    ck_assert_uint_eq(n, 14);
    ck_assert(memcmp(d, "ready\n<a>\n<b>\n", 14) == 0);
    ck_assert_uint_eq(nums[2], 14);
    free(d);
    d = read_at(id, PROCESS_STDERR, 0, 0, 65536, nums, &st, &n);
    ck_assert_uint_eq(n, 4);
    ck_assert(memcmp(d, "bye\n", 4) == 0);
    free(d);
    ck_assert_int_eq(process_script_read(id, PROCESS_STDOUT, 15, 10, 0, 65536, &script), 0);
    ck_assert_int_eq(run(script, NULL, nums, NULL, NULL, NULL), PROCESS_R_RANGE);
    ck_assert_uint_eq(nums[2], 14);
}
END_TEST

START_TEST(test_kill_retention_list)
{
    char a[PROCESS_ID_LEN + 1], b[PROCESS_ID_LEN + 1], *script, *d;
    struct process_row *rows;
    struct process_status st;
    uint64_t nums[3];
    size_t n;

    ck_assert_int_eq(process_id_new(time(NULL), a), 0);
    start(a, "sleep 1000 & sleep 1001", false, 65536);
    ck_assert_int_eq(process_script_kill(a, "TERM", &script), 0);
    ck_assert_int_eq(run(script, NULL, NULL, &st, NULL, NULL), PROCESS_R_OK);
    ck_assert_str_eq(st.state, "exited");
    ck_assert_int_eq(st.signal, 15);

    ck_assert_int_eq(process_id_new(time(NULL) + 1, b), 0);
    start(b, "head -c 300000 /dev/zero", false, 65536);
    ck_assert_int_eq(process_script_wait(b, 20000, &script), 0);
    ck_assert_int_eq(run(script, NULL, NULL, &st, NULL, NULL), PROCESS_R_OK);
    ck_assert_int_eq(st.exit_code, 0);
    d = read_at(b, PROCESS_STDOUT, 0, 0, 65536, nums, &st, &n);
    ck_assert_uint_eq(nums[2], 300000);
    ck_assert_uint_gt(nums[0], 0);               /* the start was dropped */
    ck_assert_uint_ge(nums[2] - nums[0], 65536); /* at least output_max kept */
    ck_assert_uint_eq(nums[1], nums[0]);         /* the data starts where it is kept */
    ck_assert_uint_eq(n, MIN(nums[2] - nums[1], (uint64_t)PROCESS_SEGMENT_MIN));
    free(d);

    ck_assert_int_eq(process_script_list(&script), 0);
    ck_assert_int_eq(run(script, NULL, NULL, NULL, &d, &n), PROCESS_R_OK);
    ck_assert_int_eq(process_parse_list(d, n, &rows, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(rows[0].id, a);
    ck_assert_str_eq(rows[1].id, b);
    ck_assert_str_eq(rows[1].command, "head -c 300000 /dev/zero");
    free(rows);
    free(d);
}
END_TEST

/* Long-polls that wait: past the first 100 ms (where dash polls less often), until output
 * comes; and until the deadline with none. */
START_TEST(test_long_poll_waits)
{
    char id[PROCESS_ID_LEN + 1], *d;
    struct process_status st;
    uint64_t nums[3];
    size_t n;

    ck_assert_int_eq(process_id_new(time(NULL), id), 0);
    start(id, "sleep 1; echo late; sleep 1000", false, 65536);
    d = read_at(id, PROCESS_STDOUT, 0, 20000, 65536, nums, &st, &n);
    ck_assert_uint_eq(n, 5);
    ck_assert(memcmp(d, "late\n", 5) == 0);
    free(d);
    d = read_at(id, PROCESS_STDOUT, 5, 300, 65536, nums, &st, &n);
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(nums[1], 5);
    ck_assert_str_eq(st.state, "running");
    free(d);
}
END_TEST

/* Runs an attach script (taken; it prints no report) with stdin_data; *o gets its output. */
static void attach_run(char *script, const char *stdin_data, struct out *o)
{
    const char *env[] = {home_env, NULL};
    struct sshexec_params p = {.command = script,
                               .env = env,
                               .container_pid_namespace = true,
                               .timeout_ms = 60000,
                               .stdin_data = stdin_data,
                               .stdin_len = stdin_data ? strlen(stdin_data) : 0,
                               .has_max_output = true,
                               .max_output_bytes = 1u << 20};

    ck_assert_int_eq(sshexec_start(pool, &p, on_done, o, NULL), 0);
    free(script);
    fixture_run_until(&loop, &o->done, 70000);
    ck_assert_int_eq(o->error, 0);
}

/* The FIFOs named .w.* left in a process's folder (the followers remove theirs at their end). */
static unsigned wake_fifos_left(const char *id)
{
    char path[256];
    struct dirent *de;
    unsigned n = 0;
    DIR *d;

    snprintf(path, sizeof path, "%s/.sandboxd-proc/%s", home, id);
    d = opendir(path);
    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)))
        n += strncmp(de->d_name, ".w.", 3) == 0;
    closedir(d);
    return n;
}

/* The attach script: its stdin into the process's stdin (closed at its end), the process's
 * stdout and stderr from offset 0 into its own, across segments and past the retention,
 * until the process exited; then the stdin counts as closed for process.write. */
START_TEST(test_attach)
{
    char a[PROCESS_ID_LEN + 1], *script, *out, *want;
    struct out o = {};
    size_t n = 0;

    ck_assert_int_eq(process_id_new(time(NULL), a), 0);
    start(a, "cat; head -c 300000 /dev/zero | tr '\\000' x; echo to-err >&2", true, 65536);
    ck_assert_int_eq(process_script_attach(a, 65536, false, false, false, &script), -EINVAL);
    ck_assert_int_eq(process_script_attach(a, 65536, true, true, true, &script), 0);
    attach_run(script, "fed\n", &o);
    ck_assert_uint_eq(wake_fifos_left(a), 0);
    want = malloc(4 + 300000);
    ck_assert_ptr_nonnull(want);
    memcpy(want, "fed\n", 4);
    memset(want + 4, 'x', 300000);
    ck_assert_uint_eq(o.out_len, 4 + 300000);
    ck_assert(memcmp(o.out, want, o.out_len) == 0);
    ck_assert_uint_eq(o.err_len, 7);
    ck_assert(memcmp(o.err, "to-err\n", 7) == 0);
    free(want);
    free(o.out);
    free(o.err);
    /* The process ended (its stdin was closed); its output is still read by offset. */
    out = read_at(a, PROCESS_STDOUT, 0, 0, 65536, (uint64_t[3]){}, &(struct process_status){}, &n);
    free(out);
    ck_assert_int_eq(process_script_write(a, false, &script), 0);
    ck_assert_int_eq(run(script, "late", NULL, NULL, NULL, NULL), PROCESS_R_EXITED);
}
END_TEST

/* An attach script that comes late (here: after the process ended) still gets the output
 * from offset 0: the start pinned it for it (held by a sleep that the attach script ends). */
START_TEST(test_attach_late)
{
    struct process_start_spec sp = {.command = "head -c 300000 /dev/zero | tr '\\000' y",
                                    .started_at = time(NULL),
                                    .max_processes = 4,
                                    .output_max = 65536,
                                    .pin_out = true};
    char a[PROCESS_ID_LEN + 1], *script, *out;
    struct process_status st;
    struct out o = {};
    uint64_t nums[3];
    size_t n, i;

    ck_assert_int_eq(process_id_new(time(NULL), a), 0);
    sp.id = a;
    memcpy(started[n_started++], a, PROCESS_ID_LEN + 1);
    ck_assert_int_eq(process_script_start(&sp, &script), 0);
    ck_assert_int_eq(run(script, NULL, NULL, NULL, NULL, NULL), PROCESS_R_OK);
    ck_assert_int_eq(process_script_wait(a, 20000, &script), 0);
    ck_assert_int_eq(run(script, NULL, NULL, &st, NULL, NULL), PROCESS_R_OK);
    ck_assert_int_eq(st.exit_code, 0);
    out = read_at(a, PROCESS_STDOUT, 0, 0, 65536, nums, &st, &n);
    free(out);
    ck_assert_uint_eq(nums[0], 0); /* nothing dropped: pinned */
    ck_assert_int_eq(process_script_attach(a, 65536, false, true, false, &script), 0);
    attach_run(script, NULL, &o);
    ck_assert_uint_eq(o.out_len, 300000);
    for (i = 0; i < o.out_len; i++)
        ck_assert_int_eq(o.out[i], 'y');
    free(o.out);
    free(o.err);
}
END_TEST

static Suite *process_suite(void)
{
    Suite *s = suite_create("process");
    TCase *tc = tcase_create("scripts");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_stdin_wait_exit);
    tcase_add_test(tc, test_kill_retention_list);
    tcase_add_test(tc, test_long_poll_waits);
    tcase_add_test(tc, test_attach);
    tcase_add_test(tc, test_attach_late);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(process_suite());
}
