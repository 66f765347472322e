/* Proxmox VE errors: classification by status and text, and the error objects built from an
 * HTTP response or a task's exit status (pve-error.h). No I/O. */
#include "macro.h"

#include "pve-error.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *const kind_names[_PVE_ERR_KIND_MAX] = {
    [PVE_ERR_OTHER] = "other",
    [PVE_ERR_LOCKED] = "locked",
    [PVE_ERR_LOCK_TIMEOUT] = "lock_timeout",
    [PVE_ERR_EXISTS] = "exists",
    [PVE_ERR_NOT_FOUND] = "not_found",
    [PVE_ERR_RUNNING] = "running",
    [PVE_ERR_NOT_RUNNING] = "not_running",
    [PVE_ERR_NO_QUORUM] = "no_quorum",
    [PVE_ERR_PERMISSION] = "permission",
    [PVE_ERR_AUTH] = "auth",
    [PVE_ERR_PARAM] = "param",
    [PVE_ERR_NOT_IMPLEMENTED] = "not_implemented",
    [PVE_ERR_CONNECTION] = "connection",
    [PVE_ERR_SERVER] = "server",
    [PVE_ERR_TASK] = "task",
};

const char *pve_err_kind_to_string(enum pve_err_kind k)
{
    if ((unsigned)k >= _PVE_ERR_KIND_MAX)
        return "invalid";
    assert(kind_names[k]); /* every kind has a name */
    return kind_names[k];
}

/* ---- classification ---- */

static bool has(const char *s, const char *needle)
{
    return s && strcasestr(s, needle);
}

static enum pve_err_kind classify_text(const char *m)
{
    if (!m || !*m)
        return PVE_ERR_OTHER;
    if (has(m, " is locked ("))
        return PVE_ERR_LOCKED;
    if (has(m, "got timeout") || has(m, "got lock request timeout") || has(m, "got lock timeout"))
        return PVE_ERR_LOCK_TIMEOUT;
    if (has(m, "no quorum"))
        return PVE_ERR_NO_QUORUM;
    if (has(m, "already exists"))
        return PVE_ERR_EXISTS;
    if (has(m, "does not exist") || has(m, "no such task") || has(m, "no such ipset") ||
        has(m, "no such cluster node") || has(m, "no rule at position"))
        return PVE_ERR_NOT_FOUND;
    if (has(m, "already running") || has(m, "container is running"))
        return PVE_ERR_RUNNING;
    if (has(m, " not running"))
        return PVE_ERR_NOT_RUNNING;
    return PVE_ERR_OTHER;
}

enum pve_err_kind pve_classify(int status, const char *message)
{
    enum pve_err_kind k;

    if (status == 401)
        return PVE_ERR_AUTH;
    if (status == 403)
        return PVE_ERR_PERMISSION;
    if (status == 501)
        return PVE_ERR_NOT_IMPLEMENTED;
    if (status >= 595 && status <= 599)
        return PVE_ERR_CONNECTION;
    k = classify_text(message);
    if (k != PVE_ERR_OTHER)
        return k;
    if (status == 400)
        return PVE_ERR_PARAM;
    if (status >= 500 && status <= 599)
        return PVE_ERR_SERVER;
    if (status == 0)
        return PVE_ERR_TASK;
    return PVE_ERR_OTHER;
}

/* 5xx texts that will not change by asking again. */
static const char *const permanent_texts[] = {
    "protection mode",
    "not allowed",
    "is not available",
    "unable to shrink",
    "already at specified size",
    "unable to get any free vmid",
    "no options specified",
    "can't clone",
    "unable to clone",
    "still in use",
    "you can't start a ct if it's a template",
    "unable to delete required option",
    "used in ha resources",
    "only possible from a snapshot",
    "cannot do full clones",
};

bool pve_error_transient(const struct pve_error *e)
{
    if (!e)
        return false;
    switch (e->kind) {
    case PVE_ERR_LOCKED:
    case PVE_ERR_LOCK_TIMEOUT:
    case PVE_ERR_NO_QUORUM:
    case PVE_ERR_CONNECTION:
        return true;
    case PVE_ERR_SERVER:
        for (size_t i = 0; i < ELEMENTSOF(permanent_texts); i++)
            if (has(e->message, permanent_texts[i]))
                return false;
        return true;
    default:
        return false;
    }
}

bool pve_errno_transient(int r)
{
    return r == -ETIMEDOUT || r == -ECONNREFUSED || r == -EHOSTUNREACH || r == -ECONNRESET ||
           r == -EPROTO;
}

/* ---- errors ---- */

struct pve_error *pve_error_free(struct pve_error *e)
{
    if (!e)
        return NULL;
    FREE_MANY(e->message, e->lock, e->upid);
    if (e->errors)
        json_object_put(e->errors);
    free(e);
    return NULL;
}

static char *strip_dup(const char *s, size_t max)
{
    size_t l;

    if (!s)
        s = "";
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    l = strlen(s);
    while (l > 0 && (s[l - 1] == '\n' || s[l - 1] == '\r' || s[l - 1] == ' ' || s[l - 1] == '\t'))
        l--;
    return strndup(s, MIN(l, max));
}

/* Classifies e and takes the lock name out of a "locked" message; e->message is set (a
 * pve_error's message is never NULL). */
static int error_finish(struct pve_error *e)
{
    const char *p;

    assert(e->message);
    e->kind = pve_classify(e->http_status, e->message);
    if (e->kind == PVE_ERR_LOCKED && (p = strcasestr(e->message, " is locked ("))) {
        p += strlen(" is locked (");
        const char *q = strchr(p, ')');
        if (q) {
            e->lock = strndup(p, (size_t)(q - p));
            if (!e->lock)
                return -ENOMEM;
        }
    }
    return 0;
}

static int append(char **s, const char *add)
{
    char *n = NULL;

    if (asprintf(&n, "%s%s", *s, add) < 0)
        return -ENOMEM;
    free(*s);
    *s = n;
    return 0;
}

int pve_error_from_http(long status, const char *reason, const char *body, size_t body_len,
                        struct pve_error **ret_error)
{
    struct pve_error *e;
    struct json_object *root = NULL, *v;
    int r = -ENOMEM;

    if (!ret_error)
        return -EINVAL;
    e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->http_status = (int)status;

    if (body && body_len > 0) {
        struct json_tokener *tok = json_tokener_new();
        if (!tok)
            goto fail;
        root = json_tokener_parse_ex(tok, body, (int)MIN(body_len, (size_t)INT32_MAX));
        json_tokener_free(tok);
        if (root && !json_object_is_type(root, json_type_object)) {
            json_object_put(root);
            root = NULL;
        }
    }
    if (root && json_object_object_get_ex(root, "message", &v) &&
        json_object_is_type(v, json_type_string) && json_object_get_string_len(v) > 0)
        e->message = strip_dup(json_object_get_string(v), PVE_MESSAGE_MAX);
    else
        e->message = strip_dup(reason, PVE_MESSAGE_MAX);
    if (!e->message)
        goto fail;
    if (!*e->message) {
        free(e->message);
        if (asprintf(&e->message, "HTTP %ld", status) < 0) {
            e->message = NULL;
            goto fail;
        }
    }
    if (root && json_object_object_get_ex(root, "errors", &v) &&
        json_object_is_type(v, json_type_object) && json_object_object_length(v) > 0) {
        e->errors = json_object_get(v);
        /* "Parameter verification failed." says nothing by itself: add "param: msg". */
        const char *sep = " ";
        json_object_object_foreach(v, key, val)
        {
            _cleanup_free_ char *m = strip_dup(json_object_get_string(val), PVE_MESSAGE_MAX);
            _cleanup_free_ char *part = NULL;
            if (!m || asprintf(&part, "%s%s: %s", sep, key, m) < 0)
                goto fail;
            if (strstr(e->message, m))
                continue;
            if (strlen(e->message) + strlen(part) > PVE_MESSAGE_MAX)
                break;
            if (append(&e->message, part) < 0)
                goto fail;
            sep = "; ";
        }
    }
    if (root)
        json_object_put(root);
    root = NULL;
    r = error_finish(e);
    if (r < 0)
        goto fail;
    *ret_error = e;
    return 0;
fail:
    if (root)
        json_object_put(root);
    pve_error_free(e);
    return r;
}

int pve_error_from_task(const char *exitstatus, const char *upid, struct pve_error **ret_error)
{
    struct pve_error *e = calloc(1, sizeof(*e));
    int r;

    if (!e)
        return -ENOMEM;
    e->message =
        strip_dup(exitstatus && *exitstatus ? exitstatus : "unexpected status", PVE_MESSAGE_MAX);
    if (!e->message || (upid && !(e->upid = strdup(upid)))) {
        pve_error_free(e);
        return -ENOMEM;
    }
    r = error_finish(e);
    if (r < 0) {
        pve_error_free(e);
        return r;
    }
    *ret_error = e;
    return 0;
}

struct pve_error *pve_error_dup(const struct pve_error *src)
{
    struct pve_error *e;

    if (!src)
        return NULL;
    e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->http_status = src->http_status;
    e->kind = src->kind;
    e->message = strdup(src->message ? src->message : "");
    if (!e->message || (src->lock && !(e->lock = strdup(src->lock))) ||
        (src->upid && !(e->upid = strdup(src->upid))))
        return pve_error_free(e);
    if (src->errors)
        e->errors = json_object_get(src->errors);
    return e;
}
