/* Port forwards. See sandbox-forward.h. */
#include "sandbox-forward.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "audit.h"
#include "log.h"
#include "sandbox-internal.h"
#include "sshforward.h"

#define COMP "forward"
#define FORWARD_BACKLOG 128
#define FORWARD_DIR_HEX 32

enum forward_state {
    FORWARD_OPEN,
    FORWARD_CLOSING, /* listener, connections and session closing; freed once all are */
};

struct conn {
    struct conn *next, *prev;
    struct sandbox_fwd *fw;
    struct sshfwd *f;
};

struct sandbox_fwd {
    struct sandbox_fwd *next, *prev; /* in the engine's list */
    struct engine *e;
    struct sandbox *sb; /* NULL once closing */
    enum forward_state state;
    char id[SANDBOX_FORWARD_ID_LEN + 1];
    char sandbox_id[ID_MAX + 1];
    uid_t uid;
    uint16_t port;
    bool tcp;
    union {
        uv_stream_t stream;
        uv_pipe_t pipe;
        uv_tcp_t tcp;
    } listener;
    bool listener_open;
    char *dir, *path; /* the Unix socket's folder and path */
    char address[32];
    struct sshpool *pool;
    struct conn *conns;
    unsigned n_conns;
    uint64_t accepted, bytes_in, bytes_out;
    unsigned pending; /* listener + pool + connections still closing */
    bool counted;     /* holds one of the closing engine's pending handles */
};

/* Every forward of every sandbox, in the order opened, closing ones included. */
static struct sandbox_fwd **forwards_of(struct engine *e)
{
    return &e->forwards;
}

static void forward_set_state(struct sandbox_fwd *fw, enum forward_state state)
{
    if (fw->state == state)
        return;
    log_debug(COMP, "%s: %s: %s -> %s (%u connections)", fw->sandbox_id, fw->id,
              fw->state == FORWARD_OPEN ? "open" : "closing",
              state == FORWARD_OPEN ? "open" : "closing", fw->n_conns);
    fw->state = state;
}

static void forward_maybe_free(struct sandbox_fwd *fw)
{
    struct engine *e = fw->e;

    if (fw->state != FORWARD_CLOSING || fw->pending > 0 || fw->n_conns > 0)
        return;
    if (fw->prev)
        fw->prev->next = fw->next;
    else
        *forwards_of(e) = fw->next;
    if (fw->next)
        fw->next->prev = fw->prev;
    free(fw->dir);
    free(fw->path);
    if (fw->counted)
        engine_handle_closed(e);
    free(fw);
}

static void on_listener_closed(uv_handle_t *h)
{
    struct sandbox_fwd *fw = h->data;

    fw->pending--;
    forward_maybe_free(fw);
}

static void on_pool_closed(void *userdata)
{
    struct sandbox_fwd *fw = userdata;

    fw->pending--;
    forward_maybe_free(fw);
}

static void remove_socket(struct sandbox_fwd *fw)
{
    if (fw->path)
        (void)unlink(fw->path);
    if (fw->dir)
        (void)rmdir(fw->dir);
}

/* The audit record of a forward's open ("sandbox.forward_opened") or close. */
static void forward_audit(const struct sandbox_fwd *fw, const struct sandbox *sb, const char *event,
                          const char *reason)
{
    struct audit_record rec = {
        .event = event,
        .priority = LOG_INFO,
        .sandbox = fw->sandbox_id,
        .vmid = sb ? sb->vmid : 0,
        .node = sb ? sb->node : NULL,
        .caller_uid = fw->uid,
        .owner_uid = sb ? (int64_t)sb->owner_uid : AUDIT_NO_UID,
        .reason = reason,
    };

    /* never the socket's path: its folder's random name is part of its protection */
    audit_emit(&rec, "forward %s of sandbox %s port %u on %s for uid %u: %s", fw->id,
               fw->sandbox_id, fw->port, fw->tcp ? fw->address : "a Unix socket", (unsigned)fw->uid,
               reason);
}

static void forward_close(struct sandbox_fwd *fw, const char *reason)
{
    if (fw->state == FORWARD_CLOSING)
        return;
    if (reason)
        forward_audit(fw, fw->sb, "sandbox.forward_closed", reason);
    forward_set_state(fw, FORWARD_CLOSING);
    fw->sb = NULL;
    remove_socket(fw);
    if (fw->listener_open) {
        fw->listener_open = false;
        fw->pending++;
        uv_close((uv_handle_t *)&fw->listener.stream, on_listener_closed);
    }
    for (struct conn *c = fw->conns; c; c = c->next)
        sshfwd_close(c->f); /* each ends from the loop: on_conn_done */
    if (fw->pool) {
        fw->pending++;
        sshpool_close(TAKE_PTR(fw->pool), on_pool_closed, fw);
    }
    forward_maybe_free(fw);
}

/* sandbox.c's hook: sb leaves READY for good (sb), or the engine closes (NULL). */
static void forwards_stop(struct engine *e, const struct sandbox *sb)
{
    struct sandbox_fwd *fw, *next;

    for (fw = *forwards_of(e); fw; fw = next) {
        next = fw->next;
        if (!sb && !fw->counted) {
            fw->counted = true;
            e->close_pending++;
        }
        if (!sb || fw->sb == sb)
            forward_close(fw, sb ? "sandbox_gone" : "shutdown");
    }
}

/* ---- connections ---- */

static void on_conn_done(struct sshfwd *f, int error, void *userdata)
{
    struct conn *c = userdata;
    struct sandbox_fwd *fw = c->fw;
    uint64_t in, out;

    sshfwd_counts(f, &in, &out);
    fw->bytes_in += in;
    fw->bytes_out += out;
    log_debug(COMP, "%s: %s: connection ended (%s), %llu bytes in, %llu out", fw->sandbox_id,
              fw->id, error ? strerror(-error) : "done", (unsigned long long)in,
              (unsigned long long)out);
    if (c->prev)
        c->prev->next = c->next;
    else
        fw->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    fw->n_conns--;
    free(c);
    forward_maybe_free(fw);
}

static void on_refused_closed(uv_handle_t *h)
{
    free(h);
}

/* Accepts and closes at once: over the connection limit, or the accept of a relay failed. */
static void refuse_connection(struct sandbox_fwd *fw)
{
    uv_stream_t *s = malloc(fw->tcp ? sizeof(uv_tcp_t) : sizeof(uv_pipe_t));

    if (!s)
        return;
    if ((fw->tcp ? uv_tcp_init(fw->e->loop, (uv_tcp_t *)s)
                 : uv_pipe_init(fw->e->loop, (uv_pipe_t *)s, 0)) < 0) {
        free(s);
        return;
    }
    (void)uv_accept(&fw->listener.stream, s);
    uv_close((uv_handle_t *)s, on_refused_closed);
}

/* A Unix peer must be the forward's uid or root (the socket's mode may let others in when
 * the daemon could not chown it). */
static bool peer_allowed(struct sandbox_fwd *fw, uv_stream_t *s)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    uv_os_fd_t fd;

    if (fw->tcp)
        return true;
    if (uv_fileno((uv_handle_t *)s, &fd) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return false;
    return cred.uid == fw->uid || cred.uid == 0;
}

static void on_connection(uv_stream_t *server, int status)
{
    struct sandbox_fwd *fw = server->data;
    const struct config_forward *cf = &fw->e->cfg->forward;
    struct conn *c;
    int r;

    if (status < 0 || fw->state != FORWARD_OPEN)
        return;
    if (fw->n_conns >= cf->max_connections) {
        log_debug(COMP, "%s: %s: connection refused: %u open", fw->sandbox_id, fw->id, fw->n_conns);
        refuse_connection(fw);
        return;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        refuse_connection(fw);
        return;
    }
    c->fw = fw;
    r = sshfwd_accept(fw->pool, server, fw->tcp, fw->port, cf->buffer_bytes, on_conn_done, c,
                      &c->f);
    if (r < 0) {
        free(c);
        return;
    }
    c->next = fw->conns;
    if (fw->conns)
        fw->conns->prev = c;
    fw->conns = c;
    fw->n_conns++;
    fw->accepted++;
    if (!peer_allowed(fw, sshfwd_client(c->f))) {
        log_debug(COMP, "%s: %s: peer of another uid closed", fw->sandbox_id, fw->id);
        sshfwd_close(c->f);
    }
}

/* ---- listeners ---- */

static int random_hex(char *buf, size_t n_hex)
{
    uint8_t b[32];

    if (n_hex / 2 > sizeof b || getrandom(b, n_hex / 2, 0) != (ssize_t)(n_hex / 2))
        return -EIO;
    for (size_t i = 0; i < n_hex / 2; i++)
        snprintf(buf + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* "127.0.0.1:N" (N 0 or 1024..65535) into *ret_port; -EINVAL for anything else. */
static int parse_listen(const char *s, unsigned *ret_port)
{
    static const char prefix[] = "127.0.0.1:";
    unsigned long v;
    char *end;

    if (strncmp(s, prefix, strlen(prefix)) != 0)
        return -EINVAL;
    s += strlen(prefix);
    if (*s < '0' || *s > '9' || strlen(s) > 5)
        return -EINVAL;
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end || (v != 0 && (v < 1024 || v > 65535)))
        return -EINVAL;
    *ret_port = (unsigned)v;
    return 0;
}

static int listen_tcp(struct sandbox_fwd *fw, unsigned port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in sin;
    int len = sizeof ss, r;

    r = uv_ip4_addr("127.0.0.1", (int)port, &sin);
    if (r >= 0)
        r = uv_tcp_init(fw->e->loop, &fw->listener.tcp);
    if (r < 0)
        return r;
    fw->listener_open = true;
    fw->listener.stream.data = fw;
    r = uv_tcp_bind(&fw->listener.tcp, (const struct sockaddr *)&sin, 0);
    if (r >= 0)
        r = uv_listen(&fw->listener.stream, FORWARD_BACKLOG, on_connection);
    if (r >= 0)
        r = uv_tcp_getsockname(&fw->listener.tcp, (struct sockaddr *)&ss, &len);
    if (r < 0)
        return r;
    snprintf(fw->address, sizeof fw->address, "127.0.0.1:%u",
             (unsigned)ntohs(((struct sockaddr_in *)&ss)->sin_port));
    return 0;
}

/* The folder and socket, owned by uid when the daemon may chown (else open to those who
 * know the random name; peer_allowed() still applies). */
static int listen_unix(struct sandbox_fwd *fw, gid_t gid)
{
    const char *base = fw->e->cfg->forward.socket_dir;
    char hex[FORWARD_DIR_HEX + 1];
    bool owned;
    int r;

    if (!base)
        return -ENOTSUP;
    r = random_hex(hex, FORWARD_DIR_HEX);
    if (r < 0)
        return r;
    if (mkdir(base, 0711) == 0)
        (void)chmod(base, 0711); /* whatever the umask: others must pass through */
    else if (errno != EEXIST)
        return -errno;
    if (asprintf(&fw->dir, "%s/%s", base, hex) < 0) {
        fw->dir = NULL;
        return -ENOMEM;
    }
    if (asprintf(&fw->path, "%s/%u.sock", fw->dir, fw->port) < 0) {
        fw->path = NULL;
        return -ENOMEM;
    }
    if (strlen(fw->path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return -ENAMETOOLONG;
    if (mkdir(fw->dir, 0700) < 0) {
        r = -errno;
        free(TAKE_PTR(fw->dir));
        return r;
    }
    r = uv_pipe_init(fw->e->loop, &fw->listener.pipe, 0);
    if (r < 0)
        return r;
    fw->listener_open = true;
    fw->listener.stream.data = fw;
    r = uv_pipe_bind(&fw->listener.pipe, fw->path);
    if (r < 0)
        return r;
    owned = chmod(fw->path, 0600) == 0 && chown(fw->path, fw->uid, gid) == 0 &&
            chown(fw->dir, fw->uid, gid) == 0;
    if (!owned && (chmod(fw->path, 0666) < 0 || chmod(fw->dir, 0711) < 0))
        return -errno;
    return uv_listen(&fw->listener.stream, FORWARD_BACKLOG, on_connection);
}

/* ---- the engine's side ---- */

static unsigned count_open(struct engine *e, const struct sandbox *sb, uid_t uid, bool by_uid)
{
    unsigned n = 0;

    for (struct sandbox_fwd *fw = *forwards_of(e); fw; fw = fw->next)
        if (fw->state == FORWARD_OPEN && (by_uid ? fw->uid == uid : fw->sb == sb))
            n++;
    return n;
}

static void info_of(const struct sandbox_fwd *fw, struct sandbox_forward_info *ret)
{
    *ret = (struct sandbox_forward_info){
        .id = fw->id,
        .port = fw->port,
        .socket = fw->tcp ? NULL : fw->path,
        .address = fw->tcp ? fw->address : NULL,
        .uid = fw->uid,
        .connections = fw->n_conns,
        .accepted = fw->accepted,
        .bytes_in = fw->bytes_in,
        .bytes_out = fw->bytes_out,
    };
}

static int forward_new(struct sandbox *sb, uid_t uid, unsigned port, bool tcp,
                       struct sandbox_fwd **ret)
{
    struct engine *e = sb->engine;
    struct sshs_config sc;
    struct sandbox_fwd *fw = calloc(1, sizeof *fw);
    int r;

    if (!fw)
        return -ENOMEM;
    fw->e = e;
    fw->sb = sb;
    fw->uid = uid;
    fw->port = (uint16_t)port;
    fw->tcp = tcp;
    memcpy(fw->id, "fw-", 3);
    snprintf(fw->sandbox_id, sizeof fw->sandbox_id, "%s", sb->id);
    r = random_hex(fw->id + 3, SANDBOX_FORWARD_ID_LEN - 3);
    if (r >= 0) {
        sandbox_ssh_config(sb, &sc);
        sc.observe = NULL; /* not the sandbox's own sessions */
        sc.channels_per_session = e->cfg->forward.max_connections;
        r = sshpool_new(e->loop, &sc, 1, &fw->pool);
    }
    if (r < 0) {
        free(fw);
        return r;
    }
    /* linked at the end (oldest first), closing from now on like any other */
    if (!*forwards_of(e)) {
        *forwards_of(e) = fw;
    } else {
        struct sandbox_fwd *t = *forwards_of(e);
        while (t->next)
            t = t->next;
        t->next = fw;
        fw->prev = t;
    }
    e->forwards_stop = forwards_stop;
    *ret = fw;
    return 0;
}

int sandbox_forward_open(struct sandbox *sb, uid_t uid, gid_t gid, unsigned port,
                         const char *listen, struct sandbox_forward_info *ret,
                         struct engine_error *ret_err)
{
    struct engine *e = sb->engine;
    const struct config_forward *cf = &e->cfg->forward;
    unsigned lport = 0;
    struct sandbox_fwd *fw;
    int r;

    if (port < 1 || port > 65535)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, "must be in 1..65535", "port");
    if (listen && parse_listen(listen, &lport) < 0)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL,
                             "only \"127.0.0.1:0\" or \"127.0.0.1:N\" (N 1024..65535)", "listen");
    if (sb->state != SANDBOX_READY || !sb->ip)
        return engine_refuse_not_ready(ret_err, sb->state);
    if (count_open(e, sb, uid, false) >= cf->max_per_sandbox)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                             "too many forwards open on this sandbox ([forward] max_per_sandbox)",
                             NULL);
    if (count_open(e, sb, uid, true) >= cf->max_per_uid)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                             "too many forwards open by this user ([forward] max_per_uid)", NULL);
    r = forward_new(sb, uid, port, listen != NULL, &fw);
    if (r < 0)
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot make the forward", NULL);
    r = listen ? listen_tcp(fw, lport) : listen_unix(fw, gid);
    if (r < 0) {
        log_debug(COMP, "%s: listen failed: %s", sb->id, strerror(-r));
        forward_close(fw, NULL);
        if (r == UV_EADDRINUSE)
            return engine_refuse(ret_err, ENGINE_E_BUSY, r, "the TCP port is in use", "listen");
        if (r == -ENOTSUP)
            return engine_refuse(ret_err, ENGINE_E_INVALID, r,
                                 "Unix socket forwards are off ([forward] socket_dir is empty)",
                                 "listen");
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot listen for the forward", NULL);
    }
    forward_audit(fw, sb, "sandbox.forward_opened", fw->tcp ? "tcp" : "unix");
    info_of(fw, ret);
    return 0;
}

int sandbox_forward_close(struct sandbox *sb, const char *fid)
{
    for (struct sandbox_fwd *fw = *forwards_of(sb->engine); fw; fw = fw->next)
        if (fw->state == FORWARD_OPEN && fw->sb == sb && strcmp(fw->id, fid) == 0) {
            forward_close(fw, "caller");
            return 0;
        }
    return -ENOENT;
}

void sandbox_forward_list(struct sandbox *sb,
                          void (*each)(const struct sandbox_forward_info *info, void *userdata),
                          void *userdata)
{
    for (struct sandbox_fwd *fw = *forwards_of(sb->engine); fw; fw = fw->next)
        if (fw->state == FORWARD_OPEN && fw->sb == sb) {
            struct sandbox_forward_info info;

            info_of(fw, &info);
            each(&info, userdata);
        }
}

static bool is_forward_dir(const char *name)
{
    return strlen(name) == FORWARD_DIR_HEX && strspn(name, "0123456789abcdef") == FORWARD_DIR_HEX;
}

int engine_forward_cleanup(struct engine *e)
{
    const char *base = e->cfg->forward.socket_dir;
    DIR *d;
    struct dirent *de;
    int n = 0;

    if (!base)
        return 0;
    d = opendir(base);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    while ((de = readdir(d))) {
        DIR *sub;
        struct dirent *se;
        int fd;

        if (!is_forward_dir(de->d_name))
            continue;
        fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        sub = fdopendir(fd);
        if (!sub) {
            close(fd);
            continue;
        }
        while ((se = readdir(sub)))
            if (strcmp(se->d_name, ".") != 0 && strcmp(se->d_name, "..") != 0)
                (void)unlinkat(fd, se->d_name, 0);
        closedir(sub);
        if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) == 0)
            n++;
    }
    closedir(d);
    if (n > 0)
        log_info(COMP, "removed %d stale forward socket folders from %s", n, base);
    return n;
}
