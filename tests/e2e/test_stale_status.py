#!/usr/bin/env python3
"""A daemon restart while pvestatd's status cache is stale destroys nothing and restarts
nothing. The pool's member list (like /cluster/resources) takes each guest's status from
pvestatd's cache: a container started while pvestatd was stalled still reads `stopped`, one
missing from the cache (created since, or the cache emptied by a pve-cluster restart) reads
`unknown`. The daemon decides from GET .../status/current: after a kill -9, a clean restart
and a lost state folder (rebuild from the markers), every live sandbox is re-attached with
its container untouched (same processes) and still works."""

import os
import shutil

from e2elib import Env
from test_recovery_util import FAST_RECONCILE, kill9, launch, run_tests, wait_reconciled, wait_until


def main():
    with Env(daemon_config=FAST_RECONCILE) as env:
        state = {"c": env.client()}
        pool = env.sim.info.get("pool", "sandboxd")

        def listed_status(vmid):
            for m in env.sim.ok("GET", f"/pools/{pool}")["members"]:
                if m["vmid"] == vmid:
                    return m["status"]
            return None

        def true_status(vmid):
            return env.sim.ok("GET", f"/nodes/pve/lxc/{vmid}/status/current")["status"]

        def power(vmid, action):
            env.sim.wait_task(env.sim.ok("POST", f"/nodes/pve/lxc/{vmid}/status/{action}"))

        def sshd_pid(vmid):
            return env.sim.admin("GET", "/state")["containers"].get(str(vmid), {}).get("pid")  # None: gone

        def pvestatd(stalled):
            env.sim.admin("POST", "/pvestatd", {"stalled": stalled})

        def shown_stopped_while_running():
            """A sandbox whose container is stopped, then pvestatd stalls, then it is started
            again: the list says stopped, status/current says running."""
            sb = state["c"].call("sandbox.create", {"ttl_s": 600})
            pvestatd(False)
            power(sb["vmid"], "stop")
            pvestatd(True)
            power(sb["vmid"], "start")
            wait_until(lambda: env.sim.admin("GET", f"/ct/{sb['vmid']}")["ip"] == sb["ip"],
                       what="the container's address back")
            assert listed_status(sb["vmid"]) == "stopped" and true_status(sb["vmid"]) == "running"
            return sb

        def snapshot(sbs):
            return {sb["vmid"]: sshd_pid(sb["vmid"]) for sb in sbs}

        def restart(how):
            state["c"].close()
            if how == "clean":
                assert env.stop_daemon() == 0
            else:
                kill9(env)
            if how == "rebuild":
                shutil.rmtree(os.path.join(env.dir, "state", "sandboxes"))
                os.unlink(os.path.join(env.dir, "state", "reconciled"))
            launch(env)
            st = wait_reconciled(env, runs_after=2)
            state["c"] = env.client()
            return st

        def all_live(sbs, pids, st):
            c = state["c"]
            assert snapshot(sbs) == pids, ("a container was destroyed or restarted", snapshot(sbs), pids)
            assert st["reconcile"]["reattached"] >= len(sbs), st["reconcile"]
            for sb in sbs:
                assert sb["vmid"] in env.containers()
                got = c.call("sandbox.get", {"id": sb["id"]})
                assert got["state"] == "ready" and got["vmid"] == sb["vmid"], got
                r = c.call("sandbox.exec", {"id": sb["id"], "command": f"echo {sb['id']}"})
                assert r["stdout"] == sb["id"] + "\n", r

        def done(sbs):
            pvestatd(False)
            for sb in sbs:
                state["c"].call("sandbox.destroy", {"id": sb["id"]})

        def stale_kill9():
            a = shown_stopped_while_running()
            b = state["c"].call("sandbox.create", {"ttl_s": 600})  # not in the stalled cache
            assert listed_status(b["vmid"]) == "unknown" and true_status(b["vmid"]) == "running"
            pids = snapshot([a, b])
            st = restart("kill9")
            all_live([a, b], pids, st)
            done([a, b])

        def unknown_clean_restart():
            sbs = [state["c"].call("sandbox.create", {"ttl_s": 600}) for _ in range(2)]
            pvestatd(True)
            env.sim.admin("POST", "/pve-cluster/restart")
            assert all(listed_status(sb["vmid"]) == "unknown" for sb in sbs)
            pids = snapshot(sbs)
            st = restart("clean")
            all_live(sbs, pids, st)
            done(sbs)

        def stale_rebuild():
            a = shown_stopped_while_running()
            b = state["c"].call("sandbox.create", {"ttl_s": 600})
            assert listed_status(b["vmid"]) == "unknown"
            pids = snapshot([a, b])
            st = restart("rebuild")
            all_live([a, b], pids, st)
            done([a, b])

        def unknown_rebuild():
            sbs = [state["c"].call("sandbox.create", {"ttl_s": 600}) for _ in range(2)]
            pvestatd(True)
            env.sim.admin("POST", "/pve-cluster/restart")
            pids = snapshot(sbs)
            st = restart("rebuild")
            all_live(sbs, pids, st)
            done(sbs)

        tests = [("kill -9, one sandbox listed stopped and one unknown: both re-attached", stale_kill9),
                 ("clean restart, the cache emptied (all unknown): all re-attached", unknown_clean_restart),
                 ("lost state folder, listed stopped and unknown: rebuilt, nothing touched", stale_rebuild),
                 ("lost state folder, the cache emptied: rebuilt, nothing touched", unknown_rebuild)]
        try:
            run_tests(env, tests)
        finally:
            pvestatd(False)
            state["c"].close()


if __name__ == "__main__":
    main()
