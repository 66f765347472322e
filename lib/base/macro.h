/* Small helpers shared by every layer: cleanup attributes, ownership transfer,
 * array sizes. Header only; no dependencies beyond libc. */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/param.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

static inline void freep(void *p)
{
    free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        (void)close(*fd);
        errno = saved;
    }
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f)
{
    if (*f)
        (void)fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Hand ownership over: returns the value and clears the variable. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _take_tmp = (p);                                                             \
        (p) = NULL;                                                                                \
        _take_tmp;                                                                                 \
    })
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _take_fd = (fd);                                                                       \
        (fd) = -1;                                                                                 \
        _take_fd;                                                                                  \
    })

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
/* <sys/param.h> (pulled in by <uv.h> and others) defines MIN and MAX without
 * guards: it is included above and its definitions replaced here, so that this
 * header and any other may come in any order. */
#undef MIN
#undef MAX
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Negative errno from a -1/errno style call. */
#define RET_NERRNO(expr)                                                                           \
    ({                                                                                             \
        long _r = (long)(expr);                                                                    \
        _r < 0 ? -errno : (int)_r;                                                                 \
    })

static inline const char *strna(const char *s)
{
    return s ? s : "n/a";
}
