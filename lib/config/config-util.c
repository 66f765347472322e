/* The small parsers config.c and config-templates.c both use (pure, no state). */
#include "config-internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

void config_free_list(char **l, size_t n)
{
    if (!l)
        return;
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

int config_fail(char **ret_error, const char *fmt, ...)
{
    va_list ap;

    if (ret_error && !*ret_error) {
        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
            *ret_error = NULL;
        va_end(ap);
    }
    return -EINVAL;
}

int config_parse_uint(const char *v, unsigned long long *ret)
{
    char *end;
    unsigned long long x;

    if (!isdigit((unsigned char)v[0]))
        return -EINVAL;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0')
        return -EINVAL;
    *ret = x;
    return 0;
}

int config_split_list(const char *v, size_t max, char ***ret, size_t *ret_n)
{
    _cleanup_free_ char *copy = strdup(v);
    char **l = NULL;
    size_t n = 0;
    char *save = NULL;

    if (!copy)
        return -ENOMEM;
    for (char *w = strtok_r(copy, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save)) {
        char **nl;

        if (n >= max) {
            config_free_list(l, n);
            return -E2BIG;
        }
        nl = realloc(l, (n + 1) * sizeof *l);
        if (!nl) {
            config_free_list(l, n);
            return -ENOMEM;
        }
        l = nl;
        l[n] = strdup(w);
        if (!l[n]) {
            config_free_list(l, n);
            return -ENOMEM;
        }
        n++;
    }
    *ret = l;
    *ret_n = n;
    return 0;
}
