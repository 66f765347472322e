#!/usr/bin/env python3
"""sandbox.fork against the simulator, whose clones from a snapshot really copy the snapshot's
files: 8 children of a sandbox holding a few MiB of files each have them, their own vmid,
address, host key and lease, the parent's labels; they diverge independently and the parent is
untouched and keeps running; the snapshot taken for the fork is gone afterwards; a fork from a
named snapshot gets that snapshot's state; a child that fails is rolled back alone and the
result says how many failed; a count past the quota is refused with nothing
made; another uid cannot fork; kill -9 mid-fork leaves every child a live sandbox or
destroyed, the fork's snapshot removed, the parent untouched.

    test_fork.py [--static]   (--static: [network] mode = static, each child its own address
                               from the range; run by hand, not in the suite)"""

import datetime
import os
import subprocess
import sys
import time

from e2elib import BUILD, Env, RpcError, b64, calls_as_uid, expect_error, static_network
from test_recovery_util import FAST_RECONCILE, launch, records, run_tests, wait_dead, wait_reconciled

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")
BLOB = os.urandom(1 << 20)


def sh(c, sid, cmd):
    r = c.call("sandbox.exec", {"id": sid, "command": cmd})
    assert r["exit_code"] == 0, r
    return r["stdout"]


def ts(s):
    return int(datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp())


def snapshots(c, sid):
    return [s["name"] for s in c.call("sandbox.snapshots", {"id": sid})["snapshots"]]


def mine(c):
    return {s["id"]: s for s in c.call("sandbox.list", {})["sandboxes"]}


def main():
    def cfg(info):
        d = {"sandbox": dict(FAST_RECONCILE["sandbox"], max_per_uid="12", create_timeout_s="60")}
        if "--static" in sys.argv:
            d["network"] = static_network(info, first=100, count=20)
        return d

    with Env(sim_config={"snapshot_time": 0.05, "clone_time": 0.05}, daemon_config=cfg) as env:
        c = env.client()
        st = {}

        def fork_eight():
            p = c.call("sandbox.create", {"labels": {"job": "rl"}, "ttl_s": 3000})
            pid = st["parent"] = p["id"]
            sh(c, pid, "mkdir -p /root/data")
            for i in range(4):  # 4 MiB of files
                c.call("file.write", {"id": pid, "path": f"/root/data/f{i}", "content_b64": b64(BLOB)})
            want = sh(c, pid, "md5sum /root/data/*")
            parent_key = sh(c, pid, "cat /etc/ssh/ssh_host_ed25519_key.pub")
            proc = c.call("process.start", {"id": pid, "command": "sleep 300"})["process"]
            r = c.call("sandbox.fork", {"id": pid, "count": 8}, timeout=240)
            kids = r["sandboxes"]
            assert len(kids) == 8 and "failed" not in r, r
            ids = {k["id"] for k in kids}
            assert len(ids) == 8 and pid not in ids
            assert len({k["ip"] for k in kids} | {p["ip"]}) == 9, kids
            keys = set()
            for k in kids:
                assert k["state"] == "ready" and k["labels"] == {"job": "rl"}, k
                assert abs(ts(k["expires_at"]) - ts(k["created_at"]) - 3000) <= 2, k
                assert sh(c, k["id"], "md5sum /root/data/*") == want
                keys.add(sh(c, k["id"], "cat /etc/ssh/ssh_host_ed25519_key.pub"))
            assert len(keys) == 8 and parent_key not in keys, "a child kept a host key"
            recs = records(env)
            assert len({recs[k]["vmid"] for k in ids} | {recs[pid]["vmid"]}) == 9
            # children diverge independently; the parent is untouched and keeps running
            for i, k in enumerate(sorted(ids)):
                sh(c, k, f"echo {i} > /root/data/mine; rm /root/data/f{i % 4}")
            for i, k in enumerate(sorted(ids)):
                assert sh(c, k, "cat /root/data/mine; ls /root/data | wc -l") == f"{i}\n4\n"
            assert sh(c, pid, "md5sum /root/data/*") == want
            assert sh(c, pid, "ls /root/data/mine 2>/dev/null; echo ok") == "ok\n"
            assert [x for x in c.call("process.list", {"id": pid})["processes"]
                    if x["process"] == proc and x["state"] == "running"], "the parent's process ended"
            assert snapshots(c, pid) == [], "the fork's snapshot was left"
            assert c.call("sandbox.get", {"id": pid})["state"] == "ready"
            log = env.daemon_log()
            assert f"event=sandbox.forked sandbox={pid}" in log, log[-3000:]
            m = subprocess.run([SANDBOXCTL, "--socket", env.socket, "metrics"], capture_output=True,
                               text=True, timeout=60).stdout
            assert 'sandboxd_fork_children_total{outcome="ready"} 8' in m, m[-3000:]
            assert "sandboxd_fork_child_seconds_count 8" in m, m[-3000:]
            for k in ids:
                c.call("sandbox.destroy", {"id": k})

        def named_snapshot():
            pid = st["parent"]
            c.call("file.write", {"id": pid, "path": "/root/v", "content": "one"})
            c.call("sandbox.snapshot", {"id": pid, "name": "v1"})
            c.call("file.write", {"id": pid, "path": "/root/v", "content": "two"})
            r = subprocess.run([SANDBOXCTL, "--socket", env.socket, "fork", pid, "--count", "2",
                                "--snapshot", "v1"], capture_output=True, text=True, timeout=240)
            assert r.returncode == 0, r
            kids = [l.split()[0] for l in r.stdout.splitlines()]
            assert len(kids) == 2, r.stdout
            for k in kids:
                assert sh(c, k, "cat /root/v") == "one"
            assert sh(c, pid, "cat /root/v") == "two"
            assert snapshots(c, pid) == ["v1"], "a named snapshot stays"
            e = expect_error(c, "sandbox.fork", {"id": pid, "snapshot": "nope"}, -32602, "snapshot")
            assert "no snapshot" in str(e["data"]), e
            for k in kids:
                c.call("sandbox.destroy", {"id": k})
            c.call("sandbox.snapshot_delete", {"id": pid, "name": "v1"})

        def one_child_fails():
            # the second child's start fails: it is rolled back, its siblings are ready, the
            # result lists them and says how many failed
            pid = st["parent"]
            env.sim.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/*/status/start",
                                               "count": 1, "task_error": "simulated start failure"})
            try:
                r = c.call("sandbox.fork", {"id": pid, "count": 3}, timeout=240)
            finally:
                env.sim.admin("DELETE", "/faults")
            assert len(r["sandboxes"]) == 2 and r["failed"] == 1, r
            assert r["reason"].startswith("1 of 3 children failed: "), r
            for k in r["sandboxes"]:
                assert sh(c, k["id"], "cat /root/v") == "two"
                c.call("sandbox.destroy", {"id": k["id"]})
            t0 = time.time()
            while len(env.containers()) != 1 and time.time() - t0 < 60:
                time.sleep(0.3)
            assert len(env.containers()) == 1, env.containers().keys()
            assert snapshots(c, pid) == []

        def refusals_make_nothing():
            pid = st["parent"]
            before = set(mine(c))
            e = expect_error(c, "sandbox.fork", {"id": pid, "count": 12}, -32003)  # 1 + 12 > 12
            assert "max_per_uid" in e["data"]["reason"], e
            for bad in (0, 33, "x"):
                expect_error(c, "sandbox.fork", {"id": pid, "count": bad}, -32602, "count")
            expect_error(c, "sandbox.fork", {"id": pid, "snapshot": "9x"}, -32602, "snapshot")
            out = calls_as_uid(env.socket, 65534, [("sandbox.fork", {"id": pid, "count": 1})])
            assert all(v == -32001 for v in out.values()), out
            assert set(mine(c)) == before and snapshots(c, pid) == []
            assert len(env.containers()) == 1

        def crash_mid_fork():
            # kill -9 once the second child's clone was sent: after a restart every child is
            # either a live sandbox or gone, the fork's snapshot is deleted, the parent READY
            nonlocal c
            pid = st["parent"]
            c.close()
            assert env.stop_daemon() == 0
            launch(env, crash_at="create-clone-sent")
            c = env.client()
            try:
                c.call("sandbox.fork", {"id": pid, "count": 3}, timeout=60)
            except (ConnectionError, OSError, RpcError):
                pass
            assert wait_dead(env) != 0
            launch(env)
            wait_reconciled(env, runs_after=2, timeout=60)
            c = env.client()
            left = set(mine(c)) - {pid}
            for k in left:
                assert c.call("sandbox.get", {"id": k})["state"] == "ready"
            assert c.call("sandbox.get", {"id": pid})["state"] == "ready"
            assert sh(c, pid, "cat /root/v") == "two"
            deadline = 60
            t0 = time.time()
            while snapshots(c, pid) and time.time() - t0 < deadline:
                time.sleep(0.5)
            assert snapshots(c, pid) == [], "the fork's snapshot was left"
            t0 = time.time()
            while len(env.containers()) != 1 + len(left) and time.time() - t0 < deadline:
                time.sleep(0.5)
            assert len(env.containers()) == 1 + len(left), (env.containers().keys(), left)
            for k in list(left) + [pid]:
                c.call("sandbox.destroy", {"id": k})
            env.wait_no_containers(30)

        def crash_after_snapshot():
            # kill -9 once the fork's snapshot is taken, before any child: after a restart no
            # child exists and the snapshot is deleted (the parent's record named it)
            nonlocal c
            pid = st["parent"]
            c.close()
            assert env.stop_daemon() == 0
            launch(env, crash_at="fork-snapshot-taken")
            c = env.client()
            try:
                c.call("sandbox.fork", {"id": pid, "count": 2}, timeout=60)
            except (ConnectionError, OSError, RpcError):
                pass
            assert wait_dead(env) != 0
            assert records(env)[pid].get("fork_snapshot", "").startswith("sandboxd-fork-")
            launch(env)
            c = env.client()
            t0 = time.time()
            while snapshots(c, pid) and time.time() - t0 < 60:
                time.sleep(0.5)
            assert snapshots(c, pid) == [] and set(mine(c)) == {pid}
            while "fork_snapshot" in records(env)[pid] and time.time() - t0 < 60:
                time.sleep(0.2)
            assert "fork_snapshot" not in records(env)[pid]
            assert len(env.containers()) == 1

        run_tests(env, [("fork_eight", fork_eight), ("named_snapshot", named_snapshot),
                        ("one_child_fails", one_child_fails),
                        ("refusals_make_nothing", refusals_make_nothing),
                        ("crash_after_snapshot", crash_after_snapshot), ("crash_mid_fork", crash_mid_fork)])


if __name__ == "__main__":
    main()
