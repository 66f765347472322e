/* Creates interrupted by a restart, finished after it. A keyed create whose clone task was
 * running (its vmid and UPID recorded) when the daemon died is put back in the table at
 * start, before the first reconcile decides about containers: it polls the recorded UPID
 * and, when the clone succeeded, runs the rest of the create as usual; when the clone
 * failed the create fails and cleans up (a rollback). A client retrying the key meanwhile
 * joins it (the daemon serves it through the resumed hook), so one key never makes two
 * containers. Any other interrupted create is rolled back by the reconcile as before. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostkey.h"
#include "log.h"
#include "marker.h"
#include "registry.h"
#include "sandbox-internal.h"

#define COMP "sandbox"

static void on_resumed(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct engine *e = userdata;

    if (err)
        log_debug(COMP, "%s: resumed create failed: %s", sb ? sb->id : "?", strna(err->message));
    if (e->hooks.resumed)
        e->hooks.resumed(err, sb, e->hooks.userdata);
}

static bool resumable(const struct reg_record *r, time_t now)
{
    return r && (r->state == REG_CLONING || r->state == REG_CONFIGURING) && r->idempotency_key &&
           r->vmid > 0 && r->node && r->upid && r->expires_at > now;
}

/* A sandbox for record r, in the table, its create running from the clone wait. */
static int resume_one(struct engine *e, const struct reg_record *r)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;
    struct sandbox *sb;
    struct sb_op *op;
    int k;

    for (sb = e->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->id, r->id) == 0)
            return -EEXIST;
    sb = calloc(1, sizeof *sb);
    op = create_op_new();
    if (!sb || !op) {
        free(sb);
        free(op);
        return -ENOMEM;
    }
    snprintf(sb->id, sizeof sb->id, "%s", r->id);
    sb->engine = e;
    sb->owner_uid = r->owner_uid;
    sb->vmid = (uint32_t)r->vmid;
    sb->node = strdup(r->node);
    sb->hostname = strdup(r->hostname ? r->hostname : r->id);
    sb->upid = strdup(r->upid);
    sb->internet = r->internet;
    sb->cores = r->cores ? r->cores : cs->default_cores;
    sb->memory_mb = r->memory_mb ? (unsigned)r->memory_mb : cs->default_memory_mb;
    sb->disk_gb = r->disk_gb ? (unsigned)r->disk_gb : cs->default_disk_gb;
    sb->created_at = r->created_at;
    sb->expires_at = r->expires_at;
    sb->resumed = sb->clone_issued = true;
    sb->started_ms = sb->step_started_ms = now_ms(e);
    sb->deadline_ms = sb->started_ms + (uint64_t)cs->create_timeout_s * 1000;
    k = labels_copy(r->labels, &sb->labels);
    sb->idempotency_key = strdup(r->idempotency_key);
    if (!sb->idempotency_key ||
        marker_key_hash(r->owner_uid, r->idempotency_key, sb->idem_hash) < 0)
        k = -ENOMEM;
    if (r->params_hash && hex_is_valid(r->params_hash, SHA256_HEX_SIZE - 1))
        memcpy(sb->params_hash, r->params_hash, SHA256_HEX_SIZE);
    uv_timer_init(e->loop, &sb->timer);
    sb->timer.data = sb;
    if (k < 0 || !sb->node || !sb->hostname || !sb->upid) {
        free(op);
        sandbox_set_state(sb, SANDBOX_GONE);
        sandbox_maybe_free(sb);
        return k < 0 ? k : -ENOMEM;
    }
    op->cb = on_resumed;
    op->userdata = e;
    sb->create_op = op;
    sandbox_link(sb);
    log_debug(COMP, "%s: resuming the create interrupted while cloning %u (task %s)", sb->id,
              sb->vmid, sb->upid);
    create_resume(sb);
    return 0;
}

size_t engine_resume_creates(struct engine *e, struct reg_record **recs, size_t n)
{
    time_t now = now_realtime();
    size_t resumed = 0;

    if (e->closing || !e->configured)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int k;

        if (!resumable(recs[i], now))
            continue;
        k = resume_one(e, recs[i]);
        if (k < 0) {
            log_debug(COMP, "%s: cannot resume the create: %s", recs[i]->id, strerror(-k));
            continue;
        }
        recs[i] = reg_record_free(recs[i]);
        resumed++;
    }
    return resumed;
}
