/* Observability methods: daemon.metrics (admin only) and daemon.subscribe, the request
 * observer that feeds the request metrics and audits refusals by a limit, and the test
 * hook test.events. Loop thread only. */
#pragma once

#include <stdbool.h>

struct engine;
struct server;

/* Registers the table (test.events too when test_hooks) and the request observer. s gives
 * the connection count. 0 or a negative errno. */
int methods_obs_register(struct server *s, bool test_hooks);
void methods_obs_unregister(void);
/* The engine whose sandboxes daemon.metrics counts (NULL: none). */
void methods_obs_set_engine(struct engine *e);
