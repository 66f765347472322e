/* The create: one table of steps (create_steps), run in order by the operation driver
 * (op-step.h), and engine_create(). See sandbox.h.
 *
 * Each row names the state the sandbox is in while the step runs, the step's own deadline
 * (capped by the create deadline), what the step does (for the deadline message) and the
 * function that issues its call. Every call completes through the driver, which checks for
 * an abort (shutdown, destroy), a failure and moves on; a step that polls or retries asks
 * for op_step_again() and keeps its deadline. The SSH, host key and isolation steps live in
 * sandbox-connect.c, sandbox-rekey.c and sandbox-isolation-steps.c. */
#include "macro.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "audit.h"
#include "log.h"
#include "marker.h"
#include "op-step.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "sandbox-pause.h"
#include "testhook.h"
#include "volume.h"

#define COMP "sandbox"

/* With ipfilter=1 Proxmox passes only source addresses in the container's ipfilter-net0 set,
 * and a DHCP lease is in no set by itself: without the ipset steps the sandbox sends no
 * IPv4 at all (SSH replies included).
 *
 * The set filters by merely existing: an ipfilter-net0 set turns IP filtering on whatever
 * the ipfilter option (pve-firewall Firewall.pm generate_tap_rules_direction;
 * proxmox-firewall firewall.rs), and the nftables firewall then no longer adds a static
 * ip= of net0 to it. pve-firewall applies the stored configuration on its own cycle (every
 * 10 s, 5 s with nftables), whatever the order of the calls, so:
 *  - a template's own ipfilter-net0 set (copied to the clone) is deleted while the clone
 *    is still stopped: static mode then relies on net0's ip=, which both firewalls put in
 *    the implicit set of ipfilter=1; DHCP mode starts without any set;
 *  - DHCP: the lease, once checked (engine_addr_check(): it comes from inside the
 *    container), goes into a set made under another name (IPFILTER_NEW), which is then
 *    renamed to ipfilter-net0 in one write: no cycle can see an empty or partial
 *    ipfilter-net0, and the set holds exactly that one address. ipfilter is switched on
 *    last, so that the filter stays on should the set ever be removed. */
#define IPFILTER_SET "ipfilter-net0"
#define IPFILTER_NEW "sandboxd-net0"
#define IP_CALL_MS 10000u /* one interfaces query of the address wait */

/* ---- outcome ---- */

struct sb_op *create_op_new(void)
{
    struct sb_op *op = calloc(1, sizeof *op);

    if (op)
        op->finish = create_finish;
    return op;
}

void create_finish(struct sandbox *sb)
{
    struct sb_op *op = TAKE_PTR(sb->create_op);

    assert(op); /* reported once */
    sb->refs++;
    if (op->failed) {
        struct engine_error err = op->err;
        err.state = sandbox_state_to_public(sb->state);
        op->cb(&err, sb, op->userdata);
    } else
        op->cb(NULL, sb, op->userdata);
    op_free(op);
    sandbox_unref(sb);
}

/* A create step failed (the driver's fail hook): remember the error, then destroy what was
 * made. */
static void create_fail(struct sandbox *sb, const struct engine_error *err)
{
    struct engine *e = sb->engine;

    assert(sb->create_op);
    if (create_replace(sb)) /* its node went down: another node takes it */
        return;
    log_debug(COMP, "%s: create failed in %s: %s", sb->id, sandbox_state_to_string(sb->state),
              strna(err->message));
    op_set_error(sb->create_op, err);
    /* A vmid chosen but never cloned to is not ours: the cleanup must not touch it. */
    if (!sb->clone_issued)
        sb->vmid = 0;
    free(sb->error);
    sb->error = strdup(err->message ? err->message : "create failed");
    if (e->closing) {
        /* Kept as it is: the registry resolves it at the next start. */
        create_finish(sb);
        return;
    }
    sandbox_set_state(sb, SANDBOX_FAILED);
    destroy_start(sb);
}

void create_fail_now(struct sandbox *sb, const struct engine_error *err)
{
    create_fail(sb, err);
}

/* ---- the steps ----
 * Each step's start issues a call that completes through the driver (op-step.h). */
static void create_enter(struct sandbox *sb, op_step_start_fn start);

static bool vmid_taken(uint32_t vmid, void *userdata)
{
    struct engine *e = userdata;

    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (sb->vmid == vmid)
            return true;
    return tomb_vmid_recent(e, vmid);
}

static void on_vmid_picked(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (res->error == -ENOSPC) {
        /* Not Proxmox's failure: every id of the range is in use or held (vmid_taken). */
        op_step_done(sb, &(struct engine_error){
                             .kind = ENGINE_E_BUSY,
                             .error = -ENOSPC,
                             .message = "no free vmid in [proxmox] vmid_range (the vmid of a "
                                        "destroyed sandbox is held for two firewall cycles)"});
        return;
    }
    if (res->error == 0)
        sb->vmid = res->vmid;
    op_step_pve_done(sb, res);
}

static int start_vmid_pick(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_vmid_pick(sb->engine->pve, vmid_taken, sb->engine, timeout_ms, on_vmid_picked, sb,
                         &sb->call);
}

/* A step's registry save completed (the vmid before the clone, the record at READY). */
static void on_step_saved(int r, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err = {
        .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot write the registry record"};

    sb->refs--;
    if (sb->state == SANDBOX_GONE || !sb->create_op) { /* dropped by engine_close() */
        sandbox_maybe_free(sb);
        return;
    }
    op_step_done(sb, r < 0 ? &err : NULL);
}

/* Saves the record as it is now (the vmid before the clone, READY at the end). */
static int start_save(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    int r;

    sb->refs++;
    r = sandbox_save(sb, on_step_saved, sb);
    if (r < 0)
        sb->refs--;
    return r;
}

static void on_upid_saved(int r, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->refs--;
    if (r >= 0)
        test_crash_point("create-clone-task-recorded");
    sandbox_maybe_free(sb);
}

/* The clone task started: its UPID goes into the record (the clone goes on meanwhile). */
static void on_clone_task(const char *upid, void *userdata)
{
    struct sandbox *sb = userdata;

    free(sb->upid);
    sb->upid = strdup(upid);
    sb->refs++;
    if (!sb->upid || sandbox_save(sb, on_upid_saved, sb) < 0)
        sb->refs--;
}

#define VMID_ATTEMPTS 5u /* "already exists" at clone time: another id, this many times */

static void on_cloned(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    /* 0 when the call proves it created nothing (e.g. the id was taken meanwhile): then no
     * cleanup may touch that id. */
    sb->vmid = res->vmid;
    test_crash_point("create-cloned");
    if (!res->vmid && pve_error_exists(res) && sb->vmid_attempts + 1 < VMID_ATTEMPTS) {
        if (op_step_check_abort(sb))
            return;
        sb->vmid_attempts++;
        sb->clone_issued = false;
        log_debug(COMP, "%s: the container id was taken meanwhile; choosing another", sb->id);
        create_enter(sb, start_vmid_pick);
        return;
    }
    op_step_pve_done(sb, res);
}

static bool skip_clone_wait(const struct sandbox *sb)
{
    return !sb->resumed;
}

static int start_clone_wait(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    assert(sb->resumed && sb->upid); /* resumed from a record with the clone task's UPID */
    return pve_wait_task(sb->engine->pve, sb->node, sb->upid, timeout_ms, op_step_pve, sb,
                         &sb->call);
}

static int start_clone(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct engine *e = sb->engine;
    _cleanup_free_ char *desc = NULL;
    uint32_t src[PVE_CLONE_SOURCES_MAX];
    size_t n = engine_template_vmids(e, sandbox_template(sb), sb->node, src, ELEMENTSOF(src));
    int r;

    r = sandbox_description(sb, &desc);
    if (r < 0) {
        *ret_fail = "cannot build the ownership marker";
        return r;
    }
    struct pve_clone_params cp = {
        .node = sb->node,
        .template_vmid = src[0],
        .copies = src + 1,
        .n_copies = n - 1,
        .urgent = !sb->pool_member, /* a caller waits for it; a pool refill does not */
        .hostname = sb->hostname,
        .description = desc,
        .pool = e->cfg->proxmox.pool,
        .full = e->cfg->proxmox.full_clone ? 1 : -1,
        .storage = e->cfg->proxmox.full_clone ? e->cfg->proxmox.storage : NULL,
        .newid = sb->vmid,
        .on_task = on_clone_task,
        .on_task_userdata = sb,
    };
    if (sb->fork_vmid) /* a fork child: the parent's snapshot (sandbox-fork.c) */
        timeout_ms = fork_clone_params(sb, &cp);
    r = pve_clone(e->pve, &cp, timeout_ms, on_cloned, sb, &sb->call);
    if (r >= 0)
        sb->clone_issued = true;
    return r;
}

static int start_config_put(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    _cleanup_json_ json_object *p = json_object_new_object();

    if (!p) {
        *ret_fail = "out of memory";
        return -ENOMEM;
    }
    json_object_object_add(p, "cores", json_object_new_int((int)sb->cores));
    json_object_object_add(p, "memory", json_object_new_int((int)sb->memory_mb));
    return pve_config_put(sb->engine->pve, sb->node, sb->vmid, p, timeout_ms, op_step_pve, sb,
                          &sb->call);
}

static void on_config_got(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    json_object *rootfs = NULL;

    sb->call = NULL;
    if (res->error == 0 && res->data) {
        const char *problem = isolation_config_problem(res->data);
        json_object *net0 = NULL;

        if (problem) { /* never started: Proxmox would not isolate it */
            char buf[256];
            struct engine_error err = {
                .kind = ENGINE_E_NOT_CONFIGURED, .error = -EPERM, .message = buf};

            snprintf(buf, sizeof buf, "container %" PRIu32 " (template '%s'): %s", sb->vmid,
                     sb->template, problem);
            op_step_done(sb, &err);
            return;
        }
        json_object_object_get_ex(res->data, "rootfs", &rootfs);
        if (json_object_object_get_ex(res->data, "net0", &net0)) {
            free(sb->net0);
            sb->net0 = strdup(json_object_get_string(net0));
        }
    }
    sb->rootfs_gb = pve_rootfs_size_gb(rootfs ? json_object_get_string(rootfs) : NULL, 0);
    if (sb->rootfs_gb)
        sandbox_template(sb)->disk_gb = sb->rootfs_gb; /* later creates check it up front */
    if (sb->disk_explicit && sb->rootfs_gb > sb->disk_gb) {
        struct engine_error err = {.kind = ENGINE_E_INVALID,
                                   .error = -EINVAL,
                                   .message = "disk_gb is smaller than the template's disk "
                                              "(disks only grow)",
                                   .param = "disk_gb",
                                   .limit = sb->rootfs_gb};
        op_step_done(sb, &err);
        return;
    }
    if (sb->rootfs_gb > sb->disk_gb)
        sb->disk_gb = (unsigned)sb->rootfs_gb; /* cannot shrink: report what it has */
    op_step_pve_done(sb, res);
}

static int start_config_get(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_config_get(sb->engine->pve, sb->node, sb->vmid, false, timeout_ms, on_config_got, sb,
                          &sb->call);
}

static bool skip_static(const struct sandbox *sb)
{
    return engine_static_addresses(sb->engine);
}

static bool skip_dhcp(const struct sandbox *sb)
{
    return !engine_static_addresses(sb->engine);
}

static int start_config_net(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    const struct config_network *n = &sb->engine->cfg->network;
    _cleanup_json_ json_object *p = json_object_new_object();
    _cleanup_free_ char *net0 = NULL;
    int r;

    if (!sb->net0) {
        *ret_fail = "the template has no net0";
        return -ENOENT;
    }
    r = p ? net0_with_address(sb->net0, sb->ip, n, &net0) : -ENOMEM;
    if (r >= 0 && sb->net_rate_mbps) {
        _cleanup_free_ char *addr = TAKE_PTR(net0);

        r = net0_with_rate(addr, sb->net_rate_mbps, &net0);
    }
    if (r < 0) {
        *ret_fail = "out of memory";
        return r;
    }
    json_object_object_add(p, "net0", json_object_new_string(net0));
    if (n->dns)
        json_object_object_add(p, "nameserver", json_object_new_string(n->dns));
    return pve_config_put(sb->engine->pve, sb->node, sb->vmid, p, timeout_ms, op_step_pve, sb,
                          &sb->call);
}

/* DHCP mode with a bandwidth cap: net0 as cloned plus rate= (static mode writes it with
 * the address). */
static bool skip_rate(const struct sandbox *sb)
{
    return engine_static_addresses(sb->engine) || !sb->net_rate_mbps;
}

static int start_config_rate(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    _cleanup_json_ json_object *p = json_object_new_object();
    _cleanup_free_ char *net0 = NULL;
    int r;

    if (!sb->net0) {
        *ret_fail = "the template has no net0";
        return -ENOENT;
    }
    r = p ? net0_with_rate(sb->net0, sb->net_rate_mbps, &net0) : -ENOMEM;
    if (r < 0) {
        *ret_fail = "out of memory";
        return r;
    }
    json_object_object_add(p, "net0", json_object_new_string(net0));
    return pve_config_put(sb->engine->pve, sb->node, sb->vmid, p, timeout_ms, op_step_pve, sb,
                          &sb->call);
}

static bool skip_resize(const struct sandbox *sb)
{
    return sb->rootfs_gb == 0 || sb->disk_gb <= sb->rootfs_gb;
}

static int start_resize(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    char size[32];

    snprintf(size, sizeof size, "%uG", sb->disk_gb);
    return pve_resize(sb->engine->pve, sb->node, sb->vmid, "rootfs", size, timeout_ms, op_step_pve,
                      sb, &sb->call);
}

static int start_fw_options(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    _cleanup_json_ json_object *p = json_object_new_object();

    if (!p) {
        *ret_fail = "out of memory";
        return -ENOMEM;
    }
    json_object_object_add(p, "enable", json_object_new_int(1));
    json_object_object_add(p, "policy_in", json_object_new_string("DROP"));
    json_object_object_add(p, "policy_out", json_object_new_string("REJECT"));
    /* static: the address is in net0 already, so in the ipfilter set from the configuration;
     * DHCP: start_fw_ipfilter() once ipfilter-net0 holds the lease */
    json_object_object_add(p, "ipfilter",
                           json_object_new_int(engine_static_addresses(sb->engine) ? 1 : 0));
    json_object_object_add(p, "macfilter", json_object_new_int(1));
    return pve_fw_options_put(sb->engine->pve, sb->node, sb->vmid, p, timeout_ms, op_step_pve, sb,
                              &sb->call);
}

static bool skip_fw_group(const struct sandbox *sb)
{
    return !sb->internet;
}

static int start_fw_group(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct engine *e = sb->engine;

    if (sb->internet_allow)
        return egress_fw_apply(sb, true, sb->internet_allow, timeout_ms, op_step_pve, sb);

    return pve_fw_group_set(e->pve, sb->node, sb->vmid, e->cfg->proxmox.internet_group, true,
                            timeout_ms, op_step_pve, sb, &sb->call);
}

static void on_started(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (res->error >= 0)
        sb->ct_started_ms = now_ms(sb->engine); /* its firewall cycle counts from here */
    op_step_pve_done(sb, res);
}

static int start_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_start(sb->engine->pve, sb->node, sb->vmid, timeout_ms, on_started, sb, &sb->call);
}

static void on_interfaces(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (res->error < 0 && res->error != -ETIMEDOUT) {
        op_step_pve_done(sb, res);
        return;
    }
    if (res->error == 0 && res->ipv4) {
        struct engine_error err = {
            .kind = ENGINE_E_INTERNAL, .error = -ENOMEM, .message = "out of memory"};
        char why[128], msg[256];
        int r = engine_addr_check(sb->engine, sb, sb->vmid, res->ipv4, why, sizeof why);

        if (r == -EBUSY) { /* asked again once that destroy has ended (or failed) */
            log_debug(COMP, "%s: address %s: %s: asking again", sb->id, res->ipv4, why);
            op_step_again(sb, ENGINE_IP_POLL_MAX_MS);
            return;
        }
        if (r < 0) {
            engine_addr_refused(sb->id, sb->vmid, sb->node, res->ipv4, why);
            snprintf(msg, sizeof msg, "the container reports the address %s, refused: %s",
                     res->ipv4, why);
            err = (struct engine_error){.kind = ENGINE_E_PROXMOX, .error = -EPERM, .message = msg};
            op_step_done(sb, &err);
            return;
        }
        free(sb->ip);
        sb->ip = strdup(res->ipv4);
        op_step_done(sb, sb->ip ? NULL : &err);
        return;
    }
    /* polls back off from ENGINE_IP_POLL_MIN_MS to ENGINE_IP_POLL_MAX_MS, growing by half
     * each time: an address is seen at most half the wait late */
    uint64_t delay = sb->run.poll_ms ? sb->run.poll_ms : ENGINE_IP_POLL_MIN_MS;

    sb->run.poll_ms = MIN(delay * 3 / 2, ENGINE_IP_POLL_MAX_MS);
    op_step_again(sb, delay);
}

static int start_ip_poll(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_interfaces(sb->engine->pve, sb->node, sb->vmid, MIN(timeout_ms, IP_CALL_MS),
                          on_interfaces, sb, &sb->call);
}

static void on_ipset(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (res->error < 0 && pve_error_exists(res))
        op_step_done(sb, NULL);
    else
        op_step_pve_done(sb, res);
}

static void on_ipset_deleted(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (res->error < 0 && pve_error_no_such(res))
        op_step_done(sb, NULL);
    else
        op_step_pve_done(sb, res);
}

/* Before the start: a template's own ipfilter-net0 set, copied by the clone, goes. */
static int start_ipset_clear(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_fw_ipset_delete(sb->engine->pve, sb->node, sb->vmid, IPFILTER_SET, timeout_ms,
                               on_ipset_deleted, sb, &sb->call);
}

static int start_ipset_create(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_fw_ipset_create(sb->engine->pve, sb->node, sb->vmid, IPFILTER_NEW, timeout_ms,
                               on_ipset, sb, &sb->call);
}

static int start_ipset_add(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    assert(sb->ip); /* the address wait before it found the lease */
    return pve_fw_ipset_add(sb->engine->pve, sb->node, sb->vmid, IPFILTER_NEW, sb->ip, timeout_ms,
                            on_ipset, sb, &sb->call);
}

static int start_ipset_rename(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_fw_ipset_rename(sb->engine->pve, sb->node, sb->vmid, IPFILTER_NEW, IPFILTER_SET,
                               timeout_ms, op_step_pve, sb, &sb->call);
}

static int start_fw_ipfilter(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    _cleanup_json_ json_object *p = json_object_new_object();

    if (!p) {
        *ret_fail = "out of memory";
        return -ENOMEM;
    }
    json_object_object_add(p, "ipfilter", json_object_new_int(1));
    return pve_fw_options_put(sb->engine->pve, sb->node, sb->vmid, p, timeout_ms, op_step_pve, sb,
                              &sb->call);
}

static const struct op_step create_steps[] = {
    {SANDBOX_PENDING, OP_STEP_UNBOUNDED, "recording the intent", NULL,
     NULL, /* by engine_create() */
     .crash_done = "create-intent-durable"},
    /* The vmid is chosen and durable in the intent before the clone: a restart finds the
     * container by it, and the clone task by the UPID recorded once the task started. */
    {SANDBOX_PENDING, ENGINE_STEP_CONFIG_MS, "choosing the container id", start_vmid_pick,
     "cannot choose a container id"},
    {SANDBOX_PENDING, OP_STEP_UNBOUNDED, "recording the container id", start_save,
     "cannot write the registry record"},
    {SANDBOX_CLONING, ENGINE_STEP_CLONE_MS, "cloning", start_clone, "cannot start the clone",
     .crash_sent = "create-clone-sent"},
    /* A create resumed after a restart (sandbox-resume.c) enters here. */
    {SANDBOX_CLONING, ENGINE_STEP_CLONE_MS, "waiting for the interrupted clone", start_clone_wait,
     "cannot poll the clone task", .skip = skip_clone_wait},
    {SANDBOX_CONFIGURING, ENGINE_STEP_CONFIG_MS, "configuring", start_config_put,
     "cannot configure the container"},
    {SANDBOX_CONFIGURING, ENGINE_STEP_CONFIG_MS, "configuring", start_config_get,
     "cannot read the configuration"},
    /* Static addressing: the address chosen by engine_create() into net0. */
    {SANDBOX_CONFIGURING, ENGINE_STEP_CONFIG_MS, "configuring the address", start_config_net,
     "cannot configure the address", .skip = skip_dhcp},
    {SANDBOX_CONFIGURING, ENGINE_STEP_CONFIG_MS, "setting the bandwidth cap", start_config_rate,
     "cannot set the bandwidth cap", .skip = skip_rate},
    {SANDBOX_CONFIGURING, ENGINE_STEP_CONFIG_MS, "resizing the disk", start_resize,
     "cannot resize the disk", .skip = skip_resize},
    {SANDBOX_CONFIGURING, ENGINE_STEP_CONFIG_MS, "configuring the firewall", start_fw_options,
     "cannot set the firewall options"},
    {SANDBOX_CONFIGURING, ENGINE_STEP_CONFIG_MS, "configuring the firewall", start_fw_group,
     "cannot set the internet rule", .skip = skip_fw_group},
    {SANDBOX_CONFIGURING, ENGINE_STEP_CONFIG_MS, "removing the template's ipfilter set",
     start_ipset_clear, "cannot remove the template's ipfilter set"},
    /* No container starts while the datacenter firewall is off (sandbox-isolation.c). */
    {SANDBOX_CONFIGURING, ENGINE_STEP_CONFIG_MS, "checking the datacenter firewall",
     isolation_dc_start, "cannot read the datacenter firewall options"},
    /* Before the first start; the volume calls have their own deadlines: a volume call is
     * never left running behind a failed create (its rollback would not see the volume). */
    {SANDBOX_CONFIGURING, OP_STEP_UNBOUNDED, "attaching volumes", volumes_attach_start,
     "cannot attach the volumes", ENGINE_E_INVALID, .skip = volumes_attach_skip},
    {SANDBOX_STARTING, ENGINE_STEP_START_MS, "starting", start_start, "cannot start the container",
     .crash_sent = "create-starting"},
    /* Polls: each query bounded by IP_CALL_MS, the wait by the step's deadline. */
    /* DHCP: the lease (checked), then the set under another name, filled, renamed to
     * ipfilter-net0, then ipfilter (static mode has all from the configuration: the address
     * is known and ipfilter was set with the options). */
    {SANDBOX_WAITING_IP, ENGINE_STEP_IP_MS, "waiting for the container's IPv4 address",
     start_ip_poll, "cannot query the interfaces", .skip = skip_static},
    {SANDBOX_WAITING_IP, ENGINE_STEP_CONFIG_MS, "creating the firewall's ipfilter set",
     start_ipset_create, "cannot create the ipfilter set", .skip = skip_static},
    {SANDBOX_WAITING_IP, ENGINE_STEP_CONFIG_MS, "adding the address to the firewall's ipfilter set",
     start_ipset_add, "cannot add the address to the ipfilter set", .skip = skip_static},
    {SANDBOX_WAITING_IP, ENGINE_STEP_CONFIG_MS, "putting the firewall's ipfilter set in place",
     start_ipset_rename, "cannot rename the ipfilter set", .skip = skip_static},
    {SANDBOX_WAITING_IP, ENGINE_STEP_CONFIG_MS, "turning on the firewall's ipfilter",
     start_fw_ipfilter, "cannot turn on the ipfilter", .skip = skip_static},
    /* Retries dropped connects (ENGINE_CONNECT_ATTEMPTS) under the create deadline
     * (sandbox-connect.c). */
    {SANDBOX_CONNECTING, OP_STEP_OP_DEADLINE, "connecting over SSH", connect_start,
     "cannot start the SSH connect", .fail_kind = ENGINE_E_SSH, .crash_sent = "create-connecting"},
    /* The sandbox's own host key (hostkey.h, sandbox-rekey.c): regenerated over the session
     * authenticated with the template's key, recorded in the marker, then the only key
     * accepted. */
    {SANDBOX_CONNECTING, ENGINE_STEP_CONFIG_MS, "regenerating the SSH host key", rekey_start,
     "cannot regenerate the SSH host key", .fail_kind = ENGINE_E_SSH, .skip = rekey_skip,
     .crash_done = "create-rekeyed"},
    {SANDBOX_CONNECTING, ENGINE_STEP_CONFIG_MS, "recording the SSH host key", marker_write_start,
     "cannot record the SSH host key", .skip = rekey_skip},
    {SANDBOX_CONNECTING, OP_STEP_OP_DEADLINE, "connecting over SSH with the new host key",
     rekey_reconnect_start, "cannot start the SSH connect", .fail_kind = ENGINE_E_SSH,
     .skip = rekey_skip},
    /* Its firewall in force, proven from inside (sandbox-isolation.c): probed again until
     * the create deadline. */
    {SANDBOX_CONNECTING, OP_STEP_OP_DEADLINE, "verifying the sandbox's isolation",
     isolation_probe_start, "cannot verify the sandbox's isolation", .fail_kind = ENGINE_E_SSH},
    /* READY is durable before the caller hears of it: a restart re-attaches the sandbox. */
    {SANDBOX_READY, OP_STEP_UNBOUNDED, "recording the sandbox as ready", start_save,
     "cannot write the registry record", .crash_done = "create-ready-durable"},
};

static void create_done(struct sandbox *sb)
{
    create_finish(sb);
}

static const struct op_kind create_kind = {
    .name = "create",
    .steps = create_steps,
    .n_steps = ELEMENTSOF(create_steps),
    .set_state = true,
    .destroyed = "the sandbox was destroyed while being created",
    .fail = create_fail,
    .done = create_done,
};

static void on_intent_saved(int r, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err = {
        .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot write the registry record"};

    sb->refs--;
    if (sb->state == SANDBOX_GONE) { /* dropped by engine_close() */
        sandbox_maybe_free(sb);
        return;
    }
    op_step_done(sb, r < 0 ? &err : NULL);
}

/* The create's deadline, counted from its start (a resumed one: from its resumption). */
static uint64_t create_budget_ms(const struct sandbox *sb)
{
    return (uint64_t)sb->engine->cfg->sandbox.create_timeout_s * 1000 * (1 + sb->fork_slot);
}

/* Enters the step whose start is start (a create placed again from its vmid choice, or
 * resumed after a restart), under the create's deadline. */
static void create_enter(struct sandbox *sb, op_step_start_fn start)
{
    op_step_enter(sb, &create_kind, sb->started_ms + create_budget_ms(sb), create_budget_ms(sb),
                  start);
}

void create_restart(struct sandbox *sb)
{
    create_enter(sb, start_vmid_pick);
}

void create_resume(struct sandbox *sb)
{
    sb->engine->creates_replace = creates_replace;
    create_enter(sb, start_clone_wait);
}

/* ---- engine_create ---- */

/* A new sandbox on node for opts, its intent saved and its create begun: 0, or the refusal. */
int create_launch(struct engine *e, const struct sandbox_create_opts *opts, int64_t ttl,
                  const char *node, struct sb_op *op, struct engine_error *ret_err)
{
    struct sandbox *sb;
    int r;

    r = create_sandbox_new(e, opts, ttl, node, &sb);
    if (r < 0) {
        if (r == -EINVAL)
            return engine_refuse(ret_err, ENGINE_E_INVALID, r, "bad labels", "labels");
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "out of memory", NULL);
    }
    /* a node asked for (by the caller, or by the pool for its per-node target) is kept */
    sb->node_asked = opts->node != NULL;
    if (engine_static_addresses(e)) {
        /* chosen before the intent is saved: the record holds it from the start */
        r = engine_addr_allocate(e, &sb->ip);
        if (r < 0) {
            sandbox_set_state(sb, SANDBOX_GONE);
            sandbox_maybe_free(sb);
            return engine_refuse(
                ret_err, r == -ENOSPC ? ENGINE_E_BUSY : ENGINE_E_INTERNAL, r,
                r == -ENOSPC ? "no free address in [network] addresses" : "out of memory", NULL);
        }
    }
    /* The intent is durable before anything exists in Proxmox (the first step's call). */
    test_crash_point("create-before-intent");
    r = sandbox_save(sb, on_intent_saved, sb);
    if (r < 0) {
        sandbox_set_state(sb, SANDBOX_GONE);
        sandbox_maybe_free(sb);
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot write the registry record",
                             NULL);
    }
    sb->refs++; /* until on_intent_saved */
    sb->create_op = op;
    op_step_begin(sb, &create_kind, sb->started_ms + create_budget_ms(sb), create_budget_ms(sb));
    sandbox_link(sb);
    log_debug(COMP, "%s: create for uid %u", sb->id, (unsigned)sb->owner_uid);
    sandbox_observe_requested(sb);
    return 0;
}

int engine_create(struct engine *e, const struct sandbox_create_opts *opts, engine_sandbox_cb cb,
                  void *userdata, struct engine_error *ret_err)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;
    const char *node = NULL;
    struct sb_op *op;
    int64_t ttl;
    int r;

    if (e->closing)
        return engine_refuse(ret_err, ENGINE_E_SHUTDOWN, -ESHUTDOWN, "the daemon is shutting down",
                             NULL);
    e->creates_replace = creates_replace;
    if (!e->configured)
        return engine_refuse(ret_err, ENGINE_E_NOT_CONFIGURED, -ENXIO,
                             "Proxmox is not configured ([proxmox] section)", NULL);
    ttl = opts->ttl_s < 0 ? (int64_t)cs->default_ttl_s : opts->ttl_s;
    r = create_check(e, opts, ttl, ret_err);
    if (r < 0)
        return r;
    if (!opts->pool && !opts->no_pool && !opts->internet_allow && opts->n_volumes == 0) {
        r = e->pool_take ? e->pool_take(e, opts, ttl, cb, userdata, ret_err) : 0;
        if (r != 0)
            return r < 0 ? r : 0;
    }
    if (engine_running(e, NULL) >= cs->max_total)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT, "too many sandboxes (max_total)",
                             NULL);
    r = cluster_place(e, engine_template_find(e, opts->template), opts->node,
                      opts->memory_mb > 0 ? (unsigned)opts->memory_mb : cs->default_memory_mb,
                      &node, ret_err);
    if (r < 0)
        return r;
    op = create_op_new();
    if (!op)
        return engine_refuse_oom(ret_err);
    op->cb = cb;
    op->userdata = userdata;
    r = create_launch(e, opts, ttl, node, op, ret_err);
    if (r < 0)
        free(op);
    return r;
}

/* ---- placing a create again ----
 * A create whose node goes down before the sandbox is ready is placed again on another node
 * within its deadline: its Proxmox call is cancelled, and it starts over from the choice of
 * a container id on the new node. The half-made container stays on the old node: it carries
 * the sandbox's marker, and reconcile destroys it once that node answers (it is not the
 * sandbox's recorded container, so it is a leftover; the record stays with the live one). */

#define REPLACE_MAX 3u /* placements again per create */

static bool replaceable(struct sandbox *sb)
{
    struct engine *e = sb->engine;

    return !e->closing && !sb->destroy_requested && sb->create_op && !sb->create_op->failed &&
           sb->state < SANDBOX_READY && !sb->no_replace && !sb->node_asked &&
           sb->replacements < REPLACE_MAX && sb->node && cluster_node_down(e, sb->node) &&
           cluster_alternatives(e) && now_ms(e) < sb->run.deadline_ms;
}

/* Moves the create to another node now. Returns 0, or -EHOSTDOWN when no node is left. */
static int replace_now(struct sandbox *sb)
{
    struct engine *e = sb->engine;
    struct engine_error perr;
    const char *node;
    char *nn;
    struct audit_record rec = {.event = "sandbox.replaced",
                               .priority = LOG_NOTICE,
                               .sandbox = sb->id,
                               .vmid = sb->clone_issued ? sb->vmid : 0,
                               .node = sb->node,
                               .caller_uid = AUDIT_NO_UID,
                               .owner_uid = sb->owner_uid,
                               .reason = "node down"};

    if (cluster_place(e, sandbox_template(sb), NULL, sb->memory_mb, &node, &perr) < 0)
        return -EHOSTDOWN;
    nn = strdup(node);
    if (!nn)
        return -ENOMEM;
    if (sb->call)
        pve_call_cancel(TAKE_PTR(sb->call));
    uv_timer_stop(&sb->timer);
    sandbox_close_ssh(sb);
    if (sb->clone_issued)
        audit_emit(&rec,
                   "create of sandbox %s moves from node %s to %s: container %" PRIu32
                   " on %s is destroyed once %s answers",
                   sb->id, sb->node, nn, sb->vmid, sb->node, sb->node);
    else
        audit_emit(&rec, "create of sandbox %s moves from node %s to %s", sb->id, sb->node, nn);
    free(sb->node);
    sb->node = nn;
    sb->vmid = 0;
    sb->clone_issued = false;
    sb->resumed = false;
    free(sb->upid);
    sb->upid = NULL;
    if (!engine_static_addresses(e)) {
        free(sb->ip);
        sb->ip = NULL;
    }
    free(sb->net0);
    sb->net0 = NULL;
    sb->rootfs_gb = 0;
    sb->vmid_attempts = 0;
    sb->host_key[0] = '\0';
    sb->replacements++;
    create_restart(sb);
    return 0;
}

static void on_replace_timer(uv_timer_t *t)
{
    struct sandbox *sb = t->data;
    struct engine_error err = {.kind = ENGINE_E_PROXMOX,
                               .error = -EHOSTDOWN,
                               .message = "the sandbox's node went down and no other node could "
                                          "take the create"};

    if (!sb->create_op || sb->state >= SANDBOX_READY)
        return; /* a destroy or the engine's close took over meanwhile */
    sb->refs++;
    if (!replaceable(sb) || replace_now(sb) < 0) {
        sb->no_replace = true;
        create_fail_now(sb, &err);
    }
    sandbox_unref(sb);
}

bool create_replace(struct sandbox *sb)
{
    if (!replaceable(sb))
        return false;
    log_debug(COMP, "%s: node %s is down: placing the create again", sb->id, sb->node);
    uv_timer_start(&sb->timer, on_replace_timer, 0, 0);
    return true;
}

/* A create that asked for its node, which went down: it does not wait out its deadline. */
static bool stays_on_down_node(struct sandbox *sb)
{
    struct engine *e = sb->engine;

    return !e->closing && !sb->destroy_requested && sb->create_op && !sb->create_op->failed &&
           sb->state < SANDBOX_READY && sb->node_asked && sb->node &&
           cluster_node_down(e, sb->node);
}

static void fail_on_down_node(struct sandbox *sb)
{
    struct engine_error err = {.kind = ENGINE_E_BUSY,
                               .error = -EHOSTDOWN,
                               .message = "the node the create asked for went down"};

    if (sb->call)
        pve_call_cancel(TAKE_PTR(sb->call));
    uv_timer_stop(&sb->timer);
    sb->refs++;
    create_fail_now(sb, &err);
    sandbox_unref(sb);
}

void creates_replace(struct engine *e)
{
    struct sandbox *sb, *next;

    for (sb = e->sandboxes; sb; sb = next) {
        next = sb->next;
        /* only creates waiting on Proxmox (a call, a poll): the others fail on their own and
         * come back through create_replace() */
        if (!(sb->call || uv_is_active((uv_handle_t *)&sb->timer)))
            continue;
        if (stays_on_down_node(sb)) {
            fail_on_down_node(sb);
            continue;
        }
        if (!replaceable(sb))
            continue;
        sb->refs++;
        if (replace_now(sb) < 0)
            sb->no_replace = true;
        next = sb->next;
        sandbox_unref(sb);
    }
}
