/* Small helpers shared by lib/ and daemon/: random ids, RFC 3339 UTC time,
 * atomic file replacement, clocks, hashes and string helpers. No loop, no
 * logging, no global state: safe to call from thread-pool workers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <json-c/json.h>

/* Number of random characters after the prefix in an id made by id_random():
 * 12 base32 characters, 60 bits of entropy. */
#define ID_RANDOM_CHARS 12
/* Longest id accepted anywhere (sandbox ids, instance ids); the protocol's limit on
 * a sandbox id, PARAMS_ID_MAX in proto/params.h, is the same. */
#define ID_MAX 64
/* "2026-12-02T12:00:00Z" plus the NUL. */
#define RFC3339_MAX 21
/* Hex SHA-256 plus the NUL. */
#define SHA256_HEX_SIZE 65

/* Writes prefix followed by ID_RANDOM_CHARS characters of [0-9a-z] (a base32
 * alphabet without i, l, o, u) from getrandom(2) into buf.
 * Returns 0, -ENOBUFS when buf is too small, -EINVAL for a prefix outside
 * [a-z0-9-], or the getrandom error. */
int id_random(char *buf, size_t n, const char *prefix);
/* True for a non-empty string of [a-z0-9-], at most ID_MAX characters. */
bool id_is_valid(const char *s);

/* Replaces path (relative to dirfd, or AT_FDCWD) atomically with data: a
 * unique temp file in the same folder (O_EXCL), full write, fsync, mode set
 * exactly (umask ignored), rename over path, fsync of the folder. On failure the
 * temp file is removed and path is unchanged. Returns 0 or a negative errno. */
int atomic_write_file(int dirfd, const char *path, const void *data, size_t n, mode_t mode);
/* True for the names atomic_write_file() uses for its temp files
 * (".#<name>.<random>"), so that a folder scan can remove leftovers of a crash. */
bool atomic_is_temp_name(const char *name);
/* Removes path (relative to dirfd) and fsyncs its folder. -ENOENT if absent. */
int unlink_durable(int dirfd, const char *path);
/* fsync of the folder that holds path (relative to dirfd). */
int fsync_parent(int dirfd, const char *path);
/* Reads a whole regular file of at most max bytes; the result is NUL-terminated
 * (ret_n excludes the NUL). -EFBIG when larger than max. A symbolic link is not
 * followed and a non-regular file is -EBADFD. */
int read_file_max(int dirfd, const char *path, size_t max, char **ret_data, size_t *ret_n);
/* read_file_flags() for a secret (a key, a token): a symbolic link is followed, a
 * non-regular file is -EINVAL, and the bytes are read into one buffer of max + 1
 * bytes (no copy left behind in freed memory), wiped on failure. */
#define READ_FILE_SECRET (1u << 0)
int read_file_flags(int dirfd, const char *path, size_t max, unsigned flags, char **ret_data,
                    size_t *ret_n);
/* The keys of a JSON object in strcmp() order, borrowed from o: *ret_keys (free()
 * the array only) is NULL when o has no key. -EINVAL when o is not an object. */
int jobj_sorted_keys(json_object *o, const char ***ret_keys, size_t *ret_n);
/* mkdir -p with mode for each created component; existing folders are kept
 * as they are. Returns 0 or a negative errno. */
int mkdir_p(const char *path, mode_t mode);

/* "2026-12-02T12:00:00Z". buf needs RFC3339_MAX bytes. -ERANGE if the year is
 * outside 0000..9999, -ENOBUFS when buf is too small. */
int time_format_rfc3339(time_t t, char *buf, size_t n);
/* Parses "YYYY-MM-DDTHH:MM:SS[.frac](Z|+hh:mm|-hh:mm)" ('t' and 'z' accepted,
 * fraction truncated) into seconds since the epoch. -EINVAL on anything else. */
int time_parse_rfc3339(const char *s, time_t *ret);
/* CLOCK_MONOTONIC in milliseconds / microseconds. */
uint64_t now_monotonic_ms(void);
uint64_t now_monotonic_us(void);
/* CLOCK_REALTIME in seconds. */
time_t now_realtime(void);
/* Test hook: moves now_realtime() by seconds, as a step of the system clock would. */
void now_realtime_test_step(int64_t seconds);
/* CLOCK_BOOTTIME in seconds: never steps, counts a suspend. */
uint64_t now_boottime_s(void);

/* SHA-256 of data as lowercase hex into ret (SHA256_HEX_SIZE bytes). */
int sha256_hex(const void *data, size_t n, char ret[SHA256_HEX_SIZE]);
/* True when s is exactly len lowercase hex digits (len 0: any length >= 1). */
bool hex_is_valid(const char *s, size_t len);

/* Writes all n bytes to fd, retrying on EINTR and short writes. 0 or -errno. */
int write_all(int fd, const void *data, size_t n);

/* Returns the rest of s after prefix, or NULL when s does not start with it. */
const char *startswith(const char *s, const char *prefix);
/* True when s ends with suffix. */
bool endswith(const char *s, const char *suffix);
/* The folder part of an absolute path, allocated: "/a/b" gives "/a", "/b" gives "/".
 * 0 or -ENOMEM. */
int path_dir(const char *path, char **ret);
static inline bool streq_ptr(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}
/* Sets *ret to a copy of s (NULL passes through), freeing the old value.
 * -ENOMEM leaves *ret unchanged. */
int strdup_replace(char **ret, const char *s);

/* n_bytes (at most 16) random bytes as 2 * n_bytes lowercase hex digits and a NUL into buf
 * (getrandom(2); rand(3) should it fail). */
void util_random_hex(char *buf, size_t n_bytes);

/* What to call once an object closed asynchronously is freed ("closed" callbacks): the
 * object keeps it until then, and the caller copies it out before the free. */
struct close_notify {
    void (*cb)(void *userdata);
    void *userdata;
};
/* Calls n's callback, if any. */
static inline void close_notify_run(struct close_notify n)
{
    if (n.cb)
        n.cb(n.userdata);
}

/* Frees each of the n pointers of p (NULL ones included, as free() does). For a
 * struct's run of owned strings: FREE_MANY(x->a, x->b, x->c). */
void free_many(void *const *p, size_t n);
#define FREE_MANY(...)                                                                             \
    free_many((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))
/* Closes each of the n descriptors *fds[i] that is >= 0 and sets it to -1; errno is
 * kept. For a struct's descriptors: CLOSE_MANY(&x->fd_in, &x->fd_out). */
void close_many(int *const *fds, size_t n);
#define CLOSE_MANY(...)                                                                            \
    close_many((int *const[]){__VA_ARGS__}, sizeof((int *const[]){__VA_ARGS__}) / sizeof(int *))
