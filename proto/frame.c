/* Newline-delimited framing with a hard cap on line length. See frame.h.
 *
 * Invariant: the bytes [start, start + scanned) hold no '\n'; when
 * start + scanned < len after a scan, data[start + scanned] is the '\n' that
 * ends the first pending line. Every byte is therefore looked at once, however
 * the input is split. */
#include "frame.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

void frame_buf_init(struct frame_buf *f, size_t max_line)
{
    *f = (struct frame_buf){.max_line = max_line};
}

void frame_buf_done(struct frame_buf *f)
{
    if (!f)
        return;
    free(f->data);
    *f = (struct frame_buf){.max_line = f->max_line, .overflow = f->overflow, .resync = f->resync};
}

static void frame_set_overflow(struct frame_buf *f);

void frame_buf_set_resync(struct frame_buf *f, bool resync)
{
    f->resync = resync;
}

/* The first pending line is longer than max_line; complete: its '\n' is held (at
 * start + scanned). Stops the stream, or in resync mode drops what is held of the
 * line and notes it for frame_buf_next(). Returns -EMSGSIZE. */
static int frame_overlong(struct frame_buf *f, bool complete)
{
    if (!f->resync) {
        frame_set_overflow(f);
        return -EMSGSIZE;
    }
    f->start += f->scanned + (complete ? 1 : 0);
    f->scanned = 0;
    f->skipping = !complete;
    f->overlong = true;
    if (f->start == f->len)
        f->start = f->len = 0;
    return -EMSGSIZE;
}

static void frame_set_overflow(struct frame_buf *f)
{
    free(f->data);
    f->data = NULL;
    f->len = f->start = f->scanned = f->cap = 0;
    f->overflow = true;
}

/* Finds the end of the first pending line. Returns 1 when it is complete, 0
 * when not, -EMSGSIZE when it is (or already was) longer than max_line. */
static int frame_scan(struct frame_buf *f)
{
    size_t held = f->len - f->start;
    const char *nl;

    if (f->overflow)
        return -EMSGSIZE;
    if (f->scanned < held) {
        nl = memchr(f->data + f->start + f->scanned, '\n', held - f->scanned);
        if (nl) {
            f->scanned = (size_t)(nl - (f->data + f->start));
            if (f->scanned > f->max_line)
                return frame_overlong(f, true);
            return 1;
        }
        f->scanned = held;
    }
    if (f->scanned > f->max_line)
        return frame_overlong(f, false);
    return 0;
}

static void frame_compact(struct frame_buf *f)
{
    if (f->start == 0)
        return;
    if (f->len > f->start)
        memmove(f->data, f->data + f->start, f->len - f->start);
    f->len -= f->start;
    f->start = 0;
}

int frame_buf_append(struct frame_buf *f, const void *p, size_t n)
{
    size_t bound;
    int r;

    if (f->overflow)
        return -EMSGSIZE;
    if (f->skipping) {
        /* resync: the rest of an overlong line, up to its '\n', is dropped */
        const char *nl = n ? memchr(p, '\n', n) : NULL;

        if (!nl)
            return 0;
        f->skipping = false;
        n -= (size_t)(nl + 1 - (const char *)p);
        p = nl + 1;
    }
    if (n == 0)
        return 0;

    frame_compact(f);
    if (n > SIZE_MAX - f->len)
        return -ENOMEM;
    /* Grow geometrically, but never much past what one maximal line plus this
     * chunk needs: memory stays bounded by max_line + one read. */
    bound = f->max_line < SIZE_MAX - 1 - n ? f->max_line + 1 + n : SIZE_MAX;
    r = buf_grow(&f->data, &f->cap, f->len + n, bound);
    if (r < 0)
        return r;
    memcpy(f->data + f->len, p, n);
    f->len += n;

    r = frame_scan(f);
    if (r < 0 && f->resync)
        return 0; /* frame_buf_next() reports it, in its place */
    return r < 0 ? r : 0;
}

int frame_buf_next(struct frame_buf *f, char **ret_line, size_t *ret_len)
{
    size_t n;
    int r;

    if (f->overlong) {
        f->overlong = false;
        return -EMSGSIZE;
    }
    r = frame_scan(f);
    if (r == -EMSGSIZE && f->resync)
        f->overlong = false; /* reported now */
    if (r <= 0)
        return r;

    n = f->scanned;
    f->data[f->start + n] = '\0';
    *ret_line = f->data + f->start;
    *ret_len = n;
    f->start += n + 1;
    f->scanned = 0;
    if (f->start == f->len)
        f->start = f->len = 0; /* nothing held: the next append needs no memmove */
    return 1;
}

int frame_buf_finish(struct frame_buf *f, char **ret_line, size_t *ret_len)
{
    size_t n;
    int r;

    r = frame_scan(f);
    if (r < 0) {
        f->overlong = false; /* reported now */
        return r;
    }
    if (r > 0)
        return -EINVAL; /* a complete line is still held */
    n = f->len - f->start;
    if (f->skipping || n == 0) {
        f->skipping = false;
        f->start = f->len = f->scanned = 0;
        return 0;
    }
    /* room for the NUL after the last byte */
    r = buf_grow(&f->data, &f->cap, f->len + 1, 0);
    if (r < 0)
        return r;
    f->data[f->len] = '\0';
    *ret_line = f->data + f->start;
    *ret_len = n;
    f->start = f->len = f->scanned = 0;
    return 1;
}

size_t frame_buf_pending(const struct frame_buf *f)
{
    return f->len - f->start;
}
