#!/usr/bin/env python3
"""Concurrency: 8 parallel creates from one template all succeed (clone serialisation, vmid
allocation), 200 concurrent execs spread over 4 sandboxes all return their own output,
quotas, and destroy of many at once."""

import time

from e2elib import Env, run


def main():
    with Env(daemon_config={"sandbox": {"max_per_uid": "9", "max_total": "9"}}) as env:
        c = env.client()
        ids = []

        def parallel_creates():
            t0 = time.time()
            reqs = [c.send("sandbox.create", {"hostname": f"par-{i}"}) for i in range(8)]
            res = [c.wait(i) for i in reqs]
            print(f"  8 parallel creates took {time.time() - t0:.2f} s")
            assert all(r["state"] == "ready" for r in res), res
            assert len({r["vmid"] for r in res}) == 8 and len({r["ip"] for r in res}) == 8, res
            assert sorted(r["hostname"] for r in res) == [f"par-{i}" for i in range(8)]
            ids.extend(r["id"] for r in res)
            cts = env.containers()
            assert len(cts) == 8 and all(v["running"] for v in cts.values()), cts

        def quota():
            # 8 live + 1 allowed by max_per_uid 9: the 10th is refused.
            r = c.call("sandbox.create", {})
            ids.append(r["id"])
            e = c.error("sandbox.create", {})
            assert e.code == -32003, e.err
            assert len(env.containers()) == 9

        def concurrent_execs():
            four = ids[:4]
            t0 = time.time()
            reqs = {}
            for n in range(200):
                sb = four[n % 4]
                reqs[c.send("sandbox.exec", {"id": sb, "command": f"echo {n} $(hostname)"})] = (n, sb)
            host = {sid: c.call("sandbox.get", {"id": sid})["hostname"] for sid in four}
            for i, (n, sb) in reqs.items():
                r = c.wait(i)
                assert r["exit_code"] == 0 and r["stdout"] == f"{n} {host[sb]}\n", (n, r)
            dt = time.time() - t0
            print(f"  200 execs over 4 sandboxes: {dt:.2f} s ({200 / dt:.0f}/s)")

        def destroy_all():
            reqs = [c.send("sandbox.destroy", {"id": i}) for i in ids]
            for i in reqs:
                assert c.wait(i)["state"] == "destroyed"
            env.wait_no_containers(5)
            st = c.call("daemon.status")
            assert st["sandboxes"]["total"] == 0, st

        def shutdown_keeps_sandboxes():
            # A clean stop with a sandbox alive, an exec and a create in flight: the daemon
            # exits 0 (every handle closed, no leak) and the sandbox stays in Proxmox.
            sb = c.call("sandbox.create", {})
            c.send("sandbox.exec", {"id": sb["id"], "command": "sleep 30"})
            c.send("sandbox.create", {})
            time.sleep(0.5)
            t0 = time.time()
            rc = env.stop_daemon()
            assert rc == 0, env.daemon_log()[-3000:]
            assert time.time() - t0 < 20, time.time() - t0
            cts = env.containers()
            assert sb["vmid"] in cts and cts[sb["vmid"]]["running"], cts

        run([("8 parallel creates", parallel_creates), ("quota -32003", quota),
             ("200 concurrent execs over 4 sandboxes", concurrent_execs), ("destroy all", destroy_all),
             ("shutdown keeps sandboxes", shutdown_keeps_sandboxes)])


if __name__ == "__main__":
    main()
