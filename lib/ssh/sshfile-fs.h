/* File system operations in a sandbox over its SFTP session (sshfile.h): list a folder, stat,
 * remove (a tree too), make folders, rename. Each is one request of the sshfile's queue:
 * run on the file pool, one at a time per sandbox, within the sshfile's deadline (-ETIME
 * past it, with the session dropped as sshfile.h describes; an operation cut by its deadline
 * may have done part of its work).
 *
 * Errors passed to the callbacks: those of sshfile.h, plus -ENOTEMPTY (a folder that is not
 * empty), -E2BIG (a tree over SSHFILE_REMOVE_MAX entries: nothing removed), -EPERM (removing
 * the root folder). The submit functions return -EINVAL (a path not absolute), -EFBIG (a path
 * over SSHFILE_PATH_MAX, a limit over SSHFILE_LIST_MAX), -ENOMEM, -EBUSY (queue full),
 * -ESHUTDOWN, and never call the callback then. Loop thread only; callbacks on the loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sshfile.h"

/* SSHFILE_LIST_MAX and SSHFILE_REMOVE_MAX: proto/api-limits.h (via sshfile.h). */
#define SSHFILE_LINK_MAX 4096u /* bytes of a symbolic link's target reported */

enum sshfile_type {
    SSHFILE_FILE,
    SSHFILE_DIR,
    SSHFILE_SYMLINK,
    SSHFILE_OTHER, /* FIFO, socket, device, unknown */
};

/* "file", "dir", "symlink", "other". */
const char *sshfile_type_to_string(enum sshfile_type t);

struct sshfile_entry {
    char *name; /* the last component of the path (list: the entry's name) */
    enum sshfile_type type;
    uint64_t size;
    unsigned mode; /* permission bits, ≤ 07777 */
    int64_t mtime; /* seconds since the epoch */
    char *target;  /* a symbolic link's target (stat without follow), else NULL */
};

struct sshfile_list_result {
    struct sshfile_entry *entries; /* sorted by name (bytes) */
    size_t n;
    bool truncated; /* the folder holds more than the limit: which ones came is unspecified */
};

/* Lists a folder (a link to one is followed), without "." and "..", at most limit entries
 * (1..SSHFILE_LIST_MAX). Entries are not followed: a link is a "symlink". A path that is
 * not a folder is -ENOTDIR. res is NULL unless error == 0 and is freed after the callback. */
typedef void (*sshfile_list_cb)(int error, const struct sshfile_list_result *res, void *userdata);
int sshfile_list(struct sshfile *f, const char *path, size_t limit, sshfile_list_cb cb,
                 void *userdata);

/* stat (follow) or lstat of path. st is NULL unless error == 0. */
typedef void (*sshfile_stat_cb)(int error, const struct sshfile_entry *st, void *userdata);
int sshfile_stat(struct sshfile *f, const char *path, bool follow, sshfile_stat_cb cb,
                 void *userdata);

/* count: what the operation did (remove: entries removed; mkdir: folders created). */
typedef void (*sshfile_done_cb)(int error, uint64_t count, void *userdata);

/* Removes a file, a symbolic link (never what it points to) or an empty folder; with
 * recursive, a folder and everything in it, never following a link (a link in the tree is
 * removed, its target is left alone). The tree is counted first: one of more than
 * SSHFILE_REMOVE_MAX entries is -E2BIG and nothing is removed. It is then removed by
 * `rm -rf` on an exec channel (one round trip), or, when that fails, entry by entry over
 * SFTP, which finds the errno. count: the entries counted, plus the folder. "/" is -EPERM. */
int sshfile_remove(struct sshfile *f, const char *path, bool recursive, sshfile_done_cb cb,
                   void *userdata);

/* Makes a folder with exactly mode (≤ 07777; umask does not apply). parents: missing parents
 * are made (mode 0755) and a folder that exists already is no error (count 0). */
int sshfile_mkdir(struct sshfile *f, const char *path, bool parents, mode_t mode,
                  sshfile_done_cb cb, void *userdata);

/* Renames from to to. An existing `to` that is not a folder is replaced (a regular file
 * atomically, rename(2); a link or other entry is removed first); an existing folder `to`
 * is -EISDIR (or -EEXIST when from is a folder too) and left alone. On an error the count
 * the callback gets says which side it concerns: 0 `from`, 1 `to`. */
int sshfile_rename(struct sshfile *f, const char *from, const char *to, sshfile_done_cb cb,
                   void *userdata);
