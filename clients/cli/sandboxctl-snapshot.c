/* sandboxctl's snapshot commands. See sandboxctl-snapshot.h.
 *
 *   snapshot ID NAME          sandbox.snapshot
 *   snapshots ID              sandbox.snapshots: one line per snapshot, oldest first
 *   rollback ID NAME          sandbox.rollback: the sandbox, ready again
 *   snapshot-delete ID NAME   sandbox.snapshot_delete
 *   fork ID [--count N] [--snapshot NAME] [--ttl S]
 *                             sandbox.fork: one line per child ("ID STATE IP"); exit 2 when
 *                             some failed (their count and reason on stderr)
 *   pause ID                  sandbox.pause: the sandbox, paused
 *   resume ID                 sandbox.resume: the sandbox, ready again */
#include "sandboxctl-snapshot.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *get_str(json_object *o, const char *name)
{
    json_object *v;

    return json_object_object_get_ex(o, name, &v) ? json_object_get_string(v) : "";
}

/* created_at as UTC time. */
static void print_time(json_object *snap)
{
    json_object *v;
    time_t t = json_object_object_get_ex(snap, "created_at", &v) ? json_object_get_int64(v) : 0;
    struct tm tm;
    char buf[32];

    if (gmtime_r(&t, &tm) && strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) > 0)
        printf("%s", buf);
}

static void print_taken(json_object *o)
{
    json_object *s;

    if (!json_object_object_get_ex(o, "snapshot", &s))
        return;
    printf("%s ", get_str(s, "name"));
    print_time(s);
    printf("\n");
}

static void print_list(json_object *o)
{
    json_object *a;

    if (!json_object_object_get_ex(o, "snapshots", &a))
        return;
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        json_object *s = json_object_array_get_idx(a, i);

        printf("%-40s ", get_str(s, "name"));
        print_time(s);
        printf("\n");
    }
}

static void print_rolled_back(json_object *sb)
{
    printf("%s %s %s\n", get_str(sb, "id"), get_str(sb, "state"), get_str(sb, "ip"));
}

static void print_deleted(json_object *o)
{
    printf("%s deleted\n", get_str(o, "name"));
}

static const struct {
    const char *cmd, *method;
    bool named; /* ID NAME, else ID alone */
    void (*human)(json_object *result);
} commands[] = {
    {"snapshot", "sandbox.snapshot", true, print_taken},
    {"snapshots", "sandbox.snapshots", false, print_list},
    {"rollback", "sandbox.rollback", true, print_rolled_back},
    {"snapshot-delete", "sandbox.snapshot_delete", true, print_deleted},
    {"pause", "sandbox.pause", false, print_rolled_back},
    {"resume", "sandbox.resume", false, print_rolled_back},
};

static int forked_status;

static void print_forked(json_object *o)
{
    json_object *a, *v;

    if (json_object_object_get_ex(o, "sandboxes", &a))
        for (size_t i = 0; i < json_object_array_length(a); i++)
            print_rolled_back(json_object_array_get_idx(a, i));
    if (json_object_object_get_ex(o, "failed", &v)) {
        fprintf(stderr, "sandboxctl: %s\n", get_str(o, "reason"));
        forked_status = EXIT_RPC;
    }
}

/* fork ID [--count N] [--snapshot NAME] [--ttl S] */
static int fork_main(struct ctl *c, int argc, char **argv)
{
    json_object *p;
    int64_t x;
    int r;

    if (argc < 2 || argc % 2) {
        fprintf(stderr, "sandboxctl: usage: fork ID [--count N] [--snapshot NAME] [--ttl S]\n");
        return EXIT_USAGE;
    }
    p = id_params(argv[1]);
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];

        if (strcmp(o, "--snapshot") == 0)
            json_object_object_add(p, "snapshot", json_object_new_string(v));
        else if ((strcmp(o, "--count") == 0 && parse_int(v, "N", 1, 32, &x) == 0) ||
                 (strcmp(o, "--ttl") == 0 && parse_int(v, "S", 1, INT32_MAX, &x) == 0))
            json_object_object_add(p, o[2] == 'c' ? "count" : "ttl_s", json_object_new_int64(x));
        else {
            if (strcmp(o, "--count") && strcmp(o, "--ttl"))
                fprintf(stderr, "sandboxctl: fork: unknown option '%s'\n", o);
            json_object_put(p);
            return EXIT_USAGE;
        }
    }
    forked_status = 0;
    r = ctl_run(c, "sandbox.fork", p, print_forked);
    return r ? r : forked_status;
}

bool ctl_snapshot_is_command(const char *cmd)
{
    if (strcmp(cmd, "fork") == 0)
        return true;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].cmd) == 0)
            return true;
    return false;
}

int ctl_snapshot_main(struct ctl *c, int argc, char **argv)
{
    if (strcmp(argv[0], "fork") == 0)
        return fork_main(c, argc, argv);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        json_object *p;

        if (strcmp(argv[0], commands[i].cmd) != 0)
            continue;
        if (argc != (commands[i].named ? 3 : 2)) {
            fprintf(stderr, "sandboxctl: usage: %s ID%s\n", commands[i].cmd,
                    commands[i].named ? " NAME" : "");
            return EXIT_USAGE;
        }
        p = id_params(argv[1]);
        if (commands[i].named)
            json_object_object_add(p, "name", json_object_new_string(argv[2]));
        return ctl_run(c, commands[i].method, p, commands[i].human);
    }
    return EXIT_USAGE;
}
