/* A container deleted only when it holds no volume. See delete-guard.h. */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delete-guard.h"
#include "log.h"
#include "sandbox-internal.h"
#include "testhook.h"
#include "volume-locate.h"
#include "volume.h"

#define COMP "volume"
/* Volumes taken back from one container before its delete gives up. */
#define TAKE_BACKS_MAX 16u

struct guarded {
    struct engine *e;
    struct pve_client *pve;
    unsigned taken;         /* volumes moved back so far */
    struct marker_volume v; /* the one going back */
    char node[64];
    uint32_t vmid;
    unsigned flags;
    uint64_t timeout_ms;
    pve_done_fn cb;
    void *userdata;
};

static int look(struct guarded *g);

static void end(struct guarded *g, const struct pve_result *res)
{
    g->cb(res, g->userdata);
    free(g);
}

static void on_back(const struct engine_error *err, json_object *result, void *userdata)
{
    struct guarded *g = userdata;

    if (err) {
        log_error(COMP,
                  "container %" PRIu32 " holds volume '%s' (mp%u), which cannot go back to the "
                  "volume holder (%s): not deleted",
                  g->vmid, g->v.name, g->v.mp, strna(err->message));
        end(g, &(struct pve_result){.error = -EBUSY});
        return;
    }
    test_crash_point("reconcile-volume-back");
    g->taken++;
    if (look(g) < 0)
        end(g, &(struct pve_result){.error = -EIO});
}

/* Stopped (or it was): the volume goes back to the holder. */
static void on_stopped(const struct pve_result *res, void *userdata)
{
    struct guarded *g = userdata;
    struct engine_error err = {};

    if (res->error < 0 && res->perr && res->perr->kind == PVE_ERR_NOT_FOUND) {
        end(g, res);
        return;
    }
    if (engine_volume_take_back(g->e, g->node, g->vmid, &g->v, on_back, g, &err) < 0)
        on_back(&err, NULL, g);
}

static void on_config(const struct pve_result *res, void *userdata)
{
    struct guarded *g = userdata;
    int r;

    if (res->error < 0) {
        end(g, res);
        return;
    }
    r = volume_held(res->data, &g->v);
    if (r > 0 && g->taken < TAKE_BACKS_MAX) {
        log_info(COMP, "container %" PRIu32 ": volume '%s' (mp%u) goes back to the volume holder",
                 g->vmid, g->v.name, g->v.mp);
        /* a move needs its source stopped */
        r = pve_stop(g->pve, g->node, g->vmid, g->timeout_ms, on_stopped, g, NULL);
        if (r >= 0)
            return;
        end(g, &(struct pve_result){.error = r});
        return;
    }
    if (r > 0)
        log_error(COMP, "container %" PRIu32 " holds volume '%s' (mp%u): not deleted", g->vmid,
                  g->v.name, g->v.mp);
    else if (r < 0)
        log_error(COMP,
                  "container %" PRIu32 ": its description's volume lines do not parse: not "
                  "deleted",
                  g->vmid);
    if (r != 0) {
        end(g, &(struct pve_result){.error = -EBUSY});
        return;
    }
    r = pve_delete(g->pve, g->node, g->vmid, g->flags, g->timeout_ms, g->cb, g->userdata, NULL);
    if (r < 0)
        g->cb(&(struct pve_result){.error = r}, g->userdata);
    free(g);
}

static int look(struct guarded *g)
{
    return pve_config_get(g->pve, g->node, g->vmid, true, g->timeout_ms, on_config, g, NULL);
}

int engine_delete_guarded(struct engine *e, const char *node, uint32_t vmid, unsigned flags,
                          uint64_t timeout_ms, pve_done_fn cb, void *userdata)
{
    struct guarded *g = calloc(1, sizeof *g);
    int r;

    if (!g)
        return -ENOMEM;
    if ((size_t)snprintf(g->node, sizeof g->node, "%s", node) >= sizeof g->node) {
        free(g);
        return -ENAMETOOLONG;
    }
    g->e = e;
    g->pve = e->pve;
    g->vmid = vmid;
    g->flags = flags;
    g->timeout_ms = timeout_ms;
    g->cb = cb;
    g->userdata = userdata;
    r = look(g);
    if (r < 0)
        free(g);
    return r;
}
