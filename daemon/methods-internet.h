/* sandbox.set_internet with `wait`: after the firewall change, probe from inside the sandbox
 * (a TCP connect to [network] probe_address, over SSH) until the connect succeeds (internet
 * on) or fails (off), or the deadline passes. Loop thread only. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

struct engine;
struct req;
struct sandbox;

#define INTERNET_PROBE_INTERVAL_MS 500u /* between probes that saw the old state */
#define INTERNET_PROBE_MAX_MS 5000u     /* one probe (its connect gets 3 s) */
#define INTERNET_PROBE_CONNECT_S 3u     /* a probe's connect bound (`timeout`) */
/* Without wait_timeout_s: this many firewall cycles plus this many seconds. */
#define INTERNET_WAIT_DEFAULT_CYCLES 2u
#define INTERNET_WAIT_DEFAULT_EXTRA_S 10u

struct config;

/* True when allow (an allow-list in normal form, may be NULL) can be put in force: CIDR
 * entries only (domain names need the egress proxy); else replies invalid params naming
 * param and returns false. */
bool internet_allow_usable(struct req *r, json_object *allow, const char *param);
/* Whether [network] probe_address is reachable from a sandbox with internet (and allow). */
bool internet_probe_expected(const struct config *cfg, bool internet, json_object *allow);

/* Proxmox enforces a firewall change at its next cycle: adds effective_by (RFC 3339, now plus
 * [proxmox] firewall_period_s) to a set_internet result. */
void internet_add_effective_by(json_object *o, const struct config *cfg);
/* The wait's deadline: wait_timeout_s (> 0), else the default. */
uint64_t internet_wait_ms(const struct config *cfg, int64_t wait_timeout_s);

/* Replies to r itself: result (taken) once a probe saw the wanted state, -32006 when
 * timeout_ms passes first, -32001/-32002 when the sandbox goes away meanwhile. */
void internet_wait_start(struct engine *e, struct req *r, const struct sandbox *sb, bool want,
                         uint32_t probe_ip, unsigned probe_port, uint64_t timeout_ms,
                         json_object *result);
