/* A growable byte buffer. See buf.h. */
#include "buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int buf_grow(char **data, size_t *cap_inout, size_t need, size_t ceiling)
{
    size_t cap;
    char *d;

    if (need <= *cap_inout)
        return 0;
    cap = *cap_inout ? *cap_inout : BUF_MIN_ALLOC;
    while (cap < need && cap <= SIZE_MAX / 2)
        cap *= 2;
    if (ceiling && cap > ceiling)
        cap = ceiling;
    if (cap < need)
        cap = need;
    d = realloc(*data, cap);
    if (!d)
        return -ENOMEM;
    *data = d;
    *cap_inout = cap;
    return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
    int r;

    if (b->max && (n > b->max || b->len > b->max - n))
        return -E2BIG;
    if (n >= SIZE_MAX - b->len)
        return -ENOMEM;
    /* the NUL after the bytes included */
    r = buf_grow(&b->data, &b->cap, b->len + n + 1, b->max ? b->max + 1 : 0);
    if (r < 0)
        return r;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

void buf_clear(struct buf *b, bool release)
{
    b->len = 0;
    if (release) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    } else if (b->data)
        b->data[0] = '\0';
}

char *buf_steal(struct buf *b)
{
    char *d = b->data;

    *b = (struct buf){.max = b->max};
    return d;
}
