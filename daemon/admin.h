/* Who is an admin: root, and the members of [server] admin_group. The group is
 * resolved through NSS (which may block) only when the configuration is loaded,
 * at start and at reload; checking a caller is then a lookup in memory. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct admin_set {
    bool has_gid; /* the group exists */
    gid_t gid;
    uid_t *uids; /* members by name (gr_mem), resolved to uids */
    size_t n_uids;
};

/* Resolves group (NULL: no admin group) into *ret, replacing what it held only on
 * success. Returns 0, or a negative errno (the old set is kept). A group that
 * does not exist yields an empty set, not an error. */
int admin_set_load(struct admin_set *ret, const char *group);
/* Root, a caller whose gid is the group's, or a listed member. */
bool admin_set_has(const struct admin_set *a, uid_t uid, gid_t gid);
void admin_set_done(struct admin_set *a);
