/* The snapshot methods. See methods-snapshot.h. */
#include "methods-snapshot.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>

#include "methods-common.h"
#include "methods-sandbox.h"
#include "params-snapshot.h"
#include "req.h"
#include "sandbox-snapshot.h"

static_assert(offsetof(struct params_sandbox_snapshot, id) == 0 &&
                  offsetof(struct params_sandbox_id, id) == 0,
              "the params of a snapshot method begin with the sandbox's id");

/* A request waiting for its operation; req is NULL once its client left. */
struct snap_wait {
    struct req *req;
};

static void snap_detach(struct req *r, void *userdata)
{
    struct snap_wait *w = userdata;

    (void)methods_detach(r, &w->req, NULL);
}

static struct snap_wait *snap_wait_new(struct req *r)
{
    struct snap_wait *w = calloc(1, sizeof *w);

    if (!w) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    w->req = r;
    req_on_disconnect(r, snap_detach, w);
    return w;
}

static void on_json(const struct engine_error *err, json_object *result, void *userdata)
{
    struct snap_wait *w = userdata;

    if (w->req && err)
        methods_sandbox_reply_error(w->req, err);
    else if (w->req)
        req_reply(w->req, json_object_get(result));
    free(w);
}

static void on_rolled_back(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct snap_wait *w = userdata;

    if (w->req && err)
        methods_sandbox_reply_error(w->req, err);
    else if (w->req)
        req_reply(w->req, methods_sandbox_json(sb));
    free(w);
}

enum snap_method { M_SNAPSHOT, M_SNAPSHOTS, M_ROLLBACK, M_DELETE };

static void snap_method(struct req *r, void *params, enum snap_method m, method_handler_t self)
{
    const struct params_sandbox_snapshot *p = params; /* sandbox.snapshots: the id alone */
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err = {};
    struct snap_wait *w;
    struct sandbox *sb;
    int k;

    sb = methods_sandbox_find(r, p->id, self, params, NULL);
    if (!sb)
        return;
    w = snap_wait_new(r);
    if (!w)
        return;
    switch (m) {
    case M_SNAPSHOT:
        k = engine_snapshot(e, sb, p->name, on_json, w, &err);
        break;
    case M_SNAPSHOTS:
        k = engine_snapshots(e, sb, on_json, w, &err);
        break;
    case M_ROLLBACK:
        k = engine_rollback(e, sb, p->name, on_rolled_back, w, &err);
        break;
    default:
        k = engine_snapshot_delete(e, sb, p->name, on_json, w, &err);
        break;
    }
    if (k < 0) {
        free(w);
        methods_sandbox_reply_error(r, &err);
    }
}

void method_sandbox_snapshot(struct req *r, void *params, void *userdata)
{
    snap_method(r, params, M_SNAPSHOT, method_sandbox_snapshot);
}

void method_sandbox_snapshots(struct req *r, void *params, void *userdata)
{
    snap_method(r, params, M_SNAPSHOTS, method_sandbox_snapshots);
}

void method_sandbox_rollback(struct req *r, void *params, void *userdata)
{
    snap_method(r, params, M_ROLLBACK, method_sandbox_rollback);
}

void method_sandbox_snapshot_delete(struct req *r, void *params, void *userdata)
{
    snap_method(r, params, M_DELETE, method_sandbox_snapshot_delete);
}
