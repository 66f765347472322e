/* What client.c (the connection and the calls in flight), client-call.c (the synchronous
 * calls) and client-error.c (the last call's failure) share. Not installed. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "frame.h"
#include "json-util.h"
#include "macro.h"
#include "sandboxd-client.h"

struct call;

struct sandboxd_client {
    char *socket;
    int fd; /* -1: not connected */
    int64_t next_id;
    struct frame_buf in;
    char *chunk;    /* for recv(2) */
    struct buf out; /* request lines not yet sent, from out_off on */
    size_t out_off;
    uint64_t queued, sent; /* bytes queued and sent on this connection */
    struct call *calls;    /* in flight, oldest first */
    struct call *calls_tail;
    sandboxd_notify_fn notify;
    void *notify_userdata;
    /* An error the daemon sent with id null (a line over its limit, a connection over a
     * cap): it closes the connection next, and the calls in flight fail with it. */
    json_object *close_error;
    /* The last call's failure (client-error.c). */
    bool failed;
    json_object *err_obj;
    char *err_text;
    struct sandboxd_error err;
};

/* client.c */
_printf_(2, 3) void client_close(struct sandboxd_client *c, const char *fmt, ...);

/* client-error.c */
void client_error_clear(struct sandboxd_client *c);
/* Records a local failure described by fmt; returns r. */
_printf_(3, 4) int client_fail(struct sandboxd_client *c, int r, const char *fmt, ...);
/* Records the daemon's error object e (taken over); returns -EREMOTE. */
int client_fail_remote(struct sandboxd_client *c, json_object *e);
/* Fills *ret with the view of the daemon's error object e (borrowed). */
void client_error_view(json_object *e, struct sandboxd_error *ret);
/* The string member key of object o, or NULL. */
const char *client_obj_str(json_object *o, const char *key);
