/* The file system methods of docs/protocol.md (file.list, file.stat, file.remove, file.mkdir,
 * file.rename) over lib/ssh/sshfile-fs.h. Their rows are in the method table
 * (methods-table.c). Loop thread only. */
#pragma once

#include <stdbool.h>

#include "sandbox.h"
#include "methods.h"

void method_file_list(struct req *r, void *params, void *userdata);
void method_file_stat(struct req *r, void *params, void *userdata);
void method_file_remove(struct req *r, void *params, void *userdata);
void method_file_mkdir(struct req *r, void *params, void *userdata);
void method_file_rename(struct req *r, void *params, void *userdata);
