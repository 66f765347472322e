/* sandboxctl ls, stat, rm, mkdir, mv: the file system methods (file.list, file.stat,
 * file.remove, file.mkdir, file.rename) from the command line. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sandboxctl.h"
#include "b64.h"

static const char *const commands[] = {"ls", "stat", "rm", "mkdir", "mv"};

int ctl_fs_is_command(const char *cmd)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(cmd, commands[i]) == 0)
            return 1;
    return 0;
}

static json_object *path_params(const char *id, const char *key, const char *path)
{
    json_object *p = json_object_new_object();

    json_object_object_add(p, "id", json_object_new_string(id));
    json_object_object_add(p, key, json_object_new_string(path));
    return p;
}

static const char *str_of(json_object *o, const char *key, const char *dflt)
{
    json_object *v;

    if (!json_object_object_get_ex(o, key, &v) || !v)
        return dflt;
    return json_object_get_string(v);
}

static int64_t int_of(json_object *o, const char *key)
{
    json_object *v;

    return json_object_object_get_ex(o, key, &v) && v ? json_object_get_int64(v) : 0;
}

/* "drwxr-xr-x" from the type and the octal mode string. */
static void mode_string(json_object *e, char out[11])
{
    const char *type = str_of(e, "type", "other");
    unsigned m = (unsigned)strtoul(str_of(e, "mode", "0"), NULL, 8);
    static const char rwx[] = "rwxrwxrwx";

    out[0] = !strcmp(type, "dir")       ? 'd'
             : !strcmp(type, "symlink") ? 'l'
             : !strcmp(type, "file")    ? '-'
                                        : '?';
    for (int i = 0; i < 9; i++)
        out[1 + i] = (m & (0400u >> i)) ? rwx[i] : '-';
    if (m & 04000)
        out[3] = (m & 0100) ? 's' : 'S';
    if (m & 02000)
        out[6] = (m & 010) ? 's' : 'S';
    if (m & 01000)
        out[9] = (m & 01) ? 't' : 'T';
    out[10] = 0;
}

static void time_string(int64_t t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;

    if (!gmtime_r(&tt, &tm) || strftime(buf, n, "%Y-%m-%d %H:%M", &tm) == 0)
        snprintf(buf, n, "%" PRId64, t);
}

/* name, or name_b64 shown as base64 with a marker: a name that is not UTF-8. */
static const char *name_of(json_object *e, const char *key, char *buf, size_t n)
{
    char k[32];
    const char *s = str_of(e, key, NULL);

    if (s)
        return s;
    snprintf(k, sizeof(k), "%s_b64", key);
    snprintf(buf, n, "(base64) %s", str_of(e, k, "?"));
    return buf;
}

static void print_listing(json_object *res)
{
    json_object *entries, *v;
    size_t n;

    if (!json_object_object_get_ex(res, "entries", &entries))
        return;
    n = json_object_array_length(entries);
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(entries, i);
        char mode[11], t[32], nb[600];

        mode_string(e, mode);
        time_string(int_of(e, "mtime"), t, sizeof(t));
        printf("%s %12" PRId64 " %s %s\n", mode, int_of(e, "size"), t,
               name_of(e, "name", nb, sizeof(nb)));
    }
    if (json_object_object_get_ex(res, "truncated", &v) && json_object_get_boolean(v))
        fprintf(stderr, "sandboxctl: ls: only the first %zu entries were listed\n", n);
}

static void print_stat(json_object *e)
{
    char mode[11], t[32], nb[600];

    mode_string(e, mode);
    time_string(int_of(e, "mtime"), t, sizeof(t));
    printf("name   %s\n", name_of(e, "name", nb, sizeof(nb)));
    printf("type   %s\n", str_of(e, "type", "-"));
    printf("size   %" PRId64 "\n", int_of(e, "size"));
    printf("mode   %s (%s)\n", str_of(e, "mode", "-"), mode);
    printf("mtime  %s UTC (%" PRId64 ")\n", t, int_of(e, "mtime"));
    if (str_of(e, "target", NULL) || str_of(e, "target_b64", NULL))
        printf("target %s\n", name_of(e, "target", nb, sizeof(nb)));
}

static void print_nothing(json_object *res)
{
    (void)res;
}

/* Parses the leading flags of argv (argv[0] is the command): -r, -p, -L, -m MODE. */
static int fs_opts(int argc, char **argv, const char *optstring, bool *flag, const char **mode)
{
    int opt;

    optind = 1;
    while ((opt = getopt(argc, argv, optstring)) >= 0) {
        switch (opt) {
        case 'r':
        case 'p':
        case 'L':
            *flag = true;
            break;
        case 'm':
            *mode = optarg;
            break;
        default:
            return -1;
        }
    }
    return optind;
}

int ctl_fs_main(struct ctl *c, int argc, char **argv)
{
    const char *cmd = argv[0], *mode = NULL;
    bool flag = false;
    json_object *p;
    int i;

    if (!strcmp(cmd, "mv")) {
        if (argc != 4) {
            fprintf(stderr, "sandboxctl: mv ID FROM TO\n");
            return EXIT_USAGE;
        }
        p = path_params(argv[1], "from", argv[2]);
        json_object_object_add(p, "to", json_object_new_string(argv[3]));
        return ctl_run(c, "file.rename", p, print_nothing);
    }
    i = fs_opts(argc, argv,
                !strcmp(cmd, "rm")      ? "+r"
                : !strcmp(cmd, "mkdir") ? "+pm:"
                : !strcmp(cmd, "stat")  ? "+L"
                                        : "+",
                &flag, &mode);
    if (i < 0 || argc - i != 2) {
        fprintf(stderr, "sandboxctl: %s\n",
                !strcmp(cmd, "rm")      ? "rm [-r] ID PATH"
                : !strcmp(cmd, "mkdir") ? "mkdir [-p] [-m MODE] ID PATH"
                : !strcmp(cmd, "stat")  ? "stat [-L] ID PATH"
                                        : "ls ID PATH");
        return EXIT_USAGE;
    }
    p = path_params(argv[i], "path", argv[i + 1]);
    if (!strcmp(cmd, "ls"))
        return ctl_run(c, "file.list", p, print_listing);
    if (!strcmp(cmd, "stat")) {
        json_object_object_add(p, "follow", json_object_new_boolean(flag));
        return ctl_run(c, "file.stat", p, print_stat);
    }
    if (!strcmp(cmd, "rm")) {
        json_object_object_add(p, "recursive", json_object_new_boolean(flag));
        return ctl_run(c, "file.remove", p, print_nothing);
    }
    json_object_object_add(p, "parents", json_object_new_boolean(flag));
    if (mode)
        json_object_object_add(p, "mode", json_object_new_string(mode));
    return ctl_run(c, "file.mkdir", p, print_nothing);
}
