#!/usr/bin/env python3
"""Benchmark of placement across nodes against pve-sim (root), one run, figures on stdout.
The simulator keeps its default delays (clone 0.5 s, start 0.2 s, DHCP 1 s) unless --zero.

  one node     N concurrent creates (default 64) with the daemon configured for one node of a
               3-node simulated cluster (its template copy there): creates/s, wall time
  three nodes  the same N creates with the daemon configured for all 3 nodes (a template copy
               per node, equal capacities): creates/s, wall time, sandboxes per node
  ratio        three-node creates/s over one-node creates/s

Clones of one template run one at a time (Proxmox locks the template while it clones), so a
copy per node lets clones on different nodes run in parallel. Goal: ratio >= 2.5.

Usage: bench_cluster.py [--n N] [--parallel P] [--zero]"""

import argparse
import functools
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2elib import Env, create_parallel  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001 (figures appear as they come)

NODES = ["pve1", "pve2", "pve3"]
COPIES = {"pve1": 9000, "pve2": 9001, "pve3": 9002}
DEFAULT_DELAYS = {"dhcp_delay": 1.0, "clone_time": 0.5, "start_time": 0.2, "stop_time": 0.1,
                  "destroy_time": 0.2, "auth_failure_delay": 0.1}
ZERO = {"dhcp_delay": 0, "clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0}


def sim_config(delays):
    # three nodes of equal capacity, each with its own copy of the template (9000, 9001, 9002)
    cfg = {"node_count": 3, "node_capacity": {x: {"maxmem": 64 << 30, "maxcpu": 16} for x in NODES}}
    cfg.update(delays)
    return cfg


def daemon_config(nodes, n):
    def cfg(info):
        keys = sorted({info["templates"][str(v)]["host_key"] for v in COPIES.values()})
        return {"proxmox": {"nodes": ",".join(nodes),
                            "template": ",".join(f"{COPIES[x]}@{x}" for x in nodes)},
                "ssh": {"template_host_key": ",".join(keys)},
                "sandbox": {"max_per_uid": str(n), "max_total": str(n + 8),
                            "create_timeout_s": "600"}}
    return cfg


def run(nodes, n, parallel, delays):
    """N creates over `parallel` connections; returns (seconds, per-node counts)."""
    with Env(sim_config=sim_config(delays), daemon_config=daemon_config(nodes, n),
             log_level="info") as env:
        t0 = time.time()
        made, errors = create_parallel(env.client, n, parallel, {"ttl_s": 3600}, timeout=900)
        secs = time.time() - t0
        if errors:
            raise SystemExit(f"creates failed: {errors[:3]}")
        counts = {x: sum(1 for sb in made if sb["node"] == x) for x in NODES}
        c = env.client()
        for sb in made:
            c.call("sandbox.destroy", {"id": sb["id"]})
        c.close()
        env.wait_no_containers(120)
        return secs, counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=64, help="creates per run (default 64)")
    ap.add_argument("--parallel", type=int, default=64, help="creates in flight (default 64)")
    ap.add_argument("--zero", action="store_true", help="no simulated delays")
    a = ap.parse_args()
    delays = ZERO if a.zero else DEFAULT_DELAYS
    print(f"{a.n} creates, {a.parallel} in flight, simulator delays: {delays}")
    one, c1 = run(NODES[:1], a.n, a.parallel, delays)
    print(f"one node     {a.n / one:6.2f} creates/s  ({one:6.1f} s)  per node {c1}")
    three, c3 = run(NODES, a.n, a.parallel, delays)
    print(f"three nodes  {a.n / three:6.2f} creates/s  ({three:6.1f} s)  per node {c3}")
    ratio = one / three
    print(f"ratio        {ratio:6.2f}x  (goal >= 2.5x)")


if __name__ == "__main__":
    main()
