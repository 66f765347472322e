#!/usr/bin/env python3
"""The preview listener under attack, against the simulator: 10,000 connections opened and
held (past max_pending the rest are accepted and closed), garbage, slowloris heads dripped a
byte at a time (closed after header_timeout_ms), huge heads (431), and hang-ups half-way
through a head; then, with TLS, garbage handshakes, handshakes dripped a byte at a time or
left half done, and 2,000 held connections. Meanwhile another client's sandbox.exec still answers at once and, once the
flood's slots are free again, a preview page is served; afterwards the daemon's descriptors
come back and its resident memory growth stays bounded."""

import os
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

from stresslib import FD_SLACK, fds, fds_back, rss_kib  # noqa: E402,F401

import e2elib  # noqa: E402
from e2elib import Env, dripping, free_port, run  # noqa: E402

MAX_PENDING = 256
HEADER_TIMEOUT_MS = 2000
N_FLOOD = 10000


LPORT = free_port()


def connect(timeout=10):
    return socket.create_connection(("127.0.0.1", LPORT), timeout=timeout)


def recv_all(s):
    return e2elib.recv_all(s, ends=(OSError, socket.timeout))


def tls_attacks():
    """A daemon of its own with [preview] tls_certificate: garbage instead of a ClientHello,
    a ClientHello dripped a byte at a time, handshakes abandoned half-way, 2,000 held
    connections; a good HTTPS client is served after each and the descriptors come back."""
    d = tempfile.mkdtemp(prefix="sandboxd-preview-stress-")
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=*.preview.test", "-addext", "subjectAltName=DNS:*.preview.test",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    port = free_port()
    conf = {"preview": {"listen": f"127.0.0.1:{port}",
                        "base_url": f"https://{{port}}-{{id}}.preview.test:{port}",
                        "max_pending": str(MAX_PENDING),
                        "header_timeout_ms": str(HEADER_TIMEOUT_MS),
                        "tls_certificate": cert, "tls_key": key}}
    ctx = ssl.create_default_context(cafile=cert)
    with Env(daemon_config=conf) as env:
        c = env.client()
        sid = c.call("sandbox.create", {"ttl_s": 900})["id"]
        c.call("file.write", {"id": sid, "path": "/root/www/index.html", "content": "page\n"})
        c.call("process.start", {"id": sid, "command": "httpd -f -p 8080 -h /root/www"})
        u = urllib.parse.urlsplit(c.call("sandbox.preview", {"id": sid, "port": 8080})["url"])
        token = urllib.parse.parse_qs(u.query)["sandboxd_preview"][0]
        head = (f"GET /index.html HTTP/1.1\r\nHost: {u.netloc}\r\nConnection: close\r\n"
                f"Cookie: sandboxd_preview={token}\r\n\r\n").encode()

        def raw(timeout=10):
            return socket.create_connection(("127.0.0.1", port), timeout=timeout)

        def page():
            try:
                s = ctx.wrap_socket(raw(), server_hostname=u.hostname)
                s.sendall(head)
                out = recv_all(s)
                s.close()
            except OSError:
                return False
            return out.startswith(b"HTTP/1.") and out.endswith(b"page\n")

        deadline = time.time() + 30
        while not page():
            assert time.time() < deadline
            time.sleep(0.2)
        base = fds(env)
        for _ in range(200):  # garbage where a ClientHello belongs
            s = raw()
            s.sendall(os.urandom(2048))
            recv_all(s)
            s.close()
        assert page()
        hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(500)
        slow = [raw(timeout=30) for _ in range(50)]
        for i in range(10):
            for s in slow:
                try:
                    s.send(hello[i:i + 1])
                except OSError:
                    pass
            time.sleep(0.1)
        assert page()
        half = []
        for _ in range(100):  # a real ClientHello, then nothing
            s = raw()
            inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
            obj = ctx.wrap_bio(inc, out, server_hostname=u.hostname)
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
            s.sendall(out.read())
            half.append(s)
        held = [raw() for _ in range(2000)]
        t0 = time.time()
        r = c.call("sandbox.exec", {"id": sid, "command": "echo up"}, timeout=60)
        assert r["stdout"] == "up\n", r
        print(f"     TLS: exec {1000 * (time.time() - t0):.0f} ms with 2,000 held", flush=True)
        time.sleep(HEADER_TIMEOUT_MS / 1000 + 1)
        assert page()
        for s in slow + half + held:
            s.close()
        fds_back(env, base, 20)


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, N_FLOOD + 2048)), hard))
    conf = {"preview": {"listen": f"127.0.0.1:{LPORT}",
                        "base_url": f"http://{{port}}-{{id}}.preview.test:{LPORT}",
                        "max_pending": str(MAX_PENDING),
                        "header_timeout_ms": str(HEADER_TIMEOUT_MS)}}
    with Env(daemon_config=conf) as env:
        c = env.client()
        sid = c.call("sandbox.create", {"ttl_s": 900})["id"]
        c.call("file.write", {"id": sid, "path": "/root/www/index.html", "content": "page\n"})
        c.call("process.start", {"id": sid, "command": "httpd -f -p 8080 -h /root/www"})
        url = c.call("sandbox.preview", {"id": sid, "port": 8080})["url"]
        u = urllib.parse.urlsplit(url)
        token = urllib.parse.parse_qs(u.query)["sandboxd_preview"][0]
        head = (f"GET /index.html HTTP/1.1\r\nHost: {u.netloc}\r\nConnection: close\r\n"
                f"Cookie: sandboxd_preview={token}\r\n\r\n").encode()
        other = env.client()

        def exec_answers(limit_s=10):
            t0 = time.time()
            r = other.call("sandbox.exec", {"id": sid, "command": "echo up"}, timeout=60)
            took = time.time() - t0
            assert r["stdout"] == "up\n" and took < limit_s, (r, took)
            return took

        def page():
            try:
                s = connect()
                s.sendall(head)
                out = recv_all(s)
                s.close()
            except OSError:
                return False
            return out.startswith(b"HTTP/1.") and out.endswith(b"page\n")

        def page_soon(timeout=HEADER_TIMEOUT_MS / 1000 + 20):
            deadline = time.time() + timeout
            while not page():
                assert time.time() < deadline, "no page through the preview"
                time.sleep(0.2)

        page_soon(30)
        base_fds = fds(env)
        rss0 = rss_kib(env)

        def settle():

            fds_back(env, base_fds, 20)

        def ten_thousand_connections():
            held, failed = [], 0
            t0 = time.time()
            for _ in range(N_FLOOD):
                try:
                    held.append(connect(timeout=5))
                except OSError:
                    failed += 1
            print(f"     {len(held)} connected ({failed} refused) in {time.time() - t0:.1f} s",
                  flush=True)
            took = exec_answers()
            assert fds(env) <= base_fds + MAX_PENDING + FD_SLACK, fds(env)
            print(f"     exec {took * 1000:.0f} ms during the flood, daemon fds {fds(env)}",
                  flush=True)
            page_soon()  # once header_timeout_ms frees the slots
            for s in held:
                s.close()
            settle()

        def garbage():
            socks = []
            for _ in range(200):
                s = connect()
                s.sendall(os.urandom(4096))
                socks.append(s)
            answers = [recv_all(s) for s in socks]
            bad = [a for a in answers if a and not a.startswith(b"HTTP/1.1 400 ")]
            assert not bad, bad[:3]
            for s in socks:
                s.close()
            exec_answers()
            assert page()
            settle()

        def slowloris():
            slow = [connect(timeout=30) for _ in range(100)]
            with dripping(slow, b"X"):
                for _ in range(3):
                    exec_answers()
                    assert page()
                time.sleep(HEADER_TIMEOUT_MS / 1000 + 1)
            closed = 0
            for s in slow:
                s.settimeout(10)
                try:
                    s.send(b"X")
                    closed += recv_all(s) == b""
                except OSError:
                    closed += 1
                s.close()
            assert closed == len(slow), (closed, len(slow))
            settle()

        def huge_heads():
            for _ in range(50):
                s = connect()
                try:
                    s.sendall(b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n")
                except OSError:
                    pass
                a = recv_all(s)
                assert a == b"" or a.startswith(b"HTTP/1.1 431 "), a[:100]
                s.close()
            exec_answers()
            assert page()
            settle()

        def hangups_half_way():
            for i in range(300):
                s = connect()
                s.sendall(head[: (i * 7) % len(head)])
                s.close()
            settle()
            exec_answers()
            assert page()
            grew = rss_kib(env) - rss0
            print(f"     RSS +{grew} KiB after the attacks", flush=True)
            assert grew < 64 * 1024, grew

        run([("ten_thousand_connections", ten_thousand_connections),
             ("garbage", garbage),
             ("slowloris", slowloris),
             ("huge_heads", huge_heads),
             ("hangups_half_way", hangups_half_way),
             ("tls_attacks", tls_attacks)])


if __name__ == "__main__":
    main()
