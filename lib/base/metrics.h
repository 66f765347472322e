/* Process-wide counters, gauges and histograms for daemon.metrics.
 *
 * One fixed table of families (metric_id); each family has at most two labels whose
 * values come from small sets the daemon controls (states, nodes from the configuration,
 * Proxmox endpoint names, protocol method names, HTTP statuses). A family holds at most
 * METRICS_SERIES_MAX label combinations: past it, new combinations are counted under the
 * label value "_other", so memory stays bounded whatever happens.
 *
 * Loop thread only (no locking). Values are doubles; counters only grow. */
#pragma once

#include <json-c/json.h>
#include <stdint.h>

#define METRICS_SERIES_MAX 256u
#define METRICS_LABEL_MAX 64u /* longer label values are cut */

enum metric_id {
    M_CREATES,             /* counter {outcome}: ready, failed */
    M_CREATE_SECONDS,      /* histogram: request to ready */
    M_CREATE_STEP_SECONDS, /* histogram {step}: time spent in each create step */
    M_DESTROYS,            /* counter {reason}: completed destroys */
    M_REQUESTS,            /* counter {method, code} */
    M_REQUEST_SECONDS,     /* histogram {method} */
    M_REQUESTS_IN_FLIGHT,  /* gauge {method} */
    M_SSH_SESSIONS_LOST,   /* counter */
    M_SSH_RECONNECTS,      /* counter: sessions ready again after a loss */
    M_PVE_REQUESTS,        /* counter {endpoint, status} */
    M_POOL_HITS,           /* counter {template}: creates served from a warm pool */
    M_POOL_MISSES,         /* counter {template} */
    M_LIMITS,              /* counter {limit} */
    M_RECONCILE_ACTIONS,   /* counter {action} */
    M_AUDIT_EVENTS,        /* counter {event} */
    M_SANDBOXES,           /* gauge {state, node}: filled when scraped */
    M_SUBSCRIBERS,         /* gauge: daemon.subscribe callers */
    M_SUBSCRIBERS_DROPPED, /* counter: subscriptions ended for being too slow */
    M_PLACEMENTS,          /* counter {node}: creates placed on each node */
    M_NODE_UP,             /* gauge {node}: 1 in placement, 0 taken out */
    M_FORK_CHILDREN,       /* counter {outcome}: fork children ready or failed */
    M_FORK_CHILD_SECONDS,  /* histogram: from the sandbox.fork request to a child ready */
    M_PAUSES,              /* counter {operation, outcome}: pause or resume, done or failed */
    M_VOLUME_CALLS,        /* counter {operation, outcome}: volume calls, done or failed */
    _M_MAX,
};

/* Adds v to the series (counters and gauges). l1/l2: label values, NULL when the family
 * has fewer labels. */
void metrics_add(enum metric_id id, const char *l1, const char *l2, double v);
/* Sets a gauge's series. */
void metrics_set(enum metric_id id, const char *l1, const char *l2, double v);
/* One histogram observation (seconds). */
void metrics_observe(enum metric_id id, const char *l1, double seconds);
/* Drops every series of a family (gauges rebuilt when scraped). */
void metrics_clear(enum metric_id id);
/* The value of one counter or gauge series (0 when absent); for tests. */
double metrics_get(enum metric_id id, const char *l1, const char *l2);

/* One Proxmox HTTP request ended: error 0 with the HTTP status, or the transport error. */
void metrics_pve_request(const char *endpoint, int error, long status);

/* Warm pool hook: a create served from (hit) or not from (miss) a pool of ready
 * sandboxes. Nothing calls them while sandboxd has no pool; the series then stay 0. */
void metrics_pool_hit(const char *template_name);
void metrics_pool_miss(const char *template_name);

/* {"metrics": [{"name", "type", "help", "labels": [...], "samples": [...]}]}: see
 * docs/protocol.md (daemon.metrics). New object. */
json_object *metrics_to_json(void);
/* Frees every series (at exit). */
void metrics_free(void);
