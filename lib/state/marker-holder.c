/* The volume holder's line of a container's description. See marker.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "marker.h"

#define HOLDER_VERSION "v1"
#define CHECK_LEN 8

int marker_holder_format(const char *instance, char *buf, size_t n)
{
    char body[MARKER_HOLDER_LINE_MAX], hex[SHA256_HEX_SIZE];
    int k;

    if (!instance || !id_is_valid(instance) || !buf)
        return -EINVAL;
    k = snprintf(body, sizeof body, MARKER_HOLDER_PREFIX HOLDER_VERSION " instance=%s", instance);
    if (k < 0 || (size_t)k >= sizeof body)
        return -EINVAL;
    k = sha256_hex(body, strlen(body), hex);
    if (k < 0)
        return k;
    k = snprintf(buf, n, "%s check=%.*s", body, CHECK_LEN, hex);
    return k < 0 ? -EINVAL : (size_t)k >= n ? -ENOBUFS : 0;
}

/* Whether [p, p + n) is line once trimmed (marker_line_trim()) with each run of ' ', '\t' or
 * '+' read as one space. */
static bool line_is(const char *p, size_t n, const char *line)
{
    size_t tn;
    const char *e;

    p = marker_line_trim(p, n, &tn);
    e = p + tn;
    while (p < e && *line) {
        if (*p == ' ' || *p == '\t' || *p == '+') {
            if (*line != ' ')
                return false;
            while (p < e && (*p == ' ' || *p == '\t' || *p == '+'))
                p++;
        } else if (*p != *line)
            return false;
        else
            p++;
        line++;
    }
    return p == e && !*line;
}

bool marker_holder_is(const char *description, const char *instance)
{
    char line[MARKER_HOLDER_LINE_MAX];
    const char *p = description;

    if (!p || marker_holder_format(instance, line, sizeof line) < 0 || strlen(p) > MARKER_INPUT_MAX)
        return false;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);

        if (line_is(p, n, line))
            return true;
        p += n + (nl ? 1 : 0);
    }
    return false;
}
