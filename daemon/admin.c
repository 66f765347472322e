/* The admin group, resolved when the configuration is loaded. See admin.h. */
#include "admin.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

#define ADMIN_NSS_BUF_MIN (16 * 1024)
#define ADMIN_NSS_BUF_MAX (16 * 1024 * 1024) /* a group of many thousand members */

/* getgrnam_r/getpwnam_r with a buffer that grows on ERANGE. *ret_found is NULL for a name
 * that does not exist; any other failure is a negative errno. */
typedef int (*nss_fn)(const char *name, void *ent, char *buf, size_t n, void **ret);

static int nss_lookup(nss_fn fn, const char *name, void *ent, char **buf, size_t *n,
                      void **ret_found)
{
    for (;;) {
        void *found = NULL;
        int r;

        if (!*buf) {
            *buf = malloc(*n);
            if (!*buf)
                return -ENOMEM;
        }
        r = fn(name, ent, *buf, *n, &found);
        if (r == 0) {
            *ret_found = found;
            return 0;
        }
        if (r != ERANGE) {
            /* glibc says "no such name" with 0 and no entry; ENOENT and ESRCH are how some
             * NSS modules say it (getgrnam_r(3)). Anything else (EIO, EAGAIN, EMFILE, EPERM
             * of a directory service...) is an error of the lookup itself. */
            if (r != ENOENT && r != ESRCH)
                return -r;
            *ret_found = NULL;
            return 0;
        }
        if (*n >= ADMIN_NSS_BUF_MAX)
            return -ERANGE;
        free(*buf);
        *buf = NULL;
        *n *= 2;
    }
}

static int grnam(const char *name, void *ent, char *buf, size_t n, void **ret)
{
    return getgrnam_r(name, ent, buf, n, (struct group **)ret);
}

static int pwnam(const char *name, void *ent, char *buf, size_t n, void **ret)
{
    return getpwnam_r(name, ent, buf, n, (struct passwd **)ret);
}

int admin_set_resolve(const char *group, struct admin_set *ret)
{
    _cleanup_free_ char *buf = NULL, *pbuf = NULL;
    size_t nbuf = ADMIN_NSS_BUF_MIN, npbuf = ADMIN_NSS_BUF_MIN;
    struct admin_set a = {};
    struct group gr;
    void *found = NULL;
    size_t n = 0;
    int r;

    if (group) {
        r = nss_lookup(grnam, group, &gr, &buf, &nbuf, &found);
        if (r < 0)
            return r;
    }
    if (found) {
        struct group *grp = found;

        a.has_gid = true;
        a.gid = grp->gr_gid;
        while (grp->gr_mem && grp->gr_mem[n])
            n++;
    }
    if (n > 0) {
        struct group *grp = found;

        a.uids = calloc(n, sizeof(uid_t));
        if (!a.uids)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            struct passwd pw;
            void *pwp = NULL;

            r = nss_lookup(pwnam, grp->gr_mem[i], &pw, &pbuf, &npbuf, &pwp);
            if (r < 0) {
                admin_set_done(&a);
                return r;
            }
            if (pwp)
                a.uids[a.n_uids++] = ((struct passwd *)pwp)->pw_uid;
        }
    }
    *ret = a;
    return 0;
}

int admin_set_load(struct admin_set *ret, const char *group)
{
    struct admin_set a;
    int r;

    r = admin_set_resolve(group, &a);
    if (r < 0)
        return r;
    admin_set_done(ret);
    *ret = a;
    return 0;
}

/* ---- off the loop ---- */

struct admin_job {
    uv_work_t work;
    char *group;
    struct admin_set set;
    int r;
    admin_set_cb cb;
    void *userdata;
};

static void on_job_work(uv_work_t *w)
{
    struct admin_job *j = container_of(w, struct admin_job, work);

    j->r = admin_set_resolve(j->group, &j->set);
}

static void on_job_done(uv_work_t *w, int status)
{
    struct admin_job *j = container_of(w, struct admin_job, work);

    if (status < 0 && j->r == 0) {
        admin_set_done(&j->set);
        j->r = status;
    }
    j->cb(j->r, j->r < 0 ? NULL : &j->set, j->userdata);
    admin_set_done(&j->set);
    free(j->group);
    free(j);
}

int admin_set_resolve_async(uv_loop_t *loop, const char *group, admin_set_cb cb, void *userdata)
{
    struct admin_job *j = calloc(1, sizeof *j);
    int r;

    if (!j)
        return -ENOMEM;
    if (group && !(j->group = strdup(group))) {
        free(j);
        return -ENOMEM;
    }
    j->cb = cb;
    j->userdata = userdata;
    r = uv_queue_work(loop, &j->work, on_job_work, on_job_done);
    if (r < 0) {
        free(j->group);
        free(j);
        return r;
    }
    return 0;
}

bool admin_set_has(const struct admin_set *a, uid_t uid, gid_t gid)
{
    if (uid == 0)
        return true;
    if (!a || !a->has_gid)
        return false;
    if (gid == a->gid)
        return true;
    for (size_t i = 0; i < a->n_uids; i++)
        if (a->uids[i] == uid)
            return true;
    return false;
}

void admin_set_swap(struct admin_set *a, struct admin_set *b)
{
    struct admin_set t = *a;

    *a = *b;
    *b = t;
}

void admin_set_done(struct admin_set *a)
{
    if (!a)
        return;
    free(a->uids);
    *a = (struct admin_set){};
}
