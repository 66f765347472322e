/* Egress allow-lists: the entries of `internet: {"allow": [...]}`, parsed, checked,
 * normalised and matched. Pure: no loop, no sockets; only egress_allow_normal() and
 * egress_internet_param() allocate (their results).
 *
 * An entry is one of
 *   - an IPv4 address or CIDR, optionally with one port: "203.0.113.7", "203.0.113.0/24",
 *     "203.0.113.0/24:443". Host bits are masked ("10.0.0.9/8" is kept as "10.0.0.0/8");
 *     a /0 is refused (that is `internet: true` without its port limits, not a list).
 *   - a domain name, "pypi.org", or a wildcard "*.github.com", which allows the names under
 *     github.com ("api.github.com", "a.b.github.com") but not github.com itself. Names are
 *     kept in lower case without a final dot; they take no port (the egress proxy serves
 *     HTTP and HTTPS) and must not look like an address (a numeric last label).
 * A list holds at most EGRESS_ALLOW_MAX entries and no entry twice (after normalisation). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api-limits.h"
#include "params.h"

/* EGRESS_ALLOW_MAX (entries in one list) and EGRESS_ENTRY_MAX (bytes of one entry as
 * given): api-limits.h. */
/* Bytes of a name without "*." (RFC 1035: 253 as text, labels of 1 to 63). */
#define EGRESS_NAME_MAX 253

enum egress_kind {
    EGRESS_CIDR = 1,
    EGRESS_NAME,
};

struct egress_entry {
    enum egress_kind kind;
    uint32_t addr;                  /* EGRESS_CIDR: the network address, host byte order */
    uint8_t prefix;                 /* EGRESS_CIDR: 1..32 */
    uint16_t port;                  /* EGRESS_CIDR: 0 for every port */
    bool wildcard;                  /* EGRESS_NAME: "*.name", the names under name */
    char name[EGRESS_NAME_MAX + 1]; /* EGRESS_NAME: lower case, without "*." and final dot */
};

struct egress_allow {
    size_t n;
    struct egress_entry e[EGRESS_ALLOW_MAX];
};

/* Parses one entry of len bytes (no NUL needed). 0, or -EINVAL with *ret_reason (static
 * text) set; *ret is written only on success. */
int egress_entry_parse(const char *s, size_t len, struct egress_entry *ret,
                       const char **ret_reason);

/* The entry in its normal form ("10.0.0.0/8:443", "10.0.0.7", "*.github.com"); at most
 * EGRESS_ENTRY_MAX bytes and a NUL. The length, or -ENOBUFS when size is too small. */
int egress_entry_format(const struct egress_entry *e, char *buf, size_t size);

/* Parses a JSON array of entry strings into *ret. On a refusal -EINVAL with err naming
 * param (e.g. "internet.allow") and the offending entry's index; *ret is then undefined. */
int egress_allow_parse(json_object *arr, const char *param, struct egress_allow *ret,
                       struct params_error *err);

/* True when the list allows a connection to addr (host byte order) on port. */
bool egress_allows_addr(const struct egress_allow *a, uint32_t addr, uint16_t port);

/* True when the list allows the host name (case-insensitive, one final dot ignored); an
 * empty name, one over EGRESS_NAME_MAX or an address is never allowed by name. */
bool egress_allows_name(const struct egress_allow *a, const char *host, size_t len);

/* False when a CIDR entry overlaps an address range that is not the public internet
 * (private, shared, loopback, link-local, benchmarking, multicast, reserved: the nomatch
 * ranges of docs/sandbox-setup.md's sandbox-public); true for the others and for names. */
bool egress_entry_public(const struct egress_entry *e);

/* True when the list has at least one name entry (the sandbox then needs the proxy). */
bool egress_has_names(const struct egress_allow *a);

/* The JSON array of entries arr in their normal form, into *ret (owned): at least one entry,
 * else as egress_allow_parse(). -ENOMEM, or -EINVAL with err naming param. */
int egress_allow_normal(json_object *arr, const char *param, json_object **ret,
                        struct params_error *err);

/* The "internet" member of params: absent or null leaves *ret_on and *ret_allow; a boolean
 * sets *ret_on; {"allow": [...]} sets *ret_on true and *ret_allow (egress_allow_normal(),
 * owned). Anything else: -EINVAL naming "internet" (or "internet.allow"). */
int egress_internet_param(json_object *params, bool *ret_on, json_object **ret_allow,
                          struct params_error *err);
