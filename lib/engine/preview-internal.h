/* Between the previews (sandbox-preview.c) and their HTTP listener (preview-listen.c),
 * which calls the former, never the other way round. Loop thread only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox-internal.h"

struct sandbox_preview;

/* The open preview a connection to sandbox_id:port with token may use, or NULL (no such
 * preview, a token that does not verify, or expired). */
struct sandbox_preview *preview_find(struct engine *e, const char *sandbox_id, unsigned port,
                                     const char *token);
/* Seconds left of p (at least 1). */
uint64_t preview_remaining_s(const struct sandbox_preview *p);
/* Relays the connected socket fd (TCP when tcp, else a Unix stream socket), whose first
 * head_len bytes were read already, to p's port: 0, -EBUSY past [preview] max_connections,
 * another negative errno. fd is taken in every case. */
int preview_relay(struct sandbox_preview *p, int fd, bool tcp, const char *head, size_t head_len);
/* Loads [preview] secret_file (or <state_dir>/preview.key), making it when missing. */
int preview_key_load(struct engine *e, char **ret_error);
