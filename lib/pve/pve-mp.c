/* Mount point property strings. See pve-parse.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pve-parse.h"

void pve_mp_done(struct pve_mp *mp)
{
    if (!mp)
        return;
    free(mp->volume);
    free(mp->path);
    *mp = (struct pve_mp){0};
}

int pve_mp_parse(const char *s, struct pve_mp *ret)
{
    _cleanup_(pve_mp_done) struct pve_mp mp = {0};
    const char *comma;
    size_t vol_n;

    if (!s || !ret)
        return -EINVAL;
    comma = strchr(s, ',');
    vol_n = comma ? (size_t)(comma - s) : strlen(s);
    if (vol_n == 0 || memchr(s, '=', vol_n))
        return -EINVAL;
    mp.volume = strndup(s, vol_n);
    if (!mp.volume)
        return -ENOMEM;
    for (const char *item = comma; item; item = strchr(item + 1, ',')) {
        const char *v = item + 1, *end = strchr(v, ',');
        size_t n = end ? (size_t)(end - v) : strlen(v);

        if (n > 3 && strncmp(v, "mp=", 3) == 0) {
            free(mp.path);
            mp.path = strndup(v + 3, n - 3);
            if (!mp.path)
                return -ENOMEM;
        } else if (n > 3 && strncmp(v, "ro=", 3) == 0) {
            if (n != 4 || (v[3] != '0' && v[3] != '1'))
                return -EINVAL;
            mp.read_only = v[3] == '1';
        }
    }
    if (!mp.path || mp.path[0] != '/')
        return -EINVAL;
    if (strstr(s, ",size=")) {
        uint64_t bytes;

        if (pve_parse_rootfs_size(s, &bytes) < 0)
            return -EINVAL;
        mp.size_gb = (bytes + (1ULL << 30) - 1) >> 30;
    }
    *ret = mp;
    mp = (struct pve_mp){0};
    return 0;
}

static bool plain(const char *s)
{
    return s && *s && !strpbrk(s, ",= \t\r\n");
}

int pve_mp_format(const char *storage, uint64_t size_gb, const char *path, bool read_only,
                  char **ret_s)
{
    int r;

    if (!plain(storage) || !plain(path) || path[0] != '/' || !ret_s)
        return -EINVAL;
    if (size_gb > 0)
        r = asprintf(ret_s, "%s:%llu,mp=%s%s", storage, (unsigned long long)size_gb, path,
                     read_only ? ",ro=1" : "");
    else
        r = asprintf(ret_s, "%s,mp=%s%s", storage, path, read_only ? ",ro=1" : "");
    return r < 0 ? -ENOMEM : 0;
}
