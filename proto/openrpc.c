/* rpc.discover's document, embedded at build time (see proto/meson.build). */
#include "openrpc.h"

#include "sandboxd-openrpc-data.h"

const char *openrpc_document(void)
{
    return openrpc_data;
}

size_t openrpc_document_len(void)
{
    return OPENRPC_DATA_LEN;
}
