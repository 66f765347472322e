/* Preview URLs. See sandbox-preview.h. */
#include "sandbox-preview.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "log.h"
#include "preview-internal.h"
#include "sshforward.h"

#define COMP "preview"
#define PREVIEW_KEY_MIN 16

enum preview_state {
    PREVIEW_OPEN,
    PREVIEW_CLOSING, /* timer, connections and session closing; freed once all are */
};

struct pv_conn {
    struct pv_conn *next, *prev;
    struct sandbox_preview *p;
    struct sshfwd *f;
};

struct sandbox_preview {
    struct sandbox_preview *next, *prev; /* in the engine's list, oldest first */
    struct engine *e;
    struct sandbox *sb; /* NULL once closing */
    enum preview_state state;
    char id[PREVIEW_ID_LEN + 1];
    char sandbox_id[ID_MAX + 1];
    char mac[PREVIEW_MAC_HEX + 1];
    char *url;
    uid_t uid;
    uint16_t port;
    uint64_t expires_at;
    uv_timer_t timer;
    struct sshpool *pool;
    struct pv_conn *conns;
    unsigned n_conns;
    uint64_t accepted;
    unsigned pending; /* timer + pool still closing */
    bool counted;     /* holds one of the closing engine's pending handles */
};

static void preview_set_state(struct sandbox_preview *p, enum preview_state state)
{
    if (p->state == state)
        return;
    log_debug(COMP, "%s: %s: %s -> %s (%u connections)", p->sandbox_id, p->id,
              p->state == PREVIEW_OPEN ? "open" : "closing",
              state == PREVIEW_OPEN ? "open" : "closing", p->n_conns);
    p->state = state;
}

static void preview_maybe_free(struct sandbox_preview *p)
{
    struct engine *e = p->e;

    if (p->state != PREVIEW_CLOSING || p->pending > 0 || p->n_conns > 0)
        return;
    if (p->prev)
        p->prev->next = p->next;
    else
        e->previews = p->next;
    if (p->next)
        p->next->prev = p->prev;
    free(p->url);
    if (p->counted)
        engine_handle_closed(e);
    free(p);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct sandbox_preview *p = h->data;

    p->pending--;
    preview_maybe_free(p);
}

static void on_pool_closed(void *userdata)
{
    struct sandbox_preview *p = userdata;

    p->pending--;
    preview_maybe_free(p);
}

static void preview_audit(const struct sandbox_preview *p, const struct sandbox *sb,
                          const char *event, const char *reason)
{
    struct audit_record rec = {
        .event = event,
        .priority = LOG_INFO,
        .sandbox = p->sandbox_id,
        .vmid = sb ? sb->vmid : 0,
        .node = sb ? sb->node : NULL,
        .caller_uid = p->uid,
        .owner_uid = sb ? (int64_t)sb->owner_uid : AUDIT_NO_UID,
        .reason = reason,
    };

    /* never the URL: its token is the access */
    audit_emit(&rec, "preview %s of sandbox %s port %u for uid %u: %s", p->id, p->sandbox_id,
               p->port, (unsigned)p->uid, reason);
}

static void preview_close(struct sandbox_preview *p, const char *reason)
{
    if (p->state == PREVIEW_CLOSING)
        return;
    if (reason)
        preview_audit(p, p->sb, "sandbox.preview_closed", reason);
    preview_set_state(p, PREVIEW_CLOSING);
    p->sb = NULL;
    p->pending++;
    uv_close((uv_handle_t *)&p->timer, on_timer_closed);
    for (struct pv_conn *c = p->conns; c; c = c->next)
        sshfwd_close(c->f); /* each ends from the loop: on_conn_done */
    if (p->pool) {
        p->pending++;
        sshpool_close(TAKE_PTR(p->pool), on_pool_closed, p);
    }
    preview_maybe_free(p);
}

/* sandbox.c's hook: sb leaves READY for good (sb), or the engine closes (NULL). */
static void previews_stop(struct engine *e, const struct sandbox *sb)
{
    struct sandbox_preview *p, *next;

    for (p = e->previews; p; p = next) {
        next = p->next;
        if (!sb && !p->counted) {
            p->counted = true;
            e->close_pending++;
        }
        if (!sb || p->sb == sb)
            preview_close(p, sb ? "sandbox_gone" : "shutdown");
    }
}

static void on_expired(uv_timer_t *t)
{
    preview_close(t->data, "expired");
}

/* ---- tokens ---- */

static int preview_sign(struct engine *e, const char *pid, const char *sandbox_id, unsigned port,
                        uint64_t expires_at, char ret[PREVIEW_MAC_HEX + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    char msg[256];
    int n;

    n = snprintf(msg, sizeof msg, "sandboxd-preview-1\n%s\n%s\n%u\n%llu", pid, sandbox_id, port,
                 (unsigned long long)expires_at);
    if (n < 0 || (size_t)n >= sizeof msg || e->preview_key_len == 0)
        return -EINVAL;
    if (!HMAC(EVP_sha256(), e->preview_key, (int)e->preview_key_len, (const unsigned char *)msg,
              (size_t)n, md, &md_len) ||
        md_len * 2 != PREVIEW_MAC_HEX)
        return -EIO;
    for (unsigned i = 0; i < md_len; i++)
        snprintf(ret + 2 * i, 3, "%02x", md[i]);
    return 0;
}

struct sandbox_preview *preview_find(struct engine *e, const char *sandbox_id, unsigned port,
                                     const char *token)
{
    char pid[PREVIEW_ID_LEN + 1], mac[PREVIEW_MAC_HEX + 1], want[PREVIEW_MAC_HEX + 1];
    uint64_t expires;

    if (!token || preview_token_parse(token, pid, &expires, mac) < 0)
        return NULL;
    if (preview_sign(e, pid, sandbox_id, port, expires, want) < 0 ||
        CRYPTO_memcmp(mac, want, PREVIEW_MAC_HEX) != 0)
        return NULL;
    if (expires <= (uint64_t)time(NULL))
        return NULL;
    for (struct sandbox_preview *p = e->previews; p; p = p->next)
        if (p->state == PREVIEW_OPEN && strcmp(p->id, pid) == 0 &&
            strcmp(p->sandbox_id, sandbox_id) == 0 && p->port == port && p->expires_at == expires)
            return p;
    return NULL;
}

uint64_t preview_remaining_s(const struct sandbox_preview *p)
{
    uint64_t now = (uint64_t)time(NULL);

    return p->expires_at > now ? p->expires_at - now : 1;
}

/* ---- connections ---- */

static void on_conn_done(struct sshfwd *f, int error, void *userdata)
{
    struct pv_conn *c = userdata;
    struct sandbox_preview *p = c->p;

    log_debug(COMP, "%s: %s: connection ended (%s)", p->sandbox_id, p->id,
              error ? strerror(-error) : "done");
    if (c->prev)
        c->prev->next = c->next;
    else
        p->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    p->n_conns--;
    free(c);
    preview_maybe_free(p);
}

int preview_relay(struct sandbox_preview *p, int fd, bool tcp, const char *head, size_t head_len)
{
    const struct config *cfg = p->e->cfg;
    struct pv_conn *c;
    int r;

    if (p->state != PREVIEW_OPEN || p->n_conns >= cfg->preview.max_connections) {
        close(fd);
        return -EBUSY;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    c->p = p;
    r = sshfwd_open_fd(p->pool, fd, tcp, p->port,
                       MAX((size_t)cfg->forward.buffer_bytes, PREVIEW_HEAD_MAX), head, head_len,
                       on_conn_done, c, &c->f);
    if (r < 0) {
        free(c);
        return r;
    }
    c->next = p->conns;
    if (p->conns)
        p->conns->prev = c;
    p->conns = c;
    p->n_conns++;
    p->accepted++;
    return 0;
}

/* ---- the engine's side ---- */

static int random_hex(char *buf, size_t n_hex)
{
    uint8_t b[32];

    if (n_hex / 2 > sizeof b || getrandom(b, n_hex / 2, 0) != (ssize_t)(n_hex / 2))
        return -EIO;
    for (size_t i = 0; i < n_hex / 2; i++)
        snprintf(buf + 2 * i, 3, "%02x", b[i]);
    return 0;
}

static unsigned count_open(struct engine *e, const struct sandbox *sb, uid_t uid, bool by_uid)
{
    unsigned n = 0;

    for (struct sandbox_preview *p = e->previews; p; p = p->next)
        if (p->state == PREVIEW_OPEN && (by_uid ? p->uid == uid : p->sb == sb))
            n++;
    return n;
}

static void info_of(const struct sandbox_preview *p, struct sandbox_preview_info *ret)
{
    *ret = (struct sandbox_preview_info){
        .id = p->id,
        .port = p->port,
        .url = p->url,
        .expires_at = p->expires_at,
        .uid = p->uid,
        .connections = p->n_conns,
        .accepted = p->accepted,
    };
}

static void preview_link(struct engine *e, struct sandbox_preview *p)
{
    if (!e->previews) {
        e->previews = p;
    } else {
        struct sandbox_preview *t = e->previews;
        while (t->next)
            t = t->next;
        t->next = p;
        p->prev = t;
    }
    e->previews_stop = previews_stop;
}

/* The token and URL of a new preview, its session (connected at the first connection). */
static int preview_new(struct sandbox *sb, uid_t uid, unsigned port, uint64_t ttl_s,
                       struct sandbox_preview **ret)
{
    struct engine *e = sb->engine;
    char token[PREVIEW_TOKEN_MAX + 1];
    struct sshs_config sc;
    struct sandbox_preview *p = calloc(1, sizeof *p);
    int r;

    if (!p)
        return -ENOMEM;
    p->e = e;
    p->sb = sb;
    p->uid = uid;
    p->port = (uint16_t)port;
    p->expires_at = (uint64_t)time(NULL) + ttl_s;
    memcpy(p->id, "pv-", 3);
    snprintf(p->sandbox_id, sizeof p->sandbox_id, "%s", sb->id);
    r = random_hex(p->id + 3, PREVIEW_ID_LEN - 3);
    if (r >= 0)
        r = preview_sign(e, p->id, p->sandbox_id, port, p->expires_at, p->mac);
    if (r >= 0) {
        snprintf(token, sizeof token, "%s.%llu.%s", p->id, (unsigned long long)p->expires_at,
                 p->mac);
        r = preview_url(e->cfg->preview.base_url, port, p->sandbox_id, token, &p->url);
    }
    if (r >= 0) {
        sandbox_ssh_config(sb, &sc);
        sc.observe = NULL; /* not the sandbox's own sessions */
        sc.channels_per_session = e->cfg->preview.max_connections;
        r = sshpool_new(e->loop, &sc, 1, &p->pool);
    }
    if (r >= 0)
        r = uv_timer_init(e->loop, &p->timer);
    if (r < 0) {
        if (p->pool)
            sshpool_close(TAKE_PTR(p->pool), NULL, NULL);
        free(p->url);
        free(p);
        return r;
    }
    p->timer.data = p;
    (void)uv_timer_start(&p->timer, on_expired, ttl_s * 1000, 0);
    preview_link(e, p);
    *ret = p;
    return 0;
}

int sandbox_preview_open(struct sandbox *sb, uid_t uid, unsigned port, int64_t ttl_s,
                         struct sandbox_preview_info *ret, struct engine_error *ret_err)
{
    struct engine *e = sb->engine;
    const struct config_preview *cp = &e->cfg->preview;
    struct sandbox_preview *p;
    int r;

    if (!e->preview_srv_stop || e->preview_key_len == 0)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -ENOTSUP,
                             "preview URLs are off ([preview] listen is not set)", NULL);
    if (port < 1 || port > 65535)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, "must be in 1..65535", "port");
    if (ttl_s == 0)
        ttl_s = cp->default_ttl_s;
    r = engine_refuse_ttl(ret_err, ttl_s, cp->max_ttl_s, "must be in 1..max_ttl_s seconds",
                          "[preview] max_ttl_s");
    if (r < 0)
        return r;
    if (sb->state != SANDBOX_READY || !sb->ip)
        return engine_refuse_not_ready(ret_err, sb->state);
    if (count_open(e, sb, uid, false) >= cp->max_per_sandbox)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                             "too many previews open on this sandbox ([preview] max_per_sandbox)",
                             NULL);
    if (count_open(e, sb, uid, true) >= cp->max_per_uid)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                             "too many previews open by this user ([preview] max_per_uid)", NULL);
    r = preview_new(sb, uid, port, (uint64_t)ttl_s, &p);
    if (r < 0)
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot make the preview", NULL);
    preview_audit(p, sb, "sandbox.preview_opened", "caller");
    info_of(p, ret);
    return 0;
}

int sandbox_preview_close(struct sandbox *sb, const char *pid)
{
    for (struct sandbox_preview *p = sb->engine->previews; p; p = p->next)
        if (p->state == PREVIEW_OPEN && p->sb == sb && strcmp(p->id, pid) == 0) {
            preview_close(p, "caller");
            return 0;
        }
    return -ENOENT;
}

void sandbox_preview_list(struct sandbox *sb,
                          void (*each)(const struct sandbox_preview_info *info, void *userdata),
                          void *userdata)
{
    for (struct sandbox_preview *p = sb->engine->previews; p; p = p->next)
        if (p->state == PREVIEW_OPEN && p->sb == sb) {
            struct sandbox_preview_info info;

            info_of(p, &info);
            each(&info, userdata);
        }
}

/* The key file: made with 32 random bytes (64 hex digits) when missing. */
static int key_make(const char *path)
{
    char hex[65];
    int fd, r;

    r = random_hex(hex, 64);
    if (r < 0)
        return r;
    hex[64] = '\n';
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    r = write(fd, hex, sizeof hex) == (ssize_t)sizeof hex ? 0 : -EIO;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r < 0)
        (void)unlink(path);
    explicit_bzero(hex, sizeof hex);
    return r;
}

int preview_key_load(struct engine *e, char **ret_error)
{
    const struct config *cfg = e->cfg;
    _cleanup_free_ char *path = NULL;
    ssize_t n = 0;
    int fd, r = 0;

    if (cfg->preview.secret_file)
        path = strdup(cfg->preview.secret_file);
    else if (asprintf(&path, "%s/preview.key", cfg->server.state_dir) < 0)
        path = NULL;
    if (!path)
        return -ENOMEM;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT && !cfg->preview.secret_file) {
        r = key_make(path);
        if (r >= 0)
            fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    if (fd >= 0) {
        n = read(fd, e->preview_key, sizeof e->preview_key);
        r = n < 0 ? -errno : 0;
        close(fd);
    } else if (r >= 0) {
        r = -errno;
    }
    while (n > 0 && (e->preview_key[n - 1] == '\n' || e->preview_key[n - 1] == '\r'))
        n--;
    if (r >= 0 && n < PREVIEW_KEY_MIN)
        r = -EINVAL;
    if (r < 0) {
        explicit_bzero(e->preview_key, sizeof e->preview_key);
        if (asprintf(ret_error, "[preview] secret_file %s: %s (at least %d bytes)", path,
                     strerror(-r), PREVIEW_KEY_MIN) < 0)
            *ret_error = NULL;
        return r;
    }
    e->preview_key_len = (size_t)n;
    return 0;
}
