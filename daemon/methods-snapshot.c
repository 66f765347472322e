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

enum snap_method { M_SNAPSHOT, M_SNAPSHOTS, M_ROLLBACK, M_DELETE };

static void snap_method(struct req *r, void *params, enum snap_method m, method_handler_t self)
{
    const struct params_sandbox_snapshot *p = params; /* sandbox.snapshots: the id alone */
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err = {};
    struct methods_wait *w;
    struct sandbox *sb;
    int k;

    sb = methods_sandbox_find(r, p->id, self, params, NULL);
    if (!sb)
        return;
    w = methods_wait_new(r);
    if (!w)
        return;
    switch (m) {
    case M_SNAPSHOT:
        k = engine_snapshot(e, sb, p->name, methods_wait_on_json, w, &err);
        break;
    case M_SNAPSHOTS:
        k = engine_snapshots(e, sb, methods_wait_on_json, w, &err);
        break;
    case M_ROLLBACK:
        k = engine_rollback(e, sb, p->name, methods_wait_on_sandbox, w, &err);
        break;
    default:
        k = engine_snapshot_delete(e, sb, p->name, methods_wait_on_json, w, &err);
        break;
    }
    if (k < 0)
        methods_wait_refused(w, &err);
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
