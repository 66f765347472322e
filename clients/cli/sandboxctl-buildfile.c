/* The parser of the build file of `sandboxctl template build`. See sandboxctl-buildfile.h. */
#include "sandboxctl-buildfile.h"

#include "macro.h"

#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SUPPORTED "FROM, RUN, COPY, ENV, WORKDIR, USER"
#define NAME_MAX_LEN 32 /* a template's name (PARAMS_TEMPLATE_MAX), a user's (EXEC_USER_MAX) */
#define ENV_NAME_MAX_LEN 255

static const char *const kind_names[] = {"FROM", "RUN", "COPY", "ENV", "WORKDIR", "USER"};

const char *buildfile_kind_name(enum buildfile_kind kind)
{
    return (size_t)kind < sizeof kind_names / sizeof kind_names[0] ? kind_names[kind] : "?";
}

__attribute__((format(printf, 3, 4))) static int fail(struct buildfile_error *err, unsigned line,
                                                      const char *fmt, ...)
{
    va_list ap;

    if (err) {
        err->line = line;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static void step_done(struct buildfile_step *s)
{
    free(s->text);
    free(s->arg);
    for (size_t i = 0; s->words && i < s->n_words; i++)
        free(s->words[i]);
    free(s->words);
    *s = (struct buildfile_step){};
}

void buildfile_done(struct buildfile *f)
{
    for (size_t i = 0; f && i < f->n_steps; i++)
        step_done(&f->steps[i]);
    if (f) {
        free(f->steps);
        *f = (struct buildfile){};
    }
}

/* Appends a copy of w[0..n) to s->words (kept NULL-terminated). */
static int add_word(struct buildfile_step *s, const char *w, size_t n)
{
    char **v = realloc(s->words, (s->n_words + 2) * sizeof *v);

    if (!v)
        return -ENOMEM;
    s->words = v;
    if (!(v[s->n_words] = strndup(w, n)))
        return -ENOMEM;
    v[++s->n_words] = NULL;
    return 0;
}

int buildfile_source_ok(const char *src)
{
    const char *p = src;

    if (!src[0] || src[0] == '/')
        return 0;
    while (*p) {
        size_t n = strcspn(p, "/");

        if (n == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        p += n;
        p += *p == '/';
    }
    return 1;
}

/* A JSON array of strings (the exec form) into s->words: 1, 0 when rest is not one. */
static int json_words(struct buildfile_step *s, const char *rest)
{
    json_object *a = rest[0] == '[' ? json_tokener_parse(rest) : NULL;
    size_t n = a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
    int r = n > 0;

    for (size_t i = 0; r > 0 && i < n; i++)
        if (!json_object_is_type(json_object_array_get_idx(a, i), json_type_string))
            r = 0;
    for (size_t i = 0; r > 0 && i < n; i++) {
        json_object *v = json_object_array_get_idx(a, i);

        if (add_word(s, json_object_get_string(v), (size_t)json_object_get_string_len(v)) < 0)
            r = -ENOMEM;
    }
    json_object_put(a);
    return r;
}

/* Whitespace-separated words of rest into s->words. */
static int split_words(struct buildfile_step *s, const char *rest)
{
    while (*rest) {
        size_t n = strcspn(rest, " \t");

        if (n > 0 && add_word(s, rest, n) < 0)
            return -ENOMEM;
        rest += n;
        rest += strspn(rest, " \t");
    }
    return 0;
}

static bool env_name_ok(const char *k, size_t n)
{
    if (n == 0 || n > ENV_NAME_MAX_LEN || isdigit((unsigned char)k[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)k[i]) && k[i] != '_')
            return false;
    return true;
}

/* One value of `ENV a=b` at *pp (quotes and backslashes as a shell word), into buf. */
static int env_value(const char **pp, char *buf, size_t *ret_n)
{
    const char *p = *pp;
    size_t n = 0;

    while (*p && *p != ' ' && *p != '\t') {
        if (*p == '"' || *p == '\'') {
            char q = *p++;

            while (*p && *p != q) {
                if (q == '"' && *p == '\\' && (p[1] == '"' || p[1] == '\\'))
                    p++;
                buf[n++] = *p++;
            }
            if (*p != q)
                return -EINVAL;
            p++;
        } else if (*p == '\\' && p[1]) {
            buf[n++] = p[1];
            p += 2;
        } else
            buf[n++] = *p++;
    }
    buf[n] = '\0';
    *pp = p;
    *ret_n = n;
    return 0;
}

static int parse_env(struct buildfile_step *s, const char *rest, struct buildfile_error *err)
{
    size_t n = strcspn(rest, " \t=");
    char *buf;
    int r = 0;

    if (rest[n] != '=') { /* ENV name value */
        const char *v = rest + n + strspn(rest + n, " \t");

        if (!env_name_ok(rest, n) || !*v)
            return fail(err, s->line,
                        "ENV needs NAME=VALUE or NAME VALUE, NAME [A-Za-z_][A-Za-z0-9_]*");
        if (add_word(s, rest, n) < 0 || add_word(s, v, strlen(v)) < 0)
            return -ENOMEM;
        return 0;
    }
    buf = malloc(strlen(rest) + 1);
    if (!buf)
        return -ENOMEM;
    while (r == 0 && *rest) {
        size_t vn;

        n = strcspn(rest, " \t=");
        if (rest[n] != '=' || !env_name_ok(rest, n)) {
            r = fail(err, s->line, "ENV: \"%.*s\" is not NAME=VALUE (NAME [A-Za-z_][A-Za-z0-9_]*)",
                     (int)MIN(strcspn(rest, " \t"), (size_t)64), rest);
            break;
        }
        r = add_word(s, rest, n);
        rest += n + 1;
        if (r == 0 && env_value(&rest, buf, &vn) < 0)
            r = fail(err, s->line, "ENV: an unterminated quote");
        if (r == 0)
            r = add_word(s, buf, vn);
        rest += strspn(rest, " \t");
    }
    free(buf);
    return r;
}

/* A template's or user's name: [A-Za-z0-9._-] (lower case and '-' only for a template). */
static bool name_ok(const char *s, bool template)
{
    size_t n = strlen(s);
    const char *set = template
                          ? "abcdefghijklmnopqrstuvwxyz0123456789-"
                          : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";

    return n > 0 && n <= NAME_MAX_LEN && strspn(s, set) == n && s[0] != '-';
}

static int parse_copy(struct buildfile_step *s, const char *rest, struct buildfile_error *err)
{
    int r = rest[0] == '[' ? json_words(s, rest) : split_words(s, rest);

    if (r < 0)
        return r;
    if (rest[0] == '[' && r == 0)
        return fail(err, s->line, "COPY: not a JSON array of strings");
    if (s->n_words > 0 && strncmp(s->words[0], "--", 2) == 0)
        return fail(err, s->line, "COPY %s: flags are not supported", s->words[0]);
    if (s->n_words < 2)
        return fail(err, s->line, "COPY needs a source and a destination");
    for (size_t i = 0; i + 1 < s->n_words; i++)
        if (!buildfile_source_ok(s->words[i]))
            return fail(err, s->line,
                        "COPY source \"%.128s\" is outside the context (absolute, or with '..')",
                        s->words[i]);
    return 0;
}

static int parse_from(struct buildfile_step *s, const char *rest, struct buildfile_error *err)
{
    int r = split_words(s, rest);

    if (r < 0)
        return r;
    if (s->n_words > 1 && strcasecmp(s->words[1], "AS") == 0)
        return fail(err, s->line, "FROM ... AS: multi-stage builds are not supported");
    if (s->n_words != 1 || !name_ok(s->words[0], true))
        return fail(err, s->line, "FROM needs one template name ([a-z0-9-], 1..32 characters)");
    s->arg = strdup(s->words[0]);
    return s->arg ? 0 : -ENOMEM;
}

static int parse_user(struct buildfile_step *s, const char *rest, struct buildfile_error *err)
{
    if (strchr(rest, ':'))
        return fail(err, s->line, "USER user:group is not supported (the user's groups apply)");
    if (!name_ok(rest, false))
        return fail(err, s->line,
                    "USER needs one user name or uid (A-Z a-z 0-9 . _ -, 1..32 characters)");
    s->arg = strdup(rest);
    return s->arg ? 0 : -ENOMEM;
}

/* The arguments of s (its kind set) from rest (trimmed, non-empty). */
static int parse_args(struct buildfile_step *s, const char *rest, struct buildfile_error *err)
{
    int r;

    switch (s->kind) {
    case BUILDFILE_FROM:
        return parse_from(s, rest, err);
    case BUILDFILE_RUN:
        r = json_words(s, rest);
        if (r != 0) /* the exec form */
            return MIN(r, 0);
        s->arg = strdup(rest);
        return s->arg ? 0 : -ENOMEM;
    case BUILDFILE_COPY:
        return parse_copy(s, rest, err);
    case BUILDFILE_ENV:
        return parse_env(s, rest, err);
    case BUILDFILE_WORKDIR:
        s->arg = strdup(rest);
        return s->arg ? 0 : -ENOMEM;
    case BUILDFILE_USER:
        return parse_user(s, rest, err);
    }
    return -EINVAL;
}

/* One instruction (continuations joined) starting at line into f. */
static int parse_instruction(struct buildfile *f, char *ins, unsigned line,
                             struct buildfile_error *err)
{
    struct buildfile_step s = {.line = line};
    size_t kn, k;
    char *rest, *end;
    int r;

    ins += strspn(ins, " \t");
    kn = strcspn(ins, " \t");
    rest = ins + kn + strspn(ins + kn, " \t");
    for (end = rest + strlen(rest); end > rest && (end[-1] == ' ' || end[-1] == '\t');)
        *--end = '\0';
    for (k = 0; k < sizeof kind_names / sizeof kind_names[0]; k++)
        if (strlen(kind_names[k]) == kn && strncasecmp(ins, kind_names[k], kn) == 0)
            break;
    if (k == sizeof kind_names / sizeof kind_names[0])
        return fail(err, line, "unknown instruction \"%.*s\" (supported: " SUPPORTED ")",
                    (int)MIN(kn, (size_t)32), ins);
    s.kind = (enum buildfile_kind)k;
    if (f->n_steps == 0 && s.kind != BUILDFILE_FROM)
        return fail(err, line, "the file must start with FROM <template>");
    if (f->n_steps > 0 && s.kind == BUILDFILE_FROM)
        return fail(err, line, "a second FROM: multi-stage builds are not supported");
    if (!*rest)
        return fail(err, line, "%s needs arguments", kind_names[k]);
    if (f->n_steps >= BUILDFILE_MAX_STEPS)
        return fail(err, line, "more than %d instructions", BUILDFILE_MAX_STEPS);
    r = parse_args(&s, rest, err);
    if (r == 0 && asprintf(&s.text, "%s %s", kind_names[k], rest) < 0)
        r = -ENOMEM;
    if (r == 0) {
        struct buildfile_step *v = realloc(f->steps, (f->n_steps + 1) * sizeof *v);

        if (!v)
            r = -ENOMEM;
        else {
            f->steps = v;
            f->steps[f->n_steps++] = s;
            return 0;
        }
    }
    step_done(&s);
    return r;
}

/* Whether the line (n bytes) is blank or a comment. */
static bool skipped(const char *l, size_t n)
{
    size_t b = 0;

    while (b < n && (l[b] == ' ' || l[b] == '\t'))
        b++;
    return b == n || l[b] == '#';
}

int buildfile_parse(const char *text, size_t len, struct buildfile *ret,
                    struct buildfile_error *err)
{
    struct buildfile f = {};
    char *cur = malloc(len + 1);
    size_t cn = 0, pos = 0;
    unsigned lineno = 0, start = 0;
    int r = cur ? 0 : -ENOMEM;

    if (len > BUILDFILE_MAX_BYTES)
        r = fail(err, 0, "larger than %d bytes", BUILDFILE_MAX_BYTES);
    else if (r == 0 && memchr(text, '\0', len))
        r = fail(err, 0, "not a text file (it holds NUL bytes)");
    while (r == 0 && pos < len) {
        const char *l = text + pos, *nl = memchr(l, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - l) : len - pos;
        bool cont;

        pos += n + (nl != NULL);
        lineno++;
        if (n > 0 && l[n - 1] == '\r')
            n--;
        if (skipped(l, n))
            continue; /* comments and blank lines, also between continued lines */
        if (cn == 0)
            start = lineno;
        while (n > 0 && (l[n - 1] == ' ' || l[n - 1] == '\t'))
            n--;
        cont = n > 0 && l[n - 1] == '\\';
        memcpy(cur + cn, l, n - cont);
        cn += n - cont;
        cur[cn] = '\0';
        if (!cont) {
            r = parse_instruction(&f, cur, start, err);
            cn = 0;
        }
    }
    if (r == 0 && cn > 0)
        r = parse_instruction(&f, cur, start, err);
    if (r == 0 && f.n_steps == 0)
        r = fail(err, 0, "no FROM: the file must start with FROM <template>");
    free(cur);
    if (r < 0) {
        buildfile_done(&f);
        return r;
    }
    *ret = f;
    return 0;
}
