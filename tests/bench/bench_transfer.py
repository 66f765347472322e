#!/usr/bin/env python3
"""Transfers through passed descriptors against pve-sim (root), one run, figures on stdout:
`sandboxctl put` / `sandboxctl get` of 64 MiB and 512 MiB files beside `scp` of the same
file to the same container (connection included on both sides: each is one process run),
and the daemon's peak RSS growth during the sandboxctl transfers (VmHWM after resetting it,
minus VmRSS before).

Goals: sandboxctl >= 80 % of scp's throughput; RSS growth < 8 MiB.

Usage: bench_transfer.py [--sizes 64,512] [--runs 3]   (sizes in MiB; best of runs)"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2elib import BUILD, Env  # noqa: E402

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def timed(argv, env=None):
    t = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - t


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,512")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    zero = {"dhcp_delay": 0, "clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0}
    with Env(sim_config=zero, log_level="info") as env, \
            tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        c = env.client()
        pid = env.proc.pid
        sb = c.call("sandbox.create", {})
        ip = sb["ip"]
        kh = os.path.join(env.dir, "known_hosts")
        tmpl = str(env.sim.info.get("template", 9000))
        with open(kh, "w") as f:
            f.write(f"{ip} {env.sim.info['templates'][tmpl]['host_key_pub']}\n")
        ssh_opts = ["-i", env.sim.key, "-o", f"UserKnownHostsFile={kh}", "-o",
                    "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]
        cenv = dict(os.environ, SANDBOXD_SOCKET=env.socket)
        print(f"sandboxd build: {BUILD}")
        for mib in (int(x) for x in a.sizes.split(",")):
            src = os.path.join(tmp, "src")
            with open(src, "wb") as f:
                block = os.urandom(1 << 20)
                for i in range(mib):
                    f.write(i.to_bytes(8, "little") + block[8:])
            digest = sha(src)
            size = mib << 20
            put, get, sput, sget, grow = [], [], [], [], []
            for _ in range(a.runs):
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")
                rss0 = status_kib(pid, "VmRSS")
                put.append(timed([SANDBOXCTL, "put", sb["id"], src, "/root/b"], cenv))
                get.append(timed([SANDBOXCTL, "get", sb["id"], "/root/b", src + ".back"], cenv))
                grow.append(status_kib(pid, "VmHWM") - rss0)
                assert sha(src + ".back") == digest
                os.unlink(src + ".back")
                sput.append(timed(["scp", "-q"] + ssh_opts + [src, f"root@{ip}:/root/s"]))
                sget.append(timed(["scp", "-q"] + ssh_opts + [f"root@{ip}:/root/s", src + ".s"]))
                os.unlink(src + ".s")
            mb = size / 1e6
            print(f"{mib} MiB (best of {a.runs}):")
            print(f"  put: sandboxctl {mb / min(put):7.1f} MB/s   scp {mb / min(sput):7.1f} MB/s   "
                  f"ratio {min(sput) / min(put) * 100:5.1f} % (goal >= 80 %)")
            print(f"  get: sandboxctl {mb / min(get):7.1f} MB/s   scp {mb / min(sget):7.1f} MB/s   "
                  f"ratio {min(sget) / min(get) * 100:5.1f} % (goal >= 80 %)")
            print(f"  daemon peak RSS growth during put+get: max {max(grow) / 1024:.1f} MiB "
                  f"(goal < 8 MiB)")
            os.unlink(src)
        c.call("sandbox.destroy", {"id": sb["id"]})


if __name__ == "__main__":
    main()
