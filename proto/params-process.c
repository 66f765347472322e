/* Params of process.*. See params-process.h. The fields process.start shares with
 * sandbox.exec, and process.write's data, go through the parsers of params.c (on a copy of
 * the params holding only those fields), so both methods accept and refuse them alike. */
#include "params-process.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"

static int fail(struct params_error *err, const char *param, const char *reason)
{
    if (err) {
        snprintf(err->param, sizeof err->param, "%s", param);
        snprintf(err->reason, sizeof err->reason, "%s", reason);
    }
    return -EINVAL;
}

/* params is an object (or absent) with only allowed names. */
static int check_object(json_object *params, const char *const *allowed, struct params_error *err)
{
    if (!params)
        return 0;
    if (!json_object_is_type(params, json_type_object))
        return fail(err, "params", "must be an object of named parameters");
    json_object_object_foreach(params, key, val)
    {
        size_t i;

        (void)val;
        for (i = 0; allowed[i] && strcmp(allowed[i], key) != 0; i++)
            ;
        if (!allowed[i])
            return fail(err, key, "unknown parameter");
    }
    return 0;
}

static bool present(json_object *params, const char *name)
{
    return params && json_object_object_get_ex(params, name, NULL);
}

static int get_int(json_object *params, const char *name, int64_t min, int64_t max, int64_t def,
                   int64_t *ret, struct params_error *err)
{
    json_object *v;
    char reason[96];

    if (!present(params, name)) {
        *ret = def;
        return 0;
    }
    json_object_object_get_ex(params, name, &v);
    if (!v || !json_object_is_type(v, json_type_int)) {
        snprintf(reason, sizeof reason, "must be an integer in %lld..%lld", (long long)min,
                 (long long)max);
        return fail(err, name, reason);
    }
    errno = 0;
    *ret = json_object_get_int64(v);
    if (errno || *ret < min || *ret > max) {
        snprintf(reason, sizeof reason, "must be an integer in %lld..%lld", (long long)min,
                 (long long)max);
        return fail(err, name, reason);
    }
    return 0;
}

static int get_bool(json_object *params, const char *name, bool *ret, struct params_error *err)
{
    json_object *v;

    *ret = false;
    if (!present(params, name))
        return 0;
    json_object_object_get_ex(params, name, &v);
    if (!v || !json_object_is_type(v, json_type_boolean))
        return fail(err, name, "must be a boolean");
    *ret = json_object_get_boolean(v);
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

static int parse_id(json_object *params, char ret[PARAMS_ID_MAX + 1], struct params_error *err)
{
    static const char *const names[] = {"id", NULL};
    struct params_sandbox_id p;
    json_object *o = subset(params, names);
    int r;

    if (!o)
        return -ENOMEM;
    r = params_sandbox_id_parse(o, &p, err);
    json_object_put(o);
    if (r == 0)
        memcpy(ret, p.id, sizeof p.id);
    return r;
}

static int parse_process(json_object *params, char ret[PARAMS_PROCESS_ID_LEN + 1],
                         struct params_error *err)
{
    json_object *v = NULL;
    const char *s;

    if (!params || !json_object_object_get_ex(params, "process", &v))
        return fail(err, "process", "missing");
    if (!v || !json_object_is_type(v, json_type_string))
        return fail(err, "process", "must be a string");
    s = json_object_get_string(v);
    if (strlen(s) != PARAMS_PROCESS_ID_LEN || strncmp(s, "pr-", 3) != 0 ||
        strspn(s + 3, "0123456789abcdef") != PARAMS_PROCESS_ID_LEN - 3)
        return fail(err, "process", "must be a process id (pr- and 16 hex digits)");
    memcpy(ret, s, PARAMS_PROCESS_ID_LEN + 1);
    return 0;
}

/* ---- process.start ---- */

static int start_sizes(const struct params_process_start *p, struct params_error *err)
{
    size_t bytes = 0;

    if (p->command && strlen(p->command) > PARAMS_PROCESS_COMMAND_MAX)
        return fail(err, "command", "longer than 8192 bytes");
    for (size_t i = 0; p->argv && p->argv[i]; i++)
        bytes += strlen(p->argv[i]) + 1;
    if (bytes > PARAMS_PROCESS_ARGV_BYTES_MAX)
        return fail(err, "argv", "more than 8192 bytes");
    bytes = 0;
    for (size_t i = 0; i < p->env.n; i++)
        bytes += strlen(p->env.items[i].key) + strlen(p->env.items[i].value);
    if (bytes > PARAMS_PROCESS_ENV_BYTES_MAX)
        return fail(err, "env", "more than 4096 bytes of names and values");
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
        return fail(err, "pty", "must be an object {\"cols\": C, \"rows\": R}");
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        json_object *x = NULL;

        if (!json_object_object_get_ex(o, names[i], &x) || !x ||
            !json_object_is_type(x, json_type_int))
            return fail(err, "pty", "cols and rows must be integers in 1..1000");
        errno = 0;
        v[i] = json_object_get_int64(x);
        if (errno || v[i] < 1 || v[i] > PARAMS_PROCESS_PTY_MAX)
            return fail(err, "pty", "cols and rows must be integers in 1..1000");
    }
    p->pty = true;
    p->pty_cols = (unsigned)v[0];
    p->pty_rows = (unsigned)v[1];
    p->has_stdin = true;
    return 0;
}

int params_process_start_parse(json_object *params, struct params_process_start *ret,
                               struct params_error *err)
{
    static const char *const allowed[] = {"id",        "command",   "argv", "env",
                                          "cwd",       "stdin",     "pty",  "stdin_fd",
                                          "stdout_fd", "stderr_fd", NULL};
    static const char *const shared[] = {"id",       "command",   "argv",      "env", "cwd",
                                         "stdin_fd", "stdout_fd", "stderr_fd", NULL};
    struct params_sandbox_exec x;
    struct params_process_start p = {};
    json_object *o;
    int r;

    r = check_object(params, allowed, err);
    if (r < 0)
        return r;
    r = get_bool(params, "stdin", &p.has_stdin, err);
    if (r < 0)
        return r;
    r = parse_pty(params, &p, err);
    if (r < 0)
        return r;
    o = subset(params, shared);
    if (!o)
        return -ENOMEM;
    r = params_sandbox_exec_parse(o, &x, err);
    json_object_put(o);
    if (r < 0)
        return r;
    memcpy(p.id, x.id, sizeof p.id);
    p.command = TAKE_PTR(x.command);
    p.argv = TAKE_PTR(x.argv);
    p.argc = x.argc;
    p.env = x.env;
    x.env = (struct params_kv_list){};
    p.cwd = TAKE_PTR(x.cwd);
    p.stdin_fd = x.stdin_fd;
    p.stdout_fd = x.stdout_fd;
    p.stderr_fd = x.stderr_fd;
    params_sandbox_exec_done(&x);
    if (p.stdin_fd >= 0) {
        if (present(params, "stdin") && !p.has_stdin) {
            params_process_start_done(&p);
            return fail(err, "stdin_fd", "stdin_fd needs stdin (stdin: false was given)");
        }
        p.has_stdin = true;
    }
    r = start_sizes(&p, err);
    if (r < 0) {
        params_process_start_done(&p);
        return r;
    }
    *ret = p;
    return 0;
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

/* The object's keys, then the "id" and "process" every call on one process carries. */
static int parse_ref(json_object *params, const char *const *allowed, char *id, char *process,
                     struct params_error *err)
{
    int r = check_object(params, allowed, err);

    if (r == 0)
        r = parse_id(params, id, err);
    if (r == 0)
        r = parse_process(params, process, err);
    return r;
}

/* ---- process.read ---- */

int params_process_read_parse(json_object *params, struct params_process_read *ret,
                              struct params_error *err)
{
    static const char *const allowed[] = {"id",     "process", "stream", "offset",
                                          "length", "wait_ms", NULL};
    struct params_process_read p = {};
    json_object *v;
    int r;

    r = parse_ref(params, allowed, p.id, p.process, err);
    if (r < 0)
        return r;
    if (params && json_object_object_get_ex(params, "stream", &v)) {
        const char *s =
            v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        if (strcmp(s, "stdout") != 0 && strcmp(s, "stderr") != 0)
            return fail(err, "stream", "must be \"stdout\" or \"stderr\"");
        p.stderr_stream = strcmp(s, "stderr") == 0;
    }
    r = get_int(params, "offset", 0, INT64_MAX, 0, &p.offset, err);
    if (r == 0)
        r = get_int(params, "length", 1, PARAMS_PROCESS_READ_MAX, PARAMS_PROCESS_READ_DEFAULT,
                    &p.length, err);
    if (r == 0)
        r = get_int(params, "wait_ms", 0, PARAMS_PROCESS_WAIT_MS_MAX, 0, &p.wait_ms, err);
    if (r < 0)
        return r;
    *ret = p;
    return 0;
}

/* ---- process.write ---- */

int params_process_write_parse(json_object *params, struct params_process_write *ret,
                               struct params_error *err)
{
    static const char *const allowed[] = {"id", "process", "data", "data_b64", "close", NULL};
    struct params_process_write p = {};
    struct params_file_write w;
    json_object *o, *v;
    int r;

    r = parse_ref(params, allowed, p.id, p.process, err);
    if (r == 0)
        r = get_bool(params, "close", &p.close, err);
    if (r < 0)
        return r;
    if (!present(params, "data") && !present(params, "data_b64")) {
        *ret = p;
        return 0;
    }
    /* file.write's content rules (one of text / base64), under this method's names. */
    o = json_object_new_object();
    if (!o)
        return -ENOMEM;
    json_object_object_add(o, "id", json_object_new_string(p.id));
    json_object_object_add(o, "path", json_object_new_string("/"));
    if (json_object_object_get_ex(params, "data", &v))
        json_object_object_add(o, "content", json_object_get(v));
    if (json_object_object_get_ex(params, "data_b64", &v))
        json_object_object_add(o, "content_b64", json_object_get(v));
    r = params_file_write_parse(o, &w, err);
    json_object_put(o);
    if (r < 0) {
        if (r == -EINVAL && err) {
            const char *name = strcmp(err->param, "content_b64") == 0 ? "data_b64" : "data";
            snprintf(err->param, sizeof err->param, "%s", name);
        }
        return r;
    }
    p.data = TAKE_PTR(w.content);
    p.data_len = w.content_len;
    params_file_write_done(&w);
    if (p.data_len > PARAMS_PROCESS_WRITE_MAX) {
        free(p.data);
        return fail(err, present(params, "data") ? "data" : "data_b64",
                    "more than 1048576 bytes: write in pieces");
    }
    *ret = p;
    return 0;
}

void params_process_write_done(struct params_process_write *p)
{
    if (!p)
        return;
    free(p->data);
    *p = (struct params_process_write){};
}

/* ---- process.wait / process.kill / process.list ---- */

int params_process_wait_parse(json_object *params, struct params_process_ref *ret,
                              struct params_error *err)
{
    static const char *const allowed[] = {"id", "process", "timeout_ms", NULL};
    struct params_process_ref p = {};
    int r;

    r = parse_ref(params, allowed, p.id, p.process, err);
    if (r == 0)
        r = get_int(params, "timeout_ms", 0, PARAMS_PROCESS_TIMEOUT_MS_MAX,
                    PARAMS_PROCESS_TIMEOUT_MS_DEFAULT, &p.timeout_ms, err);
    if (r < 0)
        return r;
    *ret = p;
    return 0;
}

int params_process_kill_parse(json_object *params, struct params_process_ref *ret,
                              struct params_error *err)
{
    static const char *const allowed[] = {"id", "process", "signal", NULL};
    static const char *const names[] = {"KILL", "TERM", "INT",  "HUP", "QUIT",
                                        "USR1", "USR2", "STOP", "CONT"};
    struct params_process_ref p = {.signal = "KILL"};
    json_object *v;
    int r;

    r = parse_ref(params, allowed, p.id, p.process, err);
    if (r < 0)
        return r;
    if (params && json_object_object_get_ex(params, "signal", &v)) {
        const char *s =
            v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        size_t i;

        if (strncmp(s, "SIG", 3) == 0)
            s += 3;
        for (i = 0; i < ELEMENTSOF(names) && strcmp(names[i], s) != 0; i++)
            ;
        if (i == ELEMENTSOF(names))
            return fail(err, "signal",
                        "must be one of SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, "
                        "SIGUSR2, SIGSTOP, SIGCONT");
        snprintf(p.signal, sizeof p.signal, "%s", names[i]);
    }
    *ret = p;
    return 0;
}

int params_process_list_parse(json_object *params, struct params_process_ref *ret,
                              struct params_error *err)
{
    static const char *const allowed[] = {"id", NULL};
    struct params_process_ref p = {};
    int r;

    r = check_object(params, allowed, err);
    if (r == 0)
        r = parse_id(params, p.id, err);
    if (r < 0)
        return r;
    *ret = p;
    return 0;
}

/* ---- params kinds ---- */

#define SPEC(name, type, done_fn)                                                                  \
    static int name##_any(json_object *params, void *ret, struct params_error *err)                \
    {                                                                                              \
        return name##_parse(params, (type *)ret, err);                                             \
    }                                                                                              \
    const struct params_spec name##_spec = {sizeof(type), name##_any, done_fn}

static void start_done_any(void *p)
{
    params_process_start_done(p);
}

static void write_done_any(void *p)
{
    params_process_write_done(p);
}

SPEC(params_process_start, struct params_process_start, start_done_any);
SPEC(params_process_read, struct params_process_read, NULL);
SPEC(params_process_write, struct params_process_write, write_done_any);
SPEC(params_process_wait, struct params_process_ref, NULL);
SPEC(params_process_kill, struct params_process_ref, NULL);
SPEC(params_process_list, struct params_process_ref, NULL);
