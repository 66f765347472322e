/* Test hooks, served only when SANDBOXD_TEST_HOOKS=1 (their rows are flagged
 * METHOD_TEST_HOOK in the method table): test.sleep {"ms": N} holds a request in flight
 * for N ms; test.notify {"count": N} sends N "test.event" notifications before its reply;
 * test.clock_step {"seconds": N} steps the engine's wall clock (admin only). Loop thread
 * only. */
#pragma once

#include "methods.h"

void method_test_sleep(struct req *r, void *params, void *userdata);
void method_test_notify(struct req *r, void *params, void *userdata);
void method_test_clock_step(struct req *r, void *params, void *userdata);
