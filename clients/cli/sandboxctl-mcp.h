/* sandboxctl mcp: a Model Context Protocol server on standard input and output
 * (one JSON-RPC 2.0 message per line) that turns MCP tool calls into sandboxd
 * methods (sandboxctl(1), docs/clients-mcp.md). sandboxctl-mcp.c runs the
 * session (framing, the daemon connection, lifecycle); sandboxctl-mcp-tools.c
 * knows the tools: which are offered, their schemas (taken from the daemon's
 * OpenRPC document), the daemon params they send and how results read. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The newest protocol revision served (all of them: sandboxctl-mcp.c). */
#define MCP_PROTOCOL_LATEST "2025-06-18"
/* First revisions with tool annotations / with structured tool results. */
#define MCP_PROTOCOL_ANNOTATIONS "2025-03-26"
#define MCP_PROTOCOL_STRUCTURED "2025-06-18"

enum {
    TOOL_TAKES_ID = 1 << 0,   /* acts on one sandbox: `id`, or the pinned one */
    TOOL_UNPINNED = 1 << 1,   /* offered only without --sandbox */
    TOOL_IF_OFFERED = 1 << 2, /* offered only when rpc.discover lists its method */
    TOOL_READ_ONLY = 1 << 3,  /* annotations (hints for the host) */
    TOOL_DESTRUCTIVE = 1 << 4,
    TOOL_IDEMPOTENT = 1 << 5,
    TOOL_OPEN_WORLD = 1 << 6,
    TOOL_CREATES = 1 << 7,  /* its result is a new sandbox (--destroy-on-exit) */
    TOOL_CAPTURES = 1 << 8, /* its output streams in and is cut to a budget (mcp_output) */
    TOOL_DURABLE = 1 << 9,  /* in the `durable` set, not the default `core` one (--tools) */
};

/* The tool sets of --tools. */
enum {
    MCP_SET_CORE = 1 << 0,
    MCP_SET_DURABLE = 1 << 1,
};

/* The text budget of a command's output for the model: default, and the largest
 * accepted (--max-output, the `max_output` argument). */
#define MCP_OUTPUT_DEFAULT (16 * 1024)
#define MCP_OUTPUT_MAX (1024 * 1024)
/* The daemon's max_output_bytes for a streamed exec when its document gives no
 * maximum: how much of a stream reaches the budget's head and tail. */
#define MCP_STREAMED_DEFAULT (16 * 1024 * 1024)
/* Seconds an exec waits for its command before returning with it still running as a
 * background process: default, and the largest accepted (--exec-budget, the
 * `background_after_s` argument). */
#define MCP_EXEC_BUDGET_DEFAULT 30
#define MCP_EXEC_BUDGET_MAX 600

struct mcp_tool {
    const char *name;
    const char *method; /* the sandboxd method it calls */
    const char *title;
    const char *description;
    unsigned flags;
    const char *hidden; /* method params not offered, each followed by a space */
    /* Writes the text rendering of a successful result to f. */
    void (*render)(FILE *f, json_object *result, json_object *args);
};

struct mcp_cfg {
    const char *socket;
    const char *pinned;    /* --sandbox: the tools act on this sandbox only */
    int64_t default_ttl_s; /* --default-ttl; 0: the daemon's default */
    bool destroy_on_exit;
    int64_t max_output;    /* --max-output: bytes of output text per call */
    int64_t exec_budget_s; /* --exec-budget: seconds before an exec goes on in the background */
    unsigned sets;         /* --tools: MCP_SET_* offered */
};

/* One stream of a TOOL_CAPTURES call as it arrives (exec.output notifications):
 * its first `cap` bytes and a ring of its last `cap` bytes. */
struct mcp_stream {
    char *head;
    char *ring;
    size_t cap;
    int64_t total; /* bytes received */
};

/* The output of a TOOL_CAPTURES call (stream: true) and its text budget. */
struct mcp_output {
    struct mcp_stream streams[2]; /* stdout, stderr */
    int64_t budget;
};

/* `sandboxctl mcp [OPTIONS]`: argv[0] is "mcp"; socket is the default socket.
 * Returns the exit status. */
int mcp_main(const char *socket, int argc, char **argv);

/* The tool called `name`, when doc (an OpenRPC document) and cfg offer it. */
const struct mcp_tool *mcp_tool_find(json_object *doc, const struct mcp_cfg *cfg, const char *name);
/* The tools/list result {"tools": [...]} for protocol revision `version`. */
json_object *mcp_tools_list(json_object *doc, const struct mcp_cfg *cfg, const char *version);
/* The names of the offered tools, space-separated (to notice a change). */
char *mcp_tools_names(json_object *doc, const struct mcp_cfg *cfg);

/* Builds the daemon params for a call of t with `args` (borrowed). On a problem
 * the model can fix, returns -EINVAL with *ret_problem set (the text of an
 * isError result, caller frees). */
int mcp_tool_params(const struct mcp_tool *t, json_object *doc, const struct mcp_cfg *cfg,
                    json_object *args, json_object **ret_params, char **ret_problem);
/* The CallToolResult for a successful daemon result (borrowed); out is the
 * captured output of a TOOL_CAPTURES tool, else NULL. */
json_object *mcp_tool_result(const struct mcp_tool *t, json_object *result, json_object *args,
                             const struct mcp_output *out, const char *version);
/* The budget of a TOOL_CAPTURES call: its `max_output` argument, else cfg's. */
int64_t mcp_output_budget(json_object *args, const struct mcp_cfg *cfg);
/* Makes out ready to collect budget bytes of text per stream. Returns 0 or -ENOMEM. */
int mcp_output_init(struct mcp_output *out, int64_t budget);
void mcp_output_done(struct mcp_output *out);
/* Adds the params of an exec.output notification (borrowed) to out. */
void mcp_output_add(struct mcp_output *out, json_object *params);
/* Adds n bytes of stream i (0 stdout, 1 stderr) to out. */
void mcp_output_add_bytes(struct mcp_output *out, unsigned i, const char *data, size_t n);
/* Counts n bytes of stream i that were not read (out keeps its head and the bytes
 * added after them). */
void mcp_output_skip(struct mcp_output *out, unsigned i, int64_t n);
/* Writes the output to f within its budget: a stream that fits as it is, a longer
 * one as its head and tail around a line saying what was cut and how to get it. */
void mcp_output_render_all(FILE *f, const struct mcp_output *out);
/* The schema of method's param `name` in doc (borrowed), or NULL. */
json_object *mcp_doc_param_schema(json_object *doc, const char *method, const char *name);
bool mcp_doc_has_method(json_object *doc, const char *method);
/* The CallToolResult (isError) for a daemon error object (borrowed). */
json_object *mcp_tool_error(const struct mcp_tool *t, json_object *error, json_object *args,
                            const struct mcp_cfg *cfg);
/* The CallToolResult (isError) with text. */
json_object *mcp_tool_error_text(const char *text);

/* The description of t's parameter `name` for a model, or NULL (sandboxctl-mcp-schema.c). */
const char *mcp_param_text(const struct mcp_tool *t, const char *name);
/* True for a method parameter no tool offers: one a model cannot use over MCP. */
bool mcp_param_hidden(const char *name);
/* Removes the descriptions from a schema and the schemas in it (they speak to operators). */
void mcp_schema_strip(json_object *schema);

/* Protocol revision comparison: "YYYY-MM-DD" strings order by date. */
static inline bool mcp_version_at_least(const char *version, const char *min)
{
    return version && __builtin_strcmp(version, min) >= 0;
}
