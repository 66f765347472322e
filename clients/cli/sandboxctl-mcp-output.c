/* The output of `exec` for a model: the command's output streams in (exec.output
 * notifications), and the result shows at most a budget of text (--max-output,
 * the `max_output` argument): all of a stream when it fits, else its head and
 * its tail (where build and test failures are) around a line that says how much
 * was left out and how to get it. Each stream keeps its first and its last
 * `budget` bytes, whatever its length. */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl-mcp.h"
#include "b64.h"

#define OUTPUT_HEAD_SHARE 4 /* the head gets 1/4 of a stream's budget, the tail the rest */

static const char *const stream_names[] = {"stdout", "stderr"};

int64_t mcp_output_budget(json_object *args, const struct mcp_cfg *cfg)
{
    json_object *v;

    if (args && json_object_object_get_ex(args, "max_output", &v) &&
        json_object_is_type(v, json_type_int))
        return json_object_get_int64(v);
    return cfg->max_output > 0 ? cfg->max_output : MCP_OUTPUT_DEFAULT;
}

int mcp_output_init(struct mcp_output *out, int64_t budget)
{
    *out = (struct mcp_output){.budget = budget};
    for (size_t i = 0; i < ELEMENTSOF(out->streams); i++) {
        struct mcp_stream *s = &out->streams[i];

        s->cap = (size_t)budget;
        s->head = malloc(s->cap + 1);
        s->ring = malloc(s->cap + 1);
        if (!s->head || !s->ring) {
            mcp_output_done(out);
            return -ENOMEM;
        }
    }
    return 0;
}

void mcp_output_done(struct mcp_output *out)
{
    for (size_t i = 0; i < ELEMENTSOF(out->streams); i++) {
        free(out->streams[i].head);
        free(out->streams[i].ring);
        out->streams[i].head = out->streams[i].ring = NULL;
    }
}

static void stream_add(struct mcp_stream *s, const char *data, size_t n)
{
    size_t have = (uint64_t)s->total < s->cap ? (size_t)s->total : s->cap;

    if (have < s->cap)
        memcpy(s->head + have, data, n < s->cap - have ? n : s->cap - have);
    if (s->cap > 0) {
        /* Only the last cap bytes of data can stay in the ring. */
        size_t skip = n > s->cap ? n - s->cap : 0;
        size_t pos = (size_t)(((uint64_t)s->total + skip) % s->cap);

        for (size_t done = skip; done < n;) {
            size_t k = s->cap - pos < n - done ? s->cap - pos : n - done;

            memcpy(s->ring + pos, data + done, k);
            done += k;
            pos = (pos + k) % s->cap;
        }
    }
    s->total += (int64_t)n;
}

void mcp_output_add_bytes(struct mcp_output *out, unsigned i, const char *data, size_t n)
{
    if (out->streams[0].head && i < ELEMENTSOF(out->streams))
        stream_add(&out->streams[i], data, n);
}

void mcp_output_skip(struct mcp_output *out, unsigned i, int64_t n)
{
    struct mcp_stream *s;

    if (i >= ELEMENTSOF(out->streams) || !out->streams[i].head || n <= 0)
        return;
    s = &out->streams[i];
    /* A head that was not whole yet shows the bytes it misses as '?'. */
    if ((uint64_t)s->total < s->cap)
        memset(s->head + s->total, '?',
               (size_t)MIN((uint64_t)n, (uint64_t)s->cap - (uint64_t)s->total));
    s->total += n; /* the ring is refilled by the bytes added next */
}

void mcp_output_add(struct mcp_output *out, json_object *params)
{
    json_object *stream, *data;
    _cleanup_free_ uint8_t *bin = NULL;
    size_t n;

    if (!out->streams[0].head || !json_object_object_get_ex(params, "stream", &stream))
        return;
    for (size_t i = 0; i < ELEMENTSOF(stream_names); i++) {
        if (strcmp(json_object_get_string(stream), stream_names[i]) != 0)
            continue;
        if (json_object_object_get_ex(params, "data", &data) &&
            json_object_is_type(data, json_type_string))
            stream_add(&out->streams[i], json_object_get_string(data),
                       (size_t)json_object_get_string_len(data));
        else if (json_object_object_get_ex(params, "data_b64", &data) &&
                 json_object_is_type(data, json_type_string) &&
                 b64_decode(json_object_get_string(data), (size_t)json_object_get_string_len(data),
                            &bin, &n) >= 0)
            stream_add(&out->streams[i], (const char *)bin, n);
    }
}

/* The last n bytes of s (n <= cap, n <= total) into buf. */
static void stream_tail(const struct mcp_stream *s, char *buf, size_t n)
{
    if (n == 0)
        return;
    size_t start = (size_t)(((uint64_t)s->total - n) % s->cap);
    size_t first = s->cap - start < n ? s->cap - start : n;

    memcpy(buf, s->ring + start, first);
    memcpy(buf + first, s->ring, n - first);
}

static size_t utf8_len(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0 && c >= 0xc2)
        return 2;
    if ((c & 0xf0) == 0xe0)
        return 3;
    if ((c & 0xf8) == 0xf0 && c <= 0xf4)
        return 4;
    return 0;
}

/* s[0..n) as text: valid UTF-8 sequences as they are, NUL and other bytes as '?'
 * (a host needs valid UTF-8; a cut may also have split a character). */
static void put_text(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len((unsigned char)s[i]), j;

        for (j = 1; l > 1 && j < l && i + j < n; j++)
            if (((unsigned char)s[i + j] & 0xc0) != 0x80)
                break;
        if (l == 0 || s[i] == '\0' || j < l) {
            fputc('?', f);
            i++;
            continue;
        }
        fwrite(s + i, 1, l, f);
        i += l;
    }
    if (n > 0 && s[n - 1] != '\n')
        fputc('\n', f);
}

/* The head and tail of a stream that does not fit `budget`. */
static void render_cut(FILE *f, const struct mcp_stream *s, const char *name, size_t budget)
{
    size_t head_want = budget / OUTPUT_HEAD_SHARE, tn = budget - head_want;
    _cleanup_free_ char *tail = malloc(tn + 1);
    size_t h = head_want, t0 = 0;

    if (!tail)
        return;
    stream_tail(s, tail, tn);
    /* Cut at line ends when there are any, so no line shows in part. */
    while (h > 0 && s->head[h - 1] != '\n')
        h--;
    if (h == 0)
        h = head_want;
    while (t0 < tn && tail[t0] != '\n')
        t0++;
    t0 = t0 < tn ? t0 + 1 : 0;
    fprintf(f, "--- %s: %" PRId64 " bytes, showing the first %zu and the last %zu ---\n", name,
            s->total, h, tn - t0);
    put_text(f, s->head, h);
    fprintf(f,
            "[... %" PRId64 " bytes of %s omitted here. To see them, run the command again "
            "with its output redirected to a file (e.g. `... > /tmp/out.txt 2>&1`) and read "
            "that file in parts with read_file (offset, length), or search it with exec and "
            "grep; or pass a larger max_output ...]\n",
            s->total - (int64_t)h - (int64_t)(tn - t0), name);
    put_text(f, tail + t0, tn - t0);
}

static void render_stream(FILE *f, const struct mcp_stream *s, const char *name, size_t budget)
{
    if (s->total == 0)
        fprintf(f, "--- %s: empty ---\n", name);
    else if ((uint64_t)s->total > budget)
        render_cut(f, s, name, budget);
    else {
        fprintf(f, "--- %s ---\n", name);
        put_text(f, s->head, (size_t)s->total);
    }
}

void mcp_output_render_all(FILE *f, const struct mcp_output *out)
{
    int64_t out_n = out->streams[0].total, err_n = out->streams[1].total;
    int64_t budget = out->budget > 0 ? out->budget : 0, err_budget;

    if (!out->streams[0].head)
        return;
    /* stderr is usually the shorter and the more telling: it gets what it needs up
     * to half the budget, or more when stdout leaves it over. */
    if (out_n >= budget / 2)
        err_budget = err_n < budget / 2 ? err_n : budget / 2;
    else
        err_budget = budget - out_n;
    render_stream(f, &out->streams[0], "stdout", (size_t)(budget - err_budget));
    if (err_n > 0) /* an empty stderr goes without saying */
        render_stream(f, &out->streams[1], "stderr", (size_t)err_budget);
}
