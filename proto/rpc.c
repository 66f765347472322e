/* JSON-RPC 2.0 codec. See rpc.h and docs/protocol.md. */
#include "rpc.h"

#include "b64.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

const char *rpc_code_message(int code)
{
    switch (code) {
    case RPC_PARSE_ERROR:
        return "Parse error";
    case RPC_INVALID_REQUEST:
        return "Invalid Request";
    case RPC_METHOD_NOT_FOUND:
        return "Method not found";
    case RPC_INVALID_PARAMS:
        return "Invalid params";
    case RPC_INTERNAL_ERROR:
        return "Internal error";
    case RPC_NO_SUCH_SANDBOX:
        return "No such sandbox";
    case RPC_BAD_STATE:
        return "Sandbox not in a state that allows this";
    case RPC_QUOTA_EXCEEDED:
        return "Quota exceeded";
    case RPC_PROXMOX_ERROR:
        return "Proxmox API error";
    case RPC_SSH_ERROR:
        return "SSH error";
    case RPC_DEADLINE_EXCEEDED:
        return "Deadline exceeded";
    case RPC_BUSY:
        return "Busy";
    case RPC_PERMISSION_DENIED:
        return "Permission denied";
    case RPC_FILE_ERROR:
        return "File error";
    case RPC_IDEMPOTENCY_MISMATCH:
        return "Idempotency key reused with different parameters";
    case RPC_SHUTTING_DOWN:
        return "Shutting down";
    default:
        return "Server error";
    }
}

/* ---- response builders ---------------------------------------------------- */

/* json_object_object_add() of a member named by a literal, once: json-c neither copies
 * nor looks up the name. */
static int rpc_add(json_object *o, const char *literal, json_object *v)
{
    return json_object_object_add_ex(o, literal, v,
                                     JSON_C_OBJECT_ADD_KEY_IS_NEW | JSON_C_OBJECT_KEY_IS_CONSTANT);
}

int rpc_add_literal(json_object *o, const char *literal, json_object *v)
{
    return json_object_object_add_ex(o, literal, v, JSON_C_OBJECT_KEY_IS_CONSTANT);
}

static json_object *rpc_envelope_new(void)
{
    json_object *o = json_object_new_object();

    if (!o)
        return NULL;
    if (rpc_add(o, "jsonrpc", json_object_new_string("2.0")) < 0) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

static json_object *rpc_envelope_finish(json_object *o, json_object *id)
{
    if (rpc_add(o, "id", id ? json_object_get(id) : NULL) < 0) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

json_object *rpc_result_new(json_object *id, json_object *result)
{
    json_object *o = rpc_envelope_new();

    if (!o) {
        json_object_put(result);
        return NULL;
    }
    if (rpc_add(o, "result", result) < 0) {
        json_object_put(result);
        json_object_put(o);
        return NULL;
    }
    return rpc_envelope_finish(o, id);
}

json_object *rpc_error_new(json_object *id, int code, const char *message, json_object *data)
{
    json_object *o, *e;

    o = rpc_envelope_new();
    e = json_object_new_object();
    if (!o || !e)
        goto fail;
    if (rpc_add(e, "code", json_object_new_int(code)) < 0 ||
        rpc_add(e, "message", json_object_new_string(message ? message : rpc_code_message(code))) <
            0)
        goto fail;
    if (data) {
        if (rpc_add(e, "data", data) < 0)
            goto fail;
        data = NULL;
    }
    if (rpc_add(o, "error", e) < 0)
        goto fail;
    return rpc_envelope_finish(o, id);

fail:
    json_object_put(data);
    json_object_put(e);
    json_object_put(o);
    return NULL;
}

static json_object *rpc_reason_data_new(const char *reason, const char *param)
{
    json_object *d = json_object_new_object();

    if (!d)
        return NULL;
    if (rpc_add(d, "reason", json_object_new_string(reason ? reason : "")) < 0 ||
        (param && rpc_add(d, "param", json_object_new_string(param)) < 0)) {
        json_object_put(d);
        return NULL;
    }
    return d;
}

json_object *rpc_error_reason_new(json_object *id, int code, const char *reason)
{
    json_object *d = rpc_reason_data_new(reason, NULL);

    if (!d)
        return NULL;
    return rpc_error_new(id, code, NULL, d);
}

json_object *rpc_invalid_params_new(json_object *id, const char *param, const char *reason)
{
    json_object *d = rpc_reason_data_new(reason, param);

    if (!d)
        return NULL;
    return rpc_error_new(id, RPC_INVALID_PARAMS, NULL, d);
}

json_object *rpc_notification_new(const char *method, json_object *params)
{
    json_object *o = rpc_envelope_new();

    if (!o) {
        json_object_put(params);
        return NULL;
    }
    if (rpc_add(o, "method", json_object_new_string(method)) < 0) {
        json_object_put(params);
        json_object_put(o);
        return NULL;
    }
    if (params && rpc_add(o, "params", params) < 0) {
        json_object_put(params);
        json_object_put(o);
        return NULL;
    }
    return o;
}

json_object *rpc_exec_output_new(json_object *request_id, const char *stream, const void *p,
                                 size_t n)
{
    json_object *params = json_object_new_object();

    if (!params)
        return NULL;
    if (json_object_object_add(params, "request_id",
                               request_id ? json_object_get(request_id) : NULL) < 0 ||
        json_object_object_add(params, "stream", json_object_new_string(stream)) < 0 ||
        b64_object_add_data(params, "data", p, n) < 0) {
        json_object_put(params);
        return NULL;
    }
    return rpc_notification_new("exec.output", params);
}

const char *rpc_serialise(json_object *o, size_t *ret_len)
{
    return json_object_to_json_string_length(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, ret_len);
}

char *rpc_to_line(json_object *o, size_t *ret_len)
{
    char *line;
    size_t n;

    if (rpc_text_new(o, rpc_size_hint(o), &line, &n) < 0)
        return NULL;
    if (ret_len)
        *ret_len = n + 1;
    return line;
}

static size_t rpc_size_hint_depth(json_object *o, unsigned depth)
{
    size_t n = 4;

    if (depth > RPC_MAX_DEPTH)
        return n;
    switch (json_object_get_type(o)) {
    case json_type_string:
        return n + (size_t)json_object_get_string_len(o);
    case json_type_array:
        for (size_t i = 0, k = json_object_array_length(o); i < k; i++)
            n += rpc_size_hint_depth(json_object_array_get_idx(o, i), depth + 1);
        return n;
    case json_type_object: {
        json_object_object_foreach(o, key, val) n +=
            strlen(key) + rpc_size_hint_depth(val, depth + 1);
        return n;
    }
    default:
        return n;
    }
}

size_t rpc_size_hint(json_object *o)
{
    return rpc_size_hint_depth(o, 0);
}

char *rpc_request_line(int64_t id, const char *method, json_object *params, size_t *ret_len)
{
    _cleanup_json_ json_object *o = rpc_envelope_new();

    if (!o) {
        json_object_put(params);
        return NULL;
    }
    json_object_object_add(o, "id", json_object_new_int64(id));
    json_object_object_add(o, "method", json_object_new_string(method));
    if (params)
        json_object_object_add(o, "params", params);
    return rpc_to_line(o, ret_len);
}

/* ---- parsing ------------------------------------------------------------- */

/* What the lexical pre-pass learnt about a line beyond its validity. */
struct rpc_lex {
    bool key_nul;     /* an object member name contains \u0000 */
    bool int_clamped; /* an integer literal is below INT64_MIN (json-c reads INT64_MIN) */
};

/* True when the digits (no sign, no leading zero) exceed the magnitude of INT64_MIN. */
static bool rpc_digits_below_int64_min(const char *d, size_t n)
{
    static const char min_digits[] = "9223372036854775808";

    if (n != sizeof min_digits - 1)
        return n > sizeof min_digits - 1;
    return memcmp(d, min_digits, n) > 0;
}

/* Scans one number starting at s[*i]. Returns NULL or a reason. */
static const char *rpc_lex_number(const char *s, size_t len, size_t *i, struct rpc_lex *lex)
{
    size_t p = *i, digits;
    bool neg = false, integral = true;

    if (s[p] == '-') {
        neg = true;
        p++;
    }
    if (p >= len || s[p] < '0' || s[p] > '9')
        return "invalid number";
    digits = p;
    if (s[p] == '0')
        p++;
    else
        while (p < len && s[p] >= '0' && s[p] <= '9')
            p++;
    digits = p - digits;
    if (p < len && s[p] == '.') {
        integral = false;
        p++;
        if (p >= len || s[p] < '0' || s[p] > '9')
            return "invalid number";
        while (p < len && s[p] >= '0' && s[p] <= '9')
            p++;
    }
    if (p < len && (s[p] == 'e' || s[p] == 'E')) {
        integral = false;
        p++;
        if (p < len && (s[p] == '+' || s[p] == '-'))
            p++;
        if (p >= len || s[p] < '0' || s[p] > '9')
            return "invalid number";
        while (p < len && s[p] >= '0' && s[p] <= '9')
            p++;
    }
    if (neg && integral && rpc_digits_below_int64_min(s + p - digits, digits))
        lex->int_clamped = true;
    *i = p;
    return NULL;
}

/* Scans one string starting at the opening quote s[*i]; on return *i is just
 * past the closing quote. Returns NULL or a reason. */
static const char *rpc_lex_string(const char *s, size_t len, size_t *i, bool *ret_nul)
{
    size_t p = *i + 1;
    bool nul = false;

    for (;; p++) {
        unsigned char c;

        if (p >= len)
            return "unterminated string";
        c = (unsigned char)s[p];
        if (c == '"')
            break;
        if (c < 0x20)
            return "control character in string";
        if (c == '\\') {
            p++;
            if (p >= len)
                return "unterminated string";
            if ((unsigned char)s[p] < 0x20)
                return "control character in string";
            if (s[p] == 'u' && len - p > 4 && memcmp(s + p + 1, "0000", 4) == 0)
                nul = true;
        }
    }
    *i = p + 1;
    *ret_nul = nul;
    return NULL;
}

/* json-c's strict mode still accepts a few things RFC 8259 does not: single
 * quotes, NaN/Infinity, "1.", raw control characters inside strings, and it
 * stops silently at a NUL byte. This linear pre-pass rejects them; json-c then
 * does the rest (structure, literals, escapes, UTF-8, depth). It also notes, in
 * *lex, what json-c would silently alter: member names holding U+0000 (json-c
 * cuts them there) and integers below INT64_MIN (clamped). Returns NULL or a
 * reason. */
static const char *rpc_lex_check(const char *s, size_t len, struct rpc_lex *lex)
{
    size_t i = 0;

    *lex = (struct rpc_lex){};
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        const char *reason;

        if (c == '"') {
            bool nul;
            size_t k;

            reason = rpc_lex_string(s, len, &i, &nul);
            if (reason)
                return reason;
            for (k = i; nul && k < len && strchr(" \t\r\n", s[k]) && s[k]; k++)
                ;
            if (nul && k < len && s[k] == ':')
                lex->key_nul = true;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            reason = rpc_lex_number(s, len, &i, lex);
            if (reason)
                return reason;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '{' || c == '}' ||
                   c == '[' || c == ']' || c == ':' || c == ',' || (c >= 'a' && c <= 'z')) {
            i++;
        } else {
            return "unexpected character";
        }
    }
    return NULL;
}

static bool rpc_blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return false;
    return true;
}

static int rpc_whole_error(struct rpc_message *m, int code, const char *reason)
{
    json_object *d = rpc_reason_data_new(reason, NULL);

    if (!d)
        return -ENOMEM;
    m->error = rpc_error_new(NULL, code, NULL, d);
    return m->error ? 0 : -ENOMEM;
}

/* NULL when the id can be echoed exactly as sent, else why it is refused.
 * Strings are kept whole (NUL included). Numbers with a fraction or an exponent
 * keep their text in json-c and are echoed as written. Integers must fit in
 * int64: json-c keeps larger ones as uint64 or clamps them to its limits, so two
 * different ids could get the same reply. */
static const char *rpc_id_problem(json_object *id, const struct rpc_lex *lex)
{
    switch (json_object_get_type(id)) {
    case json_type_null:
    case json_type_string:
    case json_type_double:
        return NULL;
    case json_type_int:
        if (json_object_get_int64(id) == INT64_MAX &&
            json_object_get_uint64(id) != (uint64_t)INT64_MAX)
            return "id is out of range: integer ids must fit in a signed 64-bit integer";
        if (json_object_get_int64(id) == INT64_MIN && lex->int_clamped)
            return "id is out of range: integer ids must fit in a signed 64-bit integer";
        return NULL;
    default:
        return "id must be a string, a number or null";
    }
}

static int rpc_call_invalid(struct rpc_call *c, json_object *id, const char *reason)
{
    json_object *d = rpc_reason_data_new(reason, NULL);

    c->notification = false;
    c->method = NULL;
    c->params = NULL;
    if (!d)
        return -ENOMEM;
    c->error = rpc_error_new(id, RPC_INVALID_REQUEST, NULL, d);
    return c->error ? 0 : -ENOMEM;
}

/* True when a string value holds no NUL (json-c keeps strings whole). */
static bool rpc_string_clean(json_object *s)
{
    return memchr(json_object_get_string(s), '\0', (size_t)json_object_get_string_len(s)) == NULL;
}

/* Fills one call from one request value (a batch entry or the whole line). */
static int rpc_call_parse(json_object *req, const struct rpc_lex *lex, struct rpc_call *c)
{
    json_object *id = NULL, *v, *method, *params;
    const char *problem;
    bool has_id;

    *c = (struct rpc_call){.request = json_object_get(req)};

    if (!json_object_is_type(req, json_type_object))
        return rpc_call_invalid(c, NULL, "request is not an object");

    has_id = json_object_object_get_ex(req, "id", &id);
    if (has_id && (problem = rpc_id_problem(id, lex)))
        return rpc_call_invalid(c, NULL, problem);
    if (!has_id)
        id = NULL;

    if (!json_object_object_get_ex(req, "jsonrpc", &v) ||
        !json_object_is_type(v, json_type_string) || !rpc_string_clean(v) ||
        strcmp(json_object_get_string(v), "2.0") != 0)
        return rpc_call_invalid(c, id, "jsonrpc must be \"2.0\"");

    if (!json_object_object_get_ex(req, "method", &method) ||
        !json_object_is_type(method, json_type_string))
        return rpc_call_invalid(c, id, "method must be a string");
    if (!rpc_string_clean(method))
        return rpc_call_invalid(c, id, "method must not contain NUL");

    params = NULL;
    if (json_object_object_get_ex(req, "params", &params) &&
        !json_object_is_type(params, json_type_object) &&
        !json_object_is_type(params, json_type_array))
        return rpc_call_invalid(c, id, "params must be an object or an array");

    c->id = id ? json_object_get(id) : NULL;
    c->notification = !has_id;
    c->method = json_object_get_string(method);
    c->params = params;
    return 0;
}

/* The JSON value of line, in json-c's strict mode: *ret_root (NULL unless *ret_error is
 * json_tokener_success), or -ENOMEM. */
static int rpc_json_parse(json_tokener **cache, const char *line, size_t len,
                          json_object **ret_root, enum json_tokener_error *ret_error)
{
    json_tokener *tok = *cache;
    json_object *root;
    enum json_tokener_error jerr;

    if (!tok) {
        tok = *cache = json_tokener_new_ex(RPC_MAX_DEPTH);
        if (!tok)
            return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    }
    root = json_tokener_parse_ex(tok, line, (int)len);
    jerr = json_tokener_get_error(tok);
    if (jerr == json_tokener_continue) {
        /* A top-level number or literal needs an end marker. */
        root = json_tokener_parse_ex(tok, "", 1);
        jerr = json_tokener_get_error(tok);
    } else if (jerr == json_tokener_success) {
        /* Only whitespace may follow the value (strict mode already refuses
         * anything else; this keeps it so whatever json-c does). */
        for (size_t i = json_tokener_get_parse_end(tok); i < len; i++)
            if (!strchr(" \t\r\n", line[i]) || line[i] == '\0') {
                jerr = json_tokener_error_parse_unexpected;
                json_object_put(root);
                root = NULL;
                break;
            }
    }
    if (len > RPC_TOKENER_KEEP) {
        json_tokener_free(tok);
        *cache = NULL;
    } else
        json_tokener_reset(tok); /* the flags stay */
    assert(jerr == json_tokener_success || !root);
    *ret_root = root;
    *ret_error = jerr;
    return 0;
}

/* The calls of a parsed message, root an object (one call) or an array (a batch): into m
 * (m->n_calls counts the calls set, also on failure). */
static int rpc_calls_parse(json_object *root, const struct rpc_lex *lex, struct rpc_message *m)
{
    int r;

    if (json_object_is_type(root, json_type_array)) {
        size_t n = json_object_array_length(root);

        m->batch = true;
        if (n == 0)
            return rpc_whole_error(m, RPC_INVALID_REQUEST, "empty batch");
        if (n > RPC_MAX_BATCH)
            return rpc_whole_error(m, RPC_INVALID_REQUEST, "batch has more than 64 entries");
        m->calls = calloc(n, sizeof(*m->calls));
        if (!m->calls)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            r = rpc_call_parse(json_object_array_get_idx(root, i), lex, &m->calls[i]);
            m->n_calls = i + 1;
            if (r < 0)
                return r;
        }
        return 0;
    }
    if (json_object_is_type(root, json_type_object)) {
        m->calls = calloc(1, sizeof(*m->calls));
        if (!m->calls)
            return -ENOMEM;
        m->n_calls = 1;
        return rpc_call_parse(root, lex, &m->calls[0]);
    }
    return rpc_whole_error(m, RPC_INVALID_REQUEST, "request is not an object or an array");
}

int rpc_parse(const char *line, size_t len, struct rpc_message *ret)
{
    json_tokener *tok = NULL;
    int r = rpc_parse_with(&tok, line, len, ret);

    if (tok) /* json-c's free does not take NULL */
        json_tokener_free(tok);
    return r;
}

int rpc_parse_with(json_tokener **tok, const char *line, size_t len, struct rpc_message *ret)
{
    json_object *root = NULL;
    enum json_tokener_error jerr;
    const char *reason;
    struct rpc_lex lex = {};
    struct rpc_message m = {};
    int r;

    *ret = (struct rpc_message){};

    if (len > INT_MAX - 1) {
        r = rpc_whole_error(&m, RPC_PARSE_ERROR, "message too large");
        goto out;
    }
    /* json-c's own UTF-8 check lets overlong forms and surrogates through. */
    reason = utf8_valid(line, len) ? rpc_lex_check(line, len, &lex) : "invalid UTF-8";
    if (!reason && rpc_blank(line, len))
        reason = "empty message"; /* no need to start json-c for that */
    if (reason) {
        r = rpc_whole_error(&m, RPC_PARSE_ERROR, reason);
        goto out;
    }
    /* Valid JSON, but json-c would cut the name: "method\u0000x" would read as
     * "method". Which entry it belongs to is unknown: refuse the line. */
    if (lex.key_nul) {
        r = rpc_whole_error(&m, RPC_INVALID_REQUEST, "a member name contains U+0000");
        goto out;
    }

    r = rpc_json_parse(tok, line, len, &root, &jerr);
    if (r < 0)
        goto out;
    if (jerr != json_tokener_success) {
        r = rpc_whole_error(&m, RPC_PARSE_ERROR, json_tokener_error_desc(jerr));
        goto out;
    }
    r = rpc_calls_parse(root, &lex, &m);

out:
    json_object_put(root);
    if (r < 0) {
        rpc_message_done(&m);
        return r;
    }
    *ret = m;
    return 0;
}

void rpc_call_done(struct rpc_call *c)
{
    if (!c)
        return;
    json_object_put(c->id);
    json_object_put(c->request);
    json_object_put(c->error);
    *c = (struct rpc_call){};
}

void rpc_message_done(struct rpc_message *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_calls; i++)
        rpc_call_done(&m->calls[i]);
    free(m->calls);
    json_object_put(m->error);
    *m = (struct rpc_message){};
}
