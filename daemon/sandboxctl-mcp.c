/* sandboxctl mcp: the session. One poll loop over standard input (MCP requests,
 * one JSON-RPC message per line) and one connection to sandboxd, on which tool
 * calls run concurrently and are matched by id. The connection is opened when
 * needed and again after the daemon closed it (idle close, restart); a call in
 * flight when it closes gets an isError result that says so. At startup the
 * daemon's rpc.discover document decides which tools exist; when the daemon is
 * not reachable the document compiled into sandboxctl stands in until it is. */
#include "macro.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config-build.h"
#include "sandboxctl-mcp.h"
#include "util.h"
#include "buf.h"
#include "openrpc.h"
#include "rpc-batch.h"
#include "rpc.h"

#define MCP_LINE_MAX (64u * 1024 * 1024)   /* longest message accepted, either side */
#define MCP_READ_CHUNK (256u * 1024)       /* bytes per read(2) */
#define MCP_DISCOVER_WAIT_MS 10000         /* rpc.discover at startup */
#define MCP_EXIT_WAIT_MS (10u * 60 * 1000) /* --destroy-on-exit: creates, then destroys */
#define EXIT_USAGE 64

struct linebuf {
    char *buf;
    size_t start, len, cap; /* unread bytes are buf[start..len) */
    bool discarding;        /* skipping the rest of an overlong line */
};

enum pending_kind {
    PENDING_TOOL,     /* a tools/call */
    PENDING_DISCOVER, /* rpc.discover */
    PENDING_DESTROY,  /* --destroy-on-exit */
};

struct pending {
    struct pending *next;
    enum pending_kind kind;
    int64_t rid;  /* id of the daemon request */
    uint64_t end; /* offset just past its line in the bytes queued on this connection */
    const struct mcp_tool *tool;
    json_object *mcp_id; /* the host's request id */
    json_object *args;   /* the tool's arguments */
    json_object *params; /* the daemon params sent */
    struct rpc_batch *batch;
    bool cancelled; /* notifications/cancelled: no reply */
};

struct mcp {
    struct mcp_cfg cfg;
    const char *version; /* negotiated protocol revision */
    bool initialized;    /* notifications/initialized arrived */
    json_object *doc;    /* OpenRPC document the tools come from */
    bool doc_live;       /* doc came from the daemon */
    char *tool_names;
    struct linebuf in;
    bool reading; /* standard input is open and wanted */
    bool stdout_broken;
    int fd; /* daemon connection; -1 when closed */
    struct linebuf dr;
    struct buf w; /* requests not yet sent, from woff on */
    size_t woff;
    uint64_t queued, sent; /* bytes on this connection */
    int64_t next_rid;
    struct pending *pending;
    char **created; /* sandboxes this session created and did not destroy */
    size_t n_created;
    bool destroy_failed;
    sigset_t waitmask; /* the signal mask while waiting in ppoll */
};

static volatile sig_atomic_t signals_seen;

static void on_signal(int sig)
{
    signals_seen++;
}

/* ---- line framing ------------------------------------------------------------ */

/* One read(2) into lb. Returns bytes read, 0 at EOF, or -errno. */
static ssize_t linebuf_fill(struct linebuf *lb, int fd)
{
    ssize_t k;

    if (lb->start > 0) {
        memmove(lb->buf, lb->buf + lb->start, lb->len - lb->start);
        lb->len -= lb->start;
        lb->start = 0;
    }
    if (lb->cap - lb->len < MCP_READ_CHUNK) {
        size_t cap = MAX(lb->cap * 2, lb->len + MCP_READ_CHUNK);
        char *p = realloc(lb->buf, cap + 1);

        if (!p)
            return -ENOMEM;
        lb->buf = p;
        lb->cap = cap;
    }
    do
        k = read(fd, lb->buf + lb->len, lb->cap - lb->len);
    while (k < 0 && errno == EINTR);
    if (k < 0)
        return -errno;
    lb->len += (size_t)k;
    return k;
}

/* The next complete line, NUL-terminated in place (valid until the next fill):
 * 1 with *ret_line set, 0 when none is complete, -EMSGSIZE once for a line over
 * MCP_LINE_MAX (whose rest is then skipped). With at_eof an unterminated last
 * line counts as complete. */
static int linebuf_next(struct linebuf *lb, bool at_eof, char **ret_line, size_t *ret_n)
{
    for (;;) {
        char *s = lb->buf + lb->start, *nl;
        size_t avail = lb->len - lb->start, n;

        nl = avail ? memchr(s, '\n', avail) : NULL;
        if (lb->discarding) {
            if (!nl) {
                lb->start = lb->len;
                return 0;
            }
            lb->discarding = false;
            lb->start += (size_t)(nl - s) + 1;
            continue;
        }
        if (!nl && at_eof && avail > 0)
            nl = s + avail; /* buf has one spare byte for the NUL */
        if (!nl) {
            if (avail <= MCP_LINE_MAX)
                return 0;
            lb->discarding = true;
            lb->start = lb->len;
            return -EMSGSIZE;
        }
        n = (size_t)(nl - s);
        lb->start = MIN(lb->start + n + 1, lb->len);
        if (n > MCP_LINE_MAX)
            return -EMSGSIZE;
        *nl = '\0';
        *ret_line = s;
        *ret_n = n;
        return 1;
    }
}

static void linebuf_done(struct linebuf *lb)
{
    free(lb->buf);
    *lb = (struct linebuf){};
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
    free(p);
}

static void doc_set(struct mcp *m, json_object *doc, bool live);
static void pending_fail(struct mcp *m, struct pending *p, bool sent, const char *why);

static void dconn_close(struct mcp *m, const char *why)
{
    struct pending *list = m->pending;

    if (m->fd < 0)
        return;
    close(m->fd);
    m->fd = -1;
    m->woff = 0;
    buf_clear(&m->w, false);
    m->dr.start = m->dr.len = 0;
    m->dr.discarding = false;
    m->pending = NULL;
    while (list) {
        struct pending *p = list;

        list = p->next;
        pending_fail(m, p, m->sent >= p->end, why);
        pending_free(m, p);
    }
}

static void dconn_flush(struct mcp *m)
{
    while (m->fd >= 0 && m->woff < m->w.len) {
        ssize_t k = send(m->fd, m->w.data + m->woff, m->w.len - m->woff, MSG_NOSIGNAL);

        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (k < 0) {
            dconn_close(m, strerror(errno));
            return;
        }
        m->woff += (size_t)k;
        m->sent += (uint64_t)k;
    }
    if (m->woff == m->w.len) {
        m->woff = 0;
        buf_clear(&m->w, false);
    }
}

/* Queues a request for p (linked in on success; params taken over). */
static int dconn_send(struct mcp *m, const char *method, json_object *params, struct pending *p)
{
    _cleanup_free_ char *line = NULL;
    size_t len;

    if (m->fd < 0) {
        json_object_put(params);
        return -ENOTCONN;
    }
    p->rid = ++m->next_rid;
    line = rpc_request_line(p->rid, method, params, &len);
    if (!line)
        return -ENOMEM;
    if (buf_append(&m->w, line, len) < 0)
        return -ENOMEM;
    m->queued += len;
    p->end = m->queued;
    p->next = m->pending;
    m->pending = p;
    dconn_flush(m);
    return 0;
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

static int dconn_open(struct mcp *m)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    if (m->fd >= 0)
        return 0;
    if (strlen(m->cfg.socket) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, m->cfg.socket);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        int r = -errno;

        close(fd);
        return r;
    }
    m->fd = fd;
    m->queued = m->sent = 0;
    dconn_discover(m); /* the daemon may have changed since the last connection */
    return 0;
}

static struct pending *pending_take(struct mcp *m, int64_t rid)
{
    for (struct pending **pp = &m->pending; *pp; pp = &(*pp)->next)
        if ((*pp)->rid == rid) {
            struct pending *p = *pp;

            *pp = p->next;
            return p;
        }
    return NULL;
}

static void pending_done(struct mcp *m, struct pending *p, json_object *result, json_object *err);

static void dconn_line(struct mcp *m, const char *line, size_t n)
{
    _cleanup_json_ json_object *o = json_tokener_parse(line);
    json_object *id = NULL, *result = NULL, *err = NULL;
    struct pending *p;

    if (!o || !json_object_is_type(o, json_type_object)) {
        dconn_close(m, "sandboxd sent something that is not JSON-RPC");
        return;
    }
    if (json_object_object_get_ex(o, "method", NULL))
        return; /* a notification (exec.output): not asked for */
    json_object_object_get_ex(o, "id", &id);
    json_object_object_get_ex(o, "result", &result);
    json_object_object_get_ex(o, "error", &err);
    if (!id && err) {
        /* An error the daemon could not tie to a request (a line over its
         * limit, a connection over a cap): it closes the connection next. */
        json_object *data = NULL;
        const char *reason = NULL;
        _cleanup_free_ char *why = NULL;

        if (json_object_object_get_ex(err, "data", &data) &&
            json_object_object_get_ex(data, "reason", &data))
            reason = json_object_get_string(data);
        if (asprintf(&why, "sandboxd refused the connection's input: %s",
                     reason ? reason : json_object_to_json_string(err)) < 0)
            why = NULL;
        dconn_close(m, why ? why : "sandboxd refused the connection's input");
        return;
    }
    if (!json_object_is_type(id, json_type_int) ||
        !(p = pending_take(m, json_object_get_int64(id))))
        return;
    pending_done(m, p, result, err);
    pending_free(m, p);
}

static void dconn_io(struct mcp *m, short revents)
{
    if (revents & POLLOUT)
        dconn_flush(m);
    if (m->fd >= 0 && (revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t k = linebuf_fill(&m->dr, m->fd);
        char *line;
        size_t n;
        int r;

        if (k == -EAGAIN)
            return;
        while (m->fd >= 0 && (r = linebuf_next(&m->dr, false, &line, &n)) != 0) {
            if (r < 0) {
                dconn_close(m, "a reply from sandboxd was too long");
                return;
            }
            dconn_line(m, line, n);
        }
        if (k == 0)
            dconn_close(m, "sandboxd closed the connection");
        else if (k < 0)
            dconn_close(m, strerror((int)-k));
    }
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

static void tool_done(struct mcp *m, struct pending *p, json_object *result, json_object *err)
{
    json_object *res;

    if (err)
        res = mcp_tool_error(p->tool, err, p->args, &m->cfg);
    else {
        res = mcp_tool_result(p->tool, result, p->args, m->version);
        if ((p->tool->flags & TOOL_CREATES) && jstr(result, "id"))
            created_add(m, jstr(result, "id"));
        if (strcmp(p->tool->method, "sandbox.destroy") == 0 && jstr(result, "id"))
            created_remove(m, jstr(result, "id"));
    }
    if (!res)
        res = mcp_tool_error_text("sandboxctl ran out of memory");
    if (p->cancelled)
        json_object_put(res);
    else
        respond(m, p->batch, rpc_result_new(p->mcp_id, res));
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
    if (!sent)
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
                          .batch = b};
    if (b)
        rpc_batch_hold(b);
    r = dconn_send(m, t->method, TAKE_PTR(params), p);
    if (r == -ENOTCONN)
        pending_fail(m, p, false, "the connection to sandboxd closed");
    else if (r < 0)
        respond(m, b, rpc_error_new(c->id, RPC_INTERNAL_ERROR, NULL, NULL));
    if (r < 0)
        pending_free(m, p);
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
                  "files with write_file and read_file."
                : "These tools give you disposable Linux sandboxes (isolated containers). Make "
                  "one with sandbox_create, then run commands with exec and write and read files "
                  "with write_file and read_file, passing the sandbox's id. Outbound internet is "
                  "off unless you ask for it. Call sandbox_destroy when you are done."));
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
    ssize_t k = linebuf_fill(&m->in, STDIN_FILENO);
    char *line;
    size_t n;
    int r;

    if (k == -EAGAIN)
        return;
    if (k < 0) {
        fprintf(stderr, "sandboxctl mcp: reading standard input: %s\n", strerror((int)-k));
        k = 0;
    }
    while (!m->stdout_broken && (r = linebuf_next(&m->in, k == 0, &line, &n)) != 0) {
        if (r < 0)
            host_send(
                m, rpc_error_reason_new(NULL, RPC_INVALID_REQUEST, "message longer than 64 MiB"));
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
    if (m->fd >= 0) {
        pfd[n] =
            (struct pollfd){.fd = m->fd, .events = POLLIN | (m->w.len > m->woff ? POLLOUT : 0)};
        d = (int)n++;
    }
    if (timeout_ms >= 0) {
        ts = (struct timespec){.tv_sec = timeout_ms / 1000,
                               .tv_nsec = (long)(timeout_ms % 1000) * 1000000};
        tsp = &ts;
    }
    if (ppoll(pfd, n, tsp, &m->waitmask) < 0)
        return errno == EINTR ? 0 : -errno;
    if (d >= 0 && pfd[d].revents)
        dconn_io(m, pfd[d].revents);
    if (in >= 0 && pfd[in].revents)
        host_io(m);
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
    return false;
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
    return m->pending != NULL;
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
    dconn_close(m, "sandboxctl mcp is exiting"); /* the daemon cancels what still runs */
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
          "[--destroy-on-exit]\n\n"
          "Serves the Model Context Protocol on standard input and output.\n"
          "  --sandbox ID        work on this sandbox only (the tools take no id)\n"
          "  --default-ttl S     lease of sandboxes made by sandbox_create when not given\n"
          "  --destroy-on-exit   destroy the sandboxes this session made when input ends\n",
          f);
}

static int mcp_options(struct mcp_cfg *cfg, int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"sandbox", required_argument, NULL, 'S'},
        {"default-ttl", required_argument, NULL, 't'},
        {"destroy-on-exit", no_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {},
    };
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "+s:h", opts, NULL)) >= 0) {
        char *end;

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
            errno = 0;
            cfg->default_ttl_s = strtoll(optarg, &end, 10);
            if (!optarg[0] || *end || errno || cfg->default_ttl_s < 1 ||
                cfg->default_ttl_s > INT32_MAX) {
                fprintf(stderr,
                        "sandboxctl mcp: --default-ttl: '%s' is not a number of "
                        "seconds\n",
                        optarg);
                return -EINVAL;
            }
            break;
        case 'd':
            cfg->destroy_on_exit = true;
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
    struct mcp m = {.cfg = {.socket = socket}, .version = MCP_PROTOCOL_LATEST, .fd = -1};
    int r;

    r = mcp_options(&m.cfg, argc, argv);
    if (r != 0)
        return r > 0 ? 0 : EXIT_USAGE;
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
    dconn_close(&m, "sandboxctl mcp is exiting");
    for (size_t i = 0; i < m.n_created; i++)
        free(m.created[i]);
    free(m.created);
    buf_clear(&m.w, true);
    free(m.tool_names);
    json_object_put(m.doc);
    linebuf_done(&m.in);
    linebuf_done(&m.dr);
    return r;
}
