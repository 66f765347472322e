/* Port forwards. See sandbox-forward.h. */
#include "sandbox-forward.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "sandbox-relay.h"

#define COMP "forward"
#define FORWARD_BACKLOG 128
#define FORWARD_DIR_HEX 32

_Static_assert(SANDBOX_FORWARD_ID_LEN == RELAY_ID_LEN, "a forward's id is a relay endpoint's");

struct sandbox_fwd {
    struct relay_ep ep;
    bool tcp;
    union {
        uv_stream_t stream;
        uv_pipe_t pipe;
        uv_tcp_t tcp;
    } listener;
    bool listener_open;
    char *dir, *path; /* the Unix socket's folder and path */
    char address[32];
};

static struct sandbox_fwd *fwd_of(const struct relay_ep *ep)
{
    return container_of(ep, struct sandbox_fwd, ep);
}

static void forward_free(struct relay_ep *ep)
{
    struct sandbox_fwd *fw = fwd_of(ep);

    free(fw->dir);
    free(fw->path);
    free(fw);
}

static void on_listener_closed(uv_handle_t *h)
{
    struct sandbox_fwd *fw = h->data;

    relay_ep_release(&fw->ep);
}

static void remove_socket(struct sandbox_fwd *fw)
{
    if (fw->path)
        (void)unlink(fw->path);
    if (fw->dir)
        (void)rmdir(fw->dir);
}

/* The audit records' text (never the socket's path: its folder's random name is part of
 * its protection). */
static void forward_describe(const struct relay_ep *ep, char *buf, size_t size)
{
    const struct sandbox_fwd *fw = fwd_of(ep);

    snprintf(buf, size, "forward %s of sandbox %s port %u on %s for uid %u", ep->id, ep->sandbox_id,
             ep->port, fw->tcp ? fw->address : "a Unix socket", (unsigned)ep->uid);
}

/* The relay endpoint's closing: the socket files and the listener. */
static void forward_close_handles(struct relay_ep *ep)
{
    struct sandbox_fwd *fw = fwd_of(ep);

    remove_socket(fw);
    if (fw->listener_open) {
        fw->listener_open = false;
        relay_ep_hold(ep);
        uv_close((uv_handle_t *)&fw->listener.stream, on_listener_closed);
    }
}

static const struct relay_ops forward_ops = {
    .comp = COMP,
    .closed_event = "sandbox.forward_closed",
    .quota_sandbox = "too many forwards open on this sandbox ([forward] max_per_sandbox)",
    .quota_uid = "too many forwards open by this user ([forward] max_per_uid)",
    .close = forward_close_handles,
    .free = forward_free,
    .describe = forward_describe,
};

/* ---- connections ---- */

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
    if ((fw->tcp ? uv_tcp_init(fw->ep.e->loop, (uv_tcp_t *)s)
                 : uv_pipe_init(fw->ep.e->loop, (uv_pipe_t *)s, 0)) < 0) {
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
    return cred.uid == fw->ep.uid || cred.uid == 0;
}

static void on_connection(uv_stream_t *server, int status)
{
    struct sandbox_fwd *fw = server->data;
    struct relay_ep *ep = &fw->ep;
    const struct config_forward *cf = &ep->e->cfg->forward;
    struct relay_conn *c;
    uv_stream_t *client;

    if (status < 0 || ep->state != RELAY_OPEN)
        return;
    if (ep->n_conns >= cf->max_connections) {
        log_debug(COMP, "%s: %s: connection refused: %u open", ep->sandbox_id, ep->id, ep->n_conns);
        refuse_connection(fw);
        return;
    }
    c = relay_conn_new(ep);
    if (!c) {
        refuse_connection(fw);
        return;
    }
    if (relay_conn_accept(c, server, fw->tcp, cf->buffer_bytes, &client) < 0)
        return;
    if (!peer_allowed(fw, client)) {
        log_debug(COMP, "%s: %s: peer of another uid closed", ep->sandbox_id, ep->id);
        relay_conn_close(c);
    }
}

/* ---- listeners ---- */

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
        r = uv_tcp_init(fw->ep.e->loop, &fw->listener.tcp);
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
    const char *base = fw->ep.e->cfg->forward.socket_dir;
    char hex[FORWARD_DIR_HEX + 1];
    bool owned;
    int r;

    if (!base)
        return -ENOTSUP;
    r = relay_random_hex(hex, FORWARD_DIR_HEX);
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
    if (asprintf(&fw->path, "%s/%u.sock", fw->dir, fw->ep.port) < 0) {
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
    r = uv_pipe_init(fw->ep.e->loop, &fw->listener.pipe, 0);
    if (r < 0)
        return r;
    fw->listener_open = true;
    fw->listener.stream.data = fw;
    r = uv_pipe_bind(&fw->listener.pipe, fw->path);
    if (r < 0)
        return r;
    owned = chmod(fw->path, 0600) == 0 && chown(fw->path, fw->ep.uid, gid) == 0 &&
            chown(fw->dir, fw->ep.uid, gid) == 0;
    if (!owned && (chmod(fw->path, 0666) < 0 || chmod(fw->dir, 0711) < 0))
        return -errno;
    return uv_listen(&fw->listener.stream, FORWARD_BACKLOG, on_connection);
}

/* ---- the engine's side ---- */

static void info_of(const struct sandbox_fwd *fw, struct sandbox_forward_info *ret)
{
    *ret = (struct sandbox_forward_info){
        .id = fw->ep.id,
        .port = fw->ep.port,
        .socket = fw->tcp ? NULL : fw->path,
        .address = fw->tcp ? fw->address : NULL,
        .uid = fw->ep.uid,
        .connections = fw->ep.n_conns,
        .accepted = fw->ep.accepted,
        .bytes_in = fw->ep.bytes_in,
        .bytes_out = fw->ep.bytes_out,
    };
}

static int forward_new(struct sandbox *sb, uid_t uid, unsigned port, bool tcp,
                       struct sandbox_fwd **ret)
{
    struct sandbox_fwd *fw = calloc(1, sizeof *fw);
    int r;

    if (!fw)
        return -ENOMEM;
    fw->tcp = tcp;
    r = relay_ep_init(&fw->ep, &forward_ops, sb, uid, port, "fw-",
                      sb->engine->cfg->forward.max_connections);
    if (r < 0) {
        relay_ep_discard(&fw->ep);
        free(fw);
        return r;
    }
    relay_ep_link(&fw->ep); /* closing from now on like any other */
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
    r = relay_ep_admit(sb, &forward_ops, uid, cf->max_per_sandbox, cf->max_per_uid, ret_err);
    if (r < 0)
        return r;
    r = forward_new(sb, uid, port, listen != NULL, &fw);
    if (r < 0)
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot make the forward", NULL);
    r = listen ? listen_tcp(fw, lport) : listen_unix(fw, gid);
    if (r < 0) {
        log_debug(COMP, "%s: listen failed: %s", sb->id, strerror(-r));
        relay_ep_close(&fw->ep, NULL);
        if (r == UV_EADDRINUSE)
            return engine_refuse(ret_err, ENGINE_E_BUSY, r, "the TCP port is in use", "listen");
        if (r == -ENOTSUP)
            return engine_refuse(ret_err, ENGINE_E_INVALID, r,
                                 "Unix socket forwards are off ([forward] socket_dir is empty)",
                                 "listen");
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot listen for the forward", NULL);
    }
    relay_ep_audit(&fw->ep, sb, "sandbox.forward_opened", fw->tcp ? "tcp" : "unix");
    info_of(fw, ret);
    return 0;
}

int sandbox_forward_close(struct sandbox *sb, const char *fid)
{
    return relay_ep_close_id(sb, &forward_ops, fid, "caller");
}

void sandbox_forward_list(struct sandbox *sb,
                          void (*each)(const struct sandbox_forward_info *info, void *userdata),
                          void *userdata)
{
    for (struct relay_ep *ep = relay_ep_next(sb->engine, &forward_ops, sb, NULL); ep;
         ep = relay_ep_next(sb->engine, &forward_ops, sb, ep)) {
        struct sandbox_forward_info info;

        info_of(fwd_of(ep), &info);
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
