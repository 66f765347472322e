/* The parameter readers params.c is made of, shared with the params-*.c files of further
 * methods. Contracts as in params.c: 0 or -EINVAL with err filled (or -ENOMEM); *ret is
 * written only when the parameter is present and valid. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "params.h"

int params_fail(struct params_error *err, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Checks one member of an object of string pairs under name (val not yet known to be a
 * string); *total counts the bytes of the pairs so far for kinds that limit them to
 * max_bytes. */
typedef int params_pair_check(const char *name, const char *key, json_object *val, size_t max_bytes,
                              size_t *total, struct params_error *err);
/* An optional object of at most max string pairs (more: "more than <max> <noun>"), each
 * passed by check, into *ret in the object's order; *ret untouched when absent. */
int params_pairs(json_object *params, const char *name, int max, size_t max_bytes, const char *noun,
                 params_pair_check *check, struct params_kv_list *ret, struct params_error *err);
/* "env": an object of at most max variables ([A-Za-z_][A-Za-z0-9_]*, at most
 * PARAMS_ENV_NAME_MAX bytes each) whose names and values sum to at most max_bytes, in the
 * order given; *ret untouched when absent. Errors name the variable, never its value. */
int params_env(json_object *params, int max, size_t max_bytes, struct params_kv_list *ret,
               struct params_error *err);

/* "user" (sandbox.exec, process.start): a user name of the POSIX portable set
 * ([A-Za-z0-9._-], not starting with '-', not all digits, 1..EXEC_USER_MAX bytes) or a uid
 * 0..EXEC_UID_MAX (an integer, or a string of digits), written to ret as given (a uid in
 * decimal); ret untouched when absent. */
int params_user(json_object *params, char ret[static EXEC_USER_MAX + 1], struct params_error *err);

/* params is an object (or absent) holding only allowed names (NULL-terminated). */
int params_check_object(json_object *params, const char *const *allowed, struct params_error *err);
int params_int(json_object *params, const char *name, bool required, int64_t min, int64_t max,
               int64_t *ret, struct params_error *err);
int params_bool(json_object *params, const char *name, bool required, bool *ret,
                struct params_error *err);
/* "id": [a-z0-9-]{1,64}, required. */
int params_id(json_object *params, char ret[PARAMS_ID_MAX + 1], struct params_error *err);
/* An absolute path of at most PARAMS_PATH_MAX bytes, strdup()ed (NULL when absent). */
int params_path(json_object *params, const char *name, bool required, char **ret,
                struct params_error *err);
/* "mode": an octal string of 3 to 5 digits, at most 07777. */
int params_mode(json_object *params, unsigned *ret, struct params_error *err);

/* One parameter of a params struct that params_read() reads with the reader of its kind. */
enum params_field_kind {
    PARAMS_F_ID,    /* params_id() into char[PARAMS_ID_MAX + 1] */
    PARAMS_F_BOOL,  /* params_bool() into bool */
    PARAMS_F_INT64, /* params_int(min, max) into int64_t */
    PARAMS_F_INT,   /* params_int(min, max) into int: -1 when absent */
    PARAMS_F_FD,    /* a descriptor index 0..PARAMS_FD_INDEX_MAX into int64_t: -1 when absent */
    PARAMS_F_PATH,  /* params_path() into char * (strdup()ed; the caller's done() frees it) */
    PARAMS_F_MODE,  /* params_mode() into unsigned */
};

struct params_field {
    const char *name;
    enum params_field_kind kind;
    bool required;
    int64_t min, max; /* PARAMS_F_INT64, PARAMS_F_INT */
    size_t offset;    /* of the member in the params struct */
};

/* A field read under the JSON name `name`, or (PARAMS_FIELD) under the member's own name. */
#define PARAMS_FIELD_NAMED(type, member, name, kind, required, min, max)                           \
    {                                                                                              \
        name, kind, required, min, max, offsetof(type, member)                                     \
    }
#define PARAMS_FIELD(type, member, kind, required, min, max)                                       \
    PARAMS_FIELD_NAMED(type, member, #member, kind, required, min, max)
#define PARAMS_F_ID_OF(type) PARAMS_FIELD(type, id, PARAMS_F_ID, true, 0, 0)
#define PARAMS_F_BOOL_OF(type, member, required)                                                   \
    PARAMS_FIELD(type, member, PARAMS_F_BOOL, required, 0, 0)
#define PARAMS_F_INT64_OF(type, member, required, min, max)                                        \
    PARAMS_FIELD(type, member, PARAMS_F_INT64, required, min, max)
#define PARAMS_F_INT_OF(type, member, max) PARAMS_FIELD(type, member, PARAMS_F_INT, false, 1, max)
#define PARAMS_F_FD_OF(type, member) PARAMS_FIELD(type, member, PARAMS_F_FD, false, 0, 0)
#define PARAMS_F_PATH_OF(type, member, required)                                                   \
    PARAMS_FIELD(type, member, PARAMS_F_PATH, required, 0, 0)

/* Checks that params holds only allowed names (allowed NULL: no check), then reads
 * fields[0..n) into the struct at p, in order, stopping at the first error. */
int params_read(json_object *params, const char *const *allowed, const struct params_field *fields,
                size_t n, void *p, struct params_error *err);

/* params_read() of a kind that takes no names but those of its n fields (at most
 * PARAMS_TABLE_FIELDS_MAX). */
#define PARAMS_TABLE_FIELDS_MAX 8
int params_read_fields(json_object *params, const struct params_field *fields, size_t n, void *p,
                       struct params_error *err);

/* Reads params into the struct at p, which holds zeroes; it sets its defaults itself. On an
 * error it may leave p partly filled: params_spec_parse() releases that. */
typedef int params_fill_fn(json_object *params, void *p, struct params_error *err);

/* The parse() of every params kind: zeroes the spec->size bytes at ret and fills them with
 * fill; on an error releases what fill took (spec->done) and leaves them zeroed. */
int params_spec_parse(const struct params_spec *spec, params_fill_fn *fill, json_object *params,
                      void *ret, struct params_error *err);

/* Defines name##_spec (declared in the public header) for the struct `type`, read by the
 * params_fill_fn name##_fill and released by done_any (a void * function, or NULL when the
 * struct owns nothing). */
#define PARAMS_SPEC(name, type, done_any)                                                          \
    static int name##_parse(json_object *params, void *ret, struct params_error *err)              \
    {                                                                                              \
        return params_spec_parse(&name##_spec, name##_fill, params, ret, err);                     \
    }                                                                                              \
    const struct params_spec name##_spec = {sizeof(type), name##_parse, done_any}

/* name##_done_any(void *p), the done() of a spec, calling the typed name##_done(). */
#define PARAMS_DONE_ANY(name)                                                                      \
    static void name##_done_any(void *p)                                                           \
    {                                                                                              \
        name##_done(p);                                                                            \
    }

/* PARAMS_SPEC for a struct that owns memory, released by the typed name##_done(). */
#define PARAMS_SPEC_DONE(name, type)                                                               \
    PARAMS_DONE_ANY(name)                                                                          \
    PARAMS_SPEC(name, type, name##_done_any)

/* PARAMS_SPEC of a kind read by params_read_fields() from its table name##_fields alone, over
 * the defaults the variable arguments give (designators: .member = value). */
#define PARAMS_TABLE_SPEC(name, type, done_any, ...)                                               \
    _Static_assert(ELEMENTSOF(name##_fields) <= PARAMS_TABLE_FIELDS_MAX, "too many fields");       \
    static int name##_fill(json_object *params, void *p, struct params_error *err)                 \
    {                                                                                              \
        *(type *)p = (type){__VA_ARGS__};                                                          \
        return params_read_fields(params, name##_fields, ELEMENTSOF(name##_fields), p, err);       \
    }                                                                                              \
    PARAMS_SPEC(name, type, done_any)
