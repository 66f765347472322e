/* The exec tool as a background process: a command that is still running after a
 * budget (--exec-budget, the `background_after_s` argument; 30 s by default, under the
 * 60 s request timeout of the usual MCP hosts) goes on in the background, and the call
 * returns its process id, the output so far and how to pick it up with process_wait
 * and process_read. One mechanism for every exec: process.start (stdin, when given,
 * first goes to a file that the command reads and removes), then process.wait in
 * slices until the process ends or the budget or timeout_ms passes, reading both
 * streams by offset after each slice into the same head and tail budget as a streamed
 * exec (sandboxctl-mcp-output.c), so that a later process_read from the offsets given
 * loses nothing. At timeout_ms (when it comes before the budget) process.kill ends the
 * whole tree, as sandbox.exec would. An exec that process.start cannot take (a command,
 * argv or env past its limits, both stdin forms, a daemon without the process methods,
 * or too many processes running) runs as before with sandbox.exec and stream: true. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl-mcp-session.h"
#include "util.h"
#include "api-limits.h"
#include "b64.h"
#include "json-util.h"
#include "rpc.h"

#define RUN_SLICE_MS 2000u          /* one process.wait at most, between reads */
#define RUN_SLICE_PROGRESS_MS 1000u /* the same when the host follows progress */
#define RUN_SLICE_HALVE_MS 200u     /* before the deadline, waits ask for half the rest */
#define RUN_READ_MIN (64 * 1024)    /* bytes asked of process.read past the head */
#define RUN_TIMEOUT_DEFAULT 60000   /* exec's timeout_ms when the document gives none */
#define RUN_BUSY_SLEEP_MS 500u      /* before a process.wait again after -32007 */
/* The file that holds an exec's stdin until its command opened it. */
#define RUN_STDIN_DIR "/tmp/.sandboxd-"

enum run_phase {
    RUN_STDIN, /* file.write of stdin sent */
    RUN_START, /* process.start sent */
    RUN_WAIT,  /* process.wait sent */
    RUN_READ,  /* process.read of `stream` sent */
    RUN_KILL,  /* process.kill at timeout_ms sent */
    RUN_REAP,  /* process.kill for a cancelled call sent: no answer */
    RUN_CLEAN, /* file.remove of the stdin file of a command that did not start sent */
};

struct mcp_run {
    const struct mcp_run_io *io;
    enum run_phase phase;
    char *id;            /* the sandbox */
    char *process;       /* once started */
    json_object *start;  /* process.start params, until sent after the stdin file */
    char *stdin_path;    /* the stdin file, until the command started */
    json_object *error;  /* RUN_CLEAN: process.start's error */
    uint64_t started_ms; /* monotonic */
    uint64_t budget_at;  /* when it goes on in the background */
    uint64_t timeout_at; /* when timeout_ms passes */
    unsigned stream;     /* the stream RUN_READ reads: 0 stdout, 1 stderr */
    int64_t size[2];     /* each stream's size as last read */
    bool round_done[2];  /* read up to its size since the last wait */
    bool ended;          /* process.wait or process.kill said it ended */
    bool timed_out;      /* killed at timeout_ms */
    json_object *status; /* that result: state, exit_code, signal */
};

static const char *const run_streams[] = {"stdout", "stderr"};

void mcp_run_free(struct mcp_run *run)
{
    if (!run)
        return;
    free(run->id);
    free(run->process);
    json_object_put(run->start);
    free(run->stdin_path);
    json_object_put(run->error);
    json_object_put(run->status);
    free(run);
}

const char *mcp_run_process(const struct mcp_run *run)
{
    return run ? run->process : NULL;
}

/* ---- which calls run as a process ------------------------------------------------ */

static int64_t strings_bytes(json_object *v, bool keys)
{
    int64_t n = 0;

    if (json_object_is_type(v, json_type_array))
        for (size_t i = 0; i < json_object_array_length(v); i++)
            n += json_object_get_string_len(json_object_array_get_idx(v, i)) + 1;
    else if (json_object_is_type(v, json_type_object)) {
        json_object_object_foreach(v, k, x)
        {
            n += (keys ? (int64_t)strlen(k) : 0) + json_object_get_string_len(x);
        }
    } else
        n = json_object_get_string_len(v);
    return n;
}

/* True when exec's param k (value v) has a place in process.start: its sizes within
 * process.start's limits. Other params (stdin, timeout_ms, ...) are checked apart. */
static bool start_takes(const char *k, json_object *v)
{
    if (strcmp(k, "command") == 0)
        return strings_bytes(v, false) <= PARAMS_PROCESS_COMMAND_MAX;
    if (strcmp(k, "argv") == 0)
        return strings_bytes(v, false) <= PARAMS_PROCESS_ARGV_BYTES_MAX;
    if (strcmp(k, "env") == 0)
        return strings_bytes(v, true) <= PARAMS_PROCESS_ENV_BYTES_MAX;
    return strcmp(k, "id") == 0 || strcmp(k, "cwd") == 0 || strcmp(k, "user") == 0;
}

/* stdin or stdin_b64 as file.write params ({content} or {content_b64}) into *ret. */
static bool stdin_takes(const char *k, json_object *v, json_object **ret)
{
    if (*ret || !json_object_is_type(v, json_type_string))
        return false; /* both, or not text: sandbox.exec says what is wrong */
    *ret = json_object_new_object();
    json_object_object_add(*ret, strcmp(k, "stdin_b64") == 0 ? "content_b64" : "content",
                           json_object_get(v));
    json_object_object_add(*ret, "mode", json_object_new_string("0600"));
    return true;
}

/* The command of start made to read the file `path` as its stdin, and remove it first;
 * false when it no longer fits process.start's limits. */
static bool stdin_wrap(json_object *start, const char *path)
{
    _cleanup_free_ char *s = NULL;
    json_object *v, *argv;

    if (json_object_object_get_ex(start, "command", &v)) {
        if (asprintf(&s, "exec <%s; rm -f %s\n%s", path, path, json_object_get_string(v)) < 0)
            return false;
        json_object_object_add(start, "command", json_object_new_string(s));
        return strlen(s) <= PARAMS_PROCESS_COMMAND_MAX;
    }
    if (!json_object_object_get_ex(start, "argv", &v) || !json_object_is_type(v, json_type_array))
        return false;
    argv = json_object_new_array();
    json_object_array_add(argv, json_object_new_string("/bin/sh"));
    json_object_array_add(argv, json_object_new_string("-c"));
    json_object_array_add(argv, json_object_new_string("exec <\"$0\"; rm -f \"$0\"; exec \"$@\""));
    json_object_array_add(argv, json_object_new_string(path));
    for (size_t i = 0; i < json_object_array_length(v); i++)
        json_object_array_add(argv, json_object_get(json_object_array_get_idx(v, i)));
    json_object_object_add(start, "argv", argv);
    return strings_bytes(argv, false) <= PARAMS_PROCESS_ARGV_BYTES_MAX;
}

static bool methods_offered(json_object *doc, bool with_stdin)
{
    static const char *const methods[] = {"process.start", "process.wait", "process.read",
                                          "process.kill"};

    for (size_t i = 0; i < ELEMENTSOF(methods); i++)
        if (!mcp_doc_has_method(doc, methods[i]))
            return false;
    return !with_stdin || mcp_doc_has_method(doc, "file.write");
}

/* timeout_ms as exec takes it: the document's range and default. */
static bool timeout_takes(json_object *doc, json_object *v, int64_t *ret)
{
    json_object *schema = mcp_doc_param_schema(doc, "sandbox.exec", "timeout_ms"), *x;
    int64_t max = INT32_MAX;

    if (schema && json_object_object_get_ex(schema, "maximum", &x))
        max = json_object_get_int64(x);
    if (!v) {
        *ret = schema && json_object_object_get_ex(schema, "default", &x) ? json_object_get_int64(x)
                                                                          : RUN_TIMEOUT_DEFAULT;
        return true;
    }
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
        json_object_get_int64(v) > max)
        return false;
    *ret = json_object_get_int64(v);
    return true;
}

/* With stdin: the file.write of it (id and path added), and start reading it. */
static bool stdin_setup(json_object *start, json_object *write)
{
    char rnd[ID_MAX + 1], path[sizeof RUN_STDIN_DIR + ID_MAX];

    if (id_random(rnd, sizeof rnd, "mcp-stdin-") < 0)
        return false;
    snprintf(path, sizeof path, RUN_STDIN_DIR "%s", rnd);
    json_object_object_add(write, "id", json_object_get(json_object_object_get(start, "id")));
    json_object_object_add(write, "path", json_object_new_string(path));
    return stdin_wrap(start, path);
}

struct mcp_run *mcp_run_new(const struct mcp_run_io *io, json_object *doc,
                            const struct mcp_cfg *cfg, json_object *args, json_object *params,
                            const char **ret_method, json_object **ret_params)
{
    _cleanup_json_ json_object *start = json_object_new_object(), *write = NULL;
    json_object *timeout = NULL, *b;
    struct mcp_run *run;
    int64_t timeout_ms,
        budget_s = cfg->exec_budget_s > 0 ? cfg->exec_budget_s : MCP_EXEC_BUDGET_DEFAULT;

    if (!start)
        return NULL;
    json_object_object_foreach(params, k, v)
    {
        if (strcmp(k, "stream") == 0 || strcmp(k, "max_output_bytes") == 0)
            continue; /* set for sandbox.exec */
        if (strcmp(k, "timeout_ms") == 0)
            timeout = v;
        else if (strcmp(k, "stdin") == 0 || strcmp(k, "stdin_b64") == 0) {
            if (!stdin_takes(k, v, &write))
                return NULL;
        } else if (start_takes(k, v))
            json_object_object_add(start, k, json_object_get(v));
        else
            return NULL;
    }
    /* stdin goes through a root-only file a user's command could not read: sandbox.exec */
    if (write && json_object_object_get_ex(start, "user", NULL))
        return NULL;
    if (!json_object_object_get_ex(start, "id", NULL) || !methods_offered(doc, write != NULL) ||
        !timeout_takes(doc, timeout, &timeout_ms) || (write && !stdin_setup(start, write)))
        return NULL;
    if (json_object_object_get_ex(args, "background_after_s", &b) &&
        json_object_is_type(b, json_type_int))
        budget_s = json_object_get_int64(b);
    run = calloc(1, sizeof *run);
    if (!run || !(run->id = strdup(json_object_get_string(json_object_object_get(start, "id"))))) {
        free(run);
        return NULL;
    }
    run->io = io;
    run->started_ms = now_monotonic_ms();
    run->budget_at = run->started_ms + (uint64_t)budget_s * 1000u;
    run->timeout_at = run->started_ms + (uint64_t)timeout_ms;
    if (write) {
        run->stdin_path = strdup(json_object_get_string(json_object_object_get(write, "path")));
        if (!run->stdin_path) {
            mcp_run_free(run);
            return NULL;
        }
        run->phase = RUN_STDIN;
        run->start = TAKE_PTR(start);
        *ret_method = "file.write";
        *ret_params = TAKE_PTR(write);
    } else {
        run->phase = RUN_START;
        *ret_method = "process.start";
        *ret_params = TAKE_PTR(start);
    }
    return run;
}

/* ---- the steps ------------------------------------------------------------------ */

/* Sends method for p with params (taken over) plus id and process; returns 1, or 0 when
 * it could not be sent (p is answered). */
static int run_send(struct mcp *m, struct pending *p, enum run_phase phase, const char *method,
                    json_object *params)
{
    struct mcp_run *run = p->run;
    int r;

    if (!params)
        params = json_object_new_object();
    json_object_object_add(params, "id", json_object_new_string(run->id));
    json_object_object_add(params, "process", json_object_new_string(run->process));
    run->phase = phase;
    r = run->io->send(m, method, params, p);
    if (r < 0) {
        run->io->fail(m, p, false, strerror(-r));
        return 0;
    }
    return 1;
}

static int run_kill(struct mcp *m, struct pending *p, enum run_phase phase)
{
    json_object *params = json_object_new_object();

    json_object_object_add(params, "signal", json_object_new_string("SIGKILL"));
    return run_send(m, p, phase, "process.kill", params);
}

static int run_wait(struct mcp *m, struct pending *p)
{
    struct mcp_run *run = p->run;
    uint64_t now = now_monotonic_ms(), until = MIN(run->budget_at, run->timeout_at);
    uint64_t slice = p->progress_token ? RUN_SLICE_PROGRESS_MS : RUN_SLICE_MS;
    json_object *params = json_object_new_object();

    uint64_t rest = now >= until ? 0 : until - now;

    /* process.wait may take longer than asked (up to twice as long in a busy container):
     * near the deadline it is asked for half the time left, so the deadline holds. */
    json_object_object_add(
        params, "timeout_ms",
        json_object_new_int64((int64_t)(rest > RUN_SLICE_HALVE_MS ? MIN(rest / 2, slice) : rest)));
    return run_send(m, p, RUN_WAIT, "process.wait", params);
}

/* The CallToolResult when the process goes on in the background or ended. */
static int run_finish(struct mcp *m, struct pending *p, bool background)
{
    struct mcp_run *run = p->run;
    _cleanup_json_ json_object *res = json_object_new_object();
    json_object *v;

    if (!res) {
        run->io->fail(m, p, true, "out of memory");
        return 0;
    }
    if (background) {
        json_object_object_add(res, "process", json_object_new_string(run->process));
        json_object_object_add(res, "state", json_object_new_string("running"));
    } else {
        json_object_object_add(res, "exit_code",
                               !run->timed_out &&
                                       json_object_object_get_ex(run->status, "exit_code", &v)
                                   ? json_object_get(v)
                                   : NULL);
        json_object_object_add(res, "signal",
                               !run->timed_out &&
                                       json_object_object_get_ex(run->status, "signal", &v)
                                   ? json_object_get(v)
                                   : NULL);
        json_object_object_add(res, "timed_out", json_object_new_boolean(run->timed_out));
        if (!run->timed_out && json_object_object_get_ex(run->status, "state", &v) &&
            strcmp(json_object_get_string(v), "lost") == 0)
            json_object_object_add(res, "state", json_object_get(v));
        json_object_object_add(res, "process", json_object_new_string(run->process));
    }
    json_object_object_add(res, "duration_ms",
                           json_object_new_int64((int64_t)(now_monotonic_ms() - run->started_ms)));
    json_object_object_add(res, "stdout_bytes", json_object_new_int64(p->out.streams[0].total));
    json_object_object_add(res, "stderr_bytes", json_object_new_int64(p->out.streams[1].total));
    run->io->done(m, p, res, NULL);
    return 0;
}

/* After a round of reads: answer, kill at the timeout, or wait on. */
static int run_decide(struct mcp *m, struct pending *p)
{
    struct mcp_run *run = p->run;
    uint64_t now = now_monotonic_ms();

    if (run->ended)
        return run_finish(m, p, false);
    if (run->timeout_at <= run->budget_at && now >= run->timeout_at) {
        run->timed_out = true;
        return run_kill(m, p, RUN_KILL);
    }
    if (now >= run->budget_at)
        return run_finish(m, p, true);
    return run_wait(m, p);
}

/* The next process.read of this round: each stream from where it was read to up to its
 * size, skipping what lies between its head and its last `cap` bytes. */
static int run_read(struct mcp *m, struct pending *p)
{
    struct mcp_run *run = p->run;
    struct mcp_stream *s;
    json_object *params;
    int64_t next, cap, length;

    while (run->stream < ELEMENTSOF(run_streams) && run->round_done[run->stream])
        run->stream++;
    if (run->stream >= ELEMENTSOF(run_streams))
        return run_decide(m, p);
    s = &p->out.streams[run->stream];
    cap = (int64_t)s->cap;
    if (s->total >= cap && run->size[run->stream] - s->total > cap)
        mcp_output_skip(&p->out, run->stream, run->size[run->stream] - cap - s->total);
    next = s->total;
    if (cap == 0)
        length = 1; /* nothing is shown: only the size is wanted */
    else if (next < cap)
        length = cap - next;
    else
        length = MIN(MAX(cap, RUN_READ_MIN), PARAMS_PROCESS_READ_MAX);
    params = json_object_new_object();
    json_object_object_add(params, "stream", json_object_new_string(run_streams[run->stream]));
    json_object_object_add(params, "offset", json_object_new_int64(next));
    json_object_object_add(params, "length", json_object_new_int64(length));
    return run_send(m, p, RUN_READ, "process.read", params);
}

static int run_round(struct mcp *m, struct pending *p)
{
    struct mcp_run *run = p->run;

    run->stream = 0;
    run->round_done[0] = run->round_done[1] = false;
    return run_read(m, p);
}

static int64_t jint(json_object *o, const char *key, int64_t def)
{
    json_object *v;

    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
        return def;
    return json_object_get_int64(v);
}

/* A process.read result: its bytes into the output. */
static void run_add(struct mcp *m, struct pending *p, json_object *result)
{
    struct mcp_run *run = p->run;
    unsigned i = run->stream;
    int64_t before = p->out.streams[i].total, offset = jint(result, "offset", before);
    _cleanup_free_ uint8_t *bin = NULL;
    json_object *data;
    size_t n;

    if (offset > before) /* dropped by the container (past process_output_max_bytes) */
        mcp_output_skip(&p->out, i, offset - before);
    if (json_object_object_get_ex(result, "data", &data) &&
        json_object_is_type(data, json_type_string))
        mcp_output_add_bytes(&p->out, i, json_object_get_string(data),
                             (size_t)json_object_get_string_len(data));
    else if (json_object_object_get_ex(result, "data_b64", &data) &&
             json_object_is_type(data, json_type_string) &&
             b64_decode(json_object_get_string(data), (size_t)json_object_get_string_len(data),
                        &bin, &n) >= 0)
        mcp_output_add_bytes(&p->out, i, (const char *)bin, n);
    run->size[i] = jint(result, "size", run->size[i]);
    /* Bytes the container no longer has are counted too, so the offsets stay right. */
    if (jint(result, "next_offset", 0) > p->out.streams[i].total)
        mcp_output_skip(&p->out, i, jint(result, "next_offset", 0) - p->out.streams[i].total);
    if (p->out.streams[i].total >= run->size[i] || jint(result, "next_offset", 0) <= before ||
        (json_object_object_get_ex(result, "eof", &data) && json_object_get_boolean(data)))
        run->round_done[i] = true;
    if (p->out.streams[i].total > before)
        run->io->progress(m, p);
}

/* ---- waiting for a long-poll slot ------------------------------------------------- */

static void run_sleep(struct mcp *m, struct pending *p)
{
    p->wake_ms = now_monotonic_ms() + RUN_BUSY_SLEEP_MS;
    p->next = m->sleeping;
    m->sleeping = p;
}

int mcp_run_next_wake(struct mcp *m)
{
    uint64_t now = now_monotonic_ms(), first = UINT64_MAX;

    for (struct pending *p = m->sleeping; p; p = p->next)
        first = MIN(first, p->wake_ms);
    if (first == UINT64_MAX)
        return -1;
    return first <= now ? 0 : (int)MIN(first - now, (uint64_t)INT32_MAX);
}

void mcp_run_wake_due(struct mcp *m)
{
    uint64_t now = now_monotonic_ms();
    struct pending **pp = &m->sleeping;

    while (*pp) {
        struct pending *p = *pp;
        const struct mcp_run_io *io = p->run->io;
        int r;

        if (p->wake_ms > now) {
            pp = &p->next;
            continue;
        }
        *pp = p->next; /* the list may change below: start over */
        pp = &m->sleeping;
        r = io->connect(m);
        if (r < 0)
            io->fail(m, p, false, strerror(-r));
        else if (p->cancelled)
            r = run_kill(m, p, RUN_REAP);
        else
            r = run_round(m, p);
        if (r <= 0)
            io->free(m, p);
    }
}

void mcp_run_drop_sleeping(struct mcp *m)
{
    while (m->sleeping) {
        struct pending *p = m->sleeping;

        m->sleeping = p->next;
        p->run->io->free(m, p);
    }
}

/* ---- errors ------------------------------------------------------------------------ */

/* The error's text for the model, with what became of the command: it runs on. */
static json_object *run_error_result(struct mcp *m, struct pending *p, json_object *err)
{
    json_object *res = mcp_tool_error(p->tool, err, p->args, &m->cfg), *item;
    _cleanup_free_ char *text = NULL;

    item = json_object_array_get_idx(json_object_object_get(res, "content"), 0);
    if (!item ||
        asprintf(&text,
                 "%s The command was started and may still run as background "
                 "process %s: use process_wait, process_read or process_kill with "
                 "it rather than running it again.",
                 json_object_get_string(json_object_object_get(item, "text")), p->run->process) < 0)
        return res;
    json_object_object_add(item, "text", json_object_new_string(text));
    return res;
}

/* A daemon error for a request of the run. */
static int run_error(struct mcp *m, struct pending *p, json_object *err)
{
    struct mcp_run *run = p->run;
    const struct mcp_run_io *io = run->io;
    json_object *code;
    int r;

    if (run->phase == RUN_REAP)
        return 0;
    if (run->phase == RUN_START && run->stdin_path) {
        /* The command did not start: its stdin file goes first, then the error. */
        json_object *params = json_object_new_object();

        json_object_object_add(params, "id", json_object_new_string(run->id));
        json_object_object_add(params, "path", json_object_new_string(run->stdin_path));
        run->error = json_object_get(err);
        run->phase = RUN_CLEAN;
        if (io->send(m, "file.remove", params, p) >= 0)
            return 1;
        run->phase = RUN_START;
        json_object_put(TAKE_PTR(run->error));
    }
    if (run->phase == RUN_START && json_object_object_get_ex(err, "code", &code) &&
        json_object_get_int(code) == RPC_QUOTA_EXCEEDED) {
        /* Too many processes running: sandbox.exec runs it, without a budget. */
        mcp_run_free(TAKE_PTR(p->run));
        r = io->send(m, "sandbox.exec", json_object_get(p->params), p);
        if (r < 0) {
            io->fail(m, p, false, strerror(-r));
            return 0;
        }
        return 1;
    }
    if (run->phase == RUN_WAIT && json_object_object_get_ex(err, "code", &code) &&
        json_object_get_int(code) == RPC_BUSY) {
        /* Every long-poll slot of the sandbox is taken: read, and wait again, later. */
        run_sleep(m, p);
        return 1;
    }
    if (run->process)
        io->reply(m, p, run_error_result(m, p, err));
    else
        io->done(m, p, NULL, err);
    return 0;
}

int mcp_run_step(struct mcp *m, struct pending *p, json_object *result, json_object *err)
{
    struct mcp_run *run = p->run;
    const char *process;

    if (run->phase == RUN_CLEAN) { /* removed or not: process.start's error now */
        _cleanup_json_ json_object *start_err = TAKE_PTR(run->error);

        free(TAKE_PTR(run->stdin_path));
        run->phase = RUN_START;
        return run_error(m, p, start_err);
    }
    if (err)
        return run_error(m, p, err);
    if (run->phase == RUN_START) {
        free(TAKE_PTR(run->stdin_path)); /* the command removes it */
        process = json_object_get_string(json_object_object_get(result, "process"));
        if (!process || !(run->process = strdup(process))) {
            run->io->fail(m, p, true, "process.start returned no process");
            return 0;
        }
    }
    if (p->cancelled && run->phase == RUN_STDIN) { /* no answer, no command: no file */
        json_object *params = json_object_new_object();

        json_object_object_add(params, "id", json_object_new_string(run->id));
        json_object_object_add(params, "path", json_object_new_string(run->stdin_path));
        run->phase = RUN_REAP;
        return run->io->send(m, "file.remove", params, p) >= 0 ? 1 : 0;
    }
    if (p->cancelled) /* no answer: the command ends as sandbox.exec's would */
        return run->phase == RUN_REAP || !run->process ? 0 : run_kill(m, p, RUN_REAP);
    switch (run->phase) {
    case RUN_STDIN:
        run->phase = RUN_START;
        if (run->io->send(m, "process.start", TAKE_PTR(run->start), p) < 0) {
            run->io->fail(m, p, false, "cannot send process.start");
            return 0;
        }
        return 1;
    case RUN_START:
        return run_wait(m, p);
    case RUN_WAIT:
    case RUN_KILL:
        json_object_put(run->status);
        run->status = json_object_get(result);
        run->ended = run->phase == RUN_KILL ||
                     strcmp(strna(json_object_get_string(json_object_object_get(result, "state"))),
                            "running") != 0;
        return run_round(m, p);
    case RUN_READ:
        run_add(m, p, result);
        return run_read(m, p);
    case RUN_REAP:
    case RUN_CLEAN:
        break;
    }
    return 0;
}
