/* The size limits of sandbox.exec (EXEC_*), shared by the params validation (proto/params.c)
 * and the SSH layer (lib/ssh/sshexec.c), now live with every other limit in proto/api-limits.h. */
#pragma once

#include "api-limits.h"
