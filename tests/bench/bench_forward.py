#!/usr/bin/env python3
"""Benchmark of port forwards (sandbox.forward) against pve-sim (root), one run, figures on
stdout. Inside one busybox sandbox: an echo server (`nc -ll -e cat`), a source of N MiB of
zeroes and a sink that counts what it got. Each is reached three ways:

  direct     a TCP connection from the host to the container's address (a firewall rule
             of the container lets the benchmark's ports in)
  fwd-unix   through the forward's Unix socket (the daemon relays over SSH direct-tcpip)
  fwd-tcp    through a forward on a loopback TCP port
  preview    through the preview listener ([preview] listen, plain HTTP): the connection's
             first bytes are an HTTP request head with the preview's cookie, then the
             relay carries the raw bytes as a forward's does (the echo returns the head
             first, the sink counts it; both are accounted for)

and measured:

  down MiB/s   N MiB from the sandbox to the host (connection included)
  up MiB/s     N MiB from the host into the sandbox, until the sink reports the count
  rtt p50/p99  1-byte round trips on one open connection (microseconds)
  connect p50  a new connection and its first echoed byte (milliseconds)

The forward's data is encrypted and carried over a second hop (daemon <-> sshd), so it is
expected to be slower than direct; a debug/sanitizer build is much slower than release.

Usage: SANDBOXD_BUILD_ROOT=BUILD tests/bench/bench_forward.py [--mib N] [--rtts N]
   or: meson test -C BUILD --benchmark --suite forward-bench --verbose"""

import argparse
import functools
import os
import socket
import statistics
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2elib import Env, free_port  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001
ECHO, SOURCE, SINK = 9000, 9001, 9002
# the preview's source reads the request head first: one that closes with it unread would
# reset the connection and lose what it sent
HEAD_SOURCE = 9003


def preview_head(where):
    """where: "preview|LISTEN_PORT|HOST|TOKEN|SANDBOX_PORT": the head sent first."""
    _, _, host, token, _ = where.split("|")
    return (f"GET / HTTP/1.1\r\nHost: {host}\r\n"
            f"Cookie: sandboxd_preview={token}\r\n\r\n").encode()


def connect(where, timeout=30):
    if where.startswith("preview|"):
        lport, sport = int(where.split("|")[1]), int(where.split("|")[4])
        s = socket.create_connection(("127.0.0.1", lport), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = preview_head(where)
        s.sendall(head)
        if sport == ECHO:  # the echo sends the head back first
            got = b""
            while len(got) < len(head):
                d = s.recv(len(head) - len(got))
                assert d, (where, got)
                got += d
        return s
    if where.startswith("/"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(where)
        return s
    host, port = where.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def down(where, nbytes):
    t0 = time.perf_counter()
    s = connect(where)
    got = 0
    while True:
        d = s.recv(1 << 20)
        if not d:
            break
        got += len(d)
    s.close()
    assert got == nbytes, (where, got, nbytes)
    return nbytes / (1 << 20) / (time.perf_counter() - t0)


def up(where, nbytes):
    chunk = b"\0" * (1 << 20)
    t0 = time.perf_counter()
    s = connect(where)
    left = nbytes
    while left:
        n = s.send(chunk[:min(left, len(chunk))])
        left -= n
    s.shutdown(socket.SHUT_WR)
    reply = b""
    while True:
        d = s.recv(100)
        if not d:
            break
        reply += d
    s.close()
    extra = len(preview_head(where)) if where.startswith("preview|") else 0
    assert int(reply.split()[0]) == nbytes + extra, (where, reply)
    return nbytes / (1 << 20) / (time.perf_counter() - t0)


def rtts(where, n):
    s = connect(where)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        s.sendall(b"x")
        assert s.recv(1) == b"x"
        out.append((time.perf_counter() - t0) * 1e6)
    s.close()
    out.sort()
    return out[len(out) // 2], out[min(len(out) - 1, int(len(out) * 0.99))]


def connects(where, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        s = connect(where)
        s.sendall(b"y")
        assert s.recv(1) == b"y"
        out.append((time.perf_counter() - t0) * 1e3)
        s.close()
        time.sleep(0.02)  # busybox nc's listen backlog is tiny
    return statistics.median(out)


def wait_reachable(where, timeout=60):
    deadline = time.time() + timeout
    while True:
        try:
            s = connect(where, timeout=2)
            s.sendall(b"z")
            if s.recv(1) == b"z":
                s.close()
                return
        except OSError:
            if time.time() > deadline:
                raise
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--rtts", type=int, default=2000)
    ap.add_argument("--connects", type=int, default=50)
    a = ap.parse_args()
    nbytes = a.mib << 20
    lport = free_port()
    conf = {"preview": {"listen": f"127.0.0.1:{lport}",
                        "base_url": f"http://{{port}}-{{id}}.preview.test:{lport}"}}
    with Env(sim_config={"firewall_period": 1}, daemon_config=conf) as env:
        c = env.client()
        sb = c.call("sandbox.create", {"ttl_s": 3600})
        sid = sb["id"]
        for cmd in (f"nc -ll -p {ECHO} -e cat",
                    f"nc -ll -p {SOURCE} -e head -c {nbytes} /dev/zero",
                    f"nc -ll -p {SINK} -e wc -c",
                    f"nc -ll -p {HEAD_SOURCE} -e sh -c 'while read -r l; do "
                    f"[ \"$l\" = \"$(printf \"\\r\")\" ] && break; done; "
                    f"head -c {nbytes} /dev/zero'"):
            c.call("process.start", {"id": sid, "command": cmd})
        vmid = next(iter(env.containers()))
        for port in (ECHO, SOURCE, SINK):
            env.sim.ok("POST", f"/nodes/pve/lxc/{vmid}/firewall/rules",
                       {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": str(port),
                        "enable": "1", "pos": "0"})
        ways = {"direct": {p: f"{sb['ip']}:{p}" for p in (ECHO, SOURCE, SINK)},
                "fwd-unix": {}, "fwd-tcp": {}, "preview": {}}
        for p in (ECHO, SOURCE, SINK):
            ways["fwd-unix"][p] = c.call("sandbox.forward", {"id": sid, "port": p})["socket"]
            ways["fwd-tcp"][p] = c.call("sandbox.forward", {"id": sid, "port": p,
                                                           "listen": "127.0.0.1:0"})["address"]
            pp = HEAD_SOURCE if p == SOURCE else p
            u = urllib.parse.urlsplit(c.call("sandbox.preview", {"id": sid, "port": pp})["url"])
            tok = urllib.parse.parse_qs(u.query)["sandboxd_preview"][0]
            ways["preview"][p] = f"preview|{lport}|{u.netloc}|{tok}|{p}"
        for w in ways.values():
            wait_reachable(w[ECHO])
        print(f"{a.mib} MiB each way, {a.rtts} round trips, {a.connects} connects; sandbox {sid}")
        print(f"{'path':10} {'down MiB/s':>11} {'up MiB/s':>9} {'rtt p50 us':>11} "
              f"{'rtt p99 us':>11} {'connect p50 ms':>15}")
        for name, w in ways.items():
            d = down(w[SOURCE], nbytes)
            u = up(w[SINK], nbytes)
            p50, p99 = rtts(w[ECHO], a.rtts)
            cp = connects(w[ECHO], a.connects)
            print(f"{name:10} {d:11.1f} {u:9.1f} {p50:11.0f} {p99:11.0f} {cp:15.2f}")
        c.close()


if __name__ == "__main__":
    main()
