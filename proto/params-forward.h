/* Params of the port forward and preview methods (sandbox.forward, sandbox.forwards,
 * sandbox.unforward, sandbox.preview, sandbox.previews, sandbox.unpreview;
 * docs/protocol.md). Pure, as params.h. */
#pragma once

#include "params.h"

#define PARAMS_FORWARD_ID_LEN 19 /* "fw-" + 16 lowercase hex */
#define PARAMS_FORWARD_LISTEN_MAX 64

/* sandbox.forward */
struct params_sandbox_forward {
    char id[PARAMS_ID_MAX + 1];
    int64_t port;                               /* 1..65535 */
    char listen[PARAMS_FORWARD_LISTEN_MAX + 1]; /* "": a Unix socket */
};

/* sandbox.unforward */
struct params_sandbox_unforward {
    char id[PARAMS_ID_MAX + 1];
    char forward[PARAMS_FORWARD_ID_LEN + 1];
};

/* sandbox.preview */
struct params_sandbox_preview {
    char id[PARAMS_ID_MAX + 1];
    int64_t port;  /* 1..65535 */
    int64_t ttl_s; /* 0: [preview] default_ttl_s */
};

#define PARAMS_PREVIEW_ID_LEN 19 /* "pv-" + 16 lowercase hex */
#define PARAMS_PREVIEW_TTL_MAX 31536000

/* sandbox.unpreview */
struct params_sandbox_unpreview {
    char id[PARAMS_ID_MAX + 1];
    char preview[PARAMS_PREVIEW_ID_LEN + 1];
};

extern const struct params_spec params_sandbox_preview_spec;
extern const struct params_spec params_sandbox_unpreview_spec;
/* sandbox.previews takes params_sandbox_id_spec. */
extern const struct params_spec params_sandbox_forward_spec;
extern const struct params_spec params_sandbox_unforward_spec;
/* sandbox.forwards takes params_sandbox_id_spec. */
