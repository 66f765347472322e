#!/usr/bin/env python3
"""Blocked traffic fails fast: a sandbox's firewall rejects what it does not let out
(policy_out REJECT: a TCP reset, ICMP port-unreachable for UDP, as pve-firewall's
PVEFW-reject), so with internet off a name lookup fails at once instead of waiting out the
resolver's timeouts, and a connection to a blocked address is refused. Checked from inside a
Debian sandbox (glibc's resolver, python3, curl) against the simulated internet's resolver
and one on the LAN; then with internet on, names resolve and allowed ports connect while a
port the group does not allow is still refused at once. Prints the measured durations."""

import json
import time

from e2elib import Env, run

FAST_MS = 100  # a refused lookup or connect, measured inside the sandbox
PROBE = r"""
import json, socket, sys, time
inet, lan = sys.argv[1], sys.argv[2]
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
    open("/etc/resolv.conf", "w").write("nameserver %s\n" % ns)
    return max(timed(lambda: socket.getaddrinfo("example.org", 80)) for _ in range(5))
def connect(ip, port):
    return timed(lambda: socket.create_connection((ip, port), timeout=5).close())
out = {"dns_lan": lookup(lan)}
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
            r = c.call("sandbox.exec", {"id": sb["id"], "argv": ["python3", "-c", PROBE, inet, lan],
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
            sb.update(c.call("sandbox.create", {}))
            fw = env.sim.ok("GET", f"/nodes/pve/lxc/{sb['vmid']}/firewall/options")
            assert fw.get("policy_out") == "REJECT" and fw.get("policy_in") == "DROP", fw
            m = probe()
            print(f"  internet off (ms, outcome): {m}", flush=True)
            for k in ("dns_inet", "dns_lan"):
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
            for k in ("dns_lan",):
                assert m[k][1] == "gaierror" and m[k][0] < FAST_MS, (k, m)
            for k in ("tcp_inet_22", "tcp_lan_80"):
                assert m[k][1] == "ConnectionRefusedError" and m[k][0] < FAST_MS, (k, m)
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "curl -sS -m 5 http://example.org/"})
            assert r["exit_code"] == 0 and "pve-sim internet http" in r["stdout"], r

        run([("internet_off", internet_off), ("internet_on", internet_on)])


if __name__ == "__main__":
    main()
