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
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "preview-internal.h"
#include "sandbox-relay.h"

#define COMP "preview"
#define PREVIEW_KEY_MIN 16

_Static_assert(PREVIEW_ID_LEN == RELAY_ID_LEN, "a preview's id is a relay endpoint's");

struct sandbox_preview {
    struct relay_ep ep;
    char mac[PREVIEW_MAC_HEX + 1];
    char *url;
    uint64_t expires_at;
    uv_timer_t timer;
};

static struct sandbox_preview *preview_of(const struct relay_ep *ep)
{
    return container_of(ep, struct sandbox_preview, ep);
}

static void preview_free(struct relay_ep *ep)
{
    struct sandbox_preview *p = preview_of(ep);

    free(p->url);
    free(p);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct sandbox_preview *p = h->data;

    relay_ep_release(&p->ep);
}

/* The audit records' text (never the URL: its token is the access). */
static void preview_describe(const struct relay_ep *ep, char *buf, size_t size)
{
    snprintf(buf, size, "preview %s of sandbox %s port %u for uid %u", ep->id, ep->sandbox_id,
             ep->port, (unsigned)ep->uid);
}

/* The relay endpoint's closing: the expiry timer. */
static void preview_close_handles(struct relay_ep *ep)
{
    struct sandbox_preview *p = preview_of(ep);

    relay_ep_hold(ep);
    uv_close((uv_handle_t *)&p->timer, on_timer_closed);
}

static const struct relay_ops preview_ops = {
    .comp = COMP,
    .closed_event = "sandbox.preview_closed",
    .quota_sandbox = "too many previews open on this sandbox ([preview] max_per_sandbox)",
    .quota_uid = "too many previews open by this user ([preview] max_per_uid)",
    .close = preview_close_handles,
    .free = preview_free,
    .describe = preview_describe,
};

static void on_expired(uv_timer_t *t)
{
    struct sandbox_preview *p = t->data;

    relay_ep_close(&p->ep, "expired");
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
    for (struct relay_ep *ep = relay_ep_next(e, &preview_ops, NULL, NULL); ep;
         ep = relay_ep_next(e, &preview_ops, NULL, ep)) {
        struct sandbox_preview *p = preview_of(ep);

        if (strcmp(ep->id, pid) == 0 && strcmp(ep->sandbox_id, sandbox_id) == 0 &&
            ep->port == port && p->expires_at == expires)
            return p;
    }
    return NULL;
}

uint64_t preview_remaining_s(const struct sandbox_preview *p)
{
    uint64_t now = (uint64_t)time(NULL);

    return p->expires_at > now ? p->expires_at - now : 1;
}

/* ---- connections ---- */

int preview_relay(struct sandbox_preview *p, int fd, bool tcp, const char *head, size_t head_len)
{
    const struct config *cfg = p->ep.e->cfg;
    struct relay_conn *c;

    if (p->ep.state != RELAY_OPEN || p->ep.n_conns >= cfg->preview.max_connections) {
        close(fd);
        return -EBUSY;
    }
    c = relay_conn_new(&p->ep);
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    return relay_conn_open_fd(c, fd, tcp, MAX((size_t)cfg->forward.buffer_bytes, PREVIEW_HEAD_MAX),
                              head, head_len);
}

/* ---- the engine's side ---- */

static void info_of(const struct sandbox_preview *p, struct sandbox_preview_info *ret)
{
    *ret = (struct sandbox_preview_info){
        .id = p->ep.id,
        .port = p->ep.port,
        .url = p->url,
        .expires_at = p->expires_at,
        .uid = p->ep.uid,
        .connections = p->ep.n_conns,
        .accepted = p->ep.accepted,
    };
}

/* The token and URL of a new preview, its session (connected at the first connection). */
static int preview_new(struct sandbox *sb, uid_t uid, unsigned port, uint64_t ttl_s,
                       struct sandbox_preview **ret)
{
    struct engine *e = sb->engine;
    char token[PREVIEW_TOKEN_MAX + 1];
    struct sandbox_preview *p = calloc(1, sizeof *p);
    int r;

    if (!p)
        return -ENOMEM;
    p->expires_at = (uint64_t)time(NULL) + ttl_s;
    r = relay_ep_init(&p->ep, &preview_ops, sb, uid, port, "pv-", e->cfg->preview.max_connections);
    if (r >= 0)
        r = preview_sign(e, p->ep.id, p->ep.sandbox_id, port, p->expires_at, p->mac);
    if (r >= 0) {
        snprintf(token, sizeof token, "%s.%llu.%s", p->ep.id, (unsigned long long)p->expires_at,
                 p->mac);
        r = preview_url(e->cfg->preview.base_url, port, p->ep.sandbox_id, token, &p->url);
    }
    if (r >= 0)
        r = uv_timer_init(e->loop, &p->timer);
    if (r < 0) {
        relay_ep_discard(&p->ep);
        free(p->url);
        free(p);
        return r;
    }
    p->timer.data = p;
    (void)uv_timer_start(&p->timer, on_expired, ttl_s * 1000, 0);
    relay_ep_link(&p->ep);
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
    r = relay_ep_admit(sb, &preview_ops, uid, cp->max_per_sandbox, cp->max_per_uid, ret_err);
    if (r < 0)
        return r;
    r = preview_new(sb, uid, port, (uint64_t)ttl_s, &p);
    if (r < 0)
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot make the preview", NULL);
    relay_ep_audit(&p->ep, sb, "sandbox.preview_opened", "caller");
    info_of(p, ret);
    return 0;
}

int sandbox_preview_close(struct sandbox *sb, const char *pid)
{
    return relay_ep_close_id(sb, &preview_ops, pid, "caller");
}

void sandbox_preview_list(struct sandbox *sb,
                          void (*each)(const struct sandbox_preview_info *info, void *userdata),
                          void *userdata)
{
    for (struct relay_ep *ep = relay_ep_next(sb->engine, &preview_ops, sb, NULL); ep;
         ep = relay_ep_next(sb->engine, &preview_ops, sb, ep)) {
        struct sandbox_preview_info info;

        info_of(preview_of(ep), &info);
        each(&info, userdata);
    }
}

/* The key file: made with 32 random bytes (64 hex digits) when missing. */
static int key_make(const char *path)
{
    char hex[65];
    int fd, r;

    r = relay_random_hex(hex, 64);
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
