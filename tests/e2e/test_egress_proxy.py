#!/usr/bin/env python3
"""Domain names in egress allow-lists, through the daemon's egress proxy ([egress] listen on
the daemon's address on the simulated node's transit link). The simulator routes its
internet from the host (internet_route, on a subnet no other instance routes) and the
daemon resolves names through the simulated internet's resolver (its /etc/resolv.conf
replaced in a mount namespace of its own), as a daemon on a real host resolves and reaches
the internet. From Debian sandboxes: curl http:// and https:// (-k: the simulated host's
certificate is self-signed) to an allowed name work through the proxy the sandbox's
variables name; another name is 403 (plain HTTP and CONNECT); a CONNECT to the allowed
name whose ClientHello names another is closed before the server sees a byte; another
sandbox's list does not apply; a connection that bypasses the proxy is refused by the
firewall; a sandbox without names cannot reach the proxy; a live change takes effect; the
lists survive kill -9 and, names included, a lost state folder;
a head too large is 431, garbage 400, both closed; past [egress] max_connections a
connection is closed at once; names are refused while the proxy is off (test_egress)."""

import os
import shutil
import subprocess
import time

from e2elib import Env, run
from test_recovery_util import kill9, launch, wait_reconciled

PROXY_PORT = 3128
MAX_CONNS = 4

# run in a sandbox: CONNECT to host:443 through the proxy, then TLS naming sni; prints
# "ok BODY" or "closed ERROR"
TUNNEL = r"""
import os, socket, ssl, sys
host, sni = sys.argv[1], sys.argv[2]
p = os.environ["HTTPS_PROXY"].rsplit("/", 1)[1].rsplit(":", 1)
s = socket.create_connection((p[0], int(p[1])), timeout=10)
s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    b = s.recv(1)
    if not b:
        break
    head += b
if not head.startswith(b"HTTP/1.1 200"):
    print("refused", head.split(b"\r\n")[0].decode())
    sys.exit(0)
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    t = ctx.wrap_socket(s, server_hostname=sni)
    t.sendall(b"GET / HTTP/1.0\r\n\r\n")
    body = b""
    while True:
        b = t.recv(4096)
        if not b:
            break
        body += b
    print("ok", body.split(b"\r\n\r\n", 1)[1].decode().strip())
except (OSError, ssl.SSLError) as e:
    print("closed", type(e).__name__)
"""

# run in a sandbox: sends argv[1] (Python bytes literal) to the proxy and ends its side,
# prints what comes back before the proxy closes
RAW = r"""
import ast, os, socket, sys
p = os.environ["HTTP_PROXY"].rsplit("/", 1)[1].rsplit(":", 1)
s = socket.create_connection((p[0], int(p[1])), timeout=10)
try:
    s.sendall(ast.literal_eval(sys.argv[1]))
    s.shutdown(socket.SHUT_WR)
except OSError:
    pass
got = b""
while True:
    try:
        b = s.recv(4096)
    except OSError:
        break
    if not b:
        break
    got += b
print(repr(got))
"""

# run in a sandbox: a download of argv[1] bytes whose request ends with a half-close;
# prints the bytes of body received
HALF = r"""
import os, socket, sys, time
p = os.environ["HTTP_PROXY"].rsplit("/", 1)[1].rsplit(":", 1)
s = socket.create_connection((p[0], int(p[1])), timeout=30)
s.sendall(f"GET http://allowed.test/bytes/{sys.argv[1]} HTTP/1.0\r\n\r\n".encode())
s.shutdown(socket.SHUT_WR)
time.sleep(2)  # the proxy's queue to this side fills up meanwhile
got = b""
while True:
    b = s.recv(1 << 16)
    if not b:
        break
    got += b
print(len(got.split(b"\r\n\r\n", 1)[1]) if b"\r\n\r\n" in got else -1)
"""

# run in a sandbox: opens n connections to the proxy sending nothing, then reports which
# were closed by the proxy at once (recv of b"" within 2 s)
CONNS = r"""
import os, socket, sys
p = os.environ["HTTP_PROXY"].rsplit("/", 1)[1].rsplit(":", 1)
socks = [socket.create_connection((p[0], int(p[1])), timeout=10) for _ in range(int(sys.argv[1]))]
closed = 0
for s in socks:
    s.settimeout(2)
    try:
        closed += s.recv(1) == b""
    except socket.timeout:
        pass
print(closed)
"""

# run in a sandbox (a background process): three downloads through the proxy, never read
HOLD = r"""
import os, socket, time
p = os.environ["HTTP_PROXY"].rsplit("/", 1)[1].rsplit(":", 1)
socks = []
for _ in range(3):
    s = socket.create_connection((p[0], int(p[1])), timeout=10)
    s.sendall(b"GET http://allowed.test/bytes/200000000 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
    socks.append(s)
time.sleep(600)
"""


def free_subnet():
    """A public /24 the host does not route yet (the simulated internet's)."""
    for net in ("192.0.2.0/24", "203.0.113.0/24", "198.51.101.0/24", "198.51.102.0/24"):
        if not subprocess.run(["ip", "route", "show", "to", "exact", net], capture_output=True,
                              text=True).stdout.strip():
            return net
    raise RuntimeError("no free subnet for the simulated internet")


def wrap(info, folder):
    """The daemon in a mount namespace whose /etc/resolv.conf names the simulated resolver."""
    resolv = os.path.join(folder, "resolv.conf")
    with open(resolv, "w") as f:
        f.write(f"nameserver {info['internet_ip']}\noptions timeout:2 attempts:1\n")
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" /etc/resolv.conf && exec "$@"', resolv]


def main():
    from test_debian import ensure_image
    ensure_image()
    sim = {"template_os": "debian", "firewall_period": 0, "internet_subnet": free_subnet(),
           "internet_route": True}
    daemon = lambda info: {"egress": {"listen": f"{info['daemon_ip']}:{PROXY_PORT}",  # noqa: E731
                                      "max_connections": str(MAX_CONNS),
                                      "header_timeout_ms": "20000"}}
    with Env(sim_config=sim, daemon_config=daemon, daemon_wrap=wrap) as env:
        c = env.client()
        info = env.sim.info
        names = info["internet_names"]
        proxy = f"{info['daemon_ip']}:{PROXY_PORT}"
        sb = {}

        def sh(sid, cmd, env_=None, code=0):
            p = {"id": sid, "command": cmd, "timeout_ms": 60000}
            if env_:
                p["env"] = env_
            r = c.call("sandbox.exec", p)
            assert code is None or r["exit_code"] == code, (cmd, r)
            return r

        def py(sid, script, *args):
            r = c.call("sandbox.exec", {"id": sid, "argv": ["python3", "-c", script] + list(args),
                                        "timeout_ms": 60000})
            assert r["exit_code"] == 0, r
            return r["stdout"].strip()

        def create():
            a = c.call("sandbox.create", {"internet": {"allow": ["Allowed.Test", names["internet.test"] + ":22"]}})
            b = c.call("sandbox.create", {"internet": {"allow": ["denied.test"]}})
            n = c.call("sandbox.create", {"internet": {"allow": [names["internet.test"] + ":80"]}})
            sb.update(a=a["id"], b=b["id"], n=n["id"])
            assert a["internet_allow"] == ["allowed.test", names["internet.test"] + ":22"], a
            rules = env.sim.ok("GET", f"/nodes/pve/lxc/{a['vmid']}/firewall/rules")
            # the proxy rule's comment keeps the list's names (read back after a lost state folder)
            px = [r for r in rules if r.get("comment") == "sandboxd-egress names=allowed.test" and
                  r.get("dest") == info["daemon_ip"]]
            assert len(px) == 1 and px[0]["dport"] == str(PROXY_PORT) and px[0]["proto"] == "tcp" and \
                px[0]["action"] == "ACCEPT" and px[0]["type"] == "out", rules
            rules = env.sim.ok("GET", f"/nodes/pve/lxc/{n['vmid']}/firewall/rules")
            assert not [r for r in rules if r.get("dest") == info["daemon_ip"]], rules

        def variables():
            out = sh(sb["a"], "env | grep -i _proxy= | sort")["stdout"].split()
            want = {f"{k}=http://{proxy}" for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
            assert want <= set(out) and any(x.startswith("NO_PROXY=") for x in out), out
            own = sh(sb["a"], "echo $HTTP_PROXY", env_={"HTTP_PROXY": "http://mine:1"})["stdout"].strip()
            assert own == "http://mine:1", own
            assert sh(sb["n"], "env | grep -ci _proxy=", code=None)["stdout"].strip() == "0"

        def allowed_works():
            r = sh(sb["a"], "curl -sS -m 20 http://allowed.test/")
            assert r["stdout"] == "pve-sim internet http allowed.test\n", r
            r = sh(sb["a"], "curl -sS -k -m 20 https://allowed.test/")
            assert r["stdout"] == "pve-sim internet https allowed.test\n", r
            print(f"  {sb['a']}: http and https to allowed.test through {proxy}", flush=True)
            n = 64 << 20
            r = sh(sb["a"], f"curl -sS -o /dev/null -w '%{{size_download}} %{{time_total}}' -m 120 "
                   f"http://allowed.test/bytes/{n}")
            size, secs = r["stdout"].split()
            assert int(size) == n, r
            print(f"  64 MiB through the proxy in {float(secs):.2f} s "
                  f"({n / float(secs) / 1e6:.0f} MB/s)", flush=True)

        def denied_refused():
            r = sh(sb["a"], "curl -s -o /dev/null -w '%{http_code}' -m 20 http://denied.test/", code=None)
            assert r["stdout"] == "403", r
            r = sh(sb["a"], "curl -s -k -o /dev/null -w '%{http_connect}' -m 20 https://denied.test/", code=None)
            assert r["exit_code"] != 0 and r["stdout"] == "403", r

        def sni_mismatch():
            assert py(sb["a"], TUNNEL, "allowed.test", "allowed.test") == "ok pve-sim internet https allowed.test"
            got = py(sb["a"], TUNNEL, "allowed.test", "denied.test")
            assert got.startswith("closed"), got
            assert py(sb["a"], TUNNEL, "denied.test", "denied.test").startswith("refused HTTP/1.1 403")

        def other_list():
            r = sh(sb["b"], "curl -s -o /dev/null -w '%{http_code}' -m 20 http://allowed.test/", code=None)
            assert r["stdout"] == "403", r
            r = sh(sb["b"], "curl -sS -m 20 http://denied.test/")
            assert r["stdout"] == "pve-sim internet http denied.test\n", r

        def bypass_refused():
            ip = names["allowed.test"]
            r = sh(sb["a"], f"curl -sS --noproxy '*' -m 5 http://{ip}/", code=None)
            assert r["exit_code"] != 0 and "pve-sim" not in r["stdout"], r
            r = sh(sb["n"], f"curl -sS -x http://{proxy} -m 5 http://allowed.test/", code=None)
            assert r["exit_code"] != 0 and "pve-sim" not in r["stdout"], r
            r = sh(sb["a"], f"curl -sS --noproxy '*' -m 5 telnet://{names['internet.test']}:22 </dev/null",
                   code=None)
            assert "SSH-2.0-pve-sim" in r["stdout"], r  # the CIDR entry, directly

        def bad_input():
            got = py(sb["a"], RAW, repr(b"GET http://allowed.test/ HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n"))
            assert got.startswith("b'HTTP/1.1 431"), got
            got = py(sb["a"], RAW, repr(b"\x16\x03\x01garbage\r\n\r\n"))
            assert got.startswith("b'HTTP/1.1 400"), got
            got = py(sb["a"], RAW, repr(b"GET /relative HTTP/1.1\r\nHost: allowed.test\r\n\r\n"))
            assert got.startswith("b'HTTP/1.1 400"), got

        def half_close():
            n = 4 << 20
            got = int(py(sb["a"], HALF, str(n)))
            assert got == n, (got, n)

        def too_many():
            closed = int(py(sb["a"], CONNS, str(MAX_CONNS + 2)))
            assert closed == 2, closed
            # the others were closed with their sandbox's exec: a new one is served
            r = sh(sb["a"], "curl -sS -m 20 http://allowed.test/")
            assert r["stdout"].startswith("pve-sim internet http"), r

        def live_change():
            r = c.call("sandbox.set_internet", {"id": sb["a"], "enabled": True, "allow": ["denied.test"]})
            assert r["internet_allow"] == ["denied.test"], r
            r = sh(sb["a"], "curl -sS -m 20 http://denied.test/")
            assert r["stdout"] == "pve-sim internet http denied.test\n", r
            r = sh(sb["a"], "curl -s -o /dev/null -w '%{http_code}' -m 20 http://allowed.test/", code=None)
            assert r["stdout"] == "403", r
            r = c.call("sandbox.set_internet", {"id": sb["a"], "enabled": True, "allow": [names["internet.test"] + ":80"]})
            r = sh(sb["a"], f"curl -sS -x http://{proxy} -m 5 http://allowed.test/", code=None)
            assert r["exit_code"] != 0 and "pve-sim" not in r["stdout"], r

        def survives_kill9():
            """After a kill -9 the restarted daemon's proxy knows the sandboxes and their lists."""
            nonlocal c
            kill9(env)
            launch(env)
            c = env.client()
            r = sh(sb["b"], "curl -sS -m 20 http://denied.test/")
            assert r["stdout"] == "pve-sim internet http denied.test\n", r
            r = sh(sb["b"], "curl -s -o /dev/null -w '%{http_code}' -m 20 http://allowed.test/", code=None)
            assert r["stdout"] == "403", r

        def state_folder_lost():
            """The lists read back from the firewall after a lost state folder keep their names
            (from the proxy rule's comment): a list of names only (b) and a mixed one (a)."""
            nonlocal c
            mixed = ["allowed.test", names["internet.test"] + ":22"]
            c.call("sandbox.set_internet", {"id": sb["a"], "enabled": True, "allow": mixed})
            assert env.stop_daemon() == 0
            shutil.rmtree(os.path.join(env.dir, "state"))
            launch(env)
            c = env.client()
            wait_reconciled(env, runs_after=1)
            got = c.call("sandbox.get", {"id": sb["b"]})
            assert got["internet"] is True and got["internet_allow"] == ["denied.test"], got
            got = c.call("sandbox.get", {"id": sb["a"]})
            assert got["internet"] is True and sorted(got["internet_allow"]) == sorted(mixed), got
            r = sh(sb["b"], "curl -sS -m 20 http://denied.test/")
            assert r["stdout"] == "pve-sim internet http denied.test\n", r
            r = sh(sb["a"], "curl -sS -m 20 http://allowed.test/")
            assert r["stdout"] == "pve-sim internet http allowed.test\n", r

        def destroy_closes():
            """A change of a sandbox's list and its end close its proxied connections: three
            downloads left unread (the server blocked on them) are connections of the daemon
            to allowed.test until then."""
            d = c.call("sandbox.create", {"internet": {"allow": ["allowed.test"]}})["id"]
            c.call("process.start", {"id": d, "argv": ["python3", "-c", HOLD]})
            ip = names["allowed.test"]

            def upstream():
                out = subprocess.run(["ss", "-Htn", "state", "established", "dst", f"{ip}:80"],
                                     capture_output=True, text=True, check=True).stdout
                return len(out.splitlines())
            deadline = time.time() + 30
            while upstream() < 3 and time.time() < deadline:
                time.sleep(0.2)
            assert upstream() == 3, upstream()
            # a change of the list closes them (the process holding them lives on)
            c.call("sandbox.set_internet", {"id": d, "enabled": True, "allow": ["allowed.test", "denied.test"]})
            deadline = time.time() + 30
            while upstream() > 0 and time.time() < deadline:
                time.sleep(0.2)
            assert upstream() == 0, upstream()
            c.call("process.start", {"id": d, "argv": ["python3", "-c", HOLD]})
            deadline = time.time() + 30
            while upstream() < 3 and time.time() < deadline:
                time.sleep(0.2)
            assert upstream() == 3, upstream()
            # the sandbox's link cut first, so that nothing it sends at its end (a FIN when
            # its processes are killed) closes them: the destroy must
            vmid = c.call("sandbox.get", {"id": d})["vmid"]
            subprocess.run(["ip", "-n", f"pvesim-{info['instance']}-ct{vmid}", "link", "set", "eth0", "down"],
                           check=True)
            c.call("sandbox.destroy", {"id": d})
            deadline = time.time() + 30
            while upstream() > 0 and time.time() < deadline:
                time.sleep(0.2)
            assert upstream() == 0, upstream()

        def destroy():
            for k in ("a", "b", "n"):
                c.call("sandbox.destroy", {"id": sb[k]})

        run([("create", create), ("variables", variables), ("allowed_works", allowed_works),
             ("denied_refused", denied_refused), ("sni_mismatch", sni_mismatch), ("other_list", other_list),
             ("bypass_refused", bypass_refused), ("bad_input", bad_input), ("half_close", half_close), ("too_many", too_many),
             ("live_change", live_change), ("survives_kill9", survives_kill9),
             ("state_folder_lost", state_folder_lost), ("destroy_closes", destroy_closes), ("destroy", destroy)])


if __name__ == "__main__":
    main()
