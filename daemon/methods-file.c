/* file.list, file.stat, file.remove, file.mkdir, file.rename. See methods-file.h. */
#include "methods-file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-io.h"
#include "b64.h"
#include "params-file.h"
#include "rpc.h"
#include "methods-common.h"
#include "req.h"

struct fs_req;

/* One method: submits its operation on the sandbox's file session (the callback gets x), and,
 * for those answered with a count, the result the count makes. */
struct fs_op {
    int (*submit)(struct sandbox *sb, struct fs_req *x, struct engine_error *ret_err);
    json_object *(*counted)(uint64_t count);
};

/* One request on its way through the sandbox's file session; outlives a client that left. */
struct fs_req {
    struct req *req; /* NULL once the client went away */
    const struct fs_op *op;
    struct params_file_op p;
};

static void fs_req_free(struct fs_req *x)
{
    params_file_op_done(&x->p);
    free(x);
}

static void fs_req_detach(struct req *r, void *userdata)
{
    struct fs_req *x = userdata;

    (void)methods_detach(r, &x->req, NULL);
}

/* The reasons of the errors these methods add to those of file.read and file.write. */
static const char *fs_reason(int error)
{
    switch (error) {
    case -E2BIG:
        return "more than 100000 entries in the tree: nothing was removed";
    case -EPERM:
        return "the root folder cannot be removed";
    case -ENOTEMPTY:
        return "the folder is not empty (use recursive)";
    default:
        return NULL;
    }
}

static void reply_fs_error(struct req *r, int error)
{
    struct engine_error err;
    json_object *d;

    if (error == -ETIME) {
        unsigned ms = req_config(r)->ssh.file_timeout_ms;
        char reason[128];

        d = json_object_new_object();
        snprintf(reason, sizeof(reason), "the file operation did not finish within %u ms", ms);
        json_object_object_add(d, "reason", json_object_new_string(reason));
        json_object_object_add(d, "timeout_ms", json_object_new_int64(ms));
        req_error_data(r, RPC_DEADLINE_EXCEEDED, NULL, d);
        return;
    }
    engine_error_from_io(error, true, &err);
    if (err.kind == ENGINE_E_FILE && fs_reason(error))
        err.message = fs_reason(error);
    methods_sandbox_reply_error(r, &err);
}

/* Replies and frees x when the callback brings an error or the client left; else false. */
static bool fs_req_failed(struct fs_req *x, int error)
{
    if (x->req && error >= 0)
        return false;
    if (x->req)
        reply_fs_error(x->req, error);
    fs_req_free(x);
    return true;
}

/* Answers with result (taken over) and frees x. */
static void fs_reply(struct fs_req *x, json_object *result)
{
    req_reply(x->req, result);
    fs_req_free(x);
}

static json_object *entry_json(const struct sandbox_file_entry *e)
{
    json_object *o = json_object_new_object();
    char mode[8];

    (void)b64_object_add_data(o, "name", e->name, strlen(e->name));
    json_object_object_add(o, "type", json_object_new_string(e->type));
    json_object_object_add(o, "size", json_object_new_int64((int64_t)e->size));
    snprintf(mode, sizeof(mode), "%04o", e->mode & 07777);
    json_object_object_add(o, "mode", json_object_new_string(mode));
    json_object_object_add(o, "mtime", json_object_new_int64(e->mtime));
    if (e->target)
        (void)b64_object_add_data(o, "target", e->target, strlen(e->target));
    return o;
}

/* ---- the callbacks ---- */

static void on_listed(int error, const struct sandbox_file_list *res, void *userdata)
{
    struct fs_req *x = userdata;
    json_object *o, *a;

    if (fs_req_failed(x, error))
        return;
    o = json_object_new_object();
    a = json_object_new_array_ext((int)res->n);
    for (size_t i = 0; i < res->n; i++)
        json_object_array_add(a, entry_json(&res->entries[i]));
    json_object_object_add(o, "entries", a);
    json_object_object_add(o, "truncated", json_object_new_boolean(res->truncated));
    fs_reply(x, o);
}

static void on_stat(int error, const struct sandbox_file_entry *st, void *userdata)
{
    struct fs_req *x = userdata;

    if (!fs_req_failed(x, error))
        fs_reply(x, entry_json(st));
}

static const struct fs_op op_rename;

/* file.remove, file.mkdir, file.rename. */
static void on_counted(int error, uint64_t count, void *userdata)
{
    struct fs_req *x = userdata;

    if (error < 0 && x->req && x->op == &op_rename) /* count: the side at fault */
        req_set_subject(x->req, count ? "to" : "from");
    if (!fs_req_failed(x, error))
        fs_reply(x, x->op->counted(count));
}

static json_object *removed_json(uint64_t count)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "removed", json_object_new_int64((int64_t)count));
    return o;
}

static json_object *made_json(uint64_t count)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "created", json_object_new_boolean(count > 0));
    return o;
}

static json_object *renamed_json(uint64_t count)
{
    return json_object_new_object();
}

/* ---- the submissions ---- */

static int submit_list(struct sandbox *sb, struct fs_req *x, struct engine_error *ret_err)
{
    return sandbox_file_list(sb, x->p.path, (size_t)x->p.limit, on_listed, x, ret_err);
}

static int submit_stat(struct sandbox *sb, struct fs_req *x, struct engine_error *ret_err)
{
    return sandbox_file_stat(sb, x->p.path, x->p.follow, on_stat, x, ret_err);
}

static int submit_remove(struct sandbox *sb, struct fs_req *x, struct engine_error *ret_err)
{
    return sandbox_file_remove(sb, x->p.path, x->p.recursive, on_counted, x, ret_err);
}

static int submit_mkdir(struct sandbox *sb, struct fs_req *x, struct engine_error *ret_err)
{
    return sandbox_file_mkdir(sb, x->p.path, x->p.parents, (mode_t)x->p.mode, on_counted, x,
                              ret_err);
}

static int submit_rename(struct sandbox *sb, struct fs_req *x, struct engine_error *ret_err)
{
    return sandbox_file_rename(sb, x->p.path, x->p.to, on_counted, x, ret_err);
}

static const struct fs_op op_list = {submit_list, NULL};
static const struct fs_op op_stat = {submit_stat, NULL};
static const struct fs_op op_remove = {submit_remove, removed_json};
static const struct fs_op op_mkdir = {submit_mkdir, made_json};
static const struct fs_op op_rename = {submit_rename, renamed_json};

/* The handler of every file.* method of this file: userdata is its struct fs_op. Parks,
 * looks the sandbox up, takes the params and submits; the callback answers. */
static void method_fs(struct req *r, void *params, void *userdata)
{
    struct params_file_op *p = params;
    struct engine_error err;
    struct sandbox *sb;
    struct fs_req *x;

    sb = methods_sandbox_find(r, p->id, method_fs, params, userdata);
    if (!sb)
        return;
    x = calloc(1, sizeof(*x));
    if (!x) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    x->op = userdata;
    x->p = *p;
    *p = (struct params_file_op){};
    if (x->op->submit(sb, x, &err) < 0) {
        methods_sandbox_reply_error(r, &err);
        fs_req_free(x);
        return;
    }
    x->req = r;
    req_on_disconnect(r, fs_req_detach, x);
}

void method_file_list(struct req *r, void *params, void *userdata)
{
    method_fs(r, params, (void *)&op_list);
}

void method_file_stat(struct req *r, void *params, void *userdata)
{
    method_fs(r, params, (void *)&op_stat);
}

void method_file_remove(struct req *r, void *params, void *userdata)
{
    method_fs(r, params, (void *)&op_remove);
}

void method_file_mkdir(struct req *r, void *params, void *userdata)
{
    method_fs(r, params, (void *)&op_mkdir);
}

void method_file_rename(struct req *r, void *params, void *userdata)
{
    method_fs(r, params, (void *)&op_rename);
}
