/* Where each volume is. See volume-locate.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume-locate.h"

bool volume_config_has_mp(struct json_object *config, unsigned mp)
{
    struct json_object *v;
    char key[16];

    snprintf(key, sizeof key, "mp%u", mp);
    return config && json_object_object_get_ex(config, key, &v) &&
           json_object_is_type(v, json_type_string) && json_object_get_string_len(v) > 0;
}

static bool config_has(struct json_object *config, const char *prefix, unsigned n)
{
    char key[24];

    snprintf(key, sizeof key, "%s%u", prefix, n);
    return config && json_object_object_get_ex(config, key, NULL);
}

int volume_free_mp(struct json_object *config, const char *description, unsigned *ret_mp)
{
    _cleanup_free_ struct marker_volume *lines = NULL;
    size_t n = 0;
    int r;

    r = marker_volumes_parse(description, &lines, &n);
    if (r < 0)
        return r;
    for (unsigned mp = 0; mp <= MARKER_VOLUME_MP_MAX; mp++) {
        bool taken = config_has(config, "mp", mp) || config_has(config, "unused", mp);

        for (size_t i = 0; !taken && i < n; i++)
            taken = lines[i].mp == mp;
        if (!taken) {
            *ret_mp = mp;
            return 0;
        }
    }
    return -ENOSPC;
}

int volume_held(struct json_object *config, struct marker_volume *ret)
{
    _cleanup_free_ struct marker_volume *lines = NULL;
    struct json_object *d = NULL;
    size_t n = 0;
    int r;

    if (config && json_object_object_get_ex(config, "description", &d) &&
        !json_object_is_type(d, json_type_string))
        return -EBADMSG;
    r = marker_volumes_parse(d ? json_object_get_string(d) : NULL, &lines, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++)
        if (volume_config_has_mp(config, lines[i].mp)) {
            *ret = lines[i];
            return 1;
        }
    return 0;
}

struct found {
    struct volume_place *p;
    size_t n, cap;
};

static struct volume_place *find(struct found *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->p[i].v.name, name) == 0)
            return &f->p[i];
    return NULL;
}

/* One line of container ct: a new volume, or a second line of one already seen. */
static int add_line(struct found *f, const struct volume_ct *ct, const struct marker_volume *v)
{
    bool here = volume_config_has_mp(ct->config, v->mp);
    struct volume_place *p = find(f, v->name);

    if (p) {
        if (p->stale_vmid != 0)
            return 0; /* a third line: the first two decide */
        if (here && p->missing) {
            /* the volume is here: the earlier line is the stale one */
            p->stale_vmid = p->vmid;
            p->v = *v;
            p->vmid = ct->vmid;
            p->missing = false;
        } else
            p->stale_vmid = ct->vmid;
        return 0;
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        struct volume_place *q = reallocarray(f->p, cap, sizeof *q);

        if (!q)
            return -ENOMEM;
        f->p = q;
        f->cap = cap;
    }
    f->p[f->n++] = (struct volume_place){.v = *v, .vmid = ct->vmid, .missing = !here};
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct volume_place *)a)->v.name,
                  ((const struct volume_place *)b)->v.name);
}

int volume_locate(const struct volume_ct *cts, size_t n, struct volume_place **ret, size_t *ret_n,
                  uint32_t *ret_bad_vmid)
{
    struct found f = {};
    uint32_t bad = 0;
    int r = 0;

    if (!ret || !ret_n || !ret_bad_vmid || (n > 0 && !cts))
        return -EINVAL;
    for (size_t i = 0; i < n && r >= 0; i++) {
        _cleanup_free_ struct marker_volume *lines = NULL;
        size_t k = 0;

        if (marker_volumes_parse(cts[i].description, &lines, &k) < 0) {
            if (bad == 0)
                bad = cts[i].vmid;
            continue;
        }
        for (size_t j = 0; j < k && r >= 0; j++)
            r = add_line(&f, &cts[i], &lines[j]);
    }
    if (r < 0) {
        free(f.p);
        return r;
    }
    if (f.n > 0)
        qsort(f.p, f.n, sizeof *f.p, by_name);
    *ret = f.p;
    *ret_n = f.n;
    *ret_bad_vmid = bad;
    return 0;
}
