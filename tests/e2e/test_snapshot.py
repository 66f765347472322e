#!/usr/bin/env python3
"""Snapshots (sandbox.snapshot, sandbox.snapshots, sandbox.rollback, sandbox.snapshot_delete)
against the simulator, whose snapshots really copy the container's disk: files written, a
snapshot, files changed, removed and added, a rollback: every file is back exactly, the new one
gone, the sandbox READY at the same address and answering exec; the list; delete; bad and
unknown names refused with nothing changed; another uid refused; the per-sandbox limit."""

import os
import subprocess

from e2elib import BUILD, Env, RpcError, b64, calls_as_uid, data_of, expect_error, run, wait_procs
from test_recovery_util import launch, wait_dead, wait_reconciled

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")


FILES = {"/root/keep.txt": b"kept\n" * 100, "/root/change.bin": os.urandom(70000),
         "/root/gone.txt": b"removed after the snapshot\n", "/tmp/deep/a/b/c.txt": b"nested\n"}


def sh(c, sid, cmd):
    r = c.call("sandbox.exec", {"id": sid, "command": cmd})
    assert r["exit_code"] == 0, r
    return r["stdout"]


def read(c, sid, path):
    return data_of(c.call("file.read", {"id": sid, "path": path}), "content")


def names(c, sid):
    return [s["name"] for s in c.call("sandbox.snapshots", {"id": sid})["snapshots"]]


def main():
    with Env(sim_config={"snapshot_time": 0.05}, daemon_config={"sandbox": {"max_snapshots": "2"}}) as env:
        c = env.client()
        st = {}

        def snapshot_and_rollback():
            sb = c.call("sandbox.create", {})
            sid = st["id"] = sb["id"]
            for p, data in FILES.items():
                sh(c, sid, f"mkdir -p {os.path.dirname(p)}")
                c.call("file.write", {"id": sid, "path": p, "content_b64": b64(data)})
            snap = c.call("sandbox.snapshot", {"id": sid, "name": "s1"})["snapshot"]
            assert snap["name"] == "s1" and snap["created_at"] > 0, snap
            sh(c, sid, "head -c 5000 /dev/urandom > /root/change.bin; rm /root/gone.txt; "
                       "echo new > /root/new.txt; rm -r /tmp/deep")
            assert names(c, sid) == ["s1"]
            proc = c.call("process.start", {"id": sid, "command": "sleep 4511"})["process"]
            wait_procs(c, sid, "^sleep 4511", 1)  # seen running: its absence below means something
            sb2 = c.call("sandbox.rollback", {"id": sid, "name": "s1"})
            # the background process ended with the container, and its record went with
            # the disk it was written to after the snapshot
            assert [p for p in c.call("process.list", {"id": sid})["processes"]
                    if p["process"] == proc] == []
            wait_procs(c, sid, "^sleep 4511", 0)
            assert sb2["state"] == "ready" and sb2["ip"] == sb["ip"], (sb, sb2)
            for p, data in FILES.items():
                assert read(c, sid, p) == data, p
            assert sh(c, sid, "ls /root/new.txt 2>/dev/null; echo done") == "done\n"
            # the rolled-back container keeps its identity: host key pinned, exec answers
            assert sh(c, sid, "echo alive") == "alive\n"
            assert c.call("sandbox.get", {"id": sid})["state"] == "ready"
            log = env.daemon_log()
            assert f"event=sandbox.snapshot_taken sandbox={sid}" in log, log[-2000:]
            assert f"event=sandbox.rolled_back sandbox={sid}" in log and "reason=s1" in log

        def refusals_change_nothing():
            sid = st["id"]
            for bad in ("1abc", "a", "current", "vzdump", "x" * 41, "a b", "ä1"):
                expect_error(c, "sandbox.snapshot", {"id": sid, "name": bad}, -32602, "name")
            expect_error(c, "sandbox.snapshot", {"id": sid, "name": "s1"}, -32602, "name")  # in use
            expect_error(c, "sandbox.rollback", {"id": sid, "name": "nope"}, -32602, "name")
            expect_error(c, "sandbox.snapshot_delete", {"id": sid, "name": "nope"}, -32602, "name")
            # storage without the snapshot feature (as dir, NFS, thick LVM): the documented error
            env.sim.admin("PUT", "/settings", {"snapshot_unsupported": ["local-lvm"]})
            try:
                e = expect_error(c, "sandbox.snapshot", {"id": sid, "name": "s9"}, -32004)
                assert e["data"]["reason"].startswith("the sandbox's storage cannot take snapshots"), e
            finally:
                env.sim.admin("PUT", "/settings", {"snapshot_unsupported": []})
            assert names(c, sid) == ["s1"]
            assert sh(c, sid, "cat /root/keep.txt | wc -l") == "100\n"

        def other_uid_refused():
            sid = st["id"]
            out = calls_as_uid(env.socket, 65534, [
                ("sandbox.snapshot", {"id": sid, "name": "mine"}), ("sandbox.snapshots", {"id": sid}),
                ("sandbox.rollback", {"id": sid, "name": "s1"}),
                ("sandbox.snapshot_delete", {"id": sid, "name": "s1"})])
            assert all(v == -32001 for v in out.values()), out
            assert names(c, st["id"]) == ["s1"]

        def limit_and_delete():
            nonlocal c
            sid = st["id"]
            c.call("sandbox.snapshot", {"id": sid, "name": "s2"})
            e = expect_error(c, "sandbox.snapshot", {"id": sid, "name": "s3"}, -32003)
            assert "max_snapshots" in e["data"]["reason"], e
            assert names(c, sid) == ["s1", "s2"]
            d = c.call("sandbox.snapshot_delete", {"id": sid, "name": "s1"})
            assert d == {"name": "s1", "deleted": True}, d
            assert names(c, sid) == ["s2"]
            c.call("sandbox.snapshot", {"id": sid, "name": "s3"})
            assert names(c, sid) == ["s2", "s3"]
            # sandboxctl: the four commands
            def ctl(*args):
                r = subprocess.run([SANDBOXCTL, "--socket", env.socket, *args], capture_output=True,
                                   text=True, timeout=120)
                return r.returncode, r.stdout, r.stderr
            assert ctl("snapshot-delete", sid, "s2")[:2] == (0, "s2 deleted\n")
            rc, out, err = ctl("snapshot", sid, "c1")
            assert rc == 0 and out.startswith("c1 20"), (rc, out, err)
            rc, out, _ = ctl("snapshots", sid)
            assert [l.split()[0] for l in out.splitlines()] == ["s3", "c1"], out
            sh(c, sid, "echo after > /root/keep.txt")
            rc, out, _ = ctl("rollback", sid, "c1")
            assert rc == 0 and out.split()[1] == "ready", out
            assert sh(c, sid, "head -1 /root/keep.txt") == "kept\n"
            rc, _, err = ctl("rollback", sid, "9bad")
            assert rc == 2 and "name" in err, err
            # while a rollback runs, another snapshot operation and a resize are busy
            i = c.send("sandbox.rollback", {"id": sid, "name": "c1"})
            c2 = env.client()
            expect_error(c2, "sandbox.snapshot", {"id": sid, "name": "c2"}, -32007)
            expect_error(c2, "sandbox.resize", {"id": sid, "cores": 2}, -32007)
            assert c.wait(i)["state"] == "ready"
            c2.close()
            # the list lives in Proxmox: a daemon restart finds it as it was (and the daemon
            # exits clean: no sanitizer report)
            c.close()
            assert env.stop_daemon() == 0, env.daemon_log()[-3000:]
            launch(env)
            c = env.client()
            assert names(c, sid) == ["s3", "c1"]
            assert sh(c, sid, "head -1 /root/keep.txt") == "kept\n"
            # the container's snapshots go with it
            c.call("sandbox.destroy", {"id": sid})
            env.wait_no_containers()

        def crash_mid_rollback():
            # the daemon dies once Proxmox rolled back (the container stopped): after a
            # restart the sandbox is back, READY, its container started again by the
            # reconcile, with the snapshot's files
            nonlocal c
            sb = c.call("sandbox.create", {})
            sid = sb["id"]
            c.call("file.write", {"id": sid, "path": "/root/f", "content": "snap"})
            c.call("sandbox.snapshot", {"id": sid, "name": "k1"})
            c.call("file.write", {"id": sid, "path": "/root/f", "content": "later"})
            c.close()
            assert env.stop_daemon() == 0
            launch(env, crash_at="rollback-done")
            c = env.client()
            try:
                c.call("sandbox.rollback", {"id": sid, "name": "k1"}, timeout=30)
            except (ConnectionError, OSError, RpcError):
                pass
            assert wait_dead(env) != 0
            launch(env)
            wait_reconciled(env)
            c = env.client()
            got = c.call("sandbox.get", {"id": sid})
            assert got["state"] == "ready" and got["ip"] == sb["ip"], got
            assert data_of(c.call("file.read", {"id": sid, "path": "/root/f"}), "content") == b"snap"
            assert names(c, sid) == ["k1"]
            c.call("sandbox.destroy", {"id": sid})

        run([("snapshot_and_rollback", snapshot_and_rollback),
             ("refusals_change_nothing", refusals_change_nothing),
             ("other_uid_refused", other_uid_refused),
             ("limit_and_delete", limit_and_delete),
             ("crash_mid_rollback", crash_mid_rollback)])


if __name__ == "__main__":
    main()
