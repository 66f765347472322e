/* The OpenRPC document describing sandboxd's methods (proto/sandboxd.openrpc.json),
 * compiled in, compact, for rpc.discover. */
#pragma once

#include <stddef.h>

/* The document as compact JSON text, NUL-terminated; static storage. */
const char *openrpc_document(void);
/* Its length in bytes (without the NUL). */
size_t openrpc_document_len(void);
