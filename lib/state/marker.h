/* The ownership marker sandboxd keeps in each container's Proxmox
 * `description`, so that ownership and leases can be rebuilt from Proxmox
 * alone. Pure string code: no loop, no I/O.
 *
 * The marker is one line of the description, anywhere among human text:
 *
 *   sandboxd:v1 instance=<id> sandbox=<id> owner=<uid> created=<unix>
 *       expires=<unix> [key=<sha256 hex>] [params=<sha256 hex>] [hostkey=<sha256 hex>]
 *       [template=<name>] [pool=1] [tmpl=1 [pub=1 | repl=1]] [paused=1] check=<8 hex>
 *
 * A template made from a sandbox (template.create) carries a marker too, with tmpl=1:
 * sandbox= is the sandbox it was made from, owner= its owner, template= the template's own
 * name, hostkey= the pinned host key its clones start with, pub=1 once published.
 * A replica of a configured template (its NAME.replicas, lib/engine/replica.c) carries
 * tmpl=1 repl=1: template= is the configured template it copies, sandbox= "replica-of-VMID"
 * (the vmid of the template it copies).
 *
 * (one line, single spaces). Ids are [a-z0-9-] (<= ID_MAX), numbers are plain
 * decimal without leading zeros; `check` is the first 8 hex digits of the
 * SHA-256 of the canonical line before " check=". Only [a-z0-9:=-] and spaces
 * are used, so the line survives Proxmox storing the description as `#`
 * comment lines (it comes back with a trailing newline), URL and form
 * encoding, and a form round trip that turned spaces into '+' (the parser takes
 * runs of ' ', '\t' or '+' as separators). Leading/trailing blanks, a '\r' and
 * a leading '#' on the line are tolerated.
 *
 * A line is a marker candidate when, trimmed, it starts with "sandboxd:".
 * Exactly one candidate that parses completely with a matching check is a
 * marker; anything else means "not ours, never touch". */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "util.h"

#define MARKER_VERSION 1
/* Proxmox's limit on `description` (pve-api.md §8). */
#define MARKER_DESCRIPTION_MAX 8192
/* Longest description marker_parse() looks at (Proxmox may hand back more
 * than it accepts on PUT: a trailing newline, hand-edited configs). */
#define MARKER_INPUT_MAX 65536
/* Longest marker line accepted. */
#define MARKER_LINE_MAX 512
#define MARKER_PREFIX "sandboxd:"

struct marker {
    char instance[ID_MAX + 1]; /* daemon instance id */
    char sandbox[ID_MAX + 1];  /* sandbox id */
    uid_t owner_uid;
    int64_t created;               /* unix seconds */
    int64_t expires;               /* unix seconds: lease expiry */
    char key[SHA256_HEX_SIZE];     /* optional ("" = none): hash of uid + idempotency key */
    char params[SHA256_HEX_SIZE];  /* optional ("" = none): params hash */
    char hostkey[SHA256_HEX_SIZE]; /* optional ("" = none): the sandbox's own SSH host key,
                                    * its SHA-256 fingerprint in hex (hostkey.h) */
    char template[ID_MAX + 1];     /* optional ("" = the default): the template's name */
    bool pool;                     /* a warm pool member (owner is a placeholder) */
    bool is_template;              /* tmpl=1: a template made from a sandbox (template= names it) */
    bool published;                /* pub=1: such a template, visible to every uid */
    bool replica;                  /* repl=1: a replica of the configured template template= */
    bool paused; /* paused (sandbox.pause): stopped on purpose, its disk kept; expires is the
                  * paused lease's end */
};

/* [p, p + n) without its surrounding blanks (' ', '\t', '\r', '\v', '\f') and one leading '#'
 * (blanks after it too): a description line's text as every marker line's reader takes it.
 * Its length into *ret_n. */
const char *marker_line_trim(const char *p, size_t n, size_t *ret_n);

/* The marker line (no newline) into buf. -EINVAL for invalid fields
 * (bad ids, negative times, owner (uid_t)-1, key/params not 64 hex digits),
 * -ENOBUFS when buf is too small (MARKER_LINE_MAX always suffices). */
int marker_format(const struct marker *m, char *buf, size_t n);

/* Finds and parses the marker in a Proxmox description (NULL or "" allowed).
 * Returns 0 and fills *ret, or:
 *   -ENOENT          no marker candidate: a foreign container;
 *   -EBADMSG         a candidate that does not parse, a failed check, or more
 *                    than one candidate (duplicated markers);
 *   -EPROTONOSUPPORT "sandboxd:vN" with N != MARKER_VERSION;
 *   -EMSGSIZE        description longer than MARKER_INPUT_MAX.
 * Every error means: not ours, never touch. */
int marker_parse(const char *description, struct marker *ret);

/* A new description: description's text with m's line in place of the first
 * marker candidate (others dropped), or appended when there is none. Every line
 * ends in '\n', trailing empty lines are dropped (as Proxmox does), so
 * feeding the result back gives the same string. -E2BIG when the result would
 * exceed MARKER_DESCRIPTION_MAX bytes. */
int marker_set(const char *description, const struct marker *m, char **ret_description);

/* The `key` field for an idempotency key: SHA-256 hex of "<uid>\n<key>", so
 * that the same key from two users never matches. -EINVAL for an empty key. */
int marker_key_hash(uid_t uid, const char *key, char ret[SHA256_HEX_SIZE]);

/* Parses the marker in description, sets its expiry and returns the updated
 * description with all other text kept. Errors as marker_parse() (the
 * description is not ours to change) and marker_set(). */
int marker_update_expiry(const char *description, int64_t expires, char **ret_description);

/* The labels line, a second line of the description next to the marker (not a marker
 * candidate, so marker_set() keeps it):
 *
 *   sandboxd-labels:v1 sandbox=<id> data=<base64url> check=<8 hex>
 *
 * data is base64url without padding of "key\0value\0" for each label in key order; check
 * the first 8 hex digits of the SHA-256 of the line before " check=". At most
 * MARKER_LABELS_LINE_MAX bytes (16 labels of the protocol's sizes fit, with the marker, in
 * MARKER_DESCRIPTION_MAX). */
#define MARKER_LABELS_PREFIX "sandboxd-labels:"
#define MARKER_LABELS_LINE_MAX 7168
/* The line for labels (an object of strings) of sandbox, or *ret NULL when there are none.
 * -EINVAL for a bad id or a non-string value, -E2BIG past MARKER_LABELS_LINE_MAX. */
int marker_labels_format(const char *sandbox, json_object *labels, char **ret_line);
/* The labels of sandbox from description: a new object (empty when there is no line for
 * it). -EBADMSG for a line of this sandbox that does not parse or fails its check. */
int marker_labels_parse(const char *description, const char *sandbox, json_object **ret);
/* A whole description for a new container: m's marker line and, when labels has any, the
 * labels line. */
int marker_description(const struct marker *m, json_object *labels, char **ret_description);

/* Volume lines: one for each volume a container holds as a mount point (the volume holder,
 * or the sandbox it is attached to), next to the marker (not marker candidates, so
 * marker_set() keeps them):
 *
 *   sandboxd-volume:v1 name=<id> owner=<uid> size=<gb> key=mp<N> check=<8 hex>
 *
 * Proxmox renames a volume when it moves to another container (vm-<vmid>-disk-K), so the
 * line, not the volume's Proxmox name, says which volume a mount point is: key= is the
 * mpN key it has (or will have, once a move written ahead of time ends) in that
 * container. check is the first 8 hex digits of the SHA-256 of the canonical line before
 * " check="; separators and tolerated surroundings as for the marker. */
#define MARKER_VOLUME_PREFIX "sandboxd-volume:"
#define MARKER_VOLUME_LINE_MAX 160
/* Proxmox's mount point keys are mp0 .. mp255. */
#define MARKER_VOLUME_MP_MAX 255
#define MARKER_VOLUME_SIZE_MAX 131072 /* GiB */

struct marker_volume {
    char name[ID_MAX + 1]; /* [a-z0-9-] */
    uid_t owner_uid;
    uint32_t size_gb; /* 1 .. MARKER_VOLUME_SIZE_MAX */
    unsigned mp;      /* the mpN key's N */
};

/* The line (no newline) into buf. -EINVAL for invalid fields, -ENOBUFS when buf is too
 * small (MARKER_VOLUME_LINE_MAX always suffices). */
int marker_volume_format(const struct marker_volume *v, char *buf, size_t n);
/* Every volume line of description (NULL or "" allowed): a new array, *ret_n entries
 * (*ret NULL when there are none), in description order. -EBADMSG for a volume line that
 * does not parse or fails its check, or two lines of one name or one key (the description
 * is then not to be changed), -EPROTONOSUPPORT for another version, -EMSGSIZE for a
 * description longer than MARKER_INPUT_MAX. */
int marker_volumes_parse(const char *description, struct marker_volume **ret, size_t *ret_n);
/* A new description: description's text with v's line in place of the line of v's name
 * (appended when there is none). Lines normalised as marker_set() does. -EEXIST when
 * another volume's line has v's key, -E2BIG past
 * MARKER_DESCRIPTION_MAX, errors of marker_volumes_parse() (a damaged description is not
 * rewritten). */
int marker_volume_set(const char *description, const struct marker_volume *v,
                      char **ret_description);
/* A new description without the line of volume name (the same text when there is none). */
int marker_volume_remove(const char *description, const char *name, char **ret_description);

/* The volume holder's line: the description of the stopped container that keeps the volumes
 * attached to no sandbox (lib/engine/volume.c). Not a marker candidate, so the reconcile
 * never takes the holder for a sandbox or an orphan, even without a registry:
 *
 *   sandboxd-holder:v1 instance=<id> check=<8 hex>
 *
 * check as the volume lines'. */
#define MARKER_HOLDER_PREFIX "sandboxd-holder:"
#define MARKER_HOLDER_LINE_MAX 128
/* The line (no newline) of instance's holder into buf: -EINVAL for a bad id, -ENOBUFS. */
int marker_holder_format(const char *instance, char *buf, size_t n);
/* Whether description has the holder line of instance (tolerated surroundings and
 * separators as for the marker). */
bool marker_holder_is(const char *description, const char *instance);
