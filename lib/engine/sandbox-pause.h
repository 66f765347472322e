/* Pausing and resuming a sandbox (lib/engine/sandbox-pause.c): a pause stops the container
 * and keeps its disk (a container keeps no memory state: its processes end); a resume starts
 * it again, awaits its address and connects. Both are operations on the one driver
 * (op-step.h), written ahead:
 *
 *   pause:  registry PAUSED with the paused lease (crash point pause-recorded), the marker
 *           with paused=1 and that lease (pause-marked), shutdown then stop after
 *           ENGINE_PAUSE_SHUTDOWN_S (pause-sent, pause-stopped);
 *   resume: start and await the address (resume-started), connect, the marker without
 *           paused=1 and with a running lease of default_ttl_s (resume-marked), registry
 *           READY.
 *
 * A daemon killed at any of these points finds the registry (or, without its state folder,
 * the marker) saying paused, and finishes the pause (engine_pause_finish()): a pause is
 * finished, a resume rolled back. A paused sandbox's lease is [sandbox] max_paused_ttl_s
 * from the pause; it counts against max_paused_per_uid, not max_per_uid and max_total.
 * Loop thread only. */
#pragma once

#include "sandbox.h"

#define ENGINE_PAUSE_TIMEOUT_MS 300000u /* a pause or a resume, all steps */
#define ENGINE_PAUSE_SHUTDOWN_S 10u     /* a clean shutdown's time before the stop */
#define ENGINE_RESUME_WAITERS_MAX 64u   /* calls joining one running resume */

/* Pauses a READY sandbox; cb gets it PAUSED. A paused one (no resume running) is answered
 * at once (cb runs before this returns). Refused synchronously (ret_err): not READY
 * (ENGINE_E_STATE), another operation running (ENGINE_E_BUSY), max_paused_per_uid reached
 * (ENGINE_E_QUOTA). */
int engine_pause(struct engine *e, struct sandbox *sb, engine_sandbox_cb cb, void *userdata,
                 struct engine_error *ret_err);
/* Resumes a PAUSED sandbox; cb gets it READY (same address and host key, unless DHCP handed
 * out another address). A READY one is answered at once; while a resume runs, cb joins it
 * (at most ENGINE_RESUME_WAITERS_MAX, then ENGINE_E_BUSY). Refused: max_per_uid or max_total
 * reached by running sandboxes (ENGINE_E_QUOTA), busy (ENGINE_E_BUSY). A resume that fails
 * leaves the sandbox paused (its container stopped again). */
int engine_resume(struct engine *e, struct sandbox *sb, engine_sandbox_cb cb, void *userdata,
                  struct engine_error *ret_err);
/* For reconcile: a re-attached PAUSED sandbox whose container may run or whose marker may
 * not say paused (a pause or resume the daemon's end interrupted): the marker is written
 * and the container stopped, nobody waiting. */
void engine_pause_finish(struct sandbox *sb);
/* sandbox.create's resume_on_use and auto_pause_s: refused (ENGINE_E_INVALID "auto_pause_s")
 * past max_paused_ttl_s; set on a new sandbox (or a warm pool member taken). */
int engine_pause_opts_check(struct engine *e, const struct sandbox_create_opts *opts,
                            struct engine_error *ret_err);
void sandbox_pause_opts_set(struct sandbox *sb, const struct sandbox_create_opts *opts);
/* Sandboxes that hold a running slot (not paused, or being resumed): of uid when uid is not
 * NULL (warm pool members excluded), else of everyone. */
unsigned engine_running(const struct engine *e, const uid_t *uid);
/* True when sb is paused and was created with resume_on_use: a call that needs its container
 * resumes it first (engine_resume()), then runs. */
bool engine_resume_on_use(const struct sandbox *sb);
/* For the lease tick (every second): a READY sandbox created with auto_pause_s, idle that
 * long (no request began, no engine work on it), has its background processes listed; when
 * none runs and it is still idle, it is paused (engine_pause(), nobody waiting). */
void engine_auto_pause_check(struct sandbox *sb);
/* A request on sb began: the idle time auto_pause_s counts from now. */
void engine_touch(struct sandbox *sb);
/* The pause's step that stops the container (sandbox.detach's too): its sessions closed
 * first, a clean shutdown, then a stop; a container found stopped already counts as done. */
int pause_stop_step_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);
