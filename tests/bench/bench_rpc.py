#!/usr/bin/env python3
"""JSON-RPC CPU per request against pve-sim (root), one run, figures on stdout.

The server's CPU time (utime + stime of /proc/PID/stat, every thread) over N sequential
requests on one connection, divided by N, for three requests:

  daemon.status   a small reply
  sandbox.get     a sandbox's record (one READY sandbox of the busybox template)
  file.read       a 1 MiB file of random bytes: a 1.4 MiB reply (content_b64)

Servers, measured one after the other in the same run:

  sandboxd        the daemon of SANDBOXD_BUILD_ROOT
  baseline        another sandboxd binary (--baseline PATH, e.g. main's release build)
  asyncio         the reference: a small Python asyncio JSON-RPC server on a Unix socket
                  answering the same three requests with replies of the same shape and size
                  (the results the daemon gave, rebuilt and serialised per request; the
                  file read from the container's root file system and base64-encoded per
                  request)

Each (server, request) is measured --rounds times, the servers in turn within each round (the
daemons restarted in turn, each with a sandbox of its own); the median is printed with the
ratio asyncio / server (above 1: the server spends less CPU per request than asyncio).
The daemon's file.read includes reading the file over SSH from the container, which the
reference does not do (it reads the host's copy of the same file).

Usage: bench_rpc.py [--n N] [--n-read N] [--rounds R] [--baseline PATH]
Best on release builds:
  meson setup BUILD-rel -Dbuildtype=release && ninja -C BUILD-rel
  SANDBOXD_BUILD_ROOT=BUILD-rel tests/bench/bench_rpc.py --baseline OTHER/daemon/sandboxd"""

import argparse
import asyncio
import base64
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import e2elib  # noqa: E402
from e2elib import Env  # noqa: E402

ZERO = {"dhcp_delay": 0, "clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0}
FILE_IN_CT = "/root/bench-rpc-1m"
FILE_BYTES = 1024 * 1024
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of every thread of pid, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK


class Conn:
    """A plain NDJSON client: one request at a time, reply read whole."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""
        self.id = 0

    def call(self, method, params=None):
        self.id += 1
        req = {"jsonrpc": "2.0", "id": self.id, "method": method}
        if params is not None:
            req["params"] = params
        self.s.sendall(json.dumps(req, separators=(",", ":")).encode() + b"\n")
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 1:]
                return line
            chunk = self.s.recv(4 << 20)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buf += chunk

    def close(self):
        self.s.close()


def requests(sid):
    return [("daemon.status", None), ("sandbox.get", {"id": sid}),
            ("file.read", {"id": sid, "path": FILE_IN_CT})]


def measure(name, path, pid, sid, a, table, sizes, rounds=1):
    """rounds rounds of every request on one connection, appended to table."""
    c = Conn(path)
    try:
        for method, params in requests(sid):
            n = a.n_read if method == "file.read" else a.n
            line = c.call(method, params)  # warm-up, and the reply's size
            reply = json.loads(line)
            if "result" not in reply:
                raise RuntimeError(f"{name} {method}: {line[:300]!r}")
            sizes[(name, method)] = len(line) + 1
            for _ in range(rounds):
                t0 = cpu_seconds(pid)
                for _ in range(n):
                    c.call(method, params)
                table.setdefault((name, method), []).append((cpu_seconds(pid) - t0) / n)
    finally:
        c.close()


def capture(path, sid):
    """The results the daemon gives, for the reference to answer with."""
    c = Conn(path)
    try:
        return {m: json.loads(c.call(m, p))["result"] for m, p in requests(sid)}
    finally:
        c.close()


# ---- the asyncio reference (run as a process of its own: --serve) ----

def serve(sock, results_file, host_file):
    with open(results_file) as f:
        results = json.load(f)

    def result_for(req):
        method = req.get("method")
        if method == "file.read":
            with open(host_file, "rb") as f:
                data = f.read()
            r = dict(results["file.read"])
            r["content_b64"] = base64.b64encode(data).decode()
            r["size"] = len(data)
            return r
        return json.loads(json.dumps(results[method]))  # built afresh, like the daemon's

    async def handle(reader, writer):
        while True:
            line = await reader.readline()
            if not line:
                break
            req = json.loads(line)
            reply = {"jsonrpc": "2.0", "id": req.get("id"), "result": result_for(req)}
            writer.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
            await writer.drain()
        writer.close()

    async def main():
        server = await asyncio.start_unix_server(handle, path=sock, limit=1 << 20)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def start_reference(tmp, results, host_file):
    results_file = os.path.join(tmp, "results.json")
    with open(results_file, "w") as f:
        json.dump(results, f)
    sock = os.path.join(tmp, "ref.sock")
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", sock, results_file,
                          host_file])
    for _ in range(200):
        if os.path.exists(sock):
            return p, sock
        time.sleep(0.05)
    p.kill()
    raise RuntimeError("the asyncio reference did not come up")


def run_daemon(env, name, a, table, sizes):
    """One round of the daemon running in env (a sandbox made for it, destroyed after)."""
    c = env.client()
    sb = c.call("sandbox.create", {})
    sid, vmid = sb["id"], sb["vmid"]
    host_file = os.path.join(env.sim.state_dir, "ct", str(vmid), "rootfs", FILE_IN_CT.lstrip("/"))
    with open(host_file, "wb") as f:
        f.write(os.urandom(FILE_BYTES))
    results = capture(env.socket, sid)
    with open(host_file, "rb") as f:
        assert base64.b64decode(results["file.read"]["content_b64"]) == f.read()
    measure(name, env.socket, env.proc.pid, sid, a, table, sizes)
    with open(host_file, "rb") as f:
        saved = f.read()
    c.call("sandbox.destroy", {"id": sid})
    c.close()
    return results, saved


def switch_daemon(env, path):
    """Runs the daemon binary path in env instead of the one running (a fresh state folder)."""
    env.stop_daemon()
    shutil.rmtree(env.dir, ignore_errors=True)
    e2elib.SANDBOXD = path
    env.start_daemon()


def report(table, sizes, servers):
    methods = [m for m, _ in requests("")]
    print(f"\nCPU per request (median of rounds, µs; reply bytes in brackets)")
    print(f"{'request':<15}" + "".join(f"{s:>22}" for s in servers)
          + "".join(f"{'asyncio/' + s:>18}" for s in servers if s != "asyncio"))
    for m in methods:
        row = f"{m:<15}"
        med = {s: statistics.median(table[(s, m)]) * 1e6 for s in servers}
        for s in servers:
            row += f"{med[s]:>12.1f} [{sizes[(s, m)]:>7}]"
        for s in servers:
            if s != "asyncio":
                row += f"{med['asyncio'] / med[s]:>17.2f}x"
        print(row)
    if "baseline" in servers:
        print("\nsandboxd / baseline: " + ", ".join(
            f"{m} {statistics.median(table[('sandboxd', m)]) / statistics.median(table[('baseline', m)]):.2f}"
            for m in methods))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        serve(*sys.argv[2:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000, help="requests per round (status, get)")
    ap.add_argument("--n-read", type=int, default=300, help="requests per round (file.read)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="another sandboxd binary to measure in the same run")
    a = ap.parse_args()
    table, sizes = {}, {}
    daemons = [("sandboxd", e2elib.SANDBOXD)]
    if a.baseline:
        daemons.append(("baseline", os.path.abspath(a.baseline)))
    tmp = tempfile.mkdtemp(prefix="bench-rpc-")
    ref = None
    try:
        with Env(sim_config=ZERO, log_level="info") as env:
            running = daemons[0][1]
            for r in range(a.rounds):
                # Every server in turn in each round, so that a slow spell of the host lands
                # on one round of each rather than on every round of one server.
                for name, path in daemons:
                    if path != running:
                        switch_daemon(env, path)
                        running = path
                    if r == 0:
                        print(f"{name}: {path}", flush=True)
                    results, data = run_daemon(env, name, a, table, sizes)
                if ref is None:
                    host_file = os.path.join(tmp, "file")
                    with open(host_file, "wb") as f:
                        f.write(data)
                    ref, sock = start_reference(tmp, results, host_file)
                    print("asyncio: the reference server", flush=True)
                measure("asyncio", sock, ref.pid, "-", a, table, sizes)
    finally:
        if ref:
            ref.terminate()
            ref.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    report(table, sizes, [n for n, _ in daemons] + ["asyncio"])


if __name__ == "__main__":
    main()
