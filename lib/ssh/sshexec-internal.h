/* Shared between the exec modules of lib/ssh (sshexec.c, sshexec-line.c). */
#pragma once

#include <stdbool.h>

#include "buf.h"
#include "sshexec.h"

#define MARKER_VAR "SANDBOXD_EXEC_ID"

/* A command line being built: the first error is kept and ends the building. */
struct sbuf {
    struct buf buf;
    int error;
};
#define SBUF_INIT                                                                                  \
    {                                                                                              \
        .buf = {.max = EXEC_LINE_MAX }                                                             \
    }

void sb_add(struct sbuf *b, const char *s, size_t n);
void sb_puts(struct sbuf *b, const char *s);
/* One POSIX shell word for s. */
void sb_quote(struct sbuf *b, const char *s);
/* The line built (*ret, to free) or the first error. */
int sb_finish(struct sbuf *b, char **ret);

/* The limits of proto/api-limits.h: 0, -EINVAL or -E2BIG. */
int sshexec_params_validate(const struct sshexec_params *p);

/* sshexec_build_command() with the exec helper (sshexec.c): helper is its path in the
 * container, or NULL for the shell wrapper alone. With a helper the line execs it when the
 * file is there and executable, and runs the shell wrapper otherwise. */
int sshexec_build_command_with(const struct sshexec_params *params, const char *marker,
                               const char *helper, char **ret);
