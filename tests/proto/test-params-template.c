/* proto/params-template: template.create's defaults (env, cwd, user): what is kept, the limits
 * (PARAMS_TEMPLATE_ENV_MAX, PARAMS_TEMPLATE_DEFAULTS_BYTES_MAX) at and past their edge, each
 * error naming its member, and nothing leaked on any path. */
#include "params-template.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* template.create {id, name, defaults} parsed: 0 with *ret_defaults (a new reference), or the
 * error's param in ret_param. */
static int parse(const char *defaults, json_object **ret_defaults, char *ret_param)
{
    char text[16384];
    json_object *p;
    struct params_template_create c;
    struct params_error e = {};
    int r;

    snprintf(text, sizeof text, "{\"id\": \"sb-1\", \"name\": \"t\"%s%s}",
             defaults ? ", \"defaults\": " : "", defaults ? defaults : "");
    p = json_tokener_parse(text);
    ck_assert_ptr_nonnull(p);
    r = params_template_create_spec.parse(p, &c, &e);
    json_object_put(p);
    if (r == 0) {
        *ret_defaults = json_object_get(c.defaults);
        params_template_create_spec.done(&c);
    } else
        strcpy(ret_param, e.param);
    return r;
}

START_TEST(test_kept)
{
    json_object *d = NULL;
    char param[64] = "";

    ck_assert_int_eq(parse(NULL, &d, param), 0);
    ck_assert_str_eq(
        json_object_to_json_string_ext(d, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
        "{}");
    json_object_put(d);
    ck_assert_int_eq(parse("{\"env\": {\"A\": \"1\"}, \"cwd\": \"/w\", \"user\": 1000}", &d, param),
                     0);
    ck_assert_str_eq(
        json_object_to_json_string_ext(d, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
        "{\"env\":{\"A\":\"1\"},\"cwd\":\"/w\",\"user\":\"1000\"}");
    json_object_put(d);
}
END_TEST

static const struct {
    const char *defaults, *param;
} bad[] = {
    {"[]", "defaults"},
    {"{\"shell\": \"/bin/sh\"}", "defaults.shell"},
    {"{\"cwd\": \"rel\"}", "defaults.cwd"},
    {"{\"cwd\": 1}", "defaults.cwd"},
    {"{\"user\": \"-x\"}", "defaults.user"},
    {"{\"user\": -1}", "defaults.user"},
    {"{\"env\": {\"1A\": \"x\"}}", "defaults.env"},
    {"{\"env\": {\"A\": 1}}", "defaults.env"},
    {"{\"env\": []}", "defaults.env"},
};

START_TEST(test_refused)
{
    json_object *d = NULL;
    char param[64] = "";

    ck_assert_int_eq(parse(bad[_i].defaults, &d, param), -EINVAL);
    ck_assert_msg(strcmp(param, bad[_i].param) == 0, "%s: %s", bad[_i].defaults, param);
}
END_TEST

/* An env of n variables of `each` bytes (name + value), and a cwd of cwd_len bytes. */
static char *sized(int n, int each, int cwd_len)
{
    char *s = malloc(16384), *at = s;

    at += sprintf(at, "{\"env\": {");
    for (int i = 0; i < n; i++)
        at += sprintf(at, "%s\"V%03d\": \"%0*d\"", i ? ", " : "", i, each - 4, 0);
    at += sprintf(at, "}, \"cwd\": \"/%0*d\"}", cwd_len - 1, 0);
    return s;
}

START_TEST(test_limits)
{
    json_object *d = NULL;
    char param[64] = "", *s;

    /* 64 variables of 60 bytes (3840) and a cwd of 256: 4096 in all */
    s = sized(PARAMS_TEMPLATE_ENV_MAX, 60, 256);
    ck_assert_int_eq(parse(s, &d, param), 0);
    json_object_put(d);
    free(s);
    s = sized(PARAMS_TEMPLATE_ENV_MAX, 60, 257);
    ck_assert_int_eq(parse(s, &d, param), -EINVAL);
    ck_assert_str_eq(param, "defaults");
    free(s);
    s = sized(PARAMS_TEMPLATE_ENV_MAX + 1, 8, 8);
    ck_assert_int_eq(parse(s, &d, param), -EINVAL);
    ck_assert_str_eq(param, "defaults.env");
    free(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("params-template");
    TCase *tc = tcase_create("defaults");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_kept);
    tcase_add_loop_test(tc, test_refused, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, test_limits);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
