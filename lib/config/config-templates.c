/* [templates] and [pool] of sandboxd.conf(5): keys named by the operator (a template's
 * name), so they are parsed here rather than from config.c's table of fixed keys. */
#include "config-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > CONFIG_TEMPLATE_NAME_MAX || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

static struct config_template *find(struct config *c, const char *name, size_t n)
{
    for (size_t i = 0; i < c->n_templates; i++)
        if (strlen(c->templates[i].name) == n && memcmp(c->templates[i].name, name, n) == 0)
            return &c->templates[i];
    return NULL;
}

/* The entry for name (created when missing; vmid 0 until NAME = VMID is read). */
static int get_entry(struct config *c, const char *name, size_t n, struct config_template **ret)
{
    struct config_template *t = find(c, name, n), *v;

    if (t) {
        *ret = t;
        return 0;
    }
    if (c->n_templates >= CONFIG_TEMPLATES_MAX)
        return -E2BIG;
    v = realloc(c->templates, (c->n_templates + 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    c->templates = v;
    t = &v[c->n_templates];
    *t = (struct config_template){.name = strndup(name, n)};
    if (!t->name)
        return -ENOMEM;
    c->n_templates++;
    *ret = t;
    return 0;
}

void config_template_copies_free(struct config_template_copy *copies, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(copies[i].node);
    free(copies);
}

static bool node_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > CONFIG_NODE_NAME_MAX || s[0] == '-' || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.' || s[i] == '_'))
            return false;
    return true;
}

/* One "VMID@node" of a list; the node is malloc'ed into *ret. */
static int copy_parse(const char *w, struct config_template_copy *ret, char **ret_error)
{
    const char *at = strchr(w, '@');
    _cleanup_free_ char *num = NULL;
    unsigned long long x;

    if (!at)
        return config_fail(ret_error, "'%s': expected VMID@node in a list of copies", w);
    num = strndup(w, (size_t)(at - w));
    if (!num)
        return -ENOMEM;
    if (config_parse_uint(num, &x) < 0 || x < 100 || x > 999999999)
        return config_fail(ret_error, "'%s' is not a vmid in 100..999999999", num);
    if (!node_name_ok(at + 1, strlen(at + 1)))
        return config_fail(ret_error, "'%s' is not a node name", at + 1);
    ret->node = strdup(at + 1);
    if (!ret->node)
        return -ENOMEM;
    ret->vmid = (uint32_t)x;
    return 0;
}

int config_template_spec_parse(const char *v, uint32_t *ret_vmid,
                               struct config_template_copy **ret_copies, size_t *ret_n,
                               char **ret_error)
{
    struct config_template_copy *copies = NULL;
    unsigned long long x;
    char **words = NULL;
    size_t n = 0;
    int r;

    if (!strchr(v, '@')) {
        if (config_parse_uint(v, &x) < 0 || x < 100 || x > 999999999)
            return config_fail(
                ret_error, "'%s' is not a vmid in 100..999999999 (or VMID@node,VMID@node,...)", v);
        *ret_vmid = (uint32_t)x;
        *ret_copies = NULL;
        *ret_n = 0;
        return 0;
    }
    r = config_split_list(v, CONFIG_NODES_MAX, &words, &n);
    if (r == -ENOMEM)
        return r;
    if (r < 0 || n == 0)
        return config_fail(ret_error, "expected 1 to %d comma-separated VMID@node copies",
                           CONFIG_NODES_MAX);
    copies = calloc(n, sizeof *copies);
    r = copies ? 0 : -ENOMEM;
    for (size_t i = 0; r >= 0 && i < n; i++) {
        r = copy_parse(words[i], &copies[i], ret_error);
        for (size_t j = 0; r >= 0 && j < i; j++)
            if (copies[j].vmid == copies[i].vmid)
                r = config_fail(ret_error, "vmid %u given twice", copies[i].vmid);
    }
    for (size_t i = 0; i < n; i++)
        free(words[i]);
    free(words);
    if (r < 0) {
        config_template_copies_free(copies, n);
        return r;
    }
    *ret_vmid = copies[0].vmid;
    *ret_copies = copies;
    *ret_n = n;
    return 0;
}

int config_template_add(struct config *c, const char *name, uint32_t vmid,
                        struct config_template_copy *copies, size_t n_copies, char **ret_error)
{
    struct config_template *t;
    int r;

    r = get_entry(c, name, strlen(name), &t);
    if (r == -E2BIG)
        return config_fail(ret_error, "more than %d templates", CONFIG_TEMPLATES_MAX);
    if (r < 0)
        return r;
    if (t->vmid)
        return config_fail(ret_error, "template '%s' given twice", name);
    t->vmid = vmid;
    t->copies = copies;
    t->n_copies = n_copies;
    return 0;
}

/* A number of 0..max into *ret. */
static int set_uint(const char *value, unsigned max, unsigned *ret, char **ret_error)
{
    unsigned long long x;

    if (config_parse_uint(value, &x) < 0 || x > max)
        return config_fail(ret_error, "'%s' is not a number in 0..%u", value, max);
    *ret = (unsigned)x;
    return 0;
}

/* NAME.replicas = N (NAME may be "default": [proxmox] template's). */
static int set_replicas(struct config *c, const char *name, size_t n, const char *value,
                        char **ret_error)
{
    struct config_template *t;
    unsigned x;
    int r = set_uint(value, CONFIG_REPLICAS_MAX, &x, ret_error);

    if (r < 0)
        return r;
    r = get_entry(c, name, n, &t);
    if (r == -E2BIG)
        return config_fail(ret_error, "more than %d templates", CONFIG_TEMPLATES_MAX);
    if (r < 0)
        return r;
    if (t->replicas_set)
        return config_fail(ret_error, "key given twice");
    t->replicas_set = true;
    t->replicas = x;
    return 0;
}

static int set_template_key(struct config *c, const char *name, const char *value, char **ret_error)
{
    const char *dot = strchr(name, '.');
    size_t n = dot ? (size_t)(dot - name) : strlen(name);
    struct config_template *t;
    uint32_t vmid;
    int r;

    if (!dot && strcmp(name, "max_templates_per_uid") == 0)
        return set_uint(value, 1000, &c->max_templates_per_uid, ret_error);
    if (!dot && strcmp(name, "max_template_disk_gb_per_uid") == 0)
        return set_uint(value, 1048576, &c->max_template_disk_gb_per_uid, ret_error);
    if (!dot && strcmp(name, "default") == 0) {
        if (c->default_template)
            return config_fail(ret_error, "key given twice");
        if (!name_ok(value, strlen(value)))
            return config_fail(ret_error, "'%s' is not a template name ([a-z0-9-], 1-%d)", value,
                               CONFIG_TEMPLATE_NAME_MAX);
        c->default_template = strdup(value);
        return c->default_template ? 0 : -ENOMEM;
    }
    if (!name_ok(name, n))
        return config_fail(ret_error, "'%.*s' is not a template name ([a-z0-9-], 1-%d)", (int)n,
                           name, CONFIG_TEMPLATE_NAME_MAX);
    if (dot && strcmp(dot, ".replicas") == 0)
        return set_replicas(c, name, n, value, ret_error);
    if (dot && strcmp(dot, ".host_key") != 0)
        return config_fail(ret_error, "unknown key '%s' (NAME, NAME.host_key or NAME.replicas)",
                           name);
    if (n == strlen(CONFIG_DEFAULT_TEMPLATE_NAME) && memcmp(name, "default", n) == 0)
        return config_fail(ret_error,
                           "the template named 'default' is [proxmox] template; pick another name");
    r = get_entry(c, name, n, &t);
    if (r == -E2BIG)
        return config_fail(ret_error, "more than %d templates", CONFIG_TEMPLATES_MAX);
    if (r < 0)
        return r;
    if (dot) {
        if (t->host_keys)
            return config_fail(ret_error, "key given twice");
        r = config_split_list(value, CONFIG_HOST_KEYS_MAX, &t->host_keys, &t->n_host_keys);
        if (r == -ENOMEM)
            return r;
        if (r < 0 || t->n_host_keys == 0)
            return config_fail(ret_error, "expected 1 to %d comma-separated fingerprints",
                               CONFIG_HOST_KEYS_MAX);
        return 0;
    }
    if (t->vmid)
        return config_fail(ret_error, "key given twice");
    r = config_template_spec_parse(value, &vmid, &t->copies, &t->n_copies, ret_error);
    if (r >= 0)
        t->vmid = vmid;
    return r;
}

static int set_pool_key(struct config *c, const char *name, const char *value, char **ret_error)
{
    struct config_pool *p = &c->pool;
    const char *tmpl = NULL;
    struct config_pool_warm *v;
    unsigned long long x;

    if (strcmp(name, "max_filling") == 0) {
        if (config_parse_uint(value, &x) < 0 || x < 1 || x > 64)
            return config_fail(ret_error, "'%s' is not a number in 1..64", value);
        p->max_filling = (unsigned)x;
        return 0;
    }
    if (strncmp(name, "warm.", 5) == 0) {
        tmpl = name + 5;
        if (!name_ok(tmpl, strlen(tmpl)))
            return config_fail(ret_error, "'%s' is not a template name", tmpl);
    } else if (strcmp(name, "warm") != 0)
        return config_fail(ret_error, "unknown key '%s'", name);
    if (config_parse_uint(value, &x) < 0 || x > CONFIG_POOL_WARM_MAX)
        return config_fail(ret_error, "'%s' is not a number in 0..%d", value, CONFIG_POOL_WARM_MAX);
    for (size_t i = 0; i < p->n_warm; i++)
        if ((!tmpl && !p->warm[i].template) ||
            (tmpl && p->warm[i].template && strcmp(tmpl, p->warm[i].template) == 0))
            return config_fail(ret_error, "key given twice");
    if (p->n_warm >= CONFIG_TEMPLATES_MAX + 1)
        return config_fail(ret_error, "too many warm keys");
    v = realloc(p->warm, (p->n_warm + 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    p->warm = v;
    v[p->n_warm] = (struct config_pool_warm){.n = (unsigned)x};
    if (tmpl && !(v[p->n_warm].template = strdup(tmpl)))
        return -ENOMEM;
    p->n_warm++;
    return 0;
}

int config_dynamic_key(struct config *c, const char *section, const char *name, const char *value,
                       char **ret_error)
{
    if (strcmp(section, "templates") == 0)
        return set_template_key(c, name, value, ret_error);
    if (strcmp(section, "pool") == 0)
        return set_pool_key(c, name, value, ret_error);
    return 1; /* not ours */
}

static void pool_free(struct config_pool *p)
{
    for (size_t i = 0; i < p->n_warm; i++)
        free(p->warm[i].template);
    free(p->warm);
    p->warm = NULL;
    p->n_warm = 0;
}

void config_templates_done(struct config *c)
{
    for (size_t i = 0; i < c->n_templates; i++) {
        free(c->templates[i].name);
        for (size_t j = 0; j < c->templates[i].n_host_keys; j++)
            free(c->templates[i].host_keys[j]);
        free(c->templates[i].host_keys);
        config_template_copies_free(c->templates[i].copies, c->templates[i].n_copies);
    }
    free(c->templates);
    c->templates = NULL;
    c->n_templates = 0;
    free(c->default_template);
    c->default_template = NULL;
    pool_free(&c->pool);
}

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

bool config_templates_equal(const struct config *a, const struct config *b)
{
    if (a->n_templates != b->n_templates || !str_eq(a->default_template, b->default_template))
        return false;
    for (size_t i = 0; i < a->n_templates; i++) {
        const struct config_template *x = &a->templates[i], *y = &b->templates[i];

        if (strcmp(x->name, y->name) != 0 || x->vmid != y->vmid ||
            x->n_host_keys != y->n_host_keys || x->n_copies != y->n_copies ||
            x->replicas != y->replicas)
            return false;
        for (size_t j = 0; j < x->n_copies; j++)
            if (x->copies[j].vmid != y->copies[j].vmid ||
                strcmp(x->copies[j].node, y->copies[j].node) != 0)
                return false;
        for (size_t j = 0; j < x->n_host_keys; j++)
            if (strcmp(x->host_keys[j], y->host_keys[j]) != 0)
                return false;
    }
    return true;
}

void config_pool_move(struct config *dst, struct config *src)
{
    pool_free(&dst->pool);
    dst->pool = src->pool;
    src->pool = (struct config_pool){};
}

const struct config_template *config_template_find(const struct config *c, const char *name)
{
    if (!name) {
        name = c->default_template;
        if (!name)
            return c->n_templates > 0 ? &c->templates[0] : NULL;
    }
    for (size_t i = 0; i < c->n_templates; i++)
        if (strcmp(c->templates[i].name, name) == 0)
            return &c->templates[i];
    return NULL;
}

unsigned config_pool_target(const struct config *c, const char *name)
{
    const struct config_template *def = config_template_find(c, NULL);
    const char *def_name = def ? def->name : CONFIG_DEFAULT_TEMPLATE_NAME;

    for (size_t i = 0; i < c->pool.n_warm; i++) {
        const char *n = c->pool.warm[i].template;

        if ((n && strcmp(n, name) == 0) || (!n && strcmp(name, def_name) == 0))
            return c->pool.warm[i].n;
    }
    return 0;
}

int config_templates_validate(const struct config *c, char **ret_error)
{
    const char *file = c->file ? c->file : "(defaults)";

    for (size_t i = 0; i < c->n_templates; i++) {
        const struct config_template *t = &c->templates[i];

        if (t->vmid == 0)
            return config_fail(ret_error, "%s: [templates] %s.%s: no '%s = VMID' line", file,
                               t->name, t->replicas_set ? "replicas" : "host_key", t->name);
        if (t->vmid >= c->proxmox.vmid_min && t->vmid <= c->proxmox.vmid_max)
            return config_fail(ret_error, "%s: [templates] %s: vmid %u lies inside vmid_range",
                               file, t->name, t->vmid);
        for (size_t j = 0; j < t->n_copies; j++) {
            const struct config_template_copy *cp = &t->copies[j];
            bool listed = false;

            for (size_t k = 0; k < c->proxmox.n_nodes; k++)
                listed = listed || strcmp(c->proxmox.nodes[k], cp->node) == 0;
            if (!listed)
                return config_fail(ret_error,
                                   "%s: [templates] %s: node '%s' is not in [proxmox] nodes", file,
                                   t->name, cp->node);
            if (cp->vmid >= c->proxmox.vmid_min && cp->vmid <= c->proxmox.vmid_max)
                return config_fail(ret_error, "%s: [templates] %s: vmid %u lies inside vmid_range",
                                   file, t->name, cp->vmid);
        }
    }
    if (c->default_template && !config_template_find(c, c->default_template))
        return config_fail(ret_error, "%s: [templates] default: no template named '%s'", file,
                           c->default_template);
    /* [pool] warm.NAME may name a template made from a sandbox (template.create): kept
     * until one of that name exists */
    return 0;
}
