/* Process-wide metrics. See metrics.h. */
#include "metrics.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

enum metric_type { MT_COUNTER, MT_GAUGE, MT_HISTOGRAM };

/* Upper bounds (seconds) of the latency histograms; +Inf is implied. */
static const double latency_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                         2.5,   5,    10,    30,   60,  120,  300};
#define N_BUCKETS ELEMENTSOF(latency_buckets)

struct family_def {
    const char *name;
    enum metric_type type;
    const char *help;
    const char *labels[2];
};

/* One row per family. Every name starts with "sandboxd_"; counter names end in "_total"
 * (the Prometheus convention). The trailing arguments are the label names (at most two). */
#define FAMILY(id, type, name, help, ...) [id] = {"sandboxd_" name, type, help, {__VA_ARGS__}}
#define COUNTER(id, name, help, ...) FAMILY(id, MT_COUNTER, name "_total", help, __VA_ARGS__)
#define GAUGE(id, name, help, ...) FAMILY(id, MT_GAUGE, name, help, __VA_ARGS__)
#define HISTOGRAM(id, name, help, ...) FAMILY(id, MT_HISTOGRAM, name, help, __VA_ARGS__)

static const struct family_def defs[_M_MAX] = {
    COUNTER(M_CREATES, "creates", "Sandbox creates by outcome.", "outcome"),
    HISTOGRAM(M_CREATE_SECONDS, "create_seconds", "Time from a create request to a ready sandbox."),
    HISTOGRAM(M_CREATE_STEP_SECONDS, "create_step_seconds", "Time spent in each create step.",
              "step"),
    COUNTER(M_DESTROYS, "destroys", "Completed sandbox destroys by reason.", "reason"),
    COUNTER(M_REQUESTS, "requests",
            "JSON-RPC requests completed, by method and error code (0: success).", "method",
            "code"),
    HISTOGRAM(M_REQUEST_SECONDS, "request_seconds",
              "JSON-RPC request latency by method (sandbox.exec: exec latency).", "method"),
    GAUGE(M_REQUESTS_IN_FLIGHT, "requests_in_flight", "JSON-RPC requests in flight by method.",
          "method"),
    COUNTER(M_SSH_SESSIONS_LOST, "ssh_sessions_lost",
            "SSH sessions to sandboxes lost while in use."),
    COUNTER(M_SSH_RECONNECTS, "ssh_reconnects", "SSH sessions established again after a loss."),
    COUNTER(M_PVE_REQUESTS, "proxmox_requests",
            "Proxmox API HTTP requests by endpoint and HTTP status (or transport error).",
            "endpoint", "status"),
    COUNTER(M_POOL_HITS, "pool_hits", "Creates served from the warm pool.", "template"),
    COUNTER(M_POOL_MISSES, "pool_misses", "Creates the warm pool could not serve.", "template"),
    COUNTER(M_LIMITS, "limits_hit", "Requests refused by a limit.", "limit"),
    COUNTER(M_RECONCILE_ACTIONS, "reconcile_actions", "Reconcile actions by kind.", "action"),
    COUNTER(M_AUDIT_EVENTS, "audit_events", "Audit events by kind.", "event"),
    GAUGE(M_SANDBOXES, "sandboxes", "Sandboxes by state and node.", "state", "node"),
    GAUGE(M_SUBSCRIBERS, "subscribers", "Connections subscribed to events."),
    COUNTER(M_SUBSCRIBERS_DROPPED, "subscribers_dropped",
            "Subscriptions ended because the subscriber did not keep up."),
    COUNTER(M_PLACEMENTS, "placements", "Creates placed on each node.", "node"),
    GAUGE(M_NODE_UP, "node_up", "1 while a node is in placement, 0 while it is taken out.", "node"),
    COUNTER(M_FORK_CHILDREN, "fork_children", "sandbox.fork children ready or failed.", "outcome"),
    HISTOGRAM(M_FORK_CHILD_SECONDS, "fork_child_seconds",
              "From a sandbox.fork request to each of its children ready."),
    COUNTER(M_PAUSES, "pauses", "Pauses and resumes of sandboxes by outcome.", "operation",
            "outcome"),
    COUNTER(M_VOLUME_CALLS, "volume_calls",
            "Volume calls (create, list, delete, take_back, attach) by outcome.", "operation",
            "outcome"),
};

struct series {
    char *l[2];
    double value; /* counters, gauges; the sum for histograms */
    uint64_t count;
    uint64_t buckets[N_BUCKETS]; /* not cumulative */
};

struct family {
    struct series *s;
    size_t n;
};

static struct family families[_M_MAX];

static bool label_eq(const char *stored, const char *v)
{
    if (!stored || !v)
        return stored == v;
    return strncmp(stored, v, METRICS_LABEL_MAX) == 0 &&
           strlen(stored) == strnlen(v, METRICS_LABEL_MAX);
}

static char *label_dup(const char *v)
{
    return v ? strndup(v, METRICS_LABEL_MAX) : NULL;
}

/* The series for (l1, l2), created when missing; NULL when out of memory. */
static struct series *series_get(enum metric_id id, const char *l1, const char *l2)
{
    struct family *f;
    struct series *s;

    if ((unsigned)id >= _M_MAX)
        return NULL;
    f = &families[id];
    if (!defs[id].labels[0])
        l1 = NULL;
    if (!defs[id].labels[1])
        l2 = NULL;
    if (defs[id].labels[0] && !l1)
        l1 = "";
    if (defs[id].labels[1] && !l2)
        l2 = "";
    for (size_t i = 0; i < f->n; i++)
        if (label_eq(f->s[i].l[0], l1) && label_eq(f->s[i].l[1], l2))
            return &f->s[i];
    if (f->n >= METRICS_SERIES_MAX) {
        /* bounded: the last slot is the overflow series */
        s = &f->s[f->n - 1];
        return s;
    }
    if (f->n + 1 == METRICS_SERIES_MAX) {
        l1 = l1 ? "_other" : NULL;
        l2 = l2 ? "_other" : NULL;
    }
    s = realloc(f->s, (f->n + 1) * sizeof *s);
    if (!s)
        return NULL;
    f->s = s;
    s = &f->s[f->n];
    memset(s, 0, sizeof *s);
    s->l[0] = label_dup(l1);
    s->l[1] = label_dup(l2);
    if ((l1 && !s->l[0]) || (l2 && !s->l[1])) {
        free(s->l[0]);
        free(s->l[1]);
        return NULL;
    }
    f->n++;
    return s;
}

void metrics_add(enum metric_id id, const char *l1, const char *l2, double v)
{
    struct series *s = series_get(id, l1, l2);

    if (s && defs[id].type != MT_HISTOGRAM)
        s->value += v;
}

void metrics_set(enum metric_id id, const char *l1, const char *l2, double v)
{
    struct series *s = series_get(id, l1, l2);

    if (s && defs[id].type == MT_GAUGE)
        s->value = v;
}

void metrics_observe(enum metric_id id, const char *l1, double seconds)
{
    struct series *s;

    if ((unsigned)id >= _M_MAX || defs[id].type != MT_HISTOGRAM)
        return;
    s = series_get(id, l1, NULL);
    if (!s)
        return;
    if (seconds < 0)
        seconds = 0;
    s->value += seconds;
    s->count++;
    for (size_t i = 0; i < N_BUCKETS; i++)
        if (seconds <= latency_buckets[i]) {
            s->buckets[i]++;
            break;
        }
}

double metrics_get(enum metric_id id, const char *l1, const char *l2)
{
    if ((unsigned)id >= _M_MAX)
        return 0;
    for (size_t i = 0; i < families[id].n; i++) {
        const struct series *s = &families[id].s[i];
        if (label_eq(s->l[0], defs[id].labels[0] ? (l1 ? l1 : "") : NULL) &&
            label_eq(s->l[1], defs[id].labels[1] ? (l2 ? l2 : "") : NULL))
            return s->value;
    }
    return 0;
}

void metrics_clear(enum metric_id id)
{
    struct family *f;

    if ((unsigned)id >= _M_MAX)
        return;
    f = &families[id];
    for (size_t i = 0; i < f->n; i++) {
        free(f->s[i].l[0]);
        free(f->s[i].l[1]);
    }
    free(f->s);
    f->s = NULL;
    f->n = 0;
}

void metrics_pve_request(const char *endpoint, int error, long status)
{
    char buf[16];
    const char *label = buf;

    if (error == 0)
        snprintf(buf, sizeof buf, "%ld", status);
    else if (error == -ETIMEDOUT)
        label = "timeout";
    else if (error == -ECONNREFUSED || error == -EHOSTUNREACH || error == -ENETUNREACH)
        label = "connect_failed";
    else if (error == -ECANCELED)
        label = "cancelled";
    else
        label = "transport_error";
    metrics_add(M_PVE_REQUESTS, endpoint, label, 1);
}

void metrics_pool_hit(const char *template_name)
{
    metrics_add(M_POOL_HITS, template_name, NULL, 1);
}

void metrics_pool_miss(const char *template_name)
{
    metrics_add(M_POOL_MISSES, template_name, NULL, 1);
}

static const char *type_name(enum metric_type t)
{
    return t == MT_COUNTER ? "counter" : t == MT_GAUGE ? "gauge" : "histogram";
}

static json_object *series_json(enum metric_id id, const struct series *s)
{
    json_object *o = json_object_new_object(), *labels = json_object_new_object();

    for (size_t k = 0; k < 2; k++)
        if (defs[id].labels[k])
            json_object_object_add(labels, defs[id].labels[k],
                                   json_object_new_string(s->l[k] ? s->l[k] : ""));
    json_object_object_add(o, "labels", labels);
    if (defs[id].type != MT_HISTOGRAM) {
        json_object_object_add(o, "value", json_object_new_double(s->value));
        return o;
    }
    json_object *b = json_object_new_array();
    uint64_t cum = 0;
    for (size_t i = 0; i < N_BUCKETS; i++) {
        json_object *e = json_object_new_object();
        cum += s->buckets[i];
        json_object_object_add(e, "le", json_object_new_double(latency_buckets[i]));
        json_object_object_add(e, "count", json_object_new_int64((int64_t)cum));
        json_object_array_add(b, e);
    }
    json_object_object_add(o, "buckets", b);
    json_object_object_add(o, "count", json_object_new_int64((int64_t)s->count));
    json_object_object_add(o, "sum", json_object_new_double(s->value));
    return o;
}

json_object *metrics_to_json(void)
{
    json_object *root = json_object_new_object(), *arr = json_object_new_array();

    for (unsigned id = 0; id < _M_MAX; id++) {
        const struct family_def *d = &defs[id];
        json_object *m = json_object_new_object(), *labels = json_object_new_array(),
                    *samples = json_object_new_array();

        json_object_object_add(m, "name", json_object_new_string(d->name));
        json_object_object_add(m, "type", json_object_new_string(type_name(d->type)));
        json_object_object_add(m, "help", json_object_new_string(d->help));
        for (size_t k = 0; k < 2; k++)
            if (d->labels[k])
                json_object_array_add(labels, json_object_new_string(d->labels[k]));
        json_object_object_add(m, "labels", labels);
        /* A family without labels always has its one series, 0 until it moves. */
        if (!d->labels[0] && families[id].n == 0)
            (void)series_get(id, NULL, NULL);
        for (size_t i = 0; i < families[id].n; i++)
            json_object_array_add(samples, series_json(id, &families[id].s[i]));
        json_object_object_add(m, "samples", samples);
        json_object_array_add(arr, m);
    }
    json_object_object_add(root, "metrics", arr);
    return root;
}

void metrics_free(void)
{
    for (unsigned id = 0; id < _M_MAX; id++)
        metrics_clear(id);
}
