/* Crash points for the recovery tests: a named place in the create and destroy paths where
 * a test can kill the daemon. Does nothing unless the test environment asks for it. */
#pragma once

/* When SANDBOXD_TEST_HOOKS=1 and SANDBOXD_TEST_CRASH_AT=<point>[:<ms>] names this point, the
 * process kills itself with SIGKILL (after <ms> milliseconds, from another thread, when
 * given). Points: create-before-intent, create-intent-durable, create-clone-sent,
 * create-clone-task-recorded (the clone task's UPID durable, the clone running),
 * create-cloned, create-starting, create-connecting, create-rekeyed (the sandbox's own host
 * key made, not yet recorded), create-before-ready, create-ready-durable, create-replied,
 * destroy-stop-sent, destroy-deleted; a volume going back to the holder before a delete:
 * volume-take-back-line (the holder's line written), volume-take-back-moved,
 * destroy-volume-back, reconcile-volume-back. */
void test_crash_point(const char *name);
