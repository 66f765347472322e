/* The quickstart of docs/clients-c.md: a sandbox made, a command run in it, a file written
 * through a descriptor and read back, the sandbox destroyed. Build it against an installed
 * library with
 *
 *   cc quickstart.c $(pkg-config --cflags --libs sandboxd-client) -o quickstart
 */
#include <json-c/json.h>
#include <sandboxd-client.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Prints why the last call failed; returns 1 (the exit status). */
static int fail(struct sandboxd_client *c, const char *method)
{
    const struct sandboxd_error *e = sandboxd_client_error(c);

    fprintf(stderr, "%s: %s", method, e ? e->message : "failed");
    if (e && e->code)
        fprintf(stderr, " (%d)", e->code);
    if (e && e->reason)
        fprintf(stderr, ": %s", e->reason);
    fputc('\n', stderr);
    return 1;
}

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

/* Runs a command, writes a file from a pipe (a descriptor: no size limit, no base64) and
 * reads it back. */
static int work(struct sandboxd_client *c, const char *id)
{
    static const char page[] = "<h1>Hello</h1>";
    json_object *p = id_params(id), *res;
    int pipefd[2], r;

    json_object_object_add(p, "command", json_object_new_string("uname -s; echo to stderr >&2"));
    if (sandboxd_call(c, "sandbox.exec", p, &res) < 0)
        return fail(c, "sandbox.exec");
    printf("exit %s, stdout: %s", get_str(res, "exit_code"), get_str(res, "stdout"));
    json_object_put(res);

    if (pipe(pipefd) < 0)
        return 1;
    (void)!write(pipefd[1], page, strlen(page));
    close(pipefd[1]);
    p = id_params(id);
    json_object_object_add(p, "path", json_object_new_string("/root/index.html"));
    json_object_object_add(p, "content_fd", json_object_new_int(0)); /* fds[0] */
    r = sandboxd_call_fds(c, "file.write", p, &pipefd[0], 1, &res);
    close(pipefd[0]); /* the daemon closed its own copy */
    if (r < 0)
        return fail(c, "file.write");
    json_object_put(res);

    p = id_params(id);
    json_object_object_add(p, "path", json_object_new_string("/root/index.html"));
    if (sandboxd_call(c, "file.read", p, &res) < 0)
        return fail(c, "file.read");
    printf("read %s bytes: %s\n", get_str(res, "size"), get_str(res, "content"));
    json_object_put(res);
    return 0;
}

int main(void)
{
    struct sandboxd_client *c;
    json_object *p, *sb;
    char id[80];
    int status;

    if (sandboxd_client_new(NULL, &c) < 0) /* $SANDBOXD_SOCKET, else /run/sandboxd.sock */
        return 1;
    p = json_object_new_object();
    json_object_object_add(p, "ttl_s", json_object_new_int(600));
    if (sandboxd_call(c, "sandbox.create", p, &sb) < 0) {
        status = fail(c, "sandbox.create");
        sandboxd_client_free(c);
        return status;
    }
    snprintf(id, sizeof id, "%s", get_str(sb, "id"));
    printf("sandbox %s at %s\n", id, get_str(sb, "ip"));
    json_object_put(sb);

    status = work(c, id);

    if (sandboxd_call(c, "sandbox.destroy", id_params(id), &sb) < 0)
        status = fail(c, "sandbox.destroy");
    else
        json_object_put(sb);
    sandboxd_client_free(c);
    return status;
}
