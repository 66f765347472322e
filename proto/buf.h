/* A growable byte buffer. Pure: no I/O, no loop.
 *
 * The bytes are data[0, len); a NUL always follows them once anything was
 * appended, so that text can be read in place. The capacity grows
 * geometrically from BUF_MIN_ALLOC. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define BUF_MIN_ALLOC 4096

struct buf {
    char *data;
    size_t len;
    size_t cap; /* bytes allocated at data, the NUL included */
    size_t max; /* the most bytes it holds (an append past it fails); 0: no limit */
};

/* Grows the allocation *data of *cap bytes to at least need bytes: the capacity
 * doubles from BUF_MIN_ALLOC (or *cap), but stays at most ceiling when that is
 * enough (0: no ceiling). Returns 0 or -ENOMEM (then nothing changed). For
 * buffers with more fields than struct buf has. */
int buf_grow(char **data, size_t *cap, size_t need, size_t ceiling);
/* Appends n bytes and a NUL after them. Returns 0, -E2BIG when the buffer would
 * hold more than max, or -ENOMEM; on failure the buffer is unchanged. */
int buf_append(struct buf *b, const void *p, size_t n);
/* Drops every byte; with release, frees the memory too (max is kept). */
void buf_clear(struct buf *b, bool release);
/* Hands the bytes over (NUL-terminated; NULL when nothing was ever appended) and
 * leaves the buffer empty. */
char *buf_steal(struct buf *b);
