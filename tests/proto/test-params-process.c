/* proto/params-process: the params of process.*: defaults, limits, each error naming its
 * parameter, and nothing leaked on any path. Also lib/ssh/process.c's parsing of what the
 * container scripts report. */
#include "process.h"
#include "b64.h"
#include "params-process.h"
#include "tests/check-util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PR "\"pr-0123456789abcdef\""

static json_object *J(const char *s)
{
    json_object *o = json_tokener_parse(s);

    ck_assert_msg(o != NULL, "test JSON does not parse: %s", s);
    return o;
}

/* Runs spec on params; on failure checks that err names param. */
static int run(const struct params_spec *spec, const char *params, const char *param)
{
    json_object *p = params ? J(params) : NULL;
    struct params_error e = {};
    void *buf = calloc(1, spec->size);
    int r;

    ck_assert_ptr_nonnull(buf);
    r = spec->parse(p, buf, &e);
    if (r == 0 && spec->done)
        spec->done(buf);
    if (r < 0 && param)
        ck_assert_msg(strcmp(e.param, param) == 0, "%s: error names '%s' (%s), not '%s'", params,
                      e.param, e.reason, param);
    free(buf);
    json_object_put(p);
    return r;
}

START_TEST(test_start)
{
    struct params_process_start p;
    struct params_error e;
    json_object *o;
    char *big;

    o = J("{\"id\":\"sb-1\",\"command\":\"npm run dev\",\"stdin\":true,\"cwd\":\"/srv\","
          "\"env\":{\"A\":\"b\"}}");
    ck_assert_int_eq(params_process_start_spec.parse(o, &p, &e), 0);
    ck_assert_str_eq(p.id, "sb-1");
    ck_assert_str_eq(p.command, "npm run dev");
    ck_assert(p.has_stdin);
    ck_assert_str_eq(p.cwd, "/srv");
    ck_assert_uint_eq(p.env.n, 1);
    params_process_start_done(&p);
    json_object_put(o);

    o = J("{\"id\":\"sb-1\",\"argv\":[\"sleep\",\"5\"]}");
    ck_assert_int_eq(params_process_start_spec.parse(o, &p, &e), 0);
    ck_assert_ptr_null(p.command);
    ck_assert_uint_eq(p.argc, 2);
    ck_assert(!p.has_stdin);
    params_process_start_done(&p);
    json_object_put(o);

    ck_assert_int_eq(run(&params_process_start_spec, "{\"id\":\"sb-1\"}", "command"), -EINVAL);
    ck_assert_int_eq(run(&params_process_start_spec,
                         "{\"id\":\"sb-1\",\"command\":\"x\",\"argv\":[\"x\"]}", NULL),
                     -EINVAL);
    /* pty: both sizes in 1..1000, nothing else; it implies stdin. */
    o = J("{\"id\":\"sb-1\",\"command\":\"x\",\"pty\":{\"cols\":132,\"rows\":41}}");
    ck_assert_int_eq(params_process_start_spec.parse(o, &p, &e), 0);
    ck_assert(p.pty && p.has_stdin);
    ck_assert_uint_eq(p.pty_cols, 132);
    ck_assert_uint_eq(p.pty_rows, 41);
    params_process_start_done(&p);
    json_object_put(o);
    o = J("{\"id\":\"sb-1\",\"command\":\"x\",\"stdin\":false,"
          "\"pty\":{\"cols\":1,\"rows\":1000}}");
    ck_assert_int_eq(params_process_start_spec.parse(o, &p, &e), 0);
    ck_assert(p.pty && p.has_stdin);
    ck_assert_uint_eq(p.pty_cols, 1);
    ck_assert_uint_eq(p.pty_rows, 1000);
    params_process_start_done(&p);
    json_object_put(o);
    {
        static const char *const bad[] = {
            "{\"cols\":0,\"rows\":24}",
            "{\"cols\":80,\"rows\":1001}",
            "{\"cols\":80}",
            "{\"cols\":80,\"rows\":24,\"x\":1}",
            "{\"cols\":\"80\",\"rows\":24}",
            "{\"cols\":80,\"rows\":-1}",
            "true",
            "null",
            "[80,24]",
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char *t = NULL;

            ck_assert_int_ge(asprintf(&t, "{\"id\":\"sb-1\",\"command\":\"x\",\"pty\":%s}", bad[i]),
                             0);
            ck_assert_int_eq(run(&params_process_start_spec, t, "pty"), -EINVAL);
            free(t);
        }
    }
    ck_assert_int_eq(run(&params_process_start_spec,
                         "{\"id\":\"sb-1\",\"command\":\"x\",\"stdin\":\"yes\"}", "stdin"),
                     -EINVAL);
    /* Descriptors: indexes 0..7, each named once; stdin_fd implies stdin, which may not be
     * false then; without descriptors they are -1. */
    o = J("{\"id\":\"sb-1\",\"command\":\"x\",\"stdin_fd\":0,\"stdout_fd\":2,"
          "\"stderr_fd\":1}");
    ck_assert_int_eq(params_process_start_spec.parse(o, &p, &e), 0);
    ck_assert(p.has_stdin);
    ck_assert_int_eq(p.stdin_fd, 0);
    ck_assert_int_eq(p.stdout_fd, 2);
    ck_assert_int_eq(p.stderr_fd, 1);
    params_process_start_done(&p);
    json_object_put(o);
    o = J("{\"id\":\"sb-1\",\"command\":\"x\",\"stdout_fd\":0}");
    ck_assert_int_eq(params_process_start_spec.parse(o, &p, &e), 0);
    ck_assert(!p.has_stdin);
    ck_assert_int_eq(p.stdin_fd, -1);
    ck_assert_int_eq(p.stdout_fd, 0);
    ck_assert_int_eq(p.stderr_fd, -1);
    params_process_start_done(&p);
    json_object_put(o);
    ck_assert_int_eq(run(&params_process_start_spec,
                         "{\"id\":\"sb-1\",\"command\":\"x\",\"stdin\":false,\"stdin_fd\":0}",
                         "stdin_fd"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_start_spec,
                         "{\"id\":\"sb-1\",\"command\":\"x\",\"stdin_fd\":1,\"stdout_fd\":1}",
                         "stdout_fd"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_start_spec,
                         "{\"id\":\"sb-1\",\"command\":\"x\",\"stdout_fd\":8}", "stdout_fd"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_start_spec,
                         "{\"id\":\"sb-1\",\"command\":\"x\",\"stderr_fd\":-1}", "stderr_fd"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_start_spec,
                         "{\"id\":\"sb-1\",\"command\":\"x\",\"timeout_ms\":5}", "timeout_ms"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_start_spec, "{\"id\":\"SB\",\"command\":\"x\"}", "id"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_start_spec, "[1]", "params"), -EINVAL);

    /* The smaller sizes: 8192 bytes of command pass, 8193 do not. */
    big = malloc(PARAMS_PROCESS_COMMAND_MAX + 64);
    ck_assert_ptr_nonnull(big);
    for (int n = PARAMS_PROCESS_COMMAND_MAX; n <= PARAMS_PROCESS_COMMAND_MAX + 1; n++) {
        char *s;

        memset(big, 'x', (size_t)n);
        big[n] = 0;
        ck_assert_int_ge(asprintf(&s, "{\"id\":\"sb-1\",\"command\":\"%s\"}", big), 0);
        ck_assert_int_eq(run(&params_process_start_spec, s, "command"),
                         n == PARAMS_PROCESS_COMMAND_MAX ? 0 : -EINVAL);
        free(s);
    }
    memset(big, 'v', 4096);
    big[4096] = 0;
    {
        char *s;

        ck_assert_int_ge(
            asprintf(&s, "{\"id\":\"sb-1\",\"command\":\"x\",\"env\":{\"K\":\"%s\"}}", big), 0);
        ck_assert_int_eq(run(&params_process_start_spec, s, "env"), -EINVAL);
        free(s);
    }
    free(big);
}
END_TEST

START_TEST(test_read)
{
    struct params_process_read p;
    struct params_error e;
    json_object *o = J("{\"id\":\"sb-1\",\"process\":" PR "}");

    ck_assert_int_eq(params_process_read_spec.parse(o, &p, &e), 0);
    ck_assert_str_eq(p.process, "pr-0123456789abcdef");
    ck_assert(!p.stderr_stream);
    ck_assert_int_eq(p.offset, 0);
    ck_assert_int_eq(p.length, PARAMS_PROCESS_READ_DEFAULT);
    ck_assert_int_eq(p.wait_ms, 0);
    json_object_put(o);
    o = J("{\"id\":\"sb-1\",\"process\":" PR ",\"stream\":\"stderr\",\"offset\":7,"
          "\"length\":1048576,\"wait_ms\":60000}");
    ck_assert_int_eq(params_process_read_spec.parse(o, &p, &e), 0);
    ck_assert(p.stderr_stream);
    ck_assert_int_eq(p.offset, 7);
    ck_assert_int_eq(p.wait_ms, 60000);
    json_object_put(o);

    ck_assert_int_eq(run(&params_process_read_spec, "{\"id\":\"sb-1\"}", "process"), -EINVAL);
    ck_assert_int_eq(
        run(&params_process_read_spec, "{\"id\":\"sb-1\",\"process\":\"pr-0123\"}", "process"),
        -EINVAL);
    ck_assert_int_eq(run(&params_process_read_spec,
                         "{\"id\":\"sb-1\",\"process\":\"pr-0123456789ABCDEF\"}", "process"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_read_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"stream\":\"both\"}", "stream"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_read_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"offset\":-1}", "offset"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_read_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"length\":0}", "length"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_read_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"length\":1048577}", "length"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_read_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"wait_ms\":60001}", "wait_ms"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_read_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"wait_ms\":1.5}", "wait_ms"),
                     -EINVAL);
}
END_TEST

START_TEST(test_write)
{
    struct params_process_write p;
    struct params_error e;
    json_object *o = J("{\"id\":\"sb-1\",\"process\":" PR ",\"data_b64\":\"AAEC\",\"close\":true}");

    ck_assert_int_eq(params_process_write_spec.parse(o, &p, &e), 0);
    ck_assert_uint_eq(p.data_len, 3);
    ck_assert(p.data[0] == 0 && p.data[1] == 1 && p.data[2] == 2);
    ck_assert(p.close);
    params_process_write_done(&p);
    json_object_put(o);
    o = J("{\"id\":\"sb-1\",\"process\":" PR ",\"close\":true}");
    ck_assert_int_eq(params_process_write_spec.parse(o, &p, &e), 0);
    ck_assert_ptr_null(p.data);
    params_process_write_done(&p);
    json_object_put(o);

    ck_assert_int_eq(
        run(&params_process_write_spec,
            "{\"id\":\"sb-1\",\"process\":" PR ",\"data\":\"x\",\"data_b64\":\"eA==\"}", "data"),
        -EINVAL);
    ck_assert_int_eq(run(&params_process_write_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"data_b64\":\"!\"}", "data_b64"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_write_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"close\":1}", "close"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_write_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"content\":\"x\"}", "content"),
                     -EINVAL);
    {
        size_t n = PARAMS_PROCESS_WRITE_MAX + 1;
        char *big = malloc(n + 1), *s;

        ck_assert_ptr_nonnull(big);
        memset(big, 'a', n);
        big[n] = 0;
        ck_assert_int_ge(asprintf(&s, "{\"id\":\"sb-1\",\"process\":" PR ",\"data\":\"%s\"}", big),
                         0);
        ck_assert_int_eq(run(&params_process_write_spec, s, "data"), -EINVAL);
        free(s);
        free(big);
    }
}
END_TEST

START_TEST(test_wait_kill_list)
{
    struct params_process_ref p;
    struct params_error e;
    json_object *o = J("{\"id\":\"sb-1\",\"process\":" PR "}");

    ck_assert_int_eq(params_process_wait_spec.parse(o, &p, &e), 0);
    ck_assert_int_eq(p.timeout_ms, PARAMS_PROCESS_TIMEOUT_MS_DEFAULT);
    ck_assert_int_eq(params_process_kill_spec.parse(o, &p, &e), 0);
    ck_assert_str_eq(p.signal, "KILL");
    json_object_put(o);
    o = J("{\"id\":\"sb-1\",\"process\":" PR ",\"signal\":\"SIGTERM\"}");
    ck_assert_int_eq(params_process_kill_spec.parse(o, &p, &e), 0);
    ck_assert_str_eq(p.signal, "TERM");
    json_object_put(o);
    o = J("{\"id\":\"sb-1\",\"process\":" PR ",\"signal\":\"HUP\"}");
    ck_assert_int_eq(params_process_kill_spec.parse(o, &p, &e), 0);
    ck_assert_str_eq(p.signal, "HUP");
    json_object_put(o);

    ck_assert_int_eq(run(&params_process_wait_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"timeout_ms\":600001}",
                         "timeout_ms"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_kill_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"signal\":\"SIGSEGV\"}", "signal"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_kill_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"signal\":9}", "signal"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_list_spec, "{\"id\":\"sb-1\"}", NULL), 0);
    ck_assert_int_eq(
        run(&params_process_list_spec, "{\"id\":\"sb-1\",\"process\":" PR "}", "process"), -EINVAL);
    ck_assert_int_eq(run(&params_process_list_spec, NULL, "id"), -EINVAL);
}
END_TEST

START_TEST(test_resize)
{
    struct params_process_resize p;
    struct params_error e;
    json_object *o = J("{\"id\":\"sb-1\",\"process\":" PR ",\"cols\":1000,\"rows\":1}");

    ck_assert_int_eq(params_process_resize_spec.parse(o, &p, &e), 0);
    ck_assert_uint_eq(p.cols, 1000);
    ck_assert_uint_eq(p.rows, 1);
    json_object_put(o);
    ck_assert_int_eq(run(&params_process_resize_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"rows\":10}", "cols"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_resize_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"cols\":10}", "rows"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_resize_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"cols\":1001,\"rows\":10}", "cols"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_resize_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"cols\":10,\"rows\":0}", "rows"),
                     -EINVAL);
    ck_assert_int_eq(run(&params_process_resize_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"cols\":\"80\",\"rows\":10}",
                         "cols"),
                     -EINVAL);
    ck_assert_int_eq(
        run(&params_process_resize_spec, "{\"id\":\"sb-1\",\"cols\":10,\"rows\":10}", "process"),
        -EINVAL);
    ck_assert_int_eq(run(&params_process_resize_spec,
                         "{\"id\":\"sb-1\",\"process\":" PR ",\"cols\":10,\"rows\":10,\"x\":1}",
                         "x"),
                     -EINVAL);
}
END_TEST

/* What the container scripts report, and the ids and scripts built for them. */
START_TEST(test_reports)
{
    static const char read_err[] = "noise\n@ OK 65536 70000 80000 143\n";
    static const char list_out[] = "pr-0123456789abcdef 1796258352 - npm run dev\n"
                                   "pr-0123456789abcdee 1796258353 0 echo  hi\n"
                                   "garbage\n"
                                   "pr-0123456789abcded 1796258354 lost \n";
    struct process_status st;
    struct process_row *rows;
    uint64_t nums[3];
    char id[PROCESS_ID_LEN + 1], *script;
    size_t n;

    ck_assert_int_eq(process_parse_report(read_err, strlen(read_err), nums, &st), PROCESS_R_OK);
    ck_assert_uint_eq(nums[0], 65536);
    ck_assert_uint_eq(nums[1], 70000);
    ck_assert_uint_eq(nums[2], 80000);
    ck_assert_str_eq(st.state, "exited");
    ck_assert_int_eq(st.signal, 15);
    ck_assert_int_eq(st.exit_code, -1);
    ck_assert_int_eq(process_parse_report("@ E limit 64\n", 13, nums, NULL), PROCESS_R_LIMIT);
    ck_assert_uint_eq(nums[0], 64);
    ck_assert_int_eq(process_parse_report("@ E nosuch\n", 11, NULL, NULL), PROCESS_R_NO_SUCH);
    ck_assert_int_eq(process_parse_report("@ E nopty\n", 10, NULL, NULL), PROCESS_R_NO_PTY);
    ck_assert_int_eq(process_parse_report("@ E what\n", 9, NULL, NULL), PROCESS_R_MALFORMED);
    ck_assert_int_eq(process_parse_report("", 0, NULL, NULL), PROCESS_R_MALFORMED);
    ck_assert_int_eq(process_parse_report("@ OK 1 2\n", 9, NULL, NULL), PROCESS_R_MALFORMED);
    process_status_from("7", &st);
    ck_assert(!strcmp(st.state, "exited") && st.exit_code == 7 && st.signal == 0);
    process_status_from("-", &st);
    ck_assert_str_eq(st.state, "running");
    process_status_from("lost", &st);
    ck_assert_str_eq(st.state, "lost");

    ck_assert_int_eq(process_parse_list(list_out, strlen(list_out), &rows, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(rows[0].command, "npm run dev");
    ck_assert_str_eq(rows[0].status.state, "running");
    ck_assert_int_eq(rows[1].status.exit_code, 0);
    ck_assert_str_eq(rows[2].status.state, "lost");
    ck_assert_int_eq((int64_t)rows[2].started_at, 1796258354);
    free(rows);

    ck_assert_int_eq(process_id_new(0x6b10bb75, id), 0);
    ck_assert(process_id_valid(id));
    ck_assert(strncmp(id, "pr-6b10bb75", 11) == 0);
    ck_assert(!process_id_valid("pr-6b10bb75"));
    ck_assert(!process_signal_valid("SEGV"));
    ck_assert_uint_eq(process_segment_size(65536), PROCESS_SEGMENT_MIN);
    ck_assert_uint_eq(process_segment_size(8u << 20), 1u << 20);
    {
        const char *argv[] = {"a\nb", "c", NULL};
        char *d = process_display(NULL, argv);

        ck_assert_str_eq(d, "a b c");
        free(d);
    }
    ck_assert_int_eq(process_script_kill(id, "TERM", &script), 0);
    ck_assert_ptr_nonnull(strstr(script, id));
    free(script);
    ck_assert_int_eq(process_script_kill(id, "rm -rf /", &script), -EINVAL);
    ck_assert_int_eq(process_script_read("pr-../../x", PROCESS_STDOUT, 0, 1, 0, 65536, &script),
                     -EINVAL);
}
END_TEST

/* The largest start request still fits one exec line. */
START_TEST(test_start_script_fits)
{
    static char cmd[PARAMS_PROCESS_COMMAND_MAX + 1], cwd[PARAMS_PATH_MAX + 1], val[4096 + 8];
    const char *env[] = {val, NULL};
    struct process_start_spec s = {.command = cmd, .cwd = cwd, .env = env, .max_processes = 1};
    char id[PROCESS_ID_LEN + 1], *script;

    memset(cmd, '\'', PARAMS_PROCESS_COMMAND_MAX);
    cwd[0] = '/';
    memset(cwd + 1, '\'', PARAMS_PATH_MAX - 1);
    memcpy(val, "K=", 2);
    memset(val + 2, '\'', 4095);
    ck_assert_int_eq(process_id_new(1, id), 0);
    s.id = id;
    ck_assert_int_eq(process_script_start(&s, &script), 0);
    ck_assert_uint_le(strlen(script), EXEC_COMMAND_MAX);
    ck_assert_ptr_null(strstr(script, "script -q"));
    free(script);

    /* On a terminal too: the vector is quoted once (a here-document), not twice. */
    s.has_stdin = true;
    s.pty_cols = 1000;
    s.pty_rows = 1000;
    ck_assert_int_eq(process_script_start(&s, &script), 0);
    ck_assert_uint_le(strlen(script), EXEC_COMMAND_MAX);
    ck_assert_ptr_nonnull(strstr(script, "stty cols 1000 rows 1000"));
    ck_assert_ptr_nonnull(strstr(script, "@ E nopty"));
    free(script);
    /* A terminal needs stdin (its input), and both sizes. */
    s.has_stdin = false;
    ck_assert_int_eq(process_script_start(&s, &script), -EINVAL);
    s.has_stdin = true;
    s.pty_rows = 0;
    ck_assert_int_eq(process_script_start(&s, &script), -EINVAL);
}
END_TEST

static Suite *params_process_suite(void)
{
    Suite *s = suite_create("params-process");
    TCase *tc = tcase_create("params-process");

    tcase_add_test(tc, test_start);
    tcase_add_test(tc, test_read);
    tcase_add_test(tc, test_write);
    tcase_add_test(tc, test_wait_kill_list);
    tcase_add_test(tc, test_resize);
    tcase_add_test(tc, test_reports);
    tcase_add_test(tc, test_start_script_fits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(params_process_suite());
}
