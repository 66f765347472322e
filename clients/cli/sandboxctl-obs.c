/* sandboxctl metrics and events. See sandboxctl-obs.h. */
#include "sandboxctl-obs.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"

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

/* A notification on the subscribed connection: daemon.subscribed, then sandbox.event. */
static void on_event(const char *method, json_object *p, void *userdata)
{
    const bool *json = userdata;

    if (strcmp(method, "daemon.subscribed") == 0) {
        json_object *all = NULL;

        if (p)
            json_object_object_get_ex(p, "all", &all);
        fprintf(stderr, "sandboxctl: subscribed (%s)\n",
                all && json_object_get_boolean(all) ? "every sandbox" : "your sandboxes");
        return;
    }
    if (strcmp(method, "sandbox.event") != 0 || !p)
        return; /* a notification this client does not know */
    if (*json)
        printf("%s\n", json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN));
    else
        print_event(p);
    fflush(stdout);
}

int ctl_events_run(struct sandboxd_client *client, bool json)
{
    _cleanup_json_ json_object *res = NULL;
    const struct sandboxd_error *e;
    int r;

    /* daemon.subscribe answers only when the subscription ends; the events arrive as
     * notifications until then. */
    sandboxd_client_set_notify(client, on_event, &json);
    r = sandboxd_call(client, "daemon.subscribe", NULL, &res);
    sandboxd_client_set_notify(client, NULL, NULL);
    if (r >= 0)
        return 0;
    e = sandboxd_client_error(client);
    if (r == -EREMOTE) {
        fprintf(stderr, "sandboxctl: daemon.subscribe: %s%s%s\n", e->message, e->reason ? ": " : "",
                e->reason ? e->reason : "");
        return EXIT_RPC;
    }
    fprintf(stderr, "sandboxctl: %s\n", e ? e->message : strerror(-r));
    return 1;
}
