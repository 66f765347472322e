/* proto/params: the params of every method of docs/protocol.md, each error path
 * naming the parameter; the method table; the OpenRPC document agreeing with
 * both. */
#include "b64.h"
#include "openrpc.h"
#include "params.h"
#include "rpc.h"
#include "tests/check-util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uv_loop_t loop;

static void setup(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
}

static void teardown(void)
{
    check_loop_done(&loop);
}

static json_object *J(const char *s)
{
    json_object *o = json_tokener_parse(s);

    ck_assert_msg(o != NULL, "test JSON does not parse: %s", s);
    return o;
}

/* Runs method's generic parser on params (JSON text, or NULL for absent).
 * Returns its result; on success the struct is freed again. */
static int run(const char *method, const char *params, struct params_error *err)
{
    const struct rpc_method_info *mi = rpc_method_find(method);
    json_object *p = params ? J(params) : NULL;
    void *buf;
    int r;

    ck_assert_ptr_nonnull(mi);
    ck_assert_ptr_nonnull(mi->params);
    buf = calloc(1, mi->params->size + 1);
    memset(err, 0, sizeof(*err));
    r = mi->params->parse(p, buf, err);
    if (r == 0 && mi->params->done)
        mi->params->done(buf);
    free(buf);
    json_object_put(p);
    return r;
}

/* Asserts that params are refused naming `param`, with a reason containing
 * `reason_part` (when given). */
static void bad(const char *method, const char *params, const char *param, const char *reason_part)
{
    struct params_error e;
    int r = run(method, params, &e);

    ck_assert_msg(r == -EINVAL, "%s %s: accepted (r=%d)", method, params, r);
    ck_assert_msg(strcmp(e.param, param) == 0, "%s %s: named '%s' (%s), want '%s'", method, params,
                  e.param, e.reason, param);
    ck_assert_msg(e.reason[0] != '\0', "%s %s: no reason", method, params);
    if (reason_part)
        ck_assert_msg(strstr(e.reason, reason_part), "%s %s: reason '%s' lacks '%s'", method,
                      params, e.reason, reason_part);
}

static void good(const char *method, const char *params)
{
    struct params_error e;

    ck_assert_msg(run(method, params, &e) == 0, "%s %s: refused: %s: %s", method, params, e.param,
                  e.reason);
}

START_TEST(test_create)
{
    struct params_sandbox_create c, c2;
    struct params_error e;
    json_object *p;

    /* Everything absent: config defaults stay unset, internet false. */
    ck_assert_int_eq(params_sandbox_create_spec.parse(NULL, &c, &e), 0);
    ck_assert_ptr_null(c.hostname);
    ck_assert_int_eq(c.cores, -1);
    ck_assert_int_eq(c.memory_mb, -1);
    ck_assert_int_eq(c.disk_gb, -1);
    ck_assert_int_eq(c.ttl_s, -1);
    ck_assert(!c.internet);
    ck_assert_uint_eq(c.labels.n, 0);
    ck_assert_ptr_null(c.idempotency_key);
    params_sandbox_create_done(&c);

    p = J("{\"hostname\":\"web-1\",\"cores\":2,\"memory_mb\":1024,\"disk_gb\":16,"
          "\"internet\":true,\"ttl_s\":600,\"labels\":{\"task\":\"t-91\",\"a.b_c-d\":\"\"},"
          "\"idempotency_key\":\"k-1\"}");
    ck_assert_int_eq(params_sandbox_create_spec.parse(p, &c, &e), 0);
    ck_assert_str_eq(c.hostname, "web-1");
    ck_assert_int_eq(c.cores, 2);
    ck_assert_int_eq(c.memory_mb, 1024);
    ck_assert_int_eq(c.disk_gb, 16);
    ck_assert(c.internet);
    ck_assert_int_eq(c.ttl_s, 600);
    ck_assert_uint_eq(c.labels.n, 2);
    ck_assert_str_eq(c.labels.items[0].key, "a.b_c-d"); /* sorted */
    ck_assert_str_eq(c.labels.items[1].key, "task");
    ck_assert_str_eq(c.labels.items[1].value, "t-91");
    ck_assert_str_eq(c.idempotency_key, "k-1");
    ck_assert_int_eq(params_sandbox_create_spec.parse(p, &c2, &e), 0);
    ck_assert(params_sandbox_create_equal(&c, &c2));
    c2.cores = 3;
    ck_assert(!params_sandbox_create_equal(&c, &c2));
    params_sandbox_create_done(&c2);
    params_sandbox_create_done(&c);
    json_object_put(p);

    /* Label order does not matter for idempotency. */
    json_object *p1 = J("{\"labels\":{\"x\":\"1\",\"y\":\"2\"}}"),
                *p2 = J("{\"labels\":{\"y\":\"2\",\"x\":\"1\"}}");
    ck_assert_int_eq(params_sandbox_create_spec.parse(p1, &c, &e), 0);
    ck_assert_int_eq(params_sandbox_create_spec.parse(p2, &c2, &e), 0);
    ck_assert(params_sandbox_create_equal(&c, &c2));
    params_sandbox_create_done(&c);
    params_sandbox_create_done(&c2);
    json_object_put(p1);
    json_object_put(p2);

    good("sandbox.create", "{}");
    good("sandbox.create", "{\"hostname\":\"a\"}");
    good("sandbox.create", "{\"hostname\":\"A0123456789012345678901234567890123456789012345678901"
                           "234567890z\"}"); /* 63 */
    bad("sandbox.create",
        "{\"hostname\":\"A01234567890123456789012345678901234567890123456789012"
        "34567890za\"}",
        "hostname", NULL); /* 64 */
    bad("sandbox.create", "[]", "params", "object");
    bad("sandbox.create", "{\"bogus\":1}", "bogus", "unknown");
    bad("sandbox.create", "{\"hostname\":\"-a\"}", "hostname", "DNS label");
    bad("sandbox.create", "{\"hostname\":\"a-\"}", "hostname", NULL);
    bad("sandbox.create", "{\"hostname\":\"a.b\"}", "hostname", NULL);
    bad("sandbox.create", "{\"hostname\":\"\"}", "hostname", NULL);
    bad("sandbox.create", "{\"hostname\":5}", "hostname", "string");
    bad("sandbox.create", "{\"hostname\":null}", "hostname", "string");
    bad("sandbox.create", "{\"cores\":0}", "cores", "between");
    bad("sandbox.create", "{\"cores\":1.5}", "cores", "integer");
    bad("sandbox.create", "{\"cores\":\"2\"}", "cores", "integer");
    bad("sandbox.create", "{\"cores\":99999999999999999999}", "cores", "between");
    bad("sandbox.create", "{\"memory_mb\":-1}", "memory_mb", NULL);
    bad("sandbox.create", "{\"disk_gb\":0}", "disk_gb", NULL);
    bad("sandbox.create", "{\"internet\":1}", "internet", "boolean");
    /* allow-lists: at create and at set_internet, refused as a whole */
    good("sandbox.create", "{\"internet\":{\"allow\":[\"203.0.113.0/24:443\",\"10.0.0.9/8\"]}}");
    bad("sandbox.create", "{\"internet\":{\"allow\":[]}}", "internet.allow", "at least one");
    bad("sandbox.create", "{\"internet\":{\"allow\":[\"0.0.0.0/0\"]}}", "internet.allow",
        "entry 0");
    bad("sandbox.create", "{\"internet\":{\"allow\":[\"10.0.0.1\",\"10.0.0.1/32\"]}}",
        "internet.allow", "repeats");
    bad("sandbox.create", "{\"internet\":{\"deny\":[\"10.0.0.1\"]}}", "internet", "allow");
    bad("sandbox.create", "{\"internet\":{\"allow\":\"10.0.0.1\"}}", "internet.allow", "array");
    good("sandbox.set_internet", "{\"id\":\"a\",\"enabled\":true,\"allow\":[\"10.0.0.1:22\"]}");
    bad("sandbox.set_internet", "{\"id\":\"a\",\"enabled\":false,\"allow\":[\"10.0.0.1\"]}",
        "allow", "enabled");
    bad("sandbox.set_internet", "{\"id\":\"a\",\"enabled\":true,\"allow\":[\"10.0.0.1:70000\"]}",
        "allow", "entry 0");
    bad("sandbox.create", "{\"ttl_s\":0}", "ttl_s", NULL);
    bad("sandbox.create", "{\"ttl_s\":-5}", "ttl_s", NULL);
    bad("sandbox.create", "{\"labels\":[]}", "labels", "object");
    bad("sandbox.create", "{\"labels\":{\"a\":1}}", "labels", "string");
    bad("sandbox.create", "{\"labels\":{\"\":\"x\"}}", "labels", "key");
    bad("sandbox.create", "{\"labels\":{\"-a\":\"x\"}}", "labels", "key");
    bad("sandbox.create", "{\"labels\":{\"a b\":\"x\"}}", "labels", "key");
    bad("sandbox.create", "{\"labels\":{\"a\":\"x\\ny\"}}", "labels", "control");
    good("sandbox.create", "{\"labels\":{\"a\":\"caf\\u00e9 \\u2603\"}}");

    /* 16 labels fine, 17 not; value 255 fine, 256 not; key 63 fine, 64 not. */
    char buf[4096];
    size_t k = (size_t)snprintf(buf, sizeof(buf), "{\"labels\":{");
    for (int i = 0; i < 17; i++) {
        k += (size_t)snprintf(buf + k, sizeof(buf) - k, "%s\"k%d\":\"v\"", i ? "," : "", i);
        if (i == 15) {
            char tmp[sizeof(buf) + 8];
            snprintf(tmp, sizeof(tmp), "%s}}", buf);
            good("sandbox.create", tmp);
        }
    }
    snprintf(buf + k, sizeof(buf) - k, "}}");
    bad("sandbox.create", buf, "labels", "16");
    char v[300];
    memset(v, 'v', 256);
    v[255] = '\0';
    snprintf(buf, sizeof(buf), "{\"labels\":{\"k\":\"%s\"}}", v);
    good("sandbox.create", buf);
    v[255] = 'v';
    v[256] = '\0';
    snprintf(buf, sizeof(buf), "{\"labels\":{\"k\":\"%s\"}}", v);
    bad("sandbox.create", buf, "labels", "255");
    v[63] = '\0';
    snprintf(buf, sizeof(buf), "{\"labels\":{\"%s\":\"x\"}}", v);
    good("sandbox.create", buf);
    v[63] = 'v';
    v[64] = '\0';
    snprintf(buf, sizeof(buf), "{\"labels\":{\"%s\":\"x\"}}", v);
    bad("sandbox.create", buf, "labels", "key");

    /* idempotency_key: 1..64 printable ASCII. */
    snprintf(buf, sizeof(buf), "{\"idempotency_key\":\"%s\"}", v); /* 64 */
    good("sandbox.create", buf);
    v[64] = 'v';
    v[65] = '\0';
    snprintf(buf, sizeof(buf), "{\"idempotency_key\":\"%s\"}", v);
    bad("sandbox.create", buf, "idempotency_key", "64");
    bad("sandbox.create", "{\"idempotency_key\":\"\"}", "idempotency_key", NULL);
    bad("sandbox.create", "{\"idempotency_key\":\"a b\"}", "idempotency_key", "printable");
    bad("sandbox.create", "{\"idempotency_key\":\"\\u00e9\"}", "idempotency_key", NULL);
}
END_TEST

/* sandbox.create's env: the variables, their limits, idempotency, errors naming the variable. */
START_TEST(test_create_env)
{
    struct params_sandbox_create c, c2;
    struct params_error e;
    json_object *p, *d, *v;
    char buf[8192];
    size_t k;

    p = J("{\"env\":{\"TOKEN\":\"s3cret\",\"A_1\":\"x=y\"}}");
    ck_assert_int_eq(params_sandbox_create_spec.parse(p, &c, &e), 0);
    ck_assert_uint_eq(c.env.n, 2);
    ck_assert_str_eq(c.env.items[0].key, "TOKEN");
    ck_assert_str_eq(c.env.items[0].value, "s3cret");
    json_object_put(p);
    p = J("{\"env\":{\"A_1\":\"x=y\",\"TOKEN\":\"s3cret\"}}");
    ck_assert_int_eq(params_sandbox_create_spec.parse(p, &c2, &e), 0);
    ck_assert(params_sandbox_create_equal(&c, &c2)); /* order does not matter */
    params_sandbox_create_done(&c2);
    json_object_put(p);
    p = J("{\"env\":{\"A_1\":\"x=y\",\"TOKEN\":\"other\"}}");
    ck_assert_int_eq(params_sandbox_create_spec.parse(p, &c2, &e), 0);
    ck_assert(!params_sandbox_create_equal(&c, &c2)); /* values do */
    params_sandbox_create_done(&c2);
    params_sandbox_create_done(&c);
    json_object_put(p);

    bad("sandbox.create", "{\"env\":{\"9X\":\"v\"}}", "env", "variable name \"9X\"");
    bad("sandbox.create", "{\"env\":{\"X\":1}}", "env", "X must be a string");
    bad("sandbox.create", "{\"env\":[]}", "env", "object");
    /* More than 64 variables; more than 4096 bytes (naming the variable, not the value). */
    k = (size_t)snprintf(buf, sizeof buf, "{\"env\":{");
    for (int i = 0; i <= PARAMS_CREATE_ENV_MAX; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s\"V%d\":\"x\"", i ? "," : "", i);
    snprintf(buf + k, sizeof buf - k, "}}");
    bad("sandbox.create", buf, "env", "more than 64 variables");
    k = (size_t)snprintf(buf, sizeof buf, "{\"env\":{\"BIG\":\"");
    memset(buf + k, 'v', PARAMS_CREATE_ENV_BYTES_MAX);
    snprintf(buf + k + PARAMS_CREATE_ENV_BYTES_MAX, sizeof buf - k - PARAMS_CREATE_ENV_BYTES_MAX,
             "\"}}");
    bad("sandbox.create", buf, "env", "4096 bytes in total (at BIG)");
    ck_assert_int_eq(run("sandbox.create", buf, &e), -EINVAL);
    ck_assert_str_eq(e.variable, "BIG");
    ck_assert(e.has_range && e.max == PARAMS_CREATE_ENV_BYTES_MAX);
    ck_assert_ptr_null(strstr(e.reason, "vvvv"));

    /* The error data names the subject. */
    ck_assert_int_eq(run("sandbox.create", "{\"foo\":1}", &e), -EINVAL);
    d = params_error_data(&e);
    ck_assert(json_object_object_get_ex(d, "reason", &v));
    ck_assert_str_eq(json_object_get_string(v), "unknown parameter \"foo\"");
    ck_assert(json_object_object_get_ex(d, "param", &v));
    ck_assert_str_eq(json_object_get_string(v), "foo");
    json_object_put(d);
    ck_assert_int_eq(run("sandbox.renew", "{\"id\":\"a\",\"ttl_s\":0}", &e), -EINVAL);
    d = params_error_data(&e);
    ck_assert(json_object_object_get_ex(d, "reason", &v));
    ck_assert_str_eq(json_object_get_string(v), "ttl_s: must be between 1 and 31622400");
    ck_assert(json_object_object_get_ex(d, "max", &v));
    ck_assert_int_eq(json_object_get_int64(v), PARAMS_TTL_S_MAX);
    ck_assert(json_object_object_get_ex(d, "min", &v));
    ck_assert_int_eq(json_object_get_int64(v), 1);
    json_object_put(d);
    ck_assert_int_eq(run("sandbox.create", "{\"env\":{\"K\":5}}", &e), -EINVAL);
    d = params_error_data(&e);
    ck_assert(json_object_object_get_ex(d, "variable", &v));
    ck_assert_str_eq(json_object_get_string(v), "K");
    json_object_put(d);
}
END_TEST

START_TEST(test_id_methods)
{
    static const char *const methods[] = {
        "sandbox.get",  "sandbox.destroy", "sandbox.renew", "sandbox.set_internet",
        "sandbox.exec", "file.write",      "file.read"};
    struct params_sandbox_id g;
    struct params_error e;
    json_object *p;

    p = J("{\"id\":\"sb-7k2m9x4q\"}");
    ck_assert_int_eq(params_sandbox_id_spec.parse(p, &g, &e), 0);
    ck_assert_str_eq(g.id, "sb-7k2m9x4q");
    json_object_put(p);

    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        const char *m = methods[i];

        bad(m, NULL, "id", "missing");
        bad(m, "{}", "id", "missing");
        bad(m, "{\"id\":7}", "id", "string");
        bad(m, "{\"id\":\"\"}", "id", NULL);
        bad(m, "{\"id\":\"SB-1\"}", "id", "a-z");
        bad(m, "{\"id\":\"sb_1\"}", "id", NULL);
        bad(m, "{\"id\":\"sb\\u00001\"}", "id", "NUL");
        bad(m, "{\"id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
            "id", "64");
        bad(m, "[\"sb-1\"]", "params", "object");
        bad(m, "{\"id\":\"sb-1\",\"extra\":true}", "extra", "unknown");
    }
    good("sandbox.get",
         "{\"id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}");
    good("sandbox.destroy", "{\"id\":\"0-9\"}");
}
END_TEST

START_TEST(test_list_renew_internet)
{
    struct params_sandbox_list l;
    struct params_sandbox_renew rn;
    struct params_sandbox_set_internet si;
    struct params_error e;
    json_object *p;

    ck_assert_int_eq(params_sandbox_list_spec.parse(NULL, &l, &e), 0);
    ck_assert(!l.all);
    ck_assert_uint_eq(l.labels.n, 0);
    params_sandbox_list_done(&l);
    p = J("{\"all\":true,\"labels\":{\"task\":\"t-1\"}}");
    ck_assert_int_eq(params_sandbox_list_spec.parse(p, &l, &e), 0);
    ck_assert(l.all);
    ck_assert_uint_eq(l.labels.n, 1);
    ck_assert_str_eq(l.labels.items[0].value, "t-1");
    params_sandbox_list_done(&l);
    json_object_put(p);
    bad("sandbox.list", "{\"all\":\"yes\"}", "all", "boolean");
    bad("sandbox.list", "{\"labels\":\"task=1\"}", "labels", "object");
    bad("sandbox.list", "{\"owner\":1}", "owner", "unknown");

    p = J("{\"id\":\"sb-1\",\"ttl_s\":3600}");
    ck_assert_int_eq(params_sandbox_renew_spec.parse(p, &rn, &e), 0);
    ck_assert_str_eq(rn.id, "sb-1");
    ck_assert_int_eq(rn.ttl_s, 3600);
    json_object_put(p);
    bad("sandbox.renew", "{\"id\":\"sb-1\"}", "ttl_s", "missing");
    bad("sandbox.renew", "{\"id\":\"sb-1\",\"ttl_s\":0}", "ttl_s", NULL);
    bad("sandbox.renew", "{\"id\":\"sb-1\",\"ttl_s\":\"60\"}", "ttl_s", "integer");
    bad("sandbox.renew", "{\"id\":\"sb-1\",\"ttl_s\":1e3}", "ttl_s", "integer");

    p = J("{\"id\":\"sb-1\",\"enabled\":true}");
    ck_assert_int_eq(params_sandbox_set_internet_spec.parse(p, &si, &e), 0);
    ck_assert(si.enabled);
    json_object_put(p);
    bad("sandbox.set_internet", "{\"id\":\"sb-1\"}", "enabled", "missing");
    bad("sandbox.set_internet", "{\"id\":\"sb-1\",\"enabled\":\"on\"}", "enabled", "boolean");
}
END_TEST

START_TEST(test_templates_and_resize)
{
    struct params_sandbox_create a, b;
    struct params_sandbox_resize rs;
    struct params_error e;
    json_object *p, *q;

    p = J("{\"template\":\"py-3\"}");
    ck_assert_int_eq(params_sandbox_create_spec.parse(p, &a, &e), 0);
    ck_assert_str_eq(a.template, "py-3");
    q = J("{}");
    ck_assert_int_eq(params_sandbox_create_spec.parse(q, &b, &e), 0);
    ck_assert_ptr_null(b.template);
    ck_assert(!params_sandbox_create_equal(&a, &b)); /* the template is part of the params */
    params_sandbox_create_done(&a);
    params_sandbox_create_done(&b);
    json_object_put(p);
    json_object_put(q);
    good("sandbox.create", "{\"template\":\"abcdefghijabcdefghijabcdefghij12\"}");
    bad("sandbox.create", "{\"template\":\"abcdefghijabcdefghijabcdefghij123\"}", "template",
        "longer");
    bad("sandbox.create", "{\"template\":\"Py\"}", "template", "a-z");
    bad("sandbox.create", "{\"template\":\"\"}", "template", "empty");
    bad("sandbox.create", "{\"template\":9000}", "template", "string");

    p = J("{\"id\":\"sb-1\",\"cores\":2,\"disk_gb\":20}");
    ck_assert_int_eq(params_sandbox_resize_spec.parse(p, &rs, &e), 0);
    ck_assert_str_eq(rs.id, "sb-1");
    ck_assert_int_eq(rs.cores, 2);
    ck_assert_int_eq(rs.memory_mb, -1);
    ck_assert_int_eq(rs.disk_gb, 20);
    json_object_put(p);
    good("sandbox.resize", "{\"id\":\"sb-1\",\"memory_mb\":1024}");
    bad("sandbox.resize", "{\"id\":\"sb-1\"}", "params", "at least one");
    bad("sandbox.resize", "{\"cores\":1}", "id", "missing");
    bad("sandbox.resize", "{\"id\":\"sb-1\",\"cores\":0}", "cores", NULL);
    bad("sandbox.resize", "{\"id\":\"sb-1\",\"cores\":1025}", "cores", NULL);
    bad("sandbox.resize", "{\"id\":\"sb-1\",\"memory_mb\":\"1G\"}", "memory_mb", "integer");
    bad("sandbox.resize", "{\"id\":\"sb-1\",\"disk_gb\":65537}", "disk_gb", NULL);
    bad("sandbox.resize", "{\"id\":\"sb-1\",\"cores\":1,\"ttl_s\":5}", "ttl_s", "unknown");
}
END_TEST

START_TEST(test_exec)
{
    struct params_sandbox_exec x;
    struct params_error e;
    json_object *p;

    p = J("{\"id\":\"sb-1\",\"command\":\"echo hi | wc -c\"}");
    ck_assert_int_eq(params_sandbox_exec_spec.parse(p, &x, &e), 0);
    ck_assert_str_eq(x.command, "echo hi | wc -c");
    ck_assert_ptr_null(x.argv);
    ck_assert_ptr_null(x.cwd);
    ck_assert(!x.has_stdin);
    ck_assert_int_eq(x.timeout_ms, 60000);
    ck_assert_int_eq(x.max_output_bytes, 1048576);
    ck_assert(!x.stream);
    params_sandbox_exec_done(&x);
    json_object_put(p);

    p = J("{\"id\":\"sb-1\",\"argv\":[\"printf\",\"%s\",\"a b\",\"\"],\"env\":{\"A_1\":\"x=y\","
          "\"_\":\"\"},\"cwd\":\"/tmp\",\"stdin_b64\":\"AP8=\",\"timeout_ms\":5,"
          "\"max_output_bytes\":0,\"stream\":true}");
    ck_assert_int_eq(params_sandbox_exec_spec.parse(p, &x, &e), 0);
    ck_assert_ptr_null(x.command);
    ck_assert_uint_eq(x.argc, 4);
    ck_assert_str_eq(x.argv[2], "a b");
    ck_assert_str_eq(x.argv[3], "");
    ck_assert_ptr_null(x.argv[4]);
    ck_assert_uint_eq(x.env.n, 2);
    ck_assert_str_eq(x.env.items[0].key, "A_1");
    ck_assert_str_eq(x.env.items[0].value, "x=y");
    ck_assert_str_eq(x.cwd, "/tmp");
    ck_assert(x.has_stdin);
    ck_assert_uint_eq(x.stdin_len, 2);
    ck_assert_int_eq(x.stdin_data[0], 0x00);
    ck_assert_int_eq(x.stdin_data[1], 0xff);
    ck_assert_int_eq(x.timeout_ms, 5);
    ck_assert_int_eq(x.max_output_bytes, 0);
    ck_assert(x.stream);
    params_sandbox_exec_done(&x);
    json_object_put(p);

    p = J("{\"id\":\"sb-1\",\"command\":\"id\",\"user\":\"a.b_c-1\"}");
    ck_assert_int_eq(params_sandbox_exec_spec.parse(p, &x, &e), 0);
    ck_assert_str_eq(x.user, "a.b_c-1");
    params_sandbox_exec_done(&x);
    json_object_put(p);
    p = J("{\"id\":\"sb-1\",\"command\":\"id\",\"user\":2147483647}");
    ck_assert_int_eq(params_sandbox_exec_spec.parse(p, &x, &e), 0);
    ck_assert_str_eq(x.user, "2147483647");
    params_sandbox_exec_done(&x);
    json_object_put(p);

    p = J("{\"id\":\"sb-1\",\"command\":\"cat\",\"stdin\":\"h\\u00e9\\u0000\"}");
    ck_assert_int_eq(params_sandbox_exec_spec.parse(p, &x, &e), 0);
    ck_assert_uint_eq(x.stdin_len, 4);
    ck_assert_mem_eq(x.stdin_data, "h\xc3\xa9\0", 4);
    params_sandbox_exec_done(&x);
    json_object_put(p);

#define X(rest) "{\"id\":\"sb-1\"" rest "}"
    bad("sandbox.exec", X(""), "command", "missing");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"argv\":[\"ls\"]"), "command", "not both");
    bad("sandbox.exec", X(",\"command\":\"\""), "command", "empty");
    bad("sandbox.exec", X(",\"command\":[\"ls\"]"), "command", "string");
    bad("sandbox.exec", X(",\"command\":\"a\\u0000b\""), "command", "NUL");
    bad("sandbox.exec", X(",\"argv\":[]"), "argv", "empty");
    bad("sandbox.exec", X(",\"argv\":\"ls\""), "argv", "array");
    bad("sandbox.exec", X(",\"argv\":[\"ls\",1]"), "argv", "argv[1]");
    bad("sandbox.exec", X(",\"argv\":[\"\"]"), "argv", "argv[0]");
    bad("sandbox.exec", X(",\"argv\":[\"ls\",\"a\\u0000\"]"), "argv", "NUL");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"env\":[]"), "env", "object");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"env\":{\"1A\":\"x\"}"), "env",
        "variable name \"1A\"");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"env\":{\"A-B\":\"x\"}"), "env", "must match");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"env\":{\"A=B\":\"x\"}"), "env", "must match");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"env\":{\"A\":1}"), "env", "string");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"env\":{\"A\":\"\\u0000\"}"), "env", "NUL");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"cwd\":\"tmp\""), "cwd", "absolute");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"cwd\":\"\""), "cwd", NULL);
    bad("sandbox.exec", X(",\"command\":\"ls\",\"cwd\":\"/a\\u0000\""), "cwd", "NUL");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"stdin\":\"a\",\"stdin_b64\":\"YQ==\""), "stdin",
        "only one");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"stdin\":5"), "stdin", "string");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"user\":\"-r\""), "user", "name");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"user\":\"a b\""), "user", "name");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"user\":\"\""), "user", "name");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"user\":\"a;b\""), "user", "name");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"user\":\"abcdefghijabcdefghijabcdefghijabc\""),
        "user", "name");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"user\":2147483648"), "user", "uid");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"user\":\"99999999999\""), "user", "uid");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"user\":-1"), "user", "uid");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"user\":true"), "user", "name or a uid");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"stdin_b64\":\"YQ\""), "stdin_b64", "base64");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"stdin_b64\":\"Y Q==\""), "stdin_b64", "base64");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"timeout_ms\":0"), "timeout_ms", NULL);
    bad("sandbox.exec", X(",\"command\":\"ls\",\"timeout_ms\":86400001"), "timeout_ms", NULL);
    good("sandbox.exec", X(",\"command\":\"ls\",\"timeout_ms\":86400000"));
    bad("sandbox.exec", X(",\"command\":\"ls\",\"max_output_bytes\":-1"), "max_output_bytes", NULL);
    bad("sandbox.exec", X(",\"command\":\"ls\",\"max_output_bytes\":16777217"), "max_output_bytes",
        NULL);
    good("sandbox.exec", X(",\"command\":\"ls\",\"max_output_bytes\":16777216"));
    bad("sandbox.exec", X(",\"command\":\"ls\",\"stream\":0"), "stream", "boolean");
    bad("sandbox.exec", X(",\"command\":\"ls\",\"shell\":\"/bin/bash\""), "shell", "unknown");
#undef X

    /* Count and size caps of argv, env and command. */
    size_t cap = PARAMS_COMMAND_MAX + 300 * 1024;
    char *buf = malloc(cap), *big = malloc(cap);
    size_t k;

    k = (size_t)snprintf(buf, cap, "{\"id\":\"s\",\"argv\":[");
    for (int i = 0; i <= PARAMS_ARGV_MAX; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s\"a\"", i ? "," : "");
    snprintf(buf + k, cap - k, "]}");
    bad("sandbox.exec", buf, "argv", "4096");
    memset(big, 'a', PARAMS_ARGV_BYTES_MAX);
    big[PARAMS_ARGV_BYTES_MAX - 1] = '\0'; /* with its terminator: exactly the cap */
    snprintf(buf, cap, "{\"id\":\"s\",\"argv\":[\"%s\"]}", big);
    good("sandbox.exec", buf);
    snprintf(buf, cap, "{\"id\":\"s\",\"argv\":[\"%s\",\"\"]}", big);
    bad("sandbox.exec", buf, "argv", "total");
    memset(big, 'a', PARAMS_COMMAND_MAX + 1);
    big[PARAMS_COMMAND_MAX] = '\0';
    snprintf(buf, cap, "{\"id\":\"s\",\"command\":\"%s\"}", big);
    good("sandbox.exec", buf);
    big[PARAMS_COMMAND_MAX] = 'a';
    big[PARAMS_COMMAND_MAX + 1] = '\0';
    snprintf(buf, cap, "{\"id\":\"s\",\"command\":\"%s\"}", big);
    bad("sandbox.exec", buf, "command", "longer");
    k = (size_t)snprintf(buf, cap, "{\"id\":\"s\",\"command\":\"x\",\"env\":{");
    for (int i = 0; i <= PARAMS_ENV_MAX; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s\"V%d\":\"\"", i ? "," : "", i);
    snprintf(buf + k, cap - k, "}}");
    bad("sandbox.exec", buf, "env", "256");
    memset(big, 'a', PARAMS_ENV_BYTES_MAX);
    big[PARAMS_ENV_BYTES_MAX] = '\0';
    snprintf(buf, cap, "{\"id\":\"s\",\"command\":\"x\",\"env\":{\"A\":\"%s\"}}", big);
    bad("sandbox.exec", buf, "env", "total");
    free(buf);
    free(big);
}
END_TEST

START_TEST(test_file)
{
    struct params_file_write w;
    struct params_file_read rd;
    struct params_error e;
    json_object *p;

    p = J("{\"id\":\"sb-1\",\"path\":\"/etc/motd\",\"content\":\"hello\\n\"}");
    ck_assert_int_eq(params_file_write_spec.parse(p, &w, &e), 0);
    ck_assert_str_eq(w.path, "/etc/motd");
    ck_assert_uint_eq(w.content_len, 6);
    ck_assert_str_eq((char *)w.content, "hello\n");
    ck_assert_uint_eq(w.mode, 0644);
    ck_assert(w.make_parents);
    params_file_write_done(&w);
    json_object_put(p);

    p = J("{\"id\":\"sb-1\",\"path\":\"/x\",\"content_b64\":\"\",\"mode\":\"4755\","
          "\"make_parents\":false}");
    ck_assert_int_eq(params_file_write_spec.parse(p, &w, &e), 0);
    ck_assert_uint_eq(w.content_len, 0);
    ck_assert_ptr_nonnull(w.content);
    ck_assert_uint_eq(w.mode, 04755);
    ck_assert(!w.make_parents);
    params_file_write_done(&w);
    json_object_put(p);

#define W(rest) "{\"id\":\"sb-1\",\"path\":\"/f\"" rest "}"
    bad("file.write", "{\"id\":\"sb-1\",\"content\":\"x\"}", "path", "missing");
    bad("file.write", "{\"id\":\"sb-1\",\"path\":\"f\",\"content\":\"x\"}", "path", "absolute");
    bad("file.write", "{\"id\":\"sb-1\",\"path\":7,\"content\":\"x\"}", "path", "string");
    bad("file.write", W(""), "content", "missing");
    bad("file.write", W(",\"content\":\"x\",\"content_b64\":\"eA==\""), "content", "only one");
    bad("file.write", W(",\"content_b64\":\"eA=\""), "content_b64", "base64");
    bad("file.write", W(",\"content_b64\":\"eA==\\n\""), "content_b64", "base64");
    bad("file.write", W(",\"content_b64\":true"), "content_b64", "string");
    bad("file.write", W(",\"content\":\"x\",\"mode\":644"), "mode", "octal");
    bad("file.write", W(",\"content\":\"x\",\"mode\":\"0648\""), "mode", "octal");
    bad("file.write", W(",\"content\":\"x\",\"mode\":\"64\""), "mode", "octal");
    bad("file.write", W(",\"content\":\"x\",\"mode\":\"010000\""), "mode", NULL);
    bad("file.write", W(",\"content\":\"x\",\"mode\":\"17777\""), "mode", "07777");
    good("file.write", W(",\"content\":\"x\",\"mode\":\"07777\""));
    good("file.write", W(",\"content\":\"x\",\"mode\":\"600\""));
    bad("file.write", W(",\"content\":\"x\",\"make_parents\":\"no\""), "make_parents", "boolean");
    bad("file.write", W(",\"content\":\"x\",\"owner\":0"), "owner", "unknown");
#undef W

    /* A path of PARAMS_PATH_MAX bytes is fine, one more is not. */
    char *path = malloc(PARAMS_PATH_MAX + 2), *buf = malloc(PARAMS_PATH_MAX + 100);
    memset(path, 'p', PARAMS_PATH_MAX + 1);
    path[0] = '/';
    path[PARAMS_PATH_MAX] = '\0';
    snprintf(buf, PARAMS_PATH_MAX + 100, "{\"id\":\"s\",\"path\":\"%s\"}", path);
    good("file.read", buf);
    path[PARAMS_PATH_MAX] = 'p';
    path[PARAMS_PATH_MAX + 1] = '\0';
    snprintf(buf, PARAMS_PATH_MAX + 100, "{\"id\":\"s\",\"path\":\"%s\"}", path);
    bad("file.read", buf, "path", "longer");
    free(path);
    free(buf);

    p = J("{\"id\":\"sb-1\",\"path\":\"/var/log/x\"}");
    ck_assert_int_eq(params_file_read_spec.parse(p, &rd, &e), 0);
    ck_assert_int_eq(rd.offset, 0);
    ck_assert_int_eq(rd.length, 8 * 1024 * 1024);
    params_file_read_done(&rd);
    json_object_put(p);
    p = J("{\"id\":\"sb-1\",\"path\":\"/x\",\"offset\":9000000000,\"length\":0}");
    ck_assert_int_eq(params_file_read_spec.parse(p, &rd, &e), 0);
    ck_assert_int_eq(rd.offset, 9000000000LL);
    ck_assert_int_eq(rd.length, 0);
    params_file_read_done(&rd);
    json_object_put(p);
    bad("file.read", "{\"id\":\"sb-1\"}", "path", "missing");
    bad("file.read", "{\"id\":\"sb-1\",\"path\":\"/x\",\"offset\":-1}", "offset", NULL);
    bad("file.read", "{\"id\":\"sb-1\",\"path\":\"/x\",\"offset\":1.5}", "offset", "integer");
    bad("file.read", "{\"id\":\"sb-1\",\"path\":\"/x\",\"length\":-1}", "length", NULL);
    bad("file.read", "{\"id\":\"sb-1\",\"path\":\"/x\",\"length\":8388609}", "length", NULL);
    good("file.read", "{\"id\":\"sb-1\",\"path\":\"/x\",\"length\":8388608}");
    bad("file.read", "{\"id\":\"sb-1\",\"path\":\"/x\",\"content\":\"\"}", "content", "unknown");
}
END_TEST

/* Every string param refuses an embedded NUL (U+0000) with -32602 naming it,
 * instead of being cut there. Data params (stdin, content) are bytes and keep it. */
START_TEST(test_nul_in_strings)
{
    static const struct {
        const char *method, *params, *param;
    } cases[] = {
        {"sandbox.create", "{\"hostname\":\"a\\u0000b\"}", "hostname"},
        {"sandbox.create", "{\"idempotency_key\":\"k\\u0000\"}", "idempotency_key"},
        {"sandbox.create", "{\"labels\":{\"k\":\"v\\u0000w\"}}", "labels"},
        {"sandbox.get", "{\"id\":\"sb-1\\u0000x\"}", "id"},
        {"sandbox.destroy", "{\"id\":\"\\u0000\"}", "id"},
        {"sandbox.renew", "{\"id\":\"sb\\u0000\",\"ttl_s\":5}", "id"},
        {"sandbox.set_internet", "{\"id\":\"sb\\u0000\",\"enabled\":true}", "id"},
        {"sandbox.list", "{\"labels\":{\"k\":\"\\u0000\"}}", "labels"},
        {"sandbox.exec", "{\"id\":\"sb-1\",\"command\":\"ls\\u0000 -la\"}", "command"},
        {"sandbox.exec", "{\"id\":\"sb-1\",\"argv\":[\"ls\",\"-l\\u0000a\"]}", "argv"},
        {"sandbox.exec", "{\"id\":\"sb-1\",\"command\":\"ls\",\"env\":{\"A\":\"b\\u0000\"}}",
         "env"},
        {"sandbox.exec", "{\"id\":\"sb-1\",\"command\":\"ls\",\"cwd\":\"/tmp\\u0000/x\"}", "cwd"},
        {"file.write", "{\"id\":\"sb-1\",\"path\":\"/etc/x\\u0000y\",\"content\":\"\"}", "path"},
        {"file.write", "{\"id\":\"sb-1\",\"path\":\"/x\",\"content\":\"\",\"mode\":\"06\\u00004\"}",
         "mode"},
        {"file.read", "{\"id\":\"sb-1\",\"path\":\"/etc/passwd\\u0000.txt\"}", "path"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bad(cases[i].method, cases[i].params, cases[i].param, NULL);
    good("sandbox.exec", "{\"id\":\"sb-1\",\"command\":\"cat\",\"stdin\":\"a\\u0000b\"}");
    good("file.write", "{\"id\":\"sb-1\",\"path\":\"/x\",\"content\":\"a\\u0000b\"}");
}
END_TEST

START_TEST(test_no_params)
{
    static const char *const methods[] = {"daemon.status", "rpc.discover", "daemon.metrics",
                                          "daemon.subscribe"};

    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        good(methods[i], NULL);
        good(methods[i], "{}");
        good(methods[i], "[]");
        bad(methods[i], "{\"verbose\":true}", "verbose", "unknown");
        bad(methods[i], "[1]", "params", "no parameters");
    }
}
END_TEST

/* Every params kind's parse() leaves its struct zeroed on an error, having released what it
 * took before the error (the leak checker sees the rest): refusals that come after strings,
 * lists and data were copied. */
START_TEST(test_refusal_leaves_zeroes)
{
    static const struct {
        const char *method, *params, *param;
    } cases[] = {
        {"sandbox.create",
         "{\"hostname\":\"h\",\"template\":\"t\",\"node\":\"n\",\"idempotency_key\":\"k\","
         "\"labels\":{\"a\":\"1\"},\"cores\":0}",
         "cores"},
        {"sandbox.list", "{\"labels\":{\"a\":\"1\",\"b\":\"\\u0001\"}}", "labels"},
        {"sandbox.exec",
         "{\"id\":\"sb-1\",\"argv\":[\"a\",\"b\"],\"env\":{\"A\":\"1\"},\"cwd\":\"/\","
         "\"stdin\":\"x\",\"stdin_fd\":0}",
         "stdin_fd"},
        {"sandbox.exec", "{\"id\":\"sb-1\",\"command\":\"x\",\"env\":{\"A\":1}}", "env"},
        {"file.write", "{\"id\":\"sb-1\",\"path\":\"/f\",\"content\":\"x\",\"content_fd\":0}",
         "content_fd"},
        {"file.read", "{\"id\":\"sb-1\",\"path\":\"f\"}", "path"},
        {"file.rename", "{\"id\":\"sb-1\",\"from\":\"/a\",\"to\":\"b\"}", "to"},
        {"process.start", "{\"id\":\"sb-1\",\"argv\":[\"a\"],\"stdin\":false,\"stdin_fd\":0}",
         "stdin_fd"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct rpc_method_info *mi = rpc_method_find(cases[i].method);
        json_object *p = J(cases[i].params);
        struct params_error e = {};
        unsigned char *buf;
        int r;

        ck_assert_ptr_nonnull(mi);
        buf = malloc(mi->params->size);
        ck_assert_ptr_nonnull(buf);
        memset(buf, 0xa5, mi->params->size);
        r = mi->params->parse(p, buf, &e);
        ck_assert_msg(r == -EINVAL, "%s %s: %d", cases[i].method, cases[i].params, r);
        ck_assert_str_eq(e.param, cases[i].param);
        for (size_t k = 0; k < mi->params->size; k++)
            ck_assert_msg(buf[k] == 0, "%s: byte %zu left %#x", cases[i].method, k, buf[k]);
        free(buf);
        json_object_put(p);
    }
}
END_TEST

START_TEST(test_method_table)
{
    static const char *const protocol[] = {"sandbox.create",
                                           "sandbox.get",
                                           "sandbox.list",
                                           "sandbox.renew",
                                           "sandbox.set_internet",
                                           "sandbox.destroy",
                                           "sandbox.exec",
                                           "file.write",
                                           "file.read",
                                           "daemon.status",
                                           "rpc.discover",
                                           "daemon.metrics",
                                           "daemon.subscribe",
                                           "file.list",
                                           "file.stat",
                                           "file.remove",
                                           "file.mkdir",
                                           "file.rename",
                                           "sandbox.resize",
                                           "process.start",
                                           "process.read",
                                           "process.write",
                                           "process.wait",
                                           "process.kill",
                                           "process.list",
                                           "process.resize",
                                           "sandbox.snapshot",
                                           "sandbox.snapshots",
                                           "sandbox.rollback",
                                           "sandbox.snapshot_delete",
                                           "sandbox.fork",
                                           "template.create",
                                           "template.list",
                                           "template.delete",
                                           "template.publish",
                                           "sandbox.pause",
                                           "sandbox.resume",
                                           "sandbox.preview",
                                           "sandbox.previews",
                                           "sandbox.unpreview",
                                           "volume.create",
                                           "volume.list",
                                           "volume.delete",
                                           "sandbox.attach",
                                           "sandbox.detach"};
    const struct rpc_method_info *all;
    size_t n;

    for (size_t i = 0; i < sizeof(protocol) / sizeof(protocol[0]); i++) {
        const struct rpc_method_info *mi = rpc_method_find(protocol[i]);

        ck_assert_ptr_nonnull(mi);
        ck_assert_str_eq(mi->name, protocol[i]);
        ck_assert(!mi->planned);
        ck_assert_ptr_nonnull(mi->params);
    }
    ck_assert_ptr_null(rpc_method_find("foobar"));
    ck_assert_ptr_null(rpc_method_find("sandbox.Create"));
    ck_assert_ptr_null(rpc_method_find(""));
    ck_assert_ptr_null(rpc_method_find(NULL));
    all = rpc_methods(&n);
    ck_assert_uint_eq(n, 48);
    for (size_t i = 0; i < n; i++)
        ck_assert(!all[i].planned && all[i].params);
    ck_assert_str_eq(all[0].name, "sandbox.create");
}
END_TEST

START_TEST(test_fork_params)
{
    good("sandbox.fork", "{\"id\":\"sb-1\"}");
    good("sandbox.fork", "{\"id\":\"sb-1\",\"count\":32,\"snapshot\":\"s1\",\"ttl_s\":60}");
    bad("sandbox.fork", "{}", "id", NULL);
    bad("sandbox.fork", "{\"id\":\"sb-1\",\"count\":0}", "count", NULL);
    bad("sandbox.fork", "{\"id\":\"sb-1\",\"count\":33}", "count", NULL);
    bad("sandbox.fork", "{\"id\":\"sb-1\",\"count\":\"8\"}", "count", NULL);
    bad("sandbox.fork", "{\"id\":\"sb-1\",\"snapshot\":\"1a\"}", "snapshot", "letter");
    bad("sandbox.fork", "{\"id\":\"sb-1\",\"snapshot\":\"current\"}", "snapshot", NULL);
    bad("sandbox.fork", "{\"id\":\"sb-1\",\"snapshot\":7}", "snapshot", "string");
    bad("sandbox.fork", "{\"id\":\"sb-1\",\"ttl_s\":0}", "ttl_s", NULL);
    bad("sandbox.fork", "{\"id\":\"sb-1\",\"name\":\"s1\"}", "name", "unknown");
}
END_TEST

START_TEST(test_openrpc_document)
{
    const char *doc = openrpc_document();
    json_object *o, *methods, *v;
    const struct rpc_method_info *all;
    size_t n;

    ck_assert_uint_eq(strlen(doc), openrpc_document_len());
    ck_assert_ptr_null(strchr(doc, '\n')); /* compact: fits in one result line */
    o = json_tokener_parse(doc);
    ck_assert_ptr_nonnull(o);
    ck_assert(json_object_object_get_ex(o, "openrpc", &v));
    ck_assert_str_eq(json_object_get_string(v), "1.2.6");
    ck_assert(json_object_object_get_ex(o, "methods", &methods));

    /* Every specified method is described, with exactly the params the
     * parser accepts (an unknown name would be refused). */
    all = rpc_methods(&n);
    size_t described = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *m = NULL;

        for (size_t j = 0; j < json_object_array_length(methods); j++) {
            json_object *cand = json_object_array_get_idx(methods, j), *name;

            json_object_object_get_ex(cand, "name", &name);
            if (strcmp(json_object_get_string(name), all[i].name) == 0)
                m = cand;
        }
        if (all[i].planned) {
            ck_assert_msg(m == NULL, "%s is planned but described", all[i].name);
            continue;
        }
        ck_assert_msg(m != NULL, "%s missing from the OpenRPC document", all[i].name);
        described++;

        json_object *params, *plist = json_object_new_object();
        ck_assert(json_object_object_get_ex(m, "params", &params));
        ck_assert(json_object_object_get_ex(m, "result", NULL));
        for (size_t j = 0; j < json_object_array_length(params); j++) {
            json_object *pd = json_object_array_get_idx(params, j), *name, *schema;
            struct params_error e;
            void *buf = calloc(1, all[i].params->size + 1);
            int r;

            ck_assert(json_object_object_get_ex(pd, "name", &name));
            ck_assert(json_object_object_get_ex(pd, "schema", &schema));
            /* Passing only this param must never be "unknown parameter". */
            json_object_object_add(plist, json_object_get_string(name), json_object_new_int(0));
            json_object *one = json_object_new_object();
            json_object_object_add(one, json_object_get_string(name), json_object_new_int(0));
            r = all[i].params->parse(one, buf, &e);
            if (r == 0 && all[i].params->done)
                all[i].params->done(buf);
            ck_assert_msg(r == 0 || strcmp(e.reason, "unknown parameter") != 0,
                          "%s: documented param %s unknown to the parser", all[i].name, e.param);
            json_object_put(one);
            free(buf);
        }
        json_object_put(plist);
    }
    ck_assert_uint_eq(described, json_object_array_length(methods));

    /* The error table lists every code of docs/protocol.md with our message. */
    json_object *comp, *errors;
    static const int codes[] = {-32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003,
                                -32004, -32005, -32006, -32007, -32008, -32009, -32010, -32011};
    ck_assert(json_object_object_get_ex(o, "components", &comp));
    ck_assert(json_object_object_get_ex(comp, "errors", &errors));
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        bool found = false;

        json_object_object_foreach(errors, key, e)
        {
            json_object *c, *msg;

            (void)key;
            json_object_object_get_ex(e, "code", &c);
            json_object_object_get_ex(e, "message", &msg);
            if (json_object_get_int(c) == codes[i]) {
                found = true;
                ck_assert_str_eq(json_object_get_string(msg), rpc_code_message(codes[i]));
            }
        }
        ck_assert_msg(found, "code %d missing", codes[i]);
    }
    json_object_put(o);
}
END_TEST

static Suite *params_suite(void)
{
    Suite *s = suite_create("params");
    TCase *tc = tcase_create("params");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_create);
    tcase_add_test(tc, test_create_env);
    tcase_add_test(tc, test_id_methods);
    tcase_add_test(tc, test_list_renew_internet);
    tcase_add_test(tc, test_templates_and_resize);
    tcase_add_test(tc, test_exec);
    tcase_add_test(tc, test_file);
    tcase_add_test(tc, test_nul_in_strings);
    tcase_add_test(tc, test_no_params);
    tcase_add_test(tc, test_refusal_leaves_zeroes);
    tcase_add_test(tc, test_method_table);
    tcase_add_test(tc, test_openrpc_document);
    tcase_add_test(tc, test_fork_params);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(params_suite());
}
