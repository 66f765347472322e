/* The process.* methods of docs/protocol.md: background processes in a sandbox, over the
 * sandbox methods' engine (methods-sandbox.h). Their rows are in the method table
 * (methods-table.c). Loop thread only. */
#pragma once

#include "methods.h"

void method_process_start(struct req *r, void *params, void *userdata);
void method_process_read(struct req *r, void *params, void *userdata);
void method_process_write(struct req *r, void *params, void *userdata);
void method_process_wait(struct req *r, void *params, void *userdata);
void method_process_kill(struct req *r, void *params, void *userdata);
void method_process_list(struct req *r, void *params, void *userdata);
void method_process_resize(struct req *r, void *params, void *userdata);
