/* The lines of one connection not yet written, in order. Each line stays where it was
 * written (the buffer rpc_text_new() wrote it into, or json-c's buffer kept alive with its
 * object) and is written from there, its '\n' from a constant; the unwritten rest of the
 * first line is an offset. No copies: the socket gets the serialiser's bytes through
 * iovecs.
 * No loop, no sockets: the connection hands the iovecs to libuv and reports back
 * how many bytes went out. Loop thread only. */
#pragma once

#include <json-c/json.h>
#include <stddef.h>
#include <uv.h>

struct out_line {
    struct out_line *next;
    json_object *obj; /* NULL, or owns text (json-c's buffer of its serialisation) */
    char *buf;        /* NULL, or owns text (rpc_text_new()'s) */
    const char *text;
    size_t len;    /* of text; the line is len + 1 bytes with its '\n' */
    size_t off;    /* bytes of the line already written */
    size_t weight; /* memory the object holds besides text (its size hint) */
};

struct out_queue {
    struct out_line *head, *tail;
    size_t len;  /* bytes not yet written */
    size_t held; /* memory held: the texts not fully written and their objects' weights */
    unsigned n;  /* lines */
};

/* Queues o (taken over, also on failure) serialised as text of len bytes (what
 * rpc_serialise() returned for it; text lives in o). Returns 0 or -ENOMEM. */
int out_queue_push_text(struct out_queue *q, json_object *o, const char *text, size_t len,
                        size_t weight);
/* Queues the text of len bytes in buf (taken over, also on failure: rpc_text_new()'s). The
 * weight is what its object held (the object is gone: the weight keeps the accounting of
 * a line the same however it was written). Returns 0 or -ENOMEM. */
int out_queue_push_buf(struct out_queue *q, char *buf, size_t len, size_t weight);
/* Writes o (taken over, also on failure; freed once written) with rpc_text_new() and
 * queues it. Returns 0 or -ENOMEM. */
int out_queue_push(struct out_queue *q, json_object *o, size_t weight);
/* Fills iov (libuv's, laid out as struct iovec) with the unwritten bytes from the head, at
 * most max entries (two per line: its text and its '\n'). Returns the number of entries;
 * *ret_bytes their bytes. */
unsigned out_queue_iov(const struct out_queue *q, uv_buf_t *iov, unsigned max, size_t *ret_bytes);
/* n bytes from the head were written: lines written whole are freed, the rest of a
 * partly written one is kept as its offset. n is at most q->len. */
void out_queue_advance(struct out_queue *q, size_t n);
/* Moves up to max lines from the head of from to the tail of to. */
void out_queue_move(struct out_queue *to, struct out_queue *from, unsigned max);
/* Frees every line. */
void out_queue_clear(struct out_queue *q);
