/* The reconcile's shared helpers. See reconcile-internal.h. */
#include "macro.h"

#include <stdint.h>
#include <stdlib.h>

#include "reconcile-internal.h"
#include "registry.h"

struct reconcile *reconcile_ref(struct reconcile *rc)
{
    rc->refs++;
    return rc;
}

void reconcile_cands_clear(struct reconcile *rc)
{
    for (size_t i = 0; i < rc->n_cands; i++) {
        free(rc->cands[i].node);
        free(rc->cands[i].lock);
        if (rc->cands[i].conf)
            json_object_put(rc->cands[i].conf);
    }
    free(rc->cands);
    rc->cands = NULL;
    rc->n_cands = rc->i_cand = 0;
}

void reconcile_records_clear(struct reconcile *rc)
{
    rc->recs = registry_records_free(rc->recs, rc->n_recs);
    rc->n_recs = 0;
    for (size_t i = 0; i < rc->n_suspects; i++)
        free(rc->suspects[i]);
    free(rc->suspects);
    rc->suspects = NULL;
    rc->n_suspects = 0;
}

void reconcile_unref(struct reconcile *rc)
{
    if (--rc->refs > 0)
        return;
    reconcile_cands_clear(rc);
    reconcile_records_clear(rc);
    pve_vm_list_free(rc->members);
    FREE_MANY(rc->locked, rc->stuck, rc->destroying, rc->last_error);
    free(rc);
}

struct sandbox *reconcile_find_sandbox(struct reconcile *rc, const char *id)
{
    return engine_lookup(rc->e, id, 0, true);
}

const char *reconcile_conf_str(json_object *conf, const char *key)
{
    json_object *v;

    if (conf && json_object_object_get_ex(conf, key, &v) &&
        json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return NULL;
}

unsigned reconcile_conf_uint(json_object *conf, const char *key, unsigned def)
{
    json_object *v;

    if (conf && json_object_object_get_ex(conf, key, &v)) {
        int64_t x = json_object_get_int64(v);
        if (x > 0 && x < UINT32_MAX)
            return (unsigned)x;
    }
    return def;
}

void reconcile_on_expired(const struct engine_error *err, void *userdata)
{
    struct reconcile *rc = userdata;

    if (!rc->closed && !err)
        rc->st.expired_destroyed++;
    reconcile_unref(rc);
}

bool reconcile_has_volume_lines(const char *description)
{
    _cleanup_free_ struct marker_volume *mv = NULL;
    size_t n = 0;

    return marker_volumes_parse(description, &mv, &n) < 0 || n > 0;
}
