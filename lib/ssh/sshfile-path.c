/* The worker side's helpers on a connected SFTP session (sshfile-internal.h): the errno of
 * a failed call, and what a path is, made or replaced, refined from OpenSSH's coarse answers.
 * They run on a pool thread with the job's session (sshfile.c), never on the loop. */
#include <assert.h>
#include <fcntl.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sshexec.h"
#include "sshfile-internal.h"
#include "sshfile.h"

/* How long the `mv -f` fallback (or an `rm -rf`) may take. */
#define SSHFILE_MV_TIMEOUT_MS 30000

/* ---- errors ---- */

int sshfile_status_to_errno(int status)
{
    switch (status) {
    case SSH_FX_OK:
        return 0;
    case SSH_FX_EOF:
        return -ENODATA;
    case SSH_FX_NO_SUCH_FILE:
    case SSH_FX_NO_SUCH_PATH:
        return -ENOENT;
    case SSH_FX_PERMISSION_DENIED:
        return -EACCES;
    case SSH_FX_BAD_MESSAGE:
        /* OpenSSH's sftp-server answers ENAMETOOLONG and EINVAL with this; the callers tell
         * them apart (sshfile_refine_bad_message()). */
        return -EBADMSG;
    case SSH_FX_NO_CONNECTION:
        return -ENOTCONN;
    case SSH_FX_CONNECTION_LOST:
        return -ECONNRESET;
    case SSH_FX_OP_UNSUPPORTED:
        return -EOPNOTSUPP;
    case SSH_FX_INVALID_HANDLE:
        return -EBADF;
    case SSH_FX_FILE_ALREADY_EXISTS:
        return -EEXIST;
    case SSH_FX_WRITE_PROTECT:
        return -EROFS;
    case SSH_FX_NO_MEDIA:
        return -ENOMEDIUM;
    case SSH_FX_FAILURE:
    default:
        return -EIO;
    }
}

/* The errno for the last failed SFTP call; a dead session is an SSH-level error. */
int sshfile_last_error(struct sshfile *f)
{
    int st;

    assert(f->ssh && f->sftp); /* a worker's, with its session */
    st = sftp_get_error(f->sftp);
    if (!ssh_is_connected(f->ssh))
        return -ECONNRESET;
    if (st == SSH_FX_OK)
        return -EPROTO; /* failed without a status: a protocol or channel error */
    return sshfile_status_to_errno(st);
}

/* ---- paths ---- */

/* stat type of path: 0 missing, SSH_FILEXFER_TYPE_* when present, <0 other errors. */
int sshfile_path_type(struct sshfile *f, const char *path, uint64_t *ret_size)
{
    sftp_attributes a = sftp_stat(f->sftp, path);
    int type;

    if (!a) {
        int r = sshfile_last_error(f);
        return r == -ENOENT ? 0 : r;
    }
    type = a->type;
    if (ret_size)
        *ret_size = a->size;
    sftp_attributes_free(a);
    return type > 0 ? type : SSH_FILEXFER_TYPE_UNKNOWN;
}

#define SYMLINK_HOPS_MAX 40 /* Linux's MAXSYMLINKS: more links on one path is ELOOP */

/* Whether path is a symbolic link whose chain of links never ends (the kernel's ELOOP): a
 * link is followed by reading it, up to SYMLINK_HOPS_MAX times. A chain that reaches a
 * missing name, or anything but a link, ends. */
static bool symlink_loops(struct sshfile *f, const char *path)
{
    _cleanup_free_ char *cur = strdup(path);

    for (unsigned hop = 0; cur && hop < SYMLINK_HOPS_MAX; hop++) {
        sftp_attributes a = sftp_lstat(f->sftp, cur);
        char *target, *next = NULL;
        bool link;

        if (!a)
            return false;
        link = a->type == SSH_FILEXFER_TYPE_SYMLINK;
        sftp_attributes_free(a);
        if (!link)
            return false;
        target = sftp_readlink(f->sftp, cur);
        if (!target)
            return false;
        if (target[0] == '/')
            next = strdup(target);
        else {
            char *slash = strrchr(cur, '/');
            int n = slash ? (int)(slash - cur) : 0;

            if (asprintf(&next, "%.*s/%s", n, cur, target) < 0)
                next = NULL;
        }
        ssh_string_free_char(target);
        free(cur);
        cur = next;
    }
    return cur != NULL;
}

/* OpenSSH's v3 server folds ENOTDIR and ELOOP into "no such file": find out which one it
 * was. */
int sshfile_refine_enoent(struct sshfile *f, const char *path)
{
    _cleanup_free_ char *p = strdup(path);
    char *s;
    int t;

    if (!p)
        return -ENOENT;
    for (s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
        if (s)
            *s = 0;
        t = sshfile_path_type(f, p, NULL);
        if (t == 0)
            return symlink_loops(f, p) ? -ELOOP : -ENOENT;
        if (s)
            *s = '/';
        if (t < 0)
            return t;
        if (!s)
            return -ENOENT;
        if (t != SSH_FILEXFER_TYPE_DIRECTORY)
            return -ENOTDIR;
    }
}

/* A generic failure while creating or replacing path: directory, full disk, read-only? */
int sshfile_refine_failure(struct sshfile *f, const char *path, const char *dir)
{
    sftp_statvfs_t vfs;

    if (path && sshfile_path_type(f, path, NULL) == SSH_FILEXFER_TYPE_DIRECTORY)
        return -EISDIR;
    if (sftp_extension_supported(f->sftp, "statvfs@openssh.com", "2")) {
        vfs = sftp_statvfs(f->sftp, dir);
        if (vfs) {
            int r = -EIO;
            if (vfs->f_flag & SSH_FXE_STATVFS_ST_RDONLY)
                r = -EROFS;
            else if ((vfs->f_blocks > 0 && vfs->f_bavail == 0) ||
                     (vfs->f_files > 0 && vfs->f_favail == 0))
                r = -ENOSPC; /* not for /proc and the like, which report no blocks */
            sftp_statvfs_free(vfs);
            return r;
        }
    }
    return -EIO;
}

int sshfile_mkdir_parents(struct sshfile *f, const char *dir)
{
    _cleanup_free_ char *p = strdup(dir);
    char *s;
    int t;

    if (!p)
        return -ENOMEM;
    t = sshfile_path_type(f, p, NULL);
    if (t == SSH_FILEXFER_TYPE_DIRECTORY)
        return 0;
    if (t < 0)
        return t;
    if (t > 0)
        return -ENOTDIR;
    /* Walk down from the root: stat each prefix, create the missing ones. */
    for (s = p + 1;; s++) {
        bool last = false;
        s = strchr(s, '/');
        if (!s)
            last = true;
        else
            *s = 0;
        t = sshfile_path_type(f, p, NULL);
        if (t < 0)
            return t;
        if (t == 0) {
            if (sftp_mkdir(f->sftp, p, 0755) < 0) {
                int r = sshfile_last_error(f);
                /* Raced with another creator: fine if it is a directory now. */
                if (sshfile_path_type(f, p, NULL) != SSH_FILEXFER_TYPE_DIRECTORY)
                    return r == -EIO ? sshfile_refine_failure(f, NULL, "/") : r;
            }
        } else if (t != SSH_FILEXFER_TYPE_DIRECTORY) {
            return -ENOTDIR;
        }
        if (last)
            break;
        *s = '/';
    }
    return 0;
}

/* Runs `verb a [b]` (each path quoted) on an exec channel of the same (blocking) session;
 * -EIO when it exits non-zero. */
static int exec_quoted(struct sshfile *f, const char *verb, const char *a, const char *b)
{
    _cleanup_free_ char *qf = NULL, *qt = NULL, *cmd = NULL;
    ssh_channel ch;
    char buf[512];
    int r, status;

    r = sshexec_shell_quote(a, &qf);
    if (r < 0)
        return r;
    r = b ? sshexec_shell_quote(b, &qt) : 0;
    if (r < 0)
        return r;
    if (asprintf(&cmd, "exec %s %s %s", verb, qf, qt ? qt : "") < 0)
        return -ENOMEM;
    ch = ssh_channel_new(f->ssh);
    if (!ch)
        return -ENOMEM;
    if (ssh_channel_open_session(ch) != SSH_OK || ssh_channel_request_exec(ch, cmd) != SSH_OK) {
        ssh_channel_free(ch);
        return ssh_is_connected(f->ssh) ? -EPROTO : -ECONNRESET;
    }
    for (;;) {
        int n = ssh_channel_read_timeout(ch, buf, sizeof(buf), 0, SSHFILE_MV_TIMEOUT_MS);
        if (n > 0)
            continue;
        if (n == 0 && ssh_channel_is_eof(ch))
            break;
        /* An error, or nothing within the timeout. */
        ssh_channel_close(ch);
        ssh_channel_free(ch);
        return n < 0 && !ssh_is_connected(f->ssh) ? -ECONNRESET : -ETIMEDOUT;
    }
    /* Drain stderr too (mv's message, if any), then read the exit status. */
    while (ssh_channel_read_timeout(ch, buf, sizeof(buf), 1, 1000) > 0)
        ;
    status = ssh_channel_get_exit_status(ch);
    ssh_channel_send_eof(ch);
    ssh_channel_close(ch);
    ssh_channel_free(ch);
    return status == 0 ? 0 : -EIO;
}

/* rename(2) through `mv -f`: atomic replace even where the SFTP v3 rename refuses an existing
 * target. */
int sshfile_rename_exec(struct sshfile *f, const char *from, const char *to)
{
    return exec_quoted(f, "mv -f", from, to);
}

int sshfile_remove_exec(struct sshfile *f, const char *path)
{
    return exec_quoted(f, "2>/dev/null rm -rf --", path, NULL);
}

/* What a write would replace. 0: nothing yet; 1: a regular file, with *ret_real set to the
 * file a symbolic link points to (left alone when path is not a link); < 0: refused
 * (-EISDIR, -EINVAL: not a regular file, or a link to nothing) or an error. */
int sshfile_write_target(struct sshfile *f, const char *path, char **ret_real)
{
    sftp_attributes a = sftp_lstat(f->sftp, path);
    char *real;
    int type;

    if (!a) {
        int r = sshfile_last_error(f);
        return r == -ENOENT ? 0 : r; /* a missing parent shows when the temp file is made */
    }
    type = a->type;
    sftp_attributes_free(a);
    if (type == SSH_FILEXFER_TYPE_SYMLINK) {
        /* Followed: what it points to decides, and is what gets replaced. */
        type = sshfile_path_type(f, path, NULL);
        if (type < 0)
            return type;
        if (type == 0)
            return -EINVAL;
        if (type == SSH_FILEXFER_TYPE_REGULAR || type == SSH_FILEXFER_TYPE_UNKNOWN) {
            real = sftp_canonicalize_path(f->sftp, path);
            if (!real)
                return sshfile_last_error(f);
            *ret_real = strdup(real);
            ssh_string_free_char(real);
            return *ret_real ? 1 : -ENOMEM;
        }
    }
    if (type == SSH_FILEXFER_TYPE_DIRECTORY)
        return -EISDIR;
    if (type == SSH_FILEXFER_TYPE_SPECIAL || type == SSH_FILEXFER_TYPE_SYMLINK)
        return -EINVAL;
    return 1;
}

/* Opens a regular file for reading; *ret_size is the size stat reports. */
int sshfile_read_open(struct sshfile *f, const char *path, uint64_t *ret_size, sftp_file *ret)
{
    uint64_t size = 0;
    sftp_file file;
    int t, r;

    t = sshfile_path_type(f, path, &size);
    if (t < 0)
        return t;
    if (t == 0)
        return sshfile_refine_enoent(f, path);
    if (t == SSH_FILEXFER_TYPE_DIRECTORY)
        return -EISDIR;
    /* Opening a FIFO blocks until a writer comes; devices and sockets are no files either. */
    if (t == SSH_FILEXFER_TYPE_SPECIAL)
        return -EINVAL;
    file = sftp_open(f->sftp, path, O_RDONLY, 0);
    if (!file) {
        r = sshfile_last_error(f);
        return r == -ENOENT ? sshfile_refine_enoent(f, path) : r;
    }
    *ret_size = size;
    *ret = file;
    return 0;
}

int sshfile_bad_message_errno(const char *a, const char *b)
{
    const char *paths[] = {a, b};

    for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
        const char *p = paths[i];

        if (!p)
            continue;
        if (strlen(p) >= PATH_MAX)
            return -ENAMETOOLONG;
        for (const char *c = p; *c;) {
            size_t n = strcspn(c, "/");

            if (n > NAME_MAX)
                return -ENAMETOOLONG;
            c += n + (c[n] == '/');
        }
    }
    return -EINVAL;
}
