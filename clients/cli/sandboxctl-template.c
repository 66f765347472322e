/* sandboxctl's template commands. See sandboxctl-template.h.
 *
 *   template list               template.list: one line per template
 *   template create ID NAME     template.create: the sandbox becomes template NAME
 *   template delete NAME        template.delete
 *   template publish NAME       template.publish (admins)
 *   template build NAME -f FILE [--context DIR] [--internet]   sandboxctl-build.c */
#include "sandboxctl-template.h"

#include "sandboxctl-build.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

static const char *get_str(json_object *o, const char *name)
{
    json_object *v;

    return json_object_object_get_ex(o, name, &v) && v ? json_object_get_string(v) : "-";
}

/* NAME NODE VMID ORIGIN OWNER USED (sandboxes+pool members) */
static void print_one(json_object *t)
{
    json_object *origin = NULL, *used = NULL, *v;
    char owner[32] = "-", from[80] = "config";
    long ns = 0, np = 0;

    if (json_object_object_get_ex(t, "origin", &origin) &&
        json_object_is_type(origin, json_type_object))
        snprintf(from, sizeof from, "sandbox:%s", get_str(origin, "sandbox"));
    if (json_object_object_get_ex(t, "owner_uid", &v) && v)
        snprintf(owner, sizeof owner, "%" PRId64, json_object_get_int64(v));
    if (json_object_object_get_ex(t, "used_by", &used)) {
        if (json_object_object_get_ex(used, "sandboxes", &v))
            ns = (long)json_object_get_int64(v);
        if (json_object_object_get_ex(used, "pool", &v))
            np = (long)json_object_get_int64(v);
    }
    printf("%-20s %-10s %-8s %-28s %-6s %ld+%ld%s\n", get_str(t, "name"), get_str(t, "node"),
           get_str(t, "vmid"), from, owner, ns, np,
           json_object_object_get_ex(t, "published", &v) && json_object_get_boolean(v) &&
                   strcmp(from, "config") != 0
               ? " published"
               : "");
}

static void print_list(json_object *o)
{
    json_object *a;

    if (!json_object_object_get_ex(o, "templates", &a))
        return;
    for (size_t i = 0; i < json_object_array_length(a); i++)
        print_one(json_object_array_get_idx(a, i));
}

static void print_template(json_object *o)
{
    json_object *t;

    if (json_object_object_get_ex(o, "template", &t))
        print_one(t);
}

static void print_deleted(json_object *o)
{
    printf("%s deleted\n", get_str(o, "name"));
}

int ctl_template_main(struct ctl *c, int argc, char **argv)
{
    const char *sub = argc > 1 ? argv[1] : "";
    json_object *p;

    if (strcmp(sub, "build") == 0)
        return ctl_template_build(c, argc - 1, argv + 1);
    if (strcmp(sub, "list") == 0 && argc == 2)
        return ctl_run(c, "template.list", json_object_new_object(), print_list);
    if (strcmp(sub, "create") == 0 && argc == 4) {
        p = id_params(argv[2]);
        json_object_object_add(p, "name", json_object_new_string(argv[3]));
        return ctl_run(c, "template.create", p, print_template);
    }
    if ((strcmp(sub, "delete") == 0 || strcmp(sub, "publish") == 0) && argc == 3) {
        p = json_object_new_object();
        json_object_object_add(p, "name", json_object_new_string(argv[2]));
        return ctl_run(c, sub[0] == 'd' ? "template.delete" : "template.publish", p,
                       sub[0] == 'd' ? print_deleted : print_template);
    }
    fprintf(stderr, "sandboxctl: usage: template list | template create ID NAME | "
                    "template delete NAME | template publish NAME | "
                    "template build NAME -f FILE [--context DIR] [--internet]\n");
    return EXIT_USAGE;
}
