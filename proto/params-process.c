/* Params of process.*. See params-process.h. The fields process.start shares with
 * sandbox.exec, and process.write's data, go through the parsers of params.c (on a copy of
 * the params holding only those fields), so both methods accept and refuse them alike. */
#include "params-process.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "params-internal.h"

static bool present(json_object *params, const char *name)
{
    return params && json_object_object_get_ex(params, name, NULL);
}

static int get_int(json_object *params, const char *name, int64_t min, int64_t max, int64_t def,
                   int64_t *ret, struct params_error *err)
{
    json_object *v = NULL;
    bool is_int;
    int64_t x;

    if (!present(params, name)) {
        *ret = def;
        return 0;
    }
    json_object_object_get_ex(params, name, &v);
    is_int = v && json_object_is_type(v, json_type_int);
    errno = 0;
    x = is_int ? json_object_get_int64(v) : 0;
    if (!is_int || errno || x < min || x > max)
        return params_fail(err, name, "must be an integer in %lld..%lld", (long long)min,
                           (long long)max);
    *ret = x;
    return 0;
}

/* Runs another parser on a copy of params holding only names (renamed from[i] -> to[i]
 * where given). */
static json_object *subset(json_object *params, const char *const *names)
{
    json_object *o = json_object_new_object();

    if (!o)
        return NULL;
    for (size_t i = 0; names[i]; i++) {
        json_object *v;

        if (params && json_object_object_get_ex(params, names[i], &v))
            json_object_object_add(o, names[i], json_object_get(v));
    }
    return o;
}

static int parse_process(json_object *params, char ret[PARAMS_PROCESS_ID_LEN + 1],
                         struct params_error *err)
{
    json_object *v = NULL;
    const char *s;

    if (!params || !json_object_object_get_ex(params, "process", &v))
        return params_fail(err, "process", "missing");
    if (!v || !json_object_is_type(v, json_type_string))
        return params_fail(err, "process", "must be a string");
    s = json_object_get_string(v);
    if (strlen(s) != PARAMS_PROCESS_ID_LEN || strncmp(s, "pr-", 3) != 0 ||
        strspn(s + 3, "0123456789abcdef") != PARAMS_PROCESS_ID_LEN - 3)
        return params_fail(err, "process", "must be a process id (pr- and 16 hex digits)");
    memcpy(ret, s, PARAMS_PROCESS_ID_LEN + 1);
    return 0;
}

/* ---- process.start ---- */

static int start_sizes(const struct params_process_start *p, struct params_error *err)
{
    size_t bytes = 0;

    if (p->command && strlen(p->command) > PARAMS_PROCESS_COMMAND_MAX)
        return params_fail(err, "command", "longer than 8192 bytes");
    for (size_t i = 0; p->argv && p->argv[i]; i++)
        bytes += strlen(p->argv[i]) + 1;
    if (bytes > PARAMS_PROCESS_ARGV_BYTES_MAX)
        return params_fail(err, "argv", "more than 8192 bytes");
    bytes = 0;
    for (size_t i = 0; i < p->env.n; i++)
        bytes += strlen(p->env.items[i].key) + strlen(p->env.items[i].value);
    if (bytes > PARAMS_PROCESS_ENV_BYTES_MAX)
        return params_fail(err, "env", "more than 4096 bytes of names and values");
    return 0;
}

/* pty: {"cols": C, "rows": R}, both required, 1..PARAMS_PROCESS_PTY_MAX; implies stdin. */
static int parse_pty(json_object *params, struct params_process_start *p, struct params_error *err)
{
    static const char *const names[] = {"cols", "rows"};
    json_object *o = NULL;
    int64_t v[2];

    if (!present(params, "pty"))
        return 0;
    json_object_object_get_ex(params, "pty", &o);
    if (!o || !json_object_is_type(o, json_type_object) || json_object_object_length(o) != 2)
        return params_fail(err, "pty", "must be an object {\"cols\": C, \"rows\": R}");
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        json_object *x = NULL;

        if (!json_object_object_get_ex(o, names[i], &x) || !x ||
            !json_object_is_type(x, json_type_int))
            return params_fail(err, "pty", "cols and rows must be integers in 1..1000");
        errno = 0;
        v[i] = json_object_get_int64(x);
        if (errno || v[i] < 1 || v[i] > PARAMS_PROCESS_PTY_MAX)
            return params_fail(err, "pty", "cols and rows must be integers in 1..1000");
    }
    p->pty = true;
    p->pty_cols = (unsigned)v[0];
    p->pty_rows = (unsigned)v[1];
    p->has_stdin = true;
    return 0;
}

static int params_process_start_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id",        "command",   "argv", "env",
                                          "cwd",       "stdin",     "pty",  "stdin_fd",
                                          "stdout_fd", "stderr_fd", "user", NULL};
    static const char *const shared[] = {"id",       "command",   "argv",      "env",  "cwd",
                                         "stdin_fd", "stdout_fd", "stderr_fd", "user", NULL};
    struct params_process_start *p = at;
    struct params_sandbox_exec x;
    json_object *o;
    int r;

    r = params_check_object(params, allowed, err);
    if (r == 0)
        r = params_bool(params, "stdin", false, &p->has_stdin, err);
    if (r == 0)
        r = parse_pty(params, p, err);
    if (r < 0)
        return r;
    o = subset(params, shared);
    if (!o)
        return -ENOMEM;
    r = params_sandbox_exec_spec.parse(o, &x, err);
    json_object_put(o);
    if (r < 0)
        return r;
    memcpy(p->id, x.id, sizeof p->id);
    p->command = TAKE_PTR(x.command);
    p->argv = TAKE_PTR(x.argv);
    p->argc = x.argc;
    p->env = x.env;
    x.env = (struct params_kv_list){};
    p->cwd = TAKE_PTR(x.cwd);
    memcpy(p->user, x.user, sizeof p->user);
    p->stdin_fd = x.stdin_fd;
    p->stdout_fd = x.stdout_fd;
    p->stderr_fd = x.stderr_fd;
    params_sandbox_exec_done(&x);
    if (p->stdin_fd >= 0) {
        if (present(params, "stdin") && !p->has_stdin)
            return params_fail(err, "stdin_fd", "stdin_fd needs stdin (stdin: false was given)");
        p->has_stdin = true;
    }
    return start_sizes(p, err);
}

void params_process_start_done(struct params_process_start *p)
{
    struct params_sandbox_exec x = {};

    if (!p)
        return;
    x.command = p->command;
    x.argv = p->argv;
    x.argc = p->argc;
    x.env = p->env;
    x.cwd = p->cwd;
    params_sandbox_exec_done(&x);
    *p = (struct params_process_start){};
}

PARAMS_SPEC_DONE(params_process_start, struct params_process_start);

/* The object's keys, then the "id" and "process" every call on one process carries. */
static int parse_ref(json_object *params, const char *const *allowed, char *id, char *process,
                     struct params_error *err)
{
    int r = params_check_object(params, allowed, err);

    if (r == 0)
        r = params_id(params, id, err);
    if (r == 0)
        r = parse_process(params, process, err);
    return r;
}

/* An optional string parameter that must be one of names (NULL-terminated), compared without
 * a leading prefix (NULL: none): *ret is the index of the name, untouched when absent. */
static int parse_name(json_object *params, const char *name, const char *prefix,
                      const char *const *names, const char *reason, size_t *ret,
                      struct params_error *err)
{
    json_object *v = NULL;
    const char *s;

    if (!params || !json_object_object_get_ex(params, name, &v))
        return 0;
    s = v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    if (prefix && strncmp(s, prefix, strlen(prefix)) == 0)
        s += strlen(prefix);
    for (size_t i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0) {
            *ret = i;
            return 0;
        }
    return params_fail(err, name, "%s", reason);
}

/* ---- process.read ---- */

static int params_process_read_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id",     "process", "stream", "offset",
                                          "length", "wait_ms", NULL};
    static const char *const streams[] = {"stdout", "stderr", NULL};
    struct params_process_read *p = at;
    size_t stream = 0;
    int r;

    r = parse_ref(params, allowed, p->id, p->process, err);
    if (r == 0)
        r = parse_name(params, "stream", NULL, streams, "must be \"stdout\" or \"stderr\"", &stream,
                       err);
    p->stderr_stream = stream == 1;
    if (r == 0)
        r = get_int(params, "offset", 0, INT64_MAX, 0, &p->offset, err);
    if (r == 0)
        r = get_int(params, "length", 1, PARAMS_PROCESS_READ_MAX, PARAMS_PROCESS_READ_DEFAULT,
                    &p->length, err);
    if (r == 0)
        r = get_int(params, "wait_ms", 0, PARAMS_PROCESS_WAIT_MS_MAX, 0, &p->wait_ms, err);
    return r;
}

PARAMS_SPEC(params_process_read, struct params_process_read, NULL);

/* ---- process.write ---- */

static int params_process_write_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "process", "data", "data_b64", "close", NULL};
    struct params_process_write *p = at;
    struct params_file_write w;
    json_object *o, *v;
    int r;

    r = parse_ref(params, allowed, p->id, p->process, err);
    if (r == 0)
        r = params_bool(params, "close", false, &p->close, err);
    if (r < 0 || (!present(params, "data") && !present(params, "data_b64")))
        return r;
    /* file.write's content rules (one of text / base64), under this method's names. */
    o = json_object_new_object();
    if (!o)
        return -ENOMEM;
    json_object_object_add(o, "id", json_object_new_string(p->id));
    json_object_object_add(o, "path", json_object_new_string("/"));
    if (json_object_object_get_ex(params, "data", &v))
        json_object_object_add(o, "content", json_object_get(v));
    if (json_object_object_get_ex(params, "data_b64", &v))
        json_object_object_add(o, "content_b64", json_object_get(v));
    r = params_file_write_spec.parse(o, &w, err);
    json_object_put(o);
    if (r < 0) {
        if (r == -EINVAL && err) {
            const char *name = strcmp(err->param, "content_b64") == 0 ? "data_b64" : "data";
            snprintf(err->param, sizeof err->param, "%s", name);
        }
        return r;
    }
    p->data = TAKE_PTR(w.content);
    p->data_len = w.content_len;
    params_file_write_done(&w);
    if (p->data_len > PARAMS_PROCESS_WRITE_MAX)
        return params_fail(err, present(params, "data") ? "data" : "data_b64",
                           "more than 1048576 bytes: write in pieces");
    return 0;
}

void params_process_write_done(struct params_process_write *p)
{
    if (!p)
        return;
    free(p->data);
    *p = (struct params_process_write){};
}

PARAMS_SPEC_DONE(params_process_write, struct params_process_write);

/* ---- process.wait / process.kill / process.list ---- */

static int params_process_wait_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "process", "timeout_ms", NULL};
    struct params_process_ref *p = at;
    int r;

    r = parse_ref(params, allowed, p->id, p->process, err);
    if (r == 0)
        r = get_int(params, "timeout_ms", 0, PARAMS_PROCESS_TIMEOUT_MS_MAX,
                    PARAMS_PROCESS_TIMEOUT_MS_DEFAULT, &p->timeout_ms, err);
    return r;
}

PARAMS_SPEC(params_process_wait, struct params_process_ref, NULL);

static int params_process_kill_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "process", "signal", NULL};
    static const char *const names[] = {"KILL", "TERM", "INT",  "HUP",  "QUIT",
                                        "USR1", "USR2", "STOP", "CONT", NULL};
    struct params_process_ref *p = at;
    size_t sig = 0; /* KILL */
    int r;

    r = parse_ref(params, allowed, p->id, p->process, err);
    if (r == 0)
        r = parse_name(params, "signal", "SIG", names,
                       "must be one of SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, "
                       "SIGUSR2, SIGSTOP, SIGCONT",
                       &sig, err);
    snprintf(p->signal, sizeof p->signal, "%s", names[sig]);
    return r;
}

PARAMS_SPEC(params_process_kill, struct params_process_ref, NULL);

static int params_process_list_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", NULL};
    struct params_process_ref *p = at;
    int r;

    r = params_check_object(params, allowed, err);
    if (r == 0)
        r = params_id(params, p->id, err);
    return r;
}

PARAMS_SPEC(params_process_list, struct params_process_ref, NULL);

/* ---- process.resize ---- */

static int params_process_resize_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "process", "cols", "rows", NULL};
    struct params_process_resize *p = at;
    int64_t cols = 0, rows = 0;
    int r;

    r = parse_ref(params, allowed, p->id, p->process, err);
    if (r == 0 && !present(params, "cols"))
        r = params_fail(err, "cols", "missing");
    if (r == 0 && !present(params, "rows"))
        r = params_fail(err, "rows", "missing");
    if (r == 0)
        r = get_int(params, "cols", 1, PARAMS_PROCESS_PTY_MAX, 0, &cols, err);
    if (r == 0)
        r = get_int(params, "rows", 1, PARAMS_PROCESS_PTY_MAX, 0, &rows, err);
    p->cols = (unsigned)cols;
    p->rows = (unsigned)rows;
    return r;
}

PARAMS_SPEC(params_process_resize, struct params_process_resize, NULL);
