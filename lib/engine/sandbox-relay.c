/* SSH-relayed endpoints owned by a sandbox. See sandbox-relay.h. */
#include "sandbox-relay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <syslog.h>

#include "audit.h"
#include "list.h"
#include "log.h"
#include "sshforward.h"

struct relay_conn {
    struct relay_conn *next, *prev;
    struct relay_ep *ep;
    struct sshfwd *f;
};

int relay_random_hex(char *buf, size_t n_hex)
{
    uint8_t b[32];

    if (n_hex / 2 > sizeof b || getrandom(b, n_hex / 2, 0) != (ssize_t)(n_hex / 2))
        return -EIO;
    for (size_t i = 0; i < n_hex / 2; i++)
        snprintf(buf + 2 * i, 3, "%02x", b[i]);
    return 0;
}

static const char *state_name(enum relay_state state)
{
    return state == RELAY_OPEN ? "open" : "closing";
}

static void relay_set_state(struct relay_ep *ep, enum relay_state state)
{
    if (ep->state == state)
        return;
    log_debug(ep->ops->comp, "%s: %s: %s -> %s (%u connections)", ep->sandbox_id, ep->id,
              state_name(ep->state), state_name(state), ep->n_conns);
    ep->state = state;
}

static void maybe_free(struct relay_ep *ep)
{
    struct engine *e = ep->e;
    bool counted = ep->counted;

    if (ep->state != RELAY_CLOSING || ep->pending > 0 || ep->n_conns > 0)
        return;
    LIST_REMOVE(e->relays, ep);
    ep->ops->free(ep);
    if (counted)
        engine_handle_closed(e);
}

void relay_ep_hold(struct relay_ep *ep)
{
    ep->pending++;
}

void relay_ep_release(struct relay_ep *ep)
{
    ep->pending--;
    maybe_free(ep);
}

static void on_pool_closed(void *userdata)
{
    relay_ep_release(userdata);
}

void relay_ep_audit(const struct relay_ep *ep, const struct sandbox *sb, const char *event,
                    const char *reason)
{
    struct audit_record rec = {
        .event = event,
        .priority = LOG_INFO,
        .sandbox = ep->sandbox_id,
        .vmid = sb ? sb->vmid : 0,
        .node = sb ? sb->node : NULL,
        .caller_uid = ep->uid,
        .owner_uid = sb ? (int64_t)sb->owner_uid : AUDIT_NO_UID,
        .reason = reason,
    };
    char text[256];

    ep->ops->describe(ep, text, sizeof text);
    audit_emit(&rec, "%s: %s", text, reason);
}

void relay_ep_close(struct relay_ep *ep, const char *reason)
{
    if (ep->state == RELAY_CLOSING)
        return;
    if (reason)
        relay_ep_audit(ep, ep->sb, ep->ops->closed_event, reason);
    relay_set_state(ep, RELAY_CLOSING);
    ep->sb = NULL;
    ep->ops->close(ep);
    for (struct relay_conn *c = ep->conns; c; c = c->next)
        sshfwd_close(c->f); /* each ends from the loop: on_conn_done */
    if (ep->pool) {
        relay_ep_hold(ep);
        sshpool_close(TAKE_PTR(ep->pool), on_pool_closed, ep);
    }
    maybe_free(ep);
}

/* sandbox.c's hook: sb leaves READY for good (sb), or the engine closes (NULL). */
static void relays_stop(struct engine *e, const struct sandbox *sb)
{
    struct relay_ep *ep, *next;

    for (ep = e->relays; ep; ep = next) {
        next = ep->next;
        if (!sb && !ep->counted) {
            ep->counted = true;
            e->close_pending++;
        }
        if (!sb || ep->sb == sb)
            relay_ep_close(ep, sb ? "sandbox_gone" : "shutdown");
    }
}

int relay_ep_init(struct relay_ep *ep, const struct relay_ops *ops, struct sandbox *sb, uid_t uid,
                  unsigned port, const char *prefix, unsigned max_channels)
{
    struct engine *e = sb->engine;
    struct sshs_config sc;
    int r;

    ep->ops = ops;
    ep->e = e;
    ep->sb = sb;
    ep->uid = uid;
    ep->port = (uint16_t)port;
    memcpy(ep->id, prefix, 3);
    snprintf(ep->sandbox_id, sizeof ep->sandbox_id, "%s", sb->id);
    r = relay_random_hex(ep->id + 3, RELAY_ID_LEN - 3);
    if (r < 0)
        return r;
    sandbox_ssh_config(sb, &sc);
    sc.observe = NULL; /* not the sandbox's own sessions */
    sc.channels_per_session = max_channels;
    return sshpool_new(e->loop, &sc, 1, &ep->pool);
}

void relay_ep_discard(struct relay_ep *ep)
{
    if (ep->pool)
        sshpool_close(TAKE_PTR(ep->pool), NULL, NULL);
}

void relay_ep_link(struct relay_ep *ep)
{
    struct engine *e = ep->e;

    if (!e->relays) {
        e->relays = ep;
    } else {
        struct relay_ep *t = e->relays;
        while (t->next)
            t = t->next;
        t->next = ep;
        ep->prev = t;
    }
    e->relays_stop = relays_stop;
}

struct relay_ep *relay_ep_next(struct engine *e, const struct relay_ops *ops,
                               const struct sandbox *sb, struct relay_ep *after)
{
    for (struct relay_ep *ep = after ? after->next : e->relays; ep; ep = ep->next)
        if (ep->ops == ops && ep->state == RELAY_OPEN && (!sb || ep->sb == sb))
            return ep;
    return NULL;
}

static unsigned count_open(struct engine *e, const struct relay_ops *ops, const struct sandbox *sb,
                           uid_t uid, bool by_uid)
{
    unsigned n = 0;

    for (struct relay_ep *ep = relay_ep_next(e, ops, NULL, NULL); ep;
         ep = relay_ep_next(e, ops, NULL, ep))
        if (by_uid ? ep->uid == uid : ep->sb == sb)
            n++;
    return n;
}

int relay_ep_admit(struct sandbox *sb, const struct relay_ops *ops, uid_t uid,
                   unsigned max_per_sandbox, unsigned max_per_uid, struct engine_error *ret_err)
{
    if (sb->state != SANDBOX_READY || !sb->ip)
        return engine_refuse_not_ready(ret_err, sb->state);
    if (count_open(sb->engine, ops, sb, uid, false) >= max_per_sandbox)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT, ops->quota_sandbox, NULL);
    if (count_open(sb->engine, ops, sb, uid, true) >= max_per_uid)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT, ops->quota_uid, NULL);
    return 0;
}

int relay_ep_close_id(struct sandbox *sb, const struct relay_ops *ops, const char *id,
                      const char *reason)
{
    for (struct relay_ep *ep = relay_ep_next(sb->engine, ops, sb, NULL); ep;
         ep = relay_ep_next(sb->engine, ops, sb, ep))
        if (strcmp(ep->id, id) == 0) {
            relay_ep_close(ep, reason);
            return 0;
        }
    return -ENOENT;
}

/* ---- connections ---- */

static void on_conn_done(struct sshfwd *f, int error, void *userdata)
{
    struct relay_conn *c = userdata;
    struct relay_ep *ep = c->ep;
    uint64_t in, out;

    sshfwd_counts(f, &in, &out);
    ep->bytes_in += in;
    ep->bytes_out += out;
    log_debug(ep->ops->comp, "%s: %s: connection ended (%s), %llu bytes in, %llu out",
              ep->sandbox_id, ep->id, error ? strerror(-error) : "done", (unsigned long long)in,
              (unsigned long long)out);
    LIST_REMOVE(ep->conns, c);
    ep->n_conns--;
    free(c);
    maybe_free(ep);
}

struct relay_conn *relay_conn_new(struct relay_ep *ep)
{
    struct relay_conn *c = calloc(1, sizeof *c);

    if (c)
        c->ep = ep;
    return c;
}

/* c's relay began (r >= 0): counted with its endpoint's; or it did not: c is freed. */
static int conn_started(struct relay_conn *c, int r)
{
    if (r < 0) {
        free(c);
        return r;
    }
    LIST_PREPEND(c->ep->conns, c);
    c->ep->n_conns++;
    c->ep->accepted++;
    return 0;
}

int relay_conn_accept(struct relay_conn *c, uv_stream_t *server, bool tcp, size_t buffer_bytes,
                      uv_stream_t **ret_client)
{
    int r = conn_started(c, sshfwd_accept(c->ep->pool, server, tcp, c->ep->port, buffer_bytes,
                                          on_conn_done, c, &c->f));

    if (r >= 0)
        *ret_client = sshfwd_client(c->f);
    return r;
}

int relay_conn_open_fd(struct relay_conn *c, int fd, bool tcp, size_t buffer_bytes,
                       const char *head, size_t head_len)
{
    return conn_started(c, sshfwd_open_fd(c->ep->pool, fd, tcp, c->ep->port, buffer_bytes, head,
                                          head_len, on_conn_done, c, &c->f));
}

void relay_conn_close(struct relay_conn *c)
{
    sshfwd_close(c->f);
}
