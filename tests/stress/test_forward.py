#!/usr/bin/env python3
"""Port forwards under attack, against the simulator: a flood of connections past
max_connections (the rest accepted and closed), connections that send garbage or one byte
at a time (slowloris) and stay, clients that never read while the sandbox sends them a lot
(back-pressure: the daemon's memory stays bounded), and hang-ups mid-transfer. Meanwhile
another client's sandbox.exec still answers at once; afterwards the daemon's descriptors
come back and its resident memory growth stays within the buffers the limits allow."""

import os
import socket
import sys
import time

from stresslib import FD_SLACK, fds, fds_back, rss_kib  # noqa: E402,F401

from e2elib import Env, dripping, run  # noqa: E402

MAX_CONN = 64
BUFFER = 65536


def connect(path, timeout=10):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s


def main():
    conf = {"forward": {"max_connections": str(MAX_CONN), "buffer_bytes": str(BUFFER)}}
    with Env(daemon_config=conf) as env:
        c = env.client()
        sid = c.call("sandbox.create", {"ttl_s": 900})["id"]
        c.call("file.write", {"id": sid, "path": "/root/www/index.html", "content": "page\n"})
        c.call("process.start", {"id": sid, "command": "httpd -f -p 8080 -h /root/www"})
        c.call("process.start", {"id": sid, "command": "nc -ll -p 9001 -e cat /dev/zero"})
        http = c.call("sandbox.forward", {"id": sid, "port": 8080})["socket"]
        source = c.call("sandbox.forward", {"id": sid, "port": 9001})["socket"]
        other = env.client()

        def exec_answers(limit_s=10):
            t0 = time.time()
            r = other.call("sandbox.exec", {"id": sid, "command": "echo up"}, timeout=60)
            took = time.time() - t0
            assert r["stdout"] == "up\n" and took < limit_s, (r, took)
            return took

        def page():
            s = connect(http)
            s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
            out = b""
            while True:
                d = s.recv(4096)
                if not d:
                    break
                out += d
            s.close()
            return out.endswith(b"page\n")

        deadline = time.time() + 30
        while not page():
            assert time.time() < deadline
            time.sleep(0.2)
        base_fds = fds(env)

        def settle():

            fds_back(env, base_fds, 20)

        def flood_past_max_connections():
            held = []
            for _ in range(1000):
                try:
                    held.append(connect(http, timeout=5))
                except OSError:
                    pass
            print(f"     {len(held)} connected", flush=True)
            exec_answers()
            lst = c.call("sandbox.forwards", {"id": sid})["forwards"]
            assert max(f["connections"] for f in lst) <= MAX_CONN, lst
            for s in held:
                s.close()
            settle()
            assert page()

        def garbage_and_slowloris():
            junk = []
            for _ in range(40):
                s = connect(http)
                s.sendall(os.urandom(8192))
                junk.append(s)
            slow = [connect(http) for _ in range(20)]
            with dripping(slow, b"G"):
                for _ in range(5):
                    exec_answers()
                    time.sleep(0.3)
            for s in junk + slow:
                s.close()
            settle()
            assert page()

        def readers_that_never_read():
            rss0 = rss_kib(env)
            held = [connect(source) for _ in range(20)]
            time.sleep(3)  # every connection's buffers fill up, then the sandbox is held back
            grew = rss_kib(env) - rss0
            took = exec_answers()
            # per connection: our buffers (2 x BUFFER) and what libssh keeps of the channel's
            # window (its buffers grow by doubling: up to about 4 MiB), with room for the
            # allocator; nothing like the gigabytes the sandbox would send
            bound = 20 * (2 * BUFFER + 4 * 1024 * 1024) // 1024 + 16 * 1024
            print(f"     RSS +{grew} KiB (bound {bound}), exec {took * 1000:.0f} ms", flush=True)
            assert grew < bound, (grew, bound)
            rss1 = rss_kib(env)
            time.sleep(2)
            assert rss_kib(env) - rss1 < 4096, "memory still growing while nobody reads"
            for s in held:
                s.close()
            settle()

        def hangups_mid_transfer():
            for _ in range(50):
                s = connect(source)
                s.recv(1000)
                s.close()
            for _ in range(50):
                s = connect(http)
                s.sendall(b"GET /index.html HTTP/1.0\r\n")
                s.close()
            settle()
            exec_answers()
            assert page()

        run([("flood_past_max_connections", flood_past_max_connections),
             ("garbage_and_slowloris", garbage_and_slowloris),
             ("readers_that_never_read", readers_that_never_read),
             ("hangups_mid_transfer", hangups_mid_transfer)])


if __name__ == "__main__":
    main()
