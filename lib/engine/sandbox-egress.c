/* A sandbox's way out in its Proxmox firewall: none (internet off), the internet group (on),
 * or an allow-list's CIDR entries (docs/sandbox-setup.md, "Egress allow-lists").
 *
 * An allow-list becomes one guest IP set per port of its entries, "egress-443" with every
 * CIDR allowed on TCP port 443, "egress-all" with those allowed on every port and protocol,
 * and one rule per set (out, ACCEPT, dest +egress-443, proto tcp, dport 443), each rule
 * commented "sandboxd-egress" so that it is found by scanning the rules, never by position.
 *
 * A change first takes away what is in place (the group rule unless it stays, every
 * sandboxd-egress rule, every egress-* set), then puts the new state in place (the group
 * rule; or each set, filled, before its rule). Each write is one change of the guest's
 * firewall file, which Proxmox compiles on its own cycle: whichever moment a cycle sees, the
 * sandbox may reach at most what the old state allowed or at most what the new one allows,
 * never more than both (during the change, possibly less than either). Every step is
 * idempotent, so a change interrupted (a failure, a restart) is finished by the next. */
#include "macro.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"
#include "log.h"
#include "pve.h"
#include "sandbox-internal.h"

#define COMP "sandbox"

#define EGRESS_COMMENT "sandboxd-egress"
/* The proxy rule's comment: the list's names, space-separated, so that a lost state folder
 * reads them back as it reads the addresses back from the sets. */
#define EGRESS_NAMES_PREFIX EGRESS_COMMENT " names="
#define EGRESS_SET_PREFIX "egress-"
#define EGRESS_SETS_MAX (EGRESS_ALLOW_MAX + 1)
#define EGRESS_SET_NAME_MAX 24
#define EGRESS_RELIST_MAX 8 /* rule deletes refused (the list changed) before giving up */

enum egress_phase {
    EG_GROUP_OFF,
    EG_RULES_LIST,
    EG_RULE_DELETE,
    EG_SETS_LIST,
    EG_SET_DELETE,
    EG_GROUP_ON,
    EG_SET_CREATE,
    EG_SET_ADD,
    EG_RULE_ADD,
    EG_PROXY_RULE,
};

struct egress_run {
    struct sandbox *sb;
    bool internet;
    struct egress_allow *allow; /* NULL: no list */
    uint64_t deadline_ms;
    pve_done_fn cb;
    void *userdata;
    enum egress_phase phase;
    unsigned relists;
    char sets[EGRESS_SETS_MAX][EGRESS_SET_NAME_MAX];
    size_t n_sets, set_i;
    uint16_t ports[EGRESS_SETS_MAX]; /* the list's ports in order, 0: every port */
    size_t n_ports, port_i, entry_i;
    bool proxy; /* the list has names and the proxy runs: a rule lets the sandbox reach it */
};

static bool is_egress_comment(const char *c)
{
    return c && (strcmp(c, EGRESS_COMMENT) == 0 ||
                 strncmp(c, EGRESS_NAMES_PREFIX, strlen(EGRESS_NAMES_PREFIX)) == 0);
}

static void set_name(uint16_t port, char buf[EGRESS_SET_NAME_MAX])
{
    if (port == 0)
        snprintf(buf, EGRESS_SET_NAME_MAX, EGRESS_SET_PREFIX "all");
    else
        snprintf(buf, EGRESS_SET_NAME_MAX, EGRESS_SET_PREFIX "%u", port);
}

void egress_run_free(struct egress_run *run)
{
    if (!run)
        return;
    free(run->allow);
    free(run);
}

static uint64_t call_ms(const struct egress_run *run)
{
    uint64_t now = now_ms(run->sb->engine);

    return run->deadline_ms > now ? MIN(run->deadline_ms - now, ENGINE_STEP_CONFIG_MS) : 1;
}

static void on_step(const struct pve_result *res, void *userdata);

/* The next entry of the current port, from entry_i on: false past the last. */
static bool next_entry(struct egress_run *run)
{
    for (; run->entry_i < run->allow->n; run->entry_i++) {
        const struct egress_entry *en = &run->allow->e[run->entry_i];

        if (en->kind == EGRESS_CIDR && en->port == run->ports[run->port_i])
            return true;
    }
    return false;
}

static int start_rule_add(struct egress_run *run, char *set)
{
    struct sandbox *sb = run->sb;
    _cleanup_json_ json_object *p = json_object_new_object();
    uint16_t port = run->ports[run->port_i];
    char dest[EGRESS_SET_NAME_MAX + 1], dport[8];

    if (!p)
        return -ENOMEM;
    snprintf(dest, sizeof dest, "+%s", set);
    json_object_object_add(p, "type", json_object_new_string("out"));
    json_object_object_add(p, "action", json_object_new_string("ACCEPT"));
    json_object_object_add(p, "enable", json_object_new_int(1));
    json_object_object_add(p, "dest", json_object_new_string(dest));
    json_object_object_add(p, "comment", json_object_new_string(EGRESS_COMMENT));
    if (port) {
        snprintf(dport, sizeof dport, "%u", port);
        json_object_object_add(p, "proto", json_object_new_string("tcp"));
        json_object_object_add(p, "dport", json_object_new_string(dport));
    }
    run->phase = EG_RULE_ADD;
    return pve_fw_rule_add(sb->engine->pve, sb->node, sb->vmid, p, call_ms(run), on_step, run,
                           &sb->call);
}

/* EGRESS_NAMES_PREFIX and a's names (malloc'ed), or NULL when out of memory. */
static char *names_comment(const struct egress_allow *a)
{
    size_t size = strlen(EGRESS_NAMES_PREFIX) + a->n * (EGRESS_ENTRY_MAX + 1) + 1, len;
    char *out = malloc(size);

    if (!out)
        return NULL;
    len = (size_t)snprintf(out, size, "%s", EGRESS_NAMES_PREFIX);
    for (size_t i = 0; i < a->n; i++) {
        int k;

        if (a->e[i].kind != EGRESS_NAME)
            continue;
        if (len > strlen(EGRESS_NAMES_PREFIX))
            out[len++] = ' ';
        k = egress_entry_format(&a->e[i], out + len, size - len);
        if (k < 0) {
            free(out);
            return NULL;
        }
        len += (size_t)k;
    }
    out[len] = '\0';
    return out;
}

/* The last rule of a list with names: TCP to the egress proxy's address and port. 1 when
 * there is none to add. */
static int start_proxy_rule(struct egress_run *run)
{
    struct sandbox *sb = run->sb;
    const struct config_egress *ce = &sb->engine->cfg->egress;
    _cleanup_json_ json_object *p = NULL;
    _cleanup_free_ char *comment = NULL;
    char dest[INET_ADDRSTRLEN], dport[8];
    uint32_t ip = ce->listen_ip;

    if (!run->proxy)
        return 1;
    p = json_object_new_object();
    comment = names_comment(run->allow);
    if (!p || !comment)
        return -ENOMEM;
    snprintf(dest, sizeof dest, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255u, (ip >> 8) & 255u,
             ip & 255u);
    snprintf(dport, sizeof dport, "%u", ce->listen_port);
    json_object_object_add(p, "type", json_object_new_string("out"));
    json_object_object_add(p, "action", json_object_new_string("ACCEPT"));
    json_object_object_add(p, "enable", json_object_new_int(1));
    json_object_object_add(p, "dest", json_object_new_string(dest));
    json_object_object_add(p, "proto", json_object_new_string("tcp"));
    json_object_object_add(p, "dport", json_object_new_string(dport));
    json_object_object_add(p, "comment", json_object_new_string(comment));
    run->phase = EG_PROXY_RULE;
    return pve_fw_rule_add(sb->engine->pve, sb->node, sb->vmid, p, call_ms(run), on_step, run,
                           &sb->call);
}

/* The build: the set of port_i (created, then filled), its rule, then the next port. */
static int build_next(struct egress_run *run, enum egress_phase done)
{
    struct sandbox *sb = run->sb;
    struct engine *e = sb->engine;
    char set[EGRESS_SET_NAME_MAX], cidr[EGRESS_ENTRY_MAX + 1];

    if (run->port_i >= run->n_ports)
        return start_proxy_rule(run);
    set_name(run->ports[run->port_i], set);
    if (done == EG_SET_CREATE || done == EG_SET_ADD) {
        if (done == EG_SET_ADD)
            run->entry_i++;
        if (!next_entry(run))
            return start_rule_add(run, set);
        struct egress_entry en = run->allow->e[run->entry_i];

        en.port = 0;
        if (egress_entry_format(&en, cidr, sizeof cidr) < 0)
            return -ENOBUFS;
        run->phase = EG_SET_ADD;
        return pve_fw_ipset_add(e->pve, sb->node, sb->vmid, set, cidr, call_ms(run), on_step, run,
                                &sb->call);
    }
    if (done == EG_RULE_ADD && ++run->port_i >= run->n_ports)
        return start_proxy_rule(run);
    set_name(run->ports[run->port_i], set);
    run->entry_i = 0;
    run->phase = EG_SET_CREATE;
    return pve_fw_ipset_create(e->pve, sb->node, sb->vmid, set, call_ms(run), on_step, run,
                               &sb->call);
}

/* The egress-* sets among GET .../firewall/ipset's answer. */
static void sets_collect(struct egress_run *run, json_object *data)
{
    size_t n = json_object_is_type(data, json_type_array) ? json_object_array_length(data) : 0;

    run->n_sets = run->set_i = 0;
    for (size_t i = 0; i < n && run->n_sets < EGRESS_SETS_MAX; i++) {
        json_object *name = NULL;
        const char *s;

        json_object_object_get_ex(json_object_array_get_idx(data, i), "name", &name);
        s = json_object_get_string(name);
        if (s && strncmp(s, EGRESS_SET_PREFIX, strlen(EGRESS_SET_PREFIX)) == 0 &&
            strlen(s) < EGRESS_SET_NAME_MAX)
            snprintf(run->sets[run->n_sets++], EGRESS_SET_NAME_MAX, "%s", s);
    }
}

static int rules_next(struct egress_run *run, const struct pve_fw_rules *rules)
{
    struct sandbox *sb = run->sb;

    for (size_t i = 0; rules && i < rules->n; i++) {
        if (is_egress_comment(rules->v[i].comment)) {
            run->phase = EG_RULE_DELETE;
            return pve_fw_rule_delete(sb->engine->pve, sb->node, sb->vmid, rules->v[i].pos,
                                      rules->digest, call_ms(run), on_step, run, &sb->call);
        }
    }
    run->phase = EG_SETS_LIST;
    return pve_fw_ipset_list(sb->engine->pve, sb->node, sb->vmid, call_ms(run), on_step, run,
                             &sb->call);
}

/* After the take-down: the group, or the list's sets and rules, or nothing. */
static int build_start(struct egress_run *run)
{
    struct engine *e = run->sb->engine;

    if (run->internet && !run->allow) {
        run->phase = EG_GROUP_ON;
        return pve_fw_group_set(e->pve, run->sb->node, run->sb->vmid,
                                e->cfg->proxmox.internet_group, true, call_ms(run), on_step, run,
                                &run->sb->call);
    }
    if (!run->allow)
        return 1;
    run->port_i = 0;
    return build_next(run, EG_SET_DELETE);
}

/* The next call after phase ended with res (a success or a refusal taken for one): 0 when
 * started, 1 when the run is complete, else -errno. */
static int advance(struct egress_run *run, const struct pve_result *res, bool refused)
{
    struct sandbox *sb = run->sb;

    switch (run->phase) {
    case EG_GROUP_OFF:
        run->phase = EG_RULES_LIST;
        return pve_fw_rules_list(sb->engine->pve, sb->node, sb->vmid, call_ms(run), on_step, run,
                                 &sb->call);
    case EG_RULE_DELETE:
        if (refused && ++run->relists > EGRESS_RELIST_MAX)
            return -EAGAIN;
        run->phase = EG_RULES_LIST;
        return pve_fw_rules_list(sb->engine->pve, sb->node, sb->vmid, call_ms(run), on_step, run,
                                 &sb->call);
    case EG_RULES_LIST:
        return rules_next(run, res->rules);
    case EG_SETS_LIST:
        sets_collect(run, res->data);
        /* fall through */
    case EG_SET_DELETE:
        if (run->phase == EG_SET_DELETE)
            run->set_i++;
        if (run->set_i < run->n_sets) {
            run->phase = EG_SET_DELETE;
            return pve_fw_ipset_delete(sb->engine->pve, sb->node, sb->vmid, run->sets[run->set_i],
                                       call_ms(run), on_step, run, &sb->call);
        }
        return build_start(run);
    case EG_GROUP_ON:
    case EG_PROXY_RULE:
        return 1;
    case EG_SET_CREATE:
    case EG_SET_ADD:
    case EG_RULE_ADD:
        return build_next(run, run->phase);
    }
    return -EINVAL;
}

/* Refusals that leave the run on its way: a set already gone or already there (a run
 * interrupted before), a rule delete whose list changed meanwhile (listed again). */
static bool refusal_ok(const struct egress_run *run, const struct pve_result *res)
{
    if (res->error != -EREMOTEIO)
        return false;
    switch (run->phase) {
    case EG_SET_DELETE:
        return pve_error_no_such(res);
    case EG_SET_CREATE:
    case EG_SET_ADD:
        return pve_error_exists(res);
    case EG_RULE_DELETE:
        return true;
    default:
        return false;
    }
}

static void on_step(const struct pve_result *res, void *userdata)
{
    struct egress_run *run = userdata;
    struct sandbox *sb = run->sb;
    struct pve_result fail = {.error = 0};
    bool refused = res->error < 0;
    int r;

    sb->call = NULL;
    if (res->error < 0 && !refusal_ok(run, res)) {
        log_debug(COMP, "%s: egress change failed in phase %d: %s", sb->id, (int)run->phase,
                  strerror(-res->error));
        sb->egress_run = NULL;
        run->cb(res, run->userdata);
        egress_run_free(run);
        return;
    }
    r = advance(run, res, refused);
    if (r == 0)
        return;
    fail.error = r < 0 ? r : 0;
    sb->egress_run = NULL;
    run->cb(&fail, run->userdata);
    egress_run_free(run);
}

int egress_fw_apply(struct sandbox *sb, bool internet, json_object *allow, uint64_t timeout_ms,
                    pve_done_fn cb, void *userdata)
{
    struct engine *e = sb->engine;
    struct egress_run *run = calloc(1, sizeof *run);
    struct params_error perr = {};
    int r;

    if (!run)
        return -ENOMEM;
    *run = (struct egress_run){.sb = sb,
                               .internet = internet,
                               .deadline_ms = now_ms(e) + timeout_ms,
                               .cb = cb,
                               .userdata = userdata};
    if (internet && allow) {
        run->allow = malloc(sizeof *run->allow);
        if (!run->allow || egress_allow_parse(allow, "internet.allow", run->allow, &perr) < 0) {
            egress_run_free(run);
            return -EINVAL;
        }
        for (size_t i = 0; i < run->allow->n; i++) {
            const struct egress_entry *en = &run->allow->e[i];
            size_t k = 0;

            while (en->kind == EGRESS_CIDR && k < run->n_ports && run->ports[k] != en->port)
                k++;
            if (en->kind == EGRESS_CIDR && k == run->n_ports)
                run->ports[run->n_ports++] = en->port;
        }
        run->proxy = egress_has_names(run->allow) && e->cfg->egress.listen_port != 0;
    }
    run->phase = EG_GROUP_OFF;
    if (internet && !allow) /* the group stays, if there: no moment without it */
        r = advance(run, NULL, false);
    else
        r = pve_fw_group_set(e->pve, sb->node, sb->vmid, e->cfg->proxmox.internet_group, false,
                             call_ms(run), on_step, run, &sb->call);
    if (r < 0) {
        egress_run_free(run);
        return r;
    }
    egress_run_free(sb->egress_run); /* one whose call was cancelled */
    sb->egress_run = run;
    return 0;
}

bool egress_sandbox_allows(const struct sandbox *sb, uint32_t ip, unsigned port)
{
    _cleanup_free_ struct egress_allow *a = malloc(sizeof *a);
    struct params_error err = {};

    return a && sb->internet_allow &&
           egress_allow_parse(sb->internet_allow, "internet.allow", a, &err) == 0 &&
           egress_allows_addr(a, ip, (uint16_t)port);
}

/* ---- reading an allow-list back from the firewall (a lost state folder) ---- */

struct egress_read {
    struct pve_client *pve;
    char node[CONFIG_NODE_NAME_MAX + 1];
    uint32_t vmid;
    uint64_t timeout_ms;
    egress_read_fn cb;
    void *userdata;
    char sets[EGRESS_SETS_MAX][EGRESS_SET_NAME_MAX];
    uint16_t ports[EGRESS_SETS_MAX];
    size_t n_sets, i;
    json_object *entries;
};

/* The names of the proxy rule's comment (after EGRESS_NAMES_PREFIX) into entries. */
static void read_names(json_object *entries, const char *names)
{
    while (*names && json_object_array_length(entries) < EGRESS_ALLOW_MAX) {
        size_t n = strcspn(names, " ");

        if (n > 0 && n <= EGRESS_ENTRY_MAX)
            json_object_array_add(entries, json_object_new_string_len(names, (int)n));
        names += n;
        names += strspn(names, " ");
    }
}

static void read_end(struct egress_read *rd, int error)
{
    _cleanup_json_ json_object *allow = NULL;
    struct params_error err = {};

    if (error == 0 && json_object_array_length(rd->entries) > 0 &&
        egress_allow_normal(rd->entries, "internet_allow", &allow, &err) < 0)
        error = -EBADMSG;
    rd->cb(error, error == 0 ? allow : NULL, rd->userdata);
    json_object_put(rd->entries);
    free(rd);
}

static void on_read_set(const struct pve_result *res, void *userdata)
{
    struct egress_read *rd = userdata;
    size_t n;

    if (res->error < 0) {
        read_end(rd, res->error);
        return;
    }
    n = json_object_is_type(res->data, json_type_array) ? json_object_array_length(res->data) : 0;
    for (size_t i = 0; i < n && json_object_array_length(rd->entries) < EGRESS_ALLOW_MAX; i++) {
        json_object *c = NULL;
        char e[EGRESS_ENTRY_MAX + 1];

        json_object_object_get_ex(json_object_array_get_idx(res->data, i), "cidr", &c);
        if (!json_object_get_string(c))
            continue;
        if (rd->ports[rd->i])
            snprintf(e, sizeof e, "%s:%u", json_object_get_string(c), rd->ports[rd->i]);
        else
            snprintf(e, sizeof e, "%s", json_object_get_string(c));
        json_object_array_add(rd->entries, json_object_new_string(e));
    }
    if (++rd->i >= rd->n_sets) {
        read_end(rd, 0);
        return;
    }
    if (pve_fw_ipset_get(rd->pve, rd->node, rd->vmid, rd->sets[rd->i], rd->timeout_ms, on_read_set,
                         rd, NULL) < 0)
        read_end(rd, -EIO);
}

int egress_fw_read(struct pve_client *pve, const char *node, uint32_t vmid,
                   const struct pve_fw_rules *rules, uint64_t timeout_ms, egress_read_fn cb,
                   void *userdata)
{
    struct egress_read *rd;
    const char *names = NULL;
    int r;

    rd = calloc(1, sizeof *rd);
    if (!rd)
        return -ENOMEM;
    *rd = (struct egress_read){
        .pve = pve, .vmid = vmid, .timeout_ms = timeout_ms, .cb = cb, .userdata = userdata};
    snprintf(rd->node, sizeof rd->node, "%s", node);
    for (size_t i = 0; rules && i < rules->n && rd->n_sets < EGRESS_SETS_MAX; i++) {
        const struct pve_fw_rule *ru = &rules->v[i];
        const char *d = ru->dest;
        unsigned port = 0;

        if (ru->comment &&
            strncmp(ru->comment, EGRESS_NAMES_PREFIX, strlen(EGRESS_NAMES_PREFIX)) == 0) {
            names = ru->comment + strlen(EGRESS_NAMES_PREFIX);
            continue;
        }
        if (!ru->comment || strcmp(ru->comment, EGRESS_COMMENT) != 0 || !d || d[0] != '+' ||
            strncmp(d + 1, EGRESS_SET_PREFIX, strlen(EGRESS_SET_PREFIX)) != 0 ||
            strlen(d + 1) >= EGRESS_SET_NAME_MAX)
            continue;
        if (strcmp(d + 1, EGRESS_SET_PREFIX "all") != 0 &&
            (sscanf(d + 1, EGRESS_SET_PREFIX "%u", &port) != 1 || port == 0 || port > 65535))
            continue;
        snprintf(rd->sets[rd->n_sets], EGRESS_SET_NAME_MAX, "%s", d + 1);
        rd->ports[rd->n_sets++] = (uint16_t)port;
    }
    if (rd->n_sets == 0 && !names) {
        free(rd);
        return 1;
    }
    rd->entries = json_object_new_array();
    if (rd->entries && names)
        read_names(rd->entries, names);
    if (rd->entries && rd->n_sets == 0) {
        read_end(rd, 0); /* a list of names only: no set to read */
        return 0;
    }
    r = rd->entries
            ? pve_fw_ipset_get(pve, node, vmid, rd->sets[0], timeout_ms, on_read_set, rd, NULL)
            : -ENOMEM;
    if (r < 0) {
        json_object_put(rd->entries);
        free(rd);
    }
    return r;
}

/* ---- the proxy variables of a sandbox whose list holds names ---- */

json_object *egress_proxy_env(const struct sandbox *sb)
{
    const struct config_egress *ce = &sb->engine->cfg->egress;
    _cleanup_free_ struct egress_allow *a = NULL;
    struct params_error err = {};
    static const char *const names[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"};
    static const char no_proxy[] = "localhost,127.0.0.1,::1";
    json_object *o;
    char url[48];
    uint32_t ip = ce->listen_ip;

    if (ce->listen_port == 0 || !sb->internet || !sb->internet_allow)
        return NULL;
    a = malloc(sizeof *a);
    if (!a || egress_allow_parse(sb->internet_allow, "internet.allow", a, &err) < 0 ||
        !egress_has_names(a))
        return NULL;
    o = json_object_new_object();
    if (!o)
        return NULL;
    snprintf(url, sizeof url, "http://%u.%u.%u.%u:%u", ip >> 24, (ip >> 16) & 255u,
             (ip >> 8) & 255u, ip & 255u, ce->listen_port);
    for (size_t i = 0; i < ELEMENTSOF(names); i++)
        json_object_object_add(o, names[i], json_object_new_string(url));
    json_object_object_add(o, "NO_PROXY", json_object_new_string(no_proxy));
    json_object_object_add(o, "no_proxy", json_object_new_string(no_proxy));
    return o;
}
