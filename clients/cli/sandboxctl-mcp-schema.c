/* Tool schemas written for a model: the daemon's OpenRPC document gives each
 * parameter its type and limits, and this file its description (the document's
 * speak to operators: configuration keys, error codes, method names) and says
 * which parameters a model cannot use over MCP (passed descriptors, admin-only
 * ones, ones the server sets itself). */
#include "macro.h"

#include <string.h>

#include "sandboxctl-mcp.h"
#include "util.h"

static const struct {
    const char *tool; /* NULL: any tool */
    const char *param;
    const char *text;
} param_texts[] = {
    {NULL, "id", "sandbox id"},
    {NULL, "hostname", "host name"},
    {NULL, "cores", "CPU cores"},
    {NULL, "memory_mb", "memory in MB"},
    {NULL, "disk_gb", "disk in GB"},
    {NULL, "net_rate_mbps", "bandwidth cap in Mbit/s; 0: none"},
    {NULL, "internet", "allow outbound HTTP, HTTPS and DNS"},
    {NULL, "ttl_s", "lease in seconds"},
    {"sandbox_list", "labels", "filter: all these labels"},
    {NULL, "labels", "your own tags"},
    {NULL, "idempotency_key", "same key, same sandbox"},
    {NULL, "template", "system image"},
    {NULL, "enabled", "true: allow, false: block"},
    {NULL, "allow", "IPv4 CIDRs (:port optional) or domain names let out"},
    {NULL, "wait", "return once it applies"},
    {NULL, "wait_timeout_s", "seconds to wait at most"},
    {NULL, "command", "shell command (/bin/sh -c)"},
    {NULL, "argv", "program and arguments"},
    {"sandbox_create", "env", "env of every command"},
    {NULL, "env", "environment variables to set"},
    {NULL, "cwd", "working folder"},
    {NULL, "user", "user name or uid; default: root"},
    {"process_start", "stdin", "true: feed its stdin with process_write"},
    {NULL, "stdin", "stdin text"},
    {NULL, "stdin_b64", "stdin in base64"},
    {NULL, "timeout_ms", "time limit in ms"},
    {NULL, "path", "absolute path"},
    {NULL, "content", "the file's text"},
    {NULL, "content_b64", "file bytes in base64"},
    {NULL, "mode", "octal permissions"},
    {NULL, "make_parents", "create parent folders"},
    {"write_file", "offset", "write in place at this offset"},
    {"read_file", "offset", "byte offset to start reading at"},
    {NULL, "offset", "byte offset: the last next_offset"},
    {NULL, "append", "add to the end of the file"},
    {NULL, "length", "bytes to read at most"},
    {NULL, "limit", "entries to list at most"},
    {NULL, "pty", "run on a terminal of this size"},
    {NULL, "process", "process id"},
    {NULL, "follow", "follow a symbolic link"},
    {NULL, "recursive", "remove a folder and its contents"},
    {NULL, "parents", "create parent folders"},
    {NULL, "from", "path to move"},
    {NULL, "to", "new path"},
    {NULL, "data", "stdin text"},
    {NULL, "data_b64", "stdin bytes in base64"},
    {NULL, "close", "then close its stdin"},
    {"process_wait", "timeout_ms", "ms to wait at most"},
    {"sandbox_renew", "ttl_s", "new lease in seconds from now"},
    {NULL, "stream", "which output to read"},
    {NULL, "wait_ms", "ms to wait for new output"},
    {NULL, "name", "snapshot name"},
    {NULL, "signal", "signal name"},
};

/* The text for `name` in t (tool_only) or in any tool. */
static const char *param_text(const char *tool, const char *name, bool tool_only)
{
    for (size_t i = 0; i < ELEMENTSOF(param_texts); i++)
        if (strcmp(param_texts[i].param, name) == 0 &&
            (tool_only ? param_texts[i].tool && strcmp(param_texts[i].tool, tool) == 0
                       : !param_texts[i].tool))
            return param_texts[i].text;
    return NULL;
}

const char *mcp_param_text(const struct mcp_tool *t, const char *name)
{
    const char *s = param_text(t->name, name, true);

    return s ? s : param_text(t->name, name, false);
}

bool mcp_param_hidden(const char *name)
{
    /* Descriptors cannot be passed over MCP; `node` and `all` are for admins. */
    return endswith(name, "_fd") || strcmp(name, "node") == 0 || strcmp(name, "all") == 0;
}

/* What a model does without: descriptions for operators, and checks the daemon
 * makes anyway (its errors name the argument and the limit). */
static const char *const stripped[] = {
    "description",   "pattern",  "maxLength", "minLength", "contentEncoding", "propertyNames",
    "maxProperties", "maxItems", "minItems",  "minimum",   "maximum",
};

void mcp_schema_strip(json_object *schema)
{
    if (json_object_is_type(schema, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(schema); i++)
            mcp_schema_strip(json_object_array_get_idx(schema, i));
        return;
    }
    if (!json_object_is_type(schema, json_type_object))
        return;
    for (size_t i = 0; i < ELEMENTSOF(stripped); i++)
        json_object_object_del(schema, stripped[i]);
    json_object_object_foreach(schema, k, v)
    {
        if (strcmp(k, "properties") == 0 && json_object_is_type(v, json_type_object)) {
            json_object_object_foreach(v, pk, pv)
            {
                (void)pk;
                mcp_schema_strip(pv);
            }
        } else if (json_object_is_type(v, json_type_object) ||
                   json_object_is_type(v, json_type_array))
            mcp_schema_strip(v);
    }
}
