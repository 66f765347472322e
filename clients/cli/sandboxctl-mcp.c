/* sandboxctl mcp: the session. One poll loop over standard input (MCP requests,
 * one JSON-RPC message per line, in proto's framing) and one connection to sandboxd
 * (a client of the C client library, clients/c), on which tool calls run
 * concurrently and are matched by id. The connection is opened when
 * needed and again after the daemon closed it (idle close, restart); a call in
 * flight when it closes gets an isError result that says so. At startup the
 * daemon's rpc.discover document decides which tools exist; when the daemon is
 * not reachable the document compiled into sandboxctl stands in until it is. */
#include "macro.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config-build.h"
#include "sandboxd-client.h"
#include "sandboxctl-mcp.h"
#include "sandboxctl-mcp-session.h"
#include "util.h"
#include "frame.h"
#include "openrpc.h"
#include "rpc-batch.h"
#include "rpc.h"

#define MCP_LINE_MAX (64u * 1024 * 1024)   /* longest message accepted, either side */
#define MCP_READ_CHUNK (256u * 1024)       /* bytes per read(2) */
#define MCP_DISCOVER_WAIT_MS 10000         /* rpc.discover at startup */
#define MCP_EXIT_WAIT_MS (10u * 60 * 1000) /* --destroy-on-exit: creates, then destroys */
#define EXIT_USAGE 64
#define MCP_PROGRESS_MS 1000u /* notifications/progress at most this often per call */

static volatile sig_atomic_t signals_seen;

static void on_signal(int sig)
{
    signals_seen++;
}

/* ---- line framing ------------------------------------------------------------ */

/* One read(2) of fd into f (proto's framing). Returns the bytes read, 0 at the end, or
 * -errno. A line over the cap is not an error here: frame_buf_next() reports it. */
static ssize_t frame_fill(struct frame_buf *f, int fd, char *chunk)
{
    ssize_t k;
    int r;

    do
        k = read(fd, chunk, MCP_READ_CHUNK);
    while (k < 0 && errno == EINTR);
    if (k < 0)
        return -errno;
    r = frame_buf_append(f, chunk, (size_t)k);
    return r < 0 && r != -EMSGSIZE ? r : k;
}

/* ---- writing to the host ----------------------------------------------------- */

static void host_send(struct mcp *m, json_object *msg)
{
    _cleanup_free_ char *line = NULL;
    size_t len;

    if (!msg)
        return;
    line = m->stdout_broken ? NULL : rpc_to_line(msg, &len);
    json_object_put(msg);
    if (line && write_all(STDOUT_FILENO, line, len) < 0) {
        fprintf(stderr, "sandboxctl mcp: standard output is closed: %s\n", strerror(errno));
        m->stdout_broken = true;
        m->reading = false;
    }
}

/* A response (taken over) to a request of batch b (NULL: alone). */
static void respond(struct mcp *m, struct rpc_batch *b, json_object *msg)
{
    if (!msg)
        return;
    if (b)
        rpc_batch_add(b, msg);
    else
        host_send(m, msg);
}

static void batch_release(struct mcp *m, struct rpc_batch *b)
{
    if (b)
        host_send(m, rpc_batch_release(b)); /* NULL until the last reply, or none */
}

/* ---- the daemon connection --------------------------------------------------- */

static void pending_free(struct mcp *m, struct pending *p)
{
    json_object_put(p->mcp_id);
    json_object_put(p->args);
    json_object_put(p->params);
    batch_release(m, p->batch);
    mcp_output_done(&p->out);
    json_object_put(p->progress_token);
    mcp_run_free(p->run);
    free(p);
}

static void doc_set(struct mcp *m, json_object *doc, bool live);

static void pending_fail(struct mcp *m, struct pending *p, bool sent, const char *why);
static void pending_done(struct mcp *m, struct pending *p, json_object *result, json_object *err);

static void pending_unlink(struct mcp *m, struct pending *p)
{
    for (struct pending **pp = &m->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
}

/* The completion of a daemon call (sandboxd_done_fn). */
static void on_daemon_done(int r, json_object *result, const struct sandboxd_error *e,
                           void *userdata)
{
    struct pending *p = userdata;
    struct mcp *m = p->m;

    pending_unlink(m, p);
    if (p->run && (r == 0 || r == -EREMOTE)) {
        /* An exec run as a background process: its next request, or its answer. */
        if (mcp_run_step(m, p, r == 0 ? result : NULL, r == 0 ? NULL : e->object) > 0)
            return;
    } else if (r == 0)
        pending_done(m, p, result, NULL);
    else if (r == -EREMOTE)
        pending_done(m, p, NULL, e->object);
    else /* the connection closed: after the request went out whole, or before */
        pending_fail(m, p, r == -ECONNRESET, e->message);
    pending_free(m, p);
}

/* Sends a request for p (params taken over); p completes in on_daemon_done(), unless this
 * fails. */
static int dconn_send(struct mcp *m, const char *method, json_object *params, struct pending *p)
{
    int r;

    p->m = m;
    p->next = m->pending;
    m->pending = p;
    r = sandboxd_call_start(m->client, method, params, NULL, 0, on_daemon_done, p);
    if (r < 0)
        pending_unlink(m, p);
    else
        p->daemon_id = sandboxd_client_last_id(m->client);
    return r;
}

/* notifications/progress for a TOOL_CAPTURES call whose host gave a progress token:
 * the bytes of output so far, at most once per MCP_PROGRESS_MS. */
static void progress_send(struct mcp *m, struct pending *p)
{
    struct timespec ts;
    uint64_t now;
    int64_t n = p->out.streams[0].total + p->out.streams[1].total;
    json_object *params;
    char msg[64];

    if (!p->progress_token || p->cancelled || clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return;
    now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    if (p->progress_ms && now - p->progress_ms < MCP_PROGRESS_MS)
        return;
    p->progress_ms = now;
    params = json_object_new_object();
    json_object_object_add(params, "progressToken", json_object_get(p->progress_token));
    json_object_object_add(params, "progress", json_object_new_int64(n));
    snprintf(msg, sizeof msg, "%" PRId64 " bytes of output so far", n);
    json_object_object_add(params, "message", json_object_new_string(msg));
    host_send(m, rpc_notification_new("notifications/progress", params));
}

/* The notification callback: exec.output of a TOOL_CAPTURES call in flight. */
static void on_notify(const char *method, json_object *params, void *userdata)
{
    struct mcp *m = userdata;
    json_object *id;

    if (strcmp(method, "exec.output") != 0 ||
        !json_object_object_get_ex(params, "request_id", &id) ||
        !json_object_is_type(id, json_type_int))
        return;
    for (struct pending *p = m->pending; p; p = p->next)
        if (p->kind == PENDING_TOOL && (p->tool->flags & TOOL_CAPTURES) &&
            p->daemon_id == json_object_get_int64(id)) {
            mcp_output_add(&p->out, params);
            progress_send(m, p);
            return;
        }
}

static struct pending *pending_new(enum pending_kind kind)
{
    struct pending *p = calloc(1, sizeof *p);

    if (p)
        p->kind = kind;
    return p;
}

static void dconn_discover(struct mcp *m)
{
    struct pending *p = pending_new(PENDING_DISCOVER);

    if (p && dconn_send(m, "rpc.discover", NULL, p) < 0)
        free(p);
}

/* Connects when not connected, and then asks for the daemon's document: it may have changed
 * since the last connection. */
static int dconn_open(struct mcp *m)
{
    int r;

    if (sandboxd_client_fd(m->client) >= 0)
        return 0;
    r = sandboxd_client_connect(m->client);
    if (r < 0)
        return r;
    dconn_discover(m);
    return 0;
}

/* ---- tool calls -------------------------------------------------------------- */

static void created_add(struct mcp *m, const char *id)
{
    char **c;

    for (size_t i = 0; i < m->n_created; i++)
        if (strcmp(m->created[i], id) == 0)
            return; /* the same create again (idempotency_key) */
    c = realloc(m->created, (m->n_created + 1) * sizeof *c);

    if (!c)
        return;
    m->created = c;
    if ((c[m->n_created] = strdup(id)))
        m->n_created++;
}

static void created_remove(struct mcp *m, const char *id)
{
    for (size_t i = 0; i < m->n_created; i++)
        if (strcmp(m->created[i], id) == 0) {
            free(m->created[i]);
            m->created[i] = m->created[--m->n_created];
            return;
        }
}

static const char *jstr(json_object *o, const char *key)
{
    json_object *v;

    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

static void tool_reply(struct mcp *m, struct pending *p, json_object *res)
{
    if (!res)
        res = mcp_tool_error_text("sandboxctl ran out of memory");
    if (p->cancelled)
        json_object_put(res);
    else
        respond(m, p->batch, rpc_result_new(p->mcp_id, res));
}

static void tool_done(struct mcp *m, struct pending *p, json_object *result, json_object *err)
{
    json_object *res;

    if (err)
        res = mcp_tool_error(p->tool, err, p->args, &m->cfg);
    else {
        res = mcp_tool_result(p->tool, result, p->args, &p->out, m->version);
        if ((p->tool->flags & TOOL_CREATES) && jstr(result, "id"))
            created_add(m, jstr(result, "id"));
        if (strcmp(p->tool->method, "sandbox.destroy") == 0 && jstr(result, "id"))
            created_remove(m, jstr(result, "id"));
    }
    tool_reply(m, p, res);
}

static void pending_done(struct mcp *m, struct pending *p, json_object *result, json_object *err)
{
    switch (p->kind) {
    case PENDING_TOOL:
        tool_done(m, p, result, err);
        break;
    case PENDING_DISCOVER:
        if (!err && json_object_is_type(result, json_type_object))
            doc_set(m, json_object_get(result), true);
        break;
    case PENDING_DESTROY:
        if (err) {
            fprintf(stderr, "sandboxctl mcp: destroying %s: %s\n", strna(jstr(p->params, "id")),
                    json_object_to_json_string(err));
            m->destroy_failed = true;
        } else
            created_remove(m, jstr(p->params, "id"));
        break;
    }
}

static void pending_fail(struct mcp *m, struct pending *p, bool sent, const char *why)
{
    _cleanup_free_ char *text = NULL;
    const char *key = jstr(p->params, "idempotency_key");
    int r;

    if (p->kind == PENDING_DESTROY) {
        fprintf(stderr, "sandboxctl mcp: destroying %s: %s\n", strna(jstr(p->params, "id")), why);
        m->destroy_failed = true;
    }
    if (p->kind != PENDING_TOOL || p->cancelled)
        return;
    if (p->run && mcp_run_process(p->run))
        r = asprintf(&text,
                     "The connection to sandboxd closed while %s ran (%s). The command goes "
                     "on as background process %s: once sandboxd answers again, call "
                     "process_wait and process_read with it rather than running it again.",
                     p->tool->name, why, mcp_run_process(p->run));
    else if (!sent)
        r = asprintf(&text,
                     "The connection to sandboxd closed before %s was sent (%s); nothing "
                     "was done. Call %s again.",
                     p->tool->name, why, p->tool->name);
    else if ((p->tool->flags & TOOL_CREATES) && key)
        r = asprintf(&text,
                     "The connection to sandboxd closed while %s ran (%s). Call %s again "
                     "with the same arguments and idempotency_key \"%s\": that returns the "
                     "sandbox this call made, if it made one.",
                     p->tool->name, why, p->tool->name, key);
    else
        r = asprintf(&text,
                     "The connection to sandboxd closed while %s ran (%s): the daemon "
                     "stopped, restarted or closed the connection. The call may or may not "
                     "have taken effect: check before calling %s again.",
                     p->tool->name, why, p->tool->name);
    respond(m, p->batch,
            rpc_result_new(p->mcp_id, mcp_tool_error_text(r < 0 ? "connection lost" : text)));
}

/* ---- MCP requests -------------------------------------------------------------- */

static json_object *invalid_params(json_object *id, const char *message)
{
    json_object *d = json_object_new_object();

    json_object_object_add(d, "reason", json_object_new_string(message));
    return rpc_error_new(id, RPC_INVALID_PARAMS, message, d);
}

static void tool_reply_text(struct mcp *m, struct rpc_call *c, struct rpc_batch *b,
                            const char *text)
{
    respond(m, b, rpc_result_new(c->id, mcp_tool_error_text(text)));
}

static void tool_unreachable(struct mcp *m, struct rpc_call *c, struct rpc_batch *b, int r)
{
    _cleanup_free_ char *text = NULL;

    if (asprintf(&text,
                 "sandboxd is not reachable at %s (%s): it is not running, or this user "
                 "may not use its socket. Tell the user.",
                 m->cfg.socket, strerror(-r)) < 0)
        text = NULL;
    tool_reply_text(m, c, b, text ? text : "sandboxd is not reachable");
}

/* params._meta.progressToken (a string or an integer), or NULL. */
static json_object *progress_token(json_object *params)
{
    json_object *meta, *tok;

    if (!json_object_object_get_ex(params, "_meta", &meta) ||
        !json_object_object_get_ex(meta, "progressToken", &tok) ||
        !(json_object_is_type(tok, json_type_string) || json_object_is_type(tok, json_type_int)))
        return NULL;
    return json_object_get(tok);
}

static const struct mcp_run_io run_io = {
    .connect = dconn_open,
    .free = pending_free,
    .send = dconn_send,
    .done = tool_done,
    .reply = tool_reply,
    .fail = pending_fail,
    .progress = progress_send,
};

static void tool_call(struct mcp *m, struct rpc_call *c, struct rpc_batch *b)
{
    _cleanup_json_ json_object *empty = NULL, *params = NULL;
    _cleanup_free_ char *problem = NULL, *unknown = NULL;
    json_object *name = NULL, *args = NULL;
    const struct mcp_tool *t;
    struct pending *p;
    int r;

    if (!json_object_is_type(c->params, json_type_object) ||
        !json_object_object_get_ex(c->params, "name", &name) ||
        !json_object_is_type(name, json_type_string)) {
        respond(m, b, invalid_params(c->id, "params.name must be the name of a tool"));
        return;
    }
    t = mcp_tool_find(m->doc, &m->cfg, json_object_get_string(name));
    if (!t) {
        if (asprintf(&unknown, "Unknown tool: %s", json_object_get_string(name)) < 0)
            unknown = NULL;
        respond(m, b, invalid_params(c->id, unknown ? unknown : "Unknown tool"));
        return;
    }
    if (!json_object_object_get_ex(c->params, "arguments", &args) || !args)
        args = empty = json_object_new_object();
    else if (!json_object_is_type(args, json_type_object)) {
        respond(m, b, invalid_params(c->id, "params.arguments must be an object"));
        return;
    }
    r = mcp_tool_params(t, m->doc, &m->cfg, args, &params, &problem);
    if (r == -EINVAL) {
        tool_reply_text(m, c, b, problem ? problem : "invalid arguments");
        return;
    }
    if (r >= 0)
        r = dconn_open(m);
    if (r < 0) {
        tool_unreachable(m, c, b, r);
        return;
    }
    p = pending_new(PENDING_TOOL);
    if (!p) {
        respond(m, b, rpc_error_new(c->id, RPC_INTERNAL_ERROR, NULL, NULL));
        return;
    }
    *p = (struct pending){.kind = PENDING_TOOL,
                          .tool = t,
                          .mcp_id = json_object_get(c->id),
                          .args = json_object_get(args),
                          .params = json_object_get(params),
                          .batch = b,
                          .progress_token = progress_token(c->params)};
    if (b)
        rpc_batch_hold(b);
    if ((t->flags & TOOL_CAPTURES) &&
        (r = mcp_output_init(&p->out, mcp_output_budget(args, &m->cfg))) < 0) {
        pending_fail(m, p, false, strerror(-r));
        pending_free(m, p);
        return;
    }
    if (t->flags & TOOL_CAPTURES) {
        json_object *first = NULL;
        const char *method = NULL;

        p->run = mcp_run_new(&run_io, m->doc, &m->cfg, args, params, &method, &first);
        if (p->run)
            r = dconn_send(m, method, first, p);
        else
            r = dconn_send(m, t->method, TAKE_PTR(params), p);
    } else
        r = dconn_send(m, t->method, TAKE_PTR(params), p);
    if (r < 0) {
        const struct sandboxd_error *e = sandboxd_client_error(m->client);

        pending_fail(m, p, false, e ? e->message : strerror(-r));
        pending_free(m, p);
    }
}

static json_object *initialize_result(struct mcp *m)
{
    json_object *res = json_object_new_object(), *caps = json_object_new_object();
    json_object *tools = json_object_new_object(), *info = json_object_new_object();

    json_object_object_add(res, "protocolVersion", json_object_new_string(m->version));
    json_object_object_add(tools, "listChanged", json_object_new_boolean(true));
    json_object_object_add(caps, "tools", tools);
    json_object_object_add(res, "capabilities", caps);
    json_object_object_add(info, "name", json_object_new_string("sandboxd"));
    if (mcp_version_at_least(m->version, MCP_PROTOCOL_STRUCTURED))
        json_object_object_add(info, "title", json_object_new_string("sandboxd sandboxes"));
    json_object_object_add(info, "version", json_object_new_string(SANDBOXD_VERSION));
    json_object_object_add(res, "serverInfo", info);
    json_object_object_add(
        res, "instructions",
        json_object_new_string(
            m->cfg.pinned
                ? "These tools work in one Linux sandbox (an isolated container) that was "
                  "prepared for you: run commands in it with exec, and write and read its "
                  "files with write_file and read_file. A long command goes on in the "
                  "background: exec then returns its process id for process_wait and "
                  "process_read."
                : "These tools give you disposable Linux sandboxes (isolated containers). Make "
                  "one with sandbox_create, then run commands with exec and write and read files "
                  "with write_file and read_file, passing the sandbox's id. Outbound internet is "
                  "off unless you ask for it. A long command goes on in the background: exec "
                  "then returns its process id for process_wait and process_read. Call "
                  "sandbox_destroy when you are done."));
    return res;
}

static void initialize(struct mcp *m, struct rpc_call *c, struct rpc_batch *b)
{
    /* Newest first (MCP "Version Negotiation"). */
    static const char *const versions[] = {MCP_PROTOCOL_LATEST, "2025-03-26", "2024-11-05"};
    json_object *pv = NULL;

    if (!json_object_is_type(c->params, json_type_object) ||
        !json_object_object_get_ex(c->params, "protocolVersion", &pv) ||
        !json_object_is_type(pv, json_type_string)) {
        respond(m, b, invalid_params(c->id, "params.protocolVersion must be a string"));
        return;
    }
    /* The client's revision when we speak it, else our latest (the client then
     * decides whether it can go on). */
    m->version = versions[0];
    for (size_t i = 0; i < ELEMENTSOF(versions); i++)
        if (strcmp(json_object_get_string(pv), versions[i]) == 0)
            m->version = versions[i];
    respond(m, b, rpc_result_new(c->id, initialize_result(m)));
}

static void notification(struct mcp *m, struct rpc_call *c)
{
    json_object *rid = NULL;

    if (strcmp(c->method, "notifications/initialized") == 0)
        m->initialized = true;
    else if (strcmp(c->method, "notifications/cancelled") == 0 &&
             json_object_is_type(c->params, json_type_object) &&
             json_object_object_get_ex(c->params, "requestId", &rid))
        for (struct pending *p = m->pending; p; p = p->next)
            if (p->kind == PENDING_TOOL && json_object_equal(p->mcp_id, rid))
                p->cancelled = true; /* the daemon has no cancel: the call runs on */
}

static void handle_call(struct mcp *m, struct rpc_call *c, struct rpc_batch *b)
{
    if (c->error) {
        /* A response from the client: this server sends no requests. */
        if (!json_object_object_get_ex(c->request, "method", NULL) &&
            (json_object_object_get_ex(c->request, "result", NULL) ||
             json_object_object_get_ex(c->request, "error", NULL)))
            return;
        respond(m, b, json_object_get(c->error));
    } else if (c->notification)
        notification(m, c);
    else if (strcmp(c->method, "initialize") == 0)
        initialize(m, c, b);
    else if (strcmp(c->method, "ping") == 0)
        respond(m, b, rpc_result_new(c->id, json_object_new_object()));
    else if (strcmp(c->method, "tools/list") == 0)
        respond(m, b, rpc_result_new(c->id, mcp_tools_list(m->doc, &m->cfg, m->version)));
    else if (strcmp(c->method, "tools/call") == 0)
        tool_call(m, c, b);
    else
        respond(m, b, rpc_error_new(c->id, RPC_METHOD_NOT_FOUND, NULL, NULL));
}

static void host_line(struct mcp *m, const char *line, size_t n)
{
    struct rpc_message msg;
    struct rpc_batch *b = NULL;

    if (rpc_parse(line, n, &msg) < 0)
        return; /* out of memory */
    if (msg.error) {
        host_send(m, json_object_get(msg.error));
        rpc_message_done(&msg);
        return;
    }
    if (msg.batch) {
        b = rpc_batch_new();
        if (!b) {
            rpc_message_done(&msg);
            return;
        }
    }
    for (size_t i = 0; i < msg.n_calls; i++)
        handle_call(m, &msg.calls[i], b);
    rpc_message_done(&msg);
    batch_release(m, b);
}

static void host_io(struct mcp *m)
{
    ssize_t k = frame_fill(&m->in, STDIN_FILENO, m->chunk);
    char *line;
    size_t n;
    int r;

    if (k == -EAGAIN)
        return;
    if (k < 0) {
        fprintf(stderr, "sandboxctl mcp: reading standard input: %s\n", strerror((int)-k));
        k = 0;
    }
    /* At the end of input an unterminated last message counts too. */
    while (!m->stdout_broken && ((r = frame_buf_next(&m->in, &line, &n)) != 0 ||
                                 (k == 0 && (r = frame_buf_finish(&m->in, &line, &n)) != 0))) {
        if (r == -EMSGSIZE)
            host_send(
                m, rpc_error_reason_new(NULL, RPC_INVALID_REQUEST, "message longer than 64 MiB"));
        else if (r < 0)
            break; /* out of memory */
        else
            host_line(m, line, n);
    }
    if (k == 0)
        m->reading = false;
}

/* ---- the loop ------------------------------------------------------------------ */

static int loop_once(struct mcp *m, int timeout_ms)
{
    struct pollfd pfd[2];
    nfds_t n = 0;
    int in = -1, d = -1;
    struct timespec ts, *tsp = NULL;

    if (m->reading) {
        pfd[n] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
        in = (int)n++;
    }
    if (sandboxd_client_fd(m->client) >= 0) {
        pfd[n] = (struct pollfd){.fd = sandboxd_client_fd(m->client),
                                 .events = sandboxd_client_events(m->client)};
        d = (int)n++;
    }
    if (mcp_run_next_wake(m) >= 0 && (timeout_ms < 0 || mcp_run_next_wake(m) < timeout_ms))
        timeout_ms = mcp_run_next_wake(m);
    if (timeout_ms >= 0) {
        ts = (struct timespec){.tv_sec = timeout_ms / 1000,
                               .tv_nsec = (long)(timeout_ms % 1000) * 1000000};
        tsp = &ts;
    }
    if (ppoll(pfd, n, tsp, &m->waitmask) < 0)
        return errno == EINTR ? 0 : -errno;
    if (d >= 0 && pfd[d].revents)
        sandboxd_client_process(m->client, pfd[d].revents);
    if (in >= 0 && pfd[in].revents)
        host_io(m);
    mcp_run_wake_due(m);
    return 0;
}

static bool discover_running(struct mcp *m)
{
    for (struct pending *p = m->pending; p; p = p->next)
        if (p->kind == PENDING_DISCOVER)
            return true;
    return false;
}

static bool call_running(struct mcp *m)
{
    for (struct pending *p = m->pending; p; p = p->next)
        if (p->kind == PENDING_TOOL && !p->cancelled && !m->stdout_broken)
            return true;
    return m->sleeping && !m->stdout_broken;
}

static bool create_running(struct mcp *m)
{
    for (struct pending *p = m->pending; p; p = p->next)
        if (p->kind == PENDING_TOOL && (p->tool->flags & TOOL_CREATES))
            return true;
    return false;
}

static bool anything_running(struct mcp *m)
{
    return m->pending || m->sleeping;
}

/* Runs the loop while running(m), until deadline (monotonic ms) or a new signal. */
static int loop_while(struct mcp *m, bool (*running)(struct mcp *), uint64_t deadline)
{
    sig_atomic_t seen = signals_seen;

    while (running(m)) {
        uint64_t now = now_monotonic_ms();
        int r;

        if (now >= deadline)
            return -ETIMEDOUT;
        if (signals_seen != seen)
            return -EINTR;
        r = loop_once(m, (int)MIN(deadline - now, (uint64_t)INT_MAX));
        if (r < 0)
            return r;
    }
    return 0;
}

static void doc_set(struct mcp *m, json_object *doc, bool live)
{
    _cleanup_free_ char *names = NULL;

    if (!doc)
        return;
    json_object_put(m->doc);
    m->doc = doc;
    m->doc_live = live;
    names = mcp_tools_names(doc, &m->cfg);
    if (m->initialized && m->tool_names && names && strcmp(names, m->tool_names) != 0)
        host_send(m, rpc_notification_new("notifications/tools/list_changed", NULL));
    free(m->tool_names);
    m->tool_names = TAKE_PTR(names);
}

/* The daemon's document, or the compiled-in one when the daemon does not answer. */
static void startup(struct mcp *m)
{
    int r = dconn_open(m);

    if (r < 0)
        fprintf(stderr,
                "sandboxctl mcp: cannot reach sandboxd at %s (%s); going on, and "
                "connecting again at the first tool call\n",
                m->cfg.socket, strerror(-r));
    else
        (void)loop_while(m, discover_running, now_monotonic_ms() + MCP_DISCOVER_WAIT_MS);
    if (!m->doc_live)
        doc_set(m, json_tokener_parse(openrpc_document()), false);
}

/* --destroy-on-exit: waits for creates in flight, then destroys what this
 * session made. Returns 0, or 1 when something may be left. */
static int destroy_created(struct mcp *m)
{
    uint64_t deadline = now_monotonic_ms() + MCP_EXIT_WAIT_MS;
    _cleanup_free_ char **ids = NULL;
    size_t n;
    int r;

    if (loop_while(m, create_running, deadline) < 0)
        fprintf(stderr, "sandboxctl mcp: stopped waiting for sandbox_create calls in flight; "
                        "their sandboxes stay until their lease ends\n");
    sandboxd_client_disconnect(m->client); /* the daemon cancels what still runs */
    mcp_run_drop_sleeping(m);
    n = m->n_created;
    if (n == 0)
        return 0;
    ids = calloc(n, sizeof *ids);
    if (!ids)
        return 1;
    memcpy(ids, m->created, n * sizeof *ids);
    r = dconn_open(m);
    for (size_t i = 0; r >= 0 && i < n; i++) {
        struct pending *p = pending_new(PENDING_DESTROY);
        json_object *params = json_object_new_object();

        json_object_object_add(params, "id", json_object_new_string(ids[i]));
        if (!p) {
            json_object_put(params);
            return 1;
        }
        p->params = json_object_get(params);
        r = dconn_send(m, "sandbox.destroy", params, p);
    }
    if (r >= 0)
        (void)loop_while(m, anything_running, deadline);
    else
        fprintf(stderr, "sandboxctl mcp: cannot reach sandboxd to destroy sandboxes: %s\n",
                strerror(-r));
    for (size_t i = 0; i < m->n_created; i++)
        fprintf(stderr, "sandboxctl mcp: sandbox %s was not destroyed\n", m->created[i]);
    return m->n_created > 0 || m->destroy_failed ? 1 : 0;
}

/* ---- the command ------------------------------------------------------------------ */

static void mcp_usage(FILE *f)
{
    fputs("Usage: sandboxctl mcp [--socket PATH] [--sandbox ID] [--default-ttl S] "
          "[--destroy-on-exit] [--max-output BYTES] [--exec-budget S] [--tools SET[,SET]]\n\n"
          "Serves the Model Context Protocol on standard input and output.\n"
          "  --sandbox ID        work on this sandbox only (the tools take no id)\n"
          "  --default-ttl S     lease of sandboxes made by sandbox_create when not given\n"
          "  --destroy-on-exit   destroy the sandboxes this session made when input ends\n"
          "  --max-output BYTES  text of a command's output shown per exec call (16384)\n"
          "  --exec-budget S     seconds an exec waits before its command runs on in the\n"
          "                      background (30)\n"
          "  --tools SET[,SET]   tool sets offered: core (default), durable (snapshots,\n"
          "                      fork, pause, resume), all\n",
          f);
}

/* An option's number from 1 to max, or a message on stderr and -EINVAL. */
static int option_number(const char *opt, const char *unit, const char *arg, long long max,
                         int64_t *ret)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(arg, &end, 10);
    if (!arg[0] || *end || errno || v < 1 || v > max) {
        fprintf(stderr, "sandboxctl mcp: %s: '%s' is not a number of %s from 1 to %lld\n", opt, arg,
                unit, max);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

/* --tools: a comma-separated list of core, durable and all, or a message on
 * stderr and -EINVAL. */
static int option_sets(const char *arg, unsigned *ret)
{
    unsigned sets = 0;
    const char *p = arg;

    for (;;) {
        size_t n = strcspn(p, ",");

        if (n == 4 && strncmp(p, "core", n) == 0)
            sets |= MCP_SET_CORE;
        else if (n == 7 && strncmp(p, "durable", n) == 0)
            sets |= MCP_SET_DURABLE;
        else if (n == 3 && strncmp(p, "all", n) == 0)
            sets |= MCP_SET_CORE | MCP_SET_DURABLE;
        else {
            fprintf(stderr,
                    "sandboxctl mcp: --tools: '%.*s' is not a tool set (core, durable, all)\n",
                    (int)n, p);
            return -EINVAL;
        }
        if (!p[n])
            break;
        p += n + 1;
    }
    *ret = sets;
    return 0;
}

static int mcp_options(struct mcp_cfg *cfg, int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"sandbox", required_argument, NULL, 'S'},
        {"default-ttl", required_argument, NULL, 't'},
        {"destroy-on-exit", no_argument, NULL, 'd'},
        {"max-output", required_argument, NULL, 'o'},
        {"exec-budget", required_argument, NULL, 'b'},
        {"tools", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {},
    };
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "+s:h", opts, NULL)) >= 0) {

        switch (opt) {
        case 's':
            cfg->socket = optarg;
            break;
        case 'S':
            if (!id_is_valid(optarg)) {
                fprintf(stderr, "sandboxctl mcp: --sandbox: '%s' is not a sandbox id\n", optarg);
                return -EINVAL;
            }
            cfg->pinned = optarg;
            break;
        case 't':
            if (option_number("--default-ttl", "seconds", optarg, INT32_MAX, &cfg->default_ttl_s) <
                0)
                return -EINVAL;
            break;
        case 'd':
            cfg->destroy_on_exit = true;
            break;
        case 'o':
            if (option_number("--max-output", "bytes", optarg, MCP_OUTPUT_MAX, &cfg->max_output) <
                0)
                return -EINVAL;
            break;
        case 'b':
            if (option_number("--exec-budget", "seconds", optarg, MCP_EXEC_BUDGET_MAX,
                              &cfg->exec_budget_s) < 0)
                return -EINVAL;
            break;
        case 'T':
            if (option_sets(optarg, &cfg->sets) < 0)
                return -EINVAL;
            break;
        case 'h':
            mcp_usage(stdout);
            return 1;
        default:
            mcp_usage(stderr);
            return -EINVAL;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "sandboxctl mcp: unexpected argument '%s'\n", argv[optind]);
        return -EINVAL;
    }
    return 0;
}

static int signals_setup(sigset_t *ret_waitmask)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa = {.sa_handler = on_signal};
    sigset_t block, old;

    sigemptyset(&block);
    for (size_t i = 0; i < ELEMENTSOF(sigs); i++) {
        sigaddset(&block, sigs[i]);
        if (sigaction(sigs[i], &sa, NULL) < 0)
            return -errno;
    }
    signal(SIGPIPE, SIG_IGN);
    if (sigprocmask(SIG_BLOCK, &block, &old) < 0)
        return -errno;
    for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
        sigdelset(&old, sigs[i]);
    *ret_waitmask = old;
    return 0;
}

int mcp_main(const char *socket, int argc, char **argv)
{
    struct mcp m = {.cfg = {.socket = socket,
                            .max_output = MCP_OUTPUT_DEFAULT,
                            .exec_budget_s = MCP_EXEC_BUDGET_DEFAULT,
                            .sets = MCP_SET_CORE},
                    .version = MCP_PROTOCOL_LATEST};
    int r;

    r = mcp_options(&m.cfg, argc, argv);
    if (r != 0)
        return r > 0 ? 0 : EXIT_USAGE;
    frame_buf_init(&m.in, MCP_LINE_MAX);
    frame_buf_set_resync(&m.in, true);
    m.chunk = malloc(MCP_READ_CHUNK);
    if (!m.chunk || sandboxd_client_new(m.cfg.socket, &m.client) < 0) {
        fprintf(stderr, "sandboxctl mcp: out of memory\n");
        free(m.chunk);
        return 1;
    }
    sandboxd_client_set_notify(m.client, on_notify, &m);
    if (signals_setup(&m.waitmask) < 0) {
        fprintf(stderr, "sandboxctl mcp: signals: %s\n", strerror(errno));
        return 1;
    }
    startup(&m);
    m.reading = true;
    while (m.reading && signals_seen == 0) {
        r = loop_once(&m, -1);
        if (r < 0) {
            fprintf(stderr, "sandboxctl mcp: poll: %s\n", strerror(-r));
            break;
        }
    }
    /* At the end of input the calls already made are answered (a signal cuts that
     * short); then the connection closes and the daemon cancels what still runs. */
    if (!m.reading && signals_seen == 0)
        (void)loop_while(&m, call_running, UINT64_MAX);
    m.reading = false;
    r = m.cfg.destroy_on_exit ? destroy_created(&m) : 0;
    sandboxd_client_disconnect(m.client);
    mcp_run_drop_sleeping(&m);
    for (size_t i = 0; i < m.n_created; i++)
        free(m.created[i]);
    free(m.created);
    free(m.tool_names);
    json_object_put(m.doc);
    sandboxd_client_free(m.client);
    frame_buf_done(&m.in);
    free(m.chunk);
    return r;
}
