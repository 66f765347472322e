/* lib/config: every key parses, defaults, and every bad input is an error that
 * names the file, the line and the key. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "tests/check-util.h"

static char dir[] = "/tmp/sandboxd-test-config-XXXXXX";

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    unsetenv("CREDENTIALS_DIRECTORY");
}

static void teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    strcpy(dir, "/tmp/sandboxd-test-config-XXXXXX");
}

static char *write_file(const char *name, const char *text)
{
    char *path;
    FILE *f;

    ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static const char full_config[] = "[server]\n"
                                  "socket = /run/x.sock\n"
                                  "socket_mode = 0600\n"
                                  "socket_group = wheel\n"
                                  "admin_group = admins\n"
                                  "state_dir = /var/lib/x\n"
                                  "max_connections = 100\n"
                                  "max_connections_per_uid = 10\n"
                                  "max_request_bytes = 65536\n"
                                  "max_inflight_per_connection = 8\n"
                                  "log_level = debug\n"
                                  "\n"
                                  "[proxmox]\n"
                                  "url = https://127.0.0.1:8006 ; inline comment\n"
                                  "token_id = sandboxd@pve!sb\n"
                                  "token_secret_file = %s/token\n"
                                  "nodes = pve1, pve2,pve3\n"
                                  "template = 9000\n"
                                  "pool = sbpool\n"
                                  "storage = local-lvm\n"
                                  "full_clone = true\n"
                                  "vmid_range = 200000-200099\n"
                                  "ca_file = /etc/ssl/pve.pem\n"
                                  "fingerprint = AA:BB\n"
                                  "tls_verify = false\n"
                                  "internet_group = inet\n"
                                  "\n"
                                  "[ssh]\n"
                                  "user = admin\n"
                                  "key_file = %s/key\n"
                                  "template_host_key = SHA256:abc, SHA256:def\n"
                                  "rekey = yes\n"
                                  "connect_timeout_ms = 2500\n"
                                  "sessions_per_sandbox = 3\n"
                                  "\n"
                                  "[sandbox]\n"
                                  "default_ttl_s = 600\n"
                                  "max_ttl_s = 7200\n"
                                  "max_per_uid = 4\n"
                                  "max_total = 40\n"
                                  "default_cores = 2\n"
                                  "default_memory_mb = 1024\n"
                                  "default_disk_gb = 16\n"
                                  "create_timeout_s = 120\n";

START_TEST(test_defaults)
{
    struct config c;
    uv_loop_t loop;

    /* The parser uses no loop; a private one proves it leaves nothing on it. */
    ck_assert_int_eq(uv_loop_init(&loop), 0);

    ck_assert_int_eq(config_init(&c), 0);
    ck_assert_str_eq(c.server.socket, "/run/sandboxd.sock");
    ck_assert_int_eq(c.server.socket_mode, 0660);
    ck_assert_str_eq(c.server.socket_group, "sandboxd");
    ck_assert_int_eq(c.server.max_connections, 256);
    ck_assert_int_eq(c.server.max_connections_per_uid, 64);
    ck_assert_uint_eq(c.server.max_request_bytes, 16777216);
    ck_assert_int_eq(c.server.max_inflight_per_connection, 32);
    ck_assert(!c.proxmox.present);
    ck_assert_uint_eq(c.proxmox.n_nodes, 1);
    ck_assert_str_eq(c.proxmox.nodes[0], "pve");
    ck_assert_uint_eq(c.proxmox.vmid_min, 100000);
    ck_assert_uint_eq(c.proxmox.vmid_max, 199999);
    ck_assert(c.proxmox.tls_verify);
    ck_assert_str_eq(c.proxmox.internet_group, "sandbox-internet");
    ck_assert_str_eq(c.ssh.user, "root");
    ck_assert_int_eq(c.ssh.connect_timeout_ms, 10000);
    ck_assert_int_eq(c.sandbox.default_ttl_s, 3600);
    ck_assert_int_eq(c.sandbox.max_ttl_s, 86400);
    ck_assert_int_eq(c.sandbox.create_timeout_s, 300);
    ck_assert_int_eq(config_validate(&c, NULL), 0);
    config_done(&c);
    config_done(&c); /* idempotent */
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_full)
{
    _cleanup_free_ char *text = NULL, *path = NULL, *tok = NULL, *key = NULL, *err = NULL;
    struct config c;

    tok = write_file("token", "s3cret-uuid\n");
    key = write_file("key", "-----BEGIN OPENSSH PRIVATE KEY-----\nxx\n");
    ck_assert_int_ge(asprintf(&text, full_config, dir, dir), 0);
    path = write_file("full.conf", text);
    ck_assert_int_eq(config_load(path, &c, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_str_eq(c.server.socket, "/run/x.sock");
    ck_assert_int_eq(c.server.socket_mode, 0600);
    ck_assert_str_eq(c.server.socket_group, "wheel");
    ck_assert_str_eq(c.server.admin_group, "admins");
    ck_assert_str_eq(c.server.state_dir, "/var/lib/x");
    ck_assert_int_eq(c.server.max_connections, 100);
    ck_assert_int_eq(c.server.max_connections_per_uid, 10);
    ck_assert_uint_eq(c.server.max_request_bytes, 65536);
    ck_assert_int_eq(c.server.max_inflight_per_connection, 8);
    ck_assert_int_eq(c.server.log_level, 7);
    ck_assert(c.proxmox.present);
    ck_assert_str_eq(c.proxmox.url, "https://127.0.0.1:8006");
    ck_assert_str_eq(c.proxmox.token_id, "sandboxd@pve!sb");
    ck_assert_uint_eq(c.proxmox.n_nodes, 3);
    ck_assert_str_eq(c.proxmox.nodes[0], "pve1");
    ck_assert_str_eq(c.proxmox.nodes[2], "pve3");
    ck_assert_uint_eq(c.proxmox.template_vmid, 9000);
    ck_assert_str_eq(c.proxmox.pool, "sbpool");
    ck_assert_str_eq(c.proxmox.storage, "local-lvm");
    ck_assert(c.proxmox.full_clone);
    ck_assert_uint_eq(c.proxmox.vmid_min, 200000);
    ck_assert_uint_eq(c.proxmox.vmid_max, 200099);
    ck_assert_str_eq(c.proxmox.ca_file, "/etc/ssl/pve.pem");
    ck_assert_str_eq(c.proxmox.fingerprint, "AA:BB");
    ck_assert(!c.proxmox.tls_verify);
    ck_assert_str_eq(c.proxmox.internet_group, "inet");
    ck_assert_str_eq(c.ssh.user, "admin");
    ck_assert_uint_eq(c.ssh.n_template_host_keys, 2);
    ck_assert_str_eq(c.ssh.template_host_keys[1], "SHA256:def");
    ck_assert(c.ssh.rekey);
    ck_assert_int_eq(c.ssh.connect_timeout_ms, 2500);
    ck_assert_int_eq(c.ssh.sessions_per_sandbox, 3);
    ck_assert_int_eq(c.sandbox.default_ttl_s, 600);
    ck_assert_int_eq(c.sandbox.max_ttl_s, 7200);
    ck_assert_int_eq(c.sandbox.max_per_uid, 4);
    ck_assert_int_eq(c.sandbox.max_total, 40);
    ck_assert_int_eq(c.sandbox.default_cores, 2);
    ck_assert_int_eq(c.sandbox.default_memory_mb, 1024);
    ck_assert_int_eq(c.sandbox.default_disk_gb, 16);
    ck_assert_int_eq(c.sandbox.create_timeout_s, 120);
    ck_assert_int_eq(config_validate(&c, &err), 0);
    ck_assert_int_eq(config_load_secrets(&c, &err), 0);
    ck_assert_str_eq(c.proxmox.token_secret, "s3cret-uuid"); /* newline stripped */
    ck_assert_str_eq(c.ssh.key, "-----BEGIN OPENSSH PRIVATE KEY-----\nxx\n");
    config_done(&c);
}
END_TEST

/* Each bad file: the error must carry "file:line" and the key. */
static const struct {
    const char *text;
    int line;
    const char *needle;
} bad[] = {
    {"[server]\nmax_connections = 0\n", 2, "max_connections"},
    {"[server]\nmax_connections = 70000\n", 2, "max_connections"},
    {"[server]\nmax_connections = 12abc\n", 2, "max_connections"},
    {"[server]\nmax_connections = -1\n", 2, "max_connections"},
    {"[server]\n\nsocket_mode = 0999\n", 3, "socket_mode"},
    {"[server]\nsocket = relative/path\n", 2, "socket"},
    {"[server]\nbogus = 1\n", 2, "bogus"},
    {"[server]\nlog_level = loud\n", 2, "log_level"},
    {"[server]\nmax_request_bytes = 10\n", 2, "max_request_bytes"},
    {"[serverx]\nsocket = /x\n", 2, "serverx"},
    {"socket = /x\n", 1, "socket"},
    {"[server]\nsocket = /a\nsocket = /b\n", 3, "socket"},
    {"[proxmox]\nurl = https://x\nfull_clone = maybe\n", 3, "full_clone"},
    {"[proxmox]\nvmid_range = 5-3\n", 2, "vmid_range"},
    {"[proxmox]\nvmid_range = 100000\n", 2, "vmid_range"},
    {"[proxmox]\nvmid_range = 1-99999\n", 2, "vmid_range"},
    {"[proxmox]\ntemplate = abc\n", 2, "template"},
    {"[proxmox]\nnodes = ,\n", 2, "nodes"},
    {"[ssh]\nsessions_per_sandbox = 17\n", 2, "sessions_per_sandbox"},
    {"[ssh]\nrekey = 2\n", 2, "rekey"},
    {"[sandbox]\n; comment\n# comment\ndefault_ttl_s = 1\n", 4, "default_ttl_s"},
    {"[sandbox]\nmax_total = 1e3\n", 2, "max_total"},
    {"[server]\nthis line has no equals sign\n", 2, ""},
    {"[network]\nmode = manual\n", 2, "mode"},
    {"[network]\ngateway = 10.0.0.256\n", 2, "gateway"},
    {"[network]\ngateway = 10.0.0\n", 2, "gateway"},
    {"[network]\ngateway = 10.0.0.01\n", 2, "gateway"},
    {"[network]\naddresses = 10.0.0.9-10.0.0.5\n", 2, "addresses"},
    {"[network]\naddresses = 10.0.0.5\n", 2, "addresses"},
    {"[network]\naddresses = 10.0.0.0-10.1.0.0\n", 2, "addresses"}, /* 65537 */
    {"[network]\nprefix = 33\n", 2, "prefix"},
    {"[network]\ndns = 1.1.1.1,2.2.2.2,3.3.3.3,4.4.4.4\n", 2, "dns"},
    {"[network]\ndns = ,\n", 2, "dns"},
    {"[network]\nprobe_address = 1.2.3.4\n", 2, "probe_address"},
    {"[network]\nprobe_address = 1.2.3.4:0\n", 2, "probe_address"},
    {"[network]\nprobe_address = 1.2.3.4:65536\n", 2, "probe_address"},
    {"[proxmox]\nfirewall_period_s = 0\n", 2, "firewall_period_s"},
    {"[sandbox]\nmax_cores = 0\n", 2, "max_cores"},
    {"[sandbox]\nmax_memory_mb = 15\n", 2, "max_memory_mb"},
    {"[sandbox]\nmax_disk_gb = 65537\n", 2, "max_disk_gb"},
    {"[templates]\nPy = 9001\n", 2, "Py"},
    {"[templates]\npy = abc\n", 2, "py"},
    {"[templates]\npy = 99\n", 2, "py"},
    {"[templates]\npy = 9001\npy = 9002\n", 3, "given twice"},
    {"[templates]\ndefault = Go\n", 2, "default"},
    {"[templates]\npy.hostkey = SHA256:x\n", 2, "py.hostkey"},
    {"[templates]\npy.host_key = ,\n", 2, "py.host_key"},
    {"[templates]\npy.replicas = 17\n", 2, "0..16"},
    {"[templates]\npy.replicas = 2\npy.replicas = 3\n", 3, "given twice"},
    {"[templates]\n-py = 9001\n", 2, "-py"},
    {"[templates]\nabcdefghijabcdefghijabcdefghijabc = 9001\n", 2, "template name"},
    {"[pool]\nwarm = 257\n", 2, "warm"},
    {"[proxmox]\ntemplate = 9000@\n", 2, "node name"},
    {"[proxmox]\ntemplate = 9000@pve1,9001\n", 2, "VMID@node"},
    {"[proxmox]\ntemplate = 9000@pve1,9000@pve1\n", 2, "given twice"},
    {"[proxmox]\ntemplate = 9000@pve1,9000@pve2\n", 2, "given twice"},
    {"[proxmox]\ntemplate = 99@pve1\n", 2, "vmid"},
    {"[templates]\npy = 9001@pve1,x@pve2\n", 2, "vmid"},
    {"[proxmox]\nmax_per_node = -1\n", 2, "max_per_node"},
    {"[proxmox]\nnode_param = everyone\n", 2, "admin, any or off"},
    {"[pool]\nwarm = -1\n", 2, "warm"},
    {"[pool]\nwarm = 1\nwarm = 2\n", 3, "given twice"},
    {"[pool]\nwarm.Py = 1\n", 2, "warm.Py"},
    {"[pool]\ncold = 1\n", 2, "cold"},
    {"[pool]\nmax_filling = 0\n", 2, "max_filling"},
};

START_TEST(test_bad)
{
    _cleanup_free_ char *path = NULL, *err = NULL, *want = NULL;
    struct config c = {};

    path = write_file("bad.conf", bad[_i].text);
    ck_assert_int_eq(config_load(path, &c, &err), -EINVAL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_ge(asprintf(&want, "%s:%d: ", path, bad[_i].line), 0);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "case %d: '%s' does not start with '%s'",
                  _i, err, want);
    ck_assert_msg(strstr(err, bad[_i].needle), "case %d: '%s' does not name '%s'", _i, err,
                  bad[_i].needle);
    /* Nothing was handed out. */
    ck_assert_ptr_null(c.server.socket);
}
END_TEST

START_TEST(test_missing_file)
{
    _cleanup_free_ char *err = NULL;
    struct config c;

    ck_assert_int_eq(config_load("/nonexistent/sandboxd.conf", &c, &err), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/sandboxd.conf"));
}
END_TEST

START_TEST(test_validate)
{
    static const struct {
        const char *text;
        const char *needle;
    } cases[] = {
        {"[proxmox]\ntoken_id = a@pve!b\ntemplate = 9000\npool = p\n", "url"},
        {"[proxmox]\nurl = https://h\ntemplate = 9000\npool = p\n", "token_id"},
        {"[proxmox]\nurl = https://h\ntoken_id = a@pve!b\npool = p\n", "template"},
        {"[proxmox]\nurl = https://h\ntoken_id = a@pve!b\ntemplate = 9000\n", "pool"},
        {"[proxmox]\nurl = ftp://h\ntoken_id = a@pve!b\ntemplate = 9000\npool = p\n", "url"},
        {"[proxmox]\nurl = https://h\ntoken_id = nobang\ntemplate = 9000\npool = p\n", "token_id"},
        {"[proxmox]\nurl = https://h\ntoken_id = a@pve!b\ntemplate = 150000\npool = p\n",
         "template"},
        {"[proxmox]\nurl = https://h\ntoken_id = a@pve!b\ntemplate = 9000\npool = p\n"
         "internet_group = sandbox-internet-access\n",
         "internet_group"},
        {"[proxmox]\nurl = https://h\ntoken_id = a@pve!b\ntemplate = 9000\npool = p\n"
         "internet_group = 1net\n",
         "internet_group"},
        {"[sandbox]\ndefault_ttl_s = 7200\nmax_ttl_s = 3600\n", "default_ttl_s"},
        {"[server]\nmax_connections = 10\nmax_connections_per_uid = 20\n",
         "max_connections_per_uid"},
        {"[network]\nmode = static\naddresses = 10.0.0.10-10.0.0.20\nprefix = 24\n",
         "needs addresses, prefix and gateway"},
        {"[network]\nmode = static\naddresses = 10.0.0.10-10.0.1.20\nprefix = 24\n"
         "gateway = 10.0.0.1\n",
         "not in one /24"},
        {"[network]\nmode = static\naddresses = 10.0.0.1-10.0.0.20\nprefix = 24\n"
         "gateway = 10.0.0.1\n",
         "gateway lies inside"},
        {"[sandbox]\ndefault_cores = 8\nmax_cores = 4\n", "max_cores"},
        {"[sandbox]\ndefault_memory_mb = 2048\nmax_memory_mb = 1024\n", "max_memory_mb"},
        {"[sandbox]\ndefault_disk_gb = 16\nmax_disk_gb = 8\n", "max_disk_gb"},
        {"[templates]\npy.host_key = SHA256:x\n", "no 'py = VMID' line"},
        /* replicas are for configured templates only (not one template.create made) */
        {"[templates]\npy.replicas = 2\n", "py.replicas: no 'py = VMID' line"},
        {"[templates]\npy = 150000\n", "inside vmid_range"},
        {"[templates]\npy = 9001\ndefault = go\n", "no template named 'go'"},
        {"[proxmox]\nurl = https://h\ntoken_id = a@pve!b\ntemplate = 9000\npool = p\n"
         "[templates]\ndefault = 9001\n",
         "default"},
    };

    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        _cleanup_free_ char *path = NULL, *err = NULL;
        struct config c;

        path = write_file("v.conf", cases[i].text);
        ck_assert_int_eq(config_load(path, &c, NULL), 0);
        ck_assert_int_eq(config_validate(&c, &err), -EINVAL);
        ck_assert_msg(strstr(err, path) && strstr(err, cases[i].needle), "case %zu: '%s'", i, err);
        config_done(&c);
    }
    /* warm.NAME may name a template made from a sandbox later (template.create) */
    {
        _cleanup_free_ char *path = NULL, *err = NULL;
        struct config c;

        path = write_file("v.conf", "[templates]\npy = 9001\nmax_templates_per_uid = 3\n"
                                    "[pool]\nwarm.go = 2\n");
        ck_assert_int_eq(config_load(path, &c, NULL), 0);
        ck_assert_int_eq(config_validate(&c, &err), 0);
        ck_assert_uint_eq(c.max_templates_per_uid, 3);
        config_done(&c);
        path = (free(path), write_file("v.conf", "[templates]\nmax_templates_per_uid = 1001\n"));
        ck_assert_int_eq(config_load(path, &c, &err), -EINVAL);
        ck_assert_msg(strstr(err, "0..1000"), "%s", err);
    }
}
END_TEST

START_TEST(test_templates_and_pool)
{
    _cleanup_free_ char *path = NULL, *path2 = NULL, *err = NULL;
    const struct config_template *t;
    struct config c, n;

    path =
        write_file("t.conf", "[proxmox]\nurl = https://h\ntoken_id = a@pve!b\ntemplate = 9000\n"
                             "pool = p\n[templates]\npy = 9001\npy.host_key = SHA256:a, SHA256:b\n"
                             "go = 9002\n[sandbox]\nmax_cores = 4\nmax_memory_mb = 2048\n"
                             "max_disk_gb = 32\n[pool]\nwarm = 3\nwarm.py = 1\nmax_filling = 5\n");
    ck_assert_int_eq(config_load(path, &c, &err), 0);
    ck_assert_int_eq(config_validate(&c, &err), 0);
    /* [proxmox] template is "default", listed first, and the default template. */
    ck_assert_uint_eq(c.n_templates, 3);
    ck_assert_str_eq(c.templates[0].name, "default");
    ck_assert_uint_eq(c.templates[0].vmid, 9000);
    ck_assert_ptr_null(c.templates[0].host_keys);
    t = config_template_find(&c, NULL);
    ck_assert_str_eq(t->name, "default");
    t = config_template_find(&c, "py");
    ck_assert_uint_eq(t->vmid, 9001);
    ck_assert_uint_eq(t->n_host_keys, 2);
    ck_assert_str_eq(t->host_keys[1], "SHA256:b");
    ck_assert_uint_eq(config_template_find(&c, "go")->vmid, 9002);
    ck_assert_ptr_null(config_template_find(&c, "rust"));
    ck_assert_uint_eq(c.sandbox.max_cores, 4);
    ck_assert_uint_eq(c.sandbox.max_memory_mb, 2048);
    ck_assert_uint_eq(c.sandbox.max_disk_gb, 32);
    ck_assert_uint_eq(config_pool_target(&c, "default"), 3);
    ck_assert_uint_eq(config_pool_target(&c, "py"), 1);
    ck_assert_uint_eq(config_pool_target(&c, "go"), 0);
    ck_assert_uint_eq(c.pool.max_filling, 5);

    /* A reload moves [pool] over; [templates] default picks another default template. */
    path2 = write_file("t2.conf", "[templates]\npy = 9001\ngo = 9002\ndefault = go\n[pool]\n"
                                  "warm = 7\n");
    ck_assert_int_eq(config_load(path2, &n, &err), 0);
    ck_assert_int_eq(config_validate(&n, &err), 0);
    ck_assert_str_eq(config_template_find(&n, NULL)->name, "go");
    ck_assert_uint_eq(config_pool_target(&n, "go"), 7);
    ck_assert_uint_eq(config_pool_target(&n, "py"), 0);
    ck_assert(config_templates_equal(&c, &c));
    ck_assert(!config_templates_equal(&c, &n)); /* a reload logs that a restart applies it */
    config_pool_move(&c, &n);
    ck_assert_uint_eq(config_pool_target(&c, "default"), 7); /* warm: the default template */
    ck_assert_uint_eq(config_pool_target(&c, "py"), 0);
    ck_assert_uint_eq(c.pool.max_filling, CONFIG_DEFAULT_POOL_MAX_FILLING);
    ck_assert_uint_eq(n.pool.n_warm, 0);
    config_done(&n);
    config_done(&c);

    /* Without [proxmox] template the first [templates] entry is the default. */
    free(path);
    path = write_file("t3.conf", "[templates]\nzz = 9005\naa = 9004\n");
    ck_assert_int_eq(config_load(path, &c, &err), 0);
    ck_assert_str_eq(config_template_find(&c, NULL)->name, "zz");
    config_done(&c);
}
END_TEST

START_TEST(test_cluster_keys)
{
    _cleanup_free_ char *path = NULL, *err = NULL;
    const struct config_template *t;
    struct config c;

    path = write_file("cl.conf", "[proxmox]\nurl = https://h\ntoken_id = a@pve!b\npool = p\n"
                                 "nodes = pve1, pve2, pve3\n"
                                 "template = 9000@pve1, 9001@pve2,9002@pve3\n"
                                 "max_per_node = 12\nnode_param = any\n"
                                 "[templates]\npy = 9100@pve2,9110@pve2\ngo = 9200\n"
                                 "go.replicas = 3\ndefault.replicas = 2\n");
    ck_assert_int_eq(config_load(path, &c, &err), 0);
    ck_assert_int_eq(config_validate(&c, &err), 0);
    t = config_template_find(&c, NULL);
    ck_assert_str_eq(t->name, "default");
    ck_assert_uint_eq(t->vmid, 9000);
    ck_assert_uint_eq(t->n_copies, 3);
    ck_assert_uint_eq(t->copies[1].vmid, 9001);
    ck_assert_str_eq(t->copies[1].node, "pve2");
    ck_assert_str_eq(t->copies[2].node, "pve3");
    t = config_template_find(&c, "py"); /* two copies on one node: clones run on both */
    ck_assert_uint_eq(t->n_copies, 2);
    ck_assert_str_eq(t->copies[0].node, "pve2");
    ck_assert_uint_eq(t->copies[1].vmid, 9110);
    ck_assert_str_eq(t->copies[1].node, "pve2");
    ck_assert_uint_eq(config_template_find(&c, "go")->n_copies, 0); /* one vmid */
    ck_assert_uint_eq(config_template_find(&c, "go")->replicas, 3);
    ck_assert_uint_eq(config_template_find(&c, NULL)->replicas, 2); /* [proxmox] template's */
    ck_assert_uint_eq(config_template_find(&c, "py")->replicas, 0);
    ck_assert_uint_eq(c.proxmox.max_per_node, 12);
    ck_assert_int_eq(c.proxmox.node_param, CONFIG_NODE_PARAM_ANY);
    ck_assert(config_templates_equal(&c, &c));
    config_done(&c);

    /* defaults: no cap, admins only */
    ck_assert_int_eq(config_init(&c), 0);
    ck_assert_uint_eq(c.proxmox.max_per_node, 0);
    ck_assert_int_eq(c.proxmox.node_param, CONFIG_NODE_PARAM_ADMIN);
    config_done(&c);

    /* a copy on a node that is not in [proxmox] nodes, or inside vmid_range */
    free(path);
    path = write_file("cl2.conf", "[proxmox]\nurl = https://h\ntoken_id = a@pve!b\npool = p\n"
                                  "nodes = pve1\ntemplate = 9000@pve1,9001@pve7\n");
    ck_assert_int_eq(config_load(path, &c, &err), 0);
    free(err);
    err = NULL;
    ck_assert_int_eq(config_validate(&c, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "node 'pve7' is not in [proxmox] nodes"));
    config_done(&c);
    free(path);
    free(err);
    err = NULL;
    path = write_file("cl3.conf", "[proxmox]\nurl = https://h\ntoken_id = a@pve!b\npool = p\n"
                                  "nodes = pve1,pve2\ntemplate = 9000@pve1,150000@pve2\n");
    ck_assert_int_eq(config_load(path, &c, &err), 0);
    ck_assert_int_eq(config_validate(&c, &err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "vmid 150000 lies inside vmid_range"));
    config_done(&c);
}
END_TEST

START_TEST(test_no_proxmox_is_valid)
{
    _cleanup_free_ char *path = NULL;
    struct config c;

    path = write_file("np.conf", "[server]\nsocket = /tmp/x.sock\n[sandbox]\nmax_total = 30\n");
    ck_assert_int_eq(config_load(path, &c, NULL), 0);
    ck_assert(!c.proxmox.present);
    ck_assert_int_eq(config_validate(&c, NULL), 0);
    ck_assert_int_eq(config_load_secrets(&c, NULL), 0); /* nothing needed */
    ck_assert_ptr_null(c.proxmox.token_secret);
    config_done(&c);
}
END_TEST

static const char minimal_proxmox[] =
    "[proxmox]\nurl = https://127.0.0.1:8006\ntoken_id = a@pve!b\ntemplate = 9000\npool = p\n";

START_TEST(test_credentials_directory)
{
    _cleanup_free_ char *path = NULL, *creds = NULL, *err = NULL;
    struct config c;

    path = write_file("cred.conf", minimal_proxmox);
    ck_assert_int_ge(asprintf(&creds, "%s/creds", dir), 0);
    ck_assert_int_eq(mkdir(creds, 0700), 0);

    /* No file key and no credentials folder: a clear error, no secret in it. */
    ck_assert_int_eq(config_load(path, &c, NULL), 0);
    ck_assert_int_eq(config_load_secrets(&c, &err), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "pve-token"));
    free(err);
    err = NULL;

    /* --check-config outside the service: credentials not checked, none loaded. */
    ck_assert_int_eq(config_load_secrets_full(&c, true, NULL), 0);
    ck_assert_ptr_null(c.proxmox.token_secret);
    ck_assert_ptr_null(c.ssh.key);

    /* Credentials present but the ssh key missing. */
    setenv("CREDENTIALS_DIRECTORY", creds, 1);
    free(write_file("creds/pve-token", "tok-from-cred\n\n"));
    ck_assert_int_eq(config_load_secrets(&c, &err), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "ssh-key"));
    ck_assert_ptr_null(c.proxmox.token_secret);
    free(err);
    err = NULL;

    free(write_file("creds/ssh-key", "KEY"));
    ck_assert_int_eq(config_load_secrets(&c, &err), 0);
    ck_assert_str_eq(c.proxmox.token_secret, "tok-from-cred");
    ck_assert_str_eq(c.ssh.key, "KEY");
    config_done(&c);
    unsetenv("CREDENTIALS_DIRECTORY");
}
END_TEST

START_TEST(test_secret_errors)
{
    _cleanup_free_ char *text = NULL, *path = NULL, *err = NULL;
    struct config c;

    /* An empty token file is refused; the message names the file, not any content. */
    free(write_file("empty", "\n"));
    ck_assert_int_ge(asprintf(&text, "%stoken_secret_file = %s/empty\n", minimal_proxmox, dir), 0);
    path = write_file("s.conf", text);
    ck_assert_int_eq(config_load(path, &c, NULL), 0);
    ck_assert_int_lt(config_load_secrets(&c, &err), 0);
    ck_assert_ptr_nonnull(strstr(err, "empty"));
    config_done(&c);
}
END_TEST

START_TEST(test_network)
{
    _cleanup_free_ char *path = NULL;
    struct config c;

    path = write_file("net.conf", "[network]\nmode = static\naddresses = 10.0.0.100-10.0.0.199\n"
                                  "prefix = 24\ngateway = 10.0.0.1\ndns = 10.0.0.1, 9.9.9.9\n"
                                  "probe_address = 203.0.113.10:80\n"
                                  "[proxmox]\nfirewall_period_s = 5\n");
    ck_assert_int_eq(config_load(path, &c, NULL), 0);
    ck_assert(c.network.static_mode);
    ck_assert_uint_eq(c.network.first, 0x0a000064u);
    ck_assert_uint_eq(c.network.last, 0x0a0000c7u);
    ck_assert_uint_eq(c.network.prefix, 24);
    ck_assert_uint_eq(c.network.gateway, 0x0a000001u);
    ck_assert_str_eq(c.network.dns, "10.0.0.1 9.9.9.9");
    ck_assert_uint_eq(c.network.probe_ip, 0xcb00710au);
    ck_assert_uint_eq(c.network.probe_port, 80);
    ck_assert_uint_eq(c.proxmox.firewall_period_s, 5);
    ck_assert_ptr_null(config_network_check(&c.network));
    config_done(&c);
    /* the defaults: DHCP, no probe, a 10 s cycle */
    ck_assert_int_eq(config_init(&c), 0);
    ck_assert(!c.network.static_mode);
    ck_assert_uint_eq(c.network.probe_ip, 0);
    ck_assert_uint_eq(c.proxmox.firewall_period_s, 10);
    ck_assert_ptr_null(config_network_check(&c.network));
    config_done(&c);
}
END_TEST

START_TEST(test_known_keys)
{
    const char *const *k = config_known_keys();
    size_t n = 0;
    bool found = false;

    for (; k[n]; n++)
        if (strcmp(k[n], "proxmox.vmid_range") == 0)
            found = true;
    ck_assert(found);
    ck_assert_uint_ge(n, 36);
    found = false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(k[i], "pool.warm") == 0)
            found = true;
    ck_assert(found); /* [pool] warm is a known key too */
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("parse");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_full);
    tcase_add_loop_test(tc, test_bad, 0, (int)ELEMENTSOF(bad));
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_validate);
    tcase_add_test(tc, test_templates_and_pool);
    tcase_add_test(tc, test_no_proxmox_is_valid);
    tcase_add_test(tc, test_cluster_keys);
    tcase_add_test(tc, test_credentials_directory);
    tcase_add_test(tc, test_secret_errors);
    tcase_add_test(tc, test_known_keys);
    tcase_add_test(tc, test_network);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(config_suite());
}
