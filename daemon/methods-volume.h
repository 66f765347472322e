/* The volume methods of docs/protocol.md (volume.create, volume.list, volume.delete) over
 * lib/engine/volume.h. Loop thread only. */
#pragma once

struct req;

void method_volume_create(struct req *r, void *params, void *userdata);
void method_volume_list(struct req *r, void *params, void *userdata);
void method_volume_delete(struct req *r, void *params, void *userdata);
