/* sandboxctl template build NAME -f FILE [--context DIR] [--internet]: a template from a
 * build file (sandboxctl-buildfile.h), built here in the client from the daemon's methods:
 * sandbox.create from FROM's template (a 10-minute lease, renewed while the build runs),
 * each RUN a sandbox.exec streaming into our stdout and stderr (passed descriptors), each
 * COPY a tar stream through an exec's stdin_fd, then template.create with the ENV, WORKDIR
 * and USER seen as the template's defaults. A failing step, or Ctrl-C, destroys the sandbox;
 * a client that dies leaves it to its lease. The build file is checked, and its COPY
 * sources looked up in the context, before anything is created. */
#include "sandboxctl-build.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "sandboxctl-buildfile.h"

#define BUILD_TTL_S 600
#define BUILD_RENEW_S 120
#define BUILD_EXEC_TIMEOUT_MS (24 * 3600 * 1000) /* the largest exec timeout */
#define EXIT_INTERRUPTED 130

/* A file from a COPY into "$1" (a folder when "$3" is "dir", or an existing folder), named
 * "$4" there; "$2" is its name in the tar stream. */
#define COPY_FILE_SCRIPT                                                                           \
    "t=$(mktemp -d) || exit 1; tar -C \"$t\" -xpf - && { if [ -d \"$1\" ] || [ \"$3\" = dir ]; "   \
    "then mkdir -p \"$1\" && d=\"$1/$4\"; else mkdir -p \"$(dirname \"$1\")\" && d=\"$1\"; fi && " \
    "mv -f \"$t/$2\" \"$d\"; }; r=$?; rm -rf \"$t\"; exit $r"
#define COPY_DIR_SCRIPT "mkdir -p \"$1\" && exec tar -C \"$1\" -xpf -"
#define WORKDIR_SCRIPT                                                                             \
    "[ -d \"$1\" ] && exit 0; mkdir -p \"$1\" && { [ -z \"$2\" ] || chown \"$2\" \"$1\"; }"

struct build {
    struct ctl *c;
    const char *name, *file;
    char context[PATH_MAX];
    bool internet;
    struct buildfile bf;
    char id[80]; /* the sandbox; "" before its create */
    json_object *env;
    char *cwd, *user;
    struct sandboxd_client *side; /* renew and Ctrl-C's destroy during a call */
    time_t renewed;
    bool destroyed;
    size_t at; /* the step running */
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* A call on the side connection, saying nothing of a failure. */
static int side_call(struct build *b, const char *method, json_object *params)
{
    json_object *res = NULL;
    int r;

    if (!b->side && sandboxd_client_new(sandboxd_client_socket(b->c->client), &b->side) < 0) {
        json_object_put(params);
        return -ENOMEM;
    }
    r = sandboxd_call(b->side, method, params, &res);
    json_object_put(res);
    return r;
}

static void destroy(struct build *b)
{
    if (b->id[0] && !b->destroyed) {
        (void)side_call(b, "sandbox.destroy", id_params(b->id));
        b->destroyed = true;
    }
}

/* While a call waits: Ctrl-C destroys the sandbox (the call then fails), the lease is
 * renewed. */
static void tick(void *userdata)
{
    struct build *b = userdata;
    json_object *p;

    if (interrupted) {
        destroy(b);
        return;
    }
    if (b->id[0] && time(NULL) - b->renewed >= BUILD_RENEW_S) {
        p = id_params(b->id);
        json_object_object_add(p, "ttl_s", json_object_new_int64(BUILD_TTL_S));
        (void)side_call(b, "sandbox.renew", p);
        b->renewed = time(NULL);
    }
}

static int call(struct build *b, const char *method, json_object *params, const int *fds,
                size_t n_fds, json_object **ret)
{
    const struct ctl_wait w = {.tick = tick, .userdata = b};

    return ctl_call_fds(b->c, method, params, fds, n_fds, &w, ret);
}

static void step_error(const struct build *b, size_t i, const char *fmt, const char *what)
{
    const struct buildfile_step *s = &b->bf.steps[i];

    fprintf(stderr, "sandboxctl: template build: step %zu/%zu (%s:%u, %s) failed: ", i + 1,
            b->bf.n_steps, b->file, s->line, buildfile_kind_name(s->kind));
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
}

/* p relative to base ("/" when NULL): a new string. */
static char *resolve(const char *base, const char *p)
{
    char *out;

    if (p[0] == '/')
        return strdup(p);
    if (!base || !strcmp(base, "/"))
        return asprintf(&out, "/%s", p) < 0 ? NULL : out;
    return asprintf(&out, "%s/%s", base, p) < 0 ? NULL : out;
}

/* An exec of argv (NULL-terminated) as root with fd (or -1) as its stdin: 0 when it exited
 * 0, else says why (its stderr) and returns 1. */
static int remote(struct build *b, size_t i, const char *const *argv, int fd)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *p = id_params(b->id), *a = json_object_new_array(), *v;
    int r;

    for (size_t k = 0; argv[k]; k++)
        json_object_array_add(a, json_object_new_string(argv[k]));
    json_object_object_add(p, "argv", a);
    json_object_object_add(p, "timeout_ms", json_object_new_int64(BUILD_EXEC_TIMEOUT_MS));
    if (fd >= 0)
        json_object_object_add(p, "stdin_fd", json_object_new_int64(0));
    json_object_object_add(p, "user", json_object_new_string("0")); /* not FROM's default */
    r = call(b, "sandbox.exec", p, &fd, fd >= 0, &res);
    if (r < 0) {
        step_error(b, i, "%s", "the call failed");
        return 1;
    }
    if (json_object_object_get_ex(res, "exit_code", &v) && v && json_object_get_int(v) == 0)
        return 0;
    if (json_object_object_get_ex(res, "stderr", &v) && v)
        fputs(json_object_get_string(v), stderr);
    step_error(b, i, "%s", "the command in the sandbox failed");
    return 1;
}

/* The ENV, WORKDIR and USER seen so far onto the params of an exec (or of the defaults). */
static void add_state(const struct build *b, json_object *p)
{
    if (json_object_object_length(b->env) > 0)
        json_object_object_add(p, "env", json_object_get(b->env));
    if (b->cwd)
        json_object_object_add(p, "cwd", json_object_new_string(b->cwd));
    if (b->user)
        json_object_object_add(p, "user", json_object_new_string(b->user));
}

static int step_run(struct build *b, size_t i)
{
    const struct buildfile_step *s = &b->bf.steps[i];
    _cleanup_json_ json_object *res = NULL;
    json_object *p = id_params(b->id), *a = json_object_new_array(), *v;
    const int fds[2] = {STDOUT_FILENO, STDERR_FILENO};
    char code[32];

    if (s->words)
        for (size_t k = 0; k < s->n_words; k++)
            json_object_array_add(a, json_object_new_string(s->words[k]));
    else {
        json_object_array_add(a, json_object_new_string("/bin/sh"));
        json_object_array_add(a, json_object_new_string("-c"));
        json_object_array_add(a, json_object_new_string(s->arg));
    }
    json_object_object_add(p, "argv", a);
    add_state(b, p);
    json_object_object_add(p, "timeout_ms", json_object_new_int64(BUILD_EXEC_TIMEOUT_MS));
    json_object_object_add(p, "stdout_fd", json_object_new_int64(0));
    json_object_object_add(p, "stderr_fd", json_object_new_int64(1));
    fflush(stdout);
    if (call(b, "sandbox.exec", p, fds, 2, &res) < 0) {
        step_error(b, i, "%s", "the call failed");
        return 1;
    }
    if (json_object_object_get_ex(res, "timed_out", &v) && json_object_get_boolean(v)) {
        step_error(b, i, "%s", "timed out");
        return 1;
    }
    if (!json_object_object_get_ex(res, "exit_code", &v) || !v) {
        step_error(b, i, "%s", "killed by a signal");
        return 1;
    }
    if (json_object_get_int(v) != 0) {
        snprintf(code, sizeof code, "%d", json_object_get_int(v));
        step_error(b, i, "exit status %s", code);
        return 1;
    }
    return 0;
}

/* One COPY source (its path in the context: local) to dest (absolute; a folder when
 * to_dir). */
static int copy_one(struct build *b, size_t i, const char *src, const char *dest, bool to_dir)
{
    _cleanup_free_ char *local = NULL, *real = NULL, *dir = NULL, *base = NULL, *sb = NULL;
    struct stat st;
    int fd, r, t;
    pid_t pid;

    if (asprintf(&local, "%s/%s", b->context, src) < 0 || !(real = realpath(local, NULL)) ||
        stat(real, &st) < 0 || !(dir = strdup(real)) || !(base = strdup(real)) ||
        !(sb = strdup(src))) {
        step_error(b, i, "cannot read %s", src);
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        char *tar[] = {"tar", "--owner=0", "--group=0", "--numeric-owner", "-C", real, "-cf",
                       "-",   ".",         NULL};
        const char *argv[] = {"sh", "-c", COPY_DIR_SCRIPT, "sh", dest, NULL};

        r = ctl_spawn_tar(tar, true, &pid, &fd);
        if (r >= 0) {
            r = remote(b, i, argv, fd);
            close(fd);
        }
    } else {
        char *tar[] = {"tar",        "--owner=0", "--group=0", "--numeric-owner", "-C",
                       dirname(dir), "-cf",       "-",         basename(base),    NULL};
        const char *argv[] = {"sh", "-c",   COPY_FILE_SCRIPT,    "sh",
                              dest, tar[8], to_dir ? "dir" : "", basename(sb),
                              NULL};

        r = ctl_spawn_tar(tar, true, &pid, &fd);
        if (r >= 0) {
            r = remote(b, i, argv, fd);
            close(fd);
        }
    }
    if (r < 0) {
        step_error(b, i, "cannot run tar: %s", strerror(-r));
        return 1;
    }
    t = ctl_wait_tar(pid);
    if (r == 0 && t != 0) {
        step_error(b, i, "%s", "the local tar failed");
        return 1;
    }
    return r;
}

static int step_copy(struct build *b, size_t i)
{
    const struct buildfile_step *s = &b->bf.steps[i];
    const char *d = s->words[s->n_words - 1];
    _cleanup_free_ char *dest = resolve(b->cwd, d);
    bool to_dir = s->n_words > 2 || d[strlen(d) - 1] == '/';

    if (!dest)
        return 1;
    for (size_t k = 0; k + 1 < s->n_words; k++)
        if (copy_one(b, i, s->words[k], dest, to_dir) != 0)
            return 1;
    return 0;
}

static int step_workdir(struct build *b, size_t i)
{
    char *cwd = resolve(b->cwd, b->bf.steps[i].arg);
    const char *argv[] = {"sh", "-c", WORKDIR_SCRIPT, "sh", cwd, b->user ? b->user : "", NULL};

    if (!cwd)
        return 1;
    free(b->cwd);
    b->cwd = cwd;
    return remote(b, i, argv, -1);
}

/* USER: the user must exist in the sandbox (a command runs as it). */
static int step_user(struct build *b, size_t i)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *p = id_params(b->id), *a = json_object_new_array();

    free(b->user);
    b->user = strdup(b->bf.steps[i].arg);
    json_object_array_add(a, json_object_new_string("true"));
    json_object_object_add(p, "argv", a);
    json_object_object_add(p, "user", json_object_new_string(b->bf.steps[i].arg));
    if (!b->user || call(b, "sandbox.exec", p, NULL, 0, &res) < 0) {
        step_error(b, i, "%s", "no such user in the sandbox");
        return 1;
    }
    return 0;
}

static int step_env(struct build *b, size_t i)
{
    const struct buildfile_step *s = &b->bf.steps[i];

    for (size_t k = 0; k + 1 < s->n_words; k += 2)
        json_object_object_add(b->env, s->words[k], json_object_new_string(s->words[k + 1]));
    return 0;
}

/* Every COPY source exists in the context and, links followed, stays in it. */
static int check_sources(struct build *b)
{
    size_t n = strlen(b->context);

    for (size_t i = 0; i < b->bf.n_steps; i++) {
        const struct buildfile_step *s = &b->bf.steps[i];

        for (size_t k = 0; s->kind == BUILDFILE_COPY && k + 1 < s->n_words; k++) {
            _cleanup_free_ char *local = NULL, *real = NULL;

            if (asprintf(&local, "%s/%s", b->context, s->words[k]) < 0)
                return -ENOMEM;
            real = realpath(local, NULL);
            if (!real) {
                fprintf(stderr, "sandboxctl: %s:%u: COPY source \"%s\": %s in the context %s\n",
                        b->file, s->line, s->words[k], strerror(errno), b->context);
                return -ENOENT;
            }
            if (strcmp(real, b->context) != 0 &&
                (strncmp(real, b->context, n) != 0 || (n > 1 && real[n] != '/'))) {
                fprintf(stderr,
                        "sandboxctl: %s:%u: COPY source \"%s\" is outside the context (a "
                        "symbolic link leading to %s)\n",
                        b->file, s->line, s->words[k], real);
                return -EPERM;
            }
        }
    }
    return 0;
}

/* FROM's defaults (t a template object) as the build's starting ENV, WORKDIR and USER, as
 * a base image's are. */
static void inherit(struct build *b, json_object *t)
{
    json_object *d, *v;

    if (!json_object_object_get_ex(t, "defaults", &d) || !json_object_is_type(d, json_type_object))
        return;
    if (json_object_object_get_ex(d, "env", &v) && json_object_is_type(v, json_type_object)) {
        json_object_object_foreach(v, name, val)
            json_object_object_add(b->env, name, json_object_get(val));
    }
    if (json_object_object_get_ex(d, "cwd", &v) && json_object_is_type(v, json_type_string))
        b->cwd = strdup(json_object_get_string(v));
    if (json_object_object_get_ex(d, "user", &v) && json_object_is_type(v, json_type_string))
        b->user = strdup(json_object_get_string(v));
}

/* The name is free (a template of that name exists: refused before anything is made); FROM's
 * defaults are inherited. */
static int check_templates(struct build *b)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *a, *v;

    if (ctl_call(b->c, "template.list", NULL, &res) < 0)
        return -EREMOTE;
    if (!json_object_object_get_ex(res, "templates", &a))
        return 0;
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        json_object *t = json_object_array_get_idx(a, i);
        const char *n = json_object_object_get_ex(t, "name", &v) ? json_object_get_string(v) : "";

        if (strcmp(n, b->name) == 0) {
            fprintf(stderr, "sandboxctl: template build: a template named %s exists\n", b->name);
            return -EEXIST;
        }
        if (strcmp(n, b->bf.steps[0].arg) == 0)
            inherit(b, t);
    }
    return 0;
}

static int create(struct build *b)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *p = json_object_new_object(), *v;

    json_object_object_add(p, "template", json_object_new_string(b->bf.steps[0].arg));
    json_object_object_add(p, "ttl_s", json_object_new_int64(BUILD_TTL_S));
    json_object_object_add(p, "hostname", json_object_new_string("build"));
    if (b->internet)
        json_object_object_add(p, "internet", json_object_new_boolean(true));
    if (call(b, "sandbox.create", p, NULL, 0, &res) < 0) {
        step_error(b, 0, "%s", "cannot create the build sandbox");
        return 1;
    }
    if (!json_object_object_get_ex(res, "id", &v))
        return 1;
    snprintf(b->id, sizeof b->id, "%s", json_object_get_string(v));
    b->renewed = time(NULL);
    printf(" ---> sandbox %s\n", b->id);
    return 0;
}

/* template.create with the defaults: the sandbox becomes the template. */
static int commit(struct build *b)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *p = id_params(b->id), *d = json_object_new_object(), *t, *v;

    json_object_object_add(p, "name", json_object_new_string(b->name));
    add_state(b, d);
    json_object_object_add(p, "defaults", d);
    printf("Committing template %s\n", b->name);
    fflush(stdout);
    if (call(b, "template.create", p, NULL, 0, &res) < 0)
        return 1;
    b->destroyed = true; /* its container is the template now */
    if (b->c->json)
        print_json(res);
    else if (json_object_object_get_ex(res, "template", &t) &&
             json_object_object_get_ex(t, "vmid", &v))
        printf("Built template %s (container %d)\n", b->name, json_object_get_int(v));
    return 0;
}

static int run_steps(struct build *b)
{
    static int (*const run[])(struct build *, size_t) = {
        [BUILDFILE_RUN] = step_run,   [BUILDFILE_COPY] = step_copy,
        [BUILDFILE_ENV] = step_env,   [BUILDFILE_WORKDIR] = step_workdir,
        [BUILDFILE_USER] = step_user,
    };

    for (size_t i = 0; i < b->bf.n_steps; i++) {
        const struct buildfile_step *s = &b->bf.steps[i];

        b->at = i;
        if (interrupted)
            return EXIT_INTERRUPTED;
        printf("Step %zu/%zu: %s\n", i + 1, b->bf.n_steps, s->text);
        fflush(stdout);
        if (i == 0 ? create(b) : run[s->kind](b, i)) {
            if (interrupted)
                break;
            return 1;
        }
    }
    if (interrupted)
        return EXIT_INTERRUPTED;
    return commit(b);
}

static const struct option build_opts[] = {
    {"file", required_argument, NULL, 'f'},
    {"context", required_argument, NULL, 'C'},
    {"internet", no_argument, NULL, 'i'},
    {},
};

/* The options into b; the build file read into *ret_text. Returns 0 or an exit status. */
static int options(struct build *b, int argc, char **argv, char **ret_text, size_t *ret_len)
{
    _cleanup_free_ char *dir = NULL;
    const char *context = NULL;
    FILE *f;
    int opt;

    optind = 0;
    while ((opt = getopt_long(argc, argv, "f:C:", build_opts, NULL)) >= 0) {
        if (opt == 'f')
            b->file = optarg;
        else if (opt == 'C')
            context = optarg;
        else if (opt == 'i')
            b->internet = true;
        else
            return EXIT_USAGE;
    }
    if (optind + 1 != argc || !b->file) {
        fprintf(stderr, "sandboxctl: usage: template build NAME -f FILE [--context DIR] "
                        "[--internet]\n");
        return EXIT_USAGE;
    }
    b->name = argv[optind];
    if (!context) /* the build file's folder */
        context = (dir = strdup(b->file)) ? dirname(dir) : ".";
    if (!realpath(context, b->context)) {
        fprintf(stderr, "sandboxctl: --context %s: %s\n", context, strerror(errno));
        return 1;
    }
    f = fopen(b->file, "re");
    if (!f) {
        fprintf(stderr, "sandboxctl: %s: %s\n", b->file, strerror(errno));
        return 1;
    }
    *ret_text = malloc(BUILDFILE_MAX_BYTES + 1);
    *ret_len = *ret_text ? fread(*ret_text, 1, BUILDFILE_MAX_BYTES + 1, f) : 0;
    fclose(f);
    return *ret_text ? 0 : 1;
}

static void on_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: a wait wakes up */

    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int ctl_template_build(struct ctl *c, int argc, char **argv)
{
    struct build b = {.c = c};
    struct buildfile_error err;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = options(&b, argc, argv, &text, &len);

    if (r != 0)
        return r;
    if (buildfile_parse(text, len, &b.bf, &err) < 0) {
        if (err.line)
            fprintf(stderr, "sandboxctl: %s:%u: %s\n", b.file, err.line, err.message);
        else
            fprintf(stderr, "sandboxctl: %s: %s\n", b.file, err.message);
        return 1;
    }
    b.env = json_object_new_object();
    r = check_sources(&b) < 0 || check_templates(&b) < 0 ? 1 : 0;
    if (r == 0) {
        on_signals();
        r = run_steps(&b);
    }
    if (r == EXIT_INTERRUPTED || (r != 0 && interrupted)) {
        fprintf(stderr, "sandboxctl: template build: interrupted at step %zu/%zu (%s:%u)\n",
                b.at + 1, b.bf.n_steps, b.file, b.bf.steps[b.at].line);
        r = EXIT_INTERRUPTED;
    }
    if (r != 0)
        destroy(&b); /* nothing left behind */
    json_object_put(b.env);
    free(b.cwd);
    free(b.user);
    buildfile_done(&b.bf);
    sandboxd_client_free(b.side);
    return r;
}
