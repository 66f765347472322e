#!/usr/bin/env python3
"""Descriptor pumps of background processes against pve-sim (root), one run, figures on stdout:

  pump   process.start of `cat` with stdin_fd and stdout_fd: --mib MiB of random bytes written
         into stdin_fd while stdout_fd is read, from the call until stdout_fd's end of file,
         the SHA-256 compared.
  exec   the baseline in the same run: sandbox.exec of `cat` with stdin_fd and stdout_fd, the
         same bytes the same way (one exec channel, no files in the container).

Both with the output retention of --output-max MiB (process_output_max_bytes). With --base
BUILD the same figures come from BUILD's daemon too and the ratios are printed.

Usage: SANDBOXD_BUILD_ROOT=BUILD bench_pump.py [--mib MIB] [--runs N] [--output-max MIB]
           [--template-os busybox|debian] [--base OTHER_BUILD]"""

import argparse
import hashlib
import json
import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import e2elib  # noqa: E402
from e2elib import Env  # noqa: E402
from test_process_fd import drain, feeder  # noqa: E402

ZERO = {"dhcp_delay": 0, "clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0}
MIB = 1 << 20


def through(c, method, params, mib):
    """MiB/s of mib MiB into stdin_fd and out of stdout_fd of method; checks the bytes."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    block = os.urandom(MIB)
    blocks = [i.to_bytes(8, "little") + block[8:] for i in range(mib)]
    sent, got = hashlib.sha256(), hashlib.sha256()
    res = {}
    t0 = time.monotonic()
    i = next(c.ids)
    line = (json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                        "params": dict(params, stdin_fd=0, stdout_fd=1)}) + "\n").encode()
    with c.lock:
        socket.send_fds(c.sock, [line], [in_r, out_w])  # a short line: sent whole
    os.close(in_r)  # the daemon holds its own copies
    os.close(out_w)
    caller = threading.Thread(target=lambda: res.setdefault("r", c.wait(i, 900)))
    caller.start()
    t = threading.Thread(target=feeder, args=(in_w, blocks, sent))
    t.start()
    n = drain(out_r, got)
    took = time.monotonic() - t0
    t.join()
    caller.join()
    os.close(out_r)
    assert "r" in res, f"{method} failed"  # its error is on the caller thread's stderr
    assert method != "sandbox.exec" or res["r"]["exit_code"] == 0, res["r"]
    assert n == mib * MIB, n
    assert got.hexdigest() == sent.hexdigest()
    return mib / took


def run(a, build):
    e2elib.SANDBOXD = os.path.join(build, "daemon", "sandboxd")
    conf = {"sandbox": {"process_output_max_bytes": str(a.output_max * MIB)}}
    res = {"pump": [], "exec": []}
    with Env(sim_config=dict(ZERO, template_os=a.template_os), daemon_config=conf,
             log_level="info") as env:
        c = env.client()
        sid = c.call("sandbox.create", {"ttl_s": 3600})["id"]
        for _ in range(a.runs):
            res["exec"].append(through(c, "sandbox.exec",
                                       {"id": sid, "command": "cat", "timeout_ms": 600000},
                                       a.mib))
            res["pump"].append(through(c, "process.start", {"id": sid, "command": "cat"},
                                       a.mib))
        c.call("sandbox.destroy", {"id": sid})
        c.close()
    return res


def show(name, r):
    print(f"[{name}]")
    for k in ("pump", "exec"):
        v = r[k]
        print(f"{k:5} {max(v):7.1f} MiB/s best of {len(v)} ({', '.join(f'{x:.1f}' for x in v)})")
    print(f"pump / exec {max(r['pump']) / max(r['exec']):.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--output-max", type=int, default=1, help="process_output_max_bytes in MiB")
    ap.add_argument("--template-os", default="busybox", choices=["busybox", "debian"])
    ap.add_argument("--base", help="another build dir whose daemon is measured the same way")
    a = ap.parse_args()
    new = run(a, e2elib.BUILD)
    show(f"{e2elib.BUILD}, {a.template_os}, {a.mib} MiB, retention {a.output_max} MiB", new)
    if a.base:
        old = run(a, a.base)
        show(f"{a.base}, {a.template_os}, {a.mib} MiB, retention {a.output_max} MiB", old)
        print(f"pump: {max(new['pump']) / max(old['pump']):.1f}x")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
