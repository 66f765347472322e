#!/usr/bin/env python3
"""Blocked traffic fails fast: a sandbox's firewall rejects what it does not let out
(policy_out REJECT: a TCP reset, ICMP port-unreachable for UDP, as pve-firewall's
PVEFW-reject), so with internet off a name lookup fails at once instead of waiting out the
resolver's timeouts, and a connection to a blocked address is refused. Checked from inside a
Debian sandbox (glibc's resolver, python3, curl) against the simulated internet's resolver,
one on the LAN and the node's address; then with internet on, names resolve and allowed ports connect while a
port the group does not allow is still refused at once. Prints the measured durations.

Bandwidth caps: net_rate_mbps (Mbit/s) at create and in sandbox.resize becomes net0 rate= in
MB/s (MiB/s, as Proxmox takes it), which pve-sim enforces with tc as pve-common does; a
download from the simulated internet runs at the cap (within 20 %), an upload no faster, and
uncapping restores the speed. Prints the measured rates."""

import json
import os
import subprocess
import sys

from e2elib import BUILD, SRC, Env, expect_error, run

sys.path.insert(0, os.path.join(SRC, "clients", "python"))
import sandboxd  # noqa: E402

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")

FAST_MS = 100  # a refused lookup or connect, measured inside the sandbox
CAP = 64  # Mbit/s at create
PROBE = r"""
import json, socket, sys, time
inet, lan, gw = sys.argv[1], sys.argv[2], sys.argv[3]
def timed(fn):
    t0 = time.monotonic()
    try:
        fn()
        res = "ok"
    except Exception as e:
        res = type(e).__name__
    return [round((time.monotonic() - t0) * 1000, 1), res]
def lookup(ns):
    # five in a row, the slowest: the node's ICMP errors are not rate-limited per address
    # (the node-wide limit, a burst of 50 then 1000 a second, refills between the groups)
    time.sleep(0.1)
    open("/etc/resolv.conf", "w").write("nameserver %s\n" % ns)
    return max(timed(lambda: socket.getaddrinfo("example.org", 80)) for _ in range(5))
def connect(ip, port):
    return timed(lambda: socket.create_connection((ip, port), timeout=5).close())
out = {"dns_lan": lookup(lan), "dns_node": lookup(gw)}
out["dns_inet"] = lookup(inet)  # last: the sandbox's resolver again
out["tcp_inet_80"] = connect(inet, 80)
out["tcp_inet_22"] = connect(inet, 22)
out["tcp_lan_80"] = connect(lan, 80)
print(json.dumps(out))
"""


def main():
    from test_debian import ensure_image
    ensure_image()
    with Env(sim_config={"template_os": "debian", "firewall_period": 0}) as env:
        c = env.client()
        info = env.sim.info
        inet, lan = info["internet_ip"], info["lan_ip"]
        sb = {}

        def probe():
            r = c.call("sandbox.exec", {"id": sb["id"], "argv": ["python3", "-c", PROBE, inet, lan, info["gateway"]],
                                        "timeout_ms": 30000})
            assert r["exit_code"] == 0, r
            return json.loads(r["stdout"])

        def shell_ms(cmd):
            r = c.call("sandbox.exec", {"id": sb["id"], "command":
                                        f"s=$(date +%s%N); {cmd} >/dev/null 2>&1; rc=$?; "
                                        "echo $rc $(( ($(date +%s%N) - s) / 1000000 ))",
                                        "timeout_ms": 30000})
            rc, ms = r["stdout"].split()
            return int(rc), int(ms)

        def internet_off():
            sb.update(c.call("sandbox.create", {"net_rate_mbps": CAP}))
            fw = env.sim.ok("GET", f"/nodes/pve/lxc/{sb['vmid']}/firewall/options")
            assert fw.get("policy_out") == "REJECT" and fw.get("policy_in") == "DROP", fw
            m = probe()
            print(f"  internet off (ms, outcome): {m}", flush=True)
            for k in ("dns_inet", "dns_lan", "dns_node"):
                assert m[k][1] == "gaierror" and m[k][0] < FAST_MS, (k, m)
            for k in ("tcp_inet_80", "tcp_inet_22", "tcp_lan_80"):
                assert m[k][1] == "ConnectionRefusedError" and m[k][0] < FAST_MS, (k, m)
            # the tools agents run: getent (glibc), curl by name and by address
            for cmd in ("getent hosts example.org", "curl -sS -m 5 http://example.org/",
                        f"curl -sS -m 5 http://{inet}/", f"wget -q -T 5 -O- http://{inet}/"):
                rc, ms = shell_ms(cmd)
                print(f"  internet off: {cmd}: exit {rc} after {ms} ms", flush=True)
                assert rc != 0 and ms < 1000, (cmd, rc, ms)  # a shell and a process start included

        def internet_on():
            r = c.call("sandbox.set_internet", {"id": sb["id"], "enabled": True, "wait": True})
            assert r["internet"] is True, r
            m = probe()
            print(f"  internet on (ms, outcome): {m}", flush=True)
            assert m["dns_inet"][1] == "ok" and m["tcp_inet_80"][1] == "ok", m
            # the LAN resolver and ports the group does not allow: still refused at once
            for k in ("dns_lan", "dns_node"):
                assert m[k][1] == "gaierror" and m[k][0] < FAST_MS, (k, m)
            for k in ("tcp_inet_22", "tcp_lan_80"):
                assert m[k][1] == "ConnectionRefusedError" and m[k][0] < FAST_MS, (k, m)
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "curl -sS -m 5 http://example.org/"})
            assert r["exit_code"] == 0 and "pve-sim internet http" in r["stdout"], r
            # the simulated internet's names: each on its own address, the page naming it
            names = info["internet_names"]
            for n in ("allowed.test", "denied.test"):
                r = c.call("sandbox.exec", {"id": sb["id"], "command":
                                            f"getent hosts {n} && curl -sS -m 5 http://{n}/"})
                assert r["exit_code"] == 0, r
                assert r["stdout"].split()[0] == names[n], (n, r)
                assert r["stdout"].endswith(f"pve-sim internet http {n}\n"), (n, r)
            # a name that does not exist: the resolver's NXDOMAIN, at once
            rc, ms = shell_ms("getent hosts nothing.invalid")
            print(f"  internet on: getent hosts nothing.invalid: exit {rc} after {ms} ms", flush=True)
            assert rc == 2 and ms < 1000, (rc, ms)

        def download_mbps(mib):
            r = c.call("sandbox.exec", {"id": sb["id"], "timeout_ms": 30000, "command":
                                        "curl -sS -m 20 -o /dev/null -w '%{size_download} %{time_total}' "
                                        f"http://{inet}/bytes/{mib << 20}"})
            assert r["exit_code"] == 0, r
            size, secs = r["stdout"].split()
            assert int(size) == mib << 20, r
            return int(size) * 8 / float(secs) / 1e6, float(secs)

        def upload_mbps(mib):
            r = c.call("sandbox.exec", {"id": sb["id"], "timeout_ms": 30000, "command":
                                        f"head -c {mib << 20} /dev/zero > /tmp/up && "
                                        "curl -sS -m 20 -T /tmp/up -w ' %{size_upload} %{time_total}' "
                                        f"http://{inet}/sink"})
            assert r["exit_code"] == 0, r
            got, size, secs = r["stdout"].split()
            assert int(got) == int(size) == mib << 20, r
            return int(size) * 8 / float(secs) / 1e6, float(secs)

        def net0():
            return env.sim.ok("GET", f"/nodes/pve/lxc/{sb['vmid']}/config")["net0"]

        def rate_caps():
            assert sb["net_rate_mbps"] == CAP, sb
            assert "rate=7.629" in net0(), net0()  # 64 Mbit/s = 7.629 MiB/s
            got, secs = download_mbps(20)
            print(f"  capped at {CAP} Mbit/s: {got:.1f} Mbit/s ({secs:.2f} s for 20 MiB)", flush=True)
            assert CAP * 0.8 <= got <= CAP * 1.2, got
            up, secs = upload_mbps(10)
            print(f"  capped at {CAP} Mbit/s, upload: {up:.1f} Mbit/s ({secs:.2f} s for 10 MiB)", flush=True)
            assert CAP * 0.5 <= up <= CAP * 1.2, up  # a police drops the excess: TCP may stay lower
            # uncapped through the Python client
            r = sandboxd.Client(env.socket).get(sb["id"]).resize(net_rate_mbps=0).info
            assert r["net_rate_mbps"] == 0 and "rate=" not in net0(), (r, net0())
            free, secs = download_mbps(20)
            print(f"  uncapped: {free:.1f} Mbit/s ({secs:.2f} s for 20 MiB)", flush=True)
            assert free > CAP * 2, free
            # capped again through sandboxctl
            p = subprocess.run([SANDBOXCTL, "--socket", env.socket, "resize", sb["id"], "--net-rate",
                                str(CAP // 2)], capture_output=True, text=True, timeout=60)
            assert p.returncode == 0 and f"net_rate_mbps {CAP // 2}" in p.stdout, p
            assert "rate=3.815" in net0(), net0()
            assert c.call("sandbox.get", {"id": sb["id"]})["net_rate_mbps"] == CAP // 2
            got, secs = download_mbps(10)
            print(f"  capped live at {CAP // 2} Mbit/s: {got:.1f} Mbit/s ({secs:.2f} s for 10 MiB)", flush=True)
            assert CAP // 2 * 0.8 <= got <= CAP // 2 * 1.2, got

        def rate_bad_input():
            before = net0()
            for bad in (-1, 100001, "fast", 1.5):
                expect_error(c, "sandbox.resize", {"id": sb["id"], "net_rate_mbps": bad}, -32602, "net_rate_mbps")
                expect_error(c, "sandbox.create", {"net_rate_mbps": bad}, -32602, "net_rate_mbps")
            assert net0() == before and len(env.containers()) == 1

        run([("internet_off", internet_off), ("internet_on", internet_on), ("rate_caps", rate_caps),
             ("rate_bad_input", rate_bad_input)])


if __name__ == "__main__":
    main()
