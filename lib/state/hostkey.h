/* Per-sandbox SSH host keys: the script that regenerates a container's host key over an
 * authenticated channel, the parsing of its output, and the conversions of a pin between the
 * OpenSSH fingerprint ("SHA256:<base64>", what sshs.h pins) and the hex form the ownership
 * marker carries (marker.h allows no upper case, '+' or '/').
 *
 * Every clone of the template starts with the template's host key, so root in one sandbox
 * holds the private key all the others present. Before a sandbox is READY the create runs
 * HOSTKEY_REKEY_SCRIPT over the session authenticated with the template's pinned key: it
 * generates a new ed25519 host key inside the container, removes every other host key (the
 * template's included), prints the new public key and makes sshd reload, so that later
 * connections present only the new key. The daemon pins that key (registry record and
 * marker) and from then on accepts nothing else for this sandbox. Pure code apart from
 * libssh's key parsing: no loop, no I/O. */
#pragma once

#include <stddef.h>

#include "util.h"

/* "SHA256:" + 43 base64 characters + NUL, rounded up. */
#define HOSTKEY_PIN_MAX 64
/* Longest output of the rekey script looked at (a public key line is ~100 bytes). */
#define HOSTKEY_OUTPUT_MAX 4096

/* Run by /bin/sh as root in the container's own PID namespace (it signals sshd). Works with
 * OpenSSH's ssh-keygen and either a pid file (/run/sshd.pid) or systemd (ssh or sshd unit).
 * Exit 0 and the new public key line on stdout, or non-zero. */
extern const char HOSTKEY_REKEY_SCRIPT[];

/* The pin of the ed25519 public key line in out[0..n) ("ssh-ed25519 <base64> [comment]"),
 * into ret. -EBADMSG when there is no such line or the key does not parse. */
int hostkey_pin_from_output(const char *out, size_t n, char ret[HOSTKEY_PIN_MAX]);

/* "SHA256:<base64>" <-> 64 lower-case hex digits of the same 32 bytes. -EINVAL on bad input. */
int hostkey_pin_to_hex(const char *pin, char ret[SHA256_HEX_SIZE]);
int hostkey_hex_to_pin(const char *hex, char ret[HOSTKEY_PIN_MAX]);
/* True for one well-formed "SHA256:<base64>" pin. */
bool hostkey_pin_is_valid(const char *pin);
