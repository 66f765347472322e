/* Test hooks, registered only when SANDBOXD_TEST_HOOKS=1: test.sleep {"ms": N}
 * holds a request in flight for N ms; test.notify {"count": N} sends N
 * "test.event" notifications before its reply. Loop thread only. */
#pragma once

#include "methods.h"

/* 0 or a negative errno (methods_register()). */
int methods_test_register(void);
void methods_test_unregister(void);
