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

static bool resumable(const struct registry_record *r, time_t now)
{
    return r && (r->state == REG_CLONING || r->state == REG_CONFIGURING) && r->idempotency_key &&
           r->vmid > 0 && r->node && r->upid && r->expires_at > now && !r->volumes;
}

/* A sandbox for record r, in the table, its create running from the clone wait. */
static int resume_one(struct engine *e, const struct registry_record *r)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;
    struct sandbox *sb;
    struct sb_op *op;
    int k;

    k = sandbox_from_record(e, r, SANDBOX_PENDING, &sb);
    if (k < 0)
        return k;
    if (!r->cores)
        sb->cores = cs->default_cores;
    if (!r->memory_mb)
        sb->memory_mb = cs->default_memory_mb;
    if (!r->disk_gb)
        sb->disk_gb = cs->default_disk_gb;
    sb->resumed = sb->clone_issued = true; /* its deadline counts from now (started_ms) */
    sb->upid = strdup(r->upid);
    op = create_op_new();
    if (!sb->upid || !op) {
        free(op);
        sandbox_discard(sb);
        return -ENOMEM;
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

size_t engine_resume_creates(struct engine *e, struct registry_record **recs, size_t n)
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
        recs[i] = registry_record_free(recs[i]);
        resumed++;
    }
    return resumed;
}
