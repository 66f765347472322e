/* Newline-delimited framing with a hard cap on line length. Pure: no I/O, no loop.
 * Every NDJSON reader of sandboxd uses it: the daemon's connections, the C client
 * library, sandboxctl and its MCP server.
 *
 * Bytes are appended as they arrive (in any split); complete lines are taken out
 * one at a time. A line longer than max_line (excluding the '\n') is an error.
 * By default the stream cannot resync after it: the caller answers once and
 * closes. With frame_buf_set_resync() the overlong line is reported once and
 * skipped up to its '\n', and the lines after it are framed as usual (for a
 * reader that must go on, such as the MCP server's standard input). */
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
    bool resync;   /* skip an overlong line instead of stopping */
    bool skipping; /* resync: dropping the rest of an overlong line */
    bool overlong; /* resync: an overlong line is still to be reported */
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

/* Resync mode (see the top): frame_buf_append() then never fails with -EMSGSIZE;
 * frame_buf_next() returns -EMSGSIZE once per overlong line, in its place among
 * the lines. */
void frame_buf_set_resync(struct frame_buf *f, bool resync);

/* At the end of the input: takes an unterminated last line as complete. Returns
 * 1 with *ret_line and *ret_len as frame_buf_next() (no complete line may be held:
 * take them first), 0 when nothing is held, -EMSGSIZE when the rest is longer
 * than max_line, -ENOMEM. */
int frame_buf_finish(struct frame_buf *f, char **ret_line, size_t *ret_len);

/* Bytes held that are not yet part of a returned line. */
size_t frame_buf_pending(const struct frame_buf *f);
