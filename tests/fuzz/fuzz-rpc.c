/* libFuzzer target over the whole wire layer: arbitrary bytes are split into
 * reads, framed, and each line goes through the daemon's own dispatch
 * (methods_dispatch_line() of daemon/methods.c: JSON-RPC parsing, batches, the
 * method table, params parsing and the -32602 replies, the admin check) on a
 * request port whose output is checked here. Every docs/protocol.md method is a row
 * with its real params kind and a handler that checks the parsed struct and
 * answers at once (nothing reaches Proxmox). Invariants that must hold for any
 * input abort the run. */
#include "methods.h"
#include "req.h"
#include "b64.h"
#include "frame.h"
#include "params.h"
#include "rpc.h"
#include "macro.h"

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

/* Serialises one response and checks it is one valid JSON line, the bytes json-c writes. */
static void emit(json_object *resp)
{
    size_t n, ref_n;
    char *line;
    const char *ref;
    json_object *back;

    CHECK(resp);
    line = rpc_to_line(resp, &n);
    CHECK(line);
    CHECK(n > 0 && line[n - 1] == '\n' && strlen(line) == n);
    ref = rpc_serialise(resp, &ref_n);
    CHECK(ref && ref_n == n - 1 && memcmp(ref, line, ref_n) == 0);
    CHECK(memchr(line, '\n', n - 1) == NULL);
    back = json_tokener_parse(line);
    CHECK(back);
    json_object_put(back);
    free(line);
    json_object_put(resp);
}

/* ---- the request port: every message the dispatch sends is checked ---- */

static int port_send(void *conn, json_object *msg)
{
    (void)conn;
    emit(msg);
    return 0;
}

static size_t port_output_bytes(const void *conn)
{
    (void)conn;
    return 0;
}

static bool port_open(const void *conn)
{
    (void)conn;
    return true;
}

static uint64_t port_drain_pass(const void *conn)
{
    (void)conn;
    return 0;
}

static void port_completed(void *conn)
{
    (void)conn;
}

static const struct req_port_ops port_ops = {
    .send = port_send,
    .output_bytes = port_output_bytes,
    .open = port_open,
    .active = port_open,
    .drain_pass = port_drain_pass,
    .completed = port_completed,
};

/* ---- handlers: check what the dispatch parsed, answer at once ---- */

static void fuzz_handler(struct req *r, void *params, void *userdata)
{
    const struct rpc_method_info *mi = userdata;
    json_object *res = json_object_new_object();

    CHECK(strcmp(req_method(r), mi->name) == 0);
    CHECK((params != NULL) == (mi->params->size > 0));
    if (strcmp(mi->name, "sandbox.exec") == 0) {
        const struct params_sandbox_exec *x = params;

        CHECK(!x->command != !x->argv);
        CHECK(!x->argv || (x->argc >= 1 && x->argv[x->argc] == NULL));
        /* Echo stdin back the way exec output goes out. */
        if (x->has_stdin)
            CHECK(b64_object_add_data(res, "stdout", x->stdin_data, x->stdin_len) == 0);
    } else if (strcmp(mi->name, "file.write") == 0) {
        const struct params_file_write *w = params;

        CHECK(w->content && w->path && w->path[0] == '/' && w->mode <= 07777);
        CHECK(b64_object_add_data(res, "content", w->content, w->content_len) == 0);
    } else {
        json_object_object_add(res, "method", json_object_new_string(mi->name));
    }
    req_reply(r, res);
}

static void fuzz_admin_handler(struct req *r, void *params, void *userdata)
{
    (void)params;
    (void)userdata;
    abort(); /* the caller is never an admin */
}

/* every method of the table, fuzz.admin and the end row, with room for methods to come */
static struct method_def rows[128];

static void register_rows(void)
{
    const struct rpc_method_info *all;
    size_t n, k = 0;

    all = rpc_methods(&n);
    for (size_t i = 0; i < n; i++) {
        if (all[i].planned)
            continue;
        CHECK(k + 2 < ELEMENTSOF(rows));
        rows[k++] =
            (struct method_def){all[i].name, all[i].params, fuzz_handler, 0, (void *)&all[i]};
    }
    rows[k++] =
        (struct method_def){"fuzz.admin", &params_none_spec, fuzz_admin_handler, METHOD_ADMIN};
    rows[k] = (struct method_def){};
    CHECK(methods_check(rows, &(const char *){NULL}) == 0);
}

/* Kept between lines, as the daemon keeps it: what one line leaves in it must not change
 * how the next one reads. */
static json_tokener *tokener;

static void handle_line(const char *line, size_t len)
{
    struct req_port port = {
        .ops = &port_ops,
        .uid = 1000,
        .gid = 1000,
        .output_high = SIZE_MAX,
        .output_hard = SIZE_MAX,
    };

    if (len == 0 || (len == 1 && line[0] == '\r'))
        return;
    CHECK(methods_dispatch_line(&(struct method_table){rows}, &port, &tokener, line, len, false) ==
          0);
    /* Every handler answers at once: nothing stays in flight. */
    CHECK(port.list.head == NULL && port.list.n == 0);

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
    static bool registered;
    struct frame_buf f;
    size_t pos, max_line, lines = 0;
    uint8_t split;

    if (!registered) {
        registered = true;
        register_rows();
    }
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
