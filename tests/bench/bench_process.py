#!/usr/bin/env python3
"""Background process benchmark against pve-sim (root), one run, figures on stdout:

  long-poll   latency from a byte written in the container to the client: a process.read
              with wait_ms is waiting; the bench writes one byte into a FIFO inside the
              container's root file system (host and container share the clock) that the
              background process (`cat FIFO`) copies to its stdout; the time until the read
              returns it. p50/p99 over N bytes.
  baseline    in the same run: a process.read of bytes already there (no waiting), the round
              trip every read costs, and sandbox.exec of `true`.

Usage: bench_process.py [--n N]"""

import argparse
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2elib import Env, data_of  # noqa: E402

ZERO = {"dhcp_delay": 0, "clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0}


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def ms(v):
    return f"p50 {pct(v, 50) * 1000:.2f} ms  p99 {pct(v, 99) * 1000:.2f} ms  (n={len(v)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    a = ap.parse_args()
    with Env(sim_config=ZERO, log_level="info") as env:
        c = env.client()
        sb = c.call("sandbox.create", {})
        sid = sb["id"]
        vmid = sb["vmid"]
        fifo_in_ct = "/root/bench-feed"
        host_fifo = os.path.join(env.sim.state_dir, "ct", str(vmid), "rootfs", fifo_in_ct.lstrip("/"))
        os.mkfifo(host_fifo)
        p = c.call("process.start", {"id": sid, "command": f"exec cat {fifo_in_ct}"})["process"]
        feed = open(host_fifo, "wb", buffering=0)  # meets cat's open

        poll, base, execs = [], [], []
        offset = 0
        for i in range(a.n):
            out = {}

            def reader():
                out["r"] = c.call("process.read", {"id": sid, "process": p, "offset": offset,
                                                   "wait_ms": 10000})
                out["t"] = time.monotonic()
            t = threading.Thread(target=reader)
            t.start()
            time.sleep(0.02 + (i % 5) * 0.005)  # the read is waiting in the container
            t0 = time.monotonic()
            feed.write(b"x")
            t.join(30)
            r = out["r"]
            assert data_of(r, "data") == b"x", r
            poll.append(out["t"] - t0)
            offset = r["next_offset"]
            t0 = time.monotonic()
            r = c.call("process.read", {"id": sid, "process": p, "offset": offset - 1})
            base.append(time.monotonic() - t0)
            assert data_of(r, "data") == b"x", r
            if i % 4 == 0:
                t0 = time.monotonic()
                c.call("sandbox.exec", {"id": sid, "command": "true"})
                execs.append(time.monotonic() - t0)
        feed.close()
        c.call("process.kill", {"id": sid, "process": p})
        c.call("sandbox.destroy", {"id": sid})
        c.close()
        print(f"long-poll byte -> client     {ms(poll)}  mean {statistics.mean(poll) * 1000:.2f} ms")
        print(f"process.read, data there     {ms(base)}")
        print(f"sandbox.exec true            {ms(execs)}")
        print(f"long-poll p50 / plain read p50: {pct(poll, 50) / pct(base, 50):.2f}")


if __name__ == "__main__":
    main()
