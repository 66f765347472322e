/* sandboxctl's volume commands. See sandboxctl-volume.h.
 *
 *   volume create NAME SIZE_GB   volume.create
 *   volume list                  volume.list: one line per volume
 *   volume delete NAME           volume.delete */
#include "sandboxctl-volume.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

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
