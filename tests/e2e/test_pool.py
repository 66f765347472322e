#!/usr/bin/env python3
"""The warm pool against the simulator: creates served from it (size, hostname, internet,
labels, owner applied), the fall-back to a cold create, concurrent creates never sharing a
container, idempotency keys, pool members outside any uid's quota, SIGHUP growing and
shrinking the pool (surplus destroyed), kill -9 during a refill and during a pooled create
(no leak, no double owner, the pool back to its target), and a lost state folder rebuilt
from the markers."""

import shutil
import signal
import threading
import time

from e2elib import Env, RpcError
from test_recovery_util import (FAST_RECONCILE, kill9, launch, marked_containers, records,
                                restart_with_crash, run_tests, wait_dead, wait_reconciled,
                                wait_until)

CONFIG = {"sandbox": dict(FAST_RECONCILE["sandbox"], max_per_uid="3", max_total="16"),
          "pool": {"warm": "2", "max_filling": "2"}}


def pool_of(c, name="default"):
    return c.call("daemon.status")["pool"][name]


def wait_pool(env, ready, name="default", timeout=60):
    c = env.client(timeout=30)
    try:
        return wait_until(lambda: (lambda p: p if p["ready"] == ready and p["filling"] == 0 else None)(
            pool_of(c, name)), timeout, f"pool {name} ready == {ready}")
    finally:
        c.close()


def consistent(env, users):
    """Every container is marked and recorded once; pool members are marked and recorded
    as such; the user sandboxes are exactly `users`."""
    marked = marked_containers(env)
    recs = records(env)
    assert set(marked) == set(env.containers()), (marked, env.containers())
    by_id = {m["sandbox"]: (vmid, m) for vmid, m in marked.items()}
    assert set(by_id) == set(recs), (sorted(by_id), sorted(recs))
    for sid, r in recs.items():
        vmid, m = by_id[sid]
        assert r["vmid"] == vmid, (r, vmid)
        assert bool(r.get("pool")) == (m.get("pool") == "1"), (r, m)
    mine = {sid for sid, r in recs.items() if not r.get("pool")}
    assert mine == set(users), (mine, users)
    return {sid for sid, r in recs.items() if r.get("pool")}


def wait_consistent(env, users, timeout=30):
    """consistent() once the destroys and record removals in flight are done."""
    deadline = time.time() + timeout
    while True:
        try:
            return consistent(env, users)
        except AssertionError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def main():
    with Env(daemon_config=CONFIG) as env:
        c = env.client()
        users = set()

        def served_from_pool():
            wait_pool(env, 2)
            before = pool_of(c)
            members = consistent(env, users)
            sb = c.call("sandbox.create", {"ttl_s": 600, "hostname": "warm-one", "cores": 2,
                                           "memory_mb": 768, "internet": True, "net_rate_mbps": 48,
                                           "labels": {"task": "t1"}})
            users.add(sb["id"])
            assert sb["id"] in members, (sb["id"], members)  # a member, not a new container
            assert (sb["cores"], sb["memory_mb"], sb["internet"], sb["hostname"]) == (2, 768, True, "warm-one"), sb
            assert sb["labels"] == {"task": "t1"} and sb["owner_uid"] == 0, sb
            # the bandwidth cap into net0 (48 Mbit/s = 5.722 MiB/s) in the hand-over
            net0 = env.sim.ok("GET", f"/nodes/pve/lxc/{sb['vmid']}/config")["net0"]
            assert sb["net_rate_mbps"] == 48 and "rate=5.722" in net0, (sb, net0)
            after = pool_of(c)
            assert after["hits"] == before["hits"] + 1, (before, after)
            # hostname is a fastplug option (config only): the daemon sets it inside too
            out = c.call("sandbox.exec", {"id": sb["id"], "command": "cat /etc/hostname; hostname; nproc"})
            assert out["stdout"].split()[:2] == ["warm-one", "warm-one"], out
            m = marked_containers(env)[sb["vmid"]]
            assert m["owner"] == "0" and "pool" not in m, m
            assert records(env)[sb["id"]]["expires_at"], records(env)[sb["id"]]
            assert [s["id"] for s in c.call("sandbox.list")["sandboxes"]] == [sb["id"]]
            wait_pool(env, 2)  # refilled in the background
            wait_consistent(env, users)

        def cold_fallback_and_quota():
            # A disk larger than the members' is grown live; one smaller is a cold create
            # (here refused: below the template). With the pool drained, creates go cold.
            wait_pool(env, 2)
            h0 = pool_of(c)["hits"]
            sb = c.call("sandbox.create", {"ttl_s": 600, "disk_gb": 10})
            users.add(sb["id"])
            assert sb["disk_gb"] == 10 and pool_of(c)["hits"] == h0 + 1, sb
            # max_per_uid = 3: root (uid 0, the pool's placeholder owner too) may hold three
            # sandboxes although pool members exist.
            sb3 = c.call("sandbox.create", {"ttl_s": 600, "labels": {"n": "3"}})
            users.add(sb3["id"])
            try:
                c.call("sandbox.create", {"ttl_s": 600})
                raise AssertionError("a fourth sandbox was allowed")
            except RpcError as e:
                assert e.code == -32003, e.err
            for i in list(users):
                c.call("sandbox.destroy", {"id": i})
                users.discard(i)
            wait_pool(env, 2)
            wait_consistent(env, users)

        def concurrent_creates_never_share():
            wait_pool(env, 2)
            p0 = pool_of(c)
            out, errs = [], []

            def one(i):
                cc = env.client()
                try:
                    out.append(cc.call("sandbox.create", {"ttl_s": 600, "labels": {"i": str(i)}}))
                except RpcError as e:
                    errs.append(e.err)
                finally:
                    cc.close()
            ts = [threading.Thread(target=one, args=(i,)) for i in range(3)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(120)
            assert not errs, errs
            ids = {s["id"] for s in out}
            vmids = {s["vmid"] for s in out}
            assert len(ids) == 3 and len(vmids) == 3, out
            p1 = pool_of(c)
            assert p1["hits"] - p0["hits"] == 2 and p1["misses"] - p0["misses"] >= 1, (p0, p1)
            for s in out:
                r = c.call("sandbox.exec", {"id": s["id"], "command": "cat /etc/hostname"})
                assert r["stdout"].strip() == s["hostname"], (r, s)
            users.update(ids)
            wait_pool(env, 2)
            wait_consistent(env, users)
            for i in ids:
                c.call("sandbox.destroy", {"id": i})
                users.discard(i)

        def idempotent_pooled_create():
            wait_pool(env, 2)
            p = {"ttl_s": 600, "idempotency_key": "pool-k1"}
            a = c.call("sandbox.create", p)
            b = c.call("sandbox.create", p)
            assert a["id"] == b["id"], (a, b)
            try:
                c.call("sandbox.create", {"ttl_s": 601, "idempotency_key": "pool-k1"})
                raise AssertionError("key reused with other params accepted")
            except RpcError as e:
                assert e.code == -32010, e.err
            c.call("sandbox.destroy", {"id": a["id"]})

        def sighup_grows_and_shrinks():
            nonlocal c

            def set_warm(n):
                with open(env.config) as f:
                    text = f.read()
                import re
                text = re.sub(r"(?m)^warm = \d+$", f"warm = {n}", text)
                with open(env.config, "w") as f:
                    f.write(text)
                env.proc.send_signal(signal.SIGHUP)
            set_warm(3)
            wait_pool(env, 3)
            assert pool_of(c)["target"] == 3
            set_warm(1)
            wait_pool(env, 1)
            # the surplus destroyed: one pool member left, marked and recorded as such
            wait_until(lambda: (lambda m: m if len(m) == 1 else None)(
                [v for v, f in marked_containers(env).items() if f.get("pool") == "1"]),
                30, "surplus destroyed")
            assert len(wait_consistent(env, users)) == 1
            set_warm(2)
            wait_pool(env, 2)

        def kill9_during_refill():
            nonlocal c
            wait_pool(env, 2)
            # Restart with a raised target: the refill crashes the daemon once its clone is sent.
            with open(env.config) as f:
                text = f.read()
            with open(env.config, "w") as f:
                f.write(text.replace("warm = 2", "warm = 3"))
            c.close()
            try:
                restart_with_crash(env, "create-clone-sent")
                assert wait_dead(env) != 0
            except RuntimeError:  # crashed before it answered its first status
                env.proc = None
            launch(env)
            wait_reconciled(env)
            wait_pool(env, 3)
            wait_until(lambda: len(env.containers()) == 3, 30, "interrupted fill destroyed")
            wait_consistent(env, users)
            c = env.client()

        def kill9_during_pooled_create():
            nonlocal c
            wait_pool(env, 3)
            c.close()
            restart_with_crash(env, "pool-take-configured")
            wait_pool(env, 3)
            c = env.client()
            try:
                c.call("sandbox.create", {"ttl_s": 600, "labels": {"lost": "1"}}, timeout=60)
                raise AssertionError("the crash point was not reached")
            except (RpcError, OSError, ConnectionError, EOFError):
                pass
            assert wait_dead(env) != 0
            launch(env)
            wait_reconciled(env)
            wait_pool(env, 3)
            # The taken member was recorded for its new owner (not ready): rolled back.
            wait_until(lambda: len(env.containers()) == 3, 30, "the half-taken member destroyed")
            wait_consistent(env, users)
            c = env.client()
            assert c.call("sandbox.list")["sandboxes"] == []

        def lost_state_rebuilt_from_markers():
            nonlocal c
            wait_pool(env, 3)
            before = set(env.containers())
            sb = c.call("sandbox.create", {"ttl_s": 600})
            users.add(sb["id"])
            wait_pool(env, 3)
            before = set(env.containers())
            c.close()
            kill9(env)
            shutil.rmtree(env.dir + "/state")
            launch(env)
            wait_reconciled(env)
            wait_pool(env, 3)
            assert set(env.containers()) == before, (before, env.containers())
            assert wait_consistent(env, users)
            c = env.client()
            assert [s["id"] for s in c.call("sandbox.list")["sandboxes"]] == [sb["id"]]
            c.call("sandbox.destroy", {"id": sb["id"]})
            users.discard(sb["id"])
            c.close()

        def destroy_on_stop_takes_the_pool():
            wait_pool(env, 3)
            with open(env.config) as f:
                text = f.read()
            with open(env.config, "w") as f:
                f.write(text.replace("[sandbox]\n", "[sandbox]\ndestroy_on_stop = true\n", 1))
            n = env.daemon_log().count("configuration reloaded")
            env.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: env.daemon_log().count("configuration reloaded") > n, 20, "the reload")
            assert env.stop_daemon() == 0
            assert env.containers() == {}, env.containers()
            assert records(env) == {}, records(env)

        run_tests(env, [
            ("creates served from the pool", served_from_pool),
            ("cold fall-back, quota without pool members", cold_fallback_and_quota),
            ("concurrent creates never share a container", concurrent_creates_never_share),
            ("idempotency keys on pooled creates", idempotent_pooled_create),
            ("SIGHUP grows and shrinks the pool", sighup_grows_and_shrinks),
            ("kill -9 during a refill", kill9_during_refill),
            ("kill -9 during a pooled create", kill9_during_pooled_create),
            ("lost state folder rebuilt from the markers", lost_state_rebuilt_from_markers),
            ("a clean stop with destroy_on_stop destroys the members", destroy_on_stop_takes_the_pool),
        ])


if __name__ == "__main__":
    main()
