#!/usr/bin/env python3
"""Egress allow-lists: `internet: {"allow": [...]}` at create and through
sandbox.set_internet. CIDR entries become the sandbox's own Proxmox firewall IP sets and
rules (one set per port, "egress-80", and one rule each); checked from inside a Debian
sandbox against the simulated internet, whose host answers on ports 80, 443 and 22 of each
of its addresses (internet.test, allowed.test, denied.test), so that a refused connect is
the firewall's doing, not a closed port. A live change takes effect; the list survives a
kill -9 of the daemon and, read back from the firewall, a lost state folder; a change cut
short by a crash is undone at the restart; a fork keeps its parent's list; bad lists are
refused and change nothing; with internet off a lookup fails in under 100 ms. Prints the
measured durations."""

import json
import os
import shutil
import subprocess
import sys
import time

from e2elib import BUILD, SRC, Env, expect_error, run
from test_recovery_util import kill9, launch, wait_dead, wait_reconciled

sys.path.insert(0, os.path.join(SRC, "clients", "python"))
import sandboxd  # noqa: E402

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")

FAST_MS = 100
PROBE = r"""
import json, socket, sys, time
def timed(fn):
    t0 = time.monotonic()
    try:
        fn()
        res = "ok"
    except Exception as e:
        res = type(e).__name__
    return [round((time.monotonic() - t0) * 1000, 1), res]
def connect(ip, port):
    def go():
        s = socket.create_connection((ip, port), timeout=5)
        s.settimeout(5)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        if not s.recv(64):
            raise EOFError()
        s.close()
    return timed(go)
out = {}
for a in sys.argv[1:]:
    ip, port = a.rsplit(":", 1)
    out[a] = connect(ip, int(port))
out["dns"] = timed(lambda: socket.getaddrinfo("allowed.test", 80))
print(json.dumps(out))
"""


def main():
    from test_debian import ensure_image
    ensure_image()
    with Env(sim_config={"template_os": "debian", "firewall_period": 0}) as env:
        c = env.client()
        info = env.sim.info
        names = info["internet_names"]
        allowed, denied, inet = names["allowed.test"], names["denied.test"], info["internet_ip"]
        sb = {}
        every = [f"{a}:{p}" for a in (allowed, denied, inet) for p in (80, 443, 22)]

        def reach():
            """What the sandbox reaches among every address:port, and its lookup."""
            r = c.call("sandbox.exec", {"id": sb["id"], "argv": ["python3", "-c", PROBE] + every,
                                        "timeout_ms": 60000})
            assert r["exit_code"] == 0, r
            m = json.loads(r["stdout"])
            for k, (ms, res) in m.items():
                assert res == "ok" or ms < FAST_MS, (k, m)  # refused at once, never a timeout
            return {k for k, (ms, res) in m.items() if res == "ok" and k != "dns"}, m["dns"]

        def fw():
            vmid = sb["vmid"]
            sets = {s["name"]: sorted(e["cidr"] for e in env.sim.ok("GET", f"/nodes/pve/lxc/{vmid}/firewall/ipset/{s['name']}"))
                    for s in env.sim.ok("GET", f"/nodes/pve/lxc/{vmid}/firewall/ipset")
                    if s["name"].startswith("egress-")}
            rules = env.sim.ok("GET", f"/nodes/pve/lxc/{vmid}/firewall/rules")
            return sets, rules

        def group_rule(rules):
            return any(r.get("type") == "group" for r in rules)

        def one_cidr_port():
            sb.update(c.call("sandbox.create", {"internet": {"allow": [f"{allowed}:80"]}}))
            assert sb["internet"] is True and sb["internet_allow"] == [f"{allowed}:80"], sb
            got = c.call("sandbox.get", {"id": sb["id"]})
            assert got["internet_allow"] == [f"{allowed}:80"], got
            sets, rules = fw()
            assert sets == {"egress-80": [allowed]}, sets
            eg = [r for r in rules if r.get("comment") == "sandboxd-egress"]
            assert len(eg) == 1 and eg[0]["dest"] == "+egress-80" and eg[0]["dport"] == "80" and \
                eg[0]["proto"] == "tcp" and eg[0]["action"] == "ACCEPT" and eg[0]["type"] == "out", rules
            assert not group_rule(rules), rules
            ok, dns = reach()
            print(f"  allow {allowed}:80: reached {sorted(ok)}, lookup {dns}", flush=True)
            assert ok == {f"{allowed}:80"}, ok
            assert dns[1] == "gaierror" and dns[0] < FAST_MS, dns

        def live_change():
            r = c.call("sandbox.set_internet", {"id": sb["id"], "enabled": True, "wait": True,
                                                "allow": [f"{denied}/32", f"{inet}:443", f"{inet}:22"]})
            assert r["internet_allow"] == [denied, f"{inet}:443", f"{inet}:22"], r
            assert "effective_by" in r, r
            sets, rules = fw()
            assert sets == {"egress-all": [denied], "egress-443": [inet], "egress-22": [inet]}, sets
            ok, _ = reach()
            print(f"  allow {denied}, {inet}:443, {inet}:22: reached {sorted(ok)}", flush=True)
            assert ok == {f"{denied}:80", f"{denied}:443", f"{denied}:22", f"{inet}:443", f"{inet}:22"}, ok

        def survives_kill9():
            kill9(env)
            launch(env)
            nonlocal c
            c = env.client()
            got = c.call("sandbox.get", {"id": sb["id"]})
            assert got["internet"] is True and got["internet_allow"] == [denied, f"{inet}:443", f"{inet}:22"], got
            ok, _ = reach()
            assert f"{denied}:80" in ok and f"{allowed}:80" not in ok, ok

        def state_folder_lost():
            """The list read back from the sandbox's firewall sets and rules."""
            nonlocal c
            assert env.stop_daemon() == 0
            shutil.rmtree(os.path.join(env.dir, "state"))
            launch(env)
            c = env.client()
            wait_reconciled(env, runs_after=1)
            got = c.call("sandbox.get", {"id": sb["id"]})
            assert got["internet"] is True and \
                sorted(got["internet_allow"]) == sorted([denied, f"{inet}:443", f"{inet}:22"]), got

        def change_cut_short():
            """A change whose intent is recorded when the daemon dies, with part of it in the
            firewall (here: the old list's rule gone): the restart puts the recorded list back."""
            nonlocal c
            before = c.call("sandbox.get", {"id": sb["id"]})["internet_allow"]
            want = fw()[0]
            assert env.stop_daemon() == 0
            launch(env, crash_at="internet-pending-durable")
            c = env.client()
            c.send("sandbox.set_internet", {"id": sb["id"], "enabled": True, "allow": [f"{allowed}:80"]})
            assert wait_dead(env) != 0
            vmid = sb["vmid"]
            rules = env.sim.ok("GET", f"/nodes/pve/lxc/{vmid}/firewall/rules")
            eg = [r for r in rules if r.get("comment") == "sandboxd-egress"]
            env.sim.ok("DELETE", f"/nodes/pve/lxc/{vmid}/firewall/rules/{eg[0]['pos']}")
            launch(env)
            c = env.client()
            got = c.call("sandbox.get", {"id": sb["id"]})
            assert got["internet_allow"] == before, got
            deadline = time.time() + 30
            while True:
                try:
                    sets, rules = fw()
                except AssertionError:  # a set the daemon removed between the two reads
                    sets, rules = None, []
                n = len([r for r in rules if r.get("comment") == "sandboxd-egress"])
                if sets == want and n == len(want):
                    break
                assert time.time() < deadline, (sets, rules)
                time.sleep(0.2)
            ok, _ = reach()
            assert f"{denied}:80" in ok and f"{inet}:443" in ok and f"{allowed}:80" not in ok, ok

        def fork_keeps_list():
            """A fork's children get the parent's list, never more."""
            r = c.call("sandbox.fork", {"id": sb["id"], "count": 1}, timeout=240)
            child = r["sandboxes"][0]
            want = c.call("sandbox.get", {"id": sb["id"]})["internet_allow"]
            assert child["internet"] is True and child["internet_allow"] == want, child
            sets = {s["name"] for s in env.sim.ok("GET", f"/nodes/pve/lxc/{child['vmid']}/firewall/ipset")}
            rules = env.sim.ok("GET", f"/nodes/pve/lxc/{child['vmid']}/firewall/rules")
            assert {s for s in sets if s.startswith("egress-")} == {"egress-all", "egress-443", "egress-22"}, sets
            assert not group_rule(rules), rules
            c.call("sandbox.destroy", {"id": child["id"]})

        def bad_lists():
            before = c.call("sandbox.get", {"id": sb["id"]})
            n = len(env.containers())
            cases = [({"allow": []}, "internet.allow"), ({"allow": ["0.0.0.0/0"]}, "internet.allow"),
                     ({"allow": [f"{allowed}:0"]}, "internet.allow"), ({"allow": ["10.0.0.1/33"]}, "internet.allow"),
                     ({"allow": [f"10.0.{i // 250}.{i % 250}" for i in range(65)]}, "internet.allow"),
                     ({"allow": [allowed, allowed]}, "internet.allow"), ({"allow": ["x" * 300]}, "internet.allow"),
                     ({"allow": ["allowed.test"]}, "internet.allow"), ({"allow": [7]}, "internet.allow"),
                     ({"allow": ["10.0.0.0/8:22"]}, "internet.allow"), ({"allow": [f"{allowed}", "8.0.0.0/5"]}, "internet.allow"),
                     ({"allow": ["169.254.169.254:80"]}, "internet.allow"), ({"allow": [info["gateway"] + ":53"]}, "internet.allow"),
                     ({"deny": [allowed]}, "internet"), ("yes", "internet"), ({"allow": allowed}, "internet.allow")]
            for bad, field in cases:
                expect_error(c, "sandbox.create", {"internet": bad}, -32602, field)
                if isinstance(bad, dict) and "allow" in bad:
                    expect_error(c, "sandbox.set_internet", {"id": sb["id"], "enabled": True, "allow": bad["allow"]},
                                 -32602, "allow")
            expect_error(c, "sandbox.set_internet", {"id": sb["id"], "enabled": False, "allow": [allowed]},
                         -32602, "allow")
            after = c.call("sandbox.get", {"id": sb["id"]})
            assert after["internet_allow"] == before["internet_allow"] and len(env.containers()) == n, after

        def off_and_on():
            r = c.call("sandbox.set_internet", {"id": sb["id"], "enabled": False})
            assert r["internet"] is False and r["internet_allow"] is None, r
            sets, rules = fw()
            assert sets == {} and not [x for x in rules if x.get("comment") == "sandboxd-egress"], (sets, rules)
            ok, dns = reach()
            print(f"  internet off: reached {sorted(ok)}, lookup {dns}", flush=True)
            assert ok == set() and dns[1] == "gaierror" and dns[0] < FAST_MS, (ok, dns)
            # through sandboxctl, then the Python client
            p = subprocess.run([SANDBOXCTL, "--socket", env.socket, "internet", sb["id"], "allow", f"{allowed}:22"],
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 0 and f'internet_allow ["{allowed}:22"]' in p.stdout.replace(" ]", "]") \
                .replace("[ ", "["), p
            py = sandboxd.Client(env.socket).get(sb["id"])
            assert py.set_internet(True, allow=[f"{allowed}:443"]).info["internet_allow"] == [f"{allowed}:443"]
            r = py.set_internet(True).info
            assert r["internet"] is True and r["internet_allow"] is None, r
            sets, rules = fw()
            assert sets == {} and group_rule(rules), (sets, rules)
            ok, dns = reach()
            print(f"  internet on: reached {sorted(ok)}, lookup {dns}", flush=True)
            assert f"{allowed}:80" in ok and f"{allowed}:22" not in ok and dns[1] == "ok", (ok, dns)

        run([("one_cidr_port", one_cidr_port), ("live_change", live_change), ("survives_kill9", survives_kill9),
         ("state_folder_lost", state_folder_lost), ("change_cut_short", change_cut_short),
         ("fork_keeps_list", fork_keeps_list),
             ("bad_lists", bad_lists), ("off_and_on", off_and_on)])


if __name__ == "__main__":
    main()
