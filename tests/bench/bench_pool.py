#!/usr/bin/env python3
"""Benchmark of the warm pool against pve-sim (root), one run, figures on stdout. The
simulator keeps its default delays (clone 0.5 s, start 0.2 s, DHCP 1 s) unless --zero.

  cold     create -> ready latency without a pool, p50/p99 (sequential creates)
  warm     create -> ready latency from a ready pool of 8 (each create served warm; the pool
           refilled between them), p50/p99, and the ratio cold p50 / warm p50
  steady   200 creates at a steady rate (--rate per second, default 0.5: clones of one
           template run one at a time, about one a second here, so the pool refills at most
           that fast) the pool covers: creates that found no member ready (pool misses) after
           the first 10, latency p50/p99
  burst    32 concurrent creates against a ready pool of 8: all must succeed; hits, and
           latency of the warm ones and of the cold ones
  refill   time for the pool to go from empty back to 8 ready members

Goals (issue): warm p50 < 20 ms and >= 50x faster than cold; 0 cold creates at the steady
rate after warm-up; the burst all succeeds with the first 8 warm.

Usage: bench_pool.py [--zero] [--rate R] [--cold N] [--warm N] [--steady N]
                     [--only cold,warm,steady,burst]"""

import argparse
import functools
import os
import re
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2elib import Env, RpcError  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001 (figures appear as they come)

DEFAULT_DELAYS = {"dhcp_delay": 1.0, "clone_time": 0.5, "start_time": 0.2, "stop_time": 0.1,
                  "destroy_time": 0.2, "auth_failure_delay": 0.1}
ZERO = {"dhcp_delay": 0, "clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0}
POOL = 8


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def ms(v):
    if not v:
        return "(n=0)"
    return f"p50 {pct(v, 50) * 1000:8.2f} ms  p99 {pct(v, 99) * 1000:8.2f} ms  (n={len(v)})"


def set_warm(env, n):
    with open(env.config) as f:
        text = f.read()
    text = re.sub(r"(?m)^warm = \d+$", f"warm = {n}", text)
    with open(env.config, "w") as f:
        f.write(text)
    env.proc.send_signal(signal.SIGHUP)


def pool(c):
    """The default template's pool; c is any client (a fresh connection is used, so that a
    long phase never finds it closed as idle)."""
    cc = c.env.client()
    try:
        return cc.call("daemon.status")["pool"]["default"]
    finally:
        cc.close()


def wait_ready(c, n, timeout=300):
    t0 = time.time()
    while True:
        p = pool(c)
        if p["ready"] >= n and p["target"] == n:
            return time.time() - t0
        if time.time() - t0 > timeout:
            raise RuntimeError(f"pool never reached {n}: {p}")
        time.sleep(0.02)


class Reaper:
    """Destroys sandboxes in the background (a destroy is not part of any figure)."""

    def __init__(self, env):
        self.env = env
        self.ids = []
        self.cv = threading.Condition()
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def add(self, i):
        with self.cv:
            self.ids.append(i)
            self.cv.notify()

    def run(self):
        c = self.env.client()
        while True:
            with self.cv:
                while not self.ids and not self.stop:
                    self.cv.wait()
                if not self.ids and self.stop:
                    break
                i = self.ids.pop(0)
            try:
                c.call("sandbox.destroy", {"id": i})
            except RpcError:
                pass
        c.close()

    def drain(self):
        with self.cv:
            self.stop = True
            self.cv.notify()
        self.t.join(600)


def timed_create(c, params=None):
    t = time.perf_counter()
    sb = c.call("sandbox.create", dict({"ttl_s": 600}, **(params or {})))
    return time.perf_counter() - t, sb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zero", action="store_true", help="simulator delays at zero")
    ap.add_argument("--rate", type=float, default=0.5,
                    help="steady creates per second (below the template's clone rate, ~1/s here)")
    ap.add_argument("--only", default="cold,warm,steady,burst", help="phases to run")
    ap.add_argument("--cold", type=int, default=12)
    ap.add_argument("--warm", type=int, default=40)
    ap.add_argument("--steady", type=int, default=200)
    a = ap.parse_args()
    # A /20 bridge: the simulator keeps one DHCP lease per MAC ever seen, and a full run
    # creates a few hundred containers (a /24 runs out).
    sim = dict(ZERO if a.zero else DEFAULT_DELAYS, bridge_subnet="10.216.0.0/20")
    daemon = {"sandbox": {"max_per_uid": "128", "max_total": "200", "create_timeout_s": "120"},
              "pool": {"warm": "0", "max_filling": "8"}}
    with Env(sim_config=sim, daemon_config=daemon, log_level="info") as env:
        c = env.client()
        c.env = env
        reaper = Reaper(env)
        print(f"pve-sim delays: {sim}")

        phases = set(a.only.split(","))
        cold = []
        for _ in range(a.cold if "cold" in phases else 0):
            dt, sb = timed_create(c)
            cold.append(dt)
            reaper.add(sb["id"])
        if cold:
            print(f"cold create -> ready:                 {ms(cold)}")

        set_warm(env, POOL)
        fill = wait_ready(c, POOL)
        print(f"pool of {POOL} filled from empty in {fill:.2f} s")
        warm = []
        for _ in range(a.warm if "warm" in phases else 0):
            h0 = pool(c)["hits"]
            dt, sb = timed_create(c)
            assert pool(c)["hits"] == h0 + 1, "not served from the pool"
            warm.append(dt)
            reaper.add(sb["id"])
            wait_ready(c, POOL)
        if warm:
            print(f"warm create -> ready (pool of {POOL}):     {ms(warm)}")
        if cold and warm:
            ratio = pct(cold, 50) / pct(warm, 50)
            print(f"cold p50 / warm p50: {ratio:.0f}x  (goals: warm p50 < 20 ms: "
                  f"{'met' if pct(warm, 50) < 0.020 else 'NOT met'}; >= 50x: "
                  f"{'met' if ratio >= 50 else 'NOT met'})")

        # Steady rate: one create every 1/rate s, from 16 connections; misses after warm-up.
        if "steady" in phases:
            steady(env, c, a, reaper)
        if "burst" in phases:
            burst(env, c, reaper)
        reaper.drain()
        c.close()


def steady(env, c, a, reaper):
    wait_ready(c, POOL)
    lat, errs, lock = [], [], threading.Lock()
    p0 = pool(c)
    misses_after = [None]
    t_start = time.time()
    slots = list(range(a.steady))

    def worker():
        cc = env.client()
        try:
            while True:
                with lock:
                    if not slots:
                        return
                    k = slots.pop(0)
                time.sleep(max(0, t_start + k / a.rate - time.time()))
                if k == 10:
                    misses_after[0] = pool(c)["misses"]
                try:
                    dt, sb = timed_create(cc)
                    with lock:
                        lat.append(dt)
                    reaper.add(sb["id"])
                except RpcError as e:
                    with lock:
                        errs.append(e.err)
        finally:
            cc.close()
    ws = [threading.Thread(target=worker) for _ in range(16)]
    for t in ws:
        t.start()
    for t in ws:
        t.join(1800)
    p1 = pool(c)
    print(f"steady {a.steady} creates at {a.rate:g}/s: {ms(lat)}, {len(errs)} failed; pool hits "
          f"{p1['hits'] - p0['hits']}, misses {p1['misses'] - p0['misses']} (after the first 10: "
          f"{p1['misses'] - misses_after[0]}; goal 0)")
    if errs:
        print(f"  first failure: {errs[0]}")


def burst(env, c, reaper):
    lock = threading.Lock()
    # Burst: 32 concurrent creates against a ready pool of 8.
    wait_ready(c, POOL)
    p0 = pool(c)
    res, errs = [], []

    def burst_one():
        cc = env.client()
        try:
            dt, sb = timed_create(cc)
            with lock:
                res.append(dt)
            reaper.add(sb["id"])
        except RpcError as e:
            errs.append(e.err)
        finally:
            cc.close()
    ts = [threading.Thread(target=burst_one) for _ in range(32)]
    t0 = time.time()
    for t in ts:
        t.start()
    # The pool is back once all 8 were taken and 8 are ready again (measured from the
    # burst's start, while its cold creates still run).
    refill = None
    while any(t.is_alive() for t in ts) or refill is None:
        p = pool(c)
        if refill is None and p["hits"] - p0["hits"] >= POOL and p["ready"] >= POOL:
            refill = time.time() - t0
        if time.time() - t0 > 600:
            break
        time.sleep(0.02)
    for t in ts:
        t.join(600)
    wall = time.time() - t0
    p1 = pool(c)
    hits = p1["hits"] - p0["hits"]
    res.sort()
    print(f"burst of 32 against {POOL} ready: {len(res)} succeeded, {len(errs)} failed, "
          f"{hits} served warm; the {hits} fastest {ms(res[:hits])}; the rest {ms(res[hits:])}; "
          f"all done in {wall:.2f} s")
    print(f"refill: the pool of {POOL} was ready again {refill:.2f} s after the burst began "
          f"(max_filling 8, beside the burst's cold creates)")


if __name__ == "__main__":
    main()
