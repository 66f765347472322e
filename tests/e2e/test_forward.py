#!/usr/bin/env python3
"""Port forwards (sandbox.forward): a page served by busybox httpd inside a sandbox is read
through the forward's Unix socket and through a loopback TCP port; 1 MiB goes through an echo
server and back unchanged; 20 connections at once; another uid can neither connect to the
socket nor forward, list or unforward; unforward removes the socket; a closed port closes the
client at once; a client that sends and never reads, or sends garbage, stalls nobody; the
limits; destroy closes the forwards; a crash's socket folders are removed at the next start."""

import json
import os
import socket
import subprocess
import sys
import threading
import time

import e2elib
from e2elib import Env, RpcError, expect_error, run
from test_recovery_util import kill9, launch

CHILD_PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
PAGE = b"hello from the sandbox\n" * 100
HTTP_PORT, ECHO_PORT = 8080, 9000


def connect(fw, timeout=20):
    if "socket" in fw:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(fw["socket"])
    else:
        host, port = fw["address"].rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=timeout)
    return s


def recv_all(s):
    out = b""
    while True:
        try:
            d = s.recv(65536)
        except ConnectionResetError:  # closed with data unread: as good as an end
            return out
        if not d:
            return out
        out += d


def http_get(fw, path="/index.html"):
    s = connect(fw)
    try:
        s.sendall(b"GET " + path.encode() + b" HTTP/1.0\r\nHost: x\r\n\r\n")
        return recv_all(s)
    finally:
        s.close()


def echo(fw, data):
    s = connect(fw, timeout=60)
    got = []

    def reader():
        n = 0
        while n < len(data):
            d = s.recv(65536)
            if not d:
                break
            got.append(d)
            n += len(d)

    t = threading.Thread(target=reader)
    t.start()
    s.sendall(data)
    t.join(60)
    s.close()
    return b"".join(got)


def wait_serving(fw, check, timeout=30):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            if check(fw):
                return
        except OSError as e:
            last = e
        time.sleep(0.2)
    raise AssertionError(f"not serving through {fw}: {last}")


CHILD = r"""
import json, socket, sys
sys.path.insert(0, sys.argv[1])
from e2elib import Client
sock, sid, path, fid = sys.argv[2:6]
out = {}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(path)
    s.settimeout(5)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    out["connect"] = "connected:" + repr(s.recv(100))
except OSError as e:
    out["connect"] = e.errno
c = Client(sock, timeout=60)
for m, p in {"sandbox.forward": {"id": sid, "port": 8080},
             "sandbox.forwards": {"id": sid},
             "sandbox.unforward": {"id": sid, "forward": fid}}.items():
    try:
        c.call(m, p)
        out[m] = "succeeded"
    except Exception as e:
        out[m] = getattr(e, "code", str(e))
print(json.dumps(out))
"""


def as_uid(uid, env, sid, path, fid):
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    r = subprocess.run([CHILD_PY, "-c", CHILD, os.path.dirname(os.path.abspath(__file__)), env.socket,
                        sid, path, fid], capture_output=True, text=True, timeout=120, preexec_fn=drop)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    conf = {"forward": {"max_per_sandbox": "6", "max_connections": "32", "buffer_bytes": "65536"}}
    with Env(daemon_config=conf) as env:
        c = env.client()
        sid = c.call("sandbox.create", {"ttl_s": 900})["id"]
        c.call("file.write", {"id": sid, "path": "/root/www/index.html",
                              "content": PAGE.decode()})
        c.call("process.start", {"id": sid, "command": f"httpd -f -p {HTTP_PORT} -h /root/www"})
        c.call("process.start", {"id": sid, "command": f"nc -ll -p {ECHO_PORT} -e cat"})
        http = c.call("sandbox.forward", {"id": sid, "port": HTTP_PORT})
        echo_fw = c.call("sandbox.forward", {"id": sid, "port": ECHO_PORT})
        fdir = os.path.join(env.dir, "fwd")

        def page_through_unix_socket():
            assert set(http) == {"forward", "port", "socket"}, http
            assert http["forward"].startswith("fw-") and http["port"] == HTTP_PORT, http
            st = os.stat(http["socket"])
            assert st.st_mode & 0o777 == 0o600 and st.st_uid == 0, oct(st.st_mode)
            dst = os.stat(os.path.dirname(http["socket"]))
            assert dst.st_mode & 0o777 == 0o700, oct(dst.st_mode)
            assert os.path.dirname(os.path.dirname(http["socket"])) == fdir, http
            wait_serving(http, lambda fw: PAGE in http_get(fw))
            resp = http_get(http)
            assert resp.startswith(b"HTTP/1.") and b" 200 " in resp.split(b"\r\n")[0], resp[:100]
            assert resp.endswith(PAGE), resp[-100:]

        def page_through_tcp():
            t = c.call("sandbox.forward", {"id": sid, "port": HTTP_PORT, "listen": "127.0.0.1:0"})
            assert set(t) == {"forward", "port", "address"}, t
            assert t["address"].startswith("127.0.0.1:") and not t["address"].endswith(":0"), t
            assert http_get(t).endswith(PAGE)
            c.call("sandbox.unforward", {"id": sid, "forward": t["forward"]})
            try:
                http_get(t)
                raise AssertionError("TCP forward still listening after unforward")
            except ConnectionRefusedError:
                pass
            for bad in ("0.0.0.0:0", "192.168.1.1:8080", "localhost:0", "127.0.0.1:80",
                        "127.0.0.1:x", "[::1]:0"):
                expect_error(c, "sandbox.forward", {"id": sid, "port": 80, "listen": bad},
                             -32602, "listen")

        def echo_one_mib():
            wait_serving(echo_fw, lambda fw: echo(fw, b"ping\n") == b"ping\n")
            data = os.urandom(1 << 20)
            t0 = time.time()
            got = echo(echo_fw, data)
            assert got == data, (len(got), len(data))
            print(f"     1 MiB echoed in {time.time() - t0:.2f} s")

        def twenty_at_once():
            # busybox nc's listen backlog is tiny: the 20 connections are opened one after
            # another (each echoes a line first), then all 20 stream at once
            socks = []
            for i in range(20):
                s = connect(echo_fw, timeout=60)
                line = b"hello %d\n" % i
                s.sendall(line)
                got = b""
                while len(got) < len(line):
                    d = s.recv(100)
                    assert d, (i, got)
                    got += d
                assert got == line, (i, got)
                socks.append(s)
            lst = c.call("sandbox.forwards", {"id": sid})["forwards"]
            assert [f["connections"] for f in lst if f["forward"] == echo_fw["forward"]] == [20], lst
            results = [None] * 20

            def one(i):
                s, d, got = socks[i], os.urandom(256 * 1024 + i), []

                def reader():
                    n = 0
                    while n < len(d):
                        x = s.recv(65536)
                        if not x:
                            break
                        got.append(x)
                        n += len(x)
                t = threading.Thread(target=reader)
                t.start()
                s.sendall(d)
                t.join(60)
                results[i] = b"".join(got) == d
            ts = [threading.Thread(target=one, args=(i,)) for i in range(20)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(120)
            for s in socks:
                s.close()
            assert results == [True] * 20, results
            pages = []
            ts = [threading.Thread(target=lambda: pages.append(http_get(http))) for _ in range(20)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(60)
            assert len(pages) == 20 and all(p.endswith(PAGE) for p in pages)

        def quick_hangups_leave_nothing_open():
            # clients that close while their channel is still opening: the daemon closes each
            # channel once sshd confirmed it, so no connection stays open in the sandbox
            def established():
                r = c.call("sandbox.exec", {"id": sid, "command": "cat /proc/net/tcp /proc/net/tcp6"})
                return sum(1 for ln in r["stdout"].splitlines()[1:]
                           if len(ln.split()) > 3 and ln.split()[1].endswith(":2328")
                           and ln.split()[3] == "01")
            base = established()
            for _ in range(30):
                connect(echo_fw).close()
            deadline = time.time() + 15
            while established() > base and time.time() < deadline:
                time.sleep(0.3)
            assert established() == base, (established(), base)
            assert echo(echo_fw, b"ok\n") == b"ok\n"

        def listed():
            lst = c.call("sandbox.forwards", {"id": sid})["forwards"]
            ids = [f["forward"] for f in lst]
            assert ids == [http["forward"], echo_fw["forward"]], lst
            assert lst[0]["socket"] == http["socket"] and lst[0]["uid"] == 0, lst
            log = env.daemon_log()
            assert f"event=sandbox.forward_opened sandbox={sid}" in log and "reason=unix" in log
            assert "reason=tcp" in log and "event=sandbox.forward_closed" in log
            audit = [ln for ln in log.splitlines() if "[audit" in ln and "forward" in ln]
            assert audit and not [ln for ln in audit if os.path.dirname(http["socket"]) in ln]
            assert lst[1]["accepted"] >= 51 and lst[1]["bytes_in"] >= (1 << 20), lst[1]

        def another_uid_refused():
            out = as_uid(65534, env, sid, http["socket"], http["forward"])
            assert out["connect"] == 13, out  # EACCES
            assert out["sandbox.forward"] == -32001, out
            assert out["sandbox.forwards"] == -32001, out
            assert out["sandbox.unforward"] == -32001, out
            assert os.path.exists(http["socket"])

        def closed_port_closes_client():
            fw = c.call("sandbox.forward", {"id": sid, "port": 9999})
            s = connect(fw, timeout=10)
            t0 = time.time()
            s.sendall(b"anyone?")
            assert recv_all(s) == b""
            took = time.time() - t0
            s.close()
            assert took < 3, took
            c.call("sandbox.unforward", {"id": sid, "forward": fw["forward"]})

        def slow_and_garbage_clients_stall_nobody():
            # one sends 16 MiB into the echo and never reads; another sends garbage to httpd
            # and stays; a third connects and says nothing
            hog = connect(echo_fw)
            hog.setblocking(False)
            sent = 0
            deadline = time.time() + 5
            while time.time() < deadline and sent < (16 << 20):
                try:
                    sent += hog.send(b"x" * 65536)
                except BlockingIOError:
                    time.sleep(0.05)
            assert sent < (16 << 20), "nothing pushed back"
            junk = connect(http)
            junk.sendall(os.urandom(4096))
            idle = connect(http)
            t0 = time.time()
            r = c.call("sandbox.exec", {"id": sid, "command": "echo alive"}, timeout=30)
            assert r["stdout"] == "alive\n", r
            assert time.time() - t0 < 10
            assert http_get(http).endswith(PAGE)
            assert echo(echo_fw, b"still\n") == b"still\n"
            for s in (hog, junk, idle):
                s.close()

        def unforward_removes_socket():
            fw = c.call("sandbox.forward", {"id": sid, "port": HTTP_PORT})
            assert os.path.exists(fw["socket"])
            r = c.call("sandbox.unforward", {"id": sid, "forward": fw["forward"]})
            assert r == {"forward": fw["forward"], "closed": True}, r
            assert not os.path.exists(fw["socket"])
            assert not os.path.exists(os.path.dirname(fw["socket"]))
            expect_error(c, "sandbox.unforward", {"id": sid, "forward": fw["forward"]}, -32602,
                         "forward")
            expect_error(c, "sandbox.unforward", {"id": sid, "forward": "nope"}, -32602, "forward")
            expect_error(c, "sandbox.forward", {"id": sid, "port": 0}, -32602, "port")
            expect_error(c, "sandbox.forward", {"id": sid, "port": 65536}, -32602, "port")
            expect_error(c, "sandbox.forward", {"id": sid, "port": 80, "bogus": 1}, -32602, "bogus")
            expect_error(c, "sandbox.forward", {"id": "no-such", "port": 80}, -32001)

        def limits():
            extra = []
            while True:
                try:
                    extra.append(c.call("sandbox.forward", {"id": sid, "port": 7000}))
                except RpcError as e:
                    assert e.code == -32003, e.err
                    break
                assert len(extra) < 10
            assert len(extra) == 4, extra  # 6 per sandbox, 2 open
            for f in extra:
                c.call("sandbox.unforward", {"id": sid, "forward": f["forward"]})

        def cli_forward():
            ctl = os.path.join(e2elib.BUILD, "clients", "cli", "sandboxctl")
            for spec in (str(HTTP_PORT), f"0:{HTTP_PORT}"):
                p = subprocess.Popen([ctl, "--socket", env.socket, "forward", sid, spec],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                line = p.stdout.readline().strip()
                assert line.startswith("Forwarding from ") and line.endswith(f" -> {HTTP_PORT}"), \
                    (line, p.stderr.read() if p.poll() is not None else "")
                where = line.split()[2]
                fw = {"socket": where[5:]} if where.startswith("unix:") else {"address": where}
                assert http_get(fw).endswith(PAGE)
                p.send_signal(2)
                assert p.wait(20) == 0, p.stderr.read()
                if "socket" in fw:
                    assert not os.path.exists(fw["socket"])
                ids = [f["forward"] for f in c.call("sandbox.forwards", {"id": sid})["forwards"]]
                assert ids == [http["forward"], echo_fw["forward"]], ids
            r = subprocess.run([ctl, "--socket", env.socket, "forward", sid, "x:80"],
                               capture_output=True, text=True, timeout=20)
            assert r.returncode == 64, r

        def python_client():
            sys.path.insert(0, os.path.join(e2elib.SRC, "clients", "python"))
            import sandboxd
            sb = sandboxd.Client(env.socket).get(sid)
            with sb.forward(HTTP_PORT) as f:
                assert f.socket and f.address is None and f.port == HTTP_PORT, f
                s = f.connect(timeout=10)
                s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
                assert recv_all(s).endswith(PAGE)
                s.close()
                assert f.forward in [x["forward"] for x in sb.forwards()]
            assert not os.path.exists(f.socket)
            t = sb.forward(HTTP_PORT, listen="127.0.0.1:0")
            assert t.address.startswith("127.0.0.1:") and t.socket is None, t
            assert http_get({"address": t.address}).endswith(PAGE)
            t.close()
            t.close()  # already closed: fine
            try:
                sb.forward(HTTP_PORT, listen="0.0.0.0:0")
                raise AssertionError("listen 0.0.0.0 accepted")
            except sandboxd.InvalidParams as e:
                assert e.data["param"] == "listen", e.data
            sb.client.close()

            async def async_twin():
                async with sandboxd.AsyncClient(env.socket) as ac:
                    asb = await ac.get(sid)
                    async with await asb.forward(HTTP_PORT) as af:
                        r, w = await af.open_connection()
                        w.write(b"GET /index.html HTTP/1.0\r\n\r\n")
                        body = await r.read()
                        w.close()
                        assert body.endswith(PAGE), body[-100:]
                        assert af.forward in [x["forward"] for x in await asb.forwards()]
                    assert not os.path.exists(af.socket)
            import asyncio
            asyncio.run(async_twin())

        def clean_stop_removes_sockets():
            fw = c.call("sandbox.forward", {"id": sid, "port": HTTP_PORT})
            held = connect(fw)
            c.close()
            assert env.stop_daemon() == 0, env.daemon_log()[-3000:]
            assert os.listdir(fdir) == [], os.listdir(fdir)
            held.close()
            launch(env)

        def crash_leaves_nothing():
            c1 = env.client()
            fw = c1.call("sandbox.forward", {"id": sid, "port": HTTP_PORT})
            c1.close()
            kill9(env)
            assert os.path.exists(fw["socket"])
            launch(env)
            assert not os.path.exists(os.path.dirname(fw["socket"])), os.listdir(fdir)
            c2 = env.client()
            assert c2.call("sandbox.forwards", {"id": sid})["forwards"] == []
            # forwards again after the restart
            nonlocal http, echo_fw
            http = c2.call("sandbox.forward", {"id": sid, "port": HTTP_PORT})
            wait_serving(http, lambda f: PAGE in http_get(f))
            c2.close()

        def expiry_closes_forwards():
            c4 = env.client()
            short = c4.call("sandbox.create", {"ttl_s": 8})["id"]
            fw = c4.call("sandbox.forward", {"id": short, "port": 22})
            held = connect(fw)
            assert held.recv(4).startswith(b"SSH-")  # the sandbox's own sshd, through it
            deadline = time.time() + 40
            while os.path.exists(fw["socket"]) and time.time() < deadline:
                time.sleep(0.3)
            assert not os.path.exists(fw["socket"]), "forward outlived its sandbox's lease"
            held.settimeout(10)
            recv_all(held)  # closed
            assert "reason=sandbox_gone" in env.daemon_log()
            c4.close()

        def destroy_closes_forwards():
            c3 = env.client()
            fws = [c3.call("sandbox.forward", {"id": sid, "port": p}) for p in (HTTP_PORT, ECHO_PORT)]
            held = connect(fws[1])
            c3.call("sandbox.destroy", {"id": sid})
            for f in fws + [http]:
                assert not os.path.exists(f["socket"]), f
            held.settimeout(10)
            assert recv_all(held) == b""
            assert os.listdir(fdir) == [], os.listdir(fdir)
            c3.close()

        run([("page_through_unix_socket", page_through_unix_socket),
             ("page_through_tcp", page_through_tcp),
             ("echo_one_mib", echo_one_mib),
             ("twenty_at_once", twenty_at_once),
             ("quick_hangups_leave_nothing_open", quick_hangups_leave_nothing_open),
             ("listed", listed),
             ("another_uid_refused", another_uid_refused),
             ("closed_port_closes_client", closed_port_closes_client),
             ("slow_and_garbage_clients_stall_nobody", slow_and_garbage_clients_stall_nobody),
             ("unforward_removes_socket", unforward_removes_socket),
             ("limits", limits),
             ("cli_forward", cli_forward),
             ("python_client", python_client),
             ("clean_stop_removes_sockets", clean_stop_removes_sockets),
             ("crash_leaves_nothing", crash_leaves_nothing),
             ("expiry_closes_forwards", expiry_closes_forwards),
             ("destroy_closes_forwards", destroy_closes_forwards)])


if __name__ == "__main__":
    main()
