/* Params of file.list, file.stat, file.remove, file.mkdir, file.rename and file.write's
 * offset/append: defaults, limits, and the parameter each refusal names. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "params-file.h"
#include "params.h"

static json_object *J(const char *s)
{
    json_object *o = json_tokener_parse(s);

    ck_assert_msg(o != NULL, "test JSON does not parse: %s", s);
    return o;
}

/* Parses with the method's params kind; the struct is left in *ret (free with done). */
static int parse(const char *method, const char *params, void *ret, struct params_error *err)
{
    const struct rpc_method_info *mi = rpc_method_find(method);
    json_object *p = J(params);
    int r;

    ck_assert_ptr_nonnull(mi);
    ck_assert(!mi->planned);
    memset(err, 0, sizeof(*err));
    r = mi->params->parse(p, ret, err);
    json_object_put(p);
    return r;
}

static void bad(const char *method, const char *params, const char *param, const char *reason_part)
{
    struct params_file_op op;
    struct params_file_write w;
    struct params_error e;
    void *buf = strcmp(method, "file.write") == 0 ? (void *)&w : (void *)&op;
    int r = parse(method, params, buf, &e);

    ck_assert_msg(r == -EINVAL, "%s %s: accepted", method, params);
    ck_assert_msg(strcmp(e.param, param) == 0, "%s %s: named '%s' (%s), want '%s'", method, params,
                  e.param, e.reason, param);
    if (reason_part)
        ck_assert_msg(strstr(e.reason, reason_part), "%s %s: reason '%s' lacks '%s'", method,
                      params, e.reason, reason_part);
}

START_TEST(test_list_stat)
{
    struct params_file_op p;
    struct params_error e;

    ck_assert_int_eq(parse("file.list", "{\"id\":\"sb-1\",\"path\":\"/root\"}", &p, &e), 0);
    ck_assert_str_eq(p.path, "/root");
    ck_assert_int_eq(p.limit, PARAMS_LIST_LIMIT_MAX);
    params_file_op_done(&p);
    ck_assert_int_eq(parse("file.list", "{\"id\":\"sb-1\",\"path\":\"/\",\"limit\":1}", &p, &e), 0);
    ck_assert_int_eq(p.limit, 1);
    params_file_op_done(&p);
    bad("file.list", "{\"id\":\"sb-1\",\"path\":\"/\",\"limit\":0}", "limit", "between");
    bad("file.list", "{\"id\":\"sb-1\",\"path\":\"/\",\"limit\":10001}", "limit", "between");
    bad("file.list", "{\"id\":\"sb-1\",\"path\":\"/\",\"follow\":true}", "follow", "unknown");
    bad("file.list", "{\"id\":\"sb-1\"}", "path", "missing");
    bad("file.list", "{\"id\":\"sb-1\",\"path\":\"rel\"}", "path", "absolute");
    bad("file.list", "{\"path\":\"/\"}", "id", "missing");

    ck_assert_int_eq(parse("file.stat", "{\"id\":\"sb-1\",\"path\":\"/x\"}", &p, &e), 0);
    ck_assert(!p.follow);
    params_file_op_done(&p);
    ck_assert_int_eq(
        parse("file.stat", "{\"id\":\"sb-1\",\"path\":\"/x\",\"follow\":true}", &p, &e), 0);
    ck_assert(p.follow);
    params_file_op_done(&p);
    bad("file.stat", "{\"id\":\"sb-1\",\"path\":\"/x\",\"follow\":1}", "follow", "boolean");
    bad("file.stat", "{\"id\":\"sb-1\",\"path\":\"/x\\u0000\"}", "path", "NUL");
}
END_TEST

START_TEST(test_remove_mkdir_rename)
{
    struct params_file_op p;
    struct params_error e;

    ck_assert_int_eq(parse("file.remove", "{\"id\":\"sb-1\",\"path\":\"/x\"}", &p, &e), 0);
    ck_assert(!p.recursive);
    params_file_op_done(&p);
    ck_assert_int_eq(
        parse("file.remove", "{\"id\":\"sb-1\",\"path\":\"/x\",\"recursive\":true}", &p, &e), 0);
    ck_assert(p.recursive);
    params_file_op_done(&p);
    bad("file.remove", "{\"id\":\"sb-1\",\"path\":\"/x\",\"recursive\":\"yes\"}", "recursive",
        "boolean");

    ck_assert_int_eq(parse("file.mkdir", "{\"id\":\"sb-1\",\"path\":\"/d\"}", &p, &e), 0);
    ck_assert(!p.parents);
    ck_assert_uint_eq(p.mode, 0755);
    params_file_op_done(&p);
    ck_assert_int_eq(parse("file.mkdir",
                           "{\"id\":\"sb-1\",\"path\":\"/d\",\"parents\":true,\"mode\":\"1700\"}",
                           &p, &e),
                     0);
    ck_assert(p.parents);
    ck_assert_uint_eq(p.mode, 01700);
    params_file_op_done(&p);
    bad("file.mkdir", "{\"id\":\"sb-1\",\"path\":\"/d\",\"mode\":\"0800\"}", "mode", "octal");
    bad("file.mkdir", "{\"id\":\"sb-1\",\"path\":\"/d\",\"mode\":493}", "mode", NULL);

    ck_assert_int_eq(
        parse("file.rename", "{\"id\":\"sb-1\",\"from\":\"/a\",\"to\":\"/b\"}", &p, &e), 0);
    ck_assert_str_eq(p.path, "/a");
    ck_assert_str_eq(p.to, "/b");
    params_file_op_done(&p);
    bad("file.rename", "{\"id\":\"sb-1\",\"from\":\"/a\"}", "to", "missing");
    bad("file.rename", "{\"id\":\"sb-1\",\"to\":\"/a\"}", "from", "missing");
    bad("file.rename", "{\"id\":\"sb-1\",\"from\":\"/a\",\"to\":\"b\"}", "to", "absolute");
    bad("file.rename", "{\"id\":\"sb-1\",\"from\":\"/a\",\"to\":\"/b\",\"path\":\"/c\"}", "path",
        "unknown");
}
END_TEST

START_TEST(test_write_offset_append)
{
    struct params_file_write w;
    struct params_error e;

    ck_assert_int_eq(
        parse("file.write", "{\"id\":\"sb-1\",\"path\":\"/f\",\"content\":\"x\"}", &w, &e), 0);
    ck_assert_int_eq(w.offset, -1);
    ck_assert(!w.append);
    params_file_write_done(&w);
    ck_assert_int_eq(parse("file.write",
                           "{\"id\":\"sb-1\",\"path\":\"/f\",\"content\":\"x\",\"offset\":7}", &w,
                           &e),
                     0);
    ck_assert_int_eq(w.offset, 7);
    params_file_write_done(&w);
    ck_assert_int_eq(parse("file.write",
                           "{\"id\":\"sb-1\",\"path\":\"/f\",\"content\":\"x\",\"append\":true}",
                           &w, &e),
                     0);
    ck_assert(w.append);
    ck_assert_int_eq(w.offset, -1);
    params_file_write_done(&w);
    /* The end may reach 2^53 - 1, not pass it. */
    ck_assert_int_eq(parse("file.write",
                           "{\"id\":\"sb-1\",\"path\":\"/f\",\"content\":\"x\","
                           "\"offset\":9007199254740990}",
                           &w, &e),
                     0);
    params_file_write_done(&w);
    bad("file.write",
        "{\"id\":\"sb-1\",\"path\":\"/f\",\"content\":\"xy\",\"offset\":9007199254740990}",
        "offset", "at most");
    bad("file.write", "{\"id\":\"sb-1\",\"path\":\"/f\",\"content\":\"x\",\"offset\":-1}", "offset",
        "between");
    bad("file.write", "{\"id\":\"sb-1\",\"path\":\"/f\",\"content\":\"x\",\"offset\":1.5}",
        "offset", "integer");
    bad("file.write",
        "{\"id\":\"sb-1\",\"path\":\"/f\",\"content\":\"x\",\"offset\":0,\"append\":true}",
        "append", "offset");
    bad("file.write", "{\"id\":\"sb-1\",\"path\":\"/f\",\"content\":\"x\",\"append\":null}",
        "append", "boolean");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("params-file");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_list_stat);
    tcase_add_test(tc, test_remove_mkdir_rename);
    tcase_add_test(tc, test_write_offset_append);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
