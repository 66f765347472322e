/* sandbox.set_internet's wait: probes from inside the sandbox. See methods-internet.h.
 *
 * The probe is a shell command over the sandbox's SSH pool (isolation_probe_command(), the
 * same the create's isolation check runs): a TCP connect with `nc` when the sandbox has it,
 * else bash's /dev/tcp, bounded by `timeout`; exit status 0 means the address was reached. A probe
 * that cannot run (SSH trouble) counts as neither state and is tried again. The sandbox is looked
 * up by id for every probe, so a destroy meanwhile ends the wait with the error any later call
 * would get. */
#include "methods-internet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config.h"
#include "egress.h"
#include "log.h"
#include "macro.h"
#include "sandbox-io.h"
#include "sandbox.h"
#include "util.h"
#include "methods-common.h"
#include "rpc.h"
#include "req.h"

#define COMP "sandbox"

struct inet_wait {
    struct req *req; /* NULL once the client went away */
    struct engine *engine;
    char id[ID_MAX + 1];
    uid_t uid;
    bool admin;
    bool want;
    int seen; /* the last probe: 1 reached, 0 not, -1 none could run */
    unsigned probes;
    char command[320];
    uint64_t deadline_ms;
    uint64_t timeout_ms;
    json_object *result;
    uv_timer_t timer;
    struct sandbox_job *job;
};

static void on_closed(uv_handle_t *h)
{
    struct inet_wait *w = h->data;

    json_object_put(w->result);
    free(w);
}

/* The request has been completed (or the client went away) before this. */
static void finish(struct inet_wait *w)
{
    w->req = NULL;
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, on_closed);
}

static void fail(struct inet_wait *w, int code, const char *reason)
{
    json_object *d = json_object_new_object();

    json_object_object_add(d, "reason", json_object_new_string(reason));
    if (code == RPC_DEADLINE_EXCEEDED) {
        json_object_object_add(d, "timeout_ms", json_object_new_int64((int64_t)w->timeout_ms));
        json_object_object_add(d, "probes", json_object_new_int((int)w->probes));
        json_object_object_add(d, "reachable",
                               w->seen < 0 ? NULL : json_object_new_boolean(w->seen));
    }
    if (w->req)
        req_error_data(TAKE_PTR(w->req), code, NULL, d);
    else
        json_object_put(d);
    finish(w);
}

static void probe(struct inet_wait *w);

static void on_timer(uv_timer_t *t)
{
    probe(t->data);
}

static void again(struct inet_wait *w)
{
    uint64_t now = uv_now(w->timer.loop);

    if (now >= w->deadline_ms) {
        fail(w, RPC_DEADLINE_EXCEEDED,
             w->want ? "the probe address did not become reachable from the sandbox in time"
                     : "the probe address stayed reachable from the sandbox");
        return;
    }
    uv_timer_start(&w->timer, on_timer, MIN(INTERNET_PROBE_INTERVAL_MS, w->deadline_ms - now), 0);
}

static void on_probed(int error, const struct sandbox_exec_result *res, void *userdata)
{
    struct inet_wait *w = userdata;

    w->job = NULL;
    if (!w->req) {
        finish(w);
        return;
    }
    if (error == 0 && !res->timed_out && res->exit_code >= 0) {
        w->seen = res->exit_code == 0;
        log_debug(COMP, "%s: internet probe %u: %s", w->id, w->probes,
                  w->seen ? "reached" : "not reached");
        if ((bool)w->seen == w->want) {
            req_reply(TAKE_PTR(w->req), TAKE_PTR(w->result));
            finish(w);
            return;
        }
    } else if (error < 0)
        log_debug(COMP, "%s: internet probe %u could not run: %s", w->id, w->probes,
                  strerror(-error));
    again(w);
}

static void probe(struct inet_wait *w)
{
    struct engine_error err = {};
    struct sandbox_exec_params sp = {.command = w->command, .has_max_output = true};
    uint64_t now = uv_now(w->timer.loop);
    struct sandbox_info v;
    struct sandbox *sb;

    if (engine_closing(w->engine)) {
        fail(w, RPC_SHUTTING_DOWN, "the daemon is shutting down");
        return;
    }
    sb = engine_lookup(w->engine, w->id, w->uid, w->admin);
    if (!sb) {
        fail(w, RPC_NO_SUCH_SANDBOX, "the sandbox went away");
        return;
    }
    sandbox_view(sb, &v);
    if (v.state != SANDBOX_READY) {
        fail(w, RPC_BAD_STATE, "the sandbox is no longer ready");
        return;
    }
    sp.timeout_ms = MAX(MIN(INTERNET_PROBE_MAX_MS, w->deadline_ms - MIN(now, w->deadline_ms)), 1);
    w->probes++;
    if (sandbox_exec(sb, &sp, on_probed, w, &w->job, &err) < 0) {
        log_debug(COMP, "%s: internet probe cannot start: %s", w->id, strna(err.message));
        again(w);
    }
}

static void on_disconnect(struct req *r, void *userdata)
{
    struct inet_wait *w = userdata;

    if (methods_detach(r, &w->req, w->job)) /* else on_probed() finishes */
        finish(w);
}

bool internet_allow_usable(struct req *r, json_object *allow, const char *param)
{
    _cleanup_free_ struct egress_allow *a = NULL;
    struct params_error err = {};

    if (!allow)
        return true;
    a = malloc(sizeof *a);
    if (!a) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return false;
    }
    if (egress_allow_parse(allow, param, a, &err) < 0 || egress_has_names(a)) {
        req_invalid_params(r, param,
                           "domain names need the egress proxy, which this daemon does not run: "
                           "give CIDR entries only");
        return false;
    }
    for (size_t i = 0; i < a->n; i++)
        if (!egress_entry_public(&a->e[i])) {
            char msg[160];

            snprintf(msg, sizeof msg,
                     "entry %zu: not a public address range (private, loopback, link-local, "
                     "multicast and reserved addresses stay out of reach)",
                     i);
            req_invalid_params(r, param, msg);
            return false;
        }
    return true;
}

bool internet_probe_expected(const struct config *cfg, bool internet, json_object *allow)
{
    _cleanup_free_ struct egress_allow *a = NULL;
    struct params_error err = {};

    if (!internet || !allow)
        return internet;
    a = malloc(sizeof *a);
    return a && egress_allow_parse(allow, "allow", a, &err) == 0 &&
           egress_allows_addr(a, cfg->network.probe_ip, (uint16_t)cfg->network.probe_port);
}

void internet_add_effective_by(json_object *o, const struct config *cfg)
{
    char t[RFC3339_MAX];

    if (time_format_rfc3339(now_realtime() + (time_t)cfg->proxmox.firewall_period_s, t, sizeof t) ==
        0)
        json_object_object_add(o, "effective_by", json_object_new_string(t));
}

uint64_t internet_wait_ms(const struct config *cfg, int64_t wait_timeout_s)
{
    if (wait_timeout_s > 0)
        return 1000u * (uint64_t)wait_timeout_s;
    return 1000u * ((uint64_t)INTERNET_WAIT_DEFAULT_CYCLES * cfg->proxmox.firewall_period_s +
                    INTERNET_WAIT_DEFAULT_EXTRA_S);
}

void internet_wait_start(struct engine *e, struct req *r, const struct sandbox *sb, bool want,
                         uint32_t probe_ip, unsigned probe_port, uint64_t timeout_ms,
                         json_object *result)
{
    struct inet_wait *w = calloc(1, sizeof *w);
    struct sandbox_info v;

    if (!w) {
        json_object_put(result);
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    if (isolation_probe_command(probe_ip, probe_port, INTERNET_PROBE_CONNECT_S, w->command,
                                sizeof w->command) < 0) {
        free(w);
        json_object_put(result);
        req_error(r, RPC_INTERNAL_ERROR, "the probe command does not fit");
        return;
    }
    w->req = r;
    w->engine = e;
    sandbox_view(sb, &v);
    snprintf(w->id, sizeof w->id, "%s", v.id);
    w->uid = req_uid(r);
    w->admin = req_is_admin(r);
    w->want = want;
    w->seen = -1;
    w->result = result;
    w->timeout_ms = timeout_ms;
    uv_timer_init(req_loop(r), &w->timer);
    w->timer.data = w;
    w->deadline_ms = uv_now(req_loop(r)) + timeout_ms;
    req_on_disconnect(r, on_disconnect, w);
    probe(w);
}
