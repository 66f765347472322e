#!/usr/bin/env python3
"""Preview URLs (sandbox.preview): the URL's token in the query gets a 302 setting the cookie;
with the cookie, a page served by busybox httpd inside a sandbox and a WebSocket upgrade (the
101 and its Sec-WebSocket-Accept computed in the sandbox) with frames echoed both ways come
through the listener; 403 without the token, with a forged one, with another port's, after
expiry, after unpreview (the relayed connection closed too) and after destroy; 404 for a Host
outside base_url's pattern; garbage gets 400, a huge head 431, a slow head is closed after
header_timeout_ms, and none of them stalls a good client; the method's limits; the signing key
is made in the state folder."""

import base64
import hashlib
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

import e2elib
from e2elib import Env, expect_error, free_port, recv_all, run, ws_echo

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "clients", "python"))
import sandboxd  # noqa: E402

PAGE = b"hello from the preview\n" * 50
HTTP_PORT, WS_PORT = 8080, 9001
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

# A WebSocket handshake in busybox sh: reads the request head, answers 101 with the accept
# key, then echoes the frames' bytes (cat).
WS_SH = r"""#!/bin/sh
key=
while IFS= read -r line; do
  line=$(printf '%s' "$line" | tr -d '\r')
  [ -z "$line" ] && break
  case "$line" in Sec-WebSocket-Key:*) key=$(printf '%s' "${line#*:}" | tr -d ' ');; esac
done
hex=$(printf '%s' "${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11" | sha1sum | cut -d' ' -f1)
acc=$(printf "$(printf '%s' "$hex" | sed 's/../\\x&/g')" | base64)
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n' "$acc"
exec cat
"""


LPORT = free_port()
BASE = f"http://{{port}}-{{id}}.preview.test:{LPORT}"


TLS = {}  # "ctx": the client's SSLContext while the TLS daemon runs


def request(raw, timeout=20, server_hostname=None):
    s = socket.create_connection(("127.0.0.1", LPORT), timeout=timeout)
    if "ctx" in TLS:
        s = TLS["ctx"].wrap_socket(s, server_hostname=server_hostname or "x.preview.test")
    try:
        s.sendall(raw)
        return recv_all(s)
    finally:
        s.close()


def get(host, target="/", cookie=None, extra=b""):
    head = f"GET {target} HTTP/1.1\r\nHost: {host}:{LPORT}\r\nConnection: close\r\n".encode()
    if cookie:
        head += f"Cookie: a=b; sandboxd_preview={cookie}\r\n".encode()
    return request(head + extra + b"\r\n", server_hostname=host)


def status(resp):
    line = resp.split(b"\r\n", 1)[0]
    assert line.startswith(b"HTTP/1.1 "), resp[:200]
    return int(line.split()[1])


def split_url(url):
    u = urllib.parse.urlsplit(url)
    q = urllib.parse.parse_qs(u.query)
    return u.hostname, q["sandboxd_preview"][0]


def serving_sandbox(c):
    """A new sandbox serving PAGE on HTTP_PORT and WebSocket echoes on WS_PORT."""
    sid = c.call("sandbox.create", {"ttl_s": 900})["id"]
    c.call("file.write", {"id": sid, "path": "/root/www/index.html", "content": PAGE.decode()})
    c.call("file.write", {"id": sid, "path": "/root/ws.sh", "content": WS_SH, "mode": "0755"})
    c.call("process.start", {"id": sid, "command": f"httpd -f -p {HTTP_PORT} -h /root/www"})
    c.call("process.start", {"id": sid, "command": f"nc -ll -p {WS_PORT} -e /root/ws.sh"})
    return sid


def main():
    conf = {"preview": {"listen": f"127.0.0.1:{LPORT}", "base_url": BASE, "max_per_sandbox": "4",
                        "max_ttl_s": "3600", "header_timeout_ms": "1000", "max_pending": "64"}}
    with Env(daemon_config=conf) as env:
        c = env.client()
        sid = serving_sandbox(c)
        pv = c.call("sandbox.preview", {"id": sid, "port": HTTP_PORT, "ttl_s": 600})
        host, token = split_url(pv["url"])

        def url_and_redirect():
            assert set(pv) == {"preview", "port", "url", "expires_at"}, pv
            assert pv["preview"].startswith("pv-") and pv["port"] == HTTP_PORT, pv
            assert host == f"{HTTP_PORT}-{sid}.preview.test", pv["url"]
            assert pv["url"].startswith(f"http://{host}:{LPORT}/?sandboxd_preview="), pv["url"]
            assert abs(pv["expires_at"] - (time.time() + 600)) < 30, pv
            resp = get(host, f"/index.html?x=1&sandboxd_preview={token}")
            assert status(resp) == 302, resp
            hdrs = resp.split(b"\r\n\r\n")[0].decode()
            assert "\r\nLocation: /index.html?x=1\r\n" in hdrs, hdrs
            assert f"Set-Cookie: sandboxd_preview={token}; Path=/;" in hdrs, hdrs
            assert "HttpOnly" in hdrs and "SameSite=Lax" in hdrs and "Secure" not in hdrs, hdrs
            # never a redirect to another host
            for target in ("//evil.example/x", "/\\evil.example/x", "http://evil.example/x"):
                resp = get(host, f"{target}?sandboxd_preview={token}")
                assert b"\r\nLocation: /\r\n" in resp, (target, resp)
            assert os.path.getsize(os.path.join(env.dir, "state", "preview.key")) >= 32
            assert os.stat(os.path.join(env.dir, "state", "preview.key")).st_mode & 0o777 == 0o600

        def page_with_cookie():
            deadline = time.time() + 30
            while True:
                resp = get(host, "/index.html", cookie=token)
                if status(resp) == 200 or time.time() > deadline:
                    break
                time.sleep(0.3)
            assert status(resp) == 200 and resp.endswith(PAGE), resp[:300]
            lst = c.call("sandbox.previews", {"id": sid})["previews"]
            assert [p["preview"] for p in lst] == [pv["preview"]], lst
            assert lst[0]["url"] == pv["url"] and lst[0]["accepted"] >= 1, lst

        def websocket_echo():
            ws = c.call("sandbox.preview", {"id": sid, "port": WS_PORT})
            wh, wt = split_url(ws["url"])
            websocket(wh, wt, (b"hello", os.urandom(100), os.urandom(3000)))
            c.call("sandbox.unpreview", {"id": sid, "preview": ws["preview"]})

        def forbidden():
            assert status(get(host, "/index.html")) == 403
            forged = token[:-1] + ("0" if token[-1] != "0" else "1")
            assert status(get(host, "/index.html", cookie=forged)) == 403
            assert status(get(host, f"/?sandboxd_preview={forged}")) == 403
            assert status(get(host, "/", cookie="garbage")) == 403
            # the token of port 8080 on another port's host, and on another sandbox's
            assert status(get(f"9001-{sid}.preview.test", "/", cookie=token)) == 403
            assert status(get(f"8080-nosuch.preview.test", "/", cookie=token)) == 403
            resp = get(host, "/", cookie="x")
            assert resp.endswith(b"\r\n\r\nForbidden\n"), resp

        def unknown_host_404():
            for h in ("example.com", f"{sid}.preview.test", f"8080-{sid}.preview.other",
                      f"99999-{sid}.preview.test", f"8080-{sid}.x.preview.test"):
                assert status(get(h, "/", cookie=token)) == 404, h
            assert status(request(b"GET / HTTP/1.1\r\n\r\n")) == 404

        def bad_input():
            assert status(request(b"\x16\x03\x01\x02\x00garbage\r\n\r\n")) == 400
            big = b"X-Big: " + b"a" * 20000 + b"\r\n"
            assert status(get(host, "/", cookie=token, extra=big)) == 431
            slow = socket.create_connection(("127.0.0.1", LPORT), timeout=20)
            slow.sendall(b"GET / HTTP/1.1\r\nHost: ")
            # a good client is served while the slow one waits
            assert status(get(host, "/index.html", cookie=token)) == 200
            assert recv_all(slow) == b""  # closed after header_timeout_ms
            slow.close()

        def limits():
            expect_error(c, "sandbox.preview", {"id": sid, "port": 0}, -32602, "port")
            expect_error(c, "sandbox.preview", {"id": sid, "port": 80, "ttl_s": 0}, -32602, "ttl_s")
            expect_error(c, "sandbox.preview", {"id": sid, "port": 80, "ttl_s": 3601}, -32602,
                         "ttl_s")
            expect_error(c, "sandbox.preview", {"id": sid, "port": 80, "x": 1}, -32602)
            expect_error(c, "sandbox.unpreview", {"id": sid, "preview": "pv-0000000000000000"},
                         -32602, "preview")
            expect_error(c, "sandbox.unpreview", {"id": sid, "preview": "fw-0"}, -32602, "preview")
            extra = [c.call("sandbox.preview", {"id": sid, "port": 80 + i}) for i in range(3)]
            try:
                e = expect_error(c, "sandbox.preview", {"id": sid, "port": 80}, -32003)
                assert "max_per_sandbox" in e["data"]["reason"], e
            finally:
                for p in extra:
                    c.call("sandbox.unpreview", {"id": sid, "preview": p["preview"]})

        def expiry():
            short = c.call("sandbox.preview", {"id": sid, "port": HTTP_PORT, "ttl_s": 2})
            h, t = split_url(short["url"])
            assert status(get(h, "/index.html", cookie=t)) == 200
            while time.time() < short["expires_at"] + 1:
                time.sleep(0.2)
            assert status(get(h, "/index.html", cookie=t)) == 403
            assert short["preview"] not in [p["preview"] for p in
                                            c.call("sandbox.previews", {"id": sid})["previews"]]

        def unpreview_closes():
            held = socket.create_connection(("127.0.0.1", LPORT), timeout=20)
            held.sendall(f"GET /index.html HTTP/1.1\r\nHost: {host}:{LPORT}\r\n"
                         f"Cookie: sandboxd_preview={token}\r\n\r\n".encode())
            first = held.recv(65536)
            assert first.startswith(b"HTTP/1."), first
            r = c.call("sandbox.unpreview", {"id": sid, "preview": pv["preview"]})
            assert r == {"preview": pv["preview"], "closed": True}, r
            recv_all(held)  # ends: the relay is closed with the preview
            held.close()
            assert status(get(host, "/index.html", cookie=token)) == 403
            assert status(get(host, f"/?sandboxd_preview={token}")) == 403
            log = env.daemon_log()
            assert f"event=sandbox.preview_opened sandbox={sid}" in log, log[-2000:]
            assert "event=sandbox.preview_closed" in log and token not in log

        def cli_and_python():
            ctl = os.path.join(e2elib.BUILD, "clients", "cli", "sandboxctl")
            r = subprocess.run([ctl, "--socket", env.socket, "preview", sid, str(HTTP_PORT),
                                "--ttl", "300"], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            url = r.stdout.strip()
            h, t = split_url(url)
            assert h == host and status(get(h, "/index.html", cookie=t)) == 200, url
            r = subprocess.run([ctl, "--socket", env.socket, "previews", sid], capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0 and url in r.stdout, (r.stdout, r.stderr)
            pid = [ln.split()[0] for ln in r.stdout.splitlines() if url in ln][0]
            r = subprocess.run([ctl, "--socket", env.socket, "unpreview", sid, pid],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            assert status(get(h, "/index.html", cookie=t)) == 403
            r = subprocess.run([ctl, "--socket", env.socket, "preview", sid, "0"],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode != 0
            sb = sandboxd.Client(env.socket).get(sid)
            with sb.preview(HTTP_PORT, ttl_s=120) as p:
                assert isinstance(p, sandboxd.Preview) and p.port == HTTP_PORT
                assert p.expires_at - time.time() <= 121
                h, t = split_url(p.url)
                assert status(get(h, "/index.html", cookie=t)) == 200
                assert p.preview in [x["preview"] for x in sb.previews()]
            assert status(get(h, "/index.html", cookie=t)) == 403

        def another_uid_refused():
            child = (
                "import json, sys\n"
                "sys.path.insert(0, sys.argv[1])\n"
                "from e2elib import Client\n"
                "c = Client(sys.argv[2], timeout=60)\n"
                "out = {}\n"
                "for m, p in [('sandbox.preview', {'id': sys.argv[3], 'port': 8080}),\n"
                "             ('sandbox.previews', {'id': sys.argv[3]}),\n"
                "             ('sandbox.unpreview', {'id': sys.argv[3], 'preview': sys.argv[4]})]:\n"
                "    try:\n"
                "        c.call(m, p)\n"
                "        out[m] = 'succeeded'\n"
                "    except Exception as e:\n"
                "        out[m] = getattr(e, 'code', str(e))\n"
                "print(json.dumps(out))\n")
            mine = c.call("sandbox.preview", {"id": sid, "port": HTTP_PORT})

            def drop():
                os.setgroups([])
                os.setgid(12345)
                os.setuid(12345)
            py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
            r = subprocess.run([py, "-c", child, os.path.dirname(os.path.abspath(__file__)),
                                env.socket, sid, mine["preview"]], capture_output=True, text=True,
                               timeout=120, preexec_fn=drop)
            assert r.returncode == 0, r.stderr
            out = json.loads(r.stdout.strip().splitlines()[-1])
            assert out == {"sandbox.preview": -32001, "sandbox.previews": -32001,
                           "sandbox.unpreview": -32001}, out
            assert mine["preview"] in [p["preview"] for p in
                                       c.call("sandbox.previews", {"id": sid})["previews"]]
            c.call("sandbox.unpreview", {"id": sid, "preview": mine["preview"]})

        def destroy_ends_previews():
            p2 = c.call("sandbox.preview", {"id": sid, "port": HTTP_PORT})
            h, t = split_url(p2["url"])
            assert status(get(h, "/index.html", cookie=t)) == 200
            c.call("sandbox.destroy", {"id": sid})
            assert status(get(h, "/index.html", cookie=t)) == 403

        run([("url_and_redirect", url_and_redirect),
             ("page_with_cookie", page_with_cookie),
             ("websocket_echo", websocket_echo),
             ("forbidden", forbidden),
             ("unknown_host_404", unknown_host_404),
             ("bad_input", bad_input),
             ("limits", limits),
             ("expiry", expiry),
             ("unpreview_closes", unpreview_closes),
             ("cli_and_python", cli_and_python),
             ("another_uid_refused", another_uid_refused),
             ("destroy_ends_previews", destroy_ends_previews),
             ("tls_mode", tls_mode)])


def websocket(host, token, payloads):
    """A WebSocket upgrade through the preview listener (TLS while the TLS daemon runs): the
    101 and its accept key, then payloads echoed."""
    key = base64.b64encode(os.urandom(16)).decode()
    s = socket.create_connection(("127.0.0.1", LPORT), timeout=20)
    if "ctx" in TLS:
        s = TLS["ctx"].wrap_socket(s, server_hostname=host)
    s.sendall((f"GET /chat HTTP/1.1\r\nHost: {host}:{LPORT}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\nCookie: sandboxd_preview={token}\r\n\r\n").encode())
    want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    got = b""
    while b"\r\n\r\n" not in got:
        d = s.recv(4096)
        assert d, got
        got += d
    hdrs, rest = got.split(b"\r\n\r\n", 1)
    assert hdrs.startswith(b"HTTP/1.1 101 "), hdrs
    assert f"Sec-WebSocket-Accept: {want}".encode() in hdrs, (hdrs, want)
    ws_echo(s, rest, payloads)
    s.close()


def tls_mode():
    """[preview] tls_certificate and tls_key: the same through HTTPS with a test certificate
    for *.preview.test; a client that does not trust it gets no page. A daemon of its own,
    on a port of its own."""
    global LPORT
    plain_port, LPORT = LPORT, free_port()
    try:
        tls_daemon()
    finally:
        LPORT = plain_port


def tls_daemon():
    d = tempfile.mkdtemp(prefix="sandboxd-preview-tls-")
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=*.preview.test", "-addext", "subjectAltName=DNS:*.preview.test",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    conf = {"preview": {"listen": f"127.0.0.1:{LPORT}",
                        "base_url": f"https://{{port}}-{{id}}.preview.test:{LPORT}",
                        "tls_certificate": cert, "tls_key": key}}
    with Env(daemon_config=conf) as env:
        c = env.client()
        sid = serving_sandbox(c)
        pv = c.call("sandbox.preview", {"id": sid, "port": HTTP_PORT})
        assert pv["url"].startswith("https://"), pv
        host, token = split_url(pv["url"])
        TLS["ctx"] = ssl.create_default_context(cafile=cert)
        try:
            def https_page_and_redirect():
                resp = get(host, f"/index.html?sandboxd_preview={token}")
                assert status(resp) == 302 and b"; Secure" in resp, resp
                deadline = time.time() + 30
                while status(resp := get(host, "/index.html", cookie=token)) != 200:
                    assert time.time() < deadline, resp[:200]
                    time.sleep(0.3)
                assert resp.endswith(PAGE), resp[-100:]
                big = os.urandom(1 << 20).hex().encode()
                c.call("file.write", {"id": sid, "path": "/root/www/big.txt",
                                      "content": big.decode()})
                resp = get(host, "/big.txt", cookie=token)
                assert status(resp) == 200 and resp.endswith(big), len(resp)

            def https_refusals():
                assert status(get(host, "/index.html")) == 403
                assert status(request(b"GET / HTTP/1.1\r\nHost: example.com\r\n"
                                      b"Cookie: sandboxd_preview=" + token.encode() + b"\r\n\r\n",
                                      server_hostname=host)) == 404
                assert status(request(b"garbage\r\n\r\n", server_hostname=host)) == 400
                plain = socket.create_connection(("127.0.0.1", LPORT), timeout=20)
                plain.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # not TLS
                assert not recv_all(plain).startswith(b"HTTP/1.1 200")
                plain.close()
                untrusting = ssl.create_default_context()
                try:
                    s = untrusting.wrap_socket(socket.create_connection(("127.0.0.1", LPORT),
                                                                        timeout=20),
                                               server_hostname=host)
                    s.close()
                    raise AssertionError("an untrusted certificate was accepted")
                except ssl.SSLCertVerificationError:
                    pass

            def https_websocket():
                ws = c.call("sandbox.preview", {"id": sid, "port": WS_PORT})
                websocket(*split_url(ws["url"]),
                          (b"hello", os.urandom(100), os.urandom(3000), os.urandom(60000)))

            def https_unpreview_closes():
                held = TLS["ctx"].wrap_socket(
                    socket.create_connection(("127.0.0.1", LPORT), timeout=20),
                    server_hostname=host)
                held.sendall(f"GET /index.html HTTP/1.1\r\nHost: {host}:{LPORT}\r\n"
                             f"Cookie: sandboxd_preview={token}\r\n\r\n".encode())
                assert held.recv(65536).startswith(b"HTTP/1.")
                c.call("sandbox.unpreview", {"id": sid, "preview": pv["preview"]})
                recv_all(held)
                held.close()
                assert status(get(host, "/index.html", cookie=token)) == 403

            for step in (https_page_and_redirect, https_refusals, https_websocket,
                         https_unpreview_closes):
                step()
                print(f"     {step.__name__}", flush=True)
        finally:
            TLS.clear()


if __name__ == "__main__":
    main()
