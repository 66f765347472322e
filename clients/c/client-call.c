/* The synchronous calls of the C client library, on top of the calls in flight of client.c.
 * See sandboxd-client.h. */
#include "client-internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
