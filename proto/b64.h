/* Base64 (RFC 4648, standard alphabet, padded) and UTF-8 checks for the
 * `name` / `name_b64` spellings of binary data (docs/protocol.md, "Binary data"). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest input b64_encode() takes (and so the largest decoded output): the
 * libcrypto block functions count in int. */
#define B64_MAX_DECODED ((size_t)1024 * 1024 * 1024)

/* Encodes n bytes. *ret is NUL-terminated, *ret_len its length (may be NULL).
 * Returns 0, -ENOMEM, or -E2BIG when n > B64_MAX_DECODED. */
int b64_encode(const void *p, size_t n, char **ret, size_t *ret_len);

/* Strict decoding: length a multiple of 4, only the standard alphabet, '='
 * only as one or two final padding characters, unused bits zero, no
 * whitespace. *ret is NUL-terminated (not counted in *ret_len).
 * Returns 0, -EINVAL on bad input, -ENOMEM. */
int b64_decode(const char *s, size_t n, uint8_t **ret, size_t *ret_len);

/* Exact size b64_decode() would produce for valid input of n chars. */
size_t b64_decoded_size(const char *s, size_t n);

/* True when p[0..n) is well-formed UTF-8 (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF). NUL bytes are valid UTF-8. */
bool utf8_valid(const void *p, size_t n);

/* Adds n bytes to object o as `name` (at most 120 characters; a string, when the bytes are valid
 * UTF-8) or as `name_b64` (base64) otherwise. Returns 0, -ENOMEM, or -E2BIG when n >
 * B64_MAX_DECODED. A long string that needs no escape is serialised as it is (the bytes
 * json-c writes, without its escaping loop). */
int b64_object_add_data(json_object *o, const char *name, const void *p, size_t n);
/* True when o is such a string (written as it is by rpc_text_new() too). */
bool b64_is_plain(json_object *o);
