/* Params of the file system methods. See params-file.h. */
#include "params-file.h"

#include <errno.h>
#include <stdlib.h>

#include "macro.h"
#include "params-internal.h"

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

/* Each method's fields, in the order they are read; it takes no other names. */
static const struct params_field params_file_list_fields[] = {
    PARAMS_F_INT64_OF(struct params_file_op, limit, false, 1, PARAMS_LIST_LIMIT_MAX), OP_ID,
    OP_PATH(path, "path")};
static const struct params_field params_file_stat_fields[] = {OP_ID, OP_PATH(path, "path"),
                                                              OP_BOOL(follow)};
static const struct params_field params_file_remove_fields[] = {OP_ID, OP_PATH(path, "path"),
                                                                OP_BOOL(recursive)};
static const struct params_field params_file_mkdir_fields[] = {
    OP_ID, OP_PATH(path, "path"), OP_BOOL(parents),
    PARAMS_FIELD(struct params_file_op, mode, PARAMS_F_MODE, false, 0, 0)};
static const struct params_field params_file_rename_fields[] = {OP_ID, OP_PATH(path, "from"),
                                                                OP_PATH(to, "to")};

PARAMS_DONE_ANY(params_file_op)

PARAMS_TABLE_SPEC(params_file_list, struct params_file_op, params_file_op_done_any,
                  .limit = PARAMS_LIST_LIMIT_MAX);
PARAMS_TABLE_SPEC(params_file_stat, struct params_file_op, params_file_op_done_any);
PARAMS_TABLE_SPEC(params_file_remove, struct params_file_op, params_file_op_done_any);
PARAMS_TABLE_SPEC(params_file_mkdir, struct params_file_op, params_file_op_done_any,
                  .mode = PARAMS_MKDIR_MODE_DEFAULT);
PARAMS_TABLE_SPEC(params_file_rename, struct params_file_op, params_file_op_done_any);
