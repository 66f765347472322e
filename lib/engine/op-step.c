/* The one driver of the engine's operations (see op-step.h). It calls the state setter, the
 * clock and the probe below it; each operation reaches it with its table and its hooks, so
 * nothing here names an operation. */
#include "macro.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "log.h"
#include "op-step.h"
#include "pve.h"
#include "sandbox-internal.h"
#include "testhook.h"

#define COMP "sandbox"

static void step_next(struct sandbox *sb);

static const struct op_step *step_row(const struct sandbox *sb)
{
    const struct op_run *run = &sb->run;

    assert(run->kind && run->step < run->kind->n_steps);
    return &run->kind->steps[run->step];
}

/* Ends the running operation with err (NULL: it succeeded); its hook may start another. */
static void op_end(struct sandbox *sb, const struct engine_error *err)
{
    const struct op_kind *kind = sb->run.kind;

    assert(sb->run.running);
    sb->run.running = false;
    if (err)
        kind->fail(sb, err);
    else
        kind->done(sb);
}

void op_step_extend(struct sandbox *sb, uint64_t ms)
{
    struct op_run *run = &sb->run;

    if (run->step_deadline_ms == UINT64_MAX)
        return;
    run->step_deadline_ms = run->deadline_ms - run->step_deadline_ms > ms
                                ? run->step_deadline_ms + ms
                                : run->deadline_ms;
}

uint64_t op_step_left(struct sandbox *sb)
{
    uint64_t now = now_ms(sb->engine);

    return now >= sb->run.step_deadline_ms ? 0 : sb->run.step_deadline_ms - now;
}

struct engine_error op_step_deadline_error(const struct sandbox *sb, char *buf, size_t size)
{
    snprintf(buf, size, "%s deadline (%" PRIu64 "s) passed while %s", sb->run.kind->name,
             sb->run.budget_ms / 1000, step_row(sb)->what);
    return (struct engine_error){.kind = ENGINE_E_DEADLINE, .error = -ETIMEDOUT, .message = buf};
}

static void op_deadline(struct sandbox *sb)
{
    char buf[256];
    struct engine_error err = op_step_deadline_error(sb, buf, sizeof buf);

    op_end(sb, &err);
}

bool op_step_check_abort(struct sandbox *sb)
{
    const struct op_kind *kind = sb->run.kind;
    struct engine_error err = {.error = -ECANCELED};

    if (!kind)
        return false;
    if (sb->engine->closing) {
        err.kind = ENGINE_E_SHUTDOWN;
        err.message = "the daemon is shutting down";
    } else if (sb->destroy_requested && kind->destroyed) {
        err.kind = ENGINE_E_STATE;
        err.message = kind->destroyed;
    } else
        return false;
    /* Also while a create waits to be placed again (its fail hook placed it): it fails. */
    sb->run.running = false;
    kind->fail(sb, &err);
    return true;
}

/* Issues the running step's work (again, for a poll or a retry). */
static void step_issue(struct sandbox *sb)
{
    const struct op_step *s = step_row(sb);
    const char *fail = s->fail;
    uint64_t t = op_step_left(sb);
    int r;

    assert(s->start); /* a row without one is issued by op_step_begin()'s caller */
    if (t == 0) {
        op_deadline(sb);
        return;
    }
    r = s->start(sb, t, &fail);
    /* From here on sb may be gone when the work completed at once: s is static. */
    if (r >= 0) {
        if (s->crash_sent)
            test_crash_point(s->crash_sent);
        return;
    }
    if (!s->fail) { /* optional: the next row runs */
        log_debug_errno(r, COMP, "%s: %s: %s could not start, going on: %m", sb->id,
                        sb->run.kind->name, s->what);
        sb->run.step++;
        step_next(sb);
        return;
    }
    struct engine_error err = {
        .kind = s->fail_kind ? s->fail_kind : ENGINE_E_INTERNAL, .error = r, .message = fail};
    op_end(sb, &err);
}

/* The deadline of row s entered at now. */
static uint64_t step_deadline(const struct op_run *run, const struct op_step *s, uint64_t now)
{
    if (s->cap_ms == OP_STEP_UNBOUNDED)
        return UINT64_MAX;
    if (now < run->deadline_ms && s->cap_ms < run->deadline_ms - now)
        return now + s->cap_ms;
    return run->deadline_ms;
}

/* Enters the row sb->run.step (or the first one after it that has something to do); past the
 * last one, the operation succeeded. */
static void step_next(struct sandbox *sb)
{
    const struct op_kind *kind = sb->run.kind;

    for (; sb->run.step < kind->n_steps; sb->run.step++) {
        const struct op_step *s = &kind->steps[sb->run.step];
        uint64_t now;

        if (kind->set_state)
            sandbox_set_state(sb, s->state);
        if (s->skip && s->skip(sb))
            continue;
        sb->run.attempts = 0; /* a step's polls and retries start afresh */
        sb->run.poll_ms = 0;
        now = now_ms(sb->engine);
        sb->run.step_started_ms = now;
        sb->run.step_deadline_ms = step_deadline(&sb->run, s, now);
        log_debug(COMP, "%s: %s: %s", sb->id, kind->name, s->what);
        step_issue(sb);
        return;
    }
    op_end(sb, NULL);
}

static void op_init(struct sandbox *sb, const struct op_kind *kind, uint64_t deadline_ms,
                    uint64_t budget_ms)
{
    assert(kind->n_steps > 0 && kind->fail && kind->done);
    sb->run = (struct op_run){
        .kind = kind, .running = true, .deadline_ms = deadline_ms, .budget_ms = budget_ms};
}

void op_step_run(struct sandbox *sb, const struct op_kind *kind, uint64_t timeout_ms)
{
    uint64_t now = now_ms(sb->engine);

    op_init(sb, kind, timeout_ms == OP_NO_DEADLINE ? OP_NO_DEADLINE : now + timeout_ms,
            timeout_ms == OP_NO_DEADLINE ? 0 : timeout_ms);
    step_next(sb);
}

void op_step_begin(struct sandbox *sb, const struct op_kind *kind, uint64_t deadline_ms,
                   uint64_t budget_ms)
{
    const struct op_step *s = &kind->steps[0];
    uint64_t now = now_ms(sb->engine);

    assert(!s->start && (!s->skip || !s->skip(sb)));
    op_init(sb, kind, deadline_ms, budget_ms);
    if (kind->set_state)
        sandbox_set_state(sb, s->state);
    sb->run.step_started_ms = now;
    sb->run.step_deadline_ms = step_deadline(&sb->run, s, now);
}

void op_step_enter(struct sandbox *sb, const struct op_kind *kind, uint64_t deadline_ms,
                   uint64_t budget_ms, op_step_start_fn start)
{
    unsigned i;

    for (i = 0; i < kind->n_steps; i++)
        if (kind->steps[i].start == start)
            break;
    assert(i < kind->n_steps);
    op_init(sb, kind, deadline_ms, budget_ms);
    sb->run.step = i;
    step_next(sb);
}

/* The running step succeeded: false when the operation was aborted meanwhile (it ended). */
static bool step_succeeded(struct sandbox *sb)
{
    const struct op_step *s = step_row(sb);

    assert(sb->run.running);
    if (op_step_check_abort(sb))
        return false;
    if (s->crash_done)
        test_crash_point(s->crash_done);
    /* The step's duration, for the create latency figures (tests/bench). */
    log_debug(COMP, "%s: %s step '%s' done in %" PRIu64 " ms", sb->id, sb->run.kind->name, s->what,
              now_ms(sb->engine) - sb->run.step_started_ms);
    return true;
}

void op_step_done(struct sandbox *sb, const struct engine_error *err)
{
    if (err) {
        assert(sb->run.running);
        if (!op_step_check_abort(sb))
            op_end(sb, err);
        return;
    }
    if (!step_succeeded(sb))
        return;
    sb->run.step++;
    step_next(sb);
}

void op_step_finish(struct sandbox *sb)
{
    if (step_succeeded(sb))
        op_end(sb, NULL);
}

void op_step_pve_done(struct sandbox *sb, const struct pve_result *res)
{
    struct engine *e = sb->engine;
    struct engine_error err;

    if (res->error >= 0) {
        op_step_done(sb, NULL);
        return;
    }
    /* A transport failure: let daemon.status find out now, not at the next probe. */
    if (res->error != -EREMOTEIO && res->error != -ECANCELED && !e->closing)
        probe_schedule(e, 0);
    error_from_pve(res, e->closing, &err);
    op_step_done(sb, &err);
}

void op_step_pve(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    op_step_pve_done(sb, res);
}

static void on_step_timer(uv_timer_t *t)
{
    struct sandbox *sb = t->data;

    if (op_step_check_abort(sb))
        return;
    step_issue(sb);
}

void op_step_again(struct sandbox *sb, uint64_t delay_ms)
{
    uint64_t left;

    assert(sb->run.running);
    if (op_step_check_abort(sb))
        return;
    left = op_step_left(sb);
    if (left == 0) {
        op_deadline(sb);
        return;
    }
    uv_timer_start(&sb->timer, on_step_timer, MIN(delay_ms, left), 0);
}
