/* The file `sandboxctl template build` reads: a subset of the Dockerfile format, parsed
 * here with no I/O (sandboxctl-buildfile.c; the build itself: sandboxctl-build.c).
 *
 *   FROM <template>                  first, once: the template the build starts from
 *   RUN <shell command>              sh -c <command>
 *   RUN ["prog", "arg", ...]         exec form: the argv as given
 *   COPY <src>... <dest>             from the context folder; JSON form ["src", "dest"] too
 *   ENV <name>=<value> ...           one or more; values may be "double" or 'single' quoted
 *   ENV <name> <value>               the rest of the line is the value
 *   WORKDIR <path>                   relative: to the previous WORKDIR (or /)
 *   USER <name or uid>
 *
 * Instructions are case-insensitive; a line ending in '\' continues on the next; lines whose
 * first non-blank character is '#' are comments (also between continued lines); blank lines
 * are skipped. No variable substitution, no globs, no COPY/ADD flags. Anything else is
 * refused with its line number. */
#pragma once

#include <stddef.h>

#define BUILDFILE_MAX_BYTES (1024 * 1024) /* the largest file read */
#define BUILDFILE_MAX_STEPS 1000

enum buildfile_kind {
    BUILDFILE_FROM,
    BUILDFILE_RUN,
    BUILDFILE_COPY,
    BUILDFILE_ENV,
    BUILDFILE_WORKDIR,
    BUILDFILE_USER,
};

struct buildfile_step {
    enum buildfile_kind kind;
    unsigned line; /* where the instruction starts (1-based) */
    char *text;    /* the instruction as one line (continuations joined), for progress */
    /* FROM: the name; RUN (shell form): the command; WORKDIR: the path; USER: the user */
    char *arg;
    /* RUN (exec form): the argv; COPY: the sources then the destination; ENV: name, value,
     * name, value... (NULL-terminated, n_words entries) */
    char **words;
    size_t n_words;
};

struct buildfile {
    struct buildfile_step *steps; /* steps[0] is the FROM */
    size_t n_steps;
};

struct buildfile_error {
    unsigned line; /* 0: the file as a whole */
    char message[256];
};

/* Parses text (len bytes, need not be NUL-terminated). 0 and *ret filled, -EINVAL with err
 * filled (the first problem found), -ENOMEM. */
int buildfile_parse(const char *text, size_t len, struct buildfile *ret,
                    struct buildfile_error *err);
void buildfile_done(struct buildfile *f);
/* The name of kind ("FROM", ...). */
const char *buildfile_kind_name(enum buildfile_kind kind);
/* Whether a COPY source stays in the context by its text: relative, no ".." component, not
 * empty. (The build checks symbolic links on the disk.) */
int buildfile_source_ok(const char *src);
