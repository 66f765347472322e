/* Params of sandbox.fork (docs/protocol.md). Pure, as params.h. */
#pragma once

#include <stdint.h>

#include "params-snapshot.h"

#define PARAMS_FORK_COUNT_MAX 32 /* children per sandbox.fork */

struct params_sandbox_fork {
    char id[PARAMS_ID_MAX + 1];
    int count;                                   /* 1..PARAMS_FORK_COUNT_MAX; 1 when absent */
    char snapshot[PARAMS_SNAPSHOT_NAME_MAX + 1]; /* "": a snapshot taken for the fork */
    int64_t ttl_s;                               /* -1: the parent's remaining lease */
};

extern const struct params_spec params_sandbox_fork_spec;
