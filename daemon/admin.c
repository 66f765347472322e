/* The admin group, resolved when the configuration is loaded. See admin.h. */
#include "admin.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"

#define ADMIN_NSS_BUF (64 * 1024)

int admin_set_load(struct admin_set *ret, const char *group)
{
    _cleanup_free_ char *buf = NULL, *pbuf = NULL;
    struct admin_set a = {};
    struct group gr, *grp = NULL;
    size_t n = 0;

    if (group) {
        buf = malloc(ADMIN_NSS_BUF);
        pbuf = malloc(ADMIN_NSS_BUF);
        if (!buf || !pbuf)
            return -ENOMEM;
        if (getgrnam_r(group, &gr, buf, ADMIN_NSS_BUF, &grp) == 0 && grp) {
            a.has_gid = true;
            a.gid = grp->gr_gid;
            while (grp->gr_mem && grp->gr_mem[n])
                n++;
        }
    }
    if (n > 0) {
        a.uids = calloc(n, sizeof(uid_t));
        if (!a.uids)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            struct passwd pw, *pwp = NULL;

            if (getpwnam_r(grp->gr_mem[i], &pw, pbuf, ADMIN_NSS_BUF, &pwp) == 0 && pwp)
                a.uids[a.n_uids++] = pwp->pw_uid;
        }
    }
    admin_set_done(ret);
    *ret = a;
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

void admin_set_done(struct admin_set *a)
{
    if (!a)
        return;
    free(a->uids);
    *a = (struct admin_set){};
}
