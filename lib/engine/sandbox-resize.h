/* A live change of a READY sandbox (lib/engine/sandbox-resize.c): sandbox.resize, and the
 * hand-over of a warm pool member (lib/engine/pool.c). Engine code only. */
#pragma once

#include "sandbox-internal.h"

struct resize_op {
    int cores, memory_mb, disk_gb; /* -1: unchanged */
    int net_rate_mbps;             /* -1: unchanged; 0: no cap */
    char *net0;                    /* net0 with the new rate=, once read (owned) */
    char *hostname;                /* NULL: unchanged (owned) */
    char *description;             /* NULL: unchanged (owned): the marker */
    bool internet;                 /* add the internet group */
    bool take;                     /* a pool hand-over: READY is set (and saved) at the end;
                                      a failure destroys the sandbox */
    bool hostname_inside;          /* the hostname changed in the config: apply it inside */
    engine_sandbox_cb cb;
    void *userdata;
    unsigned step;
    struct pve_call *call;
};

/* Runs op on sb (sb->resize_op must be NULL); op is freed when cb has run. Returns 0. */
int resize_op_start(struct sandbox *sb, struct resize_op *op);
/* A pool hand-over (op->take): records the sandbox as CONFIGURING for its new owner, and
 * once that is durable runs op. Returns 0 (cb runs later, also on failure). */
int resize_op_take(struct sandbox *sb, struct resize_op *op);
