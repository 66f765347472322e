/* Starting again, at the daemon's start, a READY sandbox whose container was found stopped
 * (a host reboot, or `pct stop` behind the daemon's back while it was down): the container is
 * started, its IPv4 address awaited (DHCP may hand out another one), and a new address
 * checked (engine_addr_check(): it is reported from inside the container; static mode
 * allows none) and put in place of the old one in its ipfilter set, so that the firewall
 * lets its traffic through and the set holds that one address. "Found stopped" is what
 * GET .../status/current said; a start refused with "CT N already running" (it was started
 * since) counts as started: the sandbox is re-attached, never destroyed for it. The
 * reconcile then re-attaches the sandbox; when any of this fails the sandbox is destroyed as before
 * (its container cannot serve it). Loop thread only. */
#pragma once

#include <stdint.h>

#include "sandbox.h"

#define RESTART_START_TIMEOUT_MS 60000u
#define RESTART_IP_TIMEOUT_MS 30000u
#define RESTART_CALL_TIMEOUT_MS 10000u

/* error 0: running, with ip (borrowed for the call); else a negative errno and a reason. */
typedef void (*ct_restart_cb)(int error, const char *ip, const char *reason, void *userdata);

/* Starts container vmid on node and waits for its address (old_ip: the recorded one, may be
 * NULL). cb runs once, from the loop (-ECANCELED when the engine closes meanwhile).
 * Returns 0 or a negative errno (cb never runs then). */
int reconcile_restart(struct engine *e, const char *node, uint32_t vmid, const char *old_ip,
                      ct_restart_cb cb, void *userdata);
