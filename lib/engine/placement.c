/* See placement.h. */
#include "placement.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MEM_WEIGHT 0.8
#define CPU_WEIGHT 0.2
#define SCORE_EPSILON 1e-9

static double score(const struct placement_node *nd, uint64_t need_mem)
{
    double used = (double)nd->state.mem_other + (double)nd->own_mem + (double)need_mem;
    double mem_free = nd->state.maxmem ? 1.0 - used / (double)nd->state.maxmem : 0.0;
    double cpu_free = 1.0 - (nd->state.cpu < 0 ? 0 : nd->state.cpu > 1 ? 1 : nd->state.cpu);

    return MEM_WEIGHT * mem_free + CPU_WEIGHT * cpu_free;
}

/* True when a beats b (b the best so far). Scores closer than one sandbox of need_mem on the
 * smaller node are a tie: the report lags and may miss a sandbox that just started (or show
 * one the daemon counts already), so such differences are noise, and the node with fewer of
 * the daemon's sandboxes wins. */
static bool better(const struct placement_node *a, const struct placement_node *b, bool by_score,
                   uint64_t need_mem)
{
    if (by_score) {
        double sa = score(a, need_mem), sb = score(b, need_mem);
        uint64_t small = a->state.maxmem < b->state.maxmem ? a->state.maxmem : b->state.maxmem;
        double tie = small ? MEM_WEIGHT * (double)need_mem / (double)small : 0.0;

        tie += SCORE_EPSILON;
        if (sa > sb + tie)
            return true;
        if (sb > sa + tie)
            return false;
    }
    return a->live < b->live;
}

int placement_pick(const struct placement_node *nodes, size_t n, unsigned max_per_node,
                   uint64_t need_mem, size_t *ret_index, enum placement_refusal *ret_why)
{
    bool any_template = false, any_up = false, by_score = true;
    const struct placement_node *best = NULL;
    size_t best_i = 0;

    for (size_t i = 0; i < n; i++) {
        const struct placement_node *nd = &nodes[i];

        if (!nd->has_template)
            continue;
        any_template = true;
        if (!nd->state.online || nd->state.failed)
            continue;
        any_up = true;
        if (max_per_node > 0 && nd->live >= max_per_node)
            continue;
        if (!nd->state.known)
            by_score = false;
    }
    for (size_t i = 0; i < n; i++) {
        const struct placement_node *nd = &nodes[i];

        if (!nd->has_template || !nd->state.online || nd->state.failed ||
            (max_per_node > 0 && nd->live >= max_per_node))
            continue;
        if (!best || better(nd, best, by_score, need_mem)) {
            best = nd;
            best_i = i;
        }
    }
    if (best) {
        *ret_index = best_i;
        return 0;
    }
    if (!any_template) {
        *ret_why = PLACEMENT_NO_TEMPLATE;
        return -ENOENT;
    }
    *ret_why = any_up ? PLACEMENT_ALL_FULL : PLACEMENT_ALL_DOWN;
    return any_up ? -ENOSPC : -EHOSTDOWN;
}

static bool get_u64(json_object *o, const char *key, uint64_t *ret)
{
    json_object *v;

    if (!json_object_object_get_ex(o, key, &v) ||
        !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
        return false;
    if (json_object_get_double(v) < 0)
        return false;
    *ret = json_object_is_type(v, json_type_int) ? (uint64_t)json_object_get_int64(v)
                                                 : (uint64_t)json_object_get_double(v);
    return true;
}

int placement_report_parse(json_object *data, struct placement_report *ret, size_t max)
{
    size_t n = 0, len;

    if (!data || !json_object_is_type(data, json_type_array))
        return -EBADMSG;
    len = json_object_array_length(data);
    for (size_t i = 0; i < len && n < max; i++) {
        json_object *o = json_object_array_get_idx(data, i), *v;
        struct placement_report *r = &ret[n];
        const char *s;

        if (!json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, "type", &v) ||
            !json_object_is_type(v, json_type_string) ||
            strcmp(json_object_get_string(v), "node") != 0 ||
            !json_object_object_get_ex(o, "node", &v) || !json_object_is_type(v, json_type_string))
            continue;
        s = json_object_get_string(v);
        if (!*s || strlen(s) >= sizeof r->name)
            continue;
        *r = (struct placement_report){};
        snprintf(r->name, sizeof r->name, "%s", s);
        r->online = json_object_object_get_ex(o, "status", &v) &&
                    json_object_is_type(v, json_type_string) &&
                    strcmp(json_object_get_string(v), "online") == 0;
        r->sized = get_u64(o, "maxmem", &r->maxmem) && r->maxmem > 0;
        if (!get_u64(o, "mem", &r->mem))
            r->mem = 0;
        if (json_object_object_get_ex(o, "cpu", &v) &&
            (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int))) {
            double c = json_object_get_double(v);

            r->cpu = c < 0 ? 0 : c > 1 ? 1 : c;
        }
        n++;
    }
    return (int)n;
}
