/* The preview URL methods of docs/protocol.md (sandbox.preview, sandbox.previews,
 * sandbox.unpreview), over the sandbox methods' engine (lib/engine/sandbox-preview.h).
 * Their rows are in the method table (methods-table.c). Loop thread only. */
#pragma once

#include "methods.h"

void method_sandbox_preview(struct req *r, void *params, void *userdata);
void method_sandbox_previews(struct req *r, void *params, void *userdata);
void method_sandbox_unpreview(struct req *r, void *params, void *userdata);
