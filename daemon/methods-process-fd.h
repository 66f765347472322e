/* process.start with descriptors (stdin_fd, stdout_fd, stderr_fd; docs/protocol.md): once the
 * process runs, a pump moves the client's stdin descriptor into the process's stdin (closing
 * it at the end of the input) and the process's output, followed by offset from 0 as it is
 * written to the container's files, into the stdout/stderr descriptors until the process has
 * exited and all of it was copied; then the descriptors are closed.
 *
 * Each pump is one exec channel (lib/ssh/process.h's attach script) on an SSH session of its own
 * (not the sandbox's shared file session), run as a descriptor stream of lib/ssh/sshfile.h on a pool
 * thread, in one of the transfer slots of methods-transfer.h for its whole length. A quiet
 * process is no stall; a descriptor that takes no byte for [ssh] file_timeout_ms ends its pump
 * (the output stays readable by offset). A pump ends with the process, when its sandbox goes
 * away, or when the daemon stops (a restart does not re-attach: the process keeps running).
 * Loop thread only. */
#pragma once

#include <stdint.h>

#include "params-process.h"
#include "req.h"

struct process_pump;

/* Before the launch: takes the descriptors (-32602 for a missing index or the wrong
 * direction) and a transfer slot (-32007). NULL when p names no descriptor, or with r
 * answered when something was refused (what was taken is closed). */
struct process_pump *process_pump_prepare(struct req *r, const struct params_process_start *p);
/* The process was launched: starts the pump (takes pm). A pump that cannot start is logged
 * and its descriptors are closed (the client sees EOF). */
void process_pump_start(struct process_pump *pm, const char *process, uint64_t output_max);
/* The launch failed: closes the descriptors, gives the slot back (takes pm; NULL is fine). */
void process_pump_abort(struct process_pump *pm);
/* The method table is registered (pumps may start) / the daemon stops: ends every pump, and
 * no new one starts. */
void process_pumps_init(void);
void process_pumps_stop(void);
