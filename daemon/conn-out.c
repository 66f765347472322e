#include "conn-out.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "macro.h"
#include "rpc.h"

static const char newline[] = "\n";

static size_t line_held(const struct out_line *l)
{
    return l->len + 1 + l->weight;
}

static void out_line_free(struct out_line *l)
{
    json_object_put(l->obj);
    free(l->buf);
    free(l);
}

static int out_queue_add(struct out_queue *q, json_object *o, char *buf, const char *text,
                         size_t len, size_t weight)
{
    struct out_line *l = malloc(sizeof *l);

    if (!l) {
        json_object_put(o);
        free(buf);
        return -ENOMEM;
    }
    *l = (struct out_line){.obj = o, .buf = buf, .text = text, .len = len, .weight = weight};
    if (q->tail)
        q->tail->next = l;
    else
        q->head = l;
    q->tail = l;
    q->len += len + 1;
    q->held += line_held(l);
    q->n++;
    return 0;
}

int out_queue_push_text(struct out_queue *q, json_object *o, const char *text, size_t len,
                        size_t weight)
{
    return out_queue_add(q, o, NULL, text, len, weight);
}

int out_queue_push_buf(struct out_queue *q, char *buf, size_t len, size_t weight)
{
    return out_queue_add(q, NULL, buf, buf, len, weight);
}

int out_queue_push(struct out_queue *q, json_object *o, size_t weight)
{
    char *buf;
    size_t len;
    int r = rpc_text_new(o, weight, &buf, &len);

    json_object_put(o);
    if (r < 0)
        return r;
    return out_queue_push_buf(q, buf, len, weight);
}

unsigned out_queue_iov(const struct out_queue *q, uv_buf_t *iov, unsigned max, size_t *ret_bytes)
{
    unsigned k = 0;
    size_t bytes = 0;

    for (const struct out_line *l = q->head; l && k + 2 <= max; l = l->next) {
        if (l->off < l->len)
            iov[k++] = uv_buf_init((char *)l->text + l->off, (unsigned)(l->len - l->off));
        iov[k++] = uv_buf_init((char *)newline, 1);
        bytes += l->len + 1 - l->off;
    }
    *ret_bytes = bytes;
    return k;
}

/* Takes the head line off q (its bytes, written or not, leave the counts). */
static struct out_line *out_queue_pop(struct out_queue *q)
{
    struct out_line *l = q->head;

    q->head = l->next;
    if (!q->head)
        q->tail = NULL;
    l->next = NULL;
    q->len -= l->len + 1 - l->off;
    q->held -= line_held(l) - l->off;
    q->n--;
    return l;
}

void out_queue_advance(struct out_queue *q, size_t n)
{
    assert(n <= q->len);
    while (n > 0 && q->head) {
        struct out_line *l = q->head;
        size_t rest = l->len + 1 - l->off;

        if (n < rest) {
            l->off += n;
            q->len -= n;
            q->held -= n;
            return;
        }
        n -= rest;
        out_line_free(out_queue_pop(q));
    }
}

void out_queue_move(struct out_queue *to, struct out_queue *from, unsigned max)
{
    for (unsigned i = 0; i < max && from->head; i++) {
        struct out_line *l = out_queue_pop(from);

        if (to->tail)
            to->tail->next = l;
        else
            to->head = l;
        to->tail = l;
        to->len += l->len + 1 - l->off;
        to->held += line_held(l) - l->off;
        to->n++;
    }
}

void out_queue_clear(struct out_queue *q)
{
    while (q->head)
        out_line_free(out_queue_pop(q));
    assert(q->len == 0 && q->n == 0);
    q->held = 0;
}
