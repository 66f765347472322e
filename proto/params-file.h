/* Params of the file system methods file.list, file.stat, file.remove, file.mkdir and
 * file.rename (docs/protocol.md), and of file.write's in-place options. Pure, as params.h. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "params.h"

/* PARAMS_LIST_LIMIT_MAX (file.list entries): proto/api-limits.h */
#define PARAMS_MKDIR_MODE_DEFAULT 0755

/* One struct for the five methods; each fills the fields it takes. */
struct params_file_op {
    char id[PARAMS_ID_MAX + 1];
    char *path;     /* file.rename: `from` */
    char *to;       /* file.rename only */
    int64_t limit;  /* file.list: 1..PARAMS_LIST_LIMIT_MAX, default the maximum */
    bool follow;    /* file.stat: default false (a link is reported as a link) */
    bool recursive; /* file.remove: default false */
    bool parents;   /* file.mkdir: default false */
    unsigned mode;  /* file.mkdir: <= 07777, default 0755 */
};

void params_file_op_done(struct params_file_op *p);

extern const struct params_spec params_file_list_spec;
extern const struct params_spec params_file_stat_spec;
extern const struct params_spec params_file_remove_spec;
extern const struct params_spec params_file_mkdir_spec;
extern const struct params_spec params_file_rename_spec;
