/* One client connection: NDJSON framing, JSON-RPC dispatch onto the method table,
 * concurrent requests with responses matched by id, batches, the in-flight cap
 * with backpressure (reading stops, nothing is dropped), and bounded output
 * (reading stops above a high-water mark; a client that stays stuck is closed).
 * EOF from the client is a half-close (its requests are still answered) unless
 * the socket is fully closed (poll() reports POLLHUP, checked at EOF and by the
 * sweep whenever reading is stopped): then the requests are cancelled through
 * their on_disconnect callbacks.
 *
 * The state only moves forward (conn_set_state() refuses anything else), and
 * every function that can close the connection is safe to call on a closing one:
 * callers re-check the state after any such call. A closing connection stays
 * allocated until its handle's close callback. Loop thread only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "conn-out.h"
#include "frame.h"
#include "req.h"

struct conn;
struct conn_msg;
struct config;
struct method_table;
struct server;

#define CONN_READ_CHUNK (64 * 1024)
#define CONN_OUTPUT_HIGH (1024 * 1024)      /* stop reading above this much queued output */
#define CONN_OUTPUT_LOW (256 * 1024)        /* resume below this */
#define CONN_OUTPUT_HARD (64 * 1024 * 1024) /* notifications past this are refused */
/* A message whose strings hold more than this is serialised on a worker thread, so that
 * no reply holds the loop (the messages sent after it wait behind it, in order). */
#define CONN_OFFLOOP_BYTES (256 * 1024)
/* Descriptors (SCM_RIGHTS): at most REQ_FDS_MAX arrive with one request line (more is a
 * protocol error: the connection is closed), and at most this many wait for their line
 * to be dispatched (received, line not yet taken because of the in-flight cap). */
/* CONN_FDS_WAITING_MAX: proto/api-limits.h */

enum conn_state {
    CONN_OPEN,
    CONN_DRAINING, /* a final reply is queued; close once it is written */
    CONN_CLOSING,  /* uv_close() called, requests detached */
    CONN_CLOSED,   /* the handle is closed; freed right after */
};

/* Deadlines of the sweep. */
struct conn_limits {
    uint64_t idle_timeout_ms;
    uint64_t write_stall_ms;
};

/* What a connection needs from whoever owns it (the server, which keeps the list
 * of connections and the caps). The connection never edits its owner: it reports
 * through these callbacks. */
struct conn_host_ops {
    bool (*stopping)(void *owner);                /* shutdown started */
    void (*uncount)(void *owner, struct conn *c); /* leaves the caps (closing) */
    void (*closed)(void *owner, struct conn *c);  /* handle closed; freed right after */
    void (*request_done)(void *owner);            /* a request completed */
    /* The bytes c holds (partial lines, queued replies) went from old to now. */
    void (*account)(void *owner, struct conn *c, size_t old, size_t now);
    /* The uid holds more than its share of the memory budget: do not read from it. */
    bool (*over_share)(void *owner, uid_t uid);
};

struct conn_host {
    const struct conn_host_ops *ops;
    void *owner;
    uv_loop_t *loop;
    const struct config *config; /* live config */
    const struct conn_limits *limits;
    const struct admin_set *admins;
    struct ratelimit *log_rl;            /* repeated messages about a uid's connections */
    const struct method_table *methods;  /* what the lines are dispatched onto */
    const struct req_observer *observer; /* of every request; NULL: none */
    struct server *server;               /* what requests report (req_server()) */
    /* Kept by the connections themselves: */
    uint64_t next_id;        /* of the next connection, from 1 */
    unsigned state_refusals; /* transitions conn_set_state() refused */
    /* One read buffer for every connection: libuv calls alloc and read back to back on
     * the loop thread, and the bytes are copied into the frame buffer at once. */
    char read_buffer[CONN_READ_CHUNK];
    /* The json-c tokener every line is parsed with, kept between lines (rpc_parse_with()):
     * freed by conn_host_done(). */
    json_tokener *tokener;
};

/* Descriptors received with the line numbered line (counted from 0 on the connection). */
struct conn_fds {
    uint64_t line;
    struct req_fds fds;
};

struct conn {
    struct conn_host *host;
    uv_pipe_t pipe; /* writes; reads go through rpoll (recvmsg, for the descriptors) */
    uv_poll_t rpoll;
    int rfd;          /* a duplicate of the socket polled for reading; -1 before setup */
    unsigned handles; /* handles not yet closed, and a serialisation running (freed when 0) */
    enum conn_state state;
    uint64_t id;
    bool counted; /* holds a place in the caps (set by the owner) */
    bool reading;
    bool eof;
    bool in_process;

    struct frame_buf in;
    uint64_t lines_in;    /* '\n' received so far */
    uint64_t lines_out;   /* lines taken out of the frame buffer */
    struct conn_fds *fdq; /* descriptors waiting for their line, in line order */
    unsigned n_fdq, fdq_fds;
    struct out_queue out; /* lines not yet handed to the kernel/libuv */
    size_t out_queued;    /* bytes of the uv_write in flight (at most one: n_writes) */
    size_t out_held;      /* memory its lines hold (their objects) */
    /* Messages behind one being serialised off the loop, in send order; the first is the
     * one on the worker thread when sendq_busy. Counted as output (their size hints). */
    struct conn_msg *sendq, *sendq_tail;
    size_t sendq_bytes;
    bool sendq_busy;
    unsigned n_writes;

    /* the requests in flight (port.list) and the peer's credentials (port.uid, .gid, .pid) */
    struct req_port port;

    uint64_t last_activity; /* uv_now of the last read or completion */
    uint64_t write_since;   /* uv_now of the last write progress while writes are queued */
    bool out_paused;        /* queued output went over high water; reading resumes below low */
    size_t held;            /* bytes last reported through ops->account() */
    uint64_t drain_pass;    /* counts on_drain passes (each fires only callbacks armed before) */

    struct conn *prev, *next; /* the owner's list; only the owner touches them */
};

/* Accepts a pending connection from the listener. Returns 0 or a negative errno. */
int conn_accept(struct conn_host *h, uv_stream_t *listener, struct conn **ret);
/* Wraps an already connected stream Unix socket (taken over, closed on failure).
 * Returns 0 or a negative errno. */
int conn_adopt(struct conn_host *h, int fd, struct conn **ret);
/* Sends one error line with id null, then closes (nothing more is read). */
void conn_fail(struct conn *c, int code, const char *reason);
void conn_close(struct conn *c);
/* Starts reading from an accepted connection that holds its place in the caps. */
void conn_start(struct conn *c);
/* Checks idle and write-stall deadlines; called by the owner's sweep timer. */
void conn_sweep(struct conn *c, uint64_t now);
/* At shutdown: close when idle. */
void conn_shutdown(struct conn *c);
/* Frees what the connections of h kept between lines (once none is left). */
void conn_host_done(struct conn_host *h);
/* Shutdown deadline: detach every request and close. */
void conn_abort(struct conn *c);
size_t conn_output_bytes(const struct conn *c);
/* Bytes the connection holds in memory: its input buffer (a partial line included) and
 * its replies not yet written (their text, and the objects kept alive for it). */
size_t conn_held_bytes(const struct conn *c);
/* Requests in flight. */
unsigned conn_inflight(const struct conn *c);
/* The one setter of c->state. Only a later state is accepted; anything else is
 * logged at error level, counted, and refused with -EINVAL (the state is kept). */
int conn_set_state(struct conn *c, enum conn_state state);
/* How many transitions conn_set_state() refused on h's connections. */
unsigned conn_state_refusals(const struct conn_host *h);
