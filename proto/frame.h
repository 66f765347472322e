/* Newline-delimited framing with a hard cap on line length. Pure: no I/O, no loop.
 *
 * Bytes are appended as they arrive (in any split); complete lines are taken out
 * one at a time. A line longer than max_line (excluding the '\n') is an error
 * from which the stream cannot resync: the caller answers once and closes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct frame_buf {
    char *data;
    size_t len;     /* bytes held */
    size_t start;   /* offset of the first unconsumed byte */
    size_t scanned; /* bytes after start already known to hold no '\n' */
    size_t cap;
    size_t max_line;
    bool overflow; /* sticky: a line exceeded max_line */
};

void frame_buf_init(struct frame_buf *f, size_t max_line);
void frame_buf_done(struct frame_buf *f);

/* Appends n bytes. Returns 0, -ENOMEM, or -EMSGSIZE when the pending
 * (unterminated) line already exceeds max_line; bytes are then discarded. */
int frame_buf_append(struct frame_buf *f, const void *p, size_t n);

/* Takes the next complete line. Returns 1 with *ret_line pointing at the line
 * (NUL-terminated in place, without the '\n'; a trailing '\r' is kept) and
 * *ret_len its length, valid until the next append/next call; 0 when no
 * complete line is held; -EMSGSIZE once a line exceeded max_line. */
int frame_buf_next(struct frame_buf *f, char **ret_line, size_t *ret_len);

/* Bytes held that are not yet part of a returned line. */
size_t frame_buf_pending(const struct frame_buf *f);
