/* The one driver of the engine's operations on a sandbox (create, destroy, resize, the hand-over
 * of a warm pool member): an operation is a table of steps (struct op_step) run in order on
 * one sandbox, with the same rules for every operation:
 *
 *  - A step's start issues its work (a Proxmox call, an SSH exec, a registry save) given the
 *    time left to it; the work completes through op_step_done() (or op_step_pve(),
 *    op_step_pve_done(), op_step_finish()), once. A start may also complete synchronously.
 *  - Deadlines: the operation has one (op_step_run()), and each step its own cap under it.
 *    A step that polls or retries asks for op_step_again() and keeps its deadline. Once the
 *    running step's deadline passed, the operation fails with "<name> deadline (Ns) passed
 *    while <what>" (ENGINE_E_DEADLINE).
 *  - Aborts: every completion, and every poll or retry, first checks that the engine is not
 *    closing (the operation fails with ENGINE_E_SHUTDOWN), and for an operation that yields
 *    to a destroy (op_kind.destroyed), that no destroy was asked for (ENGINE_E_STATE).
 *  - Failures: a start that fails ends the operation with the row's failure text, unless the
 *    row is optional (no .fail: the next row runs); a completion with an error ends it with
 *    that error. Either way the operation's fail hook runs, once.
 *  - Test crash points (testhook.h): a row's crash_sent fires once its work was issued,
 *    crash_done once it succeeded.
 *
 * The sandbox runs one operation at a time (struct op_run in struct sandbox): a create's
 * cleanup destroy starts from the create's fail hook, after the create's steps ended. A new
 * operation is a table of rows, its step functions and its two outcome hooks. Engine code
 * only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox.h"

struct sandbox;
struct pve_result;

/* Issues the step's work, given at most timeout_ms; it completes through op_step_done() and
 * its kin. Returns 0 or a negative errno; *ret_fail may name the failure more precisely than
 * the row's text. */
typedef int (*op_step_start_fn)(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);

#define OP_STEP_UNBOUNDED 0u           /* cap_ms: the step has no deadline at all */
#define OP_STEP_OP_DEADLINE UINT64_MAX /* cap_ms: the operation's deadline only */
#define OP_NO_DEADLINE UINT64_MAX      /* op_step_run(): the operation has no deadline */

/* One row of an operation's table (the first five fields in order, the rest by name). */
struct op_step {
    /* The sandbox's state while the step runs (only when the operation's set_state). */
    enum sandbox_state state;
    /* The step's deadline under the operation's: OP_STEP_UNBOUNDED, OP_STEP_OP_DEADLINE or
     * a duration in ms. */
    uint64_t cap_ms;
    const char *what; /* for the log and "... deadline passed while <what>" */
    /* NULL: issued by whoever began the operation (op_step_begin()). */
    op_step_start_fn start;
    /* When start fails: the failure's text; NULL: the step is optional, the next one runs. */
    const char *fail;
    enum engine_err_kind fail_kind; /* ... of kind (0: ENGINE_E_INTERNAL) */
    /* True when the step has nothing to do (the next one runs). NULL: never. */
    bool (*skip)(const struct sandbox *sb);
    const char *crash_sent; /* test crash point once the work was issued */
    const char *crash_done; /* test crash point once the step succeeded */
};

/* An operation: its table and its outcome. */
struct op_kind {
    const char *name; /* "create": for the log and the deadline's message */
    const struct op_step *steps;
    size_t n_steps;
    bool set_state; /* each row sets the sandbox's state (sandbox_set_state()) */
    /* A destroy asked for meanwhile (sb->destroy_requested) ends the operation with this
     * failure text (ENGINE_E_STATE); NULL: the destroy waits for the operation to end. */
    const char *destroyed;
    /* The operation ended: failed (err, with borrowed strings), or past its last row. Each
     * runs once per run; the sandbox's operation is over when they are called (a hook may
     * start another one). */
    void (*fail)(struct sandbox *sb, const struct engine_error *err);
    void (*done)(struct sandbox *sb);
};

/* The running operation of a sandbox (in struct sandbox). */
struct op_run {
    const struct op_kind *kind; /* the last operation started (NULL: none yet) */
    bool running;               /* its steps run (false once it ended) */
    unsigned step;              /* its running row */
    uint64_t deadline_ms;       /* its deadline (uv_now scale; OP_NO_DEADLINE: none) */
    uint64_t budget_ms;         /* the time it was given (for the deadline's message) */
    uint64_t step_deadline_ms;  /* the running row's deadline (uv_now scale) */
    uint64_t step_started_ms;   /* when the running row began (uv_now scale) */
    /* Per row, zero when it begins: its retries so far, and its next poll interval. */
    unsigned attempts;
    uint64_t poll_ms;
};

/* Runs kind on sb from its first row, under a deadline timeout_ms from now
 * (OP_NO_DEADLINE: none). */
void op_step_run(struct sandbox *sb, const struct op_kind *kind, uint64_t timeout_ms);
/* Begins kind on sb at its first row, whose work (start NULL) the caller issues itself and
 * reports with op_step_done(), under deadline_ms (uv_now scale) given budget_ms in all. */
void op_step_begin(struct sandbox *sb, const struct op_kind *kind, uint64_t deadline_ms,
                   uint64_t budget_ms);
/* Runs kind on sb from the row whose start is start (or the first one after it that has
 * something to do), under deadline_ms (uv_now scale) given budget_ms in all. */
void op_step_enter(struct sandbox *sb, const struct op_kind *kind, uint64_t deadline_ms,
                   uint64_t budget_ms, op_step_start_fn start);

/* The running step completed: err NULL when it succeeded (the next row runs), else the
 * operation fails with err (strings borrowed for the call). */
void op_step_done(struct sandbox *sb, const struct engine_error *err);
/* The running step succeeded and reached the operation's goal: the rows after it do not
 * run (a destroy that finds the container gone). */
void op_step_finish(struct sandbox *sb);
/* The running step's Proxmox call completed (an error becomes the operation's failure; a
 * transport failure also has the /version probe run now). */
void op_step_pve_done(struct sandbox *sb, const struct pve_result *res);
/* op_step_pve_done() as a Proxmox callback for a call kept in sb->call (userdata sb). */
void op_step_pve(const struct pve_result *res, void *userdata);
/* The running step runs again (its start is called anew) after delay_ms on sb->timer, within
 * its deadline: a poll or a retry. */
void op_step_again(struct sandbox *sb, uint64_t delay_ms);
/* The running step's deadline moves ms later, within the operation's (a step that first waits
 * in a queue, e.g. a fork child's clone behind its siblings'). */
void op_step_extend(struct sandbox *sb, uint64_t ms);
/* Time left to the running step; 0 once its deadline passed. */
uint64_t op_step_left(struct sandbox *sb);
/* The error of the operation whose deadline passed during the running step (text in buf). */
struct engine_error op_step_deadline_error(const struct sandbox *sb, char *buf, size_t size);
/* Checks the last operation started for an abort (the engine closing, or a destroy asked for
 * when it yields to one); when there is one, the operation fails, and this returns true. */
bool op_step_check_abort(struct sandbox *sb);
