/* Params of the file system methods. See params-file.h. */
#include "proto/params-file.h"

#include <errno.h>
#include <stdlib.h>

#include "lib/macro.h"
#include "proto/params-internal.h"

void params_file_op_done(struct params_file_op *p)
{
    if (!p)
        return;
    free(p->path);
    free(p->to);
    p->path = p->to = NULL;
}

#define OP_ID PARAMS_F_ID_OF(struct params_file_op)
#define OP_PATH(member, name)                                                                      \
    PARAMS_FIELD_NAMED(struct params_file_op, member, name, PARAMS_F_PATH, true, 0, 0)
#define OP_BOOL(member) PARAMS_F_BOOL_OF(struct params_file_op, member, false)

/* The fields of each method, in the order they are read; it takes no other names. */
static const struct params_field list_fields[] = {
    PARAMS_F_INT64_OF(struct params_file_op, limit, false, 1, PARAMS_LIST_LIMIT_MAX), OP_ID,
    OP_PATH(path, "path")};
static const struct params_field stat_fields[] = {OP_ID, OP_PATH(path, "path"), OP_BOOL(follow)};
static const struct params_field remove_fields[] = {OP_ID, OP_PATH(path, "path"),
                                                    OP_BOOL(recursive)};
static const struct params_field mkdir_fields[] = {
    OP_ID, OP_PATH(path, "path"), OP_BOOL(parents),
    PARAMS_FIELD(struct params_file_op, mode, PARAMS_F_MODE, false, 0, 0)};
static const struct params_field rename_fields[] = {OP_ID, OP_PATH(path, "from"),
                                                    OP_PATH(to, "to")};

#define FILE_OP_FIELDS_MAX 4

/* Checks that params holds only the names of fields[0..n), then reads them over defaults. */
static int file_op_read(json_object *params, const struct params_field *fields, size_t n,
                        const struct params_file_op *defaults, void *at, struct params_error *err)
{
    const char *allowed[FILE_OP_FIELDS_MAX + 1] = {};

    for (size_t i = 0; i < n && i < FILE_OP_FIELDS_MAX; i++)
        allowed[i] = fields[i].name;
    *(struct params_file_op *)at = *defaults;
    return params_read(params, allowed, fields, n, at, err);
}

PARAMS_DONE_ANY(params_file_op)

/* The spec of file.<method>: its fields read over the defaults given (designators). */
#define FILE_OP_SPEC(method, ...)                                                                  \
    static int file_##method##_fill(json_object *params, void *p, struct params_error *err)        \
    {                                                                                              \
        static const struct params_file_op defaults = {__VA_ARGS__};                               \
                                                                                                   \
        _Static_assert(ELEMENTSOF(method##_fields) <= FILE_OP_FIELDS_MAX, "too many fields");      \
        return file_op_read(params, method##_fields, ELEMENTSOF(method##_fields), &defaults, p,    \
                            err);                                                                  \
    }                                                                                              \
    PARAMS_SPEC(params_file_##method, struct params_file_op, file_##method##_fill,                 \
                params_file_op_done_any)

FILE_OP_SPEC(list, .limit = PARAMS_LIST_LIMIT_MAX);
FILE_OP_SPEC(stat);
FILE_OP_SPEC(remove);
FILE_OP_SPEC(mkdir, .mode = PARAMS_MKDIR_MODE_DEFAULT);
FILE_OP_SPEC(rename);
