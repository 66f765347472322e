/* Who is an admin: root, and the members of [server] admin_group. The group is
 * resolved through NSS (which may block) only when the configuration is loaded:
 * at start on the main thread before the loop runs, at reload on a worker thread
 * (admin_set_resolve_async); checking a caller is then a lookup in memory. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

struct admin_set {
    bool has_gid; /* the group exists */
    gid_t gid;
    uid_t *uids; /* members by name (gr_mem), resolved to uids */
    size_t n_uids;
};

/* Resolves group (NULL: no admin group) into *ret (written only on success). Blocks on
 * NSS. Returns 0, or a negative errno when a lookup fails (an NSS error, or a group or
 * member entry over 16 MiB); a group that does not exist yields an empty set, a member
 * name without a user is left out. */
int admin_set_resolve(const char *group, struct admin_set *ret);
/* admin_set_resolve() into *ret, replacing what it held only on success (the old set is
 * kept on an error). */
int admin_set_load(struct admin_set *ret, const char *group);

/* Called on the loop with the resolved set (NULL with error < 0); cb may take the set's
 * contents with admin_set_swap(). */
typedef void (*admin_set_cb)(int error, struct admin_set *set, void *userdata);
/* admin_set_resolve() on libuv's thread pool; cb runs on the loop once it is done. The
 * caller keeps userdata alive until then (the loop does not end before it). */
int admin_set_resolve_async(uv_loop_t *loop, const char *group, admin_set_cb cb, void *userdata);

/* Root, a caller whose gid is the group's, or a listed member. */
bool admin_set_has(const struct admin_set *a, uid_t uid, gid_t gid);
void admin_set_swap(struct admin_set *a, struct admin_set *b);
void admin_set_done(struct admin_set *a);
