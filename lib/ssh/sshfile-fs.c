/* File system operations over SFTP, run as requests of sshfile.c's queue (see sshfile-fs.h),
 * and sshfile_write() of sshfile.h, whose in-place writes are done here. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "sshfile-fs.h"
#include "sshfile-internal.h"
#include "util.h"

#define WRITE_CHUNK (192u * 1024u)

const char *sshfile_type_to_string(enum sshfile_type t)
{
    switch (t) {
    case SSHFILE_FILE:
        return "file";
    case SSHFILE_DIR:
        return "dir";
    case SSHFILE_SYMLINK:
        return "symlink";
    default:
        return "other";
    }
}

/* ---- worker side: helpers ---- */

static enum sshfile_type type_of(const struct sftp_attributes_struct *a)
{
    switch (a->type) {
    case SSH_FILEXFER_TYPE_REGULAR:
        return SSHFILE_FILE;
    case SSH_FILEXFER_TYPE_DIRECTORY:
        return SSHFILE_DIR;
    case SSH_FILEXFER_TYPE_SYMLINK:
        return SSHFILE_SYMLINK;
    default:
        return SSHFILE_OTHER;
    }
}

static int entry_fill(const struct sftp_attributes_struct *a, const char *name,
                      struct sshfile_entry *ret)
{
    char *n = strdup(name);

    if (!n)
        return -ENOMEM;
    *ret = (struct sshfile_entry){
        .name = n,
        .type = type_of(a),
        .size = (a->flags & SSH_FILEXFER_ATTR_SIZE) ? a->size : 0,
        .mode = (a->flags & SSH_FILEXFER_ATTR_PERMISSIONS) ? (a->permissions & 07777) : 0,
        .mtime = (a->flags & SSH_FILEXFER_ATTR_ACMODTIME) ? (int64_t)a->mtime : 0,
    };
    return 0;
}

static void entry_done(struct sshfile_entry *e)
{
    free(e->name);
    free(e->target);
    e->name = e->target = NULL;
}

/* The last component of an absolute path ("/" for "/"). */
static const char *path_base(const char *path)
{
    const char *b = strrchr(path, '/') + 1;

    return *b ? b : "/";
}

static bool is_dot(const char *name)
{
    return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

/* The error of a failed call that created or changed path (in folder dir). */
static int change_error(struct sshfile *f, const char *path, const char *dir)
{
    int r = sshfile_last_error(f);

    if (r == -ENOENT)
        return sshfile_refine_enoent(f, path);
    if (r == -EIO)
        return sshfile_refine_failure(f, NULL, dir);
    return r;
}

/* lstat: 0 missing, 1 present (*ret_type), < 0 error. */
static int lstat_type(struct sshfile *f, const char *path, enum sshfile_type *ret_type)
{
    sftp_attributes a = sftp_lstat(sshfile_sftp(f), path);

    if (!a) {
        int r = sshfile_last_error(f);
        return r == -ENOENT ? 0 : r;
    }
    *ret_type = type_of(a);
    sftp_attributes_free(a);
    return 1;
}

static int join(const char *dir, const char *name, char **ret)
{
    char *p;

    if (asprintf(&p, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", name) < 0)
        return -ENOMEM;
    if (strlen(p) > SSHFILE_PATH_MAX) {
        free(p);
        return -ENAMETOOLONG;
    }
    *ret = p;
    return 0;
}

/* ---- the operations' common part ---- */

enum op_kind { OP_LIST, OP_STAT, OP_REMOVE, OP_MKDIR, OP_RENAME };

struct fs_op {
    struct sshfile_op op; /* first */
    enum op_kind kind;
    char *path, *to;
    bool flag; /* follow, recursive, parents */
    mode_t mode;
    size_t limit;
    union {
        sshfile_list_cb list;
        sshfile_stat_cb stat;
        sshfile_done_cb done;
    } cb;
    void *userdata;
    /* results */
    struct sshfile_list_result list;
    size_t cap;
    struct sshfile_entry st;
    uint64_t count;
    bool to_side; /* rename: a failure from here on concerns `to` */
};

/* ---- list ---- */

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct sshfile_entry *)a)->name, ((const struct sshfile_entry *)b)->name);
}

static int list_add(struct fs_op *o, const struct sftp_attributes_struct *a)
{
    if (o->list.n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        struct sshfile_entry *e = reallocarray(o->list.entries, cap, sizeof(*e));

        if (!e)
            return -ENOMEM;
        o->list.entries = e;
        o->cap = cap;
    }
    if (entry_fill(a, a->name, &o->list.entries[o->list.n]) < 0)
        return -ENOMEM;
    o->list.n++;
    return 0;
}

static int list_run(struct sshfile *f, struct fs_op *o)
{
    sftp_session s = sshfile_sftp(f);
    sftp_attributes a;
    sftp_dir d;
    int t, r = 0;

    t = sshfile_path_type(f, o->path, NULL);
    if (t == 0)
        return sshfile_refine_enoent(f, o->path);
    if (t < 0)
        return t;
    if (t != SSH_FILEXFER_TYPE_DIRECTORY)
        return -ENOTDIR;
    d = sftp_opendir(s, o->path);
    if (!d) {
        r = sshfile_last_error(f);
        return r == -ENOENT ? sshfile_refine_enoent(f, o->path) : r;
    }
    while (r == 0 && (a = sftp_readdir(s, d))) {
        if (!a->name || is_dot(a->name))
            ;
        else if (o->list.n == o->limit)
            o->list.truncated = true;
        else
            r = list_add(o, a);
        sftp_attributes_free(a);
        if (o->list.truncated)
            break;
    }
    if (r == 0 && !o->list.truncated && !sftp_dir_eof(d))
        r = sshfile_last_error(f);
    sftp_closedir(d);
    if (r == 0 && o->list.n > 1)
        qsort(o->list.entries, o->list.n, sizeof(*o->list.entries), entry_cmp);
    return r;
}

/* ---- stat ---- */

static int stat_run(struct sshfile *f, struct fs_op *o)
{
    sftp_session s = sshfile_sftp(f);
    sftp_attributes a = o->flag ? sftp_stat(s, o->path) : sftp_lstat(s, o->path);
    int r;

    if (!a) {
        r = sshfile_last_error(f);
        return r == -ENOENT ? sshfile_refine_enoent(f, o->path) : r;
    }
    r = entry_fill(a, path_base(o->path), &o->st);
    sftp_attributes_free(a);
    if (r < 0)
        return r;
    if (o->st.type == SSHFILE_SYMLINK) {
        char *t = sftp_readlink(s, o->path);

        if (t) {
            if (strlen(t) <= SSHFILE_LINK_MAX)
                o->st.target = strdup(t);
            ssh_string_free_char(t);
        }
    }
    return 0;
}

/* ---- remove ---- */

struct name_entry {
    char *name;
    bool dir;
};

static void dirents_free(struct name_entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

/* The entries of folder path (not following links), at most max: more is -E2BIG. */
static int read_names(struct sshfile *f, const char *path, size_t max, struct name_entry **ret,
                      size_t *ret_n)
{
    sftp_session s = sshfile_sftp(f);
    struct name_entry *v = NULL;
    size_t n = 0, cap = 0;
    sftp_attributes a;
    sftp_dir d;
    int r = 0;

    d = sftp_opendir(s, path);
    if (!d)
        return sshfile_last_error(f);
    while (r == 0 && (a = sftp_readdir(s, d))) {
        if (a->name && !is_dot(a->name)) {
            if (n == max)
                r = -E2BIG;
            else if (n == cap) {
                struct name_entry *nv = reallocarray(v, cap ? cap * 2 : 32, sizeof(*v));
                if (nv) {
                    v = nv;
                    cap = cap ? cap * 2 : 32;
                } else
                    r = -ENOMEM;
            }
            if (r == 0) {
                v[n].name = strdup(a->name);
                v[n].dir = a->type == SSH_FILEXFER_TYPE_DIRECTORY;
                if (v[n].name)
                    n++;
                else
                    r = -ENOMEM;
            }
        }
        sftp_attributes_free(a);
    }
    if (r == 0 && !sftp_dir_eof(d))
        r = sshfile_last_error(f);
    sftp_closedir(d);
    if (r < 0) {
        dirents_free(v, n);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

/* Counts (remove false) or removes the contents of folder path, depth first, never following
 * a link: a sub-folder is checked with lstat before it is entered. */
static int tree_walk(struct sshfile *f, struct fs_op *o, const char *path, bool remove)
{
    sftp_session s = sshfile_sftp(f);
    struct name_entry *v = NULL;
    size_t n = 0;
    int r;

    r = read_names(f, path, SSHFILE_REMOVE_MAX, &v, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && r == 0; i++) {
        _cleanup_free_ char *child = NULL;
        enum sshfile_type t = SSHFILE_OTHER;

        if (!remove && ++o->count > SSHFILE_REMOVE_MAX) {
            r = -E2BIG;
            break;
        }
        r = join(path, v[i].name, &child);
        if (r < 0)
            break;
        if (v[i].dir) {
            r = lstat_type(f, child, &t);
            if (r == 0)
                continue; /* gone meanwhile */
            if (r < 0)
                break;
            r = 0;
        }
        if (t == SSHFILE_DIR) {
            r = tree_walk(f, o, child, remove);
            if (r == 0 && remove && sftp_rmdir(s, child) < 0)
                r = change_error(f, child, path);
        } else if (remove && sftp_unlink(s, child) < 0) {
            r = change_error(f, child, path);
        }
        if (r == 0 && remove)
            o->count++;
    }
    dirents_free(v, n);
    return r;
}

/* rmdir failed with a generic error: not empty, or read-only, or ... */
static int rmdir_error(struct sshfile *f, const char *path, const char *dir)
{
    struct name_entry *v = NULL;
    size_t n = 0;
    int r = sshfile_last_error(f);

    if (r != -EIO)
        return r == -ENOENT ? sshfile_refine_enoent(f, path) : r;
    if (read_names(f, path, 1, &v, &n) == -E2BIG || n > 0) {
        dirents_free(v, n);
        return -ENOTEMPTY;
    }
    return sshfile_refine_failure(f, NULL, dir);
}

static int remove_run(struct sshfile *f, struct fs_op *o)
{
    sftp_session s = sshfile_sftp(f);
    _cleanup_free_ char *dir = NULL;
    size_t n = strlen(o->path);
    enum sshfile_type t;
    const char *base;
    int r;

    if (strspn(o->path, "/") == n)
        return -EPERM;
    /* "dir/" and "dir/." would name what a link "dir" points to: remove names, not targets. */
    while (n > 1 && o->path[n - 1] == '/')
        o->path[--n] = 0;
    base = strrchr(o->path, '/') + 1;
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return -EINVAL;
    r = path_dir(o->path, &dir);
    if (r < 0)
        return r;
    r = lstat_type(f, o->path, &t);
    if (r == 0)
        return sshfile_refine_enoent(f, o->path);
    if (r < 0)
        return r;
    if (t != SSHFILE_DIR) {
        o->op.mutated = true;
        if (sftp_unlink(s, o->path) < 0)
            return change_error(f, o->path, dir);
        o->count = 1;
        return 0;
    }
    if (o->flag) {
        uint64_t counted;

        r = tree_walk(f, o, o->path, false);
        if (r < 0)
            return r;
        counted = o->count;
        o->count = 0;
        o->op.mutated = true;
        /* Within the bound: `rm -rf` in the sandbox does it in one round trip. When it fails
         * (or is missing), the walk over SFTP removes what it can and finds the errno. */
        r = sshfile_remove_exec(f, o->path);
        if (r == 0 && lstat_type(f, o->path, &t) == 0) {
            o->count = counted + 1;
            return 0;
        }
        if (r < 0 && !ssh_is_connected(sshfile_ssh(f)))
            return r;
        r = tree_walk(f, o, o->path, true);
        if (r < 0)
            return r;
    }
    o->op.mutated = true;
    if (sftp_rmdir(s, o->path) < 0)
        return rmdir_error(f, o->path, dir);
    o->count++;
    return 0;
}

/* ---- mkdir ---- */

static int mkdir_run(struct sshfile *f, struct fs_op *o)
{
    sftp_session s = sshfile_sftp(f);
    _cleanup_free_ char *dir = NULL;
    enum sshfile_type t;
    int r;

    r = path_dir(o->path, &dir);
    if (r < 0)
        return r;
    if (o->flag) {
        o->op.mutated = true;
        r = sshfile_mkdir_parents(f, dir);
        if (r < 0)
            return r;
    }
    r = sshfile_path_type(f, o->path, NULL);
    if (r < 0)
        return r;
    if (r > 0)
        return o->flag && r == SSH_FILEXFER_TYPE_DIRECTORY ? 0 : -EEXIST;
    o->op.mutated = true;
    if (sftp_mkdir(s, o->path, o->mode & 0777) < 0) {
        r = sshfile_last_error(f);
        if (r == -ENOENT)
            return sshfile_refine_enoent(f, o->path);
        if (lstat_type(f, o->path, &t) > 0)
            return o->flag && t == SSHFILE_DIR ? 0 : -EEXIST;
        return r == -EIO ? sshfile_refine_failure(f, NULL, dir) : r;
    }
    if (sftp_chmod(s, o->path, o->mode) < 0)
        return sshfile_last_error(f);
    o->count = 1;
    return 0;
}

/* ---- rename ---- */

/* The file system id of the one path is on (statvfs@openssh.com); 0 when unknown. */
static uint64_t fs_id(struct sshfile *f, const char *path)
{
    sftp_session s = sshfile_sftp(f);
    sftp_statvfs_t vfs;
    uint64_t id;

    if (!sftp_extension_supported(s, "statvfs@openssh.com", "2"))
        return 0;
    vfs = sftp_statvfs(s, path);
    if (!vfs)
        return 0;
    id = vfs->f_fsid;
    sftp_statvfs_free(vfs);
    return id;
}

/* What rename(2) would refuse before touching anything: the root (EBUSY), a folder into
 * itself (EINVAL), another file system (EXDEV; OpenSSH's v3 server folds it into a generic
 * failure). */
static int rename_check(struct sshfile *f, const struct fs_op *o, const char *to_dir)
{
    _cleanup_free_ char *from_dir = NULL;
    size_t n = strlen(o->path);
    uint64_t a, b;
    int r;

    if (strcmp(o->path, "/") == 0 || strcmp(o->to, "/") == 0)
        return -EBUSY;
    if (strncmp(o->to, o->path, n) == 0 && o->to[n] == '/')
        return -EINVAL;
    r = path_dir(o->path, &from_dir);
    if (r < 0)
        return r;
    a = fs_id(f, from_dir);
    b = fs_id(f, to_dir);
    return a && b && a != b ? -EXDEV : 0;
}

static int rename_run(struct sshfile *f, struct fs_op *o)
{
    sftp_session s = sshfile_sftp(f);
    _cleanup_free_ char *dir = NULL;
    enum sshfile_type tf, tt;
    int r;

    r = path_dir(o->to, &dir);
    if (r < 0)
        return r;
    r = lstat_type(f, o->path, &tf);
    if (r == 0)
        return sshfile_refine_enoent(f, o->path);
    if (r < 0)
        return r;
    if (strcmp(o->path, o->to) == 0)
        return 0;
    if (strcmp(o->path, "/") == 0)
        return -EBUSY;
    o->to_side = true;
    r = rename_check(f, o, dir);
    if (r < 0)
        return r;
    r = lstat_type(f, o->to, &tt);
    if (r < 0)
        return r;
    if (r > 0 && tt == SSHFILE_DIR)
        return tf == SSHFILE_DIR ? -EEXIST : -EISDIR;
    if (r > 0 && tf == SSHFILE_DIR)
        return -ENOTDIR;
    o->op.mutated = true;
    if (r > 0 && tt == SSHFILE_FILE)
        return sshfile_rename_exec(f, o->path, o->to); /* atomic: rename(2) */
    if (r > 0 && sftp_unlink(s, o->to) < 0)
        return change_error(f, o->to, dir);
    if (sftp_rename(s, o->path, o->to) < 0) {
        r = sshfile_last_error(f);
        if (r == -ENOENT)
            return sshfile_refine_enoent(f, o->to);
        return r == -EIO ? sshfile_refine_failure(f, NULL, dir) : r;
    }
    return 0;
}

/* ---- write in place ---- */

int sshfile_write_in_place(struct sshfile *f, const char *path, const void *data, size_t len,
                           mode_t mode, uint64_t offset, bool append, bool *mutated)
{
    sftp_session s = sshfile_sftp(f);
    _cleanup_free_ char *real = NULL, *dir = NULL;
    sftp_file file;
    size_t off = 0;
    int exists, r = 0;

    r = path_dir(path, &dir);
    if (r < 0)
        return r;
    exists = sshfile_write_target(f, path, &real);
    if (exists < 0)
        return exists;
    *mutated = true;
    /* Not O_APPEND: libssh 0.10 leaks the attributes it fetches for it. The end is where the
     * file ends when the write starts. */
    file = sftp_open(s, path, O_WRONLY | O_CREAT, mode & 0777);
    if (!file)
        return change_error(f, path, dir);
    if (append) {
        sftp_attributes a = sftp_fstat(file);

        if (!a) {
            r = sshfile_last_error(f);
            sftp_close(file);
            return r;
        }
        offset = a->size;
        sftp_attributes_free(a);
    }
    (void)sftp_seek64(file, offset);
    while (off < len && r == 0) {
        size_t n = MIN(len - off, (size_t)WRITE_CHUNK);
        ssize_t w = sftp_write(file, (const char *)data + off, n);
        if (w <= 0)
            r = sshfile_last_error(f);
        else
            off += (size_t)w;
    }
    if (r == 0 && sftp_extension_supported(s, "fsync@openssh.com", "1") && sftp_fsync(file) < 0)
        r = sshfile_last_error(f);
    if (r < 0) {
        sftp_close(file);
        /* EINVAL from the seek or the write: past the largest file the file system holds. */
        if (r == -EBADMSG)
            r = -EFBIG;
        else if (r == -EIO)
            r = sshfile_refine_failure(f, NULL, dir);
        if (!exists && r != -ECONNRESET)
            (void)sftp_unlink(s, path); /* made by this write: not left behind */
        return r;
    }
    if (sftp_close(file) < 0)
        return sshfile_last_error(f);
    if (!exists && sftp_chmod(s, path, mode) < 0)
        return sshfile_last_error(f);
    return 0;
}

/* The job's in-place write (struct job's write_in_place). */
static int write_in_place(struct sshfile *f, struct job *j)
{
    return sshfile_write_in_place(f, j->path, j->data, j->len, j->mode, j->woffset, j->append,
                                  &j->op_mutated);
}

/* ---- writes: submitted here, run by sshfile.c's write job ---- */

int sshfile_write(struct sshfile *f, const struct sshfile_write_params *params, sshfile_write_cb cb,
                  void *userdata)
{
    struct job *j;
    size_t n;
    int r;

    if (!f || !params || !cb)
        return -EINVAL;
    r = sshfile_submit_check(f, params->path);
    if (r < 0)
        return r;
    n = strlen(params->path);
    if (params->path[n - 1] == '/' || (params->mode & ~(mode_t)07777))
        return -EINVAL;
    if (params->len > SSHFILE_WRITE_MAX)
        return -EFBIG;
    if (params->in_place && !params->append &&
        (params->offset > SSHFILE_OFFSET_MAX || params->len > SSHFILE_OFFSET_MAX - params->offset))
        return -EFBIG;
    if (params->len > 0 && !params->data)
        return -EINVAL;
    j = sshfile_job_new(JOB_WRITE, params->path, userdata);
    if (!j)
        return -ENOMEM;
    j->data = params->data; /* taken on success */
    j->len = params->len;
    j->mode = params->mode;
    j->make_parents = params->make_parents;
    j->in_place = params->in_place;
    j->append = params->append;
    j->woffset = params->offset;
    j->wcb = cb;
    if (j->in_place)
        j->write_in_place = write_in_place;
    r = sshfile_submit(f, j);
    if (r < 0) {
        free(j->path); /* the data is still the caller's */
        free(j);
    }
    return r;
}

/* ---- loop side ---- */

static int fs_run(struct sshfile *f, struct sshfile_op *op)
{
    struct fs_op *o = container_of(op, struct fs_op, op);
    int r = -EINVAL;

    switch (o->kind) {
    case OP_LIST:
        r = list_run(f, o);
        break;
    case OP_STAT:
        r = stat_run(f, o);
        break;
    case OP_REMOVE:
        r = remove_run(f, o);
        break;
    case OP_MKDIR:
        r = mkdir_run(f, o);
        break;
    case OP_RENAME:
        r = rename_run(f, o);
        break;
    }
    return r == -EBADMSG ? sshfile_bad_message_errno(o->path, o->to) : r;
}

static void fs_notify(int error, struct sshfile_op *op)
{
    struct fs_op *o = container_of(op, struct fs_op, op);

    switch (o->kind) {
    case OP_LIST:
        o->cb.list(error, error == 0 ? &o->list : NULL, o->userdata);
        break;
    case OP_STAT:
        o->cb.stat(error, error == 0 ? &o->st : NULL, o->userdata);
        break;
    default:
        o->cb.done(error, error == 0 ? o->count : (uint64_t)o->to_side, o->userdata);
        break;
    }
}

static void fs_free(struct sshfile_op *op)
{
    struct fs_op *o = container_of(op, struct fs_op, op);

    for (size_t i = 0; i < o->list.n; i++)
        entry_done(&o->list.entries[i]);
    free(o->list.entries);
    entry_done(&o->st);
    free(o->path);
    free(o->to);
    free(o);
}

static const struct sshfile_op_type fs_type = {
    .run = fs_run,
    .notify = fs_notify,
    .free = fs_free,
};

static int fs_submit(struct sshfile *f, struct fs_op *tmpl)
{
    struct fs_op *o;
    int r;

    if (!f)
        return -EINVAL;
    if (tmpl->to && (tmpl->to[0] != '/' || strlen(tmpl->to) > SSHFILE_PATH_MAX))
        return tmpl->to[0] != '/' ? -EINVAL : -EFBIG;
    o = calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;
    *o = *tmpl;
    o->op.type = &fs_type;
    o->path = strdup(tmpl->path);
    o->to = tmpl->to ? strdup(tmpl->to) : NULL;
    if (!o->path || (tmpl->to && !o->to))
        r = -ENOMEM;
    else
        r = sshfile_submit_op(f, o->path, &o->op);
    if (r < 0)
        fs_free(&o->op);
    return r;
}

int sshfile_list(struct sshfile *f, const char *path, size_t limit, sshfile_list_cb cb,
                 void *userdata)
{
    if (!path || !cb || limit == 0)
        return -EINVAL;
    if (limit > SSHFILE_LIST_MAX)
        return -EFBIG;
    return fs_submit(f, &(struct fs_op){.kind = OP_LIST,
                                        .path = (char *)path,
                                        .limit = limit,
                                        .cb.list = cb,
                                        .userdata = userdata});
}

int sshfile_stat(struct sshfile *f, const char *path, bool follow, sshfile_stat_cb cb,
                 void *userdata)
{
    if (!path || !cb)
        return -EINVAL;
    return fs_submit(f, &(struct fs_op){.kind = OP_STAT,
                                        .path = (char *)path,
                                        .flag = follow,
                                        .cb.stat = cb,
                                        .userdata = userdata});
}

int sshfile_remove(struct sshfile *f, const char *path, bool recursive, sshfile_done_cb cb,
                   void *userdata)
{
    if (!path || !cb)
        return -EINVAL;
    return fs_submit(f, &(struct fs_op){.kind = OP_REMOVE,
                                        .path = (char *)path,
                                        .flag = recursive,
                                        .cb.done = cb,
                                        .userdata = userdata});
}

int sshfile_mkdir(struct sshfile *f, const char *path, bool parents, mode_t mode,
                  sshfile_done_cb cb, void *userdata)
{
    if (!path || !cb || (mode & ~(mode_t)07777))
        return -EINVAL;
    return fs_submit(f, &(struct fs_op){.kind = OP_MKDIR,
                                        .path = (char *)path,
                                        .flag = parents,
                                        .mode = mode,
                                        .cb.done = cb,
                                        .userdata = userdata});
}

int sshfile_rename(struct sshfile *f, const char *from, const char *to, sshfile_done_cb cb,
                   void *userdata)
{
    if (!from || !to || !cb)
        return -EINVAL;
    return fs_submit(f, &(struct fs_op){.kind = OP_RENAME,
                                        .path = (char *)from,
                                        .to = (char *)to,
                                        .cb.done = cb,
                                        .userdata = userdata});
}
