#!/usr/bin/env python3
"""The firewall on Proxmox's own cycle: pve-sim compiles and applies the firewall every
firewall_period seconds (10, as pve-firewall does), with a phase independent of the API
calls. No create may depend on where a cycle falls: the container's own packets are never
dropped by ipfilter (pve-sim counts every packet ipfilter drops from a container's own
address), whichever the phase. Checked with the real 10 s cycle (4 sequential creates,
each waiting for a tick to prove its isolation, and 8 parallel ones) and with extra ticks
forced every 20 ms during creates, so that a tick falls inside every step of the create.

sandbox.set_internet tells by when a change is enforced (effective_by, one cycle), and with
wait: true returns only once a TCP connect from inside the sandbox to [network]
probe_address succeeds (on) or fails (off); past wait_timeout_s it is -32006.

A new container is unfiltered until the first cycle after its start compiles its rules: no
sandbox is ready before its isolation is proven from inside (a connect to probe_address with
internet off, to lan_probe_address with internet on, fails), so its first command already
runs isolated, wherever the next tick falls."""

import calendar
import sys
import threading
import time

from e2elib import Env, run, static_network

STATIC = "--static" in sys.argv  # [network] mode = static (else DHCP, the default)

PERIOD = 10
INTERNET = "198.51.100.2"  # pve-sim's internet host (internet_subnet 198.51.100.0/24)
FETCH = f"echo | timeout 3 nc {INTERNET} 80 >/dev/null 2>&1 && echo OPEN || echo CLOSED"


def fetch_cmd(ip):
    return f"echo | timeout 3 nc {ip} 80 >/dev/null 2>&1 && echo OPEN || echo CLOSED"


def drops(env, vmids):
    d = env.sim.admin("GET", "/state")["firewall"]["ipfilter_drops"]
    return {v: d.get(str(v), 0) for v in vmids}


def main():
    def daemon_config(info):
        net = static_network(info) if STATIC else {}
        net["probe_address"] = f"{INTERNET}:80"
        net["lan_probe_address"] = f"{info['lan_ip']}:80"
        return {"sandbox": {"max_per_uid": "16", "max_total": "16"}, "network": net}

    with Env(sim_config={"firewall_period": PERIOD}, daemon_config=daemon_config) as env:
        c = env.client()
        assert env.sim.admin("GET", "/state")["firewall"]["period"] == PERIOD
        assert env.sim.info["internet_ip"] == INTERNET

        def destroy_all(ids):
            reqs = [c.send("sandbox.destroy", {"id": i}) for i in ids]
            for r in reqs:
                c.wait(r)

        def sequential_creates():
            # at least 4, and on until two ticks fell during the run (each create is destroyed
            # before the next; each waits for a tick to prove its isolation, so the cycle
            # falls inside every create; every phase of each step: the forced-ticks case)
            took, vmids, n = [], [], 0
            t_first = env.sim.admin("GET", "/state")["firewall"]["ticks"]
            while n < 4 or (env.sim.admin("GET", "/state")["firewall"]["ticks"] - t_first < 2 and n < 80):
                t0 = time.time()
                r = c.call("sandbox.create", {"hostname": f"seq-{n}"})
                took.append(time.time() - t0)
                try:
                    assert r["state"] == "ready", r
                    vmids.append(r["vmid"])
                    assert c.call("sandbox.exec", {"id": r["id"], "command": "true"})["exit_code"] == 0
                finally:
                    c.call("sandbox.destroy", {"id": r["id"]})
                n += 1
            ticks = env.sim.admin("GET", "/state")["firewall"]["ticks"] - t_first
            print(f"  {n} sequential creates over {ticks} firewall cycles: "
                  f"mean {sum(took) / len(took):.2f} s, max {max(took):.2f} s")
            assert ticks >= 2, ticks
            # the cycle ran meanwhile at its own phase, and dropped nothing of the sandboxes'
            assert all(x == 0 for x in drops(env, vmids).values()), drops(env, vmids)

        def parallel_8():
            t0 = time.time()
            reqs = [c.send("sandbox.create", {"hostname": f"par-{n}"}) for n in range(8)]
            res = []
            try:
                for r in reqs:
                    res.append(c.wait(r))
                print(f"  8 parallel creates took {time.time() - t0:.2f} s")
                assert all(r["state"] == "ready" for r in res), res
                vmids = [r["vmid"] for r in res]
                assert all(x == 0 for x in drops(env, vmids).values()), drops(env, vmids)
                for r in res:
                    assert c.call("sandbox.exec", {"id": r["id"], "command": "true"})["exit_code"] == 0
            finally:
                destroy_all([r["id"] for r in res])

        def every_phase():
            # a tick every 20 ms on top of the cycle: one falls between any two calls of a create
            stop = threading.Event()

            def ticker():
                while not stop.is_set():
                    env.sim.admin("POST", "/firewall/apply")
                    stop.wait(0.02)
            th = threading.Thread(target=ticker, daemon=True)
            th.start()
            res = []
            try:
                reqs = [c.send("sandbox.create", {"hostname": f"tick-{n}"}) for n in range(4)]
                for r in reqs:
                    res.append(c.wait(r))
                for n in range(4, 8):
                    res.append(c.call("sandbox.create", {"hostname": f"tick-{n}"}))
                assert all(r["state"] == "ready" for r in res), res
                vmids = [r["vmid"] for r in res]
                assert all(x == 0 for x in drops(env, vmids).values()), drops(env, vmids)
            finally:
                stop.set()
                th.join()
                destroy_all([r["id"] for r in res])

        def fetch(sid):
            r = c.call("sandbox.exec", {"id": sid, "command": FETCH})
            return r.get("stdout", repr(r)).strip()

        def set_internet_wait():
            sb = c.call("sandbox.create", {})
            sid = sb["id"]
            try:
                # a new container is filtered from the first cycle after its start (as on a
                # node): waiting for "off" confirms that its isolation is in force
                for on in (False, True, False):
                    t0 = time.time()
                    r = c.call("sandbox.set_internet", {"id": sid, "enabled": on, "wait": True})
                    assert r["internet"] is on, r
                    by = calendar.timegm(time.strptime(r["effective_by"], "%Y-%m-%dT%H:%M:%SZ"))
                    assert t0 - 1 <= by <= time.time() + PERIOD + 1, (r["effective_by"], t0)
                    # confirmed from inside: the very next fetch sees the new state
                    assert fetch(sid) == ("OPEN" if on else "CLOSED"), on
                    print(f"  set_internet {on} with wait returned after {time.time() - t0:.1f} s")
                # without wait: at once, and effective_by bounds it
                r = c.call("sandbox.set_internet", {"id": sid, "enabled": True})
                assert r["internet"] is True and "effective_by" in r, r
                r = c.call("sandbox.set_internet", {"id": sid, "enabled": False, "wait": True})
                assert fetch(sid) == "CLOSED"
                # no tick within the wait: -32006, the change itself stays made
                env.sim.admin("PUT", "/settings", {"firewall_period": 60, "firewall_phase": 59})
                try:
                    e = c.error("sandbox.set_internet",
                                {"id": sid, "enabled": True, "wait": True, "wait_timeout_s": 2})
                    assert e.code == -32006 and e.data["timeout_ms"] == 2000, e.err
                    # no probe saw the internet (one may not have completed: reachable null)
                    assert e.data["reachable"] is not True and e.data["probes"] >= 1, e.err
                    assert c.call("sandbox.get", {"id": sid})["internet"] is True
                finally:
                    env.sim.admin("PUT", "/settings", {"firewall_period": PERIOD, "firewall_phase": None})
                # bad params change nothing
                e = c.error("sandbox.set_internet", {"id": sid, "enabled": False, "wait_timeout_s": 0})
                assert e.code == -32602, e.err
                e = c.error("sandbox.set_internet", {"id": sid, "enabled": False, "wait": "yes"})
                assert e.code == -32602, e.err
                assert c.call("sandbox.get", {"id": sid})["internet"] is True
            finally:
                c.call("sandbox.destroy", {"id": sid})

        def first_command_isolated():
            # the next tick late in the cycle: each create returns long before it
            lan = env.sim.info["lan_ip"]
            res = []
            env.sim.admin("PUT", "/settings", {"firewall_period": 8, "firewall_phase": 7.5})
            try:
                for internet in (False, True):
                    env.sim.admin("POST", "/firewall/apply")  # what is compiled: no new container
                    t_tick = env.sim.admin("GET", "/state")["firewall"]["next_tick"]
                    t0 = time.time()
                    r = c.call("sandbox.create", {"internet": internet})
                    took = time.time() - t0
                    res.append(r)
                    assert r["state"] == "ready", r
                    sid = r["id"]
                    # the very first commands: the internet (off) and the LAN (always) closed
                    got = {ip: c.call("sandbox.exec", {"id": sid, "command": fetch_cmd(ip)})["stdout"].strip()
                           for ip in (INTERNET, lan)}
                    print(f"  create with internet {internet} took {took:.1f} s "
                          f"(next tick was {t_tick - t0:.1f} s away): {got}")
                    assert got[lan] == "CLOSED", got
                    assert got[INTERNET] == ("OPEN" if internet else "CLOSED"), got
            finally:
                env.sim.admin("PUT", "/settings", {"firewall_period": PERIOD, "firewall_phase": None})
                destroy_all([r["id"] for r in res])

        def tick_between_options_and_rule():
            # A cycle falls after the container's options (policy DROP) and before its internet
            # rule: it enforces the policy alone until the next cycle, 10 s later. The create
            # must not call the sandbox ready with the LAN closed and the internet closed too.
            lan = env.sim.info["lan_ip"]
            fault = env.sim.admin("POST", "/faults", {"method": "GET", "path": "/nodes/*/lxc/*/firewall/rules",
                                                     "latency": 5, "count": 1})
            env.sim.admin("PUT", "/settings", {"firewall_period": PERIOD, "firewall_phase": 3.0})
            sid = None
            try:
                ticks = env.sim.admin("GET", "/state")["firewall"]["ticks"]
                r = c.call("sandbox.create", {"internet": True})
                sid = r["id"]
                got = {ip: c.call("sandbox.exec", {"id": sid, "command": fetch_cmd(ip)})["stdout"].strip()
                       for ip in (INTERNET, lan)}
                assert got == {INTERNET: "OPEN", lan: "CLOSED"}, got
                assert env.sim.admin("GET", "/state")["firewall"]["ticks"] - ticks >= 2, "the rule's cycle did not come"
            finally:
                env.sim.admin("DELETE", f"/faults/{fault['id']}")
                env.sim.admin("PUT", "/settings", {"firewall_period": PERIOD, "firewall_phase": None})
                if sid:
                    c.call("sandbox.destroy", {"id": sid})

        def static_addresses():
            # the addresses come from the range, sit in net0, and take no lease
            res = [c.call("sandbox.create", {}) for _ in range(2)]
            try:
                st = env.sim.admin("GET", "/state")
                for r in res:
                    assert 100 <= int(r["ip"].rsplit(".", 1)[1]) <= 139, r
                    ct = env.sim.admin("GET", f"/ct/{r['vmid']}")["ct"]
                    assert f"ip={r['ip']}/" in ct["conf"]["net0"], ct["conf"]["net0"]
                    assert ct["conf"]["nameserver"] == "198.51.100.2", ct["conf"]
                    mac = st["containers"][str(r["vmid"])]["mac"].upper()
                    assert mac not in st["leases"], (mac, st["leases"])
                    out = c.call("sandbox.exec", {"id": r["id"], "command": "cat /etc/resolv.conf"})
                    assert out["stdout"] == "nameserver 198.51.100.2\n", out
                assert len({r["ip"] for r in res}) == 2, res
            finally:
                destroy_all([r["id"] for r in res])

        tests = [("the first command runs isolated, whatever the cycle's phase", first_command_isolated),
                 ("4 sequential creates, 10 s firewall cycle", sequential_creates),
                 ("8 parallel creates, 10 s firewall cycle", parallel_8),
                 ("creates with a firewall tick at every phase", every_phase)]
        if STATIC:
            tests.append(("static addresses in net0, no lease", static_addresses))
        else:
            tests.append(("set_internet with wait, 10 s firewall cycle", set_internet_wait))
            tests.append(("a cycle between the options and the internet rule", tick_between_options_and_rule))
        run(tests)


if __name__ == "__main__":
    main()
