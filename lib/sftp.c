/* SFTP file transfer on libuv's thread pool. See sftp.h. */
#include <fcntl.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statvfs.h>

#include "log.h"
#include "macro.h"
#include "sftp.h"
#include "sshexec.h"
#include "sshs-internal.h"

#define COMP "sftp"
#define SSHFILE_CHUNK (192u * 1024u)
#define SSHFILE_READ_CHUNK (64u * 1024u)
#define SSHFILE_READ_AHEAD 16u
/* How long the `mv -f` fallback may take. */
#define SSHFILE_MV_TIMEOUT_MS 30000

enum job_kind {
    JOB_WRITE,
    JOB_READ,
    JOB_CLOSE,
};

struct sshfile;

struct job {
    uv_work_t work;
    struct sshfile *f;
    enum job_kind kind;
    struct job *next;
    char *path;
    /* write */
    const void *data;
    size_t len;
    mode_t mode;
    bool make_parents;
    sshfile_write_cb wcb;
    /* read */
    uint64_t offset, length;
    sshfile_read_cb rcb;
    struct sshfile_read_result rres;
    void *userdata;
    int error;
    bool drop_session;
};

struct sshfile {
    uv_loop_t *loop;
    struct sshs_conf conf;
    /* Owned by the job on the thread pool while busy; the loop thread never touches them. */
    ssh_session ssh;
    sftp_session sftp;
    bool busy;
    struct job *qfirst, *qlast;
    unsigned queued;
    bool closing;
    void (*close_cb)(void *userdata);
    void *close_ud;
};

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
        /* OpenSSH's sftp-server answers ENAMETOOLONG and EINVAL with this. */
        return -EINVAL;
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
static int last_error(struct sshfile *f)
{
    int st = sftp_get_error(f->sftp);

    if (!ssh_is_connected(f->ssh))
        return -ECONNRESET;
    if (st == SSH_FX_OK)
        return -EPROTO; /* failed without a status: a protocol or channel error */
    return sshfile_status_to_errno(st);
}

/* ---- worker side: the session ---- */

static void session_drop(struct sshfile *f)
{
    if (f->sftp) {
        sftp_free(f->sftp);
        f->sftp = NULL;
    }
    if (f->ssh) {
        if (ssh_is_connected(f->ssh))
            ssh_disconnect(f->ssh);
        ssh_free(f->ssh);
        f->ssh = NULL;
    }
}

static int session_ensure(struct sshfile *f)
{
    ssh_session ssh = NULL;
    sftp_session sftp;
    int r;

    if (f->ssh && f->sftp && ssh_is_connected(f->ssh))
        return 0;
    session_drop(f);
    r = sshs_connect_blocking(&f->conf, SSHFILE_IO_TIMEOUT_S, &ssh);
    if (r < 0)
        return r;
    sftp = sftp_new(ssh);
    if (!sftp || sftp_init(sftp) != SSH_OK) {
        log_debug(COMP, "%s: sftp init: %s", f->conf.host, ssh_get_error(ssh));
        if (sftp)
            sftp_free(sftp);
        ssh_disconnect(ssh);
        ssh_free(ssh);
        return -EPROTO;
    }
    f->ssh = ssh;
    f->sftp = sftp;
    return 0;
}

static bool is_transport_error(int r)
{
    return r == -ECONNRESET || r == -ENOTCONN || r == -EPROTO || r == -EPIPE;
}

/* ---- worker side: path helpers ---- */

/* stat type of path: 0 missing, SSH_FILEXFER_TYPE_* when present, <0 other errors. */
static int path_type(struct sshfile *f, const char *path, uint64_t *ret_size)
{
    sftp_attributes a = sftp_stat(f->sftp, path);
    int type;

    if (!a) {
        int r = last_error(f);
        return r == -ENOENT ? 0 : r;
    }
    type = a->type;
    if (ret_size)
        *ret_size = a->size;
    sftp_attributes_free(a);
    return type > 0 ? type : SSH_FILEXFER_TYPE_UNKNOWN;
}

/* OpenSSH's v3 server folds ENOTDIR into "no such file": find out which one it was. */
static int refine_enoent(struct sshfile *f, const char *path)
{
    _cleanup_free_ char *p = strdup(path);
    char *s;

    if (!p)
        return -ENOENT;
    for (s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
        int t;
        *s = 0;
        t = path_type(f, p, NULL);
        *s = '/';
        if (t == 0)
            return -ENOENT;
        if (t > 0 && t != SSH_FILEXFER_TYPE_DIRECTORY)
            return -ENOTDIR;
        if (t < 0)
            return t;
    }
    return -ENOENT;
}

/* A generic failure while creating or replacing path: directory, full disk, read-only? */
static int refine_failure(struct sshfile *f, const char *path, const char *dir)
{
    sftp_statvfs_t vfs;

    if (path && path_type(f, path, NULL) == SSH_FILEXFER_TYPE_DIRECTORY)
        return -EISDIR;
    if (sftp_extension_supported(f->sftp, "statvfs@openssh.com", "2")) {
        vfs = sftp_statvfs(f->sftp, dir);
        if (vfs) {
            int r = -EIO;
            if (vfs->f_flag & SSH_FXE_STATVFS_ST_RDONLY)
                r = -EROFS;
            else if (vfs->f_bavail == 0 || vfs->f_favail == 0)
                r = -ENOSPC;
            sftp_statvfs_free(vfs);
            return r;
        }
    }
    return -EIO;
}

static int mkdir_parents(struct sshfile *f, const char *dir)
{
    _cleanup_free_ char *p = strdup(dir);
    char *s;
    int t;

    if (!p)
        return -ENOMEM;
    t = path_type(f, p, NULL);
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
        t = path_type(f, p, NULL);
        if (t < 0)
            return t;
        if (t == 0) {
            if (sftp_mkdir(f->sftp, p, 0755) < 0) {
                int r = last_error(f);
                /* Raced with another creator: fine if it is a directory now. */
                if (path_type(f, p, NULL) != SSH_FILEXFER_TYPE_DIRECTORY)
                    return r == -EIO ? refine_failure(f, NULL, "/") : r;
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

/* rename(2) through `mv -f` on an exec channel of the same (blocking) session: atomic
 * replace even where the SFTP v3 rename refuses an existing target. */
static int rename_by_exec(struct sshfile *f, const char *from, const char *to)
{
    _cleanup_free_ char *qf = NULL, *qt = NULL, *cmd = NULL;
    ssh_channel ch;
    char buf[512];
    int r, status;

    r = sshexec_shell_quote(from, &qf);
    if (r < 0)
        return r;
    r = sshexec_shell_quote(to, &qt);
    if (r < 0)
        return r;
    if (asprintf(&cmd, "exec mv -f %s %s", qf, qt) < 0)
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

static void random_hex(char *buf, size_t n_bytes)
{
    uint8_t rnd[16];

    if (n_bytes > sizeof(rnd))
        n_bytes = sizeof(rnd);
    if (getrandom(rnd, n_bytes, 0) != (ssize_t)n_bytes)
        memset(rnd, 0x5a, n_bytes);
    for (size_t i = 0; i < n_bytes; i++)
        snprintf(buf + 2 * i, 3, "%02x", rnd[i]);
}

static int do_write(struct sshfile *f, struct job *j)
{
    _cleanup_free_ char *dir = NULL, *tmp = NULL;
    const char *base;
    char rnd[33];
    sftp_file file;
    size_t off = 0;
    int r, t;

    base = strrchr(j->path, '/') + 1;
    dir = strndup(j->path, (size_t)(base - j->path));
    if (!dir)
        return -ENOMEM;
    if (strlen(dir) > 1)
        dir[strlen(dir) - 1] = 0; /* drop the trailing '/' except for "/" */

    if (j->make_parents) {
        r = mkdir_parents(f, dir);
        if (r < 0)
            return r;
    }
    t = path_type(f, j->path, NULL);
    if (t == SSH_FILEXFER_TYPE_DIRECTORY)
        return -EISDIR;

    random_hex(rnd, 8);
    if (asprintf(&tmp, "%s%s.%s.sandboxd-%s", dir, strcmp(dir, "/") == 0 ? "" : "/", base, rnd) < 0)
        return -ENOMEM;
    file = sftp_open(f->sftp, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (!file) {
        r = last_error(f);
        if (r == -ENOENT)
            return refine_enoent(f, tmp);
        if (r == -EIO)
            return refine_failure(f, NULL, dir);
        return r;
    }
    while (off < j->len) {
        size_t n = MIN(j->len - off, (size_t)SSHFILE_CHUNK);
        ssize_t w = sftp_write(file, (const char *)j->data + off, n);
        if (w <= 0) {
            r = last_error(f);
            if (r == -EIO)
                r = refine_failure(f, NULL, dir);
            sftp_close(file);
            goto fail;
        }
        off += (size_t)w;
    }
    if (sftp_extension_supported(f->sftp, "fsync@openssh.com", "1") && sftp_fsync(file) < 0) {
        r = last_error(f);
        if (r == -EIO)
            r = refine_failure(f, NULL, dir);
        sftp_close(file);
        goto fail;
    }
    if (sftp_close(file) < 0) {
        r = last_error(f);
        goto fail;
    }
    if (sftp_chmod(f->sftp, tmp, j->mode) < 0) {
        r = last_error(f);
        goto fail;
    }
    if (t > 0) {
        /* The target exists: OpenSSH's v3 rename would refuse to replace it. */
        r = rename_by_exec(f, tmp, j->path);
        if (r < 0)
            goto fail;
    } else if (sftp_rename(f->sftp, tmp, j->path) < 0) {
        r = last_error(f);
        if (is_transport_error(r))
            goto fail;
        t = path_type(f, j->path, NULL);
        if (t == SSH_FILEXFER_TYPE_DIRECTORY) {
            r = -EISDIR;
            goto fail;
        }
        if (t <= 0)
            goto fail;
        /* Created by someone else meanwhile. */
        r = rename_by_exec(f, tmp, j->path);
        if (r < 0)
            goto fail;
    }
    return 0;

fail:
    if (ssh_is_connected(f->ssh))
        (void)sftp_unlink(f->sftp, tmp);
    return r;
}

static int do_read(struct sshfile *f, struct job *j)
{
    _cleanup_free_ char *buf = NULL;
    uint64_t size = 0, want;
    size_t got = 0;
    sftp_file file;
    int t, r;

    t = path_type(f, j->path, &size);
    if (t < 0)
        return t;
    if (t == 0)
        return refine_enoent(f, j->path);
    if (t == SSH_FILEXFER_TYPE_DIRECTORY)
        return -EISDIR;
    want = j->offset >= size ? 0 : MIN(j->length, size - j->offset);
    buf = malloc((size_t)want + 1);
    if (!buf)
        return -ENOMEM;
    file = sftp_open(f->sftp, j->path, O_RDONLY, 0);
    if (!file) {
        r = last_error(f);
        return r == -ENOENT ? refine_enoent(f, j->path) : r;
    }
    if (j->offset > 0 && sftp_seek64(file, j->offset) < 0) {
        sftp_close(file);
        return -EIO;
    }
    /* Pipelined: up to SSHFILE_READ_AHEAD requests in flight (one RTT each otherwise). Only
     * bytes known to exist are requested; if the file shrank meanwhile the replies left
     * behind are dropped with the session. */
    {
        int ids[SSHFILE_READ_AHEAD];
        uint32_t lens[SSHFILE_READ_AHEAD];
        unsigned head = 0, n = 0;
        uint64_t issued = 0;
        bool short_read = false;

        while (n > 0 || (issued < want && !short_read)) {
            while (n < SSHFILE_READ_AHEAD && issued < want && !short_read) {
                uint32_t len = (uint32_t)MIN(want - issued, (uint64_t)SSHFILE_READ_CHUNK);
                int id = sftp_async_read_begin(file, len);
                if (id < 0) {
                    r = last_error(f);
                    goto read_fail;
                }
                ids[(head + n) % SSHFILE_READ_AHEAD] = id;
                lens[(head + n) % SSHFILE_READ_AHEAD] = len;
                n++;
                issued += len;
            }
            if (short_read) {
                /* Replies after a short one would land at the wrong offset. */
                r = -EAGAIN;
                goto read_fail;
            }
            {
                int k = sftp_async_read(file, buf + got, lens[head], (uint32_t)ids[head]);
                if (k < 0) {
                    r = last_error(f);
                    goto read_fail;
                }
                got += (size_t)k;
                if ((uint32_t)k < lens[head])
                    short_read = true;
                head = (head + 1) % SSHFILE_READ_AHEAD;
                n--;
                if (short_read && n > 0) {
                    r = -EAGAIN;
                    goto read_fail;
                }
            }
        }
    }
    sftp_close(file);
    buf[got] = 0;
    j->rres.data = TAKE_PTR(buf);
    j->rres.len = got;
    j->rres.size = got > 0 ? MAX(size, j->offset + got) : size;
    j->rres.eof = j->offset + got >= j->rres.size;
    return 0;

read_fail:
    /* Outstanding replies would stay queued in the session: start afresh next time. */
    sftp_close(file);
    j->drop_session = true;
    if (r == -EAGAIN)
        r = -EIO; /* the file changed under the read */
    return r;
}

static void on_job_work(uv_work_t *w)
{
    struct job *j = container_of(w, struct job, work);
    struct sshfile *f = j->f;
    bool reused;
    int r;

    if (j->kind == JOB_CLOSE) {
        session_drop(f);
        return;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        reused = f->ssh != NULL;
        r = session_ensure(f);
        if (r < 0)
            break;
        r = j->kind == JOB_WRITE ? do_write(f, j) : do_read(f, j);
        /* A kept session may have died while idle: reconnect once and retry. Both
         * operations are idempotent (the write is a fresh temporary + rename). */
        if (r < 0 && reused && is_transport_error(r)) {
            session_drop(f);
            continue;
        }
        break;
    }
    if ((r < 0 && is_transport_error(r)) || j->drop_session)
        session_drop(f);
    j->error = r;
}

/* ---- loop side ---- */

static void job_free(struct job *j)
{
    if (!j)
        return;
    free(j->rres.data);
    free(j->path);
    free(j);
}

static void job_complete(struct job *j, int error)
{
    if (j->kind == JOB_WRITE)
        j->wcb(error, error == 0 ? j->len : 0, j->userdata);
    else if (j->kind == JOB_READ)
        j->rcb(error, error == 0 ? &j->rres : NULL, j->userdata);
    job_free(j);
}

static void on_job_done(uv_work_t *w, int status);

static void start_job(struct sshfile *f, struct job *j)
{
    int r;

    f->busy = true;
    r = uv_queue_work(f->loop, &j->work, on_job_work, on_job_done);
    if (r < 0) {
        /* Not expected (uv_queue_work only fails on bad arguments); fail in place. */
        j->error = r;
        on_job_done(&j->work, r);
    }
}

static void on_close_done(uv_work_t *w, int status)
{
    struct job *j = container_of(w, struct job, work);
    struct sshfile *f = j->f;
    void (*cb)(void *) = f->close_cb;
    void *ud = f->close_ud;

    job_free(j);
    sshs_conf_done(&f->conf);
    free(f);
    if (cb)
        cb(ud);
}

static void start_close(struct sshfile *f)
{
    struct job *j = calloc(1, sizeof(*j));
    int r;

    f->busy = true;
    if (j) {
        j->f = f;
        j->kind = JOB_CLOSE;
        r = uv_queue_work(f->loop, &j->work, on_job_work, on_close_done);
        if (r == 0)
            return;
        free(j);
    }
    /* No memory: tear down here (may block briefly on a graceful disconnect). */
    session_drop(f);
    j = calloc(1, sizeof(*j));
    if (j) {
        j->f = f;
        on_close_done(&j->work, 0);
    }
}

static void on_job_done(uv_work_t *w, int status)
{
    struct job *j = container_of(w, struct job, work);
    struct sshfile *f = j->f;
    struct job *next;

    f->busy = false;
    job_complete(j, status < 0 ? status : j->error);
    /* The callback may have closed f (then a close job is already running). */
    if (f->busy)
        return;
    if (f->closing) {
        start_close(f);
        return;
    }
    next = f->qfirst;
    if (next) {
        f->qfirst = next->next;
        if (!f->qfirst)
            f->qlast = NULL;
        f->queued--;
        next->next = NULL;
        start_job(f, next);
    }
}

static int submit(struct sshfile *f, struct job *j)
{
    if (f->queued >= SSHFILE_QUEUE_MAX)
        return -EBUSY;
    j->f = f;
    if (!f->busy) {
        start_job(f, j);
        return 0;
    }
    if (f->qlast)
        f->qlast->next = j;
    else
        f->qfirst = j;
    f->qlast = j;
    f->queued++;
    return 0;
}

static int path_validate(const char *path)
{
    size_t n;

    if (!path || path[0] != '/')
        return -EINVAL;
    n = strlen(path);
    if (n > SSHFILE_PATH_MAX)
        return -EFBIG;
    return 0;
}

int sshfile_new(uv_loop_t *loop, const struct sshs_config *cfg, struct sshfile **ret)
{
    struct sshfile *f;
    int r;

    if (!loop || !ret)
        return -EINVAL;
    f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    r = sshs_conf_copy(cfg, &f->conf);
    if (r < 0) {
        free(f);
        return r;
    }
    f->loop = loop;
    *ret = f;
    return 0;
}

void sshfile_close(struct sshfile *f, void (*cb)(void *userdata), void *userdata)
{
    struct job *j;

    if (!f || f->closing)
        return;
    f->closing = true;
    f->close_cb = cb;
    f->close_ud = userdata;
    while ((j = f->qfirst)) {
        f->qfirst = j->next;
        f->queued--;
        job_complete(j, -ECANCELED);
    }
    f->qlast = NULL;
    if (!f->busy)
        start_close(f);
}

int sshfile_write(struct sshfile *f, const struct sshfile_write_params *params, sshfile_write_cb cb,
                  void *userdata)
{
    struct job *j;
    size_t n;
    int r;

    if (!f || !params || !cb)
        return -EINVAL;
    if (f->closing)
        return -ESHUTDOWN;
    r = path_validate(params->path);
    if (r < 0)
        return r;
    n = strlen(params->path);
    if (params->path[n - 1] == '/' || (params->mode & ~(mode_t)07777))
        return -EINVAL;
    if (params->len > SSHFILE_WRITE_MAX)
        return -EFBIG;
    if (params->len > 0 && !params->data)
        return -EINVAL;
    j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->kind = JOB_WRITE;
    j->path = strdup(params->path);
    if (!j->path) {
        free(j);
        return -ENOMEM;
    }
    j->data = params->data;
    j->len = params->len;
    j->mode = params->mode;
    j->make_parents = params->make_parents;
    j->wcb = cb;
    j->userdata = userdata;
    r = submit(f, j);
    if (r < 0)
        job_free(j);
    return r;
}

int sshfile_read(struct sshfile *f, const char *path, uint64_t offset, uint64_t length,
                 sshfile_read_cb cb, void *userdata)
{
    struct job *j;
    int r;

    if (!f || !cb)
        return -EINVAL;
    if (f->closing)
        return -ESHUTDOWN;
    r = path_validate(path);
    if (r < 0)
        return r;
    if (length > SSHFILE_READ_MAX)
        return -EFBIG;
    if (offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->kind = JOB_READ;
    j->path = strdup(path);
    if (!j->path) {
        free(j);
        return -ENOMEM;
    }
    j->offset = offset;
    j->length = length ? length : SSHFILE_READ_MAX;
    j->rcb = cb;
    j->userdata = userdata;
    r = submit(f, j);
    if (r < 0)
        job_free(j);
    return r;
}
