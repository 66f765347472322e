#!/usr/bin/env python3
"""Background process benchmark against pve-sim (root), one run, figures on stdout:

  capture     a process writes --mib MiB (dd from /dev/zero, 64 KiB writes) to stdout: MiB/s
              from process.start until process.wait reports it exited with every byte
              recorded, then the read back (process.read, 1 MiB a call) checked byte for byte.
              Next to it the floor: the same bytes piped into one file by cat in one exec.
  long-poll   latency from a byte written in the container to the client: a process.read
              with wait_ms is waiting; the bench writes one byte into a FIFO inside the
              container's root file system (host and container share the clock) that the
              background process (`cat FIFO`) copies to its stdout; the time until the read
              returns it. p50/p99 over N bytes.
  idle CPU    CPU time of everything in the container (utime + stime of /proc/*/stat, children
              included) during a 3 s long-poll on a process that writes nothing, less the
              same for a read that does not wait.
  baseline    in the same run: a process.read of bytes already there (no waiting), the round
              trip every read costs, and sandbox.exec of `true`.

With --base BUILD the same figures come from BUILD's daemon too (e.g. main built with
-Dbuildtype=release in another build dir) and the ratios are printed.

Usage: SANDBOXD_BUILD_ROOT=BUILD bench_process.py [--n N] [--mib MIB] [--output-max MIB]
           [--template-os busybox|debian] [--base OTHER_BUILD]"""

import argparse
import hashlib
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import e2elib  # noqa: E402
from e2elib import Env, data_of  # noqa: E402

ZERO = {"dhcp_delay": 0, "clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0}
MIB = 1 << 20


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def ms(v):
    return f"p50 {pct(v, 50) * 1000:.2f} ms  p99 {pct(v, 99) * 1000:.2f} ms  (n={len(v)})"


def wait_exit(c, sid, p):
    while True:
        try:
            r = c.call("process.wait", {"id": sid, "process": p, "timeout_ms": 10000}, timeout=120)
        except e2elib.RpcError as e:  # a loaded machine: the wait script missed its margin
            if e.code != -32006:
                raise
            continue
        if r["state"] != "running":
            return r


def floor(c, sid, mib):
    """The same bytes through a pipe into one file by cat, in one sandbox.exec: MiB/s."""
    cmd = f"dd if=/dev/zero bs=65536 count={mib * 16} 2>/dev/null | cat >/root/floor; rm -f /root/floor"
    t0 = time.monotonic()
    c.call("sandbox.exec", {"id": sid, "command": cmd}, timeout=300)
    return mib / (time.monotonic() - t0)


def capture(c, sid, mib):
    t0 = time.monotonic()
    cmd = f"dd if=/dev/zero bs=65536 count={mib * 16} 2>/dev/null"
    p = c.call("process.start", {"id": sid, "command": cmd})["process"]
    r = wait_exit(c, sid, p)
    t1 = time.monotonic()
    assert r["state"] == "exited" and r["exit_code"] == 0, r
    h, off, zero, start = hashlib.sha256(), 0, bytes(MIB), None
    while True:
        r = c.call("process.read", {"id": sid, "process": p, "offset": off, "length": MIB})
        if start is None:  # with --output-max below --mib, only the last bytes are kept
            start = off = r["offset"]
        assert r["offset"] == off, (r["offset"], off)
        d = data_of(r, "data")
        h.update(d)
        off = r["next_offset"]
        if r["eof"]:
            break
    t2 = time.monotonic()
    want = hashlib.sha256()
    for _ in range(mib):
        want.update(zero)
    if start:
        want = hashlib.sha256(bytes(mib * MIB - start))
    assert off == mib * MIB and h.digest() == want.digest(), (off, mib * MIB)
    return mib / (t1 - t0), mib / (t2 - t0)


def ct_ticks(c, sid):
    """utime + stime + cutime + cstime of every process in the container (clock ticks)."""
    r = c.call("sandbox.exec", {"id": sid, "command": "cat /proc/[0-9]*/stat 2>/dev/null"})
    n = 0
    for line in data_of(r, "stdout").decode(errors="replace").splitlines():
        f = line.rsplit(")", 1)[-1].split()
        if len(f) > 14:
            n += sum(int(x) for x in f[11:15])
    return n


def idle_cpu(c, sid):
    p = c.call("process.start", {"id": sid, "command": "exec sleep 1000"})["process"]
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    a = ct_ticks(c, sid)
    c.call("process.read", {"id": sid, "process": p, "wait_ms": 3000})
    b = ct_ticks(c, sid)
    c.call("process.read", {"id": sid, "process": p})
    d = ct_ticks(c, sid)
    c.call("process.kill", {"id": sid, "process": p})
    return max(0.0, ((b - a) - (d - b)) * tick_ms)


def longpoll(env, c, sid, vmid, n):
    fifo_in_ct = "/root/bench-feed"
    host_fifo = os.path.join(env.sim.state_dir, "ct", str(vmid), "rootfs", fifo_in_ct.lstrip("/"))
    os.mkfifo(host_fifo)
    p = c.call("process.start", {"id": sid, "command": f"exec cat {fifo_in_ct}"})["process"]
    feed = open(host_fifo, "wb", buffering=0)  # meets cat's open
    poll, base, execs = [], [], []
    offset = 0
    for i in range(n):
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
    return poll, base, execs


def run(a, build):
    e2elib.SANDBOXD = os.path.join(build, "daemon", "sandboxd")
    keep = a.output_max if a.output_max else a.mib + 8
    conf = {"sandbox": {"process_output_max_bytes": str(max(1, keep) * MIB)}}
    with Env(sim_config=dict(ZERO, template_os=a.template_os), daemon_config=conf,
             log_level="info") as env:
        c = env.client()
        sb = c.call("sandbox.create", {"ttl_s": 3600})
        sid = sb["id"]
        res = {"floor": floor(c, sid, a.mib), "capture": capture(c, sid, a.mib)}
        res["poll"], res["base"], res["exec"] = longpoll(env, c, sid, sb["vmid"], a.n)
        res["idle"] = idle_cpu(c, sid)
        c.call("sandbox.destroy", {"id": sid})
        c.close()
    return res


def show(name, r):
    cap, back = r["capture"]
    poll = r["poll"]
    print(f"[{name}]")
    print(f"capture {cap:.1f} MiB/s (start -> exited, all recorded); with the read back {back:.1f} MiB/s")
    print(f"floor: dd | cat > file in one exec {r['floor']:.1f} MiB/s; capture / floor {cap / r['floor']:.2f}")
    print(f"long-poll byte -> client     {ms(poll)}  mean {statistics.mean(poll) * 1000:.2f} ms")
    print(f"process.read, data there     {ms(r['base'])}")
    print(f"sandbox.exec true            {ms(r['exec'])}")
    print(f"long-poll p50 / plain read p50: {pct(poll, 50) / pct(r['base'], 50):.2f}")
    print(f"container CPU during a 3 s idle long-poll: {r['idle']:.0f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--output-max", type=int, default=0,
                    help="process_output_max_bytes in MiB (default: --mib + 8, everything kept)")
    ap.add_argument("--template-os", default="busybox", choices=["busybox", "debian"])
    ap.add_argument("--base", help="another build dir whose daemon is measured the same way")
    a = ap.parse_args()
    new = run(a, e2elib.BUILD)
    show(f"{e2elib.BUILD}, {a.template_os}", new)
    if a.base:
        old = run(a, a.base)
        show(f"{a.base}, {a.template_os}", old)
        print(f"capture: {new['capture'][0] / old['capture'][0]:.1f}x; with the read back "
              f"{new['capture'][1] / old['capture'][1]:.1f}x; long-poll p50 "
              f"{pct(old['poll'], 50) / pct(new['poll'], 50):.2f}x faster, p99 "
              f"{pct(old['poll'], 99) / pct(new['poll'], 99):.2f}x")


if __name__ == "__main__":
    main()
