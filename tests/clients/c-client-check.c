/* Driven by test_c.py against pve-sim + sandboxd: libsandboxd-client (the shared library)
 * on a real daemon. One step per run, named by argv[1]; the socket is $SANDBOXD_SOCKET.
 *
 *   create              makes a sandbox, prints its id
 *   exercise ID         exec (plain, streamed as exec.output notifications), errors,
 *                       descriptors both ways, then the idle close (argv[3]: its length in
 *                       ms) and the next call on a new connection
 *   restart ID          a long exec while test_c.py restarts the daemon: its error, then
 *                       (after a line on stdin) the next call works
 *   destroy ID
 *
 * Exit status 0 when every check held; a failed check prints what and where. */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandboxd-client.h"

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "c-client-check:%d: %s failed\n", __LINE__, #x);                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static struct sandboxd_client *client;

static json_object *id_params(const char *id)
{
    json_object *p = json_object_new_object();

    json_object_object_add(p, "id", json_object_new_string(id));
    return p;
}

static const char *get_str(json_object *o, const char *key)
{
    json_object *v;

    return json_object_object_get_ex(o, key, &v) && v ? json_object_get_string(v) : "";
}

/* A call that must succeed; the caller puts the result. */
static json_object *must(const char *method, json_object *params)
{
    json_object *res = NULL;

    if (sandboxd_call(client, method, params, &res) < 0) {
        const struct sandboxd_error *e = sandboxd_client_error(client);

        fprintf(stderr, "c-client-check: %s: %s (%d)\n", method, e ? e->message : "?",
                e ? e->code : 0);
        exit(1);
    }
    return res;
}

struct stream {
    char out[256];
    size_t n;
    int notes;
};

static void on_output(const char *method, json_object *params, void *userdata)
{
    struct stream *s = userdata;
    const char *d = get_str(params, "data");

    if (strcmp(method, "exec.output") != 0 || strcmp(get_str(params, "stream"), "stdout") != 0)
        return;
    s->notes++;
    s->n += (size_t)snprintf(s->out + s->n, sizeof s->out - s->n, "%s", d);
}

static void exec_checks(const char *id)
{
    struct stream s = {};
    json_object *p = id_params(id), *res;

    json_object_object_add(p, "command", json_object_new_string("echo out; echo err >&2; exit 3"));
    res = must("sandbox.exec", p);
    CHECK(strcmp(get_str(res, "stdout"), "out\n") == 0);
    CHECK(strcmp(get_str(res, "stderr"), "err\n") == 0);
    CHECK(strcmp(get_str(res, "exit_code"), "3") == 0);
    json_object_put(res);
    /* streamed: the output arrives as notifications while the call waits */
    sandboxd_client_set_notify(client, on_output, &s);
    p = id_params(id);
    json_object_object_add(p, "command", json_object_new_string("echo one; sleep 0.3; echo two"));
    json_object_object_add(p, "stream", json_object_new_boolean(1));
    res = must("sandbox.exec", p);
    sandboxd_client_set_notify(client, NULL, NULL);
    CHECK(s.notes >= 2);
    CHECK(strcmp(s.out, "one\ntwo\n") == 0);
    json_object_put(res);
}

static void error_checks(const char *id)
{
    json_object *res = NULL, *p = id_params("sb-nosuchthing");
    const struct sandboxd_error *e;

    CHECK(sandboxd_call(client, "sandbox.get", p, &res) == -EREMOTE);
    e = sandboxd_client_error(client);
    CHECK(e && e->code == -32001 && e->reason && e->object);
    CHECK(sandboxd_call(client, "no.such.method", NULL, &res) == -EREMOTE);
    CHECK(sandboxd_client_error(client)->code == -32601);
    p = id_params(id);
    json_object_object_add(p, "command", json_object_new_string(""));
    CHECK(sandboxd_call(client, "sandbox.exec", p, &res) == -EREMOTE);
    e = sandboxd_client_error(client);
    CHECK(e->code == -32602 && strcmp(get_str(e->data, "param"), "command") == 0);
}

/* 3 MiB into the sandbox from a file and back into another, through descriptors. */
static void fd_checks(const char *id)
{
    char in[] = "/tmp/c-client-in-XXXXXX", out[] = "/tmp/c-client-out-XXXXXX";
    int fi = mkstemp(in), fo = mkstemp(out), r;
    json_object *p, *res;
    static char block[65536];
    char *a, *b;

    CHECK(fi >= 0 && fo >= 0);
    for (size_t i = 0; i < sizeof block; i++)
        block[i] = (char)(i * 7 + i / 251);
    for (int i = 0; i < 48; i++)
        CHECK(write(fi, block, sizeof block) == (ssize_t)sizeof block);
    CHECK(lseek(fi, 0, SEEK_SET) == 0);
    p = id_params(id);
    json_object_object_add(p, "path", json_object_new_string("/root/c-blob"));
    json_object_object_add(p, "content_fd", json_object_new_int(0));
    r = sandboxd_call_fds(client, "file.write", p, &fi, 1, &res);
    CHECK(r == 0 && json_object_get_int64(json_object_object_get(res, "bytes")) == 48 * 65536);
    json_object_put(res);
    p = id_params(id);
    json_object_object_add(p, "path", json_object_new_string("/root/c-blob"));
    json_object_object_add(p, "to_fd", json_object_new_int(0));
    r = sandboxd_call_fds(client, "file.read", p, &fo, 1, &res);
    CHECK(r == 0 && json_object_get_int64(json_object_object_get(res, "bytes")) == 48 * 65536);
    json_object_put(res);
    a = malloc(48 * 65536);
    b = malloc(48 * 65536);
    CHECK(a && b && pread(fi, a, 48 * 65536, 0) == 48 * 65536);
    CHECK(pread(fo, b, 48 * 65536, 0) == 48 * 65536 && memcmp(a, b, 48 * 65536) == 0);
    free(a);
    free(b);
    close(fi);
    close(fo);
    unlink(in);
    unlink(out);
}

static void exercise(const char *id, long idle_ms)
{
    struct timespec t = {.tv_sec = idle_ms / 1000, .tv_nsec = (idle_ms % 1000) * 1000000};
    json_object *p, *res;
    int fd;

    exec_checks(id);
    error_checks(id);
    fd_checks(id);
    /* the daemon closes the idle connection; the next call opens a new one */
    fd = sandboxd_client_fd(client);
    CHECK(fd >= 0);
    nanosleep(&t, NULL);
    p = id_params(id);
    json_object_object_add(p, "command", json_object_new_string("echo again"));
    res = must("sandbox.exec", p);
    CHECK(strcmp(get_str(res, "stdout"), "again\n") == 0);
    json_object_put(res);
    printf("reconnected after the idle close\n");
}

static void restart(const char *id)
{
    json_object *p = id_params(id), *res = NULL;
    const struct sandboxd_error *e;
    char line[16];
    int r;

    json_object_object_add(p, "command", json_object_new_string("sleep 30"));
    printf("running\n");
    fflush(stdout);
    r = sandboxd_call(client, "sandbox.exec", p, &res);
    e = sandboxd_client_error(client);
    /* the connection lost, or the daemon's own "shutting down" */
    CHECK(r == -ECONNRESET || (r == -EREMOTE && e->code == -32011));
    printf("in flight across the restart: %d %s\n", r, e->message);
    fflush(stdout);
    CHECK(fgets(line, sizeof line, stdin)); /* the daemon is up again */
    p = id_params(id);
    json_object_object_add(p, "command", json_object_new_string("echo after"));
    res = must("sandbox.exec", p);
    CHECK(strcmp(get_str(res, "stdout"), "after\n") == 0);
    json_object_put(res);
}

int main(int argc, char **argv)
{
    json_object *res, *p;

    CHECK(argc >= 2);
    CHECK(sandboxd_client_new(NULL, &client) == 0);
    if (strcmp(argv[1], "create") == 0) {
        p = json_object_new_object();
        json_object_object_add(p, "memory_mb", json_object_new_int(256));
        res = must("sandbox.create", p);
        CHECK(strcmp(get_str(res, "state"), "ready") == 0);
        printf("%s\n", get_str(res, "id"));
        json_object_put(res);
    } else if (strcmp(argv[1], "exercise") == 0 && argc == 4)
        exercise(argv[2], atol(argv[3]));
    else if (strcmp(argv[1], "restart") == 0 && argc == 3)
        restart(argv[2]);
    else if (strcmp(argv[1], "destroy") == 0 && argc == 3)
        json_object_put(must("sandbox.destroy", id_params(argv[2])));
    else
        CHECK(!"a known step");
    sandboxd_client_free(client);
    return 0;
}
