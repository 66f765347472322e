#!/usr/bin/env python3
"""The firewall on Proxmox's own cycle: pve-sim compiles and applies the firewall every
firewall_period seconds (10, as pve-firewall does), with a phase independent of the API
calls. No create may depend on where a cycle falls: the container's own packets are never
dropped by ipfilter (pve-sim counts every packet ipfilter drops from a container's own
address), whichever the phase. Checked with the real 10 s cycle (16 sequential and 8
parallel creates) and with extra ticks forced every 20 ms during creates, so that a tick
falls inside every step of the create."""

import threading
import time

from e2elib import Env, run

PERIOD = 10


def drops(env, vmids):
    d = env.sim.admin("GET", "/state")["firewall"]["ipfilter_drops"]
    return {v: d.get(str(v), 0) for v in vmids}


def main():
    with Env(sim_config={"firewall_period": PERIOD},
             daemon_config={"sandbox": {"max_per_uid": "16", "max_total": "16"}}) as env:
        c = env.client()
        assert env.sim.admin("GET", "/state")["firewall"]["period"] == PERIOD

        def destroy_all(ids):
            reqs = [c.send("sandbox.destroy", {"id": i}) for i in ids]
            for r in reqs:
                c.wait(r)

        def sequential_16():
            ids, vmids, took = [], [], []
            t_first = env.sim.admin("GET", "/state")["firewall"]["ticks"]
            for n in range(16):
                t0 = time.time()
                r = c.call("sandbox.create", {"hostname": f"seq-{n}"})
                took.append(time.time() - t0)
                assert r["state"] == "ready", r
                ids.append(r["id"])
                vmids.append(r["vmid"])
            ticks = env.sim.admin("GET", "/state")["firewall"]["ticks"] - t_first
            print(f"  16 sequential creates over {ticks} firewall cycles: "
                  f"mean {sum(took) / len(took):.2f} s, max {max(took):.2f} s")
            # the cycle ran meanwhile at its own phase, and dropped nothing of the sandboxes'
            assert ticks >= 1, ticks
            assert all(x == 0 for x in drops(env, vmids).values()), drops(env, vmids)
            # every sandbox answers (its ipfilter is on, with its address in the set)
            for i in ids:
                assert c.call("sandbox.exec", {"id": i, "command": "true"})["exit_code"] == 0
            env.sim.admin("POST", "/firewall/apply")
            for i in ids[:2]:
                assert c.call("sandbox.exec", {"id": i, "command": "true"})["exit_code"] == 0
            destroy_all(ids)

        def parallel_8():
            t0 = time.time()
            reqs = [c.send("sandbox.create", {"hostname": f"par-{n}"}) for n in range(8)]
            res = [c.wait(r) for r in reqs]
            print(f"  8 parallel creates took {time.time() - t0:.2f} s")
            assert all(r["state"] == "ready" for r in res), res
            vmids = [r["vmid"] for r in res]
            assert all(x == 0 for x in drops(env, vmids).values()), drops(env, vmids)
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
            try:
                reqs = [c.send("sandbox.create", {"hostname": f"tick-{n}"}) for n in range(4)]
                res = [c.wait(r) for r in reqs]
                res += [c.call("sandbox.create", {"hostname": f"tick-{n}"}) for n in range(4, 8)]
            finally:
                stop.set()
                th.join()
            assert all(r["state"] == "ready" for r in res), res
            vmids = [r["vmid"] for r in res]
            assert all(x == 0 for x in drops(env, vmids).values()), drops(env, vmids)
            destroy_all([r["id"] for r in res])

        run([("16 sequential creates, 10 s firewall cycle", sequential_16),
             ("8 parallel creates, 10 s firewall cycle", parallel_8),
             ("creates with a firewall tick at every phase", every_phase)])


if __name__ == "__main__":
    main()
