/* What volume.c shares with volume-attach.c: the volume calls' queue and its helpers. Loop
 * thread only. */
#pragma once

#include <json-c/json.h>

#include "config.h"
#include "marker.h"
#include "pve.h"
#include "volume.h"

#define VOLUME_HOLDER_CANDIDATES_MAX 8

enum vol_kind { VOL_CREATE, VOL_LIST, VOL_DELETE, VOL_TAKE_BACK, VOL_ATTACH };

struct vol_op {
    enum vol_kind kind;
    char name[ID_MAX + 1];
    unsigned size_gb;
    uid_t uid;
    bool admin;
    bool cleaned;              /* the holder's unusedN were destroyed once for this call */
    bool detached;             /* delete: the mount point and its line are gone */
    bool cleaning;             /* the write running destroys the holder's unusedN */
    bool line_written;         /* take back: the holder's line of the volume is written */
    bool detach;               /* take back: for sandbox.detach (its metric) */
    const char *param;         /* attach: the param an error names ("volumes", "volume") */
    struct marker_volume from; /* take back: the volume's line in the container src */
    uint32_t src;
    char src_node[CONFIG_NODE_NAME_MAX + 1];
    uid_t deleted_owner; /* delete: the volume's owner and size, for the audit record */
    unsigned deleted_size;
    /* attach (volume-attach.c): the mount, into container src on src_node; the phase done,
     * the holder's key and mount point value, the key chosen in src */
    struct engine_volume_mount mount;
    unsigned attach_phase;
    unsigned hold_mp, dst_mp;
    char hold_val[ENGINE_VOLUME_PATH_MAX + 2 * ID_MAX + 64];
    engine_json_cb cb;
    void *userdata;
    struct vol_op *next;
};

struct volumes {
    struct engine *e;
    uint32_t holder; /* 0 until found or made */
    char node[CONFIG_NODE_NAME_MAX + 1];
    struct vol_op *head, *running;
    unsigned queued; /* head's ops and the running one */
    struct pve_call *call;
    uint32_t cands[VOLUME_HOLDER_CANDIDATES_MAX];
    size_t n_cands, i_cand;
    /* an attach's part, once its holder's configuration is read (set by volume-attach.c) */
    void (*attach_act)(struct volumes *v, const struct marker_volume *mv, size_t n,
                       json_object *conf);
    /* a list's part (volume-list.c): the lines to show, by name; conf (the holder's) when
     * some are attached, else NULL; list_free frees a scan left running by a stop */
    void (*list_act)(struct volumes *v, const struct marker_volume *mv, size_t n,
                     json_object *conf);
    void (*list_free)(struct volumes *v);
    struct vol_scan *scan;
};

/* The running call ends: its callback, then the next call. */
void vol_finish(struct volumes *v, const struct engine_error *err, json_object *result);
/* ... with an error of kind (ENGINE_E_STATE: state "attached"). */
void vol_fail(struct volumes *v, enum engine_err_kind kind, int error, const char *msg,
              const char *param);
void vol_fail_pve(struct volumes *v, const struct pve_result *res);
/* A string of a configuration (NULL when absent). */
const char *vol_conf_str(json_object *conf, const char *key);
/* {"name", "size_gb", "owner_uid", "attached_to": null} */
json_object *vol_json(const struct marker_volume *mv);
const struct marker_volume *vol_find(const struct marker_volume *mv, size_t n, const char *name);
/* The move of the running attach or take back ended (pve_move_volume()'s callback): the call
 * ends with {"volume": {...}}, or Proxmox's error. */
void vol_on_moved(const struct pve_result *res, void *userdata);
/* Reads the holder's configuration again; then the running call acts on it. */
void vol_read_config(struct volumes *v);
/* Queues a call (a copy of tmpl): 0, or ENGINE_E_BUSY past the queue's bounds. */
int vol_enqueue(struct engine *e, const struct vol_op *tmpl, struct engine_error *ret_err);
/* The engine's volumes (made on first use), NULL on ENOMEM. */
struct volumes *vol_get(struct engine *e);
