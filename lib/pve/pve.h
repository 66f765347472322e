/* Typed asynchronous Proxmox VE client over lib/pve/http (curl multi on the caller's loop).
 *
 * Every call takes a callback (pve_done_fn) and returns 0 when started; a call that returns
 * an error never calls its callback. The callback runs exactly once from the loop (never
 * from inside the starting call), unless the call is cancelled with pve_call_cancel().
 *
 * Authentication: "Authorization: PVEAPIToken=<token_id>=<secret>" on every request.
 *
 * Retries: a failed request is sent again with exponential backoff and jitter (50 ms
 * doubling, capped at 2 s, +-25 %) while the call's deadline allows, by the class of its
 * endpoint (the table in pve-endpoint.c):
 *   - GET, and PUT except resize (config, firewall options, pve_request()), all
 *     idempotent: on any transient failure: a Proxmox error pve_error_transient() accepts
 *     (locked, lock timeout, no quorum, 595..599, other 5xx except permanent texts) or a
 *     transport error pve_errno_transient() accepts (-ETIMEDOUT, -ECONNREFUSED,
 *     -EHOSTUNREACH, -ECONNRESET, -EPROTO);
 *   - task-starting requests (start, stop, shutdown, resize, delete): only when the failure
 *     proves that no task started: a Proxmox error pve_error_transient() accepts other than
 *     596..599 (Proxmox refused before the task, or 595: the node was not reached), or a
 *     connect failure (-ECONNREFUSED, -EHOSTUNREACH: nothing was sent); never after a timeout
 *     or a broken connection mid-request;
 *   - requests that create something (clone, firewall rule add and delete, IP set create and
 *     add): only on "CT is locked", "got timeout", "no quorum", 595, or a connect failure;
 *   - pve_request() with POST or DELETE: never.
 * A failed task is never retried. Beyond resending: pve_clone() with newid 0 tries another
 * id on "already exists", and pve_fw_group_set() lists the rules again when its change is
 * refused.
 *
 * Task-starting calls (clone, start, stop, shutdown, resize, delete) wait for the task:
 * they complete when it has stopped (status polled with backoff from 20 ms, growing by half
 * each time, capped at 1 s: a task's end is seen at most half its length late, or 1 s).
 * "WARNINGS: n" is success. A failed task gives error -EREMOTEIO with a pve_error
 * (http_status 0, message = exitstatus, upid set).
 *
 * Per-node cap: a node's pvedaemon serves three requests at once and pveproxy gives up on a
 * proxied request after 30 s (596 while it may still run), so the client sends at most
 * max_calls_per_node requests under /nodes/NODE/ at once; the others wait their turn in
 * order (FIFO per node), their deadline still counting (-ETIMEDOUT, or the last attempt's
 * error, when it passes while waiting).
 *
 * Clone concurrency: clones of one template are serialised inside the client (a FIFO per
 * template vmid; the next clone starts when the previous clone call has ended: its task
 * stopped, it failed or it was cancelled), and a clone that meets "CT is locked (disk)"
 * (another client cloning, or the task of a cancelled clone) is retried. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "http.h"
#include "pve-parse.h"

#define PVE_TIMEOUT_MS_DEFAULT 30000       /* default deadline of one call, retries included */
#define PVE_TASK_TIMEOUT_MS_DEFAULT 300000 /* default deadline of a task-waiting call */
#define PVE_TASK_POLL_MIN_MS 20
#define PVE_TASK_POLL_MAX_MS 1000
#define PVE_RETRY_MIN_MS 50
#define PVE_RETRY_MAX_MS 2000
#define PVE_VMID_ALLOC_ATTEMPTS 8 /* clone with newid 0: ids tried before giving up */
#define PVE_CLONE_QUEUE_MAX 1024  /* clones waiting per template */
#define PVE_CLONE_SOURCES_MAX 32  /* copies of one template on a node a clone may use */
#define PVE_MAX_CALLS_PER_NODE_DEFAULT 4

struct pve_client;
struct pve_call;

struct pve_config {
    const char *base_url;        /* "https://127.0.0.1:8006" (no trailing /api2/json) */
    const char *token_id;        /* "user@realm!name" */
    const char *token_secret;    /* UUID */
    struct http_tls tls;         /* see http.h; verify=false must be the user's explicit choice */
    uint64_t connect_timeout_ms; /* 0: HTTP default */
    uint64_t request_timeout_ms; /* one HTTP attempt; 0: 30 s (capped by the call deadline) */
    uint64_t timeout_ms;         /* default call deadline; 0: PVE_TIMEOUT_MS_DEFAULT */
    uint64_t task_timeout_ms;    /* default deadline of task-waiting calls; 0:
                                    PVE_TASK_TIMEOUT_MS_DEFAULT */
    uint32_t vmid_min;           /* vmid_range for pve_clone with newid 0 (inclusive) */
    uint32_t vmid_max;
    unsigned max_calls_per_node; /* requests under /nodes/NODE/ in flight at once per node;
                                    0: PVE_MAX_CALLS_PER_NODE_DEFAULT */
};

struct pve_result {
    /* 0: success. -EREMOTEIO: Proxmox answered with an error (HTTP >= 300, or a failed
     * task): see perr. Other negative errno: transport (http.h), -EBADMSG for an unparsable
     * answer, -ECANCELED when the client closed. When the deadline ends the retries, the last
     * attempt's error is reported (a Proxmox error or a transport errno); -ETIMEDOUT when no
     * attempt completed in time, or the task was still running (res->upid is then set). */
    int error;
    const struct pve_error *perr; /* set iff error == -EREMOTEIO; may carry upid */
    struct json_object *data;     /* success: the "data" member (NULL for JSON null); borrowed,
                                     json_object_get() it to keep it */
    const char *upid;             /* task calls: the task's UPID once started (also on
                                     task failure and on a deadline while waiting) */
    uint32_t vmid; /* nextid: the id. clone: the new id whenever a container with it may
                      exist because of this call (the task started, or the POST's outcome is
                      unknown, e.g. a timeout): clean it up on failure. 0 when the call proves
                      it created nothing (Proxmox refused the clone, e.g. "already exists" of
                      someone else's id, or the request was never sent). */
    const struct pve_task_status *task; /* task calls, task_status, wait_task */
    const char *ipv4;                   /* interfaces: first global IPv4 or NULL (no IP yet) */
    enum pve_ct_state ct_state;         /* status_current: running or stopped (else UNKNOWN) */
    const struct pve_vm_list *vms;      /* cluster_resources, pool_members, lxc_list */
    const struct pve_fw_rules *rules;   /* fw_rules_list */
    unsigned attempts;                  /* HTTP attempts made for the (last) request */
};

/* Every HTTP attempt of a request under /nodes/NODE/: error 0 with the HTTP status, or the
 * transport error (-ETIMEDOUT, ...). Called from inside the call's processing: the observer
 * must not cancel calls or close the client there (defer such work). */
typedef void (*pve_node_observer_fn)(const char *node, int error, long status, void *userdata);

/* Everything in *res is borrowed and valid only during the callback. The callback may start
 * new calls, cancel other calls and call pve_client_close(). */
typedef void (*pve_done_fn)(const struct pve_result *res, void *userdata);

/* Creates a client on loop (cfg copied). Returns 0 or -errno (-EINVAL on bad config). */
int pve_client_new(uv_loop_t *loop, const struct pve_config *cfg, struct pve_client **ret_client);
/* Every call in flight completes with -ECANCELED (synchronously from inside this call), then
 * the HTTP client closes; close_cb (may be NULL) runs from the loop after the client is
 * freed. NULL is accepted. */
void pve_client_close(struct pve_client *c, void (*close_cb)(void *userdata), void *userdata);

/* Cancels a call in flight (including a queued clone and a task wait): its callback is NEVER
 * called. The Proxmox-side effect of a request already sent is not undone (a cancelled clone
 * may still create its container: the caller cleans up by vmid). NULL accepted. */
void pve_call_cancel(struct pve_call *call);
/* Sets (fn NULL: clears) the observer of per-node attempts (lib/engine/cluster.c: node health). */
void pve_client_set_node_observer(struct pve_client *c, pve_node_observer_fn fn, void *userdata);

/* Common trailing arguments of every call:
 *   timeout_ms: the call's deadline incl. retries, queueing and task waiting; 0: the
 *     client's default (task_timeout_ms for calls that wait for a task)
 *   cb, userdata: completion
 *   ret_call: optional handle for pve_call_cancel(), valid until the callback runs */
#define PVE_CALL_ARGS                                                                              \
    uint64_t timeout_ms, pve_done_fn cb, void *userdata, struct pve_call **ret_call

/* Raw request: method "GET"/"POST"/"PUT"/"DELETE", path below /api2/json (e.g.
 * "/cluster/nextid"; must start with '/', already escaped), params a flat JSON object
 * (form-encoded in the body for POST/PUT, the query string for GET/DELETE; may be NULL).
 * Retried only when GET/PUT (idempotent). res->data is the "data" member. */
int pve_request(struct pve_client *c, const char *method, const char *path,
                struct json_object *params, PVE_CALL_ARGS);

/* GET /version: res->data {"version":..,"release":..,"repoid":..}. */
int pve_version(struct pve_client *c, PVE_CALL_ARGS);
/* GET /nodes/{node}/version: res->data as pve_version's, for that node. */
int pve_node_version(struct pve_client *c, const char *node, PVE_CALL_ARGS);
/* GET /cluster/nextid: res->vmid. */
int pve_nextid(struct pve_client *c, PVE_CALL_ARGS);

struct pve_clone_params {
    const char *node; /* the template's node */
    uint32_t template_vmid;
    /* Further copies of the template on the node, each as good a source (at most
     * PVE_CLONE_SOURCES_MAX - 1): the clone takes whichever is free. May be NULL. */
    const uint32_t *copies;
    size_t n_copies;
    bool urgent;    /* waits ahead of the clones that are not (a create before pool refills) */
    uint32_t newid; /* 0: pick a free id from vmid_range (see below) */
    const char *hostname;    /* NULL: copied from the template */
    const char *description; /* NULL: copied (the registry marker goes here) */
    const char *pool;        /* NULL: none */
    int full;                /* -1: Proxmox default (linked for templates), 0, 1 */
    const char *storage;     /* NULL: same (full clones only) */
    const char *target;      /* NULL: same node */
    const char *snapname;    /* NULL: the source as it is; else its snapshot (a full clone) */
    /* newid 0 only: ids for which this returns true are never tried (e.g. the registry's
     * ids); may be NULL. */
    bool (*vmid_taken)(uint32_t vmid, void *userdata);
    void *vmid_taken_userdata;
    /* Called once the clone task started (its UPID known, before the wait for it), e.g. to
     * record the UPID so that a restart can find out how the clone ended. May be NULL. */
    void (*on_task)(const char *upid, void *userdata);
    void *on_task_userdata;
};
/* POST /nodes/{node}/lxc/{template}/clone and wait for the task. Proxmox locks the source for
 * the whole task, so one clone runs per source at a time: the template's copies (template_vmid
 * and copies[]) share one queue, each copy runs one clone, and the others wait in order, the
 * urgent ones first (the call's deadline includes the time spent waiting).
 * With newid 0 the client reads /cluster/resources, picks a random free id in vmid_range
 * not in use (cluster, in-flight clones of this client, vmid_taken) and on "already exists"
 * tries another one (up to PVE_VMID_ALLOC_ATTEMPTS). res->vmid: see struct pve_result;
 * res->upid: the clone task (NULL when no task was started). A cancelled clone may still
 * create its container. Errors: -ENOSPC when vmid_range has no free id, -EBUSY (returned)
 * when PVE_CLONE_QUEUE_MAX clones already wait for the template. */
int pve_clone(struct pve_client *c, const struct pve_clone_params *p, PVE_CALL_ARGS);
/* Picks a free vmid for a clone without cloning: reads /cluster/resources and picks as
 * pve_clone does with newid 0 (random free id of vmid_range, not in use in the cluster, not
 * in a clone call of this client in flight, not vmid_taken). res->vmid. Nothing is
 * reserved: a clone of it may still meet "already exists" (pick again then). -ENOSPC when
 * vmid_range has no free id. */
int pve_vmid_pick(struct pve_client *c, bool (*vmid_taken)(uint32_t vmid, void *userdata),
                  void *vmid_taken_userdata, PVE_CALL_ARGS);

/* GET .../lxc/{vmid}/config (current=1 when current): res->data. */
int pve_config_get(struct pve_client *c, const char *node, uint32_t vmid, bool current,
                   PVE_CALL_ARGS);
/* PUT .../lxc/{vmid}/config with params (flat JSON object: strings, ints, booleans as 0/1;
 * "delete" as a comma list string). Synchronous; res->data NULL. */
int pve_config_put(struct pve_client *c, const char *node, uint32_t vmid,
                   struct json_object *params, PVE_CALL_ARGS);
/* PUT .../lxc/{vmid}/resize disk=<disk> size=<size> ("8G", "+1G") and wait for the task. */
int pve_resize(struct pve_client *c, const char *node, uint32_t vmid, const char *disk,
               const char *size, PVE_CALL_ARGS);
/* POST .../status/start|stop and wait for the task. */
int pve_start(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS);
int pve_stop(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS);
/* POST .../status/shutdown timeout=<shutdown_timeout_s> forceStop=<0|1> and wait. */
int pve_shutdown(struct pve_client *c, const char *node, uint32_t vmid, unsigned shutdown_timeout_s,
                 bool force_stop, PVE_CALL_ARGS);
/* GET .../status/current: res->ct_state (running or stopped; -EBADMSG for any other
 * status), res->data ({"status":"running",...}). The truth about one container, unlike
 * the status of a listing (see enum pve_ct_state). */
int pve_status_current(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS);
/* POST .../template: a stopped container becomes a template. Proxmox answers null and converts
 * it in a task whose UPID it does not return: the caller polls status/current for
 * "template": 1. */
int pve_template(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS);
/* GET .../interfaces: res->ipv4 (NULL while there is none yet; data null is not an error),
 * res->data the raw list. One request; the caller polls. */
int pve_interfaces(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS);

#define PVE_DELETE_FORCE (1u << 0)
#define PVE_DELETE_PURGE (1u << 1)
#define PVE_DELETE_DESTROY_UNREFERENCED (1u << 2)
/* DELETE .../lxc/{vmid}?force=..&purge=..&destroy-unreferenced-disks=.. and wait. */
int pve_delete(struct pve_client *c, const char *node, uint32_t vmid, unsigned flags,
               PVE_CALL_ARGS);

/* GET .../tasks/{upid}/status (node NULL or "": the UPID's node): res->task, res->data,
 * res->upid. */
int pve_task_status(struct pve_client *c, const char *node, const char *upid, PVE_CALL_ARGS);
/* GET .../tasks/{upid}/log?start=&limit= (limit 0: all; node as above):
 * res->data [{"n":..,"t":..}]. */
int pve_task_log(struct pve_client *c, const char *node, const char *upid, unsigned start,
                 unsigned limit, PVE_CALL_ARGS);
/* Polls the task until stopped (node as above): success -> error 0, res->task; failed task
 * -> -EREMOTEIO. Its deadline defaults to the task deadline. */
int pve_wait_task(struct pve_client *c, const char *node, const char *upid, PVE_CALL_ARGS);

/* Container snapshots (disk only). GET .../snapshot: res->data, the list with its "current"
 * entry. POST .../snapshot snapname=<name>, POST .../snapshot/{name}/rollback (the container
 * is left stopped) and DELETE .../snapshot/{name}: each waits for its task. */
int pve_snapshot_list(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS);
int pve_snapshot(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                 PVE_CALL_ARGS);
int pve_snapshot_rollback(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                          PVE_CALL_ARGS);
int pve_snapshot_delete(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                        PVE_CALL_ARGS);

#define PVE_VOLUME_KEYS 256 /* mp0..mp255, unused0..unused255 */

/* POST .../lxc/{vmid}/move_volume volume=<key> target-vmid=<target> target-volume=<target_key>
 * and wait for the task: the mount point (mpN) or unused volume (unusedN) <key> of vmid
 * becomes <target_key> of target on the same node, under a volume name of target's (the
 * source must be stopped unless <key> is unusedN; a running target mounts an mpN at once).
 * Keys are "mp0".."mp255" or "unused0".."unused255" (else -EINVAL). */
int pve_move_volume(struct pve_client *c, const char *node, uint32_t vmid, const char *key,
                    uint32_t target, const char *target_key, PVE_CALL_ARGS);

/* GET /pools/{poolid}: res->vms (members). */
int pve_pool_members(struct pve_client *c, const char *poolid, PVE_CALL_ARGS);
/* GET /cluster/resources?type=vm: res->vms. */
int pve_cluster_resources(struct pve_client *c, PVE_CALL_ARGS);
/* GET /cluster/resources?type=node: res->data (placement_report_parse()). */
int pve_cluster_nodes(struct pve_client *c, PVE_CALL_ARGS);
/* GET /nodes/{node}/lxc: res->vms. */
int pve_lxc_list(struct pve_client *c, const char *node, PVE_CALL_ARGS);

/* GET /cluster/firewall/options: res->data ({"enable":1,...}). */
int pve_cluster_fw_options_get(struct pve_client *c, PVE_CALL_ARGS);
/* PUT .../lxc/{vmid}/firewall/options with params ({"enable":true,"policy_in":"ACCEPT"}). */
int pve_fw_options_put(struct pve_client *c, const char *node, uint32_t vmid,
                       struct json_object *params, PVE_CALL_ARGS);
/* POST .../lxc/{vmid}/firewall/ipset name=<name>: creates the guest IP set. A set that exists
 * already fails with 500 "IPSet '<name>' already exists" (see pve_error_exists()). */
int pve_fw_ipset_create(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                        PVE_CALL_ARGS);
/* POST .../lxc/{vmid}/firewall/ipset/{name} cidr=<cidr>: adds an entry (Proxmox normalises
 * it). A present entry fails with 400 {"cidr":"address '<cidr>' already exists"}. */
int pve_fw_ipset_add(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                     const char *cidr, PVE_CALL_ARGS);
/* POST .../lxc/{vmid}/firewall/ipset name=<to> rename=<from>: renames the set `from`, entries
 * and all, in one write of the guest's firewall file (pve-firewall API2/Firewall/IPSet.pm,
 * create_ipset). Fails when `from` does not exist or `to` does already. */
int pve_fw_ipset_rename(struct pve_client *c, const char *node, uint32_t vmid, const char *from,
                        const char *to, PVE_CALL_ARGS);
/* DELETE .../lxc/{vmid}/firewall/ipset/{name}?force=1: removes the set with its entries. A
 * missing set fails with 500 "no such IPSet '<name>'" (see pve_error_no_such()). */
int pve_fw_ipset_delete(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                        PVE_CALL_ARGS);
/* GET .../lxc/{vmid}/firewall/ipset: res->data, the guest's sets ([{"name":..},...]). */
int pve_fw_ipset_list(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS);
/* GET .../lxc/{vmid}/firewall/ipset/{name}: res->data, its entries ([{"cidr":..},...]). */
int pve_fw_ipset_get(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                     PVE_CALL_ARGS);
/* True when res is a Proxmox "no such ..." refusal (a set, an entry that is not there). */
bool pve_error_no_such(const struct pve_result *res);
/* True when res is a Proxmox "... already exists" refusal (message or a parameter error). */
bool pve_error_exists(const struct pve_result *res);
/* GET .../lxc/{vmid}/firewall/rules: res->rules, res->data. */
int pve_fw_rules_list(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS);
/* POST .../lxc/{vmid}/firewall/rules with params ({"type":"group","action":"x","enable":1}). */
int pve_fw_rule_add(struct pve_client *c, const char *node, uint32_t vmid,
                    struct json_object *params, PVE_CALL_ARGS);
/* DELETE .../lxc/{vmid}/firewall/rules/{pos}?digest=<digest> (digest may be NULL). */
int pve_fw_rule_delete(struct pve_client *c, const char *node, uint32_t vmid, int pos,
                       const char *digest, PVE_CALL_ARGS);
/* Makes the CT reference security group `group` (enabled) or not: lists the rules, finds
 * the group rule by scanning, then adds it (type=group, action=group, enable=1) when missing
 * and wanted, or deletes it at its current position (with the list digest) when present and
 * unwanted. A change refused with a server error (the list changed: digest mismatch) or
 * "not found" (no rule at that position any more) is tried again from a new listing, up to
 * three times. Idempotent; res->data NULL, res->rules the last listing. */
int pve_fw_group_set(struct pve_client *c, const char *node, uint32_t vmid, const char *group,
                     bool present, PVE_CALL_ARGS);

/* Number of calls in flight (including queued clones). */
size_t pve_client_in_flight(const struct pve_client *c);
