/* Starting a stopped READY sandbox's container again. See reconcile-restart.h. */
#include "macro.h"

#include "reconcile-restart.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pve.h"

#define COMP "reconcile"
#define IPFILTER_SET "ipfilter-net0"
#define IPFILTER_NEW "sandboxd-net0" /* as sandbox-create.c */
#define POLL_MS 250u

struct ctr {
    struct engine *e;
    char *node;
    uint32_t vmid;
    char *old_ip;
    char *ip;
    uint64_t ip_deadline;
    int set_step;
    char reason[256];
    uv_timer_t timer;
    ct_restart_cb cb;
    void *userdata;
};

static void ctr_free(struct ctr *x)
{
    free(x->node);
    free(x->old_ip);
    free(x->ip);
    free(x);
}

static void ctr_closed(uv_handle_t *h)
{
    ctr_free(h->data);
}

static void ctr_end(struct ctr *x, int error, const char *reason)
{
    x->cb(error, error == 0 ? x->ip : NULL, reason, x->userdata);
    uv_close((uv_handle_t *)&x->timer, ctr_closed);
}

static const char *why(const struct pve_result *res, const char *what)
{
    return res->perr && res->perr->message ? res->perr->message : what;
}

/* A new address replaces the set (never joins it): a set made under another name, filled,
 * then renamed over ipfilter-net0. The steps, each completing through on_set_step(): */
enum {
    SET_CLEAR_NEW, /* a leftover IPFILTER_NEW goes */
    SET_CREATE,
    SET_ADD,
    SET_CLEAR_OLD, /* ipfilter-net0 with the old address goes */
    SET_RENAME,
    SET_DONE,
};

static void set_step(struct ctr *x);

static void on_set_step(const struct pve_result *res, void *userdata)
{
    struct ctr *x = userdata;
    bool ok = res->error == 0;

    if (!ok && (x->set_step == SET_CLEAR_NEW || x->set_step == SET_CLEAR_OLD))
        ok = pve_error_no_such(res);
    if (!ok && (x->set_step == SET_CREATE || x->set_step == SET_ADD))
        ok = pve_error_exists(res);
    if (!ok) {
        ctr_end(x, res->error < 0 ? res->error : -EIO,
                why(res, "cannot replace the address in the ipfilter set"));
        return;
    }
    x->set_step++;
    set_step(x);
}

static void set_step(struct ctr *x)
{
    struct pve_client *c = engine_pve(x->e);
    uint64_t t = RESTART_CALL_TIMEOUT_MS;
    int r;

    switch (x->set_step) {
    case SET_CLEAR_NEW:
        r = pve_fw_ipset_delete(c, x->node, x->vmid, IPFILTER_NEW, t, on_set_step, x, NULL);
        break;
    case SET_CREATE:
        r = pve_fw_ipset_create(c, x->node, x->vmid, IPFILTER_NEW, t, on_set_step, x, NULL);
        break;
    case SET_ADD:
        r = pve_fw_ipset_add(c, x->node, x->vmid, IPFILTER_NEW, x->ip, t, on_set_step, x, NULL);
        break;
    case SET_CLEAR_OLD:
        r = pve_fw_ipset_delete(c, x->node, x->vmid, IPFILTER_SET, t, on_set_step, x, NULL);
        break;
    case SET_RENAME:
        r = pve_fw_ipset_rename(c, x->node, x->vmid, IPFILTER_NEW, IPFILTER_SET, t, on_set_step, x,
                                NULL);
        break;
    default:
        ctr_end(x, 0, NULL);
        return;
    }
    if (r < 0)
        ctr_end(x, r, "cannot replace the address in the ipfilter set");
}

static void poll_ip(struct ctr *x);

static void on_poll_timer(uv_timer_t *t)
{
    poll_ip(t->data);
}

static void on_interfaces(const struct pve_result *res, void *userdata)
{
    struct ctr *x = userdata;

    if (engine_closing(x->e)) {
        ctr_end(x, -ECANCELED, "the daemon is stopping");
        return;
    }
    if (res->error == 0 && res->ipv4) {
        char why[128];

        x->ip = strdup(res->ipv4);
        if (!x->ip) {
            ctr_end(x, -ENOMEM, "out of memory");
            return;
        }
        if (x->old_ip && strcmp(x->old_ip, x->ip) == 0) {
            ctr_end(x, 0, NULL);
            return;
        }
        /* the address comes from inside the container: checked before it goes in the set;
         * a static address is the configuration's, never another */
        if (engine_static_addresses(x->e))
            snprintf(why, sizeof why, "not its static address %s", strna(x->old_ip));
        if (engine_static_addresses(x->e) ||
            engine_addr_check(x->e, NULL, x->vmid, x->ip, why, sizeof why) < 0) {
            engine_addr_refused(NULL, x->vmid, x->node, x->ip, why);
            snprintf(x->reason, sizeof x->reason, "its address %s is refused: %s", x->ip, why);
            ctr_end(x, -EPERM, x->reason);
            return;
        }
        log_debug(COMP, "container %u: new address %s (was %s)", x->vmid, x->ip, strna(x->old_ip));
        x->set_step = SET_CLEAR_NEW;
        set_step(x);
        return;
    }
    if (uv_now(engine_loop(x->e)) >= x->ip_deadline) {
        ctr_end(x, -ETIMEDOUT, "no IPv4 address after the start");
        return;
    }
    uv_timer_start(&x->timer, on_poll_timer, POLL_MS, 0);
}

static void poll_ip(struct ctr *x)
{
    int r = pve_interfaces(engine_pve(x->e), x->node, x->vmid, RESTART_CALL_TIMEOUT_MS,
                           on_interfaces, x, NULL);

    if (r < 0)
        ctr_end(x, r, "cannot query the interfaces");
}

static void on_started(const struct pve_result *res, void *userdata)
{
    struct ctr *x = userdata;

    /* "CT N already running": it was running after all (a stale status): re-attached */
    if (res->error < 0 && !(res->perr && res->perr->kind == PVE_ERR_RUNNING)) {
        ctr_end(x, res->error, why(res, "the start failed"));
        return;
    }
    x->ip_deadline = uv_now(engine_loop(x->e)) + RESTART_IP_TIMEOUT_MS;
    poll_ip(x);
}

int reconcile_restart(struct engine *e, const char *node, uint32_t vmid, const char *old_ip,
                      ct_restart_cb cb, void *userdata)
{
    struct ctr *x = calloc(1, sizeof *x);
    int r;

    if (!x)
        return -ENOMEM;
    x->e = e;
    x->vmid = vmid;
    x->cb = cb;
    x->userdata = userdata;
    x->node = strdup(node);
    x->old_ip = old_ip ? strdup(old_ip) : NULL;
    if (!x->node || (old_ip && !x->old_ip))
        r = -ENOMEM;
    else
        r = pve_start(engine_pve(e), node, vmid, RESTART_START_TIMEOUT_MS, on_started, x, NULL);
    if (r < 0) {
        ctr_free(x);
        return r;
    }
    uv_timer_init(engine_loop(e), &x->timer);
    x->timer.data = x;
    return 0;
}
