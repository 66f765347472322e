#!/usr/bin/env python3
"""Addresses are reused, never run out, and are never held by two live sandboxes.

Creates and destroys (4 at a time) wrap a small address range several times: 6 static
addresses ([network] mode = static), or a DHCP pool of 6 leases in pve-sim, which frees a
lease when its container is destroyed. In static mode also: a daemon killed with -9 while
creates run, and a lost state folder, never lead to two containers with one address. In DHCP
mode also: a lease that pve-sim gives again before the daemon sees the old container's
delete end is taken once it does, not refused.

    test_addressing.py [--static] [--count N]   (default 60; the soak runs 300 per mode)"""

import argparse
import os
import shutil
import threading
import time

from e2elib import Env, run, static_network
from test_recovery_util import FAST_RECONCILE, kill9, launch

RANGE = 6
ZERO = {"clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0, "dhcp_delay": 0.05,
        "firewall_period": 0, "dhcp_pool_size": RANGE}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--static", action="store_true")
    ap.add_argument("--count", type=int, default=60)
    a = ap.parse_args()

    def daemon_config(info):
        d = {k: dict(v) for k, v in FAST_RECONCILE.items()}
        d["sandbox"].update({"max_per_uid": str(RANGE), "max_total": str(RANGE)})
        if a.static:
            d["network"] = static_network(info, first=100, count=RANGE)
        return d

    with Env(sim_config=ZERO, daemon_config=daemon_config) as env:
        c = env.client(timeout=120)
        base = env.sim.info["bridge_subnet"].split("/")[0].rsplit(".", 1)[0]
        pool = {f"{base}.{100 + i}" for i in range(RANGE)} if a.static else \
            {f"{base}.{10 + i}" for i in range(RANGE)}

        def live_ips_distinct():
            st = env.sim.admin("GET", "/state")
            ips = [v["ip"] for v in st["containers"].values() if v["running"] and v["ip"]]
            assert len(ips) == len(set(ips)), st["containers"]
            return ips

        def wrap():
            seen, errors, lock = [], [], threading.Lock()
            todo = iter(range(a.count))

            def worker():
                cl = env.client(timeout=120)
                while True:
                    with lock:
                        n = next(todo, None)
                    if n is None:
                        return
                    try:
                        # one with a bandwidth cap: written with the address (static mode)
                        # or on its own (DHCP), 10 Mbit/s = 1.192 MiB/s
                        extra = {"net_rate_mbps": 10} if n == 0 else {}
                        r = cl.call("sandbox.create", {"hostname": f"wrap-{n}", **extra})
                        x = cl.call("sandbox.exec", {"id": r["id"], "command": "echo ok"})
                        assert x["stdout"] == "ok\n", x
                        if extra:
                            net0 = env.sim.ok("GET", f"/nodes/pve/lxc/{r['vmid']}/config")["net0"]
                            assert "rate=1.192" in net0 and r["net_rate_mbps"] == 10, (r, net0)
                            assert (f"ip={r['ip']}/" in net0) == a.static, (r, net0)
                        cl.call("sandbox.destroy", {"id": r["id"]})
                        with lock:
                            seen.append(r["ip"])
                    except Exception as e:  # noqa: BLE001 - collected, asserted below
                        with lock:
                            errors.append(repr(e))
            t0 = time.time()
            th = [threading.Thread(target=worker) for _ in range(4)]
            for t in th:
                t.start()
            for t in th:
                t.join()
            print(f"  {a.count} creates and destroys, 4 at a time: {time.time() - t0:.1f} s, "
                  f"{len(set(seen))} addresses used")
            assert not errors, errors[:5]
            assert len(seen) == a.count and set(seen) <= pool, (set(seen), pool)
            # more creates than addresses all succeeded: freed addresses came back (the daemon
            # goes round its range; pve-sim's DHCP hands out the lowest free lease)
            assert not a.static or a.count < RANGE or len(set(seen)) == RANGE, set(seen)
            assert not env.containers(), env.containers()
            if not a.static:
                assert len(env.sim.admin("GET", "/state")["leases"]) == 0

        def kill_during_creates():
            # 4 creates in flight, the daemon killed; after the restart and the reconcile,
            # every address is on at most one container, and 6 new creates fill the range
            reqs = [c.send("sandbox.create", {}) for _ in range(4)]
            time.sleep(0.3)
            kill9(env)
            for r in reqs:
                try:
                    c.wait(r, timeout=5)
                except Exception:  # noqa: BLE001 - the daemon died under it
                    pass
            launch(env)
            c2 = env.client(timeout=120)
            live_ips_distinct()
            got, deadline = [], time.time() + 60
            while len(got) < RANGE and time.time() < deadline:
                try:
                    got.append(c2.call("sandbox.create", {}))
                except Exception as e:  # noqa: BLE001 - busy until the rollbacks finish
                    assert getattr(e, "code", None) in (-32007, -32003), e
                    time.sleep(0.5)
                live_ips_distinct()
            assert len(got) == RANGE, got
            ips = [r["ip"] for r in got]
            assert len(set(ips)) == RANGE and set(ips) == pool, ips
            e = c2.error("sandbox.create", {})
            assert e.code in (-32007, -32003), e.err
            for r in got:
                c2.call("sandbox.destroy", {"id": r["id"]})
            return c2

        def state_folder_lost():
            c2 = env.client(timeout=120)
            old = [c2.call("sandbox.create", {"ttl_s": 600}) for _ in range(2)]
            kill9(env)
            shutil.rmtree(os.path.join(env.dir, "state"))
            launch(env)
            c2 = env.client(timeout=120)
            for o in old:  # rebuilt from the marker, with its address
                assert c2.call("sandbox.get", {"id": o["id"]})["ip"] == o["ip"]
            new = [c2.call("sandbox.create", {}) for _ in range(RANGE - 2)]
            assert {r["ip"] for r in new} == pool - {o["ip"] for o in old}, (new, old)
            live_ips_distinct()
            for r in old + new:
                c2.call("sandbox.destroy", {"id": r["id"]})

        def destroy_seen_late():
            # the daemon learns of a delete's end after pve-sim has freed its lease and given
            # it to a new container: that address waits for the destroy, it is not refused
            first = c.call("sandbox.create", {})
            late = env.sim.admin("POST", "/faults", {"method": "GET", "latency": 3,
                                                     "path": "/nodes/pve/tasks/*vzdestroy*"})
            c2 = env.client(timeout=120)
            try:
                gone = c2.send("sandbox.destroy", {"id": first["id"]})
                t0 = time.time()
                while first["vmid"] in env.containers() and time.time() < t0 + 30:
                    time.sleep(0.05)
                again = c.call("sandbox.create", {})
                c2.wait(gone)
            finally:
                env.sim.admin("DELETE", f"/faults/{late['id']}")
                c2.close()
            assert again["ip"] == first["ip"], (first, again)  # the lowest free lease
            c.call("sandbox.destroy", {"id": again["id"]})

        tests = [(f"{a.count} creates and destroys wrap {RANGE} addresses", wrap)]
        if not a.static:
            tests += [("a lease freed before the daemon sees its destroy end", destroy_seen_late)]
        if a.static:
            tests += [("kill -9 during creates: no address twice", kill_during_creates),
                      ("lost state folder: addresses rebuilt", state_folder_lost)]
        run(tests)


if __name__ == "__main__":
    main()
