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
    {NULL, "id", "the sandbox id, from sandbox_create or sandbox_list"},
    {NULL, "hostname", "host name of the sandbox (one DNS label); default: its id"},
    {NULL, "cores", "CPU cores; the operator sets the default and the maximum"},
    {NULL, "memory_mb", "memory in MB; the operator sets the default and the maximum"},
    {NULL, "disk_gb", "disk size in GB; the operator sets the default and the maximum"},
    {NULL, "internet", "allow outbound HTTP, HTTPS and DNS"},
    {NULL, "ttl_s", "lease in seconds: the sandbox is destroyed when it runs out"},
    {"sandbox_list", "labels", "only sandboxes that carry all these labels"},
    {NULL, "labels", "your own name/value tags, shown by sandbox_list and usable to filter it"},
    {NULL, "idempotency_key",
     "a create whose answer was lost, repeated with the same key, "
     "returns the same sandbox"},
    {NULL, "template", "the system image to start from; default: the usual one"},
    {NULL, "enabled", "true allows outbound internet, false blocks it"},
    {NULL, "wait", "return only once a probe from inside the sandbox confirms the change"},
    {NULL, "wait_timeout_s", "seconds the confirmation may take"},
    {NULL, "command", "a shell command, run by /bin/sh -c"},
    {NULL, "argv", "a program and its arguments, run directly (instead of command)"},
    {NULL, "env", "environment variables to set"},
    {NULL, "cwd", "working folder (absolute path); default: the home folder"},
    {"process_start", "stdin", "true: the process reads standard input fed by process_write"},
    {NULL, "stdin", "text given to the command on its standard input"},
    {NULL, "stdin_b64", "binary standard input in base64 (instead of stdin)"},
    {NULL, "timeout_ms", "milliseconds before the command and all it started are killed"},
    {NULL, "path", "absolute path in the sandbox"},
    {NULL, "content", "the file's text"},
    {NULL, "content_b64", "the file's bytes in base64 (instead of content)"},
    {NULL, "mode", "permissions in octal, e.g. 0755"},
    {NULL, "make_parents", "create missing parent folders"},
    {"write_file", "offset", "write at this byte offset of the file instead of replacing it"},
    {"read_file", "offset", "byte offset to start reading at"},
    {NULL, "offset", "byte offset to read from: next_offset of the previous read"},
    {NULL, "append", "add to the end of the file instead of replacing it"},
    {NULL, "length", "bytes to read at most"},
    {NULL, "limit", "entries to list at most"},
    {NULL, "pty", "run on a terminal of this size (cols, rows)"},
    {NULL, "process", "the process id, from process_start"},
    {NULL, "stream", "which output to read"},
    {NULL, "wait_ms", "milliseconds to wait for new output when there is none yet"},
    {NULL, "signal", "the signal to send"},
};

const char *mcp_param_text(const struct mcp_tool *t, const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(param_texts); i++)
        if ((!param_texts[i].tool || strcmp(param_texts[i].tool, t->name) == 0) &&
            strcmp(param_texts[i].param, name) == 0)
            return param_texts[i].text;
    return NULL;
}

bool mcp_param_hidden(const char *name)
{
    /* Descriptors cannot be passed over MCP; `node` and `all` are for admins. */
    return endswith(name, "_fd") || strcmp(name, "node") == 0 || strcmp(name, "all") == 0;
}

/* What a model does without: descriptions for operators, and checks the daemon
 * makes anyway (its errors name the argument and the limit). */
static const char *const stripped[] = {
    "description",   "pattern",       "maxLength", "minLength", "contentEncoding",
    "propertyNames", "maxProperties", "maxItems",  "minItems",  "minimum",
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
