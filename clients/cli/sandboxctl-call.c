/* The calls of sandboxctl: one request at a time on the blocking connection, its reply, and
 * the printing helpers the commands share. See sandboxctl.h. */
#include "macro.h"

#include <errno.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandboxctl.h"
#include "util.h"
#include "rpc.h"

/* Reads one line (without '\n'); the caller frees. */
static int read_line(struct ctl *c, char **ret)
{
    for (;;) {
        char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
        ssize_t k;

        if (nl) {
            size_t n = (size_t)(nl - c->buf);
            char *line = malloc(n + 1);

            if (!line)
                return -ENOMEM;
            memcpy(line, c->buf, n);
            line[n] = '\0';
            memmove(c->buf, nl + 1, c->len - n - 1);
            c->len -= n + 1;
            *ret = line;
            return 0;
        }
        if (c->len >= CTL_RESPONSE_MAX)
            return -EMSGSIZE;
        if (c->cap - c->len < 65536) {
            size_t cap = c->cap ? c->cap * 2 : 131072;
            char *p = realloc(c->buf, cap);

            if (!p)
                return -ENOMEM;
            c->buf = p;
            c->cap = cap;
        }
        k = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            return -ECONNRESET;
        c->len += (size_t)k;
    }
}

int ctl_call(struct ctl *c, const char *method, json_object *params, json_object **ret_result)
{
    return ctl_call_fds(c, method, params, NULL, 0, NULL, ret_result);
}

/* Sends the line with fds[0..n_fds) in one sendmsg() (the daemon ties descriptors to the
 * line they arrive with). */
static int send_line(struct ctl *c, const char *line, size_t len, const int *fds, size_t n_fds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * CTL_FDS_MAX)];
        struct cmsghdr align;
    } cb;
    struct iovec iov = {.iov_base = (void *)line, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;
    ssize_t k;

    if (n_fds == 0)
        return write_all(c->fd, line, len);
    if (n_fds > CTL_FDS_MAX)
        return -E2BIG;
    m.msg_control = cb.buf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
    cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
    do
        k = sendmsg(c->fd, &m, MSG_NOSIGNAL);
    while (k < 0 && errno == EINTR);
    if (k < 0)
        return -errno;
    /* The rest of a long line (no descriptors with it). */
    return (size_t)k < len ? write_all(c->fd, line + k, len - (size_t)k) : 0;
}

/* Waits until the connection has a byte to read, calling tick every CTL_TICK_MS. */
static int wait_readable(struct ctl *c, const struct ctl_wait *w)
{
    for (;;) {
        struct pollfd p[1 + CTL_WAIT_FDS] = {{.fd = c->fd, .events = POLLIN}};
        size_t n = MIN(w->n_fds, (size_t)CTL_WAIT_FDS);
        int k;

        if (c->len > 0 && memchr(c->buf, '\n', c->len))
            return 0;
        for (size_t i = 0; i < n; i++)
            p[1 + i] = (struct pollfd){.fd = w->fds[i], .events = POLLIN};
        k = poll(p, 1 + n, w->tick ? CTL_TICK_MS : -1);
        if (k < 0 && errno != EINTR)
            return -errno;
        for (size_t i = 0; k > 0 && i < n; i++)
            if (p[1 + i].revents && w->on_fd)
                w->on_fd(w->userdata, i);
        if (w && w->tick)
            w->tick(w->userdata);
        if (k > 0 && p[0].revents)
            return 0;
    }
}

int ctl_call_fds(struct ctl *c, const char *method, json_object *params, const int *fds,
                 size_t n_fds, const struct ctl_wait *w, json_object **ret_result)
{
    _cleanup_free_ char *line = NULL;
    int64_t id = ++c->next_id;
    size_t len;
    int r;

    line = rpc_request_line(id, method, params, &len);
    if (!line)
        return -ENOMEM;
    r = send_line(c, line, len, fds, n_fds);
    if (r < 0) {
        fprintf(stderr, "sandboxctl: sending %s: %s\n", method, strerror(-r));
        return r;
    }
    for (;;) {
        _cleanup_free_ char *resp = NULL;
        _cleanup_json_ json_object *o = NULL;
        json_object *rid, *err, *res, *m;

        r = w ? wait_readable(c, w) : 0;
        if (r == 0)
            r = read_line(c, &resp);
        if (r < 0) {
            fprintf(stderr, "sandboxctl: reading the reply to %s: %s\n", method,
                    r == -ECONNRESET ? "connection closed by the daemon" : strerror(-r));
            return r;
        }
        o = json_tokener_parse(resp);
        if (!o || !json_object_is_type(o, json_type_object)) {
            fprintf(stderr, "sandboxctl: the daemon sent something that is not JSON-RPC\n");
            return -EBADMSG;
        }
        /* Server notifications (e.g. exec.output) carry a method and no id. */
        if (json_object_object_get_ex(o, "method", &m))
            continue;
        err = NULL;
        if (json_object_object_get_ex(o, "error", &err) && err) {
            json_object *code = NULL, *msg = NULL, *data = NULL, *reason = NULL;

            json_object_object_get_ex(err, "code", &code);
            json_object_object_get_ex(err, "message", &msg);
            json_object_object_get_ex(err, "data", &data);
            if (data)
                json_object_object_get_ex(data, "reason", &reason);
            if (c->json)
                fprintf(stderr, "%s\n",
                        json_object_to_json_string_ext(err, JSON_C_TO_STRING_PLAIN));
            else
                fprintf(stderr, "sandboxctl: %s: %s (%d)%s%s\n", method,
                        msg ? json_object_get_string(msg) : "error",
                        code ? json_object_get_int(code) : 0, reason ? ": " : "",
                        reason ? json_object_get_string(reason) : "");
            return -EREMOTE;
        }
        if (!json_object_object_get_ex(o, "id", &rid) || json_object_get_int64(rid) != id)
            continue;
        json_object_object_get_ex(o, "result", &res);
        *ret_result = json_object_get(res);
        return 0;
    }
}

int exit_for(int r)
{
    return r == -EREMOTE ? EXIT_RPC : 1;
}

void print_json(json_object *o)
{
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
}

static void print_pretty(json_object *o)
{
    printf("%s\n",
           json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                 JSON_C_TO_STRING_NOSLASHESCAPE));
}

int ctl_run(struct ctl *c, const char *method, json_object *params,
            void (*human)(json_object *result))
{
    _cleanup_json_ json_object *res = NULL;
    int r;

    r = ctl_call(c, method, params, &res);
    if (r < 0)
        return exit_for(r);
    if (c->json)
        print_json(res);
    else if (human)
        human(res);
    else
        print_pretty(res);
    return 0;
}

int parse_int(const char *s, const char *what, int64_t min, int64_t max, int64_t *ret)
{
    char *end;
    long long x;

    errno = 0;
    x = strtoll(s, &end, 10);
    if (!s[0] || *end || errno || x < min || x > max) {
        fprintf(stderr, "sandboxctl: %s: '%s' is not a number in %lld..%lld\n", what, s,
                (long long)min, (long long)max);
        return -EINVAL;
    }
    *ret = x;
    return 0;
}

json_object *id_params(const char *id)
{
    json_object *p = json_object_new_object();

    json_object_object_add(p, "id", json_object_new_string(id));
    return p;
}

int ctl_env_add(json_object *p, json_object **env, char *arg)
{
    char *eq = strchr(arg, '=');

    if (!eq) {
        fprintf(stderr, "sandboxctl: --env wants K=V\n");
        return -EINVAL;
    }
    if (!*env) {
        *env = json_object_new_object();
        json_object_object_add(p, "env", *env);
    }
    *eq = '\0';
    json_object_object_add(*env, arg, json_object_new_string(eq + 1));
    return 0;
}
