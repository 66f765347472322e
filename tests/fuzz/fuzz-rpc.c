/* libFuzzer target over the whole wire layer: arbitrary bytes are split into
 * reads, framed, parsed as JSON-RPC, looked up in the method table, their
 * params validated, and every response built and serialised as the daemon
 * would. Invariants that must hold for any input abort the run. */
#include "proto/b64.h"
#include "proto/frame.h"
#include "proto/params.h"
#include "proto/rpc.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_LINES 8

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

/* Serialises one response and checks it is one valid JSON line. */
static void emit(json_object *resp)
{
    size_t n;
    char *line;
    json_object *back;

    CHECK(resp);
    line = rpc_to_line(resp, &n);
    CHECK(line);
    CHECK(n > 0 && line[n - 1] == '\n' && strlen(line) == n);
    CHECK(memchr(line, '\n', n - 1) == NULL);
    back = json_tokener_parse(line);
    CHECK(back);
    json_object_put(back);
    free(line);
    json_object_put(resp);
}

static json_object *dispatch(const struct rpc_call *c)
{
    const struct rpc_method_info *mi;
    struct params_error err;
    void *buf;
    int r;

    if (c->error)
        return json_object_get(c->error);
    CHECK(c->method);
    CHECK(!c->params || json_object_is_type(c->params, json_type_object) ||
          json_object_is_type(c->params, json_type_array));
    mi = rpc_method_find(c->method);
    if (!mi || mi->planned)
        return rpc_error_new(c->id, RPC_METHOD_NOT_FOUND, NULL, NULL);
    buf = calloc(1, mi->params_size + 1);
    CHECK(buf);
    memset(&err, 0, sizeof(err));
    r = mi->parse(c->params, buf, &err);
    if (r == -EINVAL) {
        /* The name may be empty: an unknown parameter "" is named as such. */
        CHECK(err.reason[0] != '\0' && memchr(err.param, '\0', sizeof(err.param)));
        free(buf);
        return rpc_invalid_params_new(c->id, err.param, err.reason);
    }
    CHECK(r == 0);
    if (strcmp(mi->name, "sandbox.exec") == 0) {
        const struct params_sandbox_exec *x = buf;
        json_object *res = json_object_new_object();

        CHECK(!x->command != !x->argv);
        CHECK(!x->argv || (x->argc >= 1 && x->argv[x->argc] == NULL));
        /* Echo stdin back the way exec output goes out. */
        if (x->has_stdin)
            CHECK(b64_object_add_data(res, "stdout", x->stdin_data, x->stdin_len) == 0);
        mi->done(buf);
        free(buf);
        return rpc_result_new(c->id, res);
    }
    if (strcmp(mi->name, "file.write") == 0) {
        const struct params_file_write *w = buf;
        json_object *res = json_object_new_object();

        CHECK(w->content && w->path && w->path[0] == '/' && w->mode <= 07777);
        CHECK(b64_object_add_data(res, "content", w->content, w->content_len) == 0);
        mi->done(buf);
        free(buf);
        return rpc_result_new(c->id, res);
    }
    if (mi->done)
        mi->done(buf);
    free(buf);
    return rpc_result_new(c->id, json_object_new_string(mi->name));
}

static void handle_line(const char *line, size_t len)
{
    struct rpc_message m;
    json_object *batch = NULL;

    CHECK(rpc_parse(line, len, &m) == 0);
    if (m.error) {
        CHECK(m.n_calls == 0);
        emit(json_object_get(m.error));
        rpc_message_done(&m);
        return;
    }
    CHECK(m.n_calls >= 1 && m.n_calls <= RPC_MAX_BATCH);
    CHECK(m.batch || m.n_calls == 1);
    if (m.batch)
        batch = json_object_new_array();
    for (size_t i = 0; i < m.n_calls; i++) {
        json_object *resp = dispatch(&m.calls[i]);

        if (m.calls[i].notification) {
            json_object_put(resp);
            continue;
        }
        if (batch)
            json_object_array_add(batch, resp);
        else
            emit(resp);
    }
    if (batch) {
        if (json_object_array_length(batch) > 0)
            emit(batch);
        else
            json_object_put(batch);
    }
    rpc_message_done(&m);

    /* The same bytes as base64 input and as output data. */
    {
        uint8_t *dec;
        size_t dn;
        json_object *o = json_object_new_object();

        if (b64_decode(line, len, &dec, &dn) == 0) {
            CHECK(dn == b64_decoded_size(line, len));
            free(dec);
        }
        CHECK(b64_object_add_data(o, "data", line, len) == 0);
        json_object_put(o);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct frame_buf f;
    size_t pos, max_line, lines = 0;
    uint8_t split;

    if (size < 2)
        return 0;
    /* Byte 0: the line cap (small caps reach the overflow path); byte 1: the
     * read sizes. */
    max_line = data[0] < 16 ? 32 + (size_t)data[0] * 64 : 65536;
    split = data[1];
    data += 2;
    size -= 2;

    frame_buf_init(&f, max_line);
    pos = 0;
    while (pos < size) {
        size_t k = split ? 1 + (pos * 131 + split) % (2u * split) : size - pos;
        char *line;
        size_t len;
        int r;

        if (k > size - pos)
            k = size - pos;
        r = frame_buf_append(&f, data + pos, k);
        pos += k;
        while (r == 0 && (r = frame_buf_next(&f, &line, &len)) == 1) {
            CHECK(len <= max_line && line[len] == '\0');
            /* Framing sees every line; parsing the first FUZZ_MAX_LINES
             * keeps inputs made of thousands of tiny lines fast. */
            if (lines++ < FUZZ_MAX_LINES)
                handle_line(line, len);
            r = 0;
        }
        if (r == -EMSGSIZE) {
            /* What the daemon sends before closing. */
            emit(rpc_error_reason_new(NULL, RPC_INVALID_REQUEST, "request line too long"));
            break;
        }
        CHECK(r == 0);
        CHECK(frame_buf_pending(&f) <= max_line);
    }
    frame_buf_done(&f);
    return 0;
}
