/* [network] values. See config-network.h. */
#include "config-network.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

int config_network_mode(const char *v, bool *ret_static)
{
    if (strcmp(v, "static") == 0)
        *ret_static = true;
    else if (strcmp(v, "dhcp") == 0)
        *ret_static = false;
    else
        return -EINVAL;
    return 0;
}

int config_network_ipv4(const char *v, uint32_t *ret)
{
    uint32_t ip = 0;
    const char *p = v;

    for (int i = 0; i < 4; i++) {
        unsigned part = 0;
        int digits = 0;

        while (*p >= '0' && *p <= '9') {
            if (digits > 0 && part == 0)
                return -EINVAL; /* a leading zero */
            part = part * 10 + (unsigned)(*p - '0');
            if (++digits > 3 || part > 255)
                return -EINVAL;
            p++;
        }
        if (digits == 0)
            return -EINVAL;
        ip = (ip << 8) | part;
        if (i < 3 && *p++ != '.')
            return -EINVAL;
    }
    if (*p)
        return -EINVAL;
    *ret = ip;
    return 0;
}

int config_network_range(const char *v, uint32_t *ret_first, uint32_t *ret_last)
{
    _cleanup_free_ char *copy = strdup(v);
    uint32_t a, b;
    char *dash;

    if (!copy)
        return -ENOMEM;
    dash = strchr(copy, '-');
    if (!dash)
        return -EINVAL;
    *dash = '\0';
    if (config_network_ipv4(copy, &a) < 0 || config_network_ipv4(dash + 1, &b) < 0 || a > b ||
        (uint64_t)b - a + 1 > CONFIG_NETWORK_RANGE_MAX)
        return -EINVAL;
    *ret_first = a;
    *ret_last = b;
    return 0;
}

int config_network_hostport(const char *v, uint32_t *ret_ip, unsigned *ret_port)
{
    _cleanup_free_ char *copy = strdup(v);
    char *colon, *end;
    unsigned long port;
    uint32_t ip;

    if (!copy)
        return -ENOMEM;
    colon = strrchr(copy, ':');
    if (!colon)
        return -EINVAL;
    *colon = '\0';
    if (config_network_ipv4(copy, &ip) < 0 || colon[1] < '1' || colon[1] > '9')
        return -EINVAL;
    port = strtoul(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
        return -EINVAL;
    *ret_ip = ip;
    *ret_port = (unsigned)port;
    return 0;
}

int config_network_dns(const char *v, char **ret)
{
    _cleanup_free_ char *copy = strdup(v), *out = NULL;
    size_t n = 0, len = 0;
    char *save = NULL;

    if (!copy)
        return -ENOMEM;
    out = malloc(strlen(v) + 1);
    if (!out)
        return -ENOMEM;
    for (char *w = strtok_r(copy, ", ", &save); w; w = strtok_r(NULL, ", ", &save)) {
        uint32_t ip;

        if (config_network_ipv4(w, &ip) < 0 || ++n > CONFIG_NETWORK_DNS_MAX)
            return -EINVAL;
        len += (size_t)sprintf(out + len, "%s%s", len ? " " : "", w);
    }
    if (n == 0)
        return -EINVAL;
    *ret = TAKE_PTR(out);
    return 0;
}

void config_network_format(uint32_t ip, char buf[16])
{
    snprintf(buf, 16, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

char *config_network_check(const struct config_network *n)
{
    uint32_t mask;
    char *err = NULL;

    if (!n->static_mode)
        return NULL;
    if (!n->first || !n->prefix || !n->gateway) {
        if (asprintf(&err, "[network] mode = static needs addresses, prefix and gateway") < 0)
            err = NULL;
        return err;
    }
    mask = n->prefix == 32 ? UINT32_MAX : ~(UINT32_MAX >> n->prefix);
    if ((n->first & mask) != (n->gateway & mask) || (n->last & mask) != (n->gateway & mask)) {
        if (asprintf(&err, "[network] addresses and gateway are not in one /%u network",
                     n->prefix) < 0)
            err = NULL;
    } else if (n->gateway >= n->first && n->gateway <= n->last) {
        if (asprintf(&err, "[network] gateway lies inside addresses") < 0)
            err = NULL;
    }
    return err;
}
