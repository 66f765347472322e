/* The synchronous calls of the C client library, on top of the calls in flight of client.c,
 * and what made the last one fail. See sandboxd-client.h. */
#include "client-internal.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- failures ---------------------------------------------------------------------------- */

void client_error_clear(struct sandboxd_client *c)
{
    json_object_put(c->err_obj);
    free(c->err_text);
    c->err_obj = NULL;
    c->err_text = NULL;
    c->err = (struct sandboxd_error){};
    c->failed = false;
}

int client_fail(struct sandboxd_client *c, int r, const char *fmt, ...)
{
    va_list ap;

    client_error_clear(c);
    va_start(ap, fmt);
    if (vasprintf(&c->err_text, fmt, ap) < 0)
        c->err_text = NULL;
    va_end(ap);
    c->err.message = c->err_text ? c->err_text : "out of memory";
    c->failed = true;
    return r;
}

const char *client_obj_str(json_object *o, const char *key)
{
    json_object *v;

    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
        !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

void client_error_view(json_object *e, struct sandboxd_error *ret)
{
    json_object *v;

    *ret = (struct sandboxd_error){.object = e};
    if (json_object_object_get_ex(e, "code", &v))
        ret->code = json_object_get_int(v);
    ret->message = client_obj_str(e, "message");
    if (!ret->message)
        ret->message = "error";
    if (json_object_object_get_ex(e, "data", &v) && v) {
        ret->data = v;
        ret->reason = client_obj_str(v, "reason");
    }
}

/* Records the daemon's error object e (taken over); returns -EREMOTE. */
static int client_fail_remote(struct sandboxd_client *c, json_object *e)
{
    client_error_clear(c);
    c->err_obj = e;
    client_error_view(e, &c->err);
    c->failed = true;
    return -EREMOTE;
}

const struct sandboxd_error *sandboxd_client_error(const struct sandboxd_client *c)
{
    return c && c->failed ? &c->err : NULL;
}

/* ---- synchronous calls ---------------------------------------------------------------------- */

struct sync_call {
    bool done;
    int r;
    json_object *result; /* a reference */
    json_object *error;  /* a reference: the daemon's error, or the one it closed with */
    char *why;           /* why the connection closed */
};

static void on_sync_done(int r, json_object *result, const struct sandboxd_error *e, void *userdata)
{
    struct sync_call *s = userdata;

    s->done = true;
    s->r = r;
    s->result = json_object_get(result);
    if (e) {
        s->error = json_object_get(e->object);
        s->why = strdup(e->message ? e->message : "");
    }
}

/* Runs the connection until s is done, with w's hooks (may be NULL). */
static void sync_wait(struct sandboxd_client *c, struct sync_call *s, const struct sandboxd_wait *w)
{
    while (!s->done && c->fd >= 0) {
        struct pollfd p[1 + SANDBOXD_FDS_MAX] = {
            {.fd = c->fd, .events = sandboxd_client_events(c)}};
        size_t n = w ? MIN(w->n_fds, (size_t)SANDBOXD_FDS_MAX) : 0;
        bool ticking = w && w->tick && w->tick_ms;
        int k;

        for (size_t i = 0; i < n; i++)
            p[1 + i] = (struct pollfd){.fd = w->fds[i], .events = POLLIN};
        k = poll(p, 1 + n, ticking ? (int)w->tick_ms : -1);
        if (k < 0 && errno != EINTR) {
            client_close(c, "waiting for sandboxd: %s", strerror(errno));
            break;
        }
        for (size_t i = 0; k > 0 && i < n; i++)
            if (p[1 + i].revents && w->on_fd)
                w->on_fd(w->userdata, i);
        if (ticking)
            w->tick(w->userdata);
        if (k > 0 && p[0].revents)
            sandboxd_client_process(c, p[0].revents);
    }
}

static void sync_call_done(struct sync_call *s)
{
    json_object_put(s->result);
    json_object_put(s->error);
    free(s->why);
    *s = (struct sync_call){};
}

int sandboxd_call_wait(struct sandboxd_client *c, const char *method, json_object *params,
                       const int *fds, size_t n_fds, const struct sandboxd_wait *w,
                       json_object **ret_result)
{
    _cleanup_json_ json_object *p = params;

    if (!c)
        return -EINVAL;
    if (!ret_result)
        return client_fail(c, -EINVAL, "invalid arguments");
    /* A request the daemon did not get whole (its connection was found closed) is sent
     * once more on a new connection; one it got is never sent again. */
    for (unsigned attempt = 0;; attempt++) {
        struct sync_call s = {};
        int r;

        r = sandboxd_call_start(c, method, json_object_get(p), fds, n_fds, on_sync_done, &s);
        if (r < 0)
            return r;
        sync_wait(c, &s, w);
        if (!s.done)
            r = client_fail(c, -ENOTCONN, "the connection to sandboxd closed");
        else if (s.r == 0) {
            *ret_result = TAKE_PTR(s.result);
            r = 0;
        } else if (s.error)
            r = client_fail_remote(c, TAKE_PTR(s.error));
        else if (s.r == -ENOTCONN && attempt == 0) {
            sync_call_done(&s);
            continue;
        } else if (s.r == -ENOTCONN)
            r = client_fail(c, s.r, "the connection to sandboxd closed before %s was sent (%s)",
                            method, s.why);
        else
            r = client_fail(c, s.r,
                            "the connection to sandboxd closed while %s ran (%s): it may or "
                            "may not have taken effect",
                            method, s.why);
        sync_call_done(&s);
        return r;
    }
}

int sandboxd_call_fds(struct sandboxd_client *c, const char *method, json_object *params,
                      const int *fds, size_t n_fds, json_object **ret_result)
{
    return sandboxd_call_wait(c, method, params, fds, n_fds, NULL, ret_result);
}

int sandboxd_call(struct sandboxd_client *c, const char *method, json_object *params,
                  json_object **ret_result)
{
    return sandboxd_call_wait(c, method, params, NULL, 0, NULL, ret_result);
}
