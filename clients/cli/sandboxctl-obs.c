/* sandboxctl metrics and events. See sandboxctl-obs.h. */
#include "sandboxctl-obs.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "util.h"
#include "rpc.h"

#define EVENTS_LINE_MAX (1024u * 1024) /* longest line accepted from the daemon */
#define EXIT_RPC 2

/* A label value or HELP text with the exposition format's escapes (quotes only in
 * label values). */
static void put_escaped(FILE *out, const char *s, bool quotes)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", out);
        else if (*s == '\n')
            fputs("\\n", out);
        else if (*s == '"' && quotes)
            fputs("\\\"", out);
        else
            fputc(*s, out);
    }
}

static void put_number(FILE *out, double v)
{
    fprintf(out, "%.15g", v);
}

/* {k="v",...} from a labels object, plus le when not NULL; nothing when empty. */
static void put_labels(FILE *out, json_object *labels, const char *le)
{
    bool first = true;

    json_object_object_foreach(labels, k, v)
    {
        fputs(first ? "{" : ",", out);
        first = false;
        fprintf(out, "%s=\"", k);
        put_escaped(out, json_object_get_string(v), true);
        fputc('"', out);
    }
    if (le) {
        fputs(first ? "{" : ",", out);
        first = false;
        fprintf(out, "le=\"%s\"", le);
    }
    if (!first)
        fputc('}', out);
}

static int put_histogram(FILE *out, const char *name, json_object *s, json_object *labels)
{
    json_object *buckets, *count, *sum;
    char le[32];

    if (!json_object_object_get_ex(s, "buckets", &buckets) ||
        !json_object_is_type(buckets, json_type_array) ||
        !json_object_object_get_ex(s, "count", &count) ||
        !json_object_object_get_ex(s, "sum", &sum))
        return -EBADMSG;
    for (size_t i = 0; i < json_object_array_length(buckets); i++) {
        json_object *b = json_object_array_get_idx(buckets, i), *bl, *bc;

        if (!json_object_object_get_ex(b, "le", &bl) || !json_object_object_get_ex(b, "count", &bc))
            return -EBADMSG;
        snprintf(le, sizeof le, "%.15g", json_object_get_double(bl));
        fprintf(out, "%s_bucket", name);
        put_labels(out, labels, le);
        fprintf(out, " %" PRId64 "\n", json_object_get_int64(bc));
    }
    fprintf(out, "%s_bucket", name);
    put_labels(out, labels, "+Inf");
    fprintf(out, " %" PRId64 "\n%s_sum", json_object_get_int64(count), name);
    put_labels(out, labels, NULL);
    fputc(' ', out);
    put_number(out, json_object_get_double(sum));
    fprintf(out, "\n%s_count", name);
    put_labels(out, labels, NULL);
    fprintf(out, " %" PRId64 "\n", json_object_get_int64(count));
    return 0;
}

static int put_family(FILE *out, json_object *m)
{
    json_object *name, *type, *help, *samples;
    const char *n, *t;

    if (!json_object_object_get_ex(m, "name", &name) ||
        !json_object_object_get_ex(m, "type", &type) ||
        !json_object_object_get_ex(m, "samples", &samples) ||
        !json_object_is_type(samples, json_type_array))
        return -EBADMSG;
    n = json_object_get_string(name);
    t = json_object_get_string(type);
    if (json_object_object_get_ex(m, "help", &help)) {
        fprintf(out, "# HELP %s ", n);
        put_escaped(out, json_object_get_string(help), false);
        fputc('\n', out);
    }
    fprintf(out, "# TYPE %s %s\n", n, t);
    for (size_t i = 0; i < json_object_array_length(samples); i++) {
        json_object *s = json_object_array_get_idx(samples, i), *labels = NULL, *value;

        json_object_object_get_ex(s, "labels", &labels);
        if (strcmp(t, "histogram") == 0) {
            if (put_histogram(out, n, s, labels) < 0)
                return -EBADMSG;
            continue;
        }
        if (!json_object_object_get_ex(s, "value", &value))
            return -EBADMSG;
        fputs(n, out);
        put_labels(out, labels, NULL);
        fputc(' ', out);
        put_number(out, json_object_get_double(value));
        fputc('\n', out);
    }
    return 0;
}

int ctl_metrics_print(json_object *result, FILE *out)
{
    json_object *metrics;

    if (!json_object_object_get_ex(result, "metrics", &metrics) ||
        !json_object_is_type(metrics, json_type_array))
        return -EBADMSG;
    for (size_t i = 0; i < json_object_array_length(metrics); i++)
        if (put_family(out, json_object_array_get_idx(metrics, i)) < 0)
            return -EBADMSG;
    return fflush(out) == 0 ? 0 : -errno;
}

/* ---- events ---- */

static const char *str(json_object *o, const char *key)
{
    json_object *v;

    if (!json_object_object_get_ex(o, key, &v) || !v)
        return NULL;
    return json_object_get_string(v);
}

static void print_event(json_object *p)
{
    const char *old = str(p, "old_state"), *reason = str(p, "reason");

    printf("%s %s %s%s%s (%s%s%s)", strna(str(p, "at")), strna(str(p, "id")), old ? old : "",
           old ? " -> " : "", strna(str(p, "state")), str(p, "old_step") ? str(p, "old_step") : "",
           str(p, "old_step") ? " -> " : "", strna(str(p, "step")));
    printf(" node=%s", strna(str(p, "node")));
    if (str(p, "vmid"))
        printf(" vmid=%s", str(p, "vmid"));
    if (reason)
        printf(" reason=\"%s\"", reason);
    putchar('\n');
}

/* Handles one line; returns 1 to go on, else the exit status. */
static int events_line(const char *line, bool json)
{
    _cleanup_json_ json_object *o = json_tokener_parse(line);
    json_object *m, *p, *err, *msg, *data, *reason;

    if (!o || !json_object_is_type(o, json_type_object)) {
        fprintf(stderr, "sandboxctl: the daemon sent something that is not JSON-RPC\n");
        return 1;
    }
    if (json_object_object_get_ex(o, "method", &m)) {
        if (strcmp(json_object_get_string(m), "daemon.subscribed") == 0) {
            json_object *all = NULL;
            if (json_object_object_get_ex(o, "params", &p))
                json_object_object_get_ex(p, "all", &all);
            fprintf(stderr, "sandboxctl: subscribed (%s)\n",
                    all && json_object_get_boolean(all) ? "every sandbox" : "your sandboxes");
            return 1;
        }
        if (strcmp(json_object_get_string(m), "sandbox.event") != 0 ||
            !json_object_object_get_ex(o, "params", &p))
            return 1; /* a notification this client does not know */
        if (json)
            printf("%s\n", json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN));
        else
            print_event(p);
        fflush(stdout);
        return 1;
    }
    if (json_object_object_get_ex(o, "error", &err) && err) {
        msg = data = reason = NULL;
        json_object_object_get_ex(err, "message", &msg);
        if (json_object_object_get_ex(err, "data", &data))
            json_object_object_get_ex(data, "reason", &reason);
        fprintf(stderr, "sandboxctl: daemon.subscribe: %s%s%s\n",
                msg ? json_object_get_string(msg) : "error", reason ? ": " : "",
                reason ? json_object_get_string(reason) : "");
        return EXIT_RPC;
    }
    return 0; /* a result: the subscription ended */
}

int ctl_events_run(int fd, bool json)
{
    static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.subscribe\"}\n";
    _cleanup_free_ char *buf = malloc(EVENTS_LINE_MAX);
    size_t len = 0;
    int r;

    if (!buf)
        return 1;
    r = write_all(fd, req, sizeof req - 1);
    if (r < 0) {
        fprintf(stderr, "sandboxctl: sending daemon.subscribe: %s\n", strerror(-r));
        return 1;
    }
    for (;;) {
        char *nl;
        ssize_t k = read(fd, buf + len, EVENTS_LINE_MAX - len);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            fprintf(stderr, "sandboxctl: %s\n",
                    k == 0 ? "connection closed by the daemon" : strerror(errno));
            return 1;
        }
        len += (size_t)k;
        while ((nl = memchr(buf, '\n', len))) {
            *nl = '\0';
            r = events_line(buf, json);
            if (r != 1)
                return r;
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len);
        }
        if (len == EVENTS_LINE_MAX) {
            fprintf(stderr, "sandboxctl: a line from the daemon is too long\n");
            return 1;
        }
    }
}
