#!/usr/bin/env python3
"""Benchmark of durable sandboxes against pve-sim (root), figures on stdout. The simulator
keeps its default delays (clone 0.5 s, start 0.2 s, stop 0.1 s, DHCP 1 s) unless --zero.

  cold         sandbox.create, then the first sandbox.exec (`true`): the reference
  pause        sandbox.pause of a ready sandbox (shutdown of the container, disk kept)
  resume       sandbox.resume (start, address, SSH connect)
  first exec   the first sandbox.exec after the resume
  pause->exec  resume + first exec: the time a paused sandbox takes to answer again

Each figure is the median (and min, max) of --rounds rounds on one sandbox.

Usage: bench_durable.py [--rounds N] [--zero]"""

import argparse
import functools
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2elib import Env  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001 (figures appear as they come)

ZERO = {"dhcp_delay": 0, "clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0}


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t0


def show(name, xs):
    print(f"{name:<12} median {statistics.median(xs) * 1000:8.1f} ms   "
          f"min {min(xs) * 1000:8.1f}   max {max(xs) * 1000:8.1f}   (n={len(xs)})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--zero", action="store_true", help="no simulated Proxmox delays")
    a = ap.parse_args()
    with Env(sim_config=ZERO if a.zero else None, log_level="info") as env:
        c = env.client()
        fig = {k: [] for k in ("cold", "pause", "resume", "first exec", "pause->exec")}
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            sb = c.call("sandbox.create", {})
            c.call("sandbox.exec", {"id": sb["id"], "command": "true"})
            fig["cold"].append(time.perf_counter() - t0)
            c.call("sandbox.destroy", {"id": sb["id"]})
        sid = c.call("sandbox.create", {})["id"]
        c.call("sandbox.exec", {"id": sid, "command": "true"})
        for _ in range(a.rounds):
            _, p = timed(lambda: c.call("sandbox.pause", {"id": sid}))
            _, r = timed(lambda: c.call("sandbox.resume", {"id": sid}))
            x, e = timed(lambda: c.call("sandbox.exec", {"id": sid, "command": "true"}))
            assert x["exit_code"] == 0, x
            fig["pause"].append(p)
            fig["resume"].append(r)
            fig["first exec"].append(e)
            fig["pause->exec"].append(r + e)
        for k, xs in fig.items():
            show(k, xs)
        c.call("sandbox.destroy", {"id": sid})


if __name__ == "__main__":
    main()
