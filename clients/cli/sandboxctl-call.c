/* The calls of sandboxctl: one request at a time through the C client library (clients/c),
 * what a failed one prints, and the printing helpers the commands share. See sandboxctl.h. */
#include "macro.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl.h"

int ctl_call(struct ctl *c, const char *method, json_object *params, json_object **ret_result)
{
    return ctl_call_fds(c, method, params, NULL, 0, NULL, ret_result);
}

/* Says on stderr why a call failed: the daemon's error (as JSON with --json), or what failed
 * on this side. */
static void print_failure(struct ctl *c, const char *method, int r)
{
    const struct sandboxd_error *e = sandboxd_client_error(c->client);

    if (!e)
        fprintf(stderr, "sandboxctl: %s: %s\n", method, strerror(-r));
    else if (r == -EREMOTE && c->json)
        fprintf(stderr, "%s\n", json_object_to_json_string_ext(e->object, JSON_C_TO_STRING_PLAIN));
    else if (r == -EREMOTE)
        fprintf(stderr, "sandboxctl: %s: %s (%d)%s%s\n", method, e->message, e->code,
                e->reason ? ": " : "", e->reason ? e->reason : "");
    else
        fprintf(stderr, "sandboxctl: %s\n", e->message);
}

int ctl_call_fds(struct ctl *c, const char *method, json_object *params, const int *fds,
                 size_t n_fds, const struct ctl_wait *w, json_object **ret_result)
{
    struct sandboxd_wait sw = {};
    int r;

    if (w)
        sw = (struct sandboxd_wait){.tick_ms = w->tick ? CTL_TICK_MS : 0,
                                    .tick = w->tick,
                                    .fds = w->fds,
                                    .n_fds = MIN(w->n_fds, (size_t)CTL_WAIT_FDS),
                                    .on_fd = w->on_fd,
                                    .userdata = w->userdata};
    r = sandboxd_call_wait(c->client, method, params, fds, n_fds, w ? &sw : NULL, ret_result);
    if (r < 0)
        print_failure(c, method, r);
    return r;
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

/* Whether the option word a (a short cluster or a long option) takes the next word as its
 * argument. */
static bool takes_next(const char *a, const char *shorts, const struct option *longs)
{
    if (a[1] == '-') {
        size_t n = strcspn(a + 2, "=");

        if (a[2 + n] == '=')
            return false;
        for (const struct option *o = longs; o && o->name; o++)
            if (strlen(o->name) == n && strncmp(o->name, a + 2, n) == 0)
                return o->has_arg == required_argument;
        return false;
    }
    for (const char *k = a + 1; *k; k++) {
        const char *s = strchr(shorts, *k);

        if (s && s[1] == ':')
            return k[1] == 0; /* -tT5000 holds its argument */
    }
    return false;
}

void ctl_id_first(int argc, char **argv, const char *shorts, const struct option *longs)
{
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];

        if (strcmp(a, "--") == 0)
            return;
        if (a[0] != '-' || a[1] == 0) {
            memmove(&argv[2], &argv[1], (size_t)(i - 1) * sizeof *argv);
            argv[1] = a;
            return;
        }
        if (takes_next(a, shorts, longs))
            i++;
    }
}
