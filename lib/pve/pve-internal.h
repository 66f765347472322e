/* Inside the Proxmox client: for the files of lib/pve/ and their tests only.
 *
 * The client is five files, with calls in one direction only:
 *   pve-endpoint.c  the endpoint table (one row per Proxmox endpoint), path templates and
 *                   request parameters; no loop, no I/O.
 *   pve-call.c      the call engine: the client, one struct pve_call per typed call, its HTTP
 *                   requests, retries inside the call's deadline, and task waiting.
 *   pve-clone.c     clone calls: the per-template FIFO and vmid allocation.
 *   pve-fw.c        security-group calls: list the rules, then add or delete the group rule.
 *   pve.c           the typed calls of pve.h that need one endpoint each.
 * pve.c, pve-clone.c and pve-fw.c call into pve-call.c, and all four use pve-endpoint.c;
 * pve-call.c reaches a kind of call only through struct pve_call_ops. A kind that needs more
 * than one request (clone, firewall group) supplies its steps there and keeps its state in
 * its member of the union in struct pve_call. */
#pragma once

#include "macro.h"
#include "pve.h"
#include "util.h"

static inline void pve_json_putp(struct json_object **p)
{
    if (*p)
        json_object_put(*p);
}

/* ---- the endpoint table (pve-endpoint.c) ---- */

/* Which failures of a request may be repeated; see "Retries" in pve.h. */
enum pve_retry {
    PVE_RETRY_NONE,         /* never (raw POST/DELETE: effect unknown) */
    PVE_RETRY_ALWAYS,       /* idempotent: any transient Proxmox error or transport error */
    PVE_RETRY_SAFE,         /* task-starting: only a refusal before the task, or no connection */
    PVE_RETRY_NOTHING_DONE, /* creates something: only lock/quorum/595 refusals, no connection */
};

/* What a successful response's "data" is parsed into (the field of struct pve_result). */
enum pve_into {
    PVE_INTO_DATA,        /* nothing more: res->data */
    PVE_INTO_VMID,        /* res->vmid (GET /cluster/nextid) */
    PVE_INTO_IPV4,        /* res->ipv4 */
    PVE_INTO_CT_STATE,    /* res->ct_state (GET .../status/current) */
    PVE_INTO_VMS,         /* res->vms */
    PVE_INTO_RULES,       /* res->rules */
    PVE_INTO_TASK_STATUS, /* res->task */
    PVE_INTO_TASK,        /* a UPID: the call then waits for the task (res->upid, res->task) */
};

enum pve_ep {
    PVE_EP_RAW_GET,
    PVE_EP_RAW_PUT,
    PVE_EP_RAW_POST,
    PVE_EP_RAW_DELETE,
    PVE_EP_VERSION,
    PVE_EP_NODE_VERSION,
    PVE_EP_NEXTID,
    PVE_EP_CLUSTER_RESOURCES,
    PVE_EP_CLUSTER_NODES,
    PVE_EP_POOL,
    PVE_EP_LXC_LIST,
    PVE_EP_CLONE,
    PVE_EP_CONFIG_GET,
    PVE_EP_CONFIG_PUT,
    PVE_EP_RESIZE,
    PVE_EP_START,
    PVE_EP_STOP,
    PVE_EP_SHUTDOWN,
    PVE_EP_DELETE,
    PVE_EP_STATUS_CURRENT,
    PVE_EP_INTERFACES,
    PVE_EP_TASK_STATUS,
    PVE_EP_TASK_LOG,
    PVE_EP_CLUSTER_FW_OPTIONS,
    PVE_EP_FW_OPTIONS_PUT,
    PVE_EP_FW_IPSET_CREATE,
    PVE_EP_FW_IPSET_ADD,
    PVE_EP_FW_IPSET_DELETE,
    PVE_EP_FW_IPSET_LIST,
    PVE_EP_FW_IPSET_GET,
    PVE_EP_FW_RULES,
    PVE_EP_FW_RULE_ADD,
    PVE_EP_FW_RULE_DELETE,
    PVE_EP_SNAPSHOT_LIST,
    PVE_EP_SNAPSHOT,
    PVE_EP_SNAPSHOT_ROLLBACK,
    PVE_EP_SNAPSHOT_DELETE,
    PVE_EP_TEMPLATE,
    PVE_EP_MOVE_VOLUME,
    _PVE_EP_MAX,
};

struct pve_endpoint {
    const char *name;   /* for logs and tests */
    const char *method; /* "GET", "POST", "PUT", "DELETE" */
    /* Below /api2/json. Placeholders, filled from struct pve_path: {node} {vmid} {upid}
     * {name} {pos} {path}. May end in a fixed query ("?type=vm"). */
    const char *path;
    enum pve_into into;
    enum pve_retry retry;
};

extern const struct pve_endpoint pve_endpoints[_PVE_EP_MAX];

/* The values of a path template's placeholders. */
struct pve_path {
    const char *node; /* {node}, escaped; NULL or "": the node of upid (else -EINVAL) */
    uint32_t vmid;    /* {vmid}, PVE_VMID_MIN..PVE_VMID_MAX */
    const char *upid; /* {upid}, a valid UPID, unescaped (Proxmox takes its : @ ! raw) */
    const char *name; /* {name}: pool id or IP set name, non-empty, escaped */
    int pos;          /* {pos}: rule position, >= 0 */
    const char *path; /* {path}: a raw path starting with '/', inserted as is */
};

/* Fills ep->path. Returns 0, -EINVAL for a missing or invalid value, -ENOMEM. */
int pve_endpoint_path(const struct pve_endpoint *ep, const struct pve_path *args, char **ret_path);

enum pve_param_type {
    PVE_PARAM_SKIP,   /* not sent */
    PVE_PARAM_STRING, /* s; not sent when s is NULL */
    PVE_PARAM_INT,    /* i in decimal */
    PVE_PARAM_BOOL,   /* i as 0/1 */
};

/* One request parameter; build lists with the macros below. */
struct pve_param {
    const char *key;
    enum pve_param_type type;
    const char *s;
    int64_t i;
};
#define PVE_STR(k, v)                                                                              \
    {                                                                                              \
        .key = (k), .type = PVE_PARAM_STRING, .s = (v)                                             \
    }
#define PVE_INT(k, v)                                                                              \
    {                                                                                              \
        .key = (k), .type = PVE_PARAM_INT, .i = (int64_t)(v)                                       \
    }
#define PVE_BOOL(k, v)                                                                             \
    {                                                                                              \
        .key = (k), .type = PVE_PARAM_BOOL, .i = !!(v)                                             \
    }
/* "k=1" when v, else nothing (Proxmox's default is 0) */
#define PVE_FLAG(k, v)                                                                             \
    {                                                                                              \
        .key = (k), .type = (v) ? PVE_PARAM_BOOL : PVE_PARAM_SKIP, .i = 1                          \
    }
/* v < 0: nothing (Proxmox's default), else 0/1 */
#define PVE_OPT_BOOL(k, v)                                                                         \
    {                                                                                              \
        .key = (k), .type = (v) < 0 ? PVE_PARAM_SKIP : PVE_PARAM_BOOL, .i = (v) > 0                \
    }

/* Builds the flat JSON object of a parameter list. Returns 0 or -ENOMEM. */
int pve_params_new(const struct pve_param *v, size_t n, struct json_object **ret_params);

/* One request: an endpoint, its placeholders and its parameters (params, or the list pv;
 * both borrowed). */
struct pve_req {
    enum pve_ep ep;
    struct pve_path path;
    struct json_object *params;
    const struct pve_param *pv;
    size_t n_pv;
};
#define PVE_PARAMS(list) .pv = (list), .n_pv = ELEMENTSOF(list)

/* ---- calls (pve-call.c) ---- */

enum pve_call_kind {
    PVE_CALL_ONE,      /* one endpoint (with its task, if it starts one), or a task wait */
    PVE_CALL_CLONE,    /* pve-clone.c */
    PVE_CALL_FW_GROUP, /* pve-fw.c */
};

enum pve_call_state {
    PVE_CALL_QUEUED,    /* waiting to run from the loop (a clone waiting for its template) */
    PVE_CALL_REQUEST,   /* HTTP request in flight */
    PVE_CALL_SLEEPING,  /* backoff before a retry, or between task polls */
    PVE_CALL_THROTTLED, /* its node has max_calls_per_node requests in flight: waits its turn */
    PVE_CALL_DONE,      /* callback ran or cancelled; waiting for the timer to close */
};

/* Steps of a kind of call; every member may be NULL. */
struct pve_call_ops {
    /* Starts a queued call (pve_call_queue) from the loop. */
    void (*run)(struct pve_call *call);
    /* A request that starts no task succeeded and its result is stored in the call: start
     * the next request or finish. NULL: the call finishes with 0 and res->data. */
    void (*step_done)(struct pve_call *call);
    /* A request failed with r and will not be repeated: returns true when the call goes on
     * (it started another request), false to finish with r. */
    bool (*step_failed)(struct pve_call *call, int r);
    /* Adjusts the result right before the callback. */
    void (*result)(const struct pve_call *call, struct pve_result *res);
    /* The call ends (finished or cancelled). */
    void (*detach)(struct pve_call *call);
    /* Frees the kind's state (from the close callback). */
    void (*free)(struct pve_call *call);
    /* The request started a task: call->upid is set, the wait begins. May be NULL. */
    void (*task_started)(struct pve_call *call);
};

struct pve_clone_queue;

/* The requests of one node in flight (at most the client's max_calls_per_node) and the calls
 * waiting for a slot, oldest first. */
struct pve_node_slots {
    struct pve_node_slots *next;
    char *node;
    unsigned busy;
    struct pve_call *wait_head, *wait_tail;
};

struct pve_clone_state {
    struct pve_clone_queue *queue;
    struct pve_call *qnext;
    char *node, *hostname, *description, *pool, *storage, *target, *snapname;
    uint32_t template_vmid;                  /* the copy cloned, once the call runs */
    uint32_t sources[PVE_CLONE_SOURCES_MAX]; /* the template's copies it may clone */
    unsigned n_sources;
    bool urgent;
    int full;
    bool auto_id; /* newid 0: the client picks ids */
    bool (*taken)(uint32_t vmid, void *userdata);
    void *taken_userdata;
    void (*on_task)(const char *upid, void *userdata);
    void *on_task_userdata;
    uint32_t tried[PVE_VMID_ALLOC_ATTEMPTS];
    unsigned n_tried;
    struct pve_vm_list *in_use;
    /* The POST's outcome is unknown (596..599, a timeout, a broken connection): the call
     * looks at the new id's config until the clone shows up finished, or its deadline. */
    bool resolving;
    bool not_ours;     /* the id holds a container with another description */
    int unknown_error; /* how the POST failed, after this many attempts: */
    unsigned unknown_attempts;
    struct pve_error *unknown_perr;
    uint64_t resolve_ms; /* the next look's delay */
};

struct pve_fw_group_state {
    char *node, *group;
    uint32_t vmid;
    bool present;
    unsigned relists;
};

struct pve_call {
    struct pve_client *client;
    enum pve_call_kind kind;
    enum pve_call_state state;
    const struct pve_call_ops *ops; /* NULL for PVE_CALL_ONE */
    pve_done_fn cb;
    void *userdata;
    uint64_t deadline; /* uv_now() ms */
    uv_timer_t timer;
    struct http_request *req;
    struct pve_call *prev, *next; /* client's list of live calls */
    struct pve_node_slots *slot;  /* the node whose request slot this call holds, or NULL */
    struct pve_node_slots *waits; /* the node whose slot this call waits for, or NULL */
    struct pve_call *wait_next;   /* that node's FIFO of waiting calls */

    /* the current request */
    const struct pve_endpoint *ep;
    char *path, *query, *body;
    unsigned attempts;
    uint64_t backoff_ms;
    int last_error; /* of the last failed attempt of the current request, 0 if none */

    /* the task being waited for */
    bool polling; /* responses are task status polls */
    char *upid;
    char *task_node;
    uint64_t poll_ms;
    struct pve_task_status task;
    bool have_task;

    /* results */
    struct json_object *data;
    struct pve_error *perr;
    uint32_t vmid;
    char *ipv4;
    enum pve_ct_state ct_state;
    struct pve_vm_list *vms;
    struct pve_fw_rules *rules;

    union {
        struct pve_clone_state clone;
        struct pve_fw_group_state fw;
    } u;
};

enum pve_client_state {
    PVE_CLIENT_OPEN,
    PVE_CLIENT_CLOSING,
};

struct pve_client {
    uv_loop_t *loop;
    struct http_client *http;
    enum pve_client_state state;
    char *base_url;
    char *auth_header;
    uint64_t request_timeout_ms, timeout_ms, task_timeout_ms;
    uint32_t vmid_min, vmid_max;
    unsigned max_calls_per_node;
    struct pve_node_slots *slots; /* one per node seen, kept until the client is freed */
    uint64_t rng;
    struct pve_call *calls;
    size_t n_calls;                 /* calls not yet finished */
    size_t n_alive;                 /* call structs not yet freed (timer close pending) */
    struct pve_clone_queue *queues; /* pve-clone.c; empty queues are freed at once */
    struct close_notify closed;     /* pve_client_close()'s callback */
    bool http_closing;
    pve_node_observer_fn node_observer; /* pve_client_set_node_observer() */
    void *node_observer_userdata;
};

/* A new call (state PVE_CALL_REQUEST, no request yet). task: the default deadline is the
 * task deadline. Returns 0, -EINVAL, -ESHUTDOWN (client closing), -ENOMEM. */
int pve_call_new(struct pve_client *c, enum pve_call_kind kind, const struct pve_call_ops *ops,
                 bool task, uint64_t timeout_ms, pve_done_fn cb, void *userdata,
                 struct pve_call **ret_call);
/* Ends a call that was being started: r < 0 discards it (no callback) and returns r; else
 * stores it in *ret_call (optional) and returns 0. */
int pve_call_started(struct pve_call *call, int r, struct pve_call **ret_call);
/* Sets the call's request and sends it (or queues it for its node's slot). Returns 0 or
 * -errno (nothing sent). */
int pve_call_request(struct pve_call *call, const struct pve_req *req);
/* The same from the loop: a failure finishes the call. */
void pve_call_step(struct pve_call *call, const struct pve_req *req);
/* The same after delay_ms (a poll). */
void pve_call_step_after(struct pve_call *call, const struct pve_req *req, uint64_t delay_ms);
/* Completes the call (callback, then free). */
void pve_call_finish(struct pve_call *call, int error);
/* Parks the call until pve_call_run(), or until its deadline (-ETIMEDOUT); run_now: runs
 * it from the loop at once. */
void pve_call_queue(struct pve_call *call, bool run_now);
void pve_call_run(struct pve_call *call);
uint64_t pve_call_remaining_ms(const struct pve_call *call);
/* Not security relevant: jitter and vmid picking. */
uint64_t pve_client_random(struct pve_client *c);
/* A whole single-endpoint call: new, request, started. */
int pve_call_start(struct pve_client *c, const struct pve_req *req, PVE_CALL_ARGS);
#define PVE_CALL_PASS timeout_ms, cb, userdata, ret_call
