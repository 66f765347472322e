/* file.list, file.stat, file.remove, file.mkdir, file.rename. See methods-file.h. */
#include "methods-file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sftp-fs.h"
#include "proto/b64.h"
#include "proto/params-file.h"
#include "proto/rpc.h"
#include "methods-common.h"
#include "req.h"

/* One request on its way through the sandbox's SFTP queue; outlives a client that left. */
struct fs_req {
    struct req *req; /* NULL once the client went away */
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

    x->req = NULL;
    req_error(r, RPC_SHUTTING_DOWN, "the client went away");
}

/* The reasons of the errors these methods add to sftp.h's. */
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

/* Parks, looks the sandbox up and takes the params; NULL when r was answered or parked. */
static struct fs_req *fs_begin(struct req *r, void *params, void *userdata, method_handler_t self,
                               struct sshfile **ret_f)
{
    struct params_file_op *p = params;
    struct engine_error err;
    struct sandbox *sb;
    struct fs_req *x;

    if (methods_sandbox_park(r, p->id, self, params))
        return NULL;
    sb = methods_sandbox_lookup(userdata, r, p->id);
    if (!sb)
        return NULL;
    if (sandbox_file_session(sb, ret_f, &err) < 0) {
        methods_sandbox_reply_error(r, &err);
        return NULL;
    }
    x = calloc(1, sizeof(*x));
    if (!x) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    x->p = *p;
    *p = (struct params_file_op){};
    return x;
}

/* After the submission: waits for the callback, or answers its error now. */
static void fs_submitted(struct fs_req *x, struct req *r, int ret)
{
    struct engine_error err;

    if (ret < 0) {
        (void)sandbox_file_start_error(ret, &err);
        methods_sandbox_reply_error(r, &err);
        fs_req_free(x);
        return;
    }
    x->req = r;
    req_on_disconnect(r, fs_req_detach, x);
}

static json_object *entry_json(const struct sshfile_entry *e)
{
    json_object *o = json_object_new_object();
    char mode[8];

    (void)b64_object_add_data(o, "name", e->name, strlen(e->name));
    json_object_object_add(o, "type", json_object_new_string(sshfile_type_to_string(e->type)));
    json_object_object_add(o, "size", json_object_new_int64((int64_t)e->size));
    snprintf(mode, sizeof(mode), "%04o", e->mode & 07777);
    json_object_object_add(o, "mode", json_object_new_string(mode));
    json_object_object_add(o, "mtime", json_object_new_int64(e->mtime));
    if (e->target)
        (void)b64_object_add_data(o, "target", e->target, strlen(e->target));
    return o;
}

/* ---- file.list ---- */

static void on_listed(int error, const struct sshfile_list_result *res, void *userdata)
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
    req_reply(x->req, o);
    fs_req_free(x);
}

static void method_list(struct req *r, void *params, void *userdata)
{
    struct sshfile *f;
    struct fs_req *x = fs_begin(r, params, userdata, method_list, &f);

    if (x)
        fs_submitted(x, r, sshfile_list(f, x->p.path, (size_t)x->p.limit, on_listed, x));
}

/* ---- file.stat ---- */

static void on_stat(int error, const struct sshfile_entry *st, void *userdata)
{
    struct fs_req *x = userdata;

    if (fs_req_failed(x, error))
        return;
    req_reply(x->req, entry_json(st));
    fs_req_free(x);
}

static void method_stat(struct req *r, void *params, void *userdata)
{
    struct sshfile *f;
    struct fs_req *x = fs_begin(r, params, userdata, method_stat, &f);

    if (x)
        fs_submitted(x, r, sshfile_stat(f, x->p.path, x->p.follow, on_stat, x));
}

/* ---- file.remove, file.mkdir, file.rename ---- */

static void on_removed(int error, uint64_t count, void *userdata)
{
    struct fs_req *x = userdata;
    json_object *o;

    if (fs_req_failed(x, error))
        return;
    o = json_object_new_object();
    json_object_object_add(o, "removed", json_object_new_int64((int64_t)count));
    req_reply(x->req, o);
    fs_req_free(x);
}

static void method_remove(struct req *r, void *params, void *userdata)
{
    struct sshfile *f;
    struct fs_req *x = fs_begin(r, params, userdata, method_remove, &f);

    if (x)
        fs_submitted(x, r, sshfile_remove(f, x->p.path, x->p.recursive, on_removed, x));
}

static void on_made(int error, uint64_t count, void *userdata)
{
    struct fs_req *x = userdata;
    json_object *o;

    if (fs_req_failed(x, error))
        return;
    o = json_object_new_object();
    json_object_object_add(o, "created", json_object_new_boolean(count > 0));
    req_reply(x->req, o);
    fs_req_free(x);
}

static void method_mkdir(struct req *r, void *params, void *userdata)
{
    struct sshfile *f;
    struct fs_req *x = fs_begin(r, params, userdata, method_mkdir, &f);

    if (x)
        fs_submitted(x, r,
                     sshfile_mkdir(f, x->p.path, x->p.parents, (mode_t)x->p.mode, on_made, x));
}

static void on_renamed(int error, uint64_t count, void *userdata)
{
    struct fs_req *x = userdata;

    if (fs_req_failed(x, error))
        return;
    req_reply(x->req, json_object_new_object());
    fs_req_free(x);
}

static void method_rename(struct req *r, void *params, void *userdata)
{
    struct sshfile *f;
    struct fs_req *x = fs_begin(r, params, userdata, method_rename, &f);

    if (x)
        fs_submitted(x, r, sshfile_rename(f, x->p.path, x->p.to, on_renamed, x));
}

const struct method_def methods_file_rows[METHODS_FILE_ROWS] = {
    {"file.list", &params_file_list_spec, method_list, NULL, false},
    {"file.stat", &params_file_stat_spec, method_stat, NULL, false},
    {"file.remove", &params_file_remove_spec, method_remove, NULL, false},
    {"file.mkdir", &params_file_mkdir_spec, method_mkdir, NULL, false},
    {"file.rename", &params_file_rename_spec, method_rename, NULL, false},
};
