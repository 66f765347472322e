#!/usr/bin/env python3
"""Durable sandboxes against pve-sim (root), one run, figures on stdout:

  cold create   sandbox.create to ready (no warm pool): p50 of --creates
  fork          sandbox.fork of --count children from a sandbox holding --mib MiB of files:
                the call's wall time, and per child (wall / count)
  snapshot      sandbox.snapshot of that sandbox (the simulator copies the files it wrote)
  rollback      sandbox.rollback to it (stop, restore, start, address, SSH)
  pause         sandbox.pause of that sandbox (shutdown of the container, disk kept)
  resume        sandbox.resume (start, address, SSH connect), and the first sandbox.exec
                after it: resume + first exec is the time a paused sandbox takes to answer
                again (medians of --rounds rounds)

Proxmox locks the parent for each clone, so a fork's clones run one after another: a fork's
time per child is about one clone plus a share of the rest of a create (configure, start,
address, SSH, host key, isolation check), which the children run side by side. A cold create
also clones (from the template) and runs the same steps alone.

Usage: bench_durable.py [--count 8] [--mib 200] [--creates 3] [--rounds 5] [--clone-time S]"""

import argparse
import functools
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2elib import Env  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001


def timed(fn):
    t0 = time.time()
    r = fn()
    return time.time() - t0, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--mib", type=int, default=200)
    ap.add_argument("--creates", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clone-time", type=float, default=None,
                    help="the simulator's clone task time (default: its own, 0.5 s)")
    a = ap.parse_args()
    sim = {} if a.clone_time is None else {"clone_time": a.clone_time}
    daemon = {"sandbox": {"max_per_uid": str(a.count + a.creates + 2),
                          "max_total": str(a.count + a.creates + 2), "create_timeout_s": "600"}}
    with Env(sim_config=sim, daemon_config=daemon, log_level="info") as env:
        c = env.client(timeout=1800)
        print(f"{os.cpu_count()} CPUs; pve-sim defaults (clone, snapshot task, start, DHCP, "
              f"firewall cycle){'' if a.clone_time is None else f', clone {a.clone_time} s'}")
        colds = []
        for _ in range(a.creates):
            t, sb = timed(lambda: c.call("sandbox.create", {"ttl_s": 3600}, timeout=600))
            colds.append(t)
            c.call("sandbox.destroy", {"id": sb["id"]})
        print(f"  cold create:   p50 {statistics.median(colds):6.2f} s  (of {a.creates})")
        p = c.call("sandbox.create", {"ttl_s": 3600})
        pid = p["id"]
        r = c.call("sandbox.exec", {"id": pid, "command":
                                    f"mkdir -p /root/data && for i in $(seq {a.mib}); do "
                                    f"head -c 1048576 /dev/urandom > /root/data/f$i; done; "
                                    f"du -sm /root/data | cut -f1", "timeout_ms": 600000},
                   timeout=900)
        print(f"  parent holds {r['stdout'].strip()} MiB of files")
        t, res = timed(lambda: c.call("sandbox.fork", {"id": pid, "count": a.count}, timeout=1800))
        kids = [k["id"] for k in res["sandboxes"]]
        print(f"  fork of {a.count}:     {t:6.2f} s  = {t / a.count:6.2f} s per child "
              f"({len(kids)} made{', ' + str(res.get('failed')) + ' failed' if res.get('failed') else ''})")
        for k in kids:
            c.call("sandbox.destroy", {"id": k})
        t, _ = timed(lambda: c.call("sandbox.snapshot", {"id": pid, "name": "bench"}, timeout=1800))
        print(f"  snapshot:      {t:6.2f} s")
        c.call("sandbox.exec", {"id": pid, "command": "rm -rf /root/data"})
        t, _ = timed(lambda: c.call("sandbox.rollback", {"id": pid, "name": "bench"}, timeout=1800))
        print(f"  rollback:      {t:6.2f} s")
        fig = {k: [] for k in ("pause", "resume", "first exec", "resume+exec")}
        for _ in range(a.rounds):
            p_s, _ = timed(lambda: c.call("sandbox.pause", {"id": pid}))
            r_s, _ = timed(lambda: c.call("sandbox.resume", {"id": pid}))
            e_s, x = timed(lambda: c.call("sandbox.exec", {"id": pid, "command": "true"}))
            assert x["exit_code"] == 0, x
            for k, v in zip(fig, (p_s, r_s, e_s, r_s + e_s)):
                fig[k].append(v)
        for k, xs in fig.items():
            print(f"  {k + ':':<14} median {statistics.median(xs) * 1000:7.1f} ms  "
                  f"(min {min(xs) * 1000:.1f}, max {max(xs) * 1000:.1f}, of {len(xs)})")
        c.call("sandbox.destroy", {"id": pid})


if __name__ == "__main__":
    main()
