/* JSON-RPC 2.0 codec for sandboxd's wire protocol (docs/protocol.md). Pure: no loop,
 * no sockets. Parsing is strict (json-c strict mode, UTF-8 validated, nesting
 * depth <= RPC_MAX_DEPTH), batches are limited to RPC_MAX_BATCH entries, and
 * every error code of docs/protocol.md has a constant and a default message. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "json-util.h"  /* _cleanup_json_ */
#include "api-limits.h" /* RPC_MAX_DEPTH, RPC_MAX_BATCH */

enum rpc_code {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
    RPC_NO_SUCH_SANDBOX = -32001,
    RPC_BAD_STATE = -32002,
    RPC_QUOTA_EXCEEDED = -32003,
    RPC_PROXMOX_ERROR = -32004,
    RPC_SSH_ERROR = -32005,
    RPC_DEADLINE_EXCEEDED = -32006,
    RPC_BUSY = -32007,
    RPC_PERMISSION_DENIED = -32008,
    RPC_FILE_ERROR = -32009,
    RPC_IDEMPOTENCY_MISMATCH = -32010,
    RPC_SHUTTING_DOWN = -32011,
};

/* Default human message for a code ("Parse error", "No such sandbox", ...). */
const char *rpc_code_message(int code);

/* One call taken from a message. */
struct rpc_call {
    json_object *id;      /* owned ref; NULL for a notification */
    bool notification;    /* no "id" member: execute, never answer */
    const char *method;   /* points into `request` */
    json_object *params;  /* borrowed from `request`; NULL when absent */
    json_object *request; /* owned ref to the whole request object */
    json_object *error;   /* when non-NULL the entry is invalid: a complete
                             error response to send (owned ref); method/params unset */
};

/* One parsed line: a single request or a batch. */
struct rpc_message {
    bool batch;
    size_t n_calls;
    struct rpc_call *calls;
    /* When non-NULL the whole line is rejected (parse error, empty batch, batch
     * too large, not an object/array): a complete error response to send, and
     * n_calls is 0. */
    json_object *error;
};

/* Parses one line (without its '\n'). Always fills *ret (on -ENOMEM it is zeroed). */
int rpc_parse(const char *line, size_t len, struct rpc_message *ret);
/* The same with a json-c tokener kept between lines by the caller (*tok: NULL at first, made
 * here; json_tokener_free() it once done, when not NULL). One allocation less per line; after a
 * line over RPC_TOKENER_KEEP bytes it is freed (its buffer grew to the line's longest string). */
int rpc_parse_with(json_tokener **tok, const char *line, size_t len, struct rpc_message *ret);
#define RPC_TOKENER_KEEP (64 * 1024)
void rpc_message_done(struct rpc_message *m);
/* Releases one call's references and zeroes it. To keep a call beyond its
 * message (concurrent dispatch), copy the struct out and zero the slot in
 * m->calls; rpc_message_done() skips zeroed slots. */
void rpc_call_done(struct rpc_call *c);

/* Response builders. `id` is borrowed (a new ref is taken; NULL means JSON null).
 * `result` and `data` are taken over. */
json_object *rpc_result_new(json_object *id, json_object *result);
json_object *rpc_error_new(json_object *id, int code, const char *message, json_object *data);
/* json_object_object_add() of a member named by a string literal (or any string that
 * outlives o): json-c keeps the pointer instead of a copy of the name. */
int rpc_add_literal(json_object *o, const char *literal, json_object *v);
/* Error with data {"reason": reason} (sandboxd's own codes always carry one). */
json_object *rpc_error_reason_new(json_object *id, int code, const char *reason);
/* Invalid params: data {"reason": ..., "param": name}. */
json_object *rpc_invalid_params_new(json_object *id, const char *param, const char *reason);
/* Server-to-client notification; params taken over. */
json_object *rpc_notification_new(const char *method, json_object *params);

/* The exec.output notification of a streaming sandbox.exec (docs/protocol.md):
 * params {"request_id": request_id, "stream": stream, "data"|"data_b64": bytes},
 * text when the bytes are valid UTF-8, base64 otherwise. request_id is
 * borrowed (NULL: JSON null). */
json_object *rpc_exec_output_new(json_object *request_id, const char *stream, const void *p,
                                 size_t n);

/* Serialises o as compact JSON (the form of every line sent) into json-c's buffer, which o
 * owns: the text stays valid while o lives and is not serialised again or changed.
 * *ret_len: its length (without the terminating NUL). NULL without memory. */
const char *rpc_serialise(json_object *o, size_t *ret_len);
/* Writes o as one line into a new buffer (*ret_text, freed by the caller): the bytes
 * rpc_serialise() gives, *ret_len of them, then '\n' and a NUL. Written directly (strings
 * escaped as json-c escapes them, integers without printf); doubles and values with a
 * serialiser of their own (which json-c lets set only with userdata here: b64.c's plain
 * strings are told apart) are written by json-c. hint: rpc_size_hint(o), the first size
 * of the buffer. 0 or -ENOMEM. o is only read (a double's text is cached in it). */
int rpc_text_new(json_object *o, size_t hint, char **ret_text, size_t *ret_len);
/* Serialises o as one line: compact JSON plus '\n', a copy the caller frees. */
char *rpc_to_line(json_object *o, size_t *ret_len);
/* A lower bound of the length of o serialised: the bytes of its strings (each escape
 * makes the text longer) and a few per value. Cheap: it walks the values, never the
 * strings' bytes. Enough to tell a reply worth serialising off the loop. */
size_t rpc_size_hint(json_object *o);
/* A client's request {"jsonrpc", "id", "method", "params" (left out when NULL; taken over)}
 * as one line, as rpc_to_line(). NULL without memory. */
char *rpc_request_line(int64_t id, const char *method, json_object *params, size_t *ret_len);
