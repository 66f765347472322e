/* Observability methods: daemon.metrics (admin only) and daemon.subscribe, the request
 * observer that feeds the request metrics and audits refusals by a limit, and the test
 * hook test.events. Their rows are in the method table (methods-table.c). Loop thread
 * only. */
#pragma once

#include "methods.h"
#include "req.h"

/* The daemon server's observer (struct server_params.observer). */
extern const struct req_observer methods_obs_observer;

void method_daemon_metrics(struct req *r, void *params, void *userdata);
void method_daemon_subscribe(struct req *r, void *params, void *userdata);
/* test.events {"count": N, "uid": U}: synthetic events (SANDBOXD_TEST_HOOKS=1). */
void method_test_events(struct req *r, void *params, void *userdata);
