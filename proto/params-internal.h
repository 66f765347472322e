/* The parameter readers params.c is made of, shared with the params-*.c files of further
 * methods. Contracts as in params.c: 0 or -EINVAL with err filled (or -ENOMEM); *ret is
 * written only when the parameter is present and valid. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto/params.h"

int params_fail(struct params_error *err, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
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
