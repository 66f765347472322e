/* The request context: completion, batches, notifications and the callbacks a
 * connection fires. See req.h. */
#include "req.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "list.h"
#include "macro.h"

struct req {
    struct req_port *port; /* NULL once the client is gone */
    struct rpc_batch *batch;
    json_object *id;      /* owned; NULL for a notification or id null */
    json_object *request; /* owned: keeps method and params alive */
    json_object *params;  /* borrowed from request */
    const char *method;   /* points into request */
    bool notification;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    bool admin;
    uint64_t started_ns;
    uv_loop_t *loop;
    const struct config *config;
    const struct req_observer *observer; /* NULL: none */
    struct server *server;
    const struct params_spec *spec; /* of parsed */
    void *parsed;
    req_event_cb on_disconnect;
    void *disconnect_data;
    req_event_cb on_drain;
    void *drain_data;
    uint64_t drain_pass; /* the connection's drain pass when on_drain was armed */
    struct req_fds fds;  /* passed with the line; closed at completion unless taken */
    const char *subject; /* the param naming the file of a file error (NULL: "path") */
    bool in_handler;     /* its method's handler runs: a completion keeps it until it returns */
    bool completed;      /* completed while in_handler */
    struct req *prev, *next;
};

bool req_in_batch(const struct req *r)
{
    return r->batch != NULL;
}

uint64_t req_started_ns(const struct req *r)
{
    return r->started_ns;
}

void req_batch_release(struct rpc_batch *b, struct req_port *port)
{
    json_object *replies = rpc_batch_release(b);

    if (replies && port)
        (void)port->ops->send(port->conn, replies);
    else
        json_object_put(replies);
}

int req_new(struct req_port *port, const struct rpc_call *call, struct rpc_batch *b,
            struct req **ret)
{
    struct req *r = calloc(1, sizeof *r);

    if (!r)
        return -ENOMEM;
    r->port = port;
    r->batch = b;
    r->id = call->id ? json_object_get(call->id) : NULL;
    r->request = json_object_get(call->request);
    r->params = call->params;
    r->method = call->method;
    r->notification = call->notification;
    r->uid = port->uid;
    r->gid = port->gid;
    r->pid = port->pid;
    r->admin = admin_set_has(port->admins, port->uid, port->gid);
    r->loop = port->loop;
    r->config = port->config;
    r->observer = port->observer;
    r->server = port->server;
    if (!b) {
        r->fds = port->fds;
        port->fds.n = 0;
    }
    LIST_PREPEND(port->list.head, r);
    port->list.n++;
    if (b)
        rpc_batch_hold(b);
    r->started_ns = uv_hrtime();
    if (r->observer)
        r->observer->started(r);
    *ret = r;
    return 0;
}

void req_set_params(struct req *r, const struct params_spec *spec, void *parsed)
{
    r->spec = spec;
    r->parsed = parsed;
}

void req_fds_close(struct req_fds *f)
{
    for (unsigned i = 0; i < f->n; i++)
        if (f->fd[i] >= 0)
            close(f->fd[i]);
    f->n = 0;
}

unsigned req_fds(const struct req *r)
{
    return r->fds.n;
}

int req_take_fd(struct req *r, int64_t index, enum req_fd_access access, int *ret_fd,
                const char **ret_reason)
{
    int fl, mode;

    if (index < 0 || (uint64_t)index >= r->fds.n) {
        *ret_reason = r->fds.n == 0 ? "no descriptor was passed with the request"
                                    : "no descriptor with this index was passed";
        return -EINVAL;
    }
    if (r->fds.fd[index] < 0) {
        *ret_reason = "descriptor already used by another parameter";
        return -EINVAL;
    }
    fl = fcntl(r->fds.fd[index], F_GETFL);
    mode = fl & O_ACCMODE;
    if (fl < 0 || (fl & O_PATH) || (access == REQ_FD_READ && mode != O_RDONLY && mode != O_RDWR) ||
        (access == REQ_FD_WRITE && mode != O_WRONLY && mode != O_RDWR)) {
        *ret_reason = access == REQ_FD_READ ? "descriptor is not open for reading"
                                            : "descriptor is not open for writing";
        return -EINVAL;
    }
    *ret_fd = r->fds.fd[index];
    r->fds.fd[index] = -1;
    return 0;
}

static void req_free(struct req *r)
{
    req_fds_close(&r->fds);
    if (r->parsed && r->spec && r->spec->done)
        r->spec->done(r->parsed);
    free(r->parsed);
    json_object_put(r->id);
    json_object_put(r->request);
    free(r);
}

static void req_unlink(struct req *r)
{
    struct req_port *p = r->port;

    if (!p)
        return;
    assert(p->list.n > 0);
    LIST_REMOVE(p->list.head, r);
    p->list.n--;
    r->port = NULL;
}

/* Completes a request with a response (taken over; NULL for none). */
static void req_complete(struct req *r, json_object *response)
{
    struct req_port *p = r->port;
    struct rpc_batch *b = r->batch;

    req_unlink(r);
    if (r->notification) {
        json_object_put(response);
        response = NULL;
    }
    if (r->observer)
        r->observer->completed(r, response);
    if (b) {
        rpc_batch_add(b, response);
        req_batch_release(b, p);
    } else if (response) {
        if (p)
            (void)p->ops->send(p->conn, response);
        else
            json_object_put(response);
    }
    if (r->in_handler)
        r->completed = true; /* req_handler_end() frees it */
    else
        req_free(r);
    if (p)
        p->ops->completed(p->conn);
}

void req_handler_begin(struct req *r)
{
    assert(!r->in_handler);
    r->in_handler = true;
}

void req_handler_end(struct req *r)
{
    assert(r->in_handler);
    r->in_handler = false;
    if (r->completed)
        req_free(r);
}

void req_list_fire_drain(struct req_port *port, uint64_t pass)
{
    bool again = true;

    /* A callback may complete its request and so change the list: rescan. */
    while (again && port->ops->active(port->conn)) {
        again = false;
        for (struct req *r = port->list.head; r; r = r->next) {
            if (r->on_drain && r->drain_pass <= pass) {
                req_event_cb cb = r->on_drain;

                r->on_drain = NULL;
                cb(r, r->drain_data);
                again = true;
                break;
            }
        }
    }
}

void req_list_detach_all(struct req_port *port)
{
    struct req *r;

    while ((r = port->list.head)) {
        req_event_cb cb = r->on_disconnect;

        req_unlink(r);
        r->on_drain = NULL;
        r->on_disconnect = NULL;
        if (cb)
            cb(r, r->disconnect_data);
    }
}

uid_t req_uid(const struct req *r)
{
    return r->uid;
}

gid_t req_gid(const struct req *r)
{
    return r->gid;
}

pid_t req_pid(const struct req *r)
{
    return r->pid;
}

bool req_is_admin(const struct req *r)
{
    return r->admin;
}

const char *req_method(const struct req *r)
{
    return r->method;
}

json_object *req_id(const struct req *r)
{
    return r->id;
}

json_object *req_params_json(const struct req *r)
{
    return r->params;
}

bool req_is_notification(const struct req *r)
{
    return r->notification;
}

uv_loop_t *req_loop(const struct req *r)
{
    return r->loop;
}

const struct config *req_config(const struct req *r)
{
    return r->config;
}

struct server *req_server(const struct req *r)
{
    return r->server;
}

bool req_connected(const struct req *r)
{
    return r->port && r->port->ops->open(r->port->conn);
}

void req_on_disconnect(struct req *r, req_event_cb cb, void *userdata)
{
    r->on_disconnect = cb;
    r->disconnect_data = userdata;
}

void req_on_drain(struct req *r, req_event_cb cb, void *userdata)
{
    r->on_drain = cb;
    r->drain_data = userdata;
    r->drain_pass = r->port ? r->port->ops->drain_pass(r->port->conn) : 0;
}

bool req_output_busy(const struct req *r)
{
    return r->port && r->port->ops->output_bytes(r->port->conn) > r->port->output_high;
}

/* No reply is wanted: a notification, or the client is gone. */
static bool req_silent(const struct req *r)
{
    return r->notification || !r->port;
}

void req_reply(struct req *r, json_object *result)
{
    if (req_silent(r)) {
        json_object_put(result);
        req_complete(r, NULL);
        return;
    }
    req_complete(r, rpc_result_new(r->id, result));
}

void req_set_subject(struct req *r, const char *param)
{
    r->subject = param;
}

/* A file error names its file: data gets "path" (the value of the subject param) and, for
 * a param other than "path" (file.rename's "from" or "to"), "side"; the reason begins with
 * them. */
static void file_subject(struct req *r, json_object *data)
{
    const char *param = r->subject ? r->subject : "path", *path, *reason;
    json_object *v, *rv;
    char *text = NULL;
    bool side = strcmp(param, "path") != 0;

    if (!data || !json_object_is_type(data, json_type_object) ||
        json_object_object_get_ex(data, "path", NULL))
        return;
    if (!r->params || !json_object_object_get_ex(r->params, param, &v) ||
        !json_object_is_type(v, json_type_string))
        return;
    path = json_object_get_string(v);
    json_object_object_add(data, "path", json_object_new_string(path));
    if (side)
        json_object_object_add(data, "side", json_object_new_string(param));
    reason = json_object_object_get_ex(data, "reason", &rv) ? json_object_get_string(rv) : "";
    if (asprintf(&text, "%s%s%s: %s", side ? param : "", side ? " " : "", path, reason) >= 0) {
        json_object_object_add(data, "reason", json_object_new_string(text));
        free(text);
    }
}

void req_error_data(struct req *r, int code, const char *message, json_object *data)
{
    if (req_silent(r)) {
        json_object_put(data);
        req_complete(r, NULL);
        return;
    }
    if (code == RPC_FILE_ERROR)
        file_subject(r, data);
    req_complete(r, rpc_error_new(r->id, code, message ? message : rpc_code_message(code), data));
}

void req_error(struct req *r, int code, const char *reason)
{
    if (req_silent(r)) {
        req_complete(r, NULL);
        return;
    }
    req_complete(r, rpc_error_reason_new(r->id, code, reason));
}

void req_invalid_params(struct req *r, const char *param, const char *reason)
{
    struct params_error e = {};
    json_object *d;

    if (req_silent(r)) {
        req_complete(r, NULL);
        return;
    }
    /* The reason names the parameter, as for the params kinds' own errors. */
    snprintf(e.param, sizeof e.param, "%s", param ? param : "params");
    snprintf(e.reason, sizeof e.reason, "%s", reason ? reason : "");
    d = params_error_data(&e);
    if (!d) {
        req_complete(r, rpc_invalid_params_new(r->id, param, reason));
        return;
    }
    req_complete(r,
                 rpc_error_new(r->id, RPC_INVALID_PARAMS, rpc_code_message(RPC_INVALID_PARAMS), d));
}

int req_notify(struct req *r, const char *method, json_object *params)
{
    struct req_port *p = r->port;

    if (!p || !p->ops->open(p->conn)) {
        json_object_put(params);
        return -ENOTCONN;
    }
    if (p->ops->output_bytes(p->conn) > p->output_hard) {
        json_object_put(params);
        return -ENOBUFS;
    }
    return p->ops->send(p->conn, rpc_notification_new(method, params));
}
