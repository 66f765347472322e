/* proto/rpc: JSON-RPC 2.0 parsing and responses, checked against every example
 * of section 7 of the JSON-RPC 2.0 specification, plus the hostile inputs
 * docs/protocol.md promises to answer (deep nesting, invalid UTF-8, oversize). */
#include "b64.h"
#include "frame.h"
#include "macro.h"
#include "rpc.h"
#include "tests/check-util.h"

#include <errno.h>
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

/* ---- a toy dispatcher with the specification's example methods ---------- */

static json_object *toy_result(const struct rpc_call *c, int *ret_code)
{
    json_object *p = c->params;

    *ret_code = 0;
    if (strcmp(c->method, "subtract") == 0) {
        json_object *a, *b;

        if (json_object_is_type(p, json_type_array)) {
            a = json_object_array_get_idx(p, 0);
            b = json_object_array_get_idx(p, 1);
        } else {
            json_object_object_get_ex(p, "minuend", &a);
            json_object_object_get_ex(p, "subtrahend", &b);
        }
        return json_object_new_int64(json_object_get_int64(a) - json_object_get_int64(b));
    }
    if (strcmp(c->method, "sum") == 0 || strcmp(c->method, "notify_sum") == 0) {
        int64_t s = 0;

        for (size_t i = 0; i < json_object_array_length(p); i++)
            s += json_object_get_int64(json_object_array_get_idx(p, i));
        return json_object_new_int64(s);
    }
    if (strcmp(c->method, "get_data") == 0) {
        json_object *a = json_object_new_array();

        json_object_array_add(a, json_object_new_string("hello"));
        json_object_array_add(a, json_object_new_int(5));
        return a;
    }
    if (strcmp(c->method, "update") == 0 || strcmp(c->method, "notify_hello") == 0)
        return NULL;
    *ret_code = RPC_METHOD_NOT_FOUND;
    return NULL;
}

static json_object *toy_call(const struct rpc_call *c)
{
    json_object *res;
    int code;

    if (c->error)
        return json_object_get(c->error);
    ck_assert_ptr_nonnull(c->method);
    res = toy_result(c, &code);
    if (c->notification) {
        json_object_put(res);
        return NULL;
    }
    if (code)
        return rpc_error_new(c->id, code, NULL, NULL);
    return rpc_result_new(c->id, res);
}

/* What the server would write for one line: the response text without its
 * '\n', or NULL when nothing is sent. */
static char *toy_serve(const char *line)
{
    struct rpc_message m;
    json_object *reply = NULL;
    char *out = NULL;

    ck_assert_int_eq(rpc_parse(line, strlen(line), &m), 0);
    if (m.error) {
        ck_assert_uint_eq(m.n_calls, 0);
        reply = json_object_get(m.error);
    } else if (m.batch) {
        reply = json_object_new_array();
        for (size_t i = 0; i < m.n_calls; i++) {
            json_object *r = toy_call(&m.calls[i]);
            if (r)
                json_object_array_add(reply, r);
        }
        if (json_object_array_length(reply) == 0) {
            json_object_put(reply);
            reply = NULL;
        }
    } else {
        ck_assert_uint_eq(m.n_calls, 1);
        reply = toy_call(&m.calls[0]);
    }
    if (reply) {
        size_t n;

        out = rpc_to_line(reply, &n);
        ck_assert_ptr_nonnull(out);
        ck_assert_uint_eq(strlen(out), n);
        ck_assert_int_eq(out[n - 1], '\n');
        ck_assert_ptr_null(memchr(out, '\n', n - 1));
        out[n - 1] = '\0';
        json_object_put(reply);
    }
    rpc_message_done(&m);
    return out;
}

/* Drops error.data (sandboxd adds a reason; the specification's examples have
 * none) so responses compare with the examples exactly otherwise. */
static void strip_data(json_object *o)
{
    json_object *e;

    if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++)
            strip_data(json_object_array_get_idx(o, i));
        return;
    }
    if (json_object_object_get_ex(o, "error", &e)) {
        json_object *d;

        if (json_object_object_get_ex(e, "data", &d)) {
            ck_assert(json_object_is_type(d, json_type_object));
            ck_assert(json_object_object_get_ex(d, "reason", NULL));
            json_object_object_del(e, "data");
        }
    }
}

static void expect(const char *request, const char *response)
{
    char *got = toy_serve(request);

    if (!response) {
        ck_assert_msg(got == NULL, "%s: expected no reply, got %s", request, got);
        return;
    }
    ck_assert_msg(got != NULL, "%s: expected a reply", request);
    json_object *g = json_tokener_parse(got), *e = json_tokener_parse(response);
    ck_assert_ptr_nonnull(g);
    ck_assert_ptr_nonnull(e);
    strip_data(g);
    ck_assert_msg(json_object_equal(g, e), "%s:\n got %s\nwant %s", request, got, response);
    json_object_put(g);
    json_object_put(e);
    free(got);
}

/* ---- section 7 ---------------------------------------------------------- */

START_TEST(test_spec_positional)
{
    expect("{\"jsonrpc\": \"2.0\", \"method\": \"subtract\", \"params\": [42, 23], \"id\": 1}",
           "{\"jsonrpc\": \"2.0\", \"result\": 19, \"id\": 1}");
    expect("{\"jsonrpc\": \"2.0\", \"method\": \"subtract\", \"params\": [23, 42], \"id\": 2}",
           "{\"jsonrpc\": \"2.0\", \"result\": -19, \"id\": 2}");
}
END_TEST

START_TEST(test_spec_named)
{
    expect("{\"jsonrpc\": \"2.0\", \"method\": \"subtract\", \"params\": {\"subtrahend\": 23, "
           "\"minuend\": 42}, \"id\": 3}",
           "{\"jsonrpc\": \"2.0\", \"result\": 19, \"id\": 3}");
    expect("{\"jsonrpc\": \"2.0\", \"method\": \"subtract\", \"params\": {\"minuend\": 42, "
           "\"subtrahend\": 23}, \"id\": 4}",
           "{\"jsonrpc\": \"2.0\", \"result\": 19, \"id\": 4}");
}
END_TEST

START_TEST(test_spec_notification)
{
    struct rpc_message m;
    const char *l = "{\"jsonrpc\": \"2.0\", \"method\": \"update\", \"params\": [1,2,3,4,5]}";

    expect(l, NULL);
    expect("{\"jsonrpc\": \"2.0\", \"method\": \"foobar\"}", NULL);
    /* A notification is still a call: executed, never answered. */
    ck_assert_int_eq(rpc_parse(l, strlen(l), &m), 0);
    ck_assert(!m.batch);
    ck_assert_uint_eq(m.n_calls, 1);
    ck_assert(m.calls[0].notification);
    ck_assert_ptr_null(m.calls[0].id);
    ck_assert_ptr_null(m.calls[0].error);
    ck_assert_str_eq(m.calls[0].method, "update");
    ck_assert_uint_eq(json_object_array_length(m.calls[0].params), 5);
    /* A call moved out of its message outlives it. */
    struct rpc_call kept = m.calls[0];
    m.calls[0] = (struct rpc_call){};
    rpc_message_done(&m);
    ck_assert_str_eq(kept.method, "update");
    ck_assert_int_eq(json_object_get_int(json_object_array_get_idx(kept.params, 4)), 5);
    rpc_call_done(&kept);
    ck_assert_ptr_null(kept.request);
    rpc_call_done(NULL);
}
END_TEST

START_TEST(test_spec_method_not_found)
{
    struct rpc_message m;
    const char *l = "{\"jsonrpc\": \"2.0\", \"method\": \"foobar\", \"id\": \"1\"}";

    /* Parsing passes; not found is the dispatcher's answer. */
    ck_assert_int_eq(rpc_parse(l, strlen(l), &m), 0);
    ck_assert_ptr_null(m.error);
    ck_assert_ptr_null(m.calls[0].error);
    ck_assert_str_eq(m.calls[0].method, "foobar");
    ck_assert_ptr_null(m.calls[0].params);
    rpc_message_done(&m);
    expect(l, "{\"jsonrpc\": \"2.0\", \"error\": {\"code\": -32601, \"message\": \"Method not "
              "found\"}, \"id\": \"1\"}");
}
END_TEST

START_TEST(test_spec_invalid_json)
{
    expect("{\"jsonrpc\": \"2.0\", \"method\": \"foobar, \"params\": \"bar\", \"baz]",
           "{\"jsonrpc\": \"2.0\", \"error\": {\"code\": -32700, \"message\": \"Parse error\"}, "
           "\"id\": null}");
}
END_TEST

START_TEST(test_spec_invalid_request)
{
    expect("{\"jsonrpc\": \"2.0\", \"method\": 1, \"params\": \"bar\"}",
           "{\"jsonrpc\": \"2.0\", \"error\": {\"code\": -32600, \"message\": \"Invalid "
           "Request\"}, \"id\": null}");
}
END_TEST

START_TEST(test_spec_batch_invalid_json)
{
    expect("[{\"jsonrpc\": \"2.0\", \"method\": \"sum\", \"params\": [1,2,4], \"id\": \"1\"},"
           "{\"jsonrpc\": \"2.0\", \"method\"]",
           "{\"jsonrpc\": \"2.0\", \"error\": {\"code\": -32700, \"message\": \"Parse error\"}, "
           "\"id\": null}");
}
END_TEST

START_TEST(test_spec_empty_batch)
{
    expect("[]", "{\"jsonrpc\": \"2.0\", \"error\": {\"code\": -32600, \"message\": \"Invalid "
                 "Request\"}, \"id\": null}");
}
END_TEST

START_TEST(test_spec_batch_one_invalid)
{
    expect("[1]", "[{\"jsonrpc\": \"2.0\", \"error\": {\"code\": -32600, \"message\": \"Invalid "
                  "Request\"}, \"id\": null}]");
}
END_TEST

START_TEST(test_spec_batch_three_invalid)
{
    const char *e = "{\"jsonrpc\": \"2.0\", \"error\": {\"code\": -32600, \"message\": \"Invalid "
                    "Request\"}, \"id\": null}";
    char want[512];

    snprintf(want, sizeof(want), "[%s,%s,%s]", e, e, e);
    expect("[1,2,3]", want);
}
END_TEST

START_TEST(test_spec_batch_mixed)
{
    expect("[{\"jsonrpc\": \"2.0\", \"method\": \"sum\", \"params\": [1,2,4], \"id\": \"1\"},"
           " {\"jsonrpc\": \"2.0\", \"method\": \"notify_hello\", \"params\": [7]},"
           " {\"jsonrpc\": \"2.0\", \"method\": \"subtract\", \"params\": [42,23], \"id\": \"2\"},"
           " {\"foo\": \"boo\"},"
           " {\"jsonrpc\": \"2.0\", \"method\": \"foo.get\", \"params\": {\"name\": \"myself\"}, "
           "\"id\": \"5\"},"
           " {\"jsonrpc\": \"2.0\", \"method\": \"get_data\", \"id\": \"9\"} ]",
           "[{\"jsonrpc\": \"2.0\", \"result\": 7, \"id\": \"1\"},"
           " {\"jsonrpc\": \"2.0\", \"result\": 19, \"id\": \"2\"},"
           " {\"jsonrpc\": \"2.0\", \"error\": {\"code\": -32600, \"message\": \"Invalid "
           "Request\"}, \"id\": null},"
           " {\"jsonrpc\": \"2.0\", \"error\": {\"code\": -32601, \"message\": \"Method not "
           "found\"}, \"id\": \"5\"},"
           " {\"jsonrpc\": \"2.0\", \"result\": [\"hello\", 5], \"id\": \"9\"}]");
}
END_TEST

START_TEST(test_spec_batch_all_notifications)
{
    expect("[{\"jsonrpc\": \"2.0\", \"method\": \"notify_sum\", \"params\": [1,2,4]},"
           "{\"jsonrpc\": \"2.0\", \"method\": \"notify_hello\", \"params\": [7]}]",
           NULL);
}
END_TEST

/* ---- beyond the examples ------------------------------------------------- */

static int parse_code(const char *line, size_t len, json_object **ret_id)
{
    struct rpc_message m;
    json_object *err, *e, *c, *id;
    int code;

    ck_assert_int_eq(rpc_parse(line, len, &m), 0);
    err = m.error ? m.error : (m.n_calls == 1 ? m.calls[0].error : NULL);
    if (!err) {
        rpc_message_done(&m);
        return 0;
    }
    ck_assert(json_object_object_get_ex(err, "error", &e));
    ck_assert(json_object_object_get_ex(e, "code", &c));
    code = json_object_get_int(c);
    ck_assert(json_object_object_get_ex(err, "id", &id));
    if (ret_id)
        *ret_id = json_object_get(id);
    rpc_message_done(&m);
    return code;
}

#define CODE(s) parse_code((s), strlen(s), NULL)

START_TEST(test_ids)
{
    json_object *id = NULL;
    struct rpc_message m;
    const char *l;

    /* "id": null is a request (answered with id null), not a notification. */
    l = "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1],\"id\":null}";
    ck_assert_int_eq(rpc_parse(l, strlen(l), &m), 0);
    ck_assert(!m.calls[0].notification);
    ck_assert_ptr_null(m.calls[0].id);
    rpc_message_done(&m);
    expect(l, "{\"jsonrpc\":\"2.0\",\"result\":1,\"id\":null}");

    /* Fractional and string ids are echoed as given. */
    expect("{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[2],\"id\":1.5}",
           "{\"jsonrpc\":\"2.0\",\"result\":2,\"id\":1.5}");
    char *got = toy_serve("{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[2],\"id\":\"a/b\"}");
    ck_assert_str_eq(got, "{\"jsonrpc\":\"2.0\",\"result\":2,\"id\":\"a/b\"}");
    free(got);

    /* Ids of other types: invalid, answered with id null. */
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":{}}"), -32600);
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":[1]}"), -32600);
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":true}"), -32600);

    /* A valid id with an otherwise invalid request is kept in the error. */
    l = "{\"jsonrpc\":\"1.0\",\"method\":\"x\",\"id\":7}";
    ck_assert_int_eq(parse_code(l, strlen(l), &id), -32600);
    ck_assert_int_eq(json_object_get_int(id), 7);
    json_object_put(id);
}
END_TEST

/* The reply to a "sum" of [1] with `id` spelled as given. */
static void expect_id_echo(const char *id, const char *echoed)
{
    char req[256], want[256], *got;

    snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1],\"id\":%s}",
             id);
    snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"result\":1,\"id\":%s}", echoed);
    got = toy_serve(req);
    ck_assert_msg(got && strcmp(got, want) == 0, "id %s: got %s, want %s", id, got, want);
    free(got);
}

static void expect_id_refused(const char *line)
{
    struct rpc_message m;
    json_object *id = NULL, *e, *d, *reason;

    ck_assert_msg(parse_code(line, strlen(line), &id) == -32600, "accepted: %s", line);
    ck_assert_msg(id == NULL, "%s: error id is not null", line);
    ck_assert_int_eq(rpc_parse(line, strlen(line), &m), 0);
    ck_assert_uint_eq(m.n_calls, 1);
    ck_assert(json_object_object_get_ex(m.calls[0].error, "error", &e));
    ck_assert(json_object_object_get_ex(e, "data", &d));
    ck_assert(json_object_object_get_ex(d, "reason", &reason));
    ck_assert_ptr_nonnull(strstr(json_object_get_string(reason), "out of range"));
    rpc_message_done(&m);
}

START_TEST(test_ids_exact)
{
    static const char *const echoed[] = {
        "9223372036854775807",
        "-9223372036854775808",
        "0",
        "-1",
        "1.5",
        "1.5E+3",
        "1e400",
        "-1e400",
        "1e-400",
        "0.1000000000000000000001",
        "123456789012345678901234567890.0",
        "\"a\\u0000b\"",
        "\"123456789012345678901234567890\"",
    };
    static const char *const refused[] = {
        "9223372036854775808",  "18446744073709551615",
        "18446744073709551616", "123456789012345678901234567890",
        "-9223372036854775809", "-123456789012345678901234567890",
    };
    char line[256];
    char *got;

    for (size_t i = 0; i < sizeof echoed / sizeof echoed[0]; i++)
        expect_id_echo(echoed[i], echoed[i]);
    /* -0 is the integer 0. */
    expect_id_echo("-0", "0");
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"id\":%s}",
                 refused[i]);
        expect_id_refused(line);
    }
    /* INT64_MIN is what json-c reads for any integer below it: on a line that
     * holds such an integer, the id INT64_MIN cannot be told apart and is refused. */
    expect_id_refused("{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[-1e0,"
                      "-99999999999999999999],\"id\":-9223372036854775808}");
    /* Two ids that json-c would read as the same number get no reply with it. */
    got = toy_serve("[{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1],"
                    "\"id\":123456789012345678901234567890},"
                    "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[2],"
                    "\"id\":123456789012345678901234567891}]");
    ck_assert_ptr_nonnull(got);
    ck_assert_ptr_null(strstr(got, "18446744073709551615"));
    ck_assert_ptr_nonnull(strstr(got, "-32600"));
    free(got);
}
END_TEST

START_TEST(test_nul)
{
    json_object *id = NULL;
    const char *l;

    /* A NUL in the method is refused, not cut (the id is kept). */
    l = "{\"jsonrpc\":\"2.0\",\"method\":\"sum\\u0000junk\",\"params\":[1],\"id\":7}";
    ck_assert_int_eq(parse_code(l, strlen(l), &id), -32600);
    ck_assert_int_eq(json_object_get_int(id), 7);
    json_object_put(id);
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\",\"method\":\"\\u0000\",\"id\":1}"), -32600);
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\\u0000x\",\"method\":\"sum\",\"id\":1}"), -32600);
    /* A member name with U+0000 (json-c would cut it): the whole line, id null. */
    id = NULL;
    l = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\\u0000junk\":\"sum\",\"method\":\"x\"}";
    ck_assert_int_eq(parse_code(l, strlen(l), &id), -32600);
    ck_assert_ptr_null(id);
    ck_assert_int_eq(
        CODE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"update\",\"params\":{\"a\\u0000\" :1}}"),
        -32600);
    ck_assert_int_eq(CODE("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"update\"},"
                          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"update\",\"params\":"
                          "{\"env\":{\"\\u0000\":\"x\"}}}]"),
                     -32600);
    /* Not a NUL: an escaped backslash followed by "u0000", and U+0000 in values. */
    ck_assert_int_eq(
        CODE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"update\",\"params\":{\"a\\\\u0000\":1}}"),
        0);
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"update\",\"params\":"
                          "{\"a\":\"\\u0000\",\"b\":[\"\\u0000\"]}}"),
                     0);
}
END_TEST

START_TEST(test_invalid_requests)
{
    ck_assert_int_eq(CODE("{\"method\":\"x\",\"id\":1}"), -32600);
    ck_assert_int_eq(CODE("{\"jsonrpc\":2.0,\"method\":\"x\",\"id\":1}"), -32600);
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\",\"id\":1}"), -32600);
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\",\"method\":null,\"id\":1}"), -32600);
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":null,\"id\":1}"),
                     -32600);
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":3,\"id\":1}"), -32600);
    /* An invalid notification still gets its error (id null). */
    expect("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"s\"}",
           "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"},"
           "\"id\":null}");
    /* Top-level values other than an object or array. */
    ck_assert_int_eq(CODE("1"), -32600);
    ck_assert_int_eq(CODE("\"x\""), -32600);
    ck_assert_int_eq(CODE("null"), -32600);
    ck_assert_int_eq(CODE("true"), -32600);
    /* Fine: a method with params object, trailing whitespace and CR. */
    ck_assert_int_eq(CODE(" {\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{},\"id\":1} \t\r"),
                     0);
}
END_TEST

START_TEST(test_parse_errors)
{
    static const char *const bad[] = {
        "",
        "   ",
        "{",
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\"} {}",         /* trailing value */
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\"} x",          /* trailing garbage */
        "{'jsonrpc':'2.0','method':'x'}",                    /* single quotes */
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":NaN}", /* not JSON numbers */
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":Infinity}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":-Infinity}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":1.}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":01}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":+1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":1e}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",}",   /* trailing comma */
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\tb\"}", /* raw control character */
        "{\"jsonrpc\":\"2.0\",\"method\":True}",
        "[1,]",
        "\xef\xbb\xbf{}", /* byte order mark */
    };

    for (size_t i = 0; i < (sizeof(bad) / sizeof(bad[0])); i++)
        ck_assert_msg(CODE(bad[i]) == -32700, "accepted: %s", bad[i]);
    /* A NUL byte inside the line (json-c alone would stop there). */
    ck_assert_int_eq(parse_code("{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\0garbage", 38, NULL),
                     -32700);
    ck_assert_int_eq(parse_code("{\"jsonrpc\":\"2.0\",\"method\":\"x\0\"}", 30, NULL), -32700);
    /* Escaped forms of the same are fine (a NUL in the method is not: test_nul). */
    ck_assert_int_eq(CODE("{\"jsonrpc\":\"2.0\",\"method\":\"a\\tb\",\"params\":[\"\\u0000\"],"
                          "\"id\":-1.5e+3}"),
                     0);
}
END_TEST

START_TEST(test_invalid_utf8)
{
    static const char *const bad[] = {
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xc3\"}",                      /* truncated */
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xc0\xaf\"}",                  /* overlong '/' */
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{\"\x80\":1}}", /* in a key */
    };

    for (size_t i = 0; i < (sizeof(bad) / sizeof(bad[0])); i++)
        ck_assert_msg(CODE(bad[i]) == -32700, "accepted: %s", bad[i]);
    ck_assert_int_eq(
        CODE("{\"jsonrpc\":\"2.0\",\"method\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}"), 0);
}
END_TEST

START_TEST(test_deep_nesting)
{
    size_t n = 10000;
    char *s = malloc(2 * n + 1);
    json_object *id = NULL;

    /* 10,000 nested brackets: a parse error, found without deep recursion. */
    memset(s, '[', n);
    memset(s + n, ']', n);
    s[2 * n] = '\0';
    ck_assert_int_eq(parse_code(s, 2 * n, &id), -32700);
    ck_assert_ptr_null(id);
    /* Unbalanced too. */
    ck_assert_int_eq(parse_code(s, n, NULL), -32700);

    /* Depth 32 is allowed, 33 is not. */
    char buf[256];
    int k = snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":");
    for (int i = 0; i < 31; i++)
        buf[k++] = '[';
    for (int i = 0; i < 31; i++)
        buf[k++] = ']';
    buf[k++] = '}';
    ck_assert_int_eq(parse_code(buf, (size_t)k, NULL), 0); /* 1 object + 31 arrays */
    memmove(buf + 42, buf + 41, (size_t)k - 41);
    buf[41] = '[';
    k++;
    memmove(buf + k - 1, buf + k - 2, 2);
    buf[k - 2] = ']';
    k++;
    ck_assert_int_eq(parse_code(buf, (size_t)k, NULL), -32700);
    free(s);
}
END_TEST

START_TEST(test_batch_limits)
{
    char *s = malloc(100 * 64);
    const char *e = "{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1],\"id\":1}";
    struct rpc_message m;
    size_t k;

    for (int n = 64; n <= 65; n++) {
        k = 0;
        s[k++] = '[';
        for (int i = 0; i < n; i++) {
            if (i)
                s[k++] = ',';
            memcpy(s + k, e, strlen(e));
            k += strlen(e);
        }
        s[k++] = ']';
        ck_assert_int_eq(rpc_parse(s, k, &m), 0);
        ck_assert(m.batch);
        if (n == 64) {
            ck_assert_ptr_null(m.error);
            ck_assert_uint_eq(m.n_calls, 64);
        } else {
            /* Over the cap: one error for the whole batch, nothing executed. */
            ck_assert_ptr_nonnull(m.error);
            ck_assert_uint_eq(m.n_calls, 0);
        }
        rpc_message_done(&m);
    }
    free(s);
}
END_TEST

START_TEST(test_oversize_line)
{
    /* The framing refuses the line; the daemon answers once with -32600 and
     * id null, built like this, then closes. */
    struct frame_buf f;
    char *big = malloc(4096), *line;
    size_t len;

    memset(big, ' ', 4096);
    frame_buf_init(&f, 1024);
    ck_assert_int_eq(frame_buf_append(&f, big, 4096), -EMSGSIZE);
    ck_assert_int_eq(frame_buf_next(&f, &line, &len), -EMSGSIZE);
    frame_buf_done(&f);
    free(big);

    json_object *o = rpc_error_reason_new(NULL, RPC_INVALID_REQUEST, "request line too long");
    char *s = rpc_to_line(o, &len);
    ck_assert_str_eq(s,
                     "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"Invalid "
                     "Request\",\"data\":{\"reason\":\"request line too long\"}},\"id\":null}\n");
    free(s);
    json_object_put(o);
}
END_TEST

START_TEST(test_builders)
{
    json_object *id = json_object_new_string("r/1"), *o;
    size_t len;
    char *s;

    o = rpc_invalid_params_new(id, "hostname", "must be a DNS label");
    s = rpc_to_line(o, &len);
    ck_assert_str_eq(s, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32602,\"message\":\"Invalid "
                        "params\",\"data\":{\"reason\":\"must be a DNS label\",\"param\":"
                        "\"hostname\"}},\"id\":\"r/1\"}\n");
    free(s);
    json_object_put(o);

    o = rpc_error_reason_new(id, RPC_BAD_STATE, "sandbox is creating");
    s = rpc_to_line(o, NULL);
    ck_assert_str_eq(s, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32002,\"message\":\"Sandbox "
                        "not in a state that allows this\",\"data\":{\"reason\":\"sandbox is "
                        "creating\"}},\"id\":\"r/1\"}\n");
    free(s);
    json_object_put(o);

    json_object *p = json_object_new_object();
    json_object_object_add(p, "data", json_object_new_string("line 1\nline 2\n"));
    o = rpc_notification_new("exec.output", p);
    s = rpc_to_line(o, &len);
    ck_assert_str_eq(s, "{\"jsonrpc\":\"2.0\",\"method\":\"exec.output\",\"params\":{\"data\":"
                        "\"line 1\\nline 2\\n\"}}\n");
    ck_assert_uint_eq(len, strlen(s));
    free(s);
    json_object_put(o);

    o = rpc_exec_output_new(id, "stdout", "ok\n", 3);
    s = rpc_to_line(o, NULL);
    ck_assert_str_eq(s, "{\"jsonrpc\":\"2.0\",\"method\":\"exec.output\",\"params\":{"
                        "\"request_id\":\"r/1\",\"stream\":\"stdout\",\"data\":\"ok\\n\"}}\n");
    free(s);
    json_object_put(o);
    o = rpc_exec_output_new(NULL, "stderr", "\xff", 1);
    s = rpc_to_line(o, NULL);
    ck_assert_str_eq(s, "{\"jsonrpc\":\"2.0\",\"method\":\"exec.output\",\"params\":{"
                        "\"request_id\":null,\"stream\":\"stderr\",\"data_b64\":\"/w==\"}}\n");
    free(s);
    json_object_put(o);

    o = rpc_result_new(id, NULL);
    s = rpc_to_line(o, NULL);
    ck_assert_str_eq(s, "{\"jsonrpc\":\"2.0\",\"result\":null,\"id\":\"r/1\"}\n");
    free(s);
    json_object_put(o);

    o = rpc_error_new(NULL, RPC_INTERNAL_ERROR, "custom", json_object_new_int(3));
    s = rpc_to_line(o, NULL);
    ck_assert_str_eq(s, "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32603,\"message\":\"custom\","
                        "\"data\":3},\"id\":null}\n");
    free(s);
    json_object_put(o);
    json_object_put(id);
}
END_TEST

/* A reply shaped like file.read's: b64_object_add_data()'s string beside others, or (ref)
 * the same value as a string of json-c's own. */
static json_object *data_reply(const char *s, size_t n, bool ref)
{
    json_object *r = json_object_new_object(), *a = json_object_new_array();

    if (ref) {
        _cleanup_free_ char *enc = NULL;
        size_t len;

        if (utf8_valid(s, n))
            json_object_object_add(r, "content", json_object_new_string_len(s, (int)n));
        else {
            ck_assert_int_eq(b64_encode(s, n, &enc, &len), 0);
            json_object_object_add(r, "content_b64", json_object_new_string_len(enc, (int)len));
        }
    } else
        ck_assert_int_eq(b64_object_add_data(r, "content", s, n), 0);
    json_object_array_add(a, json_object_new_string("short \"quoted\""));
    json_object_object_add(r, "list", a);
    return rpc_result_new(NULL, r);
}

/* Long strings that need no escape (base64, most text) are copied as they are: the bytes
 * are the ones json-c writes itself, escapes or not, below and above the length that
 * turns it on. */
START_TEST(test_serialise_long_strings)
{
    static const size_t lens[] = {100, 255, 256, 4096, 300000};
    static const char *const tails[] = {
        "", "/+=", "\xc3\xa9\xe2\x82\xac", "\"", "\\", "\n", "\x01", "\x7f", "\xff"};

    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++) {
            size_t tl = strlen(tails[t]), n = lens[i] + tl, len, want_len;
            char *str = malloc(n + 1), *line;
            json_object *o, *ref;
            const char *want;

            for (size_t k = 0; k < lens[i]; k++)
                str[k] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[k % 62];
            memcpy(str + lens[i], tails[t], tl + 1);
            o = data_reply(str, n, false);
            ref = data_reply(str, n, true);
            want = json_object_to_json_string_length(
                ref, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &want_len);
            line = rpc_to_line(o, &len);
            ck_assert_uint_eq(len, want_len + 1);
            ck_assert_msg(memcmp(line, want, want_len) == 0 && line[want_len] == '\n',
                          "length %zu, tail %zu differs", lens[i], t);
            free(line);
            json_object_put(o);
            json_object_put(ref);
            free(str);
        }
}
END_TEST

START_TEST(test_code_messages)
{
    static const int codes[] = {-32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003,
                                -32004, -32005, -32006, -32007, -32008, -32009, -32010, -32011};

    for (size_t i = 0; i < (sizeof(codes) / sizeof(codes[0])); i++) {
        const char *m = rpc_code_message(codes[i]);

        ck_assert_ptr_nonnull(m);
        ck_assert_str_ne(m, "Server error");
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(m, rpc_code_message(codes[j]));
    }
    ck_assert_str_eq(rpc_code_message(RPC_NO_SUCH_SANDBOX), "No such sandbox");
    ck_assert_str_eq(rpc_code_message(-32099), "Server error");
}
END_TEST

static Suite *rpc_suite(void)
{
    Suite *s = suite_create("rpc");
    TCase *spec = tcase_create("spec-section-7"), *more = tcase_create("more");

    tcase_add_checked_fixture(spec, setup, teardown);
    tcase_add_test(spec, test_spec_positional);
    tcase_add_test(spec, test_spec_named);
    tcase_add_test(spec, test_spec_notification);
    tcase_add_test(spec, test_spec_method_not_found);
    tcase_add_test(spec, test_spec_invalid_json);
    tcase_add_test(spec, test_spec_invalid_request);
    tcase_add_test(spec, test_spec_batch_invalid_json);
    tcase_add_test(spec, test_spec_empty_batch);
    tcase_add_test(spec, test_spec_batch_one_invalid);
    tcase_add_test(spec, test_spec_batch_three_invalid);
    tcase_add_test(spec, test_spec_batch_mixed);
    tcase_add_test(spec, test_spec_batch_all_notifications);
    suite_add_tcase(s, spec);

    tcase_add_checked_fixture(more, setup, teardown);
    tcase_add_test(more, test_ids);
    tcase_add_test(more, test_ids_exact);
    tcase_add_test(more, test_nul);
    tcase_add_test(more, test_invalid_requests);
    tcase_add_test(more, test_parse_errors);
    tcase_add_test(more, test_invalid_utf8);
    tcase_add_test(more, test_deep_nesting);
    tcase_add_test(more, test_batch_limits);
    tcase_add_test(more, test_oversize_line);
    tcase_add_test(more, test_builders);
    tcase_add_test(more, test_serialise_long_strings);
    tcase_add_test(more, test_code_messages);
    suite_add_tcase(s, more);
    return s;
}

int main(void)
{
    return check_run_suite(rpc_suite());
}
