/* Params of the volume methods (volume.create, volume.delete; volume.list takes none) and the
 * "volumes" of sandbox.create (params-mount.c: names, paths, mounts; params-volume.c: the
 * methods). Pure, as params.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "params.h"

/* A volume name: [a-z0-9-], 1..PARAMS_VOLUME_NAME_MAX bytes. */
#define PARAMS_VOLUME_NAME_MAX 32
/* size_gb: 1..PARAMS_VOLUME_SIZE_GB_MAX (the daemon's per-uid cap applies on top). */
#define PARAMS_VOLUME_SIZE_GB_MAX 1024
/* Volumes one sandbox.create may mount. */
#define PARAMS_VOLUMES_MAX 8
/* A mount path inside the sandbox: absolute, components of [A-Za-z0-9._-] (none "." or ".."),
 * no empty component, no trailing '/', not "/", at most PARAMS_VOLUME_PATH_MAX bytes. Commas,
 * '=' and blanks would break Proxmox's mount point option string. */
#define PARAMS_VOLUME_PATH_MAX 255

/* volume.create */
struct params_volume_create {
    char name[PARAMS_VOLUME_NAME_MAX + 1];
    int64_t size_gb;
};

/* volume.delete */
struct params_volume_name {
    char name[PARAMS_VOLUME_NAME_MAX + 1];
};

/* sandbox.attach {id, volume, path, read_only?} and sandbox.detach {id, volume} (path unused) */
struct params_sandbox_attach {
    char id[PARAMS_ID_MAX + 1];
    char volume[PARAMS_VOLUME_NAME_MAX + 1];
    char path[PARAMS_VOLUME_PATH_MAX + 1];
    bool read_only;
};

/* One entry of sandbox.create's "volumes": {name, path, read_only?}. */
struct params_volume_mount {
    char name[PARAMS_VOLUME_NAME_MAX + 1];
    char path[PARAMS_VOLUME_PATH_MAX + 1];
    bool read_only;
};

bool params_volume_name_valid(const char *name);
/* The string member `name` of obj, valid by ok, copied into ret (at most max bytes); else
 * -EINVAL with err naming `where` ("missing", "must be a string", or rule). */
int params_volume_str(json_object *obj, const char *name, const char *where, size_t max, char *ret,
                      bool (*ok)(const char *), const char *rule, struct params_error *err);
bool params_volume_path_valid(const char *path);

/* "volumes" of params (absent: *ret_n 0): an array of at most PARAMS_VOLUMES_MAX mounts, no
 * name and no path twice. 0, or -EINVAL with err naming "volumes[i].<field>". */
int params_volume_mounts(json_object *params, struct params_volume_mount ret[PARAMS_VOLUMES_MAX],
                         size_t *ret_n, struct params_error *err);

extern const struct params_spec params_volume_create_spec;
extern const struct params_spec params_volume_name_spec;
extern const struct params_spec params_sandbox_attach_spec;
extern const struct params_spec params_sandbox_detach_spec;
