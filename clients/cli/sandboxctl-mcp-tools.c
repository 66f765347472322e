/* The MCP tools of `sandboxctl mcp`: one row per tool, each a thin layer over one
 * sandboxd method. A tool is offered when the daemon's OpenRPC document
 * (rpc.discover) lists its method; its input schema is that method's params and
 * its output schema that method's result, taken from the document, so limits
 * and parameter names have one source. Results carry the method's result as
 * structuredContent and a text rendering; daemon errors become isError results
 * that say what to do next. */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxctl-mcp.h"
#include "util.h"
#include "b64.h"
#include "rpc.h"

#define SCHEMA_REF_DEPTH 16 /* nested $ref resolutions before giving up */

static void render_created(FILE *f, json_object *result, json_object *args);
static void render_sandbox(FILE *f, json_object *result, json_object *args);
static void render_list(FILE *f, json_object *result, json_object *args);
static void render_destroyed(FILE *f, json_object *result, json_object *args);
static void render_exec(FILE *f, json_object *result, json_object *args);
static void render_written(FILE *f, json_object *result, json_object *args);
static void render_read(FILE *f, json_object *result, json_object *args);
static void render_entries(FILE *f, json_object *result, json_object *args);
static void render_fields(FILE *f, json_object *result, json_object *args);
static void render_forked(FILE *f, json_object *result, json_object *args);

static const struct mcp_tool tools[] = {
    {"sandbox_create", "sandbox.create", "Create a sandbox",
     "Create a Linux sandbox; pass its id to the other tools. Internet is off unless "
     "internet is true. It ends with its lease (ttl_s).",
     TOOL_UNPINNED | TOOL_CREATES | TOOL_OPEN_WORLD,
     "net_rate_mbps resume_on_use auto_pause_s volumes ", render_created},
    {"sandbox_list", "sandbox.list", "List sandboxes", "List your sandboxes.",
     TOOL_UNPINNED | TOOL_READ_ONLY | TOOL_IDEMPOTENT, "", render_list},
    {"sandbox_destroy", "sandbox.destroy", "Destroy a sandbox",
     "Delete a sandbox with everything in it.",
     TOOL_TAKES_ID | TOOL_UNPINNED | TOOL_DESTRUCTIVE | TOOL_IDEMPOTENT, "wait ", render_destroyed},
    {"sandbox_renew", "sandbox.renew", "Renew a lease",
     "Set a sandbox's lease to ttl_s seconds from now.", TOOL_TAKES_ID | TOOL_IDEMPOTENT, "",
     render_sandbox},
    {"sandbox_snapshot", "sandbox.snapshot", "Snapshot files", "Save the sandbox's files.",
     TOOL_TAKES_ID, "", render_fields},
    {"sandbox_rollback", "sandbox.rollback", "Restore a snapshot",
     "Restore the files of a snapshot; restarts the sandbox.", TOOL_TAKES_ID | TOOL_DESTRUCTIVE, "",
     render_sandbox},
    {"sandbox_set_internet", "sandbox.set_internet", "Internet access",
     "Allow or block outbound HTTP, HTTPS and DNS; takes up to about 10 s (wait: true waits).",
     TOOL_TAKES_ID | TOOL_IDEMPOTENT | TOOL_OPEN_WORLD, "wait_timeout_s ", render_sandbox},
    {"exec", "sandbox.exec", "Run a command",
     "Run a command; returns its exit code and output (long output: its start and end). "
     "timeout_ms kills all it started. Still running after background_after_s, it goes on "
     "in the background: continue with process_wait and process_read. Runs as root (or "
     "user) in the home folder.",
     TOOL_TAKES_ID | TOOL_DESTRUCTIVE | TOOL_OPEN_WORLD | TOOL_CAPTURES,
     "stream stdin_fd stdout_fd stderr_fd max_output_bytes ", render_exec},
    {"write_file", "file.write", "Write a file",
     "Write a file (text in content, or base64 in content_b64), replacing it atomically.",
     TOOL_TAKES_ID | TOOL_DESTRUCTIVE | TOOL_IDEMPOTENT, "", render_written},
    {"read_file", "file.read", "Read a file",
     "Read a file (text, or base64 for other bytes); a large one in parts (offset, length).",
     TOOL_TAKES_ID | TOOL_READ_ONLY | TOOL_IDEMPOTENT, "", render_read},
    {"list_files", "file.list", "List a folder", "List a folder's entries.",
     TOOL_TAKES_ID | TOOL_READ_ONLY | TOOL_IDEMPOTENT, "", render_entries},
    {"stat_path", "file.stat", "Describe a path", "Type, size, mode and mtime of a path.",
     TOOL_TAKES_ID | TOOL_READ_ONLY | TOOL_IDEMPOTENT, "", render_fields},
    {"remove_path", "file.remove", "Remove a path", "Remove a file or folder.",
     TOOL_TAKES_ID | TOOL_DESTRUCTIVE | TOOL_IDEMPOTENT, "", render_fields},
    {"make_dir", "file.mkdir", "Create a folder", "Create a folder.",
     TOOL_TAKES_ID | TOOL_IDEMPOTENT, "mode ", render_fields},
    {"move_path", "file.rename", "Move a path",
     "Move or rename a file or folder, replacing what is at `to`.",
     TOOL_TAKES_ID | TOOL_DESTRUCTIVE, "", render_fields},
    {"process_start", "process.start", "Start a process",
     "Start a command in the background (a server, a watcher) and return its process id.",
     TOOL_TAKES_ID | TOOL_DESTRUCTIVE | TOOL_OPEN_WORLD, "", render_fields},
    {"process_read", "process.read", "Read output",
     "Read a background process's output from an offset, optionally waiting for more.",
     TOOL_TAKES_ID | TOOL_READ_ONLY | TOOL_IDEMPOTENT, "", render_fields},
    {"process_write", "process.write", "Write to a process",
     "Feed stdin of a background process started with stdin: true or a pty.",
     TOOL_TAKES_ID | TOOL_DESTRUCTIVE, "", render_fields},
    {"process_wait", "process.wait", "Wait for a process",
     "Wait up to timeout_ms for a background process to end; returns its state and exit code.",
     TOOL_TAKES_ID | TOOL_READ_ONLY | TOOL_IDEMPOTENT, "", render_fields},
    {"process_list", "process.list", "List processes", "List a sandbox's background processes.",
     TOOL_TAKES_ID | TOOL_READ_ONLY | TOOL_IDEMPOTENT, "", render_fields},
    {"process_kill", "process.kill", "Stop a process",
     "Stop a background process and everything it started.",
     TOOL_TAKES_ID | TOOL_DESTRUCTIVE | TOOL_IDEMPOTENT, "", render_fields},
    /* The `durable` set (--tools durable). */
    {"sandbox_snapshots", "sandbox.snapshots", "List snapshots",
     "List the snapshots of a sandbox's files (names to pass to sandbox_rollback).",
     TOOL_TAKES_ID | TOOL_READ_ONLY | TOOL_IDEMPOTENT | TOOL_DURABLE, "", render_fields},
    {"sandbox_fork", "sandbox.fork", "Fork a sandbox",
     "Make new sandboxes that start as copies of this one's files; returns their ids (and how "
     "many could not be made). Running processes are not copied.",
     TOOL_TAKES_ID | TOOL_UNPINNED | TOOL_DURABLE, "", render_forked},
    {"sandbox_pause", "sandbox.pause", "Pause a sandbox",
     "Stop a sandbox to save resources: its files are kept, but every running process "
     "ends. sandbox_resume starts it again.",
     TOOL_TAKES_ID | TOOL_DESTRUCTIVE | TOOL_IDEMPOTENT | TOOL_DURABLE, "", render_sandbox},
    {"sandbox_resume", "sandbox.resume", "Resume a sandbox",
     "Start a paused sandbox again with its files as they were; processes that ran before the "
     "pause do not come back.",
     TOOL_TAKES_ID | TOOL_IDEMPOTENT | TOOL_DURABLE, "", render_sandbox},
};

/* ---- the OpenRPC document --------------------------------------------------- */

static json_object *doc_method(json_object *doc, const char *name)
{
    json_object *methods;

    if (!doc || !json_object_object_get_ex(doc, "methods", &methods) ||
        !json_object_is_type(methods, json_type_array))
        return NULL;
    for (size_t i = 0; i < json_object_array_length(methods); i++) {
        json_object *m = json_object_array_get_idx(methods, i), *n;

        if (json_object_object_get_ex(m, "name", &n) && json_object_is_type(n, json_type_string) &&
            strcmp(json_object_get_string(n), name) == 0)
            return m;
    }
    return NULL;
}

static const char *jstr(json_object *o, const char *key)
{
    json_object *v;

    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

static bool jhas(json_object *o, const char *key, json_type type)
{
    json_object *v;

    return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, type);
}

static int64_t jint(json_object *o, const char *key, int64_t def)
{
    json_object *v;

    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
        return def;
    return json_object_get_int64(v);
}

static bool jbool(json_object *o, const char *key)
{
    json_object *v;

    return o && json_object_object_get_ex(o, key, &v) &&
           json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
}

/* A copy of schema with every "#/components/schemas/X" reference of doc replaced
 * by its target, so that the schema stands alone (MCP hosts do not see the
 * document). Other references become an empty schema. */
static json_object *schema_resolve(json_object *doc, json_object *schema, unsigned depth)
{
    json_object *out;

    if (json_object_is_type(schema, json_type_array)) {
        out = json_object_new_array();
        for (size_t i = 0; out && i < json_object_array_length(schema); i++)
            json_object_array_add(out,
                                  schema_resolve(doc, json_object_array_get_idx(schema, i), depth));
        return out;
    }
    if (!json_object_is_type(schema, json_type_object))
        return json_object_get(schema);
    {
        const char *ref = jstr(schema, "$ref"), *name;
        json_object *comp, *schemas, *target;

        if (ref) {
            name = startswith(ref, "#/components/schemas/");
            if (!name || depth >= SCHEMA_REF_DEPTH ||
                !json_object_object_get_ex(doc, "components", &comp) ||
                !json_object_object_get_ex(comp, "schemas", &schemas) ||
                !json_object_object_get_ex(schemas, name, &target))
                return json_object_new_object();
            return schema_resolve(doc, target, depth + 1);
        }
    }
    out = json_object_new_object();
    json_object_object_foreach(schema, k, v)
    {
        json_object_object_add(out, k, schema_resolve(doc, v, depth));
    }
    return out;
}

static bool word_in(const char *list, const char *word)
{
    size_t n = strlen(word);

    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && p[n] == ' ')
            return true;
    return false;
}

/* True when the tool offers the method's param `name` as an argument. */
static bool tool_takes(const struct mcp_tool *t, const struct mcp_cfg *cfg, const char *name)
{
    if (word_in(t->hidden, name) || mcp_param_hidden(name))
        return false;
    return !(cfg->pinned && (t->flags & TOOL_TAKES_ID) && strcmp(name, "id") == 0);
}

static bool tool_offered(const struct mcp_tool *t, json_object *doc, const struct mcp_cfg *cfg)
{
    if (cfg->pinned && (t->flags & TOOL_UNPINNED))
        return false;
    if (!(cfg->sets & ((t->flags & TOOL_DURABLE) ? MCP_SET_DURABLE : MCP_SET_CORE)))
        return false;
    return doc_method(doc, t->method) != NULL;
}

const struct mcp_tool *mcp_tool_find(json_object *doc, const struct mcp_cfg *cfg, const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(tools); i++)
        if (strcmp(tools[i].name, name) == 0)
            return tool_offered(&tools[i], doc, cfg) ? &tools[i] : NULL;
    return NULL;
}

char *mcp_tools_names(json_object *doc, const struct mcp_cfg *cfg)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);

    if (!f)
        return NULL;
    for (size_t i = 0; i < ELEMENTSOF(tools); i++)
        if (tool_offered(&tools[i], doc, cfg))
            fprintf(f, "%s ", tools[i].name);
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

/* ---- tools/list -------------------------------------------------------------- */

/* The `max_output` argument of a TOOL_CAPTURES tool (not a daemon param). */
static json_object *output_budget_schema(const struct mcp_cfg *cfg)
{
    json_object *s = json_object_new_object();

    json_object_object_add(s, "type", json_object_new_string("integer"));
    json_object_object_add(
        s, "default",
        json_object_new_int64(cfg->max_output > 0 ? cfg->max_output : MCP_OUTPUT_DEFAULT));
    json_object_object_add(s, "description", json_object_new_string("bytes of output to show"));
    return s;
}

/* The `background_after_s` argument of a TOOL_CAPTURES tool (not a daemon param). */
static json_object *exec_budget_schema(const struct mcp_cfg *cfg)
{
    json_object *s = json_object_new_object();

    json_object_object_add(s, "type", json_object_new_string("integer"));
    json_object_object_add(s, "default",
                           json_object_new_int64(cfg->exec_budget_s > 0 ? cfg->exec_budget_s
                                                                        : MCP_EXEC_BUDGET_DEFAULT));
    json_object_object_add(s, "description",
                           json_object_new_string("seconds to wait; then it runs on in the "
                                                  "background"));
    return s;
}

static bool method_has_param(json_object *doc, const char *method, const char *name);

/* sandbox_create's `env` while the daemon's document does not list it: the same schema
 * as exec's, passed on as it is (an older daemon refuses it, naming it). */
static bool create_env(const struct mcp_tool *t, json_object *doc, const char *name)
{
    return (t->flags & TOOL_CREATES) && strcmp(name, "env") == 0 &&
           !method_has_param(doc, t->method, "env");
}

static json_object *create_env_schema(void)
{
    json_object *s = json_object_new_object(), *v = json_object_new_object();

    json_object_object_add(v, "type", json_object_new_string("string"));
    json_object_object_add(s, "type", json_object_new_string("object"));
    json_object_object_add(s, "additionalProperties", v);
    json_object_object_add(s, "description",
                           json_object_new_string("environment variables of every command"));
    return s;
}

static json_object *tool_input_schema(const struct mcp_tool *t, json_object *doc,
                                      const struct mcp_cfg *cfg)
{
    json_object *method = doc_method(doc, t->method), *params = NULL;
    json_object *schema = json_object_new_object(), *props = json_object_new_object();
    json_object *required = json_object_new_array();

    json_object_object_get_ex(method, "params", &params);
    for (size_t i = 0;
         json_object_is_type(params, json_type_array) && i < json_object_array_length(params);
         i++) {
        json_object *p = json_object_array_get_idx(params, i), *s = NULL, *ps, *d;
        const char *name = jstr(p, "name"), *desc = jstr(p, "description");

        if (!name || !tool_takes(t, cfg, name))
            continue;
        s = json_object_object_get_ex(p, "schema", &ps) ? schema_resolve(doc, ps, 0)
                                                        : json_object_new_object();
        if (!desc)
            desc = jstr(s, "description");
        d = json_object_new_string(mcp_param_text(t, name) ? mcp_param_text(t, name)
                                   : desc                  ? desc
                                                           : "");
        mcp_schema_strip(s); /* s's own description goes too */
        if (json_object_object_get_ex(s, "default", &ps) &&
            json_object_is_type(ps, json_type_boolean) && !json_object_get_boolean(ps))
            json_object_object_del(s, "default"); /* false: what a model assumes */
        json_object_object_add(s, "description", d);
        if ((t->flags & TOOL_CREATES) && strcmp(name, "ttl_s") == 0 && cfg->default_ttl_s > 0)
            json_object_object_add(s, "default", json_object_new_int64(cfg->default_ttl_s));
        json_object_object_add(props, name, s);
        if (jbool(p, "required"))
            json_object_array_add(required, json_object_new_string(name));
    }
    if (t->flags & TOOL_CAPTURES) {
        json_object_object_add(props, "max_output", output_budget_schema(cfg));
        json_object_object_add(props, "background_after_s", exec_budget_schema(cfg));
    }
    if (create_env(t, doc, "env"))
        json_object_object_add(props, "env", create_env_schema());
    json_object_object_add(schema, "type", json_object_new_string("object"));
    json_object_object_add(schema, "properties", props);
    if (json_object_array_length(required) > 0)
        json_object_object_add(schema, "required", required);
    else
        json_object_put(required);
    json_object_object_add(schema, "additionalProperties", json_object_new_boolean(false));
    return schema;
}

/* The hints that differ from the protocol's defaults (not read-only, destructive, not
 * idempotent, open world), and the title where the tool has no title of its own. */
static json_object *tool_annotations(const struct mcp_tool *t, const char *version)
{
    json_object *a = json_object_new_object();

    if (!mcp_version_at_least(version, MCP_PROTOCOL_STRUCTURED))
        json_object_object_add(a, "title", json_object_new_string(t->title));
    if (t->flags & TOOL_READ_ONLY)
        json_object_object_add(a, "readOnlyHint", json_object_new_boolean(true));
    else if (!(t->flags & TOOL_DESTRUCTIVE))
        json_object_object_add(a, "destructiveHint", json_object_new_boolean(false));
    if (t->flags & TOOL_IDEMPOTENT)
        json_object_object_add(a, "idempotentHint", json_object_new_boolean(true));
    if (!(t->flags & TOOL_OPEN_WORLD))
        json_object_object_add(a, "openWorldHint", json_object_new_boolean(false));
    return a;
}

json_object *mcp_tools_list(json_object *doc, const struct mcp_cfg *cfg, const char *version)
{
    json_object *res = json_object_new_object(), *list = json_object_new_array();

    for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
        const struct mcp_tool *t = &tools[i];
        json_object *o;

        if (!tool_offered(t, doc, cfg))
            continue;
        o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(t->name));
        if (mcp_version_at_least(version, MCP_PROTOCOL_STRUCTURED))
            json_object_object_add(o, "title", json_object_new_string(t->title));
        if (cfg->pinned && (t->flags & TOOL_TAKES_ID)) {
            _cleanup_free_ char *d = NULL;

            if (asprintf(&d, "%s This server works on sandbox %s only.", t->description,
                         cfg->pinned) < 0)
                d = NULL;
            json_object_object_add(o, "description", json_object_new_string(d ? d : ""));
        } else
            json_object_object_add(o, "description", json_object_new_string(t->description));
        json_object_object_add(o, "inputSchema", tool_input_schema(t, doc, cfg));
        /* No outputSchema: the text says what a result means, and tools/list stays
         * small (structuredContent still carries the method's result). */
        if (mcp_version_at_least(version, MCP_PROTOCOL_ANNOTATIONS))
            json_object_object_add(o, "annotations", tool_annotations(t, version));
        json_object_array_add(list, o);
    }
    json_object_object_add(res, "tools", list);
    return res;
}

/* ---- tools/call -------------------------------------------------------------- */

static char *problem_new(const char *fmt, ...) _printf_(1, 2);
static char *problem_new(const char *fmt, ...)
{
    va_list ap;
    char *s;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* "a, b and c": the arguments t takes. */
static char *tool_arg_names(const struct mcp_tool *t, json_object *doc, const struct mcp_cfg *cfg)
{
    json_object *params = NULL;
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    bool first = true;

    if (!f)
        return NULL;
    json_object_object_get_ex(doc_method(doc, t->method), "params", &params);
    for (size_t i = 0;
         json_object_is_type(params, json_type_array) && i < json_object_array_length(params);
         i++) {
        const char *name = jstr(json_object_array_get_idx(params, i), "name");

        if (name && tool_takes(t, cfg, name)) {
            fprintf(f, "%s%s", first ? "" : ", ", name);
            first = false;
        }
    }
    if (first)
        fputs("none", f);
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

static bool method_has_param(json_object *doc, const char *method, const char *name)
{
    json_object *params = NULL;

    json_object_object_get_ex(doc_method(doc, method), "params", &params);
    for (size_t i = 0;
         json_object_is_type(params, json_type_array) && i < json_object_array_length(params);
         i++) {
        const char *n = jstr(json_object_array_get_idx(params, i), "name");

        if (n && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

json_object *mcp_doc_param_schema(json_object *doc, const char *method, const char *name)
{
    json_object *params = NULL, *schema;

    json_object_object_get_ex(doc_method(doc, method), "params", &params);
    for (size_t i = 0;
         json_object_is_type(params, json_type_array) && i < json_object_array_length(params);
         i++) {
        json_object *p = json_object_array_get_idx(params, i);
        const char *n = jstr(p, "name");

        if (n && strcmp(n, name) == 0)
            return json_object_object_get_ex(p, "schema", &schema) ? schema : NULL;
    }
    return NULL;
}

bool mcp_doc_has_method(json_object *doc, const char *method)
{
    return doc_method(doc, method) != NULL;
}

/* The schema maximum of the method's param `name`, else def. */
static int64_t param_maximum(json_object *doc, const char *method, const char *name, int64_t def)
{
    json_object *schema = mcp_doc_param_schema(doc, method, name);

    return schema ? jint(schema, "maximum", def) : def;
}

int mcp_tool_params(const struct mcp_tool *t, json_object *doc, const struct mcp_cfg *cfg,
                    json_object *args, json_object **ret_params, char **ret_problem)
{
    _cleanup_json_ json_object *p = json_object_new_object();

    if (!p)
        return -ENOMEM;
    json_object_object_foreach(args, k, v)
    {
        if (cfg->pinned && (t->flags & TOOL_TAKES_ID) && strcmp(k, "id") == 0) {
            if (json_object_is_type(v, json_type_string) &&
                strcmp(json_object_get_string(v), cfg->pinned) == 0)
                continue;
            *ret_problem = problem_new("This server works on sandbox %s only: call %s again "
                                       "without `id`.",
                                       cfg->pinned, t->name);
            return -EINVAL;
        }
        if ((t->flags & TOOL_CAPTURES) && strcmp(k, "max_output") == 0) {
            if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
                json_object_get_int64(v) > MCP_OUTPUT_MAX) {
                *ret_problem = problem_new("Invalid argument `max_output`: give a number of "
                                           "bytes from 0 to %d. Correct it and call %s again.",
                                           MCP_OUTPUT_MAX, t->name);
                return -EINVAL;
            }
            continue;
        }
        if ((t->flags & TOOL_CAPTURES) && strcmp(k, "background_after_s") == 0) {
            if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
                json_object_get_int64(v) > MCP_EXEC_BUDGET_MAX) {
                *ret_problem = problem_new("Invalid argument `background_after_s`: give a "
                                           "number of seconds from 1 to %d. Correct it and "
                                           "call %s again.",
                                           MCP_EXEC_BUDGET_MAX, t->name);
                return -EINVAL;
            }
            continue;
        }
        if (!tool_takes(t, cfg, k) ||
            !(method_has_param(doc, t->method, k) || create_env(t, doc, k))) {
            _cleanup_free_ char *names = tool_arg_names(t, doc, cfg);

            *ret_problem = problem_new("`%s` is not an argument of %s. It takes: %s. Call it "
                                       "again with those only.",
                                       k, t->name, strna(names));
            return -EINVAL;
        }
        json_object_object_add(p, k, json_object_get(v));
    }
    if (cfg->pinned && (t->flags & TOOL_TAKES_ID))
        json_object_object_add(p, "id", json_object_new_string(cfg->pinned));
    if (t->flags & TOOL_CAPTURES) { /* the output comes as exec.output, to be cut to a budget */
        json_object_object_add(p, "stream", json_object_new_boolean(true));
        json_object_object_add(p, "max_output_bytes",
                               json_object_new_int64(param_maximum(
                                   doc, t->method, "max_output_bytes", MCP_STREAMED_DEFAULT)));
    }
    if ((t->flags & TOOL_CREATES) && cfg->default_ttl_s > 0 &&
        !json_object_object_get_ex(p, "ttl_s", NULL))
        json_object_object_add(p, "ttl_s", json_object_new_int64(cfg->default_ttl_s));
    /* With a key of its own, a create whose reply was lost can be repeated and
     * returns the same sandbox (the lost-connection result names the key). */
    if ((t->flags & TOOL_CREATES) && method_has_param(doc, t->method, "idempotency_key") &&
        !json_object_object_get_ex(p, "idempotency_key", NULL)) {
        char key[ID_MAX + 1];

        if (id_random(key, sizeof key, "mcp-") >= 0)
            json_object_object_add(p, "idempotency_key", json_object_new_string(key));
    }
    *ret_params = TAKE_PTR(p);
    return 0;
}

static json_object *call_result_new(const char *text, bool is_error)
{
    json_object *res = json_object_new_object(), *content = json_object_new_array();
    json_object *item = json_object_new_object();

    json_object_object_add(item, "type", json_object_new_string("text"));
    json_object_object_add(item, "text", json_object_new_string(text ? text : ""));
    json_object_array_add(content, item);
    json_object_object_add(res, "content", content);
    json_object_object_add(res, "isError", json_object_new_boolean(is_error));
    return res;
}

json_object *mcp_tool_error_text(const char *text)
{
    return call_result_new(text, true);
}

json_object *mcp_tool_result(const struct mcp_tool *t, json_object *result, json_object *args,
                             const struct mcp_output *out, const char *version)
{
    _cleanup_free_ char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    json_object *res;

    if (!f)
        return NULL;
    t->render(f, result, args);
    if (out && (t->flags & TOOL_CAPTURES))
        mcp_output_render_all(f, out);
    if (fclose(f) != 0)
        return NULL;
    /* The text ends without a newline: hosts show it as it is. */
    while (n > 0 && text[n - 1] == '\n')
        text[--n] = '\0';
    res = call_result_new(text, false);
    if (res && mcp_version_at_least(version, MCP_PROTOCOL_STRUCTURED) &&
        json_object_is_type(result, json_type_object)) {
        if (out && (t->flags & TOOL_CAPTURES)) { /* the output is in the text only */
            json_object_object_add(result, "stdout_bytes",
                                   json_object_new_int64(out->streams[0].total));
            json_object_object_add(result, "stderr_bytes",
                                   json_object_new_int64(out->streams[1].total));
        }
        json_object_object_add(res, "structuredContent", json_object_get(result));
    }
    return res;
}

/* ---- what an error tells the model ------------------------------------------ */

static void advise_file_error(FILE *f, const char *errname, json_object *args)
{
    const char *path = jstr(args, "path");

    fprintf(f, "File error on %s: ", path ? path : "the path");
    if (errname && strcmp(errname, "ENOENT") == 0)
        fputs("it does not exist (or a parent folder is missing). Check the path, e.g. with exec "
              "and `ls`.",
              f);
    else if (errname && strcmp(errname, "EISDIR") == 0)
        fputs("it is a folder, not a file.", f);
    else if (errname && strcmp(errname, "ENOTDIR") == 0)
        fputs("a component of the path is not a folder.", f);
    else if (errname && (strcmp(errname, "EACCES") == 0 || strcmp(errname, "EPERM") == 0))
        fputs("permission denied.", f);
    else
        fprintf(f, "%s.", errname ? errname : "failed");
}

static void advise(FILE *f, const struct mcp_tool *t, const struct mcp_cfg *cfg, int code,
                   const char *reason, json_object *data, json_object *args)
{
    const char *id = cfg->pinned ? cfg->pinned : jstr(args, "id"), *param;
    size_t n;

    switch (code) {
    case RPC_INVALID_PARAMS:
        /* the daemon's reason names the parameter first ("cwd: not a directory ..."): once */
        param = jstr(data, "param");
        n = param ? strlen(param) : 0;
        if (param && strncmp(reason, param, n) == 0 && reason[n] == ':' && reason[n + 1] == ' ')
            reason += n + 2;
        fprintf(f, "Invalid argument `%s`: %s. Correct it and call %s again.",
                param ? param : "arguments", reason, t->name);
        break;
    case RPC_METHOD_NOT_FOUND:
        fprintf(f, "This sandboxd does not offer %s (%s): do without this tool.", t->name, reason);
        break;
    case RPC_NO_SUCH_SANDBOX:
        if (cfg->pinned)
            fprintf(f,
                    "Sandbox %s, which this server works on, no longer exists (destroyed, or "
                    "its lease ran out). Tell the user.",
                    cfg->pinned);
        else
            fprintf(f,
                    "There is no sandbox %s (it was destroyed, its lease ran out, or the id is "
                    "wrong). Call sandbox_list to see your sandboxes, or sandbox_create to "
                    "make a new one.",
                    id ? id : "with that id");
        break;
    case RPC_BAD_STATE:
        fprintf(f,
                "Sandbox %s is %s, which does not allow this. A sandbox that is destroying, "
                "destroyed or failed cannot be used any more%s.",
                strna(id), jstr(data, "state") ? jstr(data, "state") : "busy",
                cfg->pinned ? ": tell the user" : ": create a new one with sandbox_create");
        break;
    case RPC_QUOTA_EXCEEDED:
        fprintf(f,
                "Quota exceeded (%s). Destroy the sandboxes you no longer need (sandbox_list, "
                "sandbox_destroy) and try again.",
                reason);
        break;
    case RPC_PROXMOX_ERROR:
        fprintf(f,
                "The sandbox host failed (%s%s%s). Wait a few seconds and call %s again; if "
                "it keeps failing, tell the user.",
                reason, jstr(data, "message") ? ": " : "",
                jstr(data, "message") ? jstr(data, "message") : "", t->name);
        break;
    case RPC_SSH_ERROR:
        fprintf(f,
                "The sandbox could not be reached (%s). Call %s again; if it keeps failing, "
                "the sandbox is broken: %s.",
                reason, t->name, cfg->pinned ? "tell the user" : "destroy it and create a new one");
        break;
    case RPC_DEADLINE_EXCEEDED:
        fprintf(f, "This took too long and was stopped (%s). Call %s again.", reason, t->name);
        break;
    case RPC_BUSY:
        fprintf(f, "sandboxd is busy (%s). Wait a moment and call %s again.", reason, t->name);
        break;
    case RPC_PERMISSION_DENIED:
        fprintf(f, "Permission denied (%s): this user may not do that.", reason);
        break;
    case RPC_FILE_ERROR:
        advise_file_error(f, jstr(data, "errno"), args);
        fprintf(f, " (%s)", reason);
        break;
    case RPC_IDEMPOTENCY_MISMATCH:
        fputs("This idempotency_key was used before with other arguments: use a new key, or the "
              "same arguments as before.",
              f);
        break;
    case RPC_SHUTTING_DOWN:
        fprintf(f,
                "sandboxd is stopping or restarting (%s). Wait a few seconds and call %s "
                "again.",
                reason, t->name);
        break;
    default:
        fprintf(f, "%s failed: %s.", t->name, reason);
    }
}

json_object *mcp_tool_error(const struct mcp_tool *t, json_object *error, json_object *args,
                            const struct mcp_cfg *cfg)
{
    _cleanup_free_ char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    json_object *data = NULL;
    const char *reason;

    if (!f)
        return NULL;
    json_object_object_get_ex(error, "data", &data);
    reason = jstr(data, "reason");
    if (!reason)
        reason = jstr(error, "message") ? jstr(error, "message") : "no reason given";
    advise(f, t, cfg, (int)jint(error, "code", 0), reason, data, args);
    if (fclose(f) != 0)
        return NULL;
    return call_result_new(text, true);
}

/* ---- text renderings --------------------------------------------------------- */

static void render_sandbox(FILE *f, json_object *sb, json_object *args)
{
    json_object *labels = NULL;

    fprintf(f,
            "Sandbox %s is %s: IP %s, internet %s, %" PRId64 " CPU core(s), %" PRId64
            " MB memory, %" PRId64 " GB disk, expires %s.",
            strna(jstr(sb, "id")), strna(jstr(sb, "state")), strna(jstr(sb, "ip")),
            jbool(sb, "internet") ? "on" : "off", jint(sb, "cores", 0), jint(sb, "memory_mb", 0),
            jint(sb, "disk_gb", 0), strna(jstr(sb, "expires_at")));
    if (json_object_object_get_ex(sb, "labels", &labels) && json_object_object_length(labels) > 0)
        fprintf(f, " Labels: %s.",
                json_object_to_json_string_ext(labels, JSON_C_TO_STRING_PLAIN |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE));
}

static void render_created(FILE *f, json_object *sb, json_object *args)
{
    render_sandbox(f, sb, args);
    fprintf(f,
            "\nUse id \"%s\" with the other tools, and call sandbox_destroy when you no longer "
            "need it.",
            strna(jstr(sb, "id")));
}

static void render_list(FILE *f, json_object *result, json_object *args)
{
    json_object *l = NULL;
    size_t n;

    json_object_object_get_ex(result, "sandboxes", &l);
    n = json_object_is_type(l, json_type_array) ? json_object_array_length(l) : 0;
    if (n == 0) {
        fputs("No sandboxes. Create one with sandbox_create.", f);
        return;
    }
    fprintf(f, "%zu sandbox%s:\n", n, n == 1 ? "" : "es");
    for (size_t i = 0; i < n; i++) {
        json_object *sb = json_object_array_get_idx(l, i);

        fprintf(f, "- %s: %s, IP %s, internet %s, expires %s\n", strna(jstr(sb, "id")),
                strna(jstr(sb, "state")), strna(jstr(sb, "ip")),
                jbool(sb, "internet") ? "on" : "off", strna(jstr(sb, "expires_at")));
    }
}

static void render_destroyed(FILE *f, json_object *result, json_object *args)
{
    fprintf(f, "Sandbox %s is destroyed.", strna(jstr(result, "id")));
}

/* The status line; the output follows (mcp_output_render_all()). */
static void render_exec(FILE *f, json_object *r, json_object *args)
{
    const char *state = jstr(r, "state");

    if (state && strcmp(state, "running") == 0)
        fprintf(f,
                "Still running after %" PRId64 " s: it goes on in the background as process "
                "%s (timeout_ms no longer applies; process_kill stops it). Call process_wait "
                "with process \"%s\" to wait for its end and exit code, and process_read "
                "for the rest of its output: stdout from offset %" PRId64
                ", stderr from offset %" PRId64 ". Its output so far:\n",
                jint(r, "duration_ms", 0) / 1000, strna(jstr(r, "process")),
                strna(jstr(r, "process")), jint(r, "stdout_bytes", 0), jint(r, "stderr_bytes", 0));
    else if (state && strcmp(state, "lost") == 0)
        fputs("The command ended without an exit status (its container restarted, or it was "
              "killed from outside).\n",
              f);
    else if (jbool(r, "timed_out"))
        fprintf(f,
                "Timed out after %" PRId64 " ms: the command and everything it started were "
                "killed. Pass a larger timeout_ms if it needs longer.\n",
                jint(r, "duration_ms", 0));
    else if (jstr(r, "signal"))
        fprintf(f, "Killed by %s after %" PRId64 " ms.\n", jstr(r, "signal"),
                jint(r, "duration_ms", 0));
    else
        fprintf(f, "Exit code %" PRId64 " after %" PRId64 " ms.\n", jint(r, "exit_code", -1),
                jint(r, "duration_ms", 0));
    if (jbool(r, "stdout_truncated") || jbool(r, "stderr_truncated"))
        fputs("The command wrote more output than sandboxd passes on: what came after that is "
              "not shown below.\n",
              f);
}

static void render_written(FILE *f, json_object *result, json_object *args)
{
    fprintf(f, "Wrote %" PRId64 " bytes to %s.", jint(result, "bytes", 0),
            strna(jstr(args, "path")));
}

static void render_read(FILE *f, json_object *r, json_object *args)
{
    int64_t offset = jint(args, "offset", 0), n = 0;
    const char *s = jstr(r, "content"), *b = jstr(r, "content_b64");

    if (s)
        n = (int64_t)strlen(s);
    else if (b)
        n = (int64_t)b64_decoded_size(b, strlen(b));
    fprintf(f, "%s: %" PRId64 " bytes from offset %" PRId64 " of %" PRId64 ". ",
            strna(jstr(args, "path")), n, offset, jint(r, "size", 0));
    if (jbool(r, "eof"))
        fputs("End of file.", f);
    else
        fprintf(f, "More follows: call read_file again with offset %" PRId64 ".", offset + n);
    if (s)
        fprintf(f, "\n%s", s);
    else if (b)
        fprintf(f, "\nThe content is not UTF-8; in base64:\n%s", b);
}

/* Any result: scalar members as "key: value", text data last. */
static void render_fields(FILE *f, json_object *r, json_object *args)
{
    if (!json_object_is_type(r, json_type_object)) {
        fputs(json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN), f);
        return;
    }
    json_object_object_foreach(r, k, v)
    {
        if (json_object_is_type(v, json_type_string) && strchr(json_object_get_string(v), '\n'))
            continue;
        fprintf(f, "%s: %s\n", k,
                json_object_is_type(v, json_type_string)
                    ? json_object_get_string(v)
                    : json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE));
    }
    json_object_object_foreach(r, k2, v2)
    {
        if (json_object_is_type(v2, json_type_string) && strchr(json_object_get_string(v2), '\n'))
            fprintf(f, "--- %s ---\n%s\n", k2, json_object_get_string(v2));
    }
}

static void render_forked(FILE *f, json_object *r, json_object *args)
{
    json_object *l = NULL;
    size_t n;

    json_object_object_get_ex(r, "sandboxes", &l);
    n = json_object_is_type(l, json_type_array) ? json_object_array_length(l) : 0;
    fprintf(f, "Made %zu sandbox%s:", n, n == 1 ? "" : "es");
    for (size_t i = 0; i < n; i++)
        fprintf(f, " %s", strna(jstr(json_object_array_get_idx(l, i), "id")));
    if (jint(r, "failed", 0) > 0)
        fprintf(f, "\n%" PRId64 " could not be made (%s).", jint(r, "failed", 0),
                strna(jstr(r, "reason")));
    fputs("\nUse these ids with the other tools, and call sandbox_destroy when you no longer "
          "need them.",
          f);
}

static void render_entries(FILE *f, json_object *r, json_object *args)
{
    json_object *l = NULL;

    if (!json_object_object_get_ex(r, "entries", &l) || !json_object_is_type(l, json_type_array)) {
        render_fields(f, r, args);
        return;
    }
    fprintf(f, "%s: %zu entries\n", strna(jstr(args, "path")), json_object_array_length(l));
    for (size_t i = 0; i < json_object_array_length(l); i++) {
        json_object *e = json_object_array_get_idx(l, i), *mode = NULL;

        json_object_object_get_ex(e, "mode", &mode);
        fprintf(f, "%-7s %10" PRId64 " %-6s %s%s%s\n", strna(jstr(e, "type")), jint(e, "size", 0),
                mode ? json_object_get_string(mode) : "-", jstr(e, "name") ? "" : "(base64) ",
                jstr(e, "name") ? jstr(e, "name") : strna(jstr(e, "name_b64")),
                jstr(e, "type") && strcmp(jstr(e, "type"), "dir") == 0 ? "/" : "");
    }
    if (jhas(r, "truncated", json_type_boolean) && jbool(r, "truncated"))
        fprintf(f, "(more entries than the limit: only these were listed)\n");
}
