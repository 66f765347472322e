/* Params of the file system methods. See params-file.h. */
#include "proto/params-file.h"

#include <errno.h>
#include <stdlib.h>

#include "proto/params-internal.h"

void params_file_op_done(struct params_file_op *p)
{
    if (!p)
        return;
    free(p->path);
    free(p->to);
    p->path = p->to = NULL;
}

/* The fields every method takes: id and the path under name. */
static int file_op_common(json_object *params, const char *const *allowed, const char *name,
                          struct params_file_op *p, struct params_error *err)
{
    int r;

    r = params_check_object(params, allowed, err);
    if (r < 0)
        return r;
    r = params_id(params, p->id, err);
    if (r < 0)
        return r;
    return params_path(params, name, true, &p->path, err);
}

static int file_op_finish(int r, struct params_file_op *p, struct params_file_op *ret)
{
    if (r < 0) {
        params_file_op_done(p);
        return r;
    }
    *ret = *p;
    return 0;
}

int params_file_list_parse(json_object *params, struct params_file_op *ret,
                           struct params_error *err)
{
    static const char *const allowed[] = {"id", "path", "limit", NULL};
    struct params_file_op p = {.limit = PARAMS_LIST_LIMIT_MAX};
    int r;

    r = params_int(params, "limit", false, 1, PARAMS_LIST_LIMIT_MAX, &p.limit, err);
    if (r == 0)
        r = file_op_common(params, allowed, "path", &p, err);
    return file_op_finish(r, &p, ret);
}

int params_file_stat_parse(json_object *params, struct params_file_op *ret,
                           struct params_error *err)
{
    static const char *const allowed[] = {"id", "path", "follow", NULL};
    struct params_file_op p = {};
    int r;

    r = file_op_common(params, allowed, "path", &p, err);
    if (r == 0)
        r = params_bool(params, "follow", false, &p.follow, err);
    return file_op_finish(r, &p, ret);
}

int params_file_remove_parse(json_object *params, struct params_file_op *ret,
                             struct params_error *err)
{
    static const char *const allowed[] = {"id", "path", "recursive", NULL};
    struct params_file_op p = {};
    int r;

    r = file_op_common(params, allowed, "path", &p, err);
    if (r == 0)
        r = params_bool(params, "recursive", false, &p.recursive, err);
    return file_op_finish(r, &p, ret);
}

int params_file_mkdir_parse(json_object *params, struct params_file_op *ret,
                            struct params_error *err)
{
    static const char *const allowed[] = {"id", "path", "parents", "mode", NULL};
    struct params_file_op p = {.mode = PARAMS_MKDIR_MODE_DEFAULT};
    int r;

    r = file_op_common(params, allowed, "path", &p, err);
    if (r == 0)
        r = params_bool(params, "parents", false, &p.parents, err);
    if (r == 0)
        r = params_mode(params, &p.mode, err);
    return file_op_finish(r, &p, ret);
}

int params_file_rename_parse(json_object *params, struct params_file_op *ret,
                             struct params_error *err)
{
    static const char *const allowed[] = {"id", "from", "to", NULL};
    struct params_file_op p = {};
    int r;

    r = file_op_common(params, allowed, "from", &p, err);
    if (r == 0)
        r = params_path(params, "to", true, &p.to, err);
    return file_op_finish(r, &p, ret);
}

#define FILE_OP_SPEC(method)                                                                       \
    static int params_file_##method##_any(json_object *params, void *ret,                          \
                                          struct params_error *err)                                \
    {                                                                                              \
        return params_file_##method##_parse(params, ret, err);                                     \
    }                                                                                              \
    const struct params_spec params_file_##method##_spec = {                                       \
        sizeof(struct params_file_op), params_file_##method##_any, file_op_done_any}

static void file_op_done_any(void *p)
{
    params_file_op_done(p);
}

FILE_OP_SPEC(list);
FILE_OP_SPEC(stat);
FILE_OP_SPEC(remove);
FILE_OP_SPEC(mkdir);
FILE_OP_SPEC(rename);
