#!/usr/bin/env python3
"""Destroys with a storage of the node offline. A delete with destroy-unreferenced-disks=1
scans every storage of the node and dies on the offline one after the container's volumes
are freed, leaving its config: a half-deleted container. The daemon does not pass it, so:
  - with a storage offline, destroys succeed and leave no container;
  - a half-deleted container (made here through the API with that parameter) is finished by
    the daemon: by sandbox.destroy, at its lease's end, and by the reconcile after a restart
    (which starts it again, fails, and destroys it)."""

import os

from e2elib import Env
from test_recovery_util import FAST_RECONCILE, kill9, launch, records, run_tests, wait_reconciled, wait_until

OFFLINE = "local"  # not the storage of the containers' volumes (local-lvm)


def main():
    with Env(daemon_config=FAST_RECONCILE) as env:
        state = {"c": env.client()}

        def offline(down):
            env.sim.admin("POST", f"/storage/{OFFLINE}/{'offline' if down else 'online'}")

        def half_delete(vmid):
            upid = env.sim.ok("DELETE", f"/nodes/pve/lxc/{vmid}",
                              {"force": 1, "purge": 1, "destroy-unreferenced-disks": 1})
            assert env.sim.wait_task(upid)["exitstatus"] == f"storage '{OFFLINE}' is not online"
            assert vmid in env.containers()  # the config is left
            assert not os.path.isdir(env.sim.admin("GET", f"/ct/{vmid}")["rootfs"])  # the volume is not

        def gone(sb):
            return sb["vmid"] not in env.containers() and sb["id"] not in records(env)

        def destroy_succeeds():
            c = state["c"]
            sbs = [c.call("sandbox.create", {"ttl_s": 600}) for _ in range(2)]
            offline(True)
            for sb in sbs:
                c.call("sandbox.destroy", {"id": sb["id"]})
                assert gone(sb), env.containers()
            ids = [s["id"] for s in c.call("sandbox.list", {})["sandboxes"]]
            assert not set(ids) & {sb["id"] for sb in sbs}, ids

        def half_deleted_destroyed():
            c = state["c"]
            sb = c.call("sandbox.create", {"ttl_s": 600})
            offline(True)
            half_delete(sb["vmid"])
            c.call("sandbox.destroy", {"id": sb["id"]})
            assert gone(sb), env.containers()

        def half_deleted_expired():
            sb = state["c"].call("sandbox.create", {"ttl_s": 4})
            offline(True)
            half_delete(sb["vmid"])
            wait_until(lambda: gone(sb), what="the half-deleted container destroyed at its lease's end")

        def half_deleted_reconciled():
            sb = state["c"].call("sandbox.create", {"ttl_s": 600})
            state["c"].close()
            kill9(env)
            offline(True)
            half_delete(sb["vmid"])
            launch(env)
            wait_reconciled(env)
            state["c"] = env.client()
            wait_until(lambda: gone(sb), what="the half-deleted container finished and its record removed")
            ids = [s["id"] for s in state["c"].call("sandbox.list", {})["sandboxes"]]
            assert sb["id"] not in ids, ids

        def with_offline(fn):
            def run():
                try:
                    fn()
                finally:
                    offline(False)
            return run

        tests = [("a storage offline: destroys succeed, no container left", with_offline(destroy_succeeds)),
                 ("a half-deleted container: sandbox.destroy finishes it", with_offline(half_deleted_destroyed)),
                 ("a half-deleted container whose lease ends: destroyed", with_offline(half_deleted_expired)),
                 ("a half-deleted container found at a restart: the reconcile finishes it",
                  with_offline(half_deleted_reconciled))]
        run_tests(env, tests)
        state["c"].close()


if __name__ == "__main__":
    main()
