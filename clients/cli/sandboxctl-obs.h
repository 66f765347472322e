/* sandboxctl metrics and sandboxctl events (sandboxctl(1)). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>

#include "sandboxd-client.h"

/* Prints daemon.metrics' result in the Prometheus text exposition format (version 0.0.4).
 * Returns 0, or -EBADMSG when the result does not have the documented shape. */
int ctl_metrics_print(json_object *result, FILE *out);
/* Subscribes on client's connection and prints every event until the subscription ends:
 * one line per event, or the event's JSON with json. Returns the exit status. */
int ctl_events_run(struct sandboxd_client *client, bool json);
