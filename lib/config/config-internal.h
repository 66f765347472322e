/* What config.c, config-templates.c and config-util.c share. Pure parsing. */
#pragma once

#include "config.h"

/* A malloc'ed message into *ret_error (when NULL: none); returns -EINVAL. */
int config_fail(char **ret_error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int config_parse_uint(const char *v, unsigned long long *ret);
/* Comma- or space-separated words, at most max (-E2BIG past it). */
int config_split_list(const char *v, size_t max, char ***ret, size_t *ret_n);
void config_free_list(char **l, size_t n);

/* A key of [templates] or [pool]: 0 when set, 1 when the section is not one of them,
 * negative errno (message in *ret_error for -EINVAL). */
int config_dynamic_key(struct config *c, const char *section, const char *name, const char *value,
                       char **ret_error);
/* [proxmox] template: the template named CONFIG_DEFAULT_TEMPLATE_NAME. */
int config_template_add(struct config *c, const char *name, uint32_t vmid,
                        struct config_template_copy *copies, size_t n_copies, char **ret_error);
/* "VMID" or "VMID@node,VMID@node,...": the first vmid and the copies (NULL, 0 for one plain
 * vmid). -EINVAL with a message in *ret_error (malloc'ed) for bad text. */
int config_template_spec_parse(const char *v, uint32_t *ret_vmid,
                               struct config_template_copy **ret_copies, size_t *ret_n,
                               char **ret_error);
void config_template_copies_free(struct config_template_copy *copies, size_t n);
int config_templates_validate(const struct config *c, char **ret_error);
void config_templates_done(struct config *c);
