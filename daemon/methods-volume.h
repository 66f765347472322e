/* The volume methods of docs/protocol.md (volume.create, volume.list, volume.delete) over
 * lib/engine/volume.h, and sandbox.attach, sandbox.detach over lib/engine/sandbox-attach.h
 * (the owner of the sandbox or an admin only, as every sandbox method). Loop thread only. */
#pragma once

struct req;

void method_volume_create(struct req *r, void *params, void *userdata);
void method_volume_list(struct req *r, void *params, void *userdata);
void method_volume_delete(struct req *r, void *params, void *userdata);
void method_sandbox_attach(struct req *r, void *params, void *userdata);
void method_sandbox_detach(struct req *r, void *params, void *userdata);
