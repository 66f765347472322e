/* The [network] section of sandboxd.conf(5): how sandboxes get their address (DHCP on the
 * bridge, or static addresses the daemon hands out from a range) and the address
 * sandbox.set_internet and the create's isolation check probe. Values parsed by config.c's key
 * table through the functions here; config_network_validate() checks the keys together. Pure
 * parsing. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define CONFIG_NETWORK_RANGE_MAX 65536u     /* addresses in [network] addresses */
#define CONFIG_NETWORK_DNS_MAX 3            /* nameservers (as resolv.conf) */
#define CONFIG_DEFAULT_FIREWALL_PERIOD_S 10 /* pve-firewall's cycle */

struct config_network {
    bool static_mode;     /* mode = static (default: dhcp) */
    uint32_t first, last; /* addresses = FIRST-LAST (host byte order); 0: unset */
    unsigned prefix;      /* 1..32; 0: unset */
    uint32_t gateway;     /* 0: unset */
    char *dns;            /* space-separated IPv4 nameservers for Proxmox, NULL: none */
    uint32_t probe_ip;    /* probe_address = IP:PORT; 0: unset */
    unsigned probe_port;
    uint32_t lan_probe_ip; /* lan_probe_address = IP:PORT (not let through with internet on) */
    unsigned lan_probe_port;
};

/* "static" | "dhcp" into *ret_static. -EINVAL otherwise. */
int config_network_mode(const char *v, bool *ret_static);
/* One dotted-quad IPv4 address (no leading zeros) into *ret (host order). -EINVAL. */
int config_network_ipv4(const char *v, uint32_t *ret);
/* "A-B" with A <= B, at most CONFIG_NETWORK_RANGE_MAX addresses. -EINVAL. */
int config_network_range(const char *v, uint32_t *ret_first, uint32_t *ret_last);
/* "IP:PORT" with PORT 1..65535. -EINVAL. */
int config_network_hostport(const char *v, uint32_t *ret_ip, unsigned *ret_port);
/* 1..CONFIG_NETWORK_DNS_MAX addresses separated by commas or spaces, normalised to one
 * space-separated string (malloc'ed). -EINVAL, -ENOMEM. */
int config_network_dns(const char *v, char **ret);
/* Static mode needs addresses, prefix and gateway, with the range and the gateway in one
 * prefix and the gateway outside the range. Returns NULL or a malloc'ed message (without
 * the file name). */
char *config_network_check(const struct config_network *n);
/* a.b.c.d of a host-order address into buf (16 bytes). */
void config_network_format(uint32_t ip, char buf[16]);
