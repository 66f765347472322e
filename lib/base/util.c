#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "macro.h"

/* Base32 without the letters easily misread (i, l, o, u). 32 symbols, so a
 * random byte masked with 31 picks each one with equal probability. */
static const char id_alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";

static bool id_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

bool id_is_valid(const char *s)
{
    size_t i;

    if (!s || !*s)
        return false;
    for (i = 0; s[i]; i++) {
        if (i >= ID_MAX || !id_char_ok(s[i]))
            return false;
    }
    return true;
}

int id_random(char *buf, size_t n, const char *prefix)
{
    uint8_t rnd[ID_RANDOM_CHARS];
    size_t plen;

    if (!buf)
        return -EINVAL;
    if (!prefix)
        prefix = "";
    plen = strlen(prefix);
    for (size_t i = 0; i < plen; i++)
        if (!id_char_ok(prefix[i]))
            return -EINVAL;
    if (plen + ID_RANDOM_CHARS > ID_MAX)
        return -EINVAL;
    if (n < plen + ID_RANDOM_CHARS + 1)
        return -ENOBUFS;
    /* Up to 256 bytes, getrandom() returns them all and no signal interrupts it. */
    _Static_assert(sizeof(rnd) <= 256, "one getrandom() call");
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return errno > 0 ? -errno : -EIO;
    memcpy(buf, prefix, plen);
    for (size_t i = 0; i < ID_RANDOM_CHARS; i++)
        buf[plen + i] = id_alphabet[rnd[i] & 31];
    buf[plen + ID_RANDOM_CHARS] = '\0';
    return 0;
}

/* Splits path into an opened folder fd (for fsync and *at calls) and the last
 * component. */
static int open_parent(int dirfd, const char *path, int *ret_fd, const char **ret_base)
{
    const char *slash = strrchr(path, '/');
    _cleanup_free_ char *dir = NULL;
    int fd;

    if (!slash) {
        fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        *ret_fd = fd;
        *ret_base = path;
        return 0;
    }
    if (slash[1] == '\0')
        return -EISDIR;
    if (slash == path)
        dir = strdup("/");
    else
        dir = strndup(path, (size_t)(slash - path));
    if (!dir)
        return -ENOMEM;
    fd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    *ret_fd = fd;
    *ret_base = slash + 1;
    return 0;
}

int write_all(int fd, const void *data, size_t n)
{
    const uint8_t *p = data;

    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

bool atomic_is_temp_name(const char *name)
{
    const char *dot;

    if (!name || strncmp(name, ".#", 2) != 0)
        return false;
    dot = strrchr(name, '.');
    return dot && dot > name + 2 && strlen(dot + 1) == 8;
}

int atomic_write_file(int dirfd, const char *path, const void *data, size_t n, mode_t mode)
{
    _cleanup_close_ int dfd = -1;
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *tmp = NULL;
    const char *base;
    int r;

    if (!path || !*path || (!data && n > 0))
        return -EINVAL;
    r = open_parent(dirfd, path, &dfd, &base);
    if (r < 0)
        return r;
    if (strlen(base) > NAME_MAX - 11)
        return -ENAMETOOLONG;

    for (int attempt = 0; attempt < 16; attempt++) {
        char suffix[ID_RANDOM_CHARS + 1];

        r = id_random(suffix, sizeof(suffix), "");
        if (r < 0)
            return r;
        suffix[8] = '\0';
        free(tmp);
        if (asprintf(&tmp, ".#%s.%s", base, suffix) < 0) {
            tmp = NULL;
            return -ENOMEM;
        }
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0)
            break;
        if (errno != EEXIST)
            return -errno;
    }
    if (fd < 0)
        return -EEXIST;

    r = write_all(fd, data, n);
    if (r >= 0)
        r = RET_NERRNO(fchmod(fd, mode));
    if (r >= 0)
        r = RET_NERRNO(fsync(fd));
    if (r >= 0) {
        r = RET_NERRNO(close(TAKE_FD(fd)));
    }
    if (r >= 0)
        r = RET_NERRNO(renameat(dfd, tmp, dfd, base));
    if (r < 0) {
        (void)unlinkat(dfd, tmp, 0);
        return r;
    }
    /* The rename is durable only once the folder is. */
    r = RET_NERRNO(fsync(dfd));
    if (r < 0)
        return r;
    return 0;
}

/* fsync of path's folder, after unlinking path when asked to. */
static int sync_parent(int dirfd, const char *path, bool unlink_first)
{
    _cleanup_close_ int dfd = -1;
    const char *base;
    int r;

    if (!path || !*path)
        return -EINVAL;
    r = open_parent(dirfd, path, &dfd, &base);
    if (r < 0)
        return r;
    if (unlink_first && unlinkat(dfd, base, 0) < 0)
        return -errno;
    return RET_NERRNO(fsync(dfd));
}

int fsync_parent(int dirfd, const char *path)
{
    return sync_parent(dirfd, path, false);
}

int unlink_durable(int dirfd, const char *path)
{
    return sync_parent(dirfd, path, true);
}

int read_file_flags(int dirfd, const char *path, size_t max, unsigned flags, char **ret_data,
                    size_t *ret_n)
{
    bool secret = flags & READ_FILE_SECRET;
    _cleanup_close_ int fd = -1;
    struct stat st;
    size_t len = 0, cap;
    char *buf;
    int r;

    if (!path || !ret_data)
        return -EINVAL;
    fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | (secret ? O_NOCTTY : O_NOFOLLOW | O_NONBLOCK));
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return secret ? -EINVAL : -EBADFD;
    if ((uint64_t)st.st_size > max)
        return -EFBIG;
    /* A secret gets one buffer of the largest size: growing it would leave copies in freed
     * memory. */
    cap = secret ? max + 1 : (size_t)st.st_size + 1;
    buf = malloc(cap + 1);
    if (!buf)
        return -ENOMEM;
    /* Read until EOF: the size may have changed since fstat. */
    for (;;) {
        ssize_t k = read(fd, buf + len, cap - len);

        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            r = -errno;
            goto fail;
        }
        if (k == 0)
            break;
        len += (size_t)k;
        if (len > max) {
            r = -EFBIG;
            goto fail;
        }
        if (len == cap) { /* not for a secret: its cap is max + 1 */
            char *nb;

            cap = MIN(cap * 2, max + 1);
            nb = realloc(buf, cap + 1);
            if (!nb) {
                r = -ENOMEM;
                goto fail;
            }
            buf = nb;
        }
    }
    buf[len] = '\0';
    *ret_data = buf;
    if (ret_n)
        *ret_n = len;
    return 0;

fail:
    explicit_bzero(buf, len);
    free(buf);
    return r;
}

int read_file_max(int dirfd, const char *path, size_t max, char **ret_data, size_t *ret_n)
{
    return read_file_flags(dirfd, path, max, 0, ret_data, ret_n);
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int jobj_sorted_keys(json_object *o, const char ***ret_keys, size_t *ret_n)
{
    const char **keys = NULL;
    size_t n, i = 0;

    if (!json_object_is_type(o, json_type_object) || !ret_keys || !ret_n)
        return -EINVAL;
    n = (size_t)json_object_object_length(o);
    if (n > 0) {
        keys = calloc(n, sizeof(*keys));
        if (!keys)
            return -ENOMEM;
        json_object_object_foreach(o, k, v_unused)
        {
            (void)v_unused;
            keys[i++] = k;
        }
        qsort(keys, n, sizeof(*keys), cmp_strp);
    }
    *ret_keys = keys;
    *ret_n = n;
    return 0;
}

int mkdir_p(const char *path, mode_t mode)
{
    _cleanup_free_ char *p = NULL;
    struct stat st;

    if (!path || !*path)
        return -EINVAL;
    p = strdup(path);
    if (!p)
        return -ENOMEM;
    for (char *s = p + 1;; s++) {
        bool end = *s == '\0';
        if (*s != '/' && !end)
            continue;
        *s = '\0';
        if (mkdir(p, mode) < 0) {
            if (errno != EEXIST)
                return -errno;
            if (stat(p, &st) < 0)
                return -errno;
            if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        }
        if (end)
            break;
        *s = '/';
    }
    return 0;
}

/* v (0 <= v < 10^count) as count decimal digits. */
static void put_digits(char *p, int v, int count)
{
    for (int i = count - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
}

int time_format_rfc3339(time_t t, char *buf, size_t n)
{
    struct tm tm;

    if (!buf)
        return -EINVAL;
    if (!gmtime_r(&t, &tm))
        return -ERANGE;
    if (tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999)
        return -ERANGE;
    if (n < RFC3339_MAX)
        return -ENOBUFS;
    /* strftime's "%Y-%m-%dT%H:%M:%SZ", without its locale work: %Y is not padded, so a year
     * below 1000 would not make the fixed length. */
    if (tm.tm_year + 1900 < 1000)
        return -ERANGE;
    put_digits(buf, tm.tm_year + 1900, 4);
    buf[4] = '-';
    put_digits(buf + 5, tm.tm_mon + 1, 2);
    buf[7] = '-';
    put_digits(buf + 8, tm.tm_mday, 2);
    buf[10] = 'T';
    put_digits(buf + 11, tm.tm_hour, 2);
    buf[13] = ':';
    put_digits(buf + 14, tm.tm_min, 2);
    buf[16] = ':';
    put_digits(buf + 17, tm.tm_sec, 2);
    memcpy(buf + 19, "Z", 2);
    return 0;
}

static int parse_digits(const char **p, int count, int *ret)
{
    int v = 0;

    for (int i = 0; i < count; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return -EINVAL;
        v = v * 10 + (c - '0');
    }
    *p += count;
    *ret = v;
    return 0;
}

static int expect_char(const char **p, const char *set)
{
    if (**p == '\0' || !strchr(set, **p))
        return -EINVAL;
    (*p)++;
    return 0;
}

static bool is_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int time_parse_rfc3339(const char *s, time_t *ret)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int year, mon, day, hour, min, sec, off = 0;
    struct tm tm = {0};
    const char *p = s;
    time_t t;

    if (!s || !ret)
        return -EINVAL;
    if (parse_digits(&p, 4, &year) < 0 || expect_char(&p, "-") < 0 ||
        parse_digits(&p, 2, &mon) < 0 || expect_char(&p, "-") < 0 ||
        parse_digits(&p, 2, &day) < 0 || expect_char(&p, "Tt") < 0 ||
        parse_digits(&p, 2, &hour) < 0 || expect_char(&p, ":") < 0 ||
        parse_digits(&p, 2, &min) < 0 || expect_char(&p, ":") < 0 || parse_digits(&p, 2, &sec) < 0)
        return -EINVAL;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1, oh, om;
        p++;
        if (parse_digits(&p, 2, &oh) < 0 || expect_char(&p, ":") < 0 ||
            parse_digits(&p, 2, &om) < 0)
            return -EINVAL;
        if (oh > 23 || om > 59)
            return -EINVAL;
        off = sign * (oh * 3600 + om * 60);
    } else {
        return -EINVAL;
    }
    if (*p != '\0')
        return -EINVAL;
    if (mon < 1 || mon > 12 || day < 1 || hour > 23 || min > 59 || sec > 60)
        return -EINVAL;
    if (day > mdays[mon - 1] + (mon == 2 && is_leap(year)))
        return -EINVAL;
    if (sec == 60) /* a leap second: time_t has none */
        sec = 59;
    tm.tm_year = year - 1900;
    tm.tm_mon = mon - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = min;
    tm.tm_sec = sec;
    t = timegm(&tm);
    *ret = t - off;
    return 0;
}

uint64_t now_monotonic_us(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t now_monotonic_ms(void)
{
    return now_monotonic_us() / 1000u;
}

/* test.clock_step's simulated steps of the wall clock (test hooks only). */
static int64_t realtime_step_s;

time_t now_realtime(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + (time_t)realtime_step_s;
}

void now_realtime_test_step(int64_t seconds)
{
    realtime_step_s += seconds;
}

uint64_t now_boottime_s(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec;
}

int sha256_hex(const void *data, size_t n, char ret[SHA256_HEX_SIZE])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if ((!data && n > 0) || !ret)
        return -EINVAL;
    if (EVP_Digest(data ? data : "", n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
        return -EIO;
    for (unsigned int i = 0; i < mdlen; i++) {
        ret[2 * i] = hex[md[i] >> 4];
        ret[2 * i + 1] = hex[md[i] & 15];
    }
    ret[64] = '\0';
    return 0;
}

bool hex_is_valid(const char *s, size_t len)
{
    size_t i;

    if (!s || !*s)
        return false;
    for (i = 0; s[i]; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return len == 0 || i == len;
}

const char *startswith(const char *s, const char *prefix)
{
    size_t n;

    if (!s || !prefix)
        return NULL;
    n = strlen(prefix);
    return strncmp(s, prefix, n) == 0 ? s + n : NULL;
}

bool endswith(const char *s, const char *suffix)
{
    size_t a, b;

    if (!s || !suffix)
        return false;
    a = strlen(s);
    b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

int strdup_replace(char **ret, const char *s)
{
    char *c = NULL;

    if (!ret)
        return -EINVAL;
    if (s) {
        c = strdup(s);
        if (!c)
            return -ENOMEM;
    }
    free(*ret);
    *ret = c;
    return 0;
}

int path_dir(const char *path, char **ret)
{
    const char *base = strrchr(path, '/') + 1;
    size_t n = (size_t)(base - path);
    char *d = strndup(path, n > 1 ? n - 1 : n);

    if (!d)
        return -ENOMEM;
    *ret = d;
    return 0;
}

void util_random_hex(char *buf, size_t n_bytes)
{
    uint8_t rnd[16];

    if (n_bytes > sizeof(rnd))
        n_bytes = sizeof(rnd);
    if (getrandom(rnd, n_bytes, 0) != (ssize_t)n_bytes)
        for (size_t i = 0; i < n_bytes; i++)
            rnd[i] = (uint8_t)(rand() & 0xff);
    for (size_t i = 0; i < n_bytes; i++)
        snprintf(buf + 2 * i, 3, "%02x", rnd[i]);
}

void free_many(void *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i]);
}

void close_many(int *const *fds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        closep(fds[i]);
        *fds[i] = -1;
    }
}
