#!/usr/bin/env python3
"""Recovery after kill -9, the cases the marker and the registry used to lose:
  - labels survive a lost state folder (they travel in the container's description);
  - a READY sandbox whose container was stopped while the daemon was down is started again
    at the next start and works (its address re-read); when the start fails it is destroyed;
  - a keyed create killed mid-clone (the clone task running, its vmid and UPID recorded)
    is finished after the restart when the clone succeeded: a retry of the same key gets
    that one sandbox, never a second container; when the clone failed it is rolled back."""

import os
import shutil
import time

from e2elib import Env
from test_recovery_util import (FAST_RECONCILE, kill9, launch, marked_containers, records,
                                restart_with_crash, run_tests, wait_dead, wait_reconciled, wait_until)


def ct_status(env, vmid):
    return env.sim.ok("GET", f"/nodes/pve/lxc/{vmid}/status/current")["status"]


def stop_ct(env, vmid):
    upid = env.sim.ok("POST", f"/nodes/pve/lxc/{vmid}/status/stop")
    env.sim.wait_task(upid)
    assert ct_status(env, vmid) == "stopped"


def main():
    with Env(daemon_config=FAST_RECONCILE) as env:
        tests = []
        state = {"c": env.client()}

        def restart(lose_state=False):
            state["c"].close()
            kill9(env)
            if lose_state:
                shutil.rmtree(os.path.join(env.dir, "state", "sandboxes"))
                os.unlink(os.path.join(env.dir, "state", "reconciled"))
            launch(env)
            wait_reconciled(env)
            state["c"] = env.client()
            return state["c"]

        def labels_survive_lost_state():
            c = state["c"]
            labels = {"task": "t-91", "owner.team": "a b/c+d=é", "empty": ""}
            sb = c.call("sandbox.create", {"ttl_s": 600, "labels": labels})
            c = restart(lose_state=True)
            got = c.call("sandbox.get", {"id": sb["id"]})
            assert got["labels"] == labels, got
            assert records(env)[sb["id"]]["labels"] == labels
            found = c.call("sandbox.list", {"labels": {"task": "t-91"}})["sandboxes"]
            assert [s["id"] for s in found] == [sb["id"]], found
            c.call("sandbox.destroy", {"id": sb["id"]})

        def stopped_is_started():
            c = state["c"]
            sb = c.call("sandbox.create", {"ttl_s": 600})
            c.call("file.write", {"id": sb["id"], "path": "/root/kept", "content": "kept"})
            state["c"].close()
            kill9(env)
            stop_ct(env, sb["vmid"])
            launch(env)
            st = wait_reconciled(env)
            c = state["c"] = env.client()
            assert ct_status(env, sb["vmid"]) == "running"
            got = c.call("sandbox.get", {"id": sb["id"]})
            assert got["state"] == "ready", got
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "cat /root/kept"})
            assert r["stdout"] == "kept", r
            assert st["reconcile"]["reattached"] >= 1, st
            c.call("sandbox.destroy", {"id": sb["id"]})

        def stopped_start_fails():
            c = state["c"]
            sb = c.call("sandbox.create", {"ttl_s": 600})
            state["c"].close()
            kill9(env)
            stop_ct(env, sb["vmid"])
            env.sim.admin("POST", "/faults", {"method": "POST", "path": f"/nodes/*/lxc/{sb['vmid']}/status/start",
                                              "task_error": "startup for container failed"})
            try:
                launch(env)
                wait_reconciled(env)
                c = state["c"] = env.client()
                wait_until(lambda: sb["vmid"] not in env.containers() and sb["id"] not in records(env),
                           what="the stopped container destroyed and its record removed")
                ids = [s["id"] for s in c.call("sandbox.list", {})["sandboxes"]]
                assert sb["id"] not in ids, ids
            finally:
                env.sim.admin("DELETE", "/faults")

        def crash_mid_clone(key, fault=None):
            """Starts a keyed create on a daemon that dies once the clone task's UPID is
            durable (the clone still running); returns the create's params and its record."""
            params = {"ttl_s": 600, "idempotency_key": key, "labels": {"k": key}}
            state["c"].close()
            env.sim.admin("PUT", "/settings", {"clone_time": 1.5})
            if fault:
                env.sim.admin("POST", "/faults", fault)
            restart_with_crash(env, "create-clone-task-recorded")
            c = env.client()
            c.send("sandbox.create", params)
            wait_dead(env)
            c.close()
            rec = [r for r in records(env).values() if r.get("idempotency_key") == key]
            assert len(rec) == 1 and rec[0]["state"] == "cloning" and rec[0]["vmid"] and rec[0].get("upid"), rec
            return params, rec[0]

        def ours_for(sid):
            return [v for v, m in marked_containers(env).items() if m.get("sandbox") == sid]

        def mid_clone_retry_one_container():
            params, rec = crash_mid_clone("k-mid-clone-1")
            launch(env)
            c = state["c"] = env.client()
            got = c.call("sandbox.create", params)  # the retry right after the restart
            env.sim.admin("PUT", "/settings", {"clone_time": 0.1})
            assert got["id"] == rec["id"] and got["vmid"] == rec["vmid"] and got["state"] == "ready", (got, rec)
            assert got["labels"] == params["labels"], got
            assert c.call("sandbox.exec", {"id": got["id"], "command": "echo ok"})["stdout"] == "ok\n"
            live = {s["id"] for s in c.call("sandbox.list", {"all": True})["sandboxes"]}
            marked = marked_containers(env)
            assert sorted(m["sandbox"] for m in marked.values()) == sorted(live), (marked, live)
            assert ours_for(got["id"]) == [rec["vmid"]], marked
            st = wait_reconciled(env)
            assert st["reconcile"]["resumed"] >= 1, st
            again = c.call("sandbox.create", params)
            assert again["id"] == got["id"], again
            c.call("sandbox.destroy", {"id": got["id"]})

        def mid_clone_failed_rolled_back():
            params, rec = crash_mid_clone("k-mid-clone-2", {"method": "POST", "path": "/nodes/*/lxc/*/clone",
                                                            "task_error": "storage full", "count": 1})
            env.sim.admin("DELETE", "/faults")
            launch(env)
            c = state["c"] = env.client()
            env.sim.admin("PUT", "/settings", {"clone_time": 0.1})
            wait_until(lambda: rec["id"] not in records(env), what="the failed create's record removed")
            assert not ours_for(rec["id"]), marked_containers(env)
            assert rec["vmid"] not in env.containers()
            got = c.call("sandbox.create", params)  # the key is free again: a new sandbox
            assert got["id"] != rec["id"] and got["state"] == "ready", got
            assert len(ours_for(got["id"])) == 1
            c.call("sandbox.destroy", {"id": got["id"]})

        def mid_clone_no_key_rolled_back():
            # Without an idempotency key the create cannot be resumed: the restart rolls it back
            # from the recorded clone task (once the task ends), not the orphan reaper later.
            state["c"].close()
            env.sim.admin("PUT", "/settings", {"clone_time": 3})
            restart_with_crash(env, "create-clone-task-recorded")
            c = env.client()
            c.send("sandbox.create", {"ttl_s": 600, "labels": {"k": "no-key"}})
            wait_dead(env)
            c.close()
            rec = [r for r in records(env).values() if (r.get("labels") or {}).get("k") == "no-key"]
            assert len(rec) == 1 and rec[0]["state"] == "cloning" and rec[0].get("upid"), rec
            rec = rec[0]
            launch(env)
            st0 = wait_reconciled(env)["reconcile"]
            wait_until(lambda: rec["vmid"] not in env.containers() and rec["id"] not in records(env),
                       what="the interrupted clone rolled back")
            env.sim.admin("PUT", "/settings", {"clone_time": 0.1})
            st = wait_reconciled(env)["reconcile"]
            assert st["orphans_destroyed"] == st0["orphans_destroyed"], (st0, st)
            assert st["rolled_back"] >= 1, st
            state["c"] = env.client()

        tests += [("labels survive a lost state folder", labels_survive_lost_state),
                  ("crash mid-clone without a key: rolled back from the clone task",
                   mid_clone_no_key_rolled_back),
                  ("a READY sandbox stopped while the daemon was down is started again", stopped_is_started),
                  ("a stopped sandbox whose start fails is destroyed", stopped_start_fails),
                  ("crash mid-clone, retry of the key: one container, the create finished",
                   mid_clone_retry_one_container),
                  ("crash mid-clone, the clone failed: rolled back", mid_clone_failed_rolled_back)]
        run_tests(env, tests)
        state["c"].close()


if __name__ == "__main__":
    main()
