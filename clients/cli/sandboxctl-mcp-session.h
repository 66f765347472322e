/* The session of `sandboxctl mcp` as its parts share it: the calls in flight to the
 * daemon (sandboxctl-mcp.c) and the exec driver that runs a command as a background
 * process and waits for it within a budget (sandboxctl-mcp-run.c). */
#pragma once

#include <json-c/json.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "sandboxctl-mcp.h"
#include "frame.h"

struct rpc_batch;
struct sandboxd_client;
struct mcp_run;

enum pending_kind {
    PENDING_TOOL,     /* a tools/call */
    PENDING_DISCOVER, /* rpc.discover */
    PENDING_DESTROY,  /* --destroy-on-exit */
};

struct pending {
    struct pending *next;
    struct mcp *m;
    enum pending_kind kind;
    const struct mcp_tool *tool;
    json_object *mcp_id; /* the host's request id */
    json_object *args;   /* the tool's arguments */
    json_object *params; /* the daemon params sent */
    struct rpc_batch *batch;
    bool cancelled;              /* notifications/cancelled: no reply */
    struct mcp_output out;       /* TOOL_CAPTURES: the output so far */
    int64_t daemon_id;           /* the daemon request's id (exec.output names it) */
    json_object *progress_token; /* the host's _meta.progressToken, or NULL */
    uint64_t progress_ms;        /* when the last notifications/progress went out */
    struct mcp_run *run;         /* exec as a background process (sandboxctl-mcp-run.c) */
    uint64_t wake_ms;            /* in mcp.sleeping: when its run goes on (monotonic) */
};

struct mcp {
    struct mcp_cfg cfg;
    const char *version; /* negotiated protocol revision */
    bool initialized;    /* notifications/initialized arrived */
    json_object *doc;    /* OpenRPC document the tools come from */
    bool doc_live;       /* doc came from the daemon */
    char *tool_names;
    struct frame_buf in; /* standard input, in resync mode: an overlong message is skipped */
    char *chunk;         /* MCP_READ_CHUNK bytes for read(2) */
    bool reading;        /* standard input is open and wanted */
    bool stdout_broken;
    struct sandboxd_client *client; /* the daemon connection (clients/c) */
    struct pending *pending;        /* its calls in flight */
    struct pending *sleeping;       /* runs waiting for a long-poll slot (sandboxctl-mcp-run.c) */
    char **created;                 /* sandboxes this session created and did not destroy */
    size_t n_created;
    bool destroy_failed;
    sigset_t waitmask; /* the signal mask while waiting in ppoll */
};

/* What the exec driver asks of the session (sandboxctl-mcp.c). */
struct mcp_run_io {
    /* Sends a daemon request for p (params taken over); p completes in the connection's
     * callback unless this fails (then p is not linked). Returns 0 or a negative errno. */
    int (*send)(struct mcp *m, const char *method, json_object *params, struct pending *p);
    /* Answers p's tools/call: the tool result for a daemon result, or its error. */
    void (*done)(struct mcp *m, struct pending *p, json_object *result, json_object *err);
    /* Answers p's tools/call with the text for a lost connection (sent: after the
     * request went out whole). */
    void (*fail)(struct mcp *m, struct pending *p, bool sent, const char *why);
    /* Answers p's tools/call with a CallToolResult (taken over; NULL: out of memory). */
    void (*reply)(struct mcp *m, struct pending *p, json_object *call_result);
    /* Opens the daemon connection when it is closed: 0 or a negative errno. */
    int (*connect)(struct mcp *m);
    /* Frees p, answered or not. */
    void (*free)(struct mcp *m, struct pending *p);
    /* notifications/progress for p, when its host gave a token (at most once a second). */
    void (*progress)(struct mcp *m, struct pending *p);
};

/* The exec driver (sandboxctl-mcp-run.c). mcp_run_new() decides whether p (an exec whose
 * params are ready) runs as a background process, and then returns its state with its
 * first request in *ret_method and *ret_params; NULL: sandbox.exec takes the call. */
struct mcp_run *mcp_run_new(const struct mcp_run_io *io, json_object *doc,
                            const struct mcp_cfg *cfg, json_object *args, json_object *params,
                            const char **ret_method, json_object **ret_params);
void mcp_run_free(struct mcp_run *run);
/* The next step of p->run after a daemon reply (result or err). Returns 1 when another
 * request went out for p, 0 when p is answered and done. */
int mcp_run_step(struct mcp *m, struct pending *p, json_object *result, json_object *err);
/* The process a run started, or NULL. */
const char *mcp_run_process(const struct mcp_run *run);
/* Milliseconds until the first sleeping run goes on, or -1 when none sleeps. */
int mcp_run_next_wake(struct mcp *m);
/* Sends the next request of each sleeping run whose time came. */
void mcp_run_wake_due(struct mcp *m);
/* Frees the sleeping runs, unanswered (the session ends). */
void mcp_run_drop_sleeping(struct mcp *m);
