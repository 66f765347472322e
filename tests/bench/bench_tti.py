#!/usr/bin/env python3
"""Time to interactive against pve-sim (root), one run, figures on stdout.

Time to interactive (TTI) is what public sandbox leaderboards measure: from the create
request to the reply of the first command run in the new sandbox (here `sandbox.create`
then `sandbox.exec` of `true`, each sandbox on its own connection).

  sequential  N creates one after another: TTI median and p95
  burst       N creates sent at once: median, p95 and max of each one's TTI, and the wall
              time of the whole burst

each cold (no pool) and from a warm pool of N members ([pool] warm = N, filled before the
sequential run and refilled before the burst), for every row of simulator delays:

  default     pve-sim's own defaults (clone 0.5 s, start 0.2 s, DHCP 1 s)
  node        delays of a real node (see REAL_NODE below)

The machine (nproc, RAM, kernel), the daemon's build type and the delays are printed with
the figures. Best on a release build:
  meson setup BUILD-rel -Dbuildtype=release && ninja -C BUILD-rel
  SANDBOXD_BUILD_ROOT=BUILD-rel tests/bench/bench_tti.py [--n N] [--rows default,node]
                                                         [--only cold,warm]"""

import argparse
import functools
import json
import os
import platform
import re
import signal
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import e2elib  # noqa: E402
from e2elib import Env, RpcError  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001 (figures appear as they come)

# pve-sim's defaults (tests/pve-sim/README.md); e2elib would otherwise shorten them.
DEFAULT_DELAYS = {"clone_time": 0.5, "start_time": 0.2, "dhcp_delay": 1.0, "stop_time": 0.1,
                  "destroy_time": 0.2}
# A real node with the template on LVM-thin: a linked clone is a thin snapshot plus the
# config write and the task's fork (about 1.5 s in pct's task logs), `pct start` of a
# small unprivileged container with the firewall on (veth, fwbr bridge, lxc hooks,
# apparmor) 1.5 s, and the container's DHCP client taking its lease 2 s after the start
# task ends; stop 1 s, destroy 1 s. Estimates from typical Proxmox VE 8 task logs, not
# measured on this machine.
REAL_NODE = {"clone_time": 1.5, "start_time": 1.5, "dhcp_delay": 2.0, "stop_time": 1.0,
             "destroy_time": 1.0}
ROWS = {"default": DEFAULT_DELAYS, "node": REAL_NODE}


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def fmt(s):
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.1f} s"


def machine():
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) // 1024
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} CPUs ({cpu}), {mem} MiB RAM, Linux {platform.release()}"


def build_type():
    path = os.path.join(e2elib.BUILD, "meson-info", "intro-buildoptions.json")
    try:
        with open(path) as f:
            opts = {o["name"]: o["value"] for o in json.load(f)}
    except OSError:
        return "unknown (no meson-info in the build folder)"
    san = opts.get("b_sanitize", "none")
    return f"{opts.get('buildtype')}, sanitizers {san if san not in ('', []) else 'none'}"


def set_warm(env, n):
    with open(env.config) as f:
        text = f.read()
    text = re.sub(r"(?m)^warm = \d+$", f"warm = {n}", text)
    with open(env.config, "w") as f:
        f.write(text)
    env.proc.send_signal(signal.SIGHUP)


def pool(env):
    c = env.client()
    try:
        return c.call("daemon.status")["pool"]["default"]
    finally:
        c.close()


def wait_ready(env, n, timeout=600):
    t0 = time.time()
    while True:
        p = pool(env)
        if p["ready"] >= n and p["target"] == n:
            return time.time() - t0
        if time.time() - t0 > timeout:
            raise RuntimeError(f"the pool never reached {n}: {p}")
        time.sleep(0.05)


def tti(c):
    """One create + first exec on client c: (seconds to the exec's reply, seconds to the
    create's reply, sandbox id)."""
    t = time.perf_counter()
    sb = c.call("sandbox.create", {"ttl_s": 900})
    tc = time.perf_counter() - t
    r = c.call("sandbox.exec", {"id": sb["id"], "command": "true"})
    dt = time.perf_counter() - t
    if r.get("exit_code") != 0:
        raise RuntimeError(f"first exec failed: {r}")
    return dt, tc, sb["id"]


def destroy(env, ids):
    c = env.client(timeout=600)
    reqs = [c.send("sandbox.destroy", {"id": i}) for i in ids]
    for r in reqs:
        try:
            c.wait(r, 600)
        except RpcError:
            pass
    c.close()


def sequential(env, n):
    c = env.client(timeout=600)
    tt, tc, ids = [], [], []
    for _ in range(n):
        a, b, i = tti(c)
        tt.append(a)
        tc.append(b)
        ids.append(i)
    c.close()
    return tt, tc, ids


def burst(env, n):
    """n creates at once, each on its own connection, released together."""
    clients = [env.client(timeout=900) for _ in range(n)]
    gate = threading.Barrier(n + 1)
    res, errs, lock = [], [], threading.Lock()

    def one(c):
        gate.wait()
        try:
            r = tti(c)
            with lock:
                res.append(r)
        except (RpcError, RuntimeError, OSError) as e:
            with lock:
                errs.append(e)

    ts = [threading.Thread(target=one, args=(c,)) for c in clients]
    for t in ts:
        t.start()
    gate.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join(1800)
    wall = time.perf_counter() - t0
    for c in clients:
        c.close()
    if errs:
        print(f"  burst: {len(errs)} failed, first: {errs[0]}")
    return [r[0] for r in res], [r[2] for r in res], wall


def line_seq(label, tt, tc):
    print(f"  {label:<26} TTI median {fmt(statistics.median(tt)):>8}  p95 {fmt(pct(tt, 95)):>8}"
          f"   (create alone: median {fmt(statistics.median(tc))}; n={len(tt)})")


def line_burst(label, tt, wall):
    print(f"  {label:<26} TTI median {fmt(statistics.median(tt)):>8}  p95 {fmt(pct(tt, 95)):>8}"
          f"  max {fmt(max(tt)):>8}   burst wall {fmt(wall)} (n={len(tt)})")


def run_row(name, delays, n, only):
    # A /20 bridge and a large node: a row makes a few hundred containers (the simulator
    # keeps a lease per MAC), up to 3N at once (burst, the pool, its refill).
    sim = dict(delays, auth_failure_delay=0.1, bridge_subnet="10.220.0.0/20",
               node_capacity={"pve": {"maxmem": 1 << 40, "maxcpu": 1024}})
    daemon = {"sandbox": {"max_per_uid": "256", "max_total": "256", "create_timeout_s": "600"},
              "pool": {"warm": "0", "max_filling": "8"}}
    with Env(sim_config=sim, daemon_config=daemon, log_level="info") as env:
        print(f"row '{name}': pve-sim delays (s): " + ", ".join(f"{k} {v:g}" for k, v in delays.items()))
        if "cold" in only:
            tt, tc, ids = sequential(env, n)
            line_seq("cold, sequential:", tt, tc)
            destroy(env, ids)
            tt, ids, wall = burst(env, n)
            line_burst(f"cold, {n} at once:", tt, wall)
            destroy(env, ids)
        if "warm" in only:
            set_warm(env, n)
            fill = wait_ready(env, n)
            print(f"  pool of {n} filled from empty in {fill:.1f} s ([pool] max_filling 8)")
            h0 = pool(env)["hits"]
            tt, tc, ids = sequential(env, n)
            hits = pool(env)["hits"] - h0
            line_seq(f"warm, sequential ({hits} hit):", tt, tc)
            destroy(env, ids)
            refill = wait_ready(env, n)
            h0 = pool(env)["hits"]
            tt, ids, wall = burst(env, n)
            hits = pool(env)["hits"] - h0
            line_burst(f"warm, {n} at once ({hits} hit):", tt, wall)
            print(f"  (pool refilled in {refill:.1f} s before the burst)")
            set_warm(env, 0)
            destroy(env, ids)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20, help="creates per figure (default 20)")
    ap.add_argument("--rows", default="default,node", help="simulator delays: default,node")
    ap.add_argument("--only", default="cold,warm", help="cold,warm")
    a = ap.parse_args()
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}")
    print(f"sandboxd: {e2elib.SANDBOXD} ({build_type()})")
    print("time to interactive = sandbox.create + the first sandbox.exec (`true`) answered")
    t0 = time.time()
    for row in a.rows.split(","):
        run_row(row, ROWS[row], a.n, set(a.only.split(",")))
    print(f"bench done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
