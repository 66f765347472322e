/* SSH-relayed endpoints owned by a sandbox: what port forwards (sandbox-forward.c) and
 * preview URLs (sandbox-preview.c), its two front ends, share. An endpoint relays the
 * connections its front end hands it to 127.0.0.1:PORT inside its sandbox through SSH
 * direct-tcpip channels (lib/ssh/sshforward.h), on an SSH session of its own apart from
 * the sandbox's exec pool (connected at the first connection): its traffic never delays or
 * takes the channel slots of commands, and one stalled endpoint stalls only itself.
 *
 * The front end embeds a struct relay_ep and fills its struct relay_ops. An endpoint is
 * RELAY_OPEN until relay_ep_close() (by its front end, or when its sandbox leaves READY
 * for good, or when the engine closes); RELAY_CLOSING then: the front end's own handles
 * (ops->close), the connections and the session close, and once all have, the endpoint
 * leaves the engine's list and ops->free frees it. Every endpoint of every kind is in one
 * list of the engine, oldest first. Loop thread only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "sandbox-internal.h"

#define RELAY_ID_LEN 19 /* a front end's 3-character prefix ("fw-", "pv-") + 16 hex */

enum relay_state {
    RELAY_OPEN,
    RELAY_CLOSING, /* the front end's handles, connections and session closing */
};

struct relay_ep;
struct relay_conn;

/* What a front end adds to the endpoints of its kind. */
struct relay_ops {
    const char *comp;                      /* log component */
    const char *closed_event;              /* audit event of a close with a reason */
    const char *quota_sandbox, *quota_uid; /* refusals past max_per_sandbox, max_per_uid */
    /* Closes the front end's own handles (a listener, a timer): each with relay_ep_hold()
     * before its uv_close() and relay_ep_release() in its close callback. */
    void (*close)(struct relay_ep *ep);
    /* Frees what holds ep (ep included), once nothing of it is still closing. */
    void (*free)(struct relay_ep *ep);
    /* The text of its audit records before ": reason" (never a secret: no socket path, no
     * URL). */
    void (*describe)(const struct relay_ep *ep, char *buf, size_t size);
};

struct relay_ep {
    struct relay_ep *next, *prev; /* in the engine's list, oldest first */
    const struct relay_ops *ops;
    struct engine *e;
    struct sandbox *sb; /* NULL once closing */
    enum relay_state state;
    char id[RELAY_ID_LEN + 1];
    char sandbox_id[ID_MAX + 1];
    uid_t uid;
    uint16_t port;
    struct sshpool *pool;
    struct relay_conn *conns;
    unsigned n_conns;
    uint64_t accepted, bytes_in, bytes_out; /* bytes of the connections ended so far */
    unsigned pending;                       /* front end's handles + session still closing */
    bool counted;                           /* holds one of the closing engine's pending handles */
};

/* n_hex (even, at most 64) random lowercase hex digits into buf (which takes n_hex + 1):
 * 0 or -EIO. */
int relay_random_hex(char *buf, size_t n_hex);

/* Sets up ep (zeroed by the caller) for uid and port of sb: its id (prefix, 3 characters,
 * then 16 random hex) and its session of at most max_channels channels. Not linked yet: on
 * a later failure relay_ep_discard() undoes this. */
int relay_ep_init(struct relay_ep *ep, const struct relay_ops *ops, struct sandbox *sb, uid_t uid,
                  unsigned port, const char *prefix, unsigned max_channels);
/* Closes the session of an endpoint set up but never linked. */
void relay_ep_discard(struct relay_ep *ep);
/* Appends ep to the engine's list: open from now on, closed like any other. */
void relay_ep_link(struct relay_ep *ep);

/* Closes ep (no-op when closing already); reason NULL: no audit record. */
void relay_ep_close(struct relay_ep *ep, const char *reason);
/* One more of ep's handles closing; and one less (ep may be freed then). */
void relay_ep_hold(struct relay_ep *ep);
void relay_ep_release(struct relay_ep *ep);

/* The audit record event of ep (sb: its sandbox, NULL once gone). */
void relay_ep_audit(const struct relay_ep *ep, const struct sandbox *sb, const char *event,
                    const char *reason);

/* The open endpoint of ops' kind after after (NULL: the first), of sb (NULL: of any
 * sandbox), or NULL. */
struct relay_ep *relay_ep_next(struct engine *e, const struct relay_ops *ops,
                               const struct sandbox *sb, struct relay_ep *after);
/* 0 when uid may open one more endpoint of ops' kind on sb; else ENGINE_E_STATE unless sb
 * is READY, ENGINE_E_QUOTA (ops' messages) with max_per_sandbox open on sb or max_per_uid
 * open by uid. */
int relay_ep_admit(struct sandbox *sb, const struct relay_ops *ops, uid_t uid,
                   unsigned max_per_sandbox, unsigned max_per_uid, struct engine_error *ret_err);
/* Closes sb's open endpoint of ops' kind by id with reason: 0, or -ENOENT. */
int relay_ep_close_id(struct sandbox *sb, const struct relay_ops *ops, const char *id,
                      const char *reason);

/* A new connection of ep (NULL when out of memory), to be handed to one of the two below,
 * which take it in every case. */
struct relay_conn *relay_conn_new(struct relay_ep *ep);
/* Accepts server's pending connection into c (sshfwd_accept()); on success the accepted
 * stream is in *ret_client (valid until the connection ends). */
int relay_conn_accept(struct relay_conn *c, uv_stream_t *server, bool tcp, size_t buffer_bytes,
                      uv_stream_t **ret_client);
/* Relays the connected socket fd, head_len bytes of which were read already, in c
 * (sshfwd_open_fd(): fd is taken in every case). */
int relay_conn_open_fd(struct relay_conn *c, int fd, bool tcp, size_t buffer_bytes,
                       const char *head, size_t head_len);
/* Ends the connection (its end is reported from the loop). */
void relay_conn_close(struct relay_conn *c);
