/* The loop-free parts of the Proxmox client: response parsing and error classification
 * (lib/pve/pve-parse), the endpoint table, path templates and request parameters
 * (lib/pve/pve-endpoint). */
#include "macro.h"

#include <check.h>
#include <errno.h>
#include <string.h>

#include "pve-internal.h"
#include "pve-parse.h"
#include "tests/check-util.h"

static struct pve_error *err_http(long status, const char *reason, const char *body)
{
    struct pve_error *e = NULL;
    ck_assert_int_eq(pve_error_from_http(status, reason, body, body ? strlen(body) : 0, &e), 0);
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_nonnull(e->message);
    return e;
}

struct catalogue_entry {
    int status;
    const char *text;
    enum pve_err_kind kind;
    bool transient;
};

/* The error texts Proxmox VE sends (pve-container, pve-manager, pve-common, pve-firewall), with
 * their HTTP code (0 = task error). */
static const struct catalogue_entry catalogue[] = {
    {500, "Configuration file 'nodes/pve/lxc/999.conf' does not exist", PVE_ERR_NOT_FOUND, false},
    {0, "Configuration file 'nodes/pve/lxc/999.conf' does not exist", PVE_ERR_NOT_FOUND, false},
    {500, "CT is locked (disk)", PVE_ERR_LOCKED, true},
    {500, "CT is locked (backup)", PVE_ERR_LOCKED, true},
    {500, "CT is locked (create)", PVE_ERR_LOCKED, true},
    {500, "CT is locked (migrate)", PVE_ERR_LOCKED, true},
    {500, "CT is locked (snapshot)", PVE_ERR_LOCKED, true},
    {500, "CT is locked (destroyed)", PVE_ERR_LOCKED, true},
    {500, "CT is locked (mounted)", PVE_ERR_LOCKED, true},
    {500, "CT is locked (rollback)", PVE_ERR_LOCKED, true},
    {500, "CT is locked (fstrim)", PVE_ERR_LOCKED, true},
    {500, "CT is locked (snapshot-delete)", PVE_ERR_LOCKED, true},
    {0, "CT is locked (backup)", PVE_ERR_LOCKED, true},
    {500, "can't lock file '/run/lock/lxc/pve-config-100.lock' - got timeout", PVE_ERR_LOCK_TIMEOUT,
     true},
    {0, "can't lock file '/run/lock/lxc/pve-config-150.lock' - got timeout", PVE_ERR_LOCK_TIMEOUT,
     true},
    {500, "CT 101 already exists on node 'pve'", PVE_ERR_EXISTS, false},
    {500, "VM 101 already exists on node 'pve'", PVE_ERR_EXISTS, false},
    {500, "CT 100 already running", PVE_ERR_RUNNING, false},
    {500, "CT 100 not running", PVE_ERR_NOT_RUNNING, false},
    {500, "unable to destroy CT 100 - container is running", PVE_ERR_RUNNING, false},
    {500, "can't remove CT 100 - protection mode enabled", PVE_ERR_SERVER, false},
    {500, "parameter 'storage' not allowed for linked clones", PVE_ERR_SERVER, false},
    {500, "Linked clone feature for 'local:vm-9000-disk-0' is not available", PVE_ERR_SERVER,
     false},
    {0, "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout",
     PVE_ERR_LOCK_TIMEOUT, true},
    {0, "clone failed: cfs-lock 'storage-local' error: got lock request timeout",
     PVE_ERR_LOCK_TIMEOUT, true},
    {0, "clone failed: disk full", PVE_ERR_TASK, false},
    {0, "you can't start a CT if it's a template", PVE_ERR_TASK, false},
    {500, "cluster not ready - no quorum?", PVE_ERR_NO_QUORUM, true},
    {500, "detected modified configuration - file changed by other user? Try again.",
     PVE_ERR_SERVER, true},
    {403, "Permission check failed (pool 'x' does not exist)", PVE_ERR_PERMISSION, false},
    {403, "Permission check failed (/vms/100, VM.Audit)", PVE_ERR_PERMISSION, false},
    {500, "pool 'x' does not exist", PVE_ERR_NOT_FOUND, false},
    {595, "No route to host", PVE_ERR_CONNECTION, true},
    {595, "Connection refused", PVE_ERR_CONNECTION, true},
    {595, "Errors during connection establishment, proxy handshake: Connection refused - b''",
     PVE_ERR_CONNECTION, true},
    {596, "Connection timed out", PVE_ERR_CONNECTION, true},
    {596, "Broken pipe", PVE_ERR_CONNECTION, true},
    {501, "Method 'GET /nodes/pve/lxc/100/foo' not implemented", PVE_ERR_NOT_IMPLEMENTED, false},
    {401, "Authentication failed!", PVE_ERR_AUTH, false},
    {401, "No ticket", PVE_ERR_AUTH, false},
    {401, "invalid token value!", PVE_ERR_AUTH, false},
    {500, "unable to get any free VMID in range [100, 1000000]", PVE_ERR_SERVER, false},
    {502, "Bad Gateway", PVE_ERR_SERVER, true},
};

START_TEST(test_catalogue_reason_only)
{
    /* Older servers: the text only in the reason phrase, body {"data":null}. */
    for (size_t i = 0; i < ELEMENTSOF(catalogue); i++) {
        const struct catalogue_entry *c = &catalogue[i];
        struct pve_error *e;
        if (c->status == 0)
            ck_assert_int_eq(pve_error_from_task(c->text, "UPID:x", &e), 0);
        else
            e = err_http(c->status, c->text, c->status == 401 ? "" : "{\"data\":null}");
        ck_assert_msg(e->kind == c->kind, "%d '%s': kind %s, expected %s", c->status, c->text,
                      pve_err_kind_to_string(e->kind), pve_err_kind_to_string(c->kind));
        ck_assert_msg(pve_error_transient(e) == c->transient, "'%s': transient %d", c->text,
                      pve_error_transient(e));
        ck_assert_str_eq(e->message, c->text);
        ck_assert_int_eq(e->http_status, c->status);
        pve_error_free(e);
    }
}
END_TEST

START_TEST(test_catalogue_message_body)
{
    /* Newer servers: "message" in the body, with its trailing newline. */
    for (size_t i = 0; i < ELEMENTSOF(catalogue); i++) {
        const struct catalogue_entry *c = &catalogue[i];
        _cleanup_free_ char *body = NULL;
        if (c->status == 0 || c->status == 401)
            continue;
        ck_assert_int_ge(asprintf(&body, "{\"data\":null,\"message\":\"%s\\n\"}", c->text), 0);
        struct pve_error *e = err_http(c->status, "ignored reason", body);
        ck_assert_msg(e->kind == c->kind, "'%s': kind %s", c->text,
                      pve_err_kind_to_string(e->kind));
        ck_assert_str_eq(e->message, c->text);
        pve_error_free(e);
    }
}
END_TEST

START_TEST(test_lock_name)
{
    struct pve_error *e = err_http(500, "CT is locked (snapshot-delete)", "{\"data\":null}");
    ck_assert_str_eq(e->lock, "snapshot-delete");
    pve_error_free(e);
    e = err_http(500, "CT 100 not running", "{\"data\":null}");
    ck_assert_ptr_null(e->lock);
    pve_error_free(e);
}
END_TEST

START_TEST(test_param_errors_both_forms)
{
    struct pve_error *e;
    struct json_object *v;

    /* nextid with a taken id: 400 + errors map (older form: no message) */
    e = err_http(400, "Parameter verification failed.",
                 "{\"errors\":{\"vmid\":\"VM 101 already exists\"},\"data\":null}");
    ck_assert_int_eq(e->kind, PVE_ERR_EXISTS);
    ck_assert_ptr_nonnull(e->errors);
    ck_assert(json_object_object_get_ex(e->errors, "vmid", &v));
    ck_assert_str_eq(json_object_get_string(v), "VM 101 already exists");
    ck_assert_ptr_nonnull(strstr(e->message, "vmid: VM 101 already exists"));
    pve_error_free(e);

    /* real capture, older form */
    e = err_http(400, "Parameter verification failed.",
                 "{\"errors\":{\"name\":\"invalid format - value does not look like a valid DNS "
                 "name\\n\"},\"data\":null}");
    ck_assert_int_eq(e->kind, PVE_ERR_PARAM);
    ck_assert_str_eq(e->message, "Parameter verification failed. name: invalid format - value "
                                 "does not look like a valid DNS name");
    ck_assert(!pve_error_transient(e));
    pve_error_free(e);

    /* newer form: message + errors */
    e = err_http(400, "Parameter verification failed.",
                 "{\"data\":null,\"errors\":{\"memory\":\"value must have a minimum value of "
                 "16\"},\"message\":\"Parameter verification failed.\\n\"}");
    ck_assert_int_eq(e->kind, PVE_ERR_PARAM);
    ck_assert_ptr_nonnull(strstr(e->message, "memory: value must have a minimum value of 16"));
    pve_error_free(e);

    /* unknown task */
    e = err_http(400, "Parameter verification failed.",
                 "{\"errors\":{\"upid\":\"no such task\"},\"data\":null}");
    ck_assert_int_eq(e->kind, PVE_ERR_NOT_FOUND);
    pve_error_free(e);

    /* 401: empty body, text only in the reason phrase */
    e = err_http(401, "Authentication failed!", "");
    ck_assert_int_eq(e->kind, PVE_ERR_AUTH);
    ck_assert_str_eq(e->message, "Authentication failed!");
    pve_error_free(e);

    /* garbage body and empty reason */
    e = err_http(500, "", "<html>oops</html>");
    ck_assert_int_eq(e->kind, PVE_ERR_SERVER);
    ck_assert_str_eq(e->message, "HTTP 500");
    pve_error_free(e);
}
END_TEST

START_TEST(test_errno_transient)
{
    ck_assert(pve_errno_transient(-ETIMEDOUT));
    ck_assert(pve_errno_transient(-ECONNREFUSED));
    ck_assert(pve_errno_transient(-EHOSTUNREACH));
    ck_assert(pve_errno_transient(-ECONNRESET));
    ck_assert(!pve_errno_transient(-EBADE));
    ck_assert(!pve_errno_transient(-EFBIG));
    ck_assert(!pve_error_transient(NULL));
}
END_TEST

START_TEST(test_upid)
{
    struct pve_upid u;

    ck_assert_int_eq(
        pve_upid_parse("UPID:proxmox2:000D7AA2:08D5A17C:63DF62A5:vzclone:200:root@pam!api_token:",
                       &u),
        0);
    ck_assert_str_eq(u.node, "proxmox2");
    ck_assert_uint_eq(u.pid, 0xD7AA2);
    ck_assert_uint_eq(u.pstart, 0x08D5A17C);
    ck_assert_uint_eq(u.starttime, 0x63DF62A5);
    ck_assert_str_eq(u.type, "vzclone");
    ck_assert_str_eq(u.id, "200");
    ck_assert_str_eq(u.user, "root@pam!api_token");

    /* 9 hex digits of pstart after 497 days of uptime */
    ck_assert_int_eq(
        pve_upid_parse("UPID:pve-2:003E968C:1016E6414:63AD7D74:vzstart:999:root@pam:", &u), 0);
    ck_assert_uint_eq(u.pstart, 0x1016E6414ULL);
    ck_assert_str_eq(u.node, "pve-2");
    /* empty id, lower-case hex */
    ck_assert_int_eq(pve_upid_parse("UPID:pve:003e968c:016e6414:63ad7d74:aptupdate::root@pam:", &u),
                     0);
    ck_assert_str_eq(u.id, "");

    static const char *const bad[] = {
        "UPID:pve:003E968C:016E6414:63AD7D74:vzclone:999:root@pam", /* no trailing colon */
        "UPID:pve:003E968C:016E6414:63AD7D74:vzclone:999:root@pam::",
        "UPID:-pve:003E968C:016E6414:63AD7D74:vzclone:999:root@pam:", /* node */
        "UPID:pve-:003E968C:016E6414:63AD7D74:vzclone:999:root@pam:",
        "UPID:p_e:003E968C:016E6414:63AD7D74:vzclone:999:root@pam:",
        "UPID:pve:03E968C:016E6414:63AD7D74:vzclone:999:root@pam:",    /* 7-hex pid */
        "UPID:pve:003E968C:16E6414:63AD7D74:vzclone:999:root@pam:",    /* 7-hex pstart */
        "UPID:pve:003E968C:01016E6414:63AD7D74:vzclone:999:root@pam:", /* 10-hex pstart */
        "UPID:pve:003E968C:016E6414:63AD7D7:vzclone:999:root@pam:",    /* 7-hex starttime */
        "UPID:pve:003E968C:016E6414:63AD7D74::999:root@pam:",          /* empty type */
        "UPID:pve:003E968C:016E6414:63AD7D74:vzclone:9/9:root@pam:",   /* '/' in id */
        "UPID:pve:003E968C:016E6414:63AD7D74:vzclone:999::",           /* empty user */
        "UPID:pve:003E968C:016E6414:63AD7D74:vz clone:999:root@pam:",  /* space */
        "UPID:pve:0X3E968C:016E6414:63AD7D74:vzclone:999:root@pam:",   /* not hex */
        "upid:pve:003E968C:016E6414:63AD7D74:vzclone:999:root@pam:",
        "",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        ck_assert_msg(pve_upid_parse(bad[i], &u) == -EINVAL, "accepted %s", bad[i]);
    ck_assert_int_eq(pve_upid_parse(NULL, &u), -EINVAL);
}
END_TEST

START_TEST(test_vmid)
{
    uint32_t v = 0;
    struct json_object *o;

    o = json_object_new_string("100");
    ck_assert_int_eq(pve_parse_vmid(o, &v), 0);
    ck_assert_uint_eq(v, 100);
    json_object_put(o);
    o = json_object_new_int(101);
    ck_assert_int_eq(pve_parse_vmid(o, &v), 0);
    ck_assert_uint_eq(v, 101);
    json_object_put(o);
    o = json_object_new_int(99);
    ck_assert_int_eq(pve_parse_vmid(o, &v), -EINVAL);
    json_object_put(o);
    o = json_object_new_string("12a");
    ck_assert_int_eq(pve_parse_vmid(o, &v), -EINVAL);
    json_object_put(o);
    o = json_object_new_string("-100");
    ck_assert_int_eq(pve_parse_vmid(o, &v), -EINVAL);
    json_object_put(o);
    o = json_object_new_string("1000000000");
    ck_assert_int_eq(pve_parse_vmid(o, &v), -EINVAL);
    json_object_put(o);
    ck_assert_int_eq(pve_parse_vmid(NULL, &v), -EINVAL);

    /* nextid: {"data":"100"} and {"data":100} */
    struct json_object *d = NULL;
    ck_assert_int_eq(pve_parse_data("{\"data\":\"100\"}", 14, &d), 0);
    ck_assert_int_eq(pve_nextid_parse(d, &v), 0);
    ck_assert_uint_eq(v, 100);
    json_object_put(d);
    ck_assert_int_eq(pve_parse_data("{\"data\":123456}", 15, &d), 0);
    ck_assert_int_eq(pve_nextid_parse(d, &v), 0);
    ck_assert_uint_eq(v, 123456);
    json_object_put(d);
    ck_assert_int_eq(pve_parse_data("{\"data\":null}", 13, &d), 0);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(pve_nextid_parse(d, &v), -EBADMSG);
    ck_assert_int_eq(pve_parse_data("[1]", 3, &d), -EBADMSG);
    ck_assert_int_eq(pve_parse_data("{\"x\":1}", 7, &d), -EBADMSG);
    ck_assert_int_eq(pve_parse_data("{\"data\":", 8, &d), -EBADMSG);
}
END_TEST

static int task_of(const char *json, struct pve_task_status *st)
{
    struct json_object *o = json_tokener_parse(json);
    int r = pve_task_status_parse(o, st);
    json_object_put(o);
    return r;
}

START_TEST(test_task_status)
{
    struct pve_task_status st;
    unsigned w = 99;

    ck_assert_int_eq(task_of("{\"status\":\"running\",\"upid\":\"x\"}", &st), 0);
    ck_assert(st.running);
    ck_assert(!st.success);
    ck_assert_int_eq(
        task_of("{\"upid\":\"UPID:pve2:003E968C:016E6414:63AD7D74:vzclone:999:root@pam:\","
                "\"node\":\"pve2\",\"pid\":4101772,\"pstart\":24011796,\"starttime\":1672314228,"
                "\"type\":\"vzclone\",\"id\":\"999\",\"user\":\"root@pam\",\"status\":\"stopped\","
                "\"exitstatus\":\"OK\"}",
                &st),
        0);
    ck_assert(!st.running);
    ck_assert(st.success);
    ck_assert_uint_eq(st.warnings, 0);
    ck_assert_int_eq(task_of("{\"status\":\"stopped\",\"exitstatus\":\"WARNINGS: 1\"}", &st), 0);
    ck_assert(st.success);
    ck_assert_uint_eq(st.warnings, 1);
    ck_assert_int_eq(task_of("{\"status\":\"stopped\",\"exitstatus\":\"WARNINGS: 12\"}", &st), 0);
    ck_assert(st.success);
    ck_assert_uint_eq(st.warnings, 12);
    ck_assert_int_eq(task_of("{\"status\":\"stopped\",\"exitstatus\":\"WARNINGS: x\"}", &st), 0);
    ck_assert(!st.success);
    ck_assert_int_eq(
        task_of("{\"status\":\"stopped\",\"exitstatus\":\"clone failed: disk full\"}", &st), 0);
    ck_assert(!st.success);
    ck_assert_str_eq(st.exitstatus, "clone failed: disk full");
    ck_assert_int_eq(task_of("{\"status\":\"stopped\"}", &st), 0);
    ck_assert(!st.success);
    ck_assert_str_eq(st.exitstatus, "unexpected status");
    ck_assert_int_eq(task_of("{\"status\":\"weird\"}", &st), -EBADMSG);
    ck_assert_int_eq(task_of("[]", &st), -EBADMSG);

    ck_assert_int_eq(pve_task_exitstatus_ok("OK", &w), 1);
    ck_assert_uint_eq(w, 0);
    ck_assert_int_eq(pve_task_exitstatus_ok("WARNINGS: 3", &w), 1);
    ck_assert_uint_eq(w, 3);
    ck_assert_int_eq(pve_task_exitstatus_ok("WARNINGS: ", &w), 0);
    ck_assert_int_eq(pve_task_exitstatus_ok("unexpected status", &w), 0);
    ck_assert_int_eq(pve_task_exitstatus_ok("ok", &w), 0);

    struct pve_error *e = NULL;
    ck_assert_int_eq(pve_error_from_task("CT is locked (backup)", "UPID:u", &e), 0);
    ck_assert_int_eq(e->kind, PVE_ERR_LOCKED);
    ck_assert_int_eq(e->http_status, 0);
    ck_assert_str_eq(e->upid, "UPID:u");
    struct pve_error *d = pve_error_dup(e);
    ck_assert_str_eq(d->message, e->message);
    ck_assert_str_eq(d->lock, "backup");
    pve_error_free(d);
    pve_error_free(e);
}
END_TEST

static int ct_state_of(const char *json, enum pve_ct_state *st)
{
    struct json_object *o = json_tokener_parse(json);
    int r = pve_ct_status_parse(o, st);
    json_object_put(o);
    return r;
}

START_TEST(test_ct_status)
{
    enum pve_ct_state st = PVE_CT_UNKNOWN;

    ck_assert_int_eq(ct_state_of("{\"status\":\"running\",\"vmid\":150,\"uptime\":12}", &st), 0);
    ck_assert_int_eq(st, PVE_CT_RUNNING);
    ck_assert_int_eq(ct_state_of("{\"status\":\"stopped\",\"vmid\":150}", &st), 0);
    ck_assert_int_eq(st, PVE_CT_STOPPED);
    st = PVE_CT_RUNNING; /* not written on failure */
    ck_assert_int_eq(ct_state_of("{\"status\":\"unknown\"}", &st), -EBADMSG);
    ck_assert_int_eq(ct_state_of("{\"vmid\":150}", &st), -EBADMSG);
    ck_assert_int_eq(ct_state_of("{\"status\":1}", &st), -EBADMSG);
    ck_assert_int_eq(ct_state_of("null", &st), -EBADMSG);
    ck_assert_int_eq(st, PVE_CT_RUNNING);
    ck_assert_int_eq(pve_ct_state_from("running"), PVE_CT_RUNNING);
    ck_assert_int_eq(pve_ct_state_from("stopped"), PVE_CT_STOPPED);
    ck_assert_int_eq(pve_ct_state_from("unknown"), PVE_CT_UNKNOWN);
    ck_assert_int_eq(pve_ct_state_from(NULL), PVE_CT_UNKNOWN);
    ck_assert_int_eq(pve_endpoints[PVE_EP_STATUS_CURRENT].into, PVE_INTO_CT_STATE);
}
END_TEST

static int pick(const char *json, char **ip)
{
    struct json_object *o = json_tokener_parse(json);
    int r = pve_interfaces_pick_ipv4(o, ip);
    json_object_put(o);
    return r;
}

START_TEST(test_interfaces)
{
    char *ip = NULL;

    ck_assert_int_eq(pve_interfaces_pick_ipv4(NULL, &ip), 0); /* data null: no IP yet */
    ck_assert_int_eq(
        pick("[{\"name\":\"lo\",\"hwaddr\":\"00:00:00:00:00:00\",\"inet\":\"127.0.0.1/8\","
             "\"inet6\":\"::1/128\"},{\"name\":\"eth0\",\"hwaddr\":\"bc:24:11:89:67:07\","
             "\"inet\":\"192.168.3.95/22\",\"inet6\":\"fe80::be24:11ff:fe89:6707/64\"}]",
             &ip),
        1);
    ck_assert_str_eq(ip, "192.168.3.95");
    free(ip);
    ip = NULL;
    /* eth0 before DHCP: no inet at all */
    ck_assert_int_eq(pick("[{\"name\":\"lo\",\"inet\":\"127.0.0.1/8\"},{\"name\":\"eth0\","
                          "\"inet6\":\"fe80::1/64\"}]",
                          &ip),
                     0);
    ck_assert_ptr_null(ip);
    /* link-local only */
    ck_assert_int_eq(pick("[{\"name\":\"eth0\",\"inet\":\"169.254.3.4/16\"}]", &ip), 0);
    /* ip-addresses (PVE 8.4+): the first global one wins */
    ck_assert_int_eq(
        pick("[{\"name\":\"eth0\",\"inet\":\"10.0.0.9/24\",\"ip-addresses\":["
             "{\"ip-address-type\":\"inet6\",\"ip-address\":\"fe80::1\",\"prefix\":64},"
             "{\"ip-address-type\":\"inet\",\"ip-address\":\"169.254.1.1\",\"prefix\":16},"
             "{\"ip-address-type\":\"inet\",\"ip-address\":\"10.0.0.5\",\"prefix\":24}]}]",
             &ip),
        1);
    ck_assert_str_eq(ip, "10.0.0.5");
    free(ip);
    ck_assert_int_eq(pick("{\"x\":1}", &ip), -EBADMSG);
}
END_TEST

START_TEST(test_net)
{
    struct pve_net *net = NULL;
    _cleanup_free_ char *out = NULL;

    ck_assert_int_eq(pve_net_parse("name=eth0,bridge=vmbr10,firewall=1,hwaddr=00:11:50:EB:74:7D,"
                                   "ip=dhcp,type=veth",
                                   &net),
                     0);
    ck_assert_str_eq(pve_net_get(net, "hwaddr"), "00:11:50:EB:74:7D");
    ck_assert_str_eq(pve_net_get(net, "firewall"), "1");
    ck_assert_ptr_null(pve_net_get(net, "tag"));
    ck_assert_int_eq(pve_net_set(net, "firewall", "0"), 0);
    ck_assert_int_eq(pve_net_set(net, "tag", "5"), 0);
    ck_assert_int_eq(pve_net_set(net, "bad,key", "5"), -EINVAL);
    ck_assert_int_eq(pve_net_print(net, &out), 0);
    ck_assert_str_eq(out, "name=eth0,bridge=vmbr10,firewall=0,hwaddr=00:11:50:EB:74:7D,ip=dhcp,"
                          "type=veth,tag=5");
    pve_net_free(net);
    ck_assert_int_eq(pve_net_parse("", &net), -EINVAL);
    ck_assert_int_eq(pve_net_parse("name=eth0,,x=1", &net), -EINVAL);
    ck_assert_int_eq(pve_net_parse("name=eth0,", &net), -EINVAL);
    ck_assert_ptr_null(pve_net_free(NULL));

    _cleanup_free_ char *d = NULL, *d2 = NULL;
    ck_assert_int_eq(pve_description_normalize("sandboxd:v1 owner=1000\nline2\n", &d), 0);
    ck_assert_str_eq(d, "sandboxd:v1 owner=1000\nline2");
    ck_assert_int_eq(pve_description_normalize(NULL, &d2), 0);
    ck_assert_str_eq(d2, "");
}
END_TEST

START_TEST(test_fw_rules)
{
    struct json_object *o = json_tokener_parse(
        "[{\"pos\":0,\"type\":\"out\",\"action\":\"ACCEPT\",\"dest\":\"10.0.0.0/8\",\"enable\":1,"
        "\"digest\":\"abc\"},"
        "{\"pos\":1,\"type\":\"in\",\"action\":\"sandbox-internet\",\"enable\":1,\"digest\":"
        "\"abc\"},"
        "{\"pos\":2,\"type\":\"group\",\"action\":\"other\",\"enable\":1,\"digest\":\"abc\"},"
        "{\"pos\":3,\"type\":\"group\",\"action\":\"sandbox-internet\",\"enable\":0,"
        "\"digest\":\"abc\",\"comment\":\"sandboxd\"}]");
    struct pve_fw_rules *rules = NULL;

    ck_assert_int_eq(pve_fw_rules_parse(o, &rules), 0);
    ck_assert_uint_eq(rules->n, 4);
    ck_assert_str_eq(rules->digest, "abc");
    /* found by scanning (type group + action), not by position */
    ck_assert_int_eq(pve_fw_rules_find_group(rules, "sandbox-internet"), 3);
    ck_assert_int_eq(pve_fw_rules_find_group(rules, "other"), 2);
    ck_assert_int_eq(pve_fw_rules_find_group(rules, "missing"), -ENOENT);
    ck_assert(!rules->v[3].enable);
    ck_assert_str_eq(rules->v[3].comment, "sandboxd");
    pve_fw_rules_free(rules);
    json_object_put(o);

    o = json_tokener_parse("[]");
    ck_assert_int_eq(pve_fw_rules_parse(o, &rules), 0);
    ck_assert_int_eq(pve_fw_rules_find_group(rules, "x"), -ENOENT);
    pve_fw_rules_free(rules);
    json_object_put(o);
    ck_assert_int_eq(pve_fw_rules_parse(NULL, &rules), -EBADMSG);
}
END_TEST

START_TEST(test_vm_lists)
{
    struct pve_vm_list *l = NULL;
    const struct pve_vm *vm;
    struct json_object *o = json_tokener_parse(
        "[{\"id\":\"lxc/"
        "101\",\"type\":\"lxc\",\"vmid\":101,\"node\":\"pve\",\"status\":\"running\","
        "\"name\":\"ct01\",\"template\":0,\"tags\":\"a;b\",\"lock\":\"disk\",\"pool\":\"p1\"},"
        "{\"id\":\"lxc/9000\",\"type\":\"lxc\",\"vmid\":\"9000\",\"node\":\"pve\","
        "\"status\":\"stopped\",\"template\":1},"
        "{\"id\":\"storage/pve/local\",\"type\":\"storage\",\"storage\":\"local\"}]");

    ck_assert_int_eq(pve_vm_list_parse(o, &l), 0);
    ck_assert_uint_eq(l->n, 2);
    vm = pve_vm_list_find(l, 101);
    ck_assert_ptr_nonnull(vm);
    ck_assert_str_eq(vm->node, "pve");
    ck_assert_str_eq(vm->status, "running");
    ck_assert_str_eq(vm->name, "ct01");
    ck_assert_str_eq(vm->lock, "disk");
    ck_assert_str_eq(vm->pool, "p1");
    ck_assert_str_eq(vm->tags, "a;b");
    ck_assert(!vm->template);
    vm = pve_vm_list_find(l, 9000);
    ck_assert_ptr_nonnull(vm);
    ck_assert(vm->template);
    ck_assert_ptr_null(vm->lock);
    ck_assert_ptr_null(pve_vm_list_find(l, 102));
    pve_vm_list_free(l);
    json_object_put(o);

    /* GET /pools/{id}: members without "pool" key */
    o = json_tokener_parse("{\"members\":[{\"vmid\":\"150\",\"node\":\"pve\",\"type\":\"lxc\"}],"
                           "\"comment\":\"\",\"poolid\":\"sandboxes\"}");
    ck_assert_int_eq(pve_vm_list_parse(o, &l), 0);
    ck_assert_uint_eq(l->n, 1);
    ck_assert_uint_eq(l->v[0].vmid, 150);
    ck_assert_str_eq(l->v[0].pool, "sandboxes");
    pve_vm_list_free(l);
    json_object_put(o);

    /* GET /pools?poolid=X: an array of pools */
    o = json_tokener_parse("[{\"poolid\":\"p\",\"members\":[{\"vmid\":151},{\"vmid\":152}]}]");
    ck_assert_int_eq(pve_vm_list_parse(o, &l), 0);
    ck_assert_uint_eq(l->n, 2);
    ck_assert_str_eq(l->v[1].pool, "p");
    pve_vm_list_free(l);
    json_object_put(o);

    ck_assert_int_eq(pve_vm_list_parse(NULL, &l), -EBADMSG);
}
END_TEST

START_TEST(test_form_encode)
{
    struct json_object *p = json_object_new_object();
    _cleanup_free_ char *s = NULL, *e = NULL;

    json_object_object_add(p, "onboot", json_object_new_boolean(1));
    json_object_object_add(p, "force", json_object_new_boolean(0));
    json_object_object_add(p, "newid", json_object_new_int(100123));
    json_object_object_add(p, "description", json_object_new_string("sandboxd:v1 a=b&c\n"));
    json_object_object_add(p, "skip", NULL);
    ck_assert_int_eq(pve_form_encode(p, &s), 0);
    ck_assert_str_eq(s, "description=sandboxd%3Av1%20a%3Db%26c%0A&force=0&newid=100123&onboot=1");
    json_object_object_add(p, "nested", json_object_new_array());
    ck_assert_int_eq(pve_form_encode(p, &e), -EINVAL);
    json_object_put(p);
    _cleanup_free_ char *empty = NULL;
    ck_assert_int_eq(pve_form_encode(NULL, &empty), 0);
    ck_assert_str_eq(empty, "");
}
END_TEST

START_TEST(test_version)
{
    static const struct {
        const char *s;
        int r;
        unsigned major, minor, patch;
    } cases[] = {
        {"8.1.4", 0, 8, 1, 4},       {"8.4.1", 0, 8, 4, 1},         {"9.0", 0, 9, 0, 0},
        {"8.2.0~beta1", 0, 8, 2, 0}, {"10.12.345", 0, 10, 12, 345}, {"", -EINVAL, 0, 0, 0},
        {"8", -EINVAL, 0, 0, 0},     {"8.", -EINVAL, 0, 0, 0},      {"v8.1", -EINVAL, 0, 0, 0},
        {"8.1.", -EINVAL, 0, 0, 0},  {"8.x", -EINVAL, 0, 0, 0},
    };
    struct pve_version v, x = {8, 1, 4};

    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        v = (struct pve_version){77, 77, 77};
        ck_assert_msg(pve_version_parse(cases[i].s, &v) == cases[i].r, "%s", cases[i].s);
        if (cases[i].r == 0)
            ck_assert_msg(v.major == cases[i].major && v.minor == cases[i].minor &&
                              v.patch == cases[i].patch,
                          "%s", cases[i].s);
        else
            ck_assert_uint_eq(v.major, 77);
    }
    ck_assert_int_eq(pve_version_parse(NULL, &v), -EINVAL);
    ck_assert(pve_version_at_least(&x, 8, 1, 0));
    ck_assert(pve_version_at_least(&x, 8, 1, 4));
    ck_assert(!pve_version_at_least(&x, 8, 1, 5));
    ck_assert(!pve_version_at_least(&x, 8, 3, 0));
    ck_assert(pve_version_at_least(&x, 7, 4, 99));
    ck_assert(!pve_version_at_least(&x, 9, 0, 0));
}
END_TEST

START_TEST(test_rootfs_size)
{
    static const struct {
        const char *s;
        int r;
        uint64_t bytes;
        uint64_t gb; /* pve_rootfs_size_gb(s, 7) */
    } cases[] = {
        {"local-lvm:vm-100-disk-0,size=8G", 0, UINT64_C(8) << 30, 8},
        {"local-lvm:vm-100-disk-0,size=512M", 0, UINT64_C(512) << 20, 1},
        {"local-lvm:vm-100-disk-0,size=10752M", 0, UINT64_C(10752) << 20, 11},
        {"local-zfs:subvol-101-disk-0,mountoptions=noatime,size=2T", 0, UINT64_C(2) << 40, 2048},
        {"local:101/vm-101-disk-0.raw,size=1048576K,acl=1", 0, UINT64_C(1) << 30, 1},
        {"local-lvm:vm-100-disk-0,size=1.5G", 0, UINT64_C(3) << 29, 2},
        {"local-lvm:vm-100-disk-0,size=0.25K", 0, 256, 1},
        {"size=4G", 0, UINT64_C(4) << 30, 4},
        {"local:vm-100-disk-0,size=1073741825", 0, (UINT64_C(1) << 30) + 1, 2}, /* bytes */
        {"local:vm-100-disk-0,size=16384", 0, 16384, 1},
        {"local-lvm:vm-100-disk-0", -ENOENT, 0, 7},
        {"local-lvm:vm-100-disk-0,backup=1", -ENOENT, 0, 7},
        {"local-lvm:vm-100-disk-0,mysize=8G", -ENOENT, 0, 7},
        {"local-lvm:vm-100-disk-0,size=", -EINVAL, 0, 7},
        {"local-lvm:vm-100-disk-0,size=G", -EINVAL, 0, 7},
        {"local-lvm:vm-100-disk-0,size=8GiB", 0, UINT64_C(8) << 30, 8},
        {"local-lvm:vm-100-disk-0,size=512MiB,backup=1", 0, UINT64_C(512) << 20, 1},
        {"local:101/vm-101-disk-0.raw,size=1048576KiB", 0, UINT64_C(1) << 30, 1},
        {"local-zfs:subvol-101-disk-0,size=1.5TiB", 0, UINT64_C(3) << 39, 1536},
        {"local-lvm:vm-100-disk-0,size=8Gi", -EINVAL, 0, 7},
        {"local-lvm:vm-100-disk-0,size=8GB", -EINVAL, 0, 7},
        {"local-lvm:vm-100-disk-0,size=8Gib", -EINVAL, 0, 7},
        {"local-lvm:vm-100-disk-0,size=8iB", -EINVAL, 0, 7},
        {"local-lvm:vm-100-disk-0,size=8g", -EINVAL, 0, 7},
        {"local-lvm:vm-100-disk-0,size=8.G", -EINVAL, 0, 7},
        {"local-lvm:vm-100-disk-0,size=-8G", -EINVAL, 0, 7},
        {"local-lvm:vm-100-disk-0,size=99999999999999999999", -ERANGE, 0, 7},
        {"local-lvm:vm-100-disk-0,size=17179869184G", -ERANGE, 0, 7},
    };
    uint64_t b;

    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        b = 12345;
        ck_assert_msg(pve_parse_rootfs_size(cases[i].s, &b) == cases[i].r, "%s", cases[i].s);
        if (cases[i].r == 0)
            ck_assert_msg(b == cases[i].bytes, "%s: %llu", cases[i].s, (unsigned long long)b);
        else
            ck_assert_uint_eq(b, 12345); /* untouched on failure */
        ck_assert_msg(pve_rootfs_size_gb(cases[i].s, 7) == cases[i].gb, "%s", cases[i].s);
    }
    ck_assert_int_eq(pve_parse_rootfs_size(NULL, &b), -EINVAL);
    ck_assert_uint_eq(pve_rootfs_size_gb(NULL, 3), 3);
}
END_TEST

START_TEST(test_endpoint_table)
{
    const char *upid = "UPID:node-2:00001234:01016E64:63AD7D74:vzstart:150:root@pam!test:";
    const struct pve_path all = {
        .node = "pve", .vmid = 150, .upid = upid, .name = "set a", .pos = 2, .path = "/x/y"};
    char *path = NULL;

    for (size_t i = 0; i < _PVE_EP_MAX; i++) {
        const struct pve_endpoint *ep = &pve_endpoints[i];
        bool get = strcmp(ep->method, "GET") == 0;
        ck_assert_ptr_nonnull(ep->name);
        ck_assert_ptr_nonnull(ep->path);
        /* reads are idempotent; tasks start with a write */
        ck_assert_msg(!get || ep->retry == PVE_RETRY_ALWAYS, "%s", ep->name);
        ck_assert_msg(ep->into != PVE_INTO_TASK || !get, "%s", ep->name);
        ck_assert_msg(ep->into != PVE_INTO_TASK || ep->retry == PVE_RETRY_SAFE ||
                          ep->retry == PVE_RETRY_NOTHING_DONE,
                      "%s", ep->name);
        ck_assert_int_eq(pve_endpoint_path(ep, &all, &path), 0);
        ck_assert_msg(path[0] == '/' && !strchr(path, '{'), "%s: %s", ep->name, path);
        free(path);
    }
    ck_assert_int_eq(pve_endpoint_path(&pve_endpoints[PVE_EP_FW_RULE_DELETE], &all, &path), 0);
    ck_assert_str_eq(path, "/nodes/pve/lxc/150/firewall/rules/2");
    free(path);
    ck_assert_int_eq(pve_endpoint_path(&pve_endpoints[PVE_EP_FW_IPSET_ADD], &all, &path), 0);
    ck_assert_str_eq(path, "/nodes/pve/lxc/150/firewall/ipset/set%20a");
    free(path);
    /* no node: the UPID's; the UPID itself is not escaped */
    const struct pve_path task = {.upid = upid};
    ck_assert_int_eq(pve_endpoint_path(&pve_endpoints[PVE_EP_TASK_STATUS], &task, &path), 0);
    ck_assert_str_eq(path, "/nodes/node-2/tasks/"
                           "UPID:node-2:00001234:01016E64:63AD7D74:vzstart:150:root@pam!test:"
                           "/status");
    free(path);

    /* a missing or invalid value */
    static const struct {
        enum pve_ep ep;
        struct pve_path a;
    } bad[] = {
        {PVE_EP_START, {.node = "pve", .vmid = 99}},
        {PVE_EP_START, {.node = "pve", .vmid = 1000000000}},
        {PVE_EP_START, {.node = "", .vmid = 150}},
        {PVE_EP_LXC_LIST, {.node = NULL}},
        {PVE_EP_TASK_LOG, {.node = "pve", .upid = "UPID:bad"}},
        {PVE_EP_TASK_STATUS, {.node = NULL, .upid = NULL}},
        {PVE_EP_POOL, {.name = ""}},
        {PVE_EP_FW_RULE_DELETE, {.node = "pve", .vmid = 150, .pos = -1}},
        {PVE_EP_RAW_GET, {.path = "no-slash"}},
        {PVE_EP_RAW_GET, {.path = NULL}},
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        path = NULL;
        ck_assert_int_eq(pve_endpoint_path(&pve_endpoints[bad[i].ep], &bad[i].a, &path), -EINVAL);
        ck_assert_ptr_null(path);
    }
    const struct pve_endpoint odd = {"odd", "GET", "/a/{bogus}", PVE_INTO_DATA, PVE_RETRY_NONE};
    const struct pve_endpoint open = {"open", "GET", "/a/{node", PVE_INTO_DATA, PVE_RETRY_NONE};
    ck_assert_int_eq(pve_endpoint_path(&odd, &all, &path), -EINVAL);
    ck_assert_int_eq(pve_endpoint_path(&open, &all, &path), -EINVAL);
}
END_TEST

START_TEST(test_params)
{
    const struct pve_param pv[] = {
        PVE_STR("s", "a b"), PVE_STR("absent", NULL), PVE_INT("n", -3),
        PVE_BOOL("yes", 7),  PVE_BOOL("no", 0),       PVE_FLAG("flag", 1),
        PVE_FLAG("off", 0),  PVE_OPT_BOOL("tri", -1), PVE_OPT_BOOL("tri1", 1),
    };
    struct json_object *o = NULL;
    char *enc = NULL;

    ck_assert_int_eq(pve_params_new(pv, ELEMENTSOF(pv), &o), 0);
    ck_assert_int_eq(pve_form_encode(o, &enc), 0);
    ck_assert_str_eq(enc, "flag=1&n=-3&no=0&s=a%20b&tri1=1&yes=1");
    free(enc);
    json_object_put(o);
    ck_assert_int_eq(pve_params_new(NULL, 0, &o), 0);
    ck_assert_int_eq(json_object_object_length(o), 0);
    json_object_put(o);
}
END_TEST
/* Mount point property strings: what GET .../config gives back, and what allocates one. */
START_TEST(test_mp)
{
    struct pve_mp mp = {0};
    char *s = NULL;

    ck_assert_int_eq(pve_mp_parse("local-lvm:vm-205-disk-1,mp=/data,size=1G", &mp), 0);
    ck_assert_str_eq(mp.volume, "local-lvm:vm-205-disk-1");
    ck_assert_str_eq(mp.path, "/data");
    ck_assert(!mp.read_only);
    ck_assert_uint_eq(mp.size_gb, 1);
    pve_mp_done(&mp);
    ck_assert_int_eq(pve_mp_parse("local:205/vm-205-disk-2.raw,ro=1,mp=/srv/x,size=1536M", &mp), 0);
    ck_assert_str_eq(mp.volume, "local:205/vm-205-disk-2.raw");
    ck_assert_str_eq(mp.path, "/srv/x");
    ck_assert(mp.read_only);
    ck_assert_uint_eq(mp.size_gb, 2);
    pve_mp_done(&mp);
    ck_assert_int_eq(pve_mp_parse("local-lvm:vm-1-disk-1,mp=/a", &mp), 0);
    ck_assert_uint_eq(mp.size_gb, 0);
    pve_mp_done(&mp);
    static const char *const bad[] = {"",       ",mp=/a",       "local-lvm:vm-1-disk-1", "mp=/a",
                                      "v,mp=a", "v,mp=/a,ro=2", "v,mp=/a,size=x",        NULL};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        ck_assert_int_eq(pve_mp_parse(bad[i], &mp), -EINVAL);
        ck_assert_ptr_null(mp.volume);
    }
    ck_assert_int_eq(pve_mp_format("local-lvm", 4, "/data", false, &s), 0);
    ck_assert_str_eq(s, "local-lvm:4,mp=/data");
    free(s);
    ck_assert_int_eq(pve_mp_format("local-lvm:vm-1-disk-1", 0, "/d", true, &s), 0);
    ck_assert_str_eq(s, "local-lvm:vm-1-disk-1,mp=/d,ro=1");
    ck_assert_int_eq(pve_mp_parse(s, &mp), 0);
    ck_assert(mp.read_only);
    pve_mp_done(&mp);
    free(s);
    s = NULL;
    ck_assert_int_eq(pve_mp_format("local-lvm", 4, "/a,b", false, &s), -EINVAL);
    ck_assert_int_eq(pve_mp_format("local-lvm", 4, "rel", false, &s), -EINVAL);
    ck_assert_int_eq(pve_mp_format("lo=cal", 4, "/a", false, &s), -EINVAL);
    ck_assert_ptr_null(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pve-parse");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_catalogue_reason_only);
    tcase_add_test(tc, test_catalogue_message_body);
    tcase_add_test(tc, test_lock_name);
    tcase_add_test(tc, test_param_errors_both_forms);
    tcase_add_test(tc, test_errno_transient);
    tcase_add_test(tc, test_upid);
    tcase_add_test(tc, test_vmid);
    tcase_add_test(tc, test_task_status);
    tcase_add_test(tc, test_ct_status);
    tcase_add_test(tc, test_interfaces);
    tcase_add_test(tc, test_net);
    tcase_add_test(tc, test_fw_rules);
    tcase_add_test(tc, test_vm_lists);
    tcase_add_test(tc, test_form_encode);
    tcase_add_test(tc, test_rootfs_size);
    tcase_add_test(tc, test_version);
    tcase_add_test(tc, test_endpoint_table);
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_mp);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(suite());
}
