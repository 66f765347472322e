#!/usr/bin/env python3
"""A container's address is never taken on its word, and its ipfilter set never filters it
by surprise.

DHCP mode ([network] mode = dhcp, with addresses, prefix and gateway set):
  - GET .../interfaces reports whatever addresses exist inside the container (pve-sim's
    setting interfaces_extra_ipv4 puts one first, as code in the container could): a
    sandbox reporting the gateway's, a sibling's, the daemon host's or an out-of-range
    address is refused (the create fails and cleans up, audited), and no ipfilter set ever
    holds that address;
  - a READY sandbox whose container was stopped while the daemon was down and gets
    another lease at its restart ends up with exactly the new address in its set;
  - with a 3 s firewall cycle and the ipset calls slowed down past a cycle, creates never
    have their own traffic dropped by ipfilter (an existing ipfilter-net0 set filters
    whatever the ipfilter option, as on a node);
  - a template carrying its own ipfilter-net0 set: the sandbox's set holds its lease only.
Static mode (--static, nftables firewall: a static ip= is not merged into an existing set):
  - a template carrying its own ipfilter-net0 set: the sandbox works, nothing dropped.

    test_addr_trust.py [--static]"""

import sys
import threading
import time

from e2elib import Env, run, static_network
from test_recovery_util import FAST_RECONCILE, kill9, launch, wait_reconciled

STATIC = "--static" in sys.argv
PERIOD = 3


def drops(env, vmids):
    d = env.sim.admin("GET", "/state")["firewall"]["ipfilter_drops"]
    return {v: d.get(str(v), 0) for v in vmids}


def ipsets(env, vmid):
    """{set name: [cidr, ...]} of a container's firewall."""
    fw = env.sim.admin("GET", f"/ct/{vmid}").get("fw") or {}
    return {n: [e["cidr"] for e in d.get("entries", [])] for n, d in (fw.get("ipsets") or {}).items()}


class SetWatch:
    """Polls every container's ipfilter-net0 set (and the daemon's staging set) while
    running; records any that holds addr (the container `allowed`, if any, excepted)."""

    def __init__(self, env, addr, allowed=None):
        self.env, self.addr, self.allowed = env, addr, allowed
        self.seen = []
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop.is_set():
            for vmid in self.env.containers():
                if vmid == self.allowed:
                    continue
                try:
                    sets = ipsets(self.env, vmid)
                except Exception:  # noqa: BLE001 - the container went meanwhile
                    continue
                for name, entries in sets.items():
                    if self.addr in entries:
                        self.seen.append((vmid, name))
            self.stop.wait(0.02)

    def __enter__(self):
        self.th.start()
        return self

    def __exit__(self, *a):
        self.stop.set()
        self.th.join()


def main():
    def daemon_config(info):
        d = {k: dict(v) for k, v in FAST_RECONCILE.items()}
        d["sandbox"]["create_timeout_s"] = "60"
        if STATIC:
            d["network"] = static_network(info)
        else:
            net, plen = info["bridge_subnet"].split("/")
            base = net.rsplit(".", 1)[0]
            d["network"] = {"mode": "dhcp", "addresses": f"{base}.10-{base}.250", "prefix": plen,
                            "gateway": info["gateway"]}
        return d

    sim_config = {"firewall_period": PERIOD, "firewall_nftables": STATIC}
    with Env(sim_config=sim_config, daemon_config=daemon_config) as env:
        state = {"c": env.client()}
        info = env.sim.info

        def extra(addr):
            env.sim.admin("PUT", "/settings", {"interfaces_extra_ipv4": {"*": addr} if addr else {}})

        def refused(addr, reason, allowed=None):
            c = state["c"]
            extra(addr)
            try:
                with SetWatch(env, addr, allowed) as w:
                    e = c.error("sandbox.create", {})
                    env.wait_no_containers() if allowed is None else time.sleep(0.5)
            finally:
                extra(None)
            msg = e.data.get("message", "")
            assert f"reports the address {addr}, refused" in msg and reason in msg, e.err
            assert not w.seen, w.seen
            log = env.daemon_log()
            assert "event=sandbox.address_refused" in log and addr in log, log[-3000:]
            if allowed is None:
                assert not env.containers(), env.containers()
            return msg

        def gateway_refused():
            refused(info["gateway"], "the gateway's address")

        def out_of_range_refused():
            refused("192.0.2.77", "outside [network] addresses")

        def daemon_host_refused():
            # the address the daemon host has towards the node
            refused(info["daemon_ip"], "an address of the daemon's host")

        def sibling_refused():
            c = state["c"]
            a = c.call("sandbox.create", {})
            try:
                msg = refused(a["ip"], f"the address of sandbox {a['id']}", allowed=a["vmid"])
                assert a["id"] in msg
                assert ipsets(env, a["vmid"]).get("ipfilter-net0") == [a["ip"]], ipsets(env, a["vmid"])
                r = c.call("sandbox.exec", {"id": a["id"], "command": "echo ok"})
                assert r["stdout"] == "ok\n", r
            finally:
                c.call("sandbox.destroy", {"id": a["id"]})

        def restart_replaces():
            c = state["c"]
            sb = c.call("sandbox.create", {"ttl_s": 600})
            vmid, old = sb["vmid"], sb["ip"]
            assert ipsets(env, vmid) == {"ipfilter-net0": [old]}, ipsets(env, vmid)
            c.close()
            kill9(env)
            upid = env.sim.ok("POST", f"/nodes/pve/lxc/{vmid}/status/stop")
            env.sim.wait_task(upid)
            moved = env.sim.admin("POST", f"/ct/{vmid}/new-lease")
            assert moved["old"] == old and moved["ip"] != old, moved
            launch(env)
            wait_reconciled(env)
            c = state["c"] = env.client()
            got = c.call("sandbox.get", {"id": sb["id"]})
            assert got["state"] == "ready" and got["ip"] == moved["ip"], got
            assert ipsets(env, vmid) == {"ipfilter-net0": [moved["ip"]]}, ipsets(env, vmid)
            # the new address passes once a firewall cycle has applied the new set
            ticks = env.sim.admin("GET", "/state")["firewall"]["ticks"]
            deadline = time.time() + PERIOD + 2
            while env.sim.admin("GET", "/state")["firewall"]["ticks"] == ticks and time.time() < deadline:
                time.sleep(0.1)
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo ok"})
            assert r["stdout"] == "ok\n", r
            c.call("sandbox.destroy", {"id": sb["id"]})

        def slow_ipset_no_drops():
            # every ipset entry call takes longer than a firewall cycle: a cycle falls between
            # the set's creation and its entry
            c = state["c"]
            f = env.sim.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/*/firewall/ipset/*",
                                                  "latency": PERIOD + 0.5})
            res = []
            try:
                for n in range(2):
                    r = c.call("sandbox.create", {"hostname": f"slow-{n}"})
                    res.append(r)
                    t0 = time.time()
                    x = c.call("sandbox.exec", {"id": r["id"], "command": "echo ok"})
                    assert x["stdout"] == "ok\n", x
                    assert time.time() - t0 < PERIOD, time.time() - t0
                vmids = [r["vmid"] for r in res]
                assert all(v == 0 for v in drops(env, vmids).values()), drops(env, vmids)
            finally:
                env.sim.admin("DELETE", f"/faults/{f['id']}")
                for r in res:
                    c.call("sandbox.destroy", {"id": r["id"]})

        def template_set():
            # the template's own ipfilter-net0 set (copied by every clone) with a stray address
            c = state["c"]
            base = info["bridge_subnet"].split("/")[0].rsplit(".", 1)[0]
            stray = f"{base}.251"
            env.sim.ok("POST", "/nodes/pve/lxc/9000/firewall/ipset", {"name": "ipfilter-net0"})
            env.sim.ok("POST", "/nodes/pve/lxc/9000/firewall/ipset/ipfilter-net0", {"cidr": stray})
            res = []
            try:
                for n in range(2):
                    r = c.call("sandbox.create", {"hostname": f"tmplset-{n}"})
                    res.append(r)
                    x = c.call("sandbox.exec", {"id": r["id"], "command": "echo ok"})
                    assert x["stdout"] == "ok\n", x
                    sets = ipsets(env, r["vmid"])
                    if STATIC:
                        assert "ipfilter-net0" not in sets, sets  # net0's ip= makes it
                    else:
                        assert sets == {"ipfilter-net0": [r["ip"]]}, sets
                # and still once a firewall cycle has compiled the clones' own filters
                time.sleep(PERIOD + 0.5)
                for r in res:
                    x = c.call("sandbox.exec", {"id": r["id"], "command": "echo ok"})
                    assert x["stdout"] == "ok\n", x
                vmids = [r["vmid"] for r in res]
                assert all(v == 0 for v in drops(env, vmids).values()), drops(env, vmids)
            finally:
                for r in res:
                    c.call("sandbox.destroy", {"id": r["id"]})
                env.sim.ok("DELETE", "/nodes/pve/lxc/9000/firewall/ipset/ipfilter-net0", {"force": 1})

        if STATIC:
            tests = [("a template's own ipfilter-net0 set (static, nftables)", template_set)]
        else:
            tests = [("the gateway's address is refused", gateway_refused),
                     ("an address outside [network] addresses is refused", out_of_range_refused),
                     ("the daemon host's address is refused", daemon_host_refused),
                     ("a sibling's address is refused", sibling_refused),
                     ("a restart with a new lease: the set holds the new address only", restart_replaces),
                     ("ipset calls slower than a firewall cycle: nothing dropped", slow_ipset_no_drops),
                     ("a template's own ipfilter-net0 set (DHCP)", template_set)]
        run(tests)


if __name__ == "__main__":
    main()
