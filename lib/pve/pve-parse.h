/* Proxmox VE API responses: pure parsing (no loop, no I/O); the errors are pve-error.h's.
 * Proxmox facts this relies on: the error text lives in the HTTP reason phrase; the body is
 * {"data":null[,"errors":{..}]} on older servers (libpve-http-server-perl < 5.2) and also has
 * "message" on newer ones; vmids arrive as strings or numbers; tasks ending "WARNINGS: n"
 * succeeded (pve-common UPID.pm). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pve-error.h"

#define PVE_VMID_MIN 100u
#define PVE_VMID_MAX 999999999u
#define PVE_NET_KEYS_MAX 32 /* keys in one netN property string */
#define PVE_LIST_MAX 100000 /* entries accepted in one listing */

/* Parses a 2xx body {"data":...}; *ret_data is a new reference to "data" (NULL for JSON null).
 * Returns 0, or -EBADMSG when the body is not a JSON object with "data". */
int pve_parse_data(const char *body, size_t body_len, struct json_object **ret_data);

/* A vmid given as JSON number or decimal string, in [PVE_VMID_MIN, PVE_VMID_MAX].
 * Returns 0 or -EINVAL. */
int pve_parse_vmid(struct json_object *v, uint32_t *ret_vmid);
int pve_parse_vmid_string(const char *s, uint32_t *ret_vmid);

/* A pve-manager version, as GET /version and GET /nodes/{node}/version give it in "version":
 * "8.1.4" (a missing patch level is 0; anything after the numbers, e.g. "~beta1", is
 * ignored). Returns 0 or -EINVAL. */
struct pve_version {
    unsigned major, minor, patch;
};
int pve_version_parse(const char *s, struct pve_version *ret_version);
/* True when v is major.minor.patch or later. */
bool pve_version_at_least(const struct pve_version *v, unsigned major, unsigned minor,
                          unsigned patch);

/* UPID:node:pid:pstart:starttime:type:id:user: (pve-common UPID.pm; 8 or 9 hex pstart). */
struct pve_upid {
    char node[64];
    uint32_t pid;
    uint64_t pstart;
    uint32_t starttime;
    char type[64];
    char id[64]; /* may be empty */
    char user[192];
};
int pve_upid_parse(const char *s, struct pve_upid *ret_upid); /* 0 or -EINVAL */

struct pve_task_status {
    bool running;                     /* status == "running" */
    bool success;                     /* stopped and exitstatus "OK" or "WARNINGS: n" */
    unsigned warnings;                /* n of "WARNINGS: n" */
    char exitstatus[PVE_MESSAGE_MAX]; /* "" while running */
};
/* From GET .../tasks/{upid}/status "data". Returns 0 or -EBADMSG. */
int pve_task_status_parse(struct json_object *data, struct pve_task_status *ret_status);
/* Classifies an exitstatus string: 1 success, 0 failure; *ret_warnings for WARNINGS: n. */
int pve_task_exitstatus_ok(const char *exitstatus, unsigned *ret_warnings);

/* A container's run state. Only GET .../status/current tells it: the status of a listing
 * (/pools/{id} members, /cluster/resources) comes from pvestatd's cache, seconds stale, or
 * "unknown" when the cache has no entry (purged, or emptied by a pve-cluster restart). */
enum pve_ct_state {
    PVE_CT_UNKNOWN,
    PVE_CT_STOPPED,
    PVE_CT_RUNNING,
};
/* "running" / "stopped"; anything else (NULL, "unknown") is PVE_CT_UNKNOWN. */
enum pve_ct_state pve_ct_state_from(const char *status);
/* From GET .../status/current "data" ({"status":"running",...}). Returns 0 or -EBADMSG (not
 * an object, no status string, or a status other than running / stopped). */
int pve_ct_status_parse(struct json_object *data, enum pve_ct_state *ret_state);

/* GET /cluster/nextid: "100" or 100. */
int pve_nextid_parse(struct json_object *data, uint32_t *ret_vmid);

/* GET .../interfaces: data may be NULL (stopped / no IP yet). Picks the first global
 * unicast IPv4 on an interface other than "lo" (from "ip-addresses", else "inet").
 * Returns 1 and *ret_ip (malloc'ed dotted quad) when found, 0 when none yet, -EBADMSG. */
int pve_interfaces_pick_ipv4(struct json_object *data, char **ret_ip);

/* netN property strings ("name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:..,ip=dhcp,type=veth").
 * Order of keys is kept; hwaddr is kept as is. */
struct pve_net {
    size_t n;
    char *key[PVE_NET_KEYS_MAX];
    char *value[PVE_NET_KEYS_MAX];
};
int pve_net_parse(const char *s, struct pve_net **ret_net); /* 0, -EINVAL, -E2BIG, -ENOMEM */
const char *pve_net_get(const struct pve_net *net, const char *key);      /* NULL when absent */
int pve_net_set(struct pve_net *net, const char *key, const char *value); /* adds at the end */
int pve_net_print(const struct pve_net *net, char **ret_s);
struct pve_net *pve_net_free(struct pve_net *net);

/* description comes back with a trailing "\n" per line: returns a copy without the final
 * newline. Returns 0 or -ENOMEM; *ret is "" for a NULL input. */
int pve_description_normalize(const char *s, char **ret_s);

/* The size of a disk property string (rootfs, mpN: "local-lvm:vm-100-disk-0,size=8G"): the
 * value of its "size" key, a decimal number with an optional fraction and an optional unit
 * K, M, G or T, or KiB, MiB, GiB or TiB (powers of 1024 either way); without a unit the number is
 * bytes (how Proxmox prints a size that is no whole number of KiB). Fraction digits past the sixth
 * are ignored. Returns 0 and *ret_bytes, -ENOENT when there is no size key, -EINVAL when s is NULL
 * or the value is malformed, -ERANGE when it does not fit 64 bits. */
int pve_parse_rootfs_size(const char *s, uint64_t *ret_bytes);
/* The same in GiB, rounded up; fallback when s is NULL or its size is missing or malformed. */
uint64_t pve_rootfs_size_gb(const char *s, uint64_t fallback);

/* Firewall rules of GET .../firewall/rules. */
struct pve_fw_rule {
    int pos;
    char *type;    /* in|out|forward|group */
    char *action;  /* ACCEPT|DROP|REJECT or a group name */
    char *comment; /* may be NULL */
    char *dest;    /* may be NULL */
    bool enable;
};
struct pve_fw_rules {
    size_t n;
    struct pve_fw_rule *v;
    char *digest; /* list digest, may be NULL */
};
int pve_fw_rules_parse(struct json_object *data, struct pve_fw_rules **ret_rules);
/* Finds the rule of type "group" whose action is group by scanning; returns its pos
 * (>= 0) or -ENOENT. Never assumes a position. */
int pve_fw_rules_find_group(const struct pve_fw_rules *rules, const char *group);
struct pve_fw_rules *pve_fw_rules_free(struct pve_fw_rules *rules);

/* Entries of /cluster/resources?type=vm, /pools/{id} members, /nodes/{n}/lxc. */
struct pve_vm {
    uint32_t vmid;
    char *type;   /* "lxc", "qemu" (may be NULL) */
    char *node;   /* may be NULL */
    char *status; /* may be NULL */
    char *name;   /* may be NULL */
    char *lock;   /* NULL when unlocked */
    char *pool;   /* NULL when not in a pool (pool listing: the pool's id) */
    char *tags;   /* raw "a;b", may be NULL */
    bool template;
};
struct pve_vm_list {
    size_t n;
    struct pve_vm *v;
};
/* data: an array of entries, or a pool object {"members":[..],"poolid":..}, or an array
 * of pools (GET /pools?poolid=X). Entries without a valid vmid (storage) are skipped.
 * Returns 0, -EBADMSG, -E2BIG, -ENOMEM. */
int pve_vm_list_parse(struct json_object *data, struct pve_vm_list **ret_list);
struct pve_vm_list *pve_vm_list_free(struct pve_vm_list *list);
const struct pve_vm *pve_vm_list_find(const struct pve_vm_list *list, uint32_t vmid);

/* Form-encodes a flat JSON object for a Proxmox request: strings as is, integers and
 * doubles in decimal, booleans as 0/1; null values are skipped; nested objects/arrays are
 * -EINVAL. Keys sorted for reproducibility. *ret_s is "" for NULL/empty params. */
int pve_form_encode(struct json_object *params, char **ret_s);

/* A mount point property string (mpN): "<volume>,mp=<path>[,ro=1][,size=<size>]..." (pve-mp.c).
 * Allocating one takes "<storage>:<size in GiB>" as its volume. */
struct pve_mp {
    char *volume; /* "local-lvm:vm-205-disk-1" */
    char *path;   /* mp=, the path inside the container */
    bool read_only;
    uint64_t size_gb; /* size= in GiB rounded up; 0 when absent */
};
/* 0, -EINVAL (no volume, no mp=, a malformed size or ro), -ENOMEM. */
int pve_mp_parse(const char *s, struct pve_mp *ret);
void pve_mp_done(struct pve_mp *mp);
/* The value that allocates a new volume of size_gb GiB on storage mounted at path
 * ("local-lvm:4,mp=/data[,ro=1]"), or (size_gb 0) mounts the existing volume storage names.
 * -EINVAL for a storage or path with ',', '=' or a blank, or a path not absolute. */
int pve_mp_format(const char *storage, uint64_t size_gb, const char *path, bool read_only,
                  char **ret_s);
