/* Port forwards of READY sandboxes (sandbox.forward, docs/protocol.md): a listener on the
 * host whose connections are relayed to 127.0.0.1:PORT inside the sandbox through SSH
 * direct-tcpip channels (lib/ssh/sshforward.h).
 *
 * Each forward has an SSH session of its own, apart from the sandbox's exec pool: a
 * forward's traffic (up to max_connections channels, each with its window of data) then
 * never delays or takes the channel slots of commands, and one stalled forward stalls only
 * itself. The session is connected at the first connection.
 *
 * The listener is either a Unix socket in a folder of its own under [forward] socket_dir
 * (<socket_dir>/<32 random hex>/<port>.sock, folder 0700 and socket 0600, both owned by the
 * caller's uid when the daemon may chown; otherwise folder 0711 and socket 0666, so only
 * those who know the random name reach it) or a loopback TCP port, which any local user can
 * reach. Either way a Unix peer whose uid is neither the forward's nor root is closed at
 * once (SO_PEERCRED).
 *
 * Forwards end with sandbox_forward_close(), when their sandbox leaves READY for good
 * (destroy, expiry, failure) and when the engine closes; their socket files and folders are
 * removed then. engine_forward_cleanup() removes what a crashed daemon left. Loop thread
 * only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox.h"

#define SANDBOX_FORWARD_ID_LEN 19 /* "fw-" + 16 hex */
#define SANDBOX_FORWARD_LISTEN_MAX 64

struct sandbox_forward_info {
    const char *id;
    uint16_t port;       /* in the sandbox */
    const char *socket;  /* the Unix socket's path, or NULL */
    const char *address; /* "127.0.0.1:N", or NULL */
    uid_t uid;           /* who asked for it */
    unsigned connections;
    uint64_t accepted;
    uint64_t bytes_in, bytes_out; /* to the sandbox, from it (connections ended so far) */
};

/* Opens a forward to port (1..65535) of sb for uid/gid. listen NULL: a Unix socket;
 * "127.0.0.1:N" (N 0 for any free port, else 1024..65535): that loopback TCP port; any
 * other address is ENGINE_E_INVALID (param "listen"). ENGINE_E_STATE unless READY,
 * ENGINE_E_QUOTA past [forward] max_per_sandbox or max_per_uid, ENGINE_E_BUSY when the
 * TCP port is in use, ENGINE_E_INTERNAL for the rest. *ret's strings stay valid until the
 * forward is closed. */
int sandbox_forward_open(struct sandbox *sb, uid_t uid, gid_t gid, unsigned port,
                         const char *listen, struct sandbox_forward_info *ret,
                         struct engine_error *ret_err);
/* Closes sb's forward fid: -ENOENT when sb has none by that id. */
int sandbox_forward_close(struct sandbox *sb, const char *fid);
/* Calls each for every open forward of sb, oldest first. */
void sandbox_forward_list(struct sandbox *sb,
                          void (*each)(const struct sandbox_forward_info *info, void *userdata),
                          void *userdata);
/* Removes the folders (<32 hex>) a previous run left in cfg's socket_dir; at start, before
 * the first forward. Returns how many were removed, or a negative errno. */
int engine_forward_cleanup(struct engine *e);
