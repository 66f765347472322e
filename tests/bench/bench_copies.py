#!/usr/bin/env python3
"""Parallel cold creates of one template against pve-sim (root), one run, figures on stdout.

Proxmox locks a template for the whole of each clone, so clones of one template run one at a
time and a burst of creates that misses the warm pool waits for every clone ahead of it.
With several copies of the template on the node ([templates] NAME = A@node,B@node,...) each
copy runs one clone at a time. The same burst of N parallel creates (no pool) is timed with
1 copy and with K copies, against one simulator with the same clone time:

  wall      from the first request to the last sandbox ready
  ready     each create's time to ready: p50 and max

The ratio 1-copy wall / K-copy wall is the figure (goal: >= 3 for N = 8, K = 4). The same
burst runs a third time on a template with K-1 replicas the daemon made itself
([templates] NAME.replicas = K-1: K copies in all), once they are made.

Every create also waits for the firewall's next cycle (its isolation proof): --firewall-period
(default 1 s, as a short cycle; pve-firewall's is 10 s, proxmox-firewall's 5 s) bounds the gain.

Usage: bench_copies.py [--n N] [--copies K] [--clone-time S] [--firewall-period S]"""

import argparse
import functools
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2elib import Env  # noqa: E402
from test_recovery_util import launch  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001


def burst(env, template, n):
    c = env.client()
    try:
        t0 = time.time()
        reqs = [(c.send("sandbox.create", {"template": template, "ttl_s": 600}), time.time())
                for _ in range(n)]
        took, ids = [], []
        for r, ts in reqs:
            ids.append(c.wait(r, timeout=600)["id"])
            took.append(time.time() - t0)
        wall = time.time() - t0
        for i in ids:
            c.call("sandbox.destroy", {"id": i})
        return wall, took
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--clone-time", type=float, default=2.0)
    ap.add_argument("--firewall-period", type=float, default=1.0,
                    help="the simulator's firewall cycle (each create waits for one)")
    a = ap.parse_args()
    base = 9000
    vmids = [base + 10 * i for i in range(a.copies)]
    templates = [{"vmid": v, "node": "pve", "storage": "local-lvm", "hostname": "sandbox-template",
                  "memory": 512, "cores": 1, "disk": "8G", **({"copy_of": base} if v != base else {})}
                 for v in vmids]
    acl = {"/pool/sandboxd": ["PVEVMAdmin", "Pool.Audit"], "/": ["Sys.Audit"]}
    acl.update({f"/vms/{v}": "PVETemplateUser" for v in vmids})
    sim = {"templates": templates, "clone_time": a.clone_time, "firewall_period": a.firewall_period,
           "tokens": [{"id": "root@pam!admin", "secret": None, "acl": {"/": "Administrator"}},
                      {"id": "sandboxd@pve!sandboxd", "secret": None, "acl": acl}]}
    daemon = {"sandbox": {"max_per_uid": str(4 * a.n), "max_total": str(4 * a.n)},
              "proxmox": {"max_calls_per_node": "4",
                          "firewall_period_s": str(max(1, round(a.firewall_period)))}}
    with Env(sim_config=sim, daemon_config=daemon) as env:
        env.stop_daemon()
        with open(env.config) as f:
            text = f.read()
        with open(env.config, "w") as f:
            f.write(text + "[templates]\none = %d\nmany = %s\nrepl = %d\nrepl.replicas = %d\n"
                    % (base, ",".join(f"{v}@pve" for v in vmids), base, a.copies - 1))
        launch(env)
        c = env.client()
        t0 = time.time()
        while True:  # the replicas are made in the background after start
            t = next(t for t in c.call("template.list")["templates"] if t["name"] == "repl")
            if len(t.get("replicas") or []) >= a.copies - 1:
                break
            assert time.time() - t0 < 600, t
            time.sleep(0.2)
        c.close()
        print(f"{a.copies - 1} replicas made in {time.time() - t0:.1f} s")
        print(f"{os.cpu_count()} CPUs; simulator clone {a.clone_time} s, start 0.2 s, DHCP 1 s, "
              f"firewall cycle {a.firewall_period} s; "
              f"{a.n} parallel cold creates, no warm pool")
        res = {}
        for name, k in (("one", 1), ("many", a.copies), ("repl", a.copies)):
            burst(env, name, 1)  # warm-up: the template's size and checks learnt
            wall, took = burst(env, name, a.n)
            res[name] = wall
            print(f"  {k} cop{'y' if k == 1 else 'ies'}{' (replicas)' if name == 'repl' else ''}: wall {wall:6.2f} s   ready p50 "
                  f"{statistics.median(took):6.2f} s  max {max(took):6.2f} s")
        print(f"  ratio (1 copy / {a.copies} copies): {res['one'] / res['many']:.2f}x")
        print(f"  ratio (1 copy / 1 + {a.copies - 1} replicas): {res['one'] / res['repl']:.2f}x")


if __name__ == "__main__":
    main()
