/* The files of a READY sandbox: file.write and file.read with inline content, and the file
 * system operations (list, stat, remove, mkdir, rename), as requests of the sandbox's file
 * session (sshfile.h, sshfile-fs.h). See sandbox-io.h. */
#include "macro.h"

#include <errno.h>
#include <stdlib.h>

#include "sandbox-internal.h"
#include "sandbox-io.h"
#include "sshfile-fs.h"

/* A request whose result the engine turns into its own types. */
struct fs_call {
    sandbox_read_cb read_cb;
    sandbox_list_cb list_cb;
    sandbox_stat_cb stat_cb;
    void *userdata;
};

/* A file system operation's refusal: a path over the cap is "too long". */
static int fs_refused(int r, struct engine_error *ret_err)
{
    if (r == -EFBIG)
        return engine_refuse(ret_err, ENGINE_E_INVALID, r, "too long", "path");
    return sandbox_file_refused(r, false, ret_err);
}

static struct fs_call *fs_call_new(void *userdata, struct engine_error *ret_err)
{
    struct fs_call *c = calloc(1, sizeof *c);

    if (!c)
        (void)engine_refuse_oom(ret_err);
    else
        c->userdata = userdata;
    return c;
}

/* The file session of sb and a call for userdata: 0, or a refusal with ret_err filled. */
static int fs_call_begin(struct sandbox *sb, void *userdata, struct sshfile **ret_f,
                         struct fs_call **ret_c, struct engine_error *ret_err)
{
    struct sshfile *f;
    struct fs_call *c;
    int r = sandbox_file_session(sb, &f, ret_err);

    if (r < 0)
        return sandbox_file_refused(r, false, ret_err);
    c = fs_call_new(userdata, ret_err);
    if (!c)
        return -ENOMEM;
    *ret_f = f;
    *ret_c = c;
    return 0;
}

int sandbox_file_write(struct sandbox *sb, const struct sandbox_write_params *p,
                       sandbox_count_cb cb, void *userdata, struct engine_error *ret_err)
{
    struct sshfile_write_params wp = {
        .path = p->path,
        .data = p->data,
        .len = p->len,
        .mode = p->mode,
        .make_parents = p->make_parents,
        .in_place = p->in_place,
        .append = p->append,
        .offset = p->offset,
    };
    struct sshfile *f;
    int r = sandbox_file_session(sb, &f, ret_err);

    if (r == 0)
        r = sshfile_write(f, &wp, cb, userdata);
    return r < 0 ? sandbox_file_refused(r, true, ret_err) : 0;
}

static void on_read(int error, struct sshfile_read_result *res, void *userdata)
{
    struct fs_call *c = userdata;
    struct sandbox_read_result r;

    if (error < 0) {
        c->read_cb(error, NULL, c->userdata);
    } else {
        r = (struct sandbox_read_result){
            .data = res->data,
            .len = res->len,
            .size = res->size,
            .eof = res->eof,
        };
        c->read_cb(0, &r, c->userdata);
    }
    free(c);
}

int sandbox_file_read(struct sandbox *sb, const char *path, uint64_t offset, uint64_t length,
                      sandbox_read_cb cb, void *userdata, struct engine_error *ret_err)
{
    struct fs_call *c;
    struct sshfile *f;
    int r = fs_call_begin(sb, userdata, &f, &c, ret_err);

    if (r < 0)
        return r;
    c->read_cb = cb;
    r = sshfile_read(f, path, offset, length, on_read, c);
    if (r < 0) {
        free(c);
        return sandbox_file_refused(r, false, ret_err);
    }
    return 0;
}

static void entry_to(const struct sshfile_entry *e, struct sandbox_file_entry *ret)
{
    *ret = (struct sandbox_file_entry){
        .name = e->name,
        .type = sshfile_type_to_string(e->type),
        .size = e->size,
        .mode = e->mode,
        .mtime = e->mtime,
        .target = e->target,
    };
}

static void on_listed(int error, const struct sshfile_list_result *res, void *userdata)
{
    struct fs_call *c = userdata;
    _cleanup_free_ struct sandbox_file_entry *v = NULL;
    struct sandbox_file_list l = {};

    if (error == 0 && res->n > 0) {
        v = calloc(res->n, sizeof *v);
        if (!v)
            error = -ENOMEM;
    }
    if (error < 0) {
        c->list_cb(error, NULL, c->userdata);
        free(c);
        return;
    }
    for (size_t i = 0; i < res->n; i++)
        entry_to(&res->entries[i], &v[i]);
    l = (struct sandbox_file_list){.entries = v, .n = res->n, .truncated = res->truncated};
    c->list_cb(0, &l, c->userdata);
    free(c);
}

static void on_stat(int error, const struct sshfile_entry *st, void *userdata)
{
    struct fs_call *c = userdata;
    struct sandbox_file_entry e;

    if (error < 0) {
        c->stat_cb(error, NULL, c->userdata);
    } else {
        entry_to(st, &e);
        c->stat_cb(0, &e, c->userdata);
    }
    free(c);
}

int sandbox_file_list(struct sandbox *sb, const char *path, size_t limit, sandbox_list_cb cb,
                      void *userdata, struct engine_error *ret_err)
{
    struct fs_call *c;
    struct sshfile *f;
    int r = fs_call_begin(sb, userdata, &f, &c, ret_err);

    if (r < 0)
        return r;
    c->list_cb = cb;
    r = sshfile_list(f, path, limit, on_listed, c);
    if (r < 0) {
        free(c);
        return fs_refused(r, ret_err);
    }
    return 0;
}

int sandbox_file_stat(struct sandbox *sb, const char *path, bool follow, sandbox_stat_cb cb,
                      void *userdata, struct engine_error *ret_err)
{
    struct fs_call *c;
    struct sshfile *f;
    int r = fs_call_begin(sb, userdata, &f, &c, ret_err);

    if (r < 0)
        return r;
    c->stat_cb = cb;
    r = sshfile_stat(f, path, follow, on_stat, c);
    if (r < 0) {
        free(c);
        return fs_refused(r, ret_err);
    }
    return 0;
}

/* The operations answered with a count take the caller's callback as it is. */

int sandbox_file_remove(struct sandbox *sb, const char *path, bool recursive, sandbox_count_cb cb,
                        void *userdata, struct engine_error *ret_err)
{
    struct sshfile *f;
    int r = sandbox_file_session(sb, &f, ret_err);

    if (r == 0)
        r = sshfile_remove(f, path, recursive, cb, userdata);
    return r < 0 ? fs_refused(r, ret_err) : 0;
}

int sandbox_file_mkdir(struct sandbox *sb, const char *path, bool parents, mode_t mode,
                       sandbox_count_cb cb, void *userdata, struct engine_error *ret_err)
{
    struct sshfile *f;
    int r = sandbox_file_session(sb, &f, ret_err);

    if (r == 0)
        r = sshfile_mkdir(f, path, parents, mode, cb, userdata);
    return r < 0 ? fs_refused(r, ret_err) : 0;
}

int sandbox_file_rename(struct sandbox *sb, const char *from, const char *to, sandbox_count_cb cb,
                        void *userdata, struct engine_error *ret_err)
{
    struct sshfile *f;
    int r = sandbox_file_session(sb, &f, ret_err);

    if (r == 0)
        r = sshfile_rename(f, from, to, cb, userdata);
    return r < 0 ? fs_refused(r, ret_err) : 0;
}
