#!/usr/bin/env python3
"""The daemon's memory per sandbox against pve-sim (root), one run, figures on stdout.

The daemon's RSS and PSS (/proc/PID/smaps_rollup) and its anonymous memory with 0, 50 and
200 idle READY sandboxes (busybox template, simulator delays at zero), each sandbox used once
(one `sandbox.exec`) and then left alone for --idle seconds before the reading, and the
cost per sandbox. With --baseline BUILD the same run is made first with that build's daemon
(e.g. main built in a second folder), so the two sets of figures come from one run.

  meson setup BUILD-rel -Dbuildtype=release && ninja -C BUILD-rel
  SANDBOXD_BUILD_ROOT=BUILD-rel tests/bench/bench_memory.py [--counts 0,50,200]
                                        [--idle S] [--baseline OTHER-BUILD]"""

import argparse
import functools
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import e2elib  # noqa: E402
from e2elib import Env, RpcError  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001 (figures appear as they come)

ZERO = {"dhcp_delay": 0, "clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0,
        "auth_failure_delay": 0.1}
PARALLEL = 16


def mem_kib(pid):
    """RSS, PSS and anonymous memory of a process, KiB."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in ("Rss", "Pss", "Anonymous"):
                out[k] = int(rest.split()[0])
    return out


def ssh_sessions(pid):
    """The daemon's established TCP connections to port 22."""
    out = subprocess.run(["ss", "-tnpH", "state", "established", "( dport = :22 )"],
                         capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if f"pid={pid}," in line)


def create_n(env, n):
    """n creates over PARALLEL connections, each sandbox used once (an exec)."""
    clients = [env.client(timeout=1800) for _ in range(min(PARALLEL, max(n, 1)))]
    ids, k = [], 0
    while k < n:
        batch = []
        for c in clients:
            if k >= n:
                break
            batch.append((c, c.send("sandbox.create", {"ttl_s": 7200})))
            k += 1
        for c, r in batch:
            try:
                ids.append(c.wait(r, 1800)["id"])
            except RpcError as e:
                print(f"  create error: {e}")
    c = clients[0]
    for i in ids:
        c.call("sandbox.exec", {"id": i, "command": "true"})
    for c in clients:
        c.close()
    return ids


def measure(daemon, counts, idle):
    e2elib.SANDBOXD = daemon
    sim = dict(ZERO, bridge_subnet="10.219.0.0/20",
               node_capacity={"pve": {"maxmem": 1 << 42, "maxcpu": 4096}})
    top = max(counts)
    conf = {"sandbox": {"max_per_uid": str(top + 16), "max_total": str(top + 16),
                        "create_timeout_s": "600"}}
    rows = []
    with Env(sim_config=sim, daemon_config=conf, log_level="info") as env:
        print(f"sandboxd {daemon}")
        ids = []
        for n in sorted(counts):
            ids += create_n(env, n - len(ids))
            time.sleep(idle)
            m = mem_kib(env.proc.pid)
            rows.append((len(ids), m))
            print(f"  {len(ids):4d} idle READY sandboxes: RSS {m['Rss'] / 1024:7.1f} MiB  "
                  f"PSS {m['Pss'] / 1024:7.1f} MiB  anonymous {m['Anonymous'] / 1024:7.1f} MiB  "
                  f"SSH sessions {ssh_sessions(env.proc.pid)}")
        base = rows[0][1]
        for n, m in rows[1:]:
            print(f"  per sandbox ({rows[0][0]} -> {n}): RSS {(m['Rss'] - base['Rss']) / (n - rows[0][0]):.0f} KiB"
                  f", PSS {(m['Pss'] - base['Pss']) / (n - rows[0][0]):.0f} KiB"
                  f", anonymous {(m['Anonymous'] - base['Anonymous']) / (n - rows[0][0]):.0f} KiB")
        c = env.client(timeout=1800)
        for r in [c.send("sandbox.destroy", {"id": i}) for i in ids]:
            c.wait(r, 1800)
        c.close()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="0,50,200")
    ap.add_argument("--idle", type=float, default=80,
                    help="seconds each count is left idle before the reading (default 80: "
                         "surplus SSH sessions close after 60 s idle, checked every 15 s)")
    ap.add_argument("--baseline", help="another build folder whose daemon is measured first")
    a = ap.parse_args()
    counts = [int(x) for x in a.counts.split(",")]
    print(f"machine: {os.cpu_count()} CPUs, Linux {os.uname().release}; idle {a.idle:g} s "
          f"before each reading; pve-sim delays zero")
    t0 = time.time()
    own = e2elib.SANDBOXD
    if a.baseline:
        print("before (baseline):")
        measure(os.path.join(a.baseline, "daemon", "sandboxd"), counts, a.idle)
        print("after:")
    measure(own, counts, a.idle)
    print(f"bench done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
