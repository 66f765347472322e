/* Placement of a sandbox on a node of the cluster: the pure scoring part (no loop, no I/O),
 * and the parsing of GET /cluster/resources?type=node. lib/engine/cluster.c keeps the node table
 * on the loop and calls these.
 *
 * A node is a candidate when it holds the template (its copy, or the one vmid), is online
 * in the last report, is not in backoff after failed calls, and runs fewer than
 * max_per_node of the daemon's sandboxes (0: no cap). Among the candidates the one with the
 * most free capacity wins: free memory (what Proxmox reports used by others, plus the
 * memory of every sandbox the daemon placed there, which the lagging report may not show
 * yet) and idle CPU, as fractions of the node's size, weighted 4:1. Scores closer than one
 * sandbox's memory (on the smaller node) count as equal, since the lagging report can be off
 * by a sandbox that just started; equal scores go to the node with fewer of the daemon's
 * sandboxes, then to the first in [proxmox] nodes, so equal capacities give a spread within
 * one. Until every candidate has been reported, the
 * daemon's own sandbox count alone decides. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the cluster reports and the daemon's calls say of a node (lib/engine/cluster.c keeps one
 * per node and hands it over as is). */
struct placement_state {
    bool online;        /* the last report said online (true until one arrives) */
    bool failed;        /* in backoff after failed calls */
    bool known;         /* a report with its size arrived */
    uint64_t maxmem;    /* bytes */
    uint64_t mem_other; /* bytes used by what is not the daemon's sandboxes */
    double cpu;         /* reported load, 0..1 of maxcpu */
};

struct placement_node {
    const char *name;
    bool has_template; /* the requested template can be cloned there */
    struct placement_state state;
    unsigned live;    /* the daemon's sandboxes on it (any state before gone) */
    uint64_t own_mem; /* their configured memory, bytes */
};

enum placement_refusal {
    PLACEMENT_NO_TEMPLATE = 1, /* no node holds the template */
    PLACEMENT_ALL_DOWN,        /* every node holding it is offline or failed */
    PLACEMENT_ALL_FULL,        /* every reachable node holding it is at max_per_node */
};

/* The index of the chosen node (need_mem: the new sandbox's memory, bytes). Returns 0, or
 * -ENOENT/-EHOSTDOWN/-ENOSPC with *ret_why set when no node qualifies. */
int placement_pick(const struct placement_node *nodes, size_t n, unsigned max_per_node,
                   uint64_t need_mem, size_t *ret_index, enum placement_refusal *ret_why);

/* One node of GET /cluster/resources?type=node. */
struct placement_report {
    char name[64];
    bool online;
    uint64_t maxmem, mem;
    double cpu;
    bool sized; /* maxmem present (an offline node has none) */
};
/* Parses the data array (entries of other types and bad names are skipped; at most max
 * entries). Returns the count, or -EBADMSG when data is not an array. */
int placement_report_parse(json_object *data, struct placement_report *ret, size_t max);
