/* sandboxctl's volume commands. See sandboxctl-volume.h.
 *
 *   volume create NAME SIZE_GB   volume.create
 *   volume list                  volume.list: one line per volume
 *   volume delete NAME           volume.delete
 *   attach ID NAME:PATH[:ro]     sandbox.attach
 *   detach ID NAME               sandbox.detach */
#include "sandboxctl-volume.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

int ctl_volume_mount_arg(json_object *params, const char *arg)
{
    const char *colon = strchr(arg, ':');
    size_t len;
    json_object *a, *m;

    if (!colon || colon == arg || colon[1] != '/') {
        fprintf(stderr, "sandboxctl: --volume wants NAME:PATH[:ro] (PATH absolute)\n");
        return EXIT_USAGE;
    }
    len = strlen(colon + 1);
    m = json_object_new_object();
    json_object_object_add(m, "name", json_object_new_string_len(arg, (int)(colon - arg)));
    if (len > 3 && strcmp(colon + 1 + len - 3, ":ro") == 0) {
        json_object_object_add(m, "path", json_object_new_string_len(colon + 1, (int)len - 3));
        json_object_object_add(m, "read_only", json_object_new_boolean(true));
    } else
        json_object_object_add(m, "path", json_object_new_string(colon + 1));
    if (!json_object_object_get_ex(params, "volumes", &a)) {
        a = json_object_new_array();
        json_object_object_add(params, "volumes", a);
    }
    json_object_array_add(a, m);
    return 0;
}

static const char *get_str(json_object *o, const char *name)
{
    json_object *v;

    return json_object_object_get_ex(o, name, &v) && v ? json_object_get_string(v) : "-";
}

/* NAME SIZE_GB OWNER ATTACHED_TO */
static void print_one(json_object *v)
{
    printf("%-32s %-6s %-8s %s\n", get_str(v, "name"), get_str(v, "size_gb"),
           get_str(v, "owner_uid"), get_str(v, "attached_to"));
}

static void print_list(json_object *o)
{
    json_object *a;

    if (!json_object_object_get_ex(o, "volumes", &a))
        return;
    for (size_t i = 0; i < json_object_array_length(a); i++)
        print_one(json_object_array_get_idx(a, i));
}

static void print_volume(json_object *o)
{
    json_object *v;

    if (json_object_object_get_ex(o, "volume", &v))
        print_one(v);
}

static void print_deleted(json_object *o)
{
    printf("%s deleted\n", get_str(o, "name"));
}

int ctl_volume_main(struct ctl *c, int argc, char **argv)
{
    const char *sub = argc > 1 ? argv[1] : "";
    json_object *p;
    int64_t size;

    if (strcmp(sub, "list") == 0 && argc == 2)
        return ctl_run(c, "volume.list", json_object_new_object(), print_list);
    if (strcmp(sub, "create") == 0 && argc == 4) {
        if (parse_int(argv[3], "SIZE_GB", 1, INT32_MAX, &size) < 0)
            return EXIT_USAGE;
        p = json_object_new_object();
        json_object_object_add(p, "name", json_object_new_string(argv[2]));
        json_object_object_add(p, "size_gb", json_object_new_int64(size));
        return ctl_run(c, "volume.create", p, print_volume);
    }
    if (strcmp(sub, "delete") == 0 && argc == 3) {
        p = json_object_new_object();
        json_object_object_add(p, "name", json_object_new_string(argv[2]));
        return ctl_run(c, "volume.delete", p, print_deleted);
    }
    fprintf(stderr, "sandboxctl: usage: volume create NAME SIZE_GB | volume list | "
                    "volume delete NAME\n");
    return EXIT_USAGE;
}

static void print_sandbox(json_object *sb)
{
    printf("%s %s %s\n", get_str(sb, "id"), get_str(sb, "state"), get_str(sb, "ip"));
}

int ctl_attach_main(struct ctl *c, int argc, char **argv)
{
    bool attach = strcmp(argv[0], "attach") == 0;
    json_object *p, *a, *m;

    if (argc != 3) {
        fprintf(stderr, "sandboxctl: usage: attach ID NAME:PATH[:ro] | detach ID NAME\n");
        return EXIT_USAGE;
    }
    p = json_object_new_object();
    json_object_object_add(p, "id", json_object_new_string(argv[1]));
    if (!attach) {
        json_object_object_add(p, "volume", json_object_new_string(argv[2]));
        return ctl_run(c, "sandbox.detach", p, print_sandbox);
    }
    if (ctl_volume_mount_arg(p, argv[2]) != 0) {
        json_object_put(p);
        return EXIT_USAGE;
    }
    /* the one mount parsed as --volume's, its fields the call's */
    json_object_object_get_ex(p, "volumes", &a);
    m = json_object_get(json_object_array_get_idx(a, 0));
    json_object_object_del(p, "volumes");
    json_object_object_foreach(m, key, val)
        json_object_object_add(p, strcmp(key, "name") == 0 ? "volume" : key, json_object_get(val));
    json_object_put(m);
    return ctl_run(c, "sandbox.attach", p, print_sandbox);
}
