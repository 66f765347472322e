/* A container deleted only when it holds no volume. See delete-guard.h. */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delete-guard.h"
#include "log.h"
#include "volume-locate.h"

#define COMP "volume"

struct guarded {
    struct pve_client *pve;
    char node[64];
    uint32_t vmid;
    unsigned flags;
    uint64_t timeout_ms;
    pve_done_fn cb;
    void *userdata;
};

static void on_config(const struct pve_result *res, void *userdata)
{
    _cleanup_free_ struct guarded *g = userdata;
    struct marker_volume v;
    int r;

    if (res->error < 0) {
        g->cb(res, g->userdata);
        return;
    }
    r = volume_held(res->data, &v);
    if (r > 0)
        log_error(COMP, "container %" PRIu32 " holds volume '%s' (mp%u): not deleted", g->vmid,
                  v.name, v.mp);
    else if (r < 0)
        log_error(COMP,
                  "container %" PRIu32 ": its description's volume lines do not parse: not "
                  "deleted",
                  g->vmid);
    if (r != 0) {
        g->cb(&(struct pve_result){.error = -EBUSY}, g->userdata);
        return;
    }
    r = pve_delete(g->pve, g->node, g->vmid, g->flags, g->timeout_ms, g->cb, g->userdata, NULL);
    if (r < 0)
        g->cb(&(struct pve_result){.error = r}, g->userdata);
}

int engine_delete_guarded(struct pve_client *pve, const char *node, uint32_t vmid, unsigned flags,
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
    g->pve = pve;
    g->vmid = vmid;
    g->flags = flags;
    g->timeout_ms = timeout_ms;
    g->cb = cb;
    g->userdata = userdata;
    r = pve_config_get(pve, node, vmid, true, timeout_ms, on_config, g, NULL);
    if (r < 0)
        free(g);
    return r;
}
