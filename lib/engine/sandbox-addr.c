/* Static addressing ([network] mode = static): each sandbox gets an address of the
 * configured range, chosen before its intent is saved (so the registry records it ahead)
 * and written into net0 (ip=A/P,gw=G) before the container starts, so that Proxmox puts it
 * in the ipfilter set from the configuration and no DHCP lease is awaited.
 *
 * An address is in use while a sandbox of the table has it (its record included: a
 * restart re-attaches it or rolls it back through the table or the reconcile) or while a
 * container the reconcile found in the pool has it in net0 and is not yet destroyed (a
 * create interrupted by a crash, an orphan): reconcile calls engine_addr_hold() for those,
 * and a destroy releases the vmid's hold. Allocation goes round the range, so a freed
 * address is handed out again as late as possible.
 *
 * Any mode: an address Proxmox reports from inside a container (GET .../interfaces lists
 * whatever addresses exist in its network namespace, so code in a sandbox chooses it) is
 * checked by engine_addr_check() before it goes into a firewall set. */
#include "macro.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "log.h"
#include "sandbox-internal.h"

bool engine_static_addresses(const struct engine *e)
{
    return e->cfg->network.static_mode;
}

static int parse_ip(const char *s, uint32_t *ret)
{
    struct in_addr a;

    if (!s || inet_pton(AF_INET, s, &a) != 1)
        return -EINVAL;
    *ret = ntohl(a.s_addr);
    return 0;
}

/* The address of ip=A/P in a net0 property string; -ENOENT when there is none. */
static int net0_ip(const char *net0, uint32_t *ret)
{
    char buf[64];
    const char *p;
    size_t n;

    for (p = net0; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (strncmp(p, "ip=", 3) != 0)
            continue;
        n = strcspn(p + 3, "/,");
        if (n >= sizeof buf)
            return -EINVAL;
        memcpy(buf, p + 3, n);
        buf[n] = '\0';
        return parse_ip(buf, ret);
    }
    return -ENOENT;
}

void engine_addr_hold(struct engine *e, uint32_t vmid, const char *net0)
{
    const struct config_network *n = &e->cfg->network;
    struct addr_hold *h;
    uint32_t ip;

    if (!n->static_mode || net0_ip(net0, &ip) < 0 || ip < n->first || ip > n->last)
        return;
    for (size_t i = 0; i < e->n_held; i++)
        if (e->held[i].vmid == vmid) {
            e->held[i].ip = ip;
            return;
        }
    h = realloc(e->held, (e->n_held + 1) * sizeof *h);
    if (!h)
        return; /* the table's own addresses still count */
    e->held = h;
    e->held[e->n_held++] = (struct addr_hold){.vmid = vmid, .ip = ip};
}

void engine_addr_release(struct engine *e, uint32_t vmid)
{
    for (size_t i = 0; i < e->n_held; i++)
        if (e->held[i].vmid == vmid) {
            e->held[i] = e->held[--e->n_held];
            return;
        }
}

int engine_addr_allocate(struct engine *e, char **ret_ip)
{
    const struct config_network *n = &e->cfg->network;
    uint32_t size = n->last - n->first + 1, start, ip;
    _cleanup_free_ uint8_t *used = calloc((size + 7) / 8, 1);
    char buf[INET_ADDRSTRLEN];
    struct in_addr a;

    if (!used)
        return -ENOMEM;
    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (parse_ip(sb->ip, &ip) == 0 && ip >= n->first && ip <= n->last)
            used[(ip - n->first) / 8] |= (uint8_t)(1u << ((ip - n->first) % 8));
    for (size_t i = 0; i < e->n_held; i++)
        if (e->held[i].ip >= n->first && e->held[i].ip <= n->last)
            used[(e->held[i].ip - n->first) / 8] |=
                (uint8_t)(1u << ((e->held[i].ip - n->first) % 8));
    start = e->addr_next % size;
    for (uint32_t k = 0; k < size; k++) {
        uint32_t off = (start + k) % size;

        if (used[off / 8] & (1u << (off % 8)))
            continue;
        a.s_addr = htonl(n->first + off);
        if (!inet_ntop(AF_INET, &a, buf, sizeof buf))
            return -EINVAL;
        *ret_ip = strdup(buf);
        if (!*ret_ip)
            return -ENOMEM;
        e->addr_next = off + 1;
        return 0;
    }
    return -ENOSPC;
}

/* net0's properties but those starting with one of drop (NULL-terminated), each followed
 * by a comma, into a new buffer with room for `room` more bytes; *ret_len: bytes written. */
static int net0_without(const char *net0, const char *const *drop, size_t room, char **ret,
                        size_t *ret_len)
{
    size_t len = strlen(net0);
    _cleanup_free_ char *out = malloc(len + room);
    size_t o = 0;

    if (!out)
        return -ENOMEM;
    for (const char *p = net0; *p;) {
        size_t k = strcspn(p, ",");
        bool keep = k > 0;

        for (const char *const *d = drop; keep && *d; d++)
            if (strncmp(p, *d, strlen(*d)) == 0)
                keep = false;
        if (keep) {
            memcpy(out + o, p, k);
            o += k;
            out[o++] = ',';
        }
        p += k;
        if (*p == ',')
            p++;
    }
    out[o] = '\0';
    *ret_len = o;
    *ret = TAKE_PTR(out);
    return 0;
}

int net0_with_address(const char *net0, const char *ip, const struct config_network *n, char **ret)
{
    /* every property but ip/gw (and a DHCP ip6 would not be wrong, but is left as it is) */
    static const char *const drop[] = {"ip=", "gw=", NULL};
    const size_t room = 64;
    char gw[16], *out;
    size_t o;
    int r = net0_without(net0, drop, room, &out, &o);

    if (r < 0)
        return r;
    config_network_format(n->gateway, gw);
    snprintf(out + o, strlen(net0) + room - o, "ip=%s/%u,gw=%s", ip, n->prefix, gw);
    *ret = out;
    return 0;
}

int net0_with_rate(const char *net0, unsigned mbps, char **ret)
{
    static const char *const drop[] = {"rate=", NULL};
    const size_t room = 32;
    char *out;
    size_t o;
    int r = net0_without(net0, drop, room, &out, &o);

    if (r < 0)
        return r;
    if (mbps) {
        /* thousandths of MiB/s: mbps * 10^6 / 8 / 2^20 * 1000, rounded to the nearest */
        uint64_t milli = ((uint64_t)mbps * 1000000000u + 4194304u) / 8388608u;

        snprintf(out + o, strlen(net0) + room - o, "rate=%" PRIu64 ".%03" PRIu64, milli / 1000,
                 milli % 1000);
    } else if (o > 0)
        out[o - 1] = '\0'; /* the last comma */
    *ret = out;
    return 0;
}

unsigned net0_rate_mbps(const char *net0)
{
    for (const char *p = net0; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, "rate=", 5) == 0) {
            double mibs = strtod(p + 5, NULL);

            if (!(mibs > 0)) /* also NaN */
                return 0;
            if (mibs > 1e6)
                mibs = 1e6;
            return (unsigned)(mibs * 8.388608 + 0.5);
        }
    return 0;
}

/* True when ip is one of the addresses of this host's interfaces. getifaddrs() is one
 * netlink dump, answered by the kernel at once. */
static bool host_has_address(uint32_t ip)
{
    struct ifaddrs *list = NULL;
    bool found = false;

    if (getifaddrs(&list) < 0)
        return false;
    for (struct ifaddrs *i = list; i && !found; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
            found = ntohl(((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr) == ip;
    freeifaddrs(list);
    return found;
}

int engine_addr_check(struct engine *e, const struct sandbox *self, uint32_t vmid, const char *ip,
                      char *why, size_t size)
{
    const struct config_network *n = &e->cfg->network;
    uint32_t a, mask = n->prefix >= 32 ? UINT32_MAX : ~(UINT32_MAX >> n->prefix);
    const struct sandbox *going = NULL;
    char x[16], y[16];

    if (parse_ip(ip, &a) < 0) {
        snprintf(why, size, "not an IPv4 address");
        return -EPERM;
    }
    if (n->gateway && a == n->gateway) {
        snprintf(why, size, "the gateway's address");
        return -EPERM;
    }
    if (host_has_address(a)) {
        snprintf(why, size, "an address of the daemon's host");
        return -EPERM;
    }
    for (const struct sandbox *sb = e->sandboxes; sb; sb = sb->next) {
        if (sb == self || sb->state == SANDBOX_GONE || !sb->ip || strcmp(sb->ip, ip) != 0)
            continue;
        if (sb->state != SANDBOX_DESTROYING) {
            snprintf(why, size, "the address of sandbox %s", sb->id);
            return -EPERM;
        }
        going = sb; /* its container's delete may have freed the lease already */
    }
    for (size_t i = 0; i < e->n_held; i++)
        if (e->held[i].ip == a && e->held[i].vmid != vmid) {
            snprintf(why, size, "the address of container %u", e->held[i].vmid);
            return -EPERM;
        }
    if (n->first && (a < n->first || a > n->last)) {
        config_network_format(n->first, x);
        config_network_format(n->last, y);
        snprintf(why, size, "outside [network] addresses %s-%s", x, y);
        return -EPERM;
    }
    if (!n->first && n->prefix && n->gateway && (a & mask) != (n->gateway & mask)) {
        config_network_format(n->gateway & mask, x);
        snprintf(why, size, "outside the bridge network %s/%u", x, n->prefix);
        return -EPERM;
    }
    if (going) {
        snprintf(why, size, "the address of sandbox %s, being destroyed", going->id);
        return -EBUSY;
    }
    return 0;
}

void engine_addr_refused(const char *sandbox, uint32_t vmid, const char *node, const char *ip,
                         const char *why)
{
    struct audit_record rec = {.event = "sandbox.address_refused",
                               .priority = LOG_WARNING,
                               .sandbox = sandbox,
                               .vmid = vmid,
                               .node = node,
                               .caller_uid = AUDIT_NO_UID,
                               .owner_uid = AUDIT_NO_UID,
                               .reason = why};

    audit_emit(&rec,
               "container %u reports the address %s, refused (%s): it is not put in its "
               "ipfilter set",
               vmid, strna(ip), why);
}
