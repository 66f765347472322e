/* sandboxctl forward, in the manner of `kubectl port-forward`. See sandboxctl-forward.h.
 *
 * REMOTE alone forwards to a Unix socket only the caller can open; LOCAL:REMOTE to the
 * loopback TCP port LOCAL (0: any free port), which every local user can reach. */
#include "sandboxctl-forward.h"

#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"

/* Between looks at whether the forward still exists (ms). */
#define FORWARD_CHECK_MS 2000

static const char *get_str(json_object *o, const char *name)
{
    json_object *v;

    return json_object_object_get_ex(o, name, &v) ? json_object_get_string(v) : NULL;
}

/* True while the sandbox still lists the forward (false also when the call fails). */
static bool forward_alive(struct ctl *c, const char *id, const char *fid)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *a;

    if (ctl_call(c, "sandbox.forwards", id_params(id), &res) < 0 ||
        !json_object_object_get_ex(res, "forwards", &a))
        return false;
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        const char *f = get_str(json_object_array_get_idx(a, i), "forward");

        if (f && strcmp(f, fid) == 0)
            return true;
    }
    return false;
}

static int parse_spec(const char *spec, int64_t *ret_local, int64_t *ret_remote)
{
    const char *colon = strchr(spec, ':');
    char local[8];

    *ret_local = -1;
    if (colon) {
        if ((size_t)(colon - spec) >= sizeof local) {
            fprintf(stderr, "sandboxctl: LOCAL: '%s' is not a port\n", spec);
            return -EINVAL;
        }
        memcpy(local, spec, (size_t)(colon - spec));
        local[colon - spec] = 0;
        if (parse_int(local, "LOCAL", 0, 65535, ret_local) < 0)
            return -EINVAL;
        spec = colon + 1;
    }
    return parse_int(spec, "REMOTE", 1, 65535, ret_remote);
}

int cmd_forward(struct ctl *c, int argc, char **argv)
{
    _cleanup_json_ json_object *res = NULL, *closed = NULL;
    struct timespec wait = {FORWARD_CHECK_MS / 1000, (FORWARD_CHECK_MS % 1000) * 1000000L};
    int64_t local, remote;
    const char *fid, *where;
    json_object *p;
    sigset_t set;
    int sig, r;

    if (argc != 3) {
        fprintf(stderr, "sandboxctl: usage: forward ID [LOCAL:]REMOTE\n");
        return EXIT_USAGE;
    }
    if (parse_spec(argv[2], &local, &remote) < 0)
        return EXIT_USAGE;
    p = id_params(argv[1]);
    json_object_object_add(p, "port", json_object_new_int64(remote));
    if (local >= 0) {
        char listen[32];

        snprintf(listen, sizeof listen, "127.0.0.1:%lld", (long long)local);
        json_object_object_add(p, "listen", json_object_new_string(listen));
    }
    /* Block the signals before the forward exists, so none is lost. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    r = ctl_call(c, "sandbox.forward", p, &res);
    if (r < 0)
        return exit_for(r);
    fid = get_str(res, "forward");
    where = get_str(res, "socket");
    if (c->json)
        print_json(res);
    else if (where)
        printf("Forwarding from unix:%s -> %lld\n", where, (long long)remote);
    else
        printf("Forwarding from %s -> %lld\n", strna(get_str(res, "address")), (long long)remote);
    fflush(stdout);
    for (;;) {
        sig = sigtimedwait(&set, NULL, &wait);
        if (sig > 0)
            break;
        if (!forward_alive(c, argv[1], fid)) {
            fprintf(stderr, "sandboxctl: the forward ended (the sandbox went away)\n");
            return 1;
        }
    }
    p = id_params(argv[1]);
    json_object_object_add(p, "forward", json_object_new_string(fid));
    r = ctl_call(c, "sandbox.unforward", p, &closed);
    return r < 0 ? exit_for(r) : 0;
}

static void print_preview_url(json_object *res)
{
    printf("%s\n", strna(get_str(res, "url")));
}

static void print_previews(json_object *res)
{
    json_object *a;

    if (!json_object_object_get_ex(res, "previews", &a))
        return;
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        json_object *p = json_object_array_get_idx(a, i), *port, *exp;

        json_object_object_get_ex(p, "port", &port);
        json_object_object_get_ex(p, "expires_at", &exp);
        printf("%s  %5d  expires %lld  %s\n", strna(get_str(p, "preview")),
               json_object_get_int(port), (long long)json_object_get_int64(exp),
               strna(get_str(p, "url")));
    }
}

int cmd_preview(struct ctl *c, int argc, char **argv)
{
    int64_t port, ttl = 0;
    json_object *p;

    if ((argc != 3 && !(argc == 5 && strcmp(argv[3], "--ttl") == 0))) {
        fprintf(stderr, "sandboxctl: usage: preview ID PORT [--ttl SECONDS]\n");
        return EXIT_USAGE;
    }
    if (parse_int(argv[2], "PORT", 1, 65535, &port) < 0 ||
        (argc == 5 && parse_int(argv[4], "SECONDS", 1, INT32_MAX, &ttl) < 0))
        return EXIT_USAGE;
    p = id_params(argv[1]);
    json_object_object_add(p, "port", json_object_new_int64(port));
    if (ttl > 0)
        json_object_object_add(p, "ttl_s", json_object_new_int64(ttl));
    return ctl_run(c, "sandbox.preview", p, print_preview_url);
}

int cmd_previews(struct ctl *c, int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "sandboxctl: usage: previews ID\n");
        return EXIT_USAGE;
    }
    return ctl_run(c, "sandbox.previews", id_params(argv[1]), print_previews);
}

int cmd_unpreview(struct ctl *c, int argc, char **argv)
{
    json_object *p;

    if (argc != 3) {
        fprintf(stderr, "sandboxctl: usage: unpreview ID PREVIEW\n");
        return EXIT_USAGE;
    }
    p = id_params(argv[1]);
    json_object_object_add(p, "preview", json_object_new_string(argv[2]));
    return ctl_run(c, "sandbox.unpreview", p, NULL);
}
