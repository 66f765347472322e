/* Preview URLs of READY sandboxes (sandbox.preview, docs/protocol.md "Preview URLs"): an
 * URL of [preview] base_url naming a port of the sandbox and carrying a signed, expiring
 * token; the daemon's HTTP listener ([preview] listen, preview-listen.c) checks the Host
 * and the token of a connection's first request and relays the connection to
 * 127.0.0.1:PORT inside the sandbox through SSH direct-tcpip channels
 * (lib/ssh/sshforward.h), on an SSH session of the preview's own, as forwards do.
 *
 * The token is HMAC-SHA256, under the key of [preview] secret_file (made at start when
 * missing), of the preview's id, sandbox, port and expiry; the preview must also still be
 * open: previews end at their expiry, with sandbox_preview_close(), when their sandbox
 * leaves READY for good and when the daemon stops (they are not kept across restarts).
 * Their relayed connections end with them. Loop thread only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "preview-http.h"
#include "sandbox.h"

struct sandbox_preview_info {
    const char *id;
    uint16_t port;       /* in the sandbox */
    const char *url;     /* with the token */
    uint64_t expires_at; /* Unix seconds */
    uid_t uid;           /* who asked for it */
    unsigned connections;
    uint64_t accepted;
};

/* Starts the preview listener and loads (or makes) the signing key: at start, after
 * engine_new(). 0 without doing anything when [preview] listen is unset; a negative errno
 * with *ret_error (free()) otherwise. */
int engine_preview_start(struct engine *e, char **ret_error);

/* Opens a preview of port (1..65535) of sb for uid, for ttl_s seconds (0: [preview]
 * default_ttl_s; else 1..max_ttl_s). ENGINE_E_INVALID when previews are off or ttl_s is
 * out of bounds, ENGINE_E_STATE unless READY, ENGINE_E_QUOTA past max_per_sandbox or
 * max_per_uid. *ret's strings stay valid until the preview is closed. */
int sandbox_preview_open(struct sandbox *sb, uid_t uid, unsigned port, int64_t ttl_s,
                         struct sandbox_preview_info *ret, struct engine_error *ret_err);
/* Closes sb's preview pid (its token stops working, its connections end): -ENOENT when sb
 * has none by that id. */
int sandbox_preview_close(struct sandbox *sb, const char *pid);
/* Calls each for every open preview of sb, oldest first. */
void sandbox_preview_list(struct sandbox *sb,
                          void (*each)(const struct sandbox_preview_info *info, void *userdata),
                          void *userdata);
