/* A pool of worker threads for blocking SFTP work, with a fair share per uid and per
 * sandbox (libuv's own pool is left to libuv).
 *
 * Requests are queued by uid, and within a uid by group (a sandbox); idle workers take them
 * round-robin over the uids, and within a uid round-robin over its groups. A uid holds at
 * most max(1, N / (U + 1)) of the N workers, U being the number of uids with work running or
 * queued, so that a uid that arrives finds a free worker (while fewer uids than workers are
 * busy): one uid whose calls block (sandboxes whose SFTP servers stopped answering) takes
 * only its share, never the whole pool. Work already running keeps its worker: shares apply
 * when a worker picks its next request.
 * Within a uid, a group holds at most max(1, share / G) workers, G being the uid's groups
 * with work running or queued. Workers stay idle rather than exceed a share.
 *
 * Loop-thread API, except that a request's work() runs on a worker. The pool is reference
 * counted: each user takes a reference, and the threads end when the last one is dropped
 * (no request may be pending then). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#define FILEPOOL_WORKERS 16u

struct filepool;
struct filepool_req;

typedef void (*filepool_work_fn)(struct filepool_req *req);
/* On the loop thread once the request is over: status 0, or -ECANCELED when
 * filepool_cancel() took it before it started. */
typedef void (*filepool_done_fn)(struct filepool_req *req, int status);

/* Embedded in the caller's request; the fields are the pool's. */
struct filepool_req {
    struct filepool_req *next;
    struct filepool_grp *grp;
    filepool_work_fn work;
    filepool_done_fn done;
    int status;
    bool started;
};

/* A pool of n workers (0: FILEPOOL_WORKERS) on loop, with one reference. */
int filepool_new(uv_loop_t *loop, unsigned n, struct filepool **ret);
struct filepool *filepool_ref(struct filepool *p);
/* Drops a reference; the last one ends the threads and frees the pool (its handle is
 * closed on the loop). */
void filepool_unref(struct filepool *p);
/* Queues req for uid and group (any pointer naming a sandbox). -ENOMEM. */
int filepool_submit(struct filepool *p, struct filepool_req *req, uid_t uid, const void *group,
                    filepool_work_fn work, filepool_done_fn done);
/* Takes req out of the queue when it has not started (its done() then runs with
 * -ECANCELED): 0; -EBUSY when it is running or over already. */
int filepool_cancel(struct filepool *p, struct filepool_req *req);
unsigned filepool_workers(const struct filepool *p);
