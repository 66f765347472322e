/* The server name (SNI, RFC 6066) of a TLS ClientHello: what the egress proxy checks after a
 * CONNECT, before it relays a byte to the server. Pure and bounded: it reads only the first
 * TLS record of what the client sent, which must hold the whole ClientHello (it does for
 * every common client: a ClientHello with post-quantum key shares is under 2 KiB, a record
 * holds 16 KiB). A ClientHello spread over several records, a duplicate extension and any
 * length that does not add up are refused, so that no server can read a name other than
 * the one checked. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Bytes the first record can take: its 5-byte header and at most 2^14 bytes. More is never
 * needed to decide. */
#define EGRESS_HELLO_MAX (5 + 16384)

/* Looks for the host name in the ClientHello at buf (len bytes so far). Returns
 *   the name's length (> 0), written to ret_name with a NUL (size > 253 is always enough);
 *   -EAGAIN: the record is not complete yet (read more, up to EGRESS_HELLO_MAX);
 *   -ENOENT: a well-formed ClientHello without a host name;
 *   -EINVAL: not a TLS handshake record holding one whole, well-formed ClientHello, or a
 *            name that is empty, longer than 253 bytes or holds a NUL;
 *   -ENOBUFS: size too small for the name.
 * Nothing is written to ret_name unless the result is > 0. */
int egress_sni_parse(const uint8_t *buf, size_t len, char *ret_name, size_t size);
