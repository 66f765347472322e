#!/usr/bin/env python3
"""Recovery: kill -9 of the daemon at each named point of create and of destroy, then a
restart: no container without a live record is left, every create that returned is usable
with its lease intact, no key is created twice. The state folder lost while the daemon is
down: ownership and leases come back from the markers. A corrupt record is resolved from
Proxmox. Foreign containers in the pool (no marker, a broken marker, another instance's
marker) survive every reconcile. A lock that stays is reported in daemon.status. A clean
stop keeps the sandboxes; destroy_on_stop destroys them.

The kill points (SANDBOXD_TEST_CRASH_AT, lib/base/testhook.h; ":N" = N ms after the point):
  create-before-intent   before the intent record is durable
  create-intent-durable  the intent is durable, nothing asked of Proxmox yet
  create-clone-sent:40   the clone POST went out, its task (UPID) is running (a keyed create
                         whose UPID was recorded is finished after the restart)
  create-cloned          the clone task ended (UPID done, vmid known), not yet recorded
  create-starting:20     the start task is running
  create-connecting      SSH connect in progress
  create-rekeyed         the sandbox's own host key made, not yet recorded (rolled back)
  create-before-ready    SSH is up, READY not yet recorded
  create-ready-durable   READY is durable, the reply not yet sent (re-attached)
  create-replied:100     the reply was sent (re-attached, same lease)
  destroy-stop-sent:20, destroy-deleted   during a destroy
SANDBOXD_RECOVERY_REPEAT (default 1; the README gives a longer run) repeats each kill point."""

import hashlib
import os
import shutil
import time

import e2elib
from e2elib import Env
from test_recovery_util import (FAST_RECONCILE, description, kill9, launch, marked_containers,
                                marker_fields, records, restart_with_crash, run_tests, wait_dead,
                                wait_reconciled, wait_until)

REPEAT = int(os.environ.get("SANDBOXD_RECOVERY_REPEAT", "1"))

# (point, the create had returned to its caller before the kill)
CREATE_POINTS = [
    ("create-before-intent", False),
    ("create-intent-durable", False),
    ("create-clone-sent:40", False),
    ("create-cloned", False),
    ("create-starting:20", False),
    ("create-connecting", False),
    ("create-rekeyed", False),
    ("create-before-ready", False),
    ("create-ready-durable", False),
    ("create-replied:100", True),
]
DESTROY_POINTS = ["destroy-stop-sent:20", "destroy-deleted"]


def marker_line(instance, sandbox, owner=0, created=1, expires=4102444800):
    body = f"sandboxd:v1 instance={instance} sandbox={sandbox} owner={owner} created={created} expires={expires}"
    return body + " check=" + hashlib.sha256(body.encode()).hexdigest()[:8]


def main():
    with Env(daemon_config=FAST_RECONCILE) as env:
        instance = open(os.path.join(env.dir, "state", "instance")).read().strip()
        foreign = {
            1990: None,  # no marker at all
            1991: marker_line("i-anotherdaemon1", "sb-notours000001"),  # another instance
            1992: "sandboxd:v1 instance=" + instance + " sandbox=sb-broken check=00000000",  # broken
            1993: "a human's note\n" + marker_line(instance, "sb-dupe00000001") + "\n" +
                  marker_line(instance, "sb-dupe00000002"),  # two markers: ambiguous, never ours
        }
        for vmid, desc in foreign.items():
            from test_recovery_util import foreign_container
            foreign_container(env, vmid, desc)
        tests = []

        def ours():
            """vmid -> marker of every container carrying this instance's marker."""
            return {v: m for v, m in marked_containers(env).items()
                    if m.get("instance") == instance and v not in foreign}

        def consistent(c):
            """Every container of ours belongs to a live sandbox of the daemon."""
            live = {s["id"]: s for s in c.call("sandbox.list", {"all": True})["sandboxes"]}
            for vmid, m in ours().items():
                s = live.get(m["sandbox"])
                if not s or s["vmid"] != vmid or s["state"] != "ready":
                    return False
            return True

        def foreign_intact():
            cts = env.containers()
            for vmid in foreign:
                assert vmid in cts, f"foreign container {vmid} was touched: {sorted(cts)}"
            assert foreign[1991] in description(env, 1991)

        def clean_all(c):
            for s in c.call("sandbox.list", {"all": True})["sandboxes"]:
                try:
                    c.call("sandbox.destroy", {"id": s["id"]})
                except e2elib.RpcError:
                    pass
            wait_until(lambda: not ours(), 20, "no container of ours left")

        def foreign_survive():
            wait_reconciled(env, runs_after=2)
            foreign_intact()

        def create_kill(point, returned, rep):
            def t():
                try:
                    body()
                finally:
                    if env.proc is None:
                        launch(env)
                    clean_all(env.client(timeout=120))

            def body():
                key = f"k-{point.split(':')[0]}-{rep}"
                params = {"idempotency_key": key, "ttl_s": 600, "labels": {"t": "recovery"}}
                restart_with_crash(env, point)
                c = env.client(timeout=120)
                first = None
                try:
                    first = c.call("sandbox.create", params, timeout=120)
                except (ConnectionError, OSError, e2elib.RpcError):
                    pass
                wait_dead(env)
                assert returned == (first is not None), (point, first)
                launch(env)
                c = env.client(timeout=120)
                wait_reconciled(env, runs_after=1)
                # A clone the kill interrupted goes on in Proxmox and joins the pool when it
                # ends: let it settle, then the periodic run (after orphan_grace_s) reaps it.
                wait_until(lambda: not any(ct.get("lock") for ct in env.containers().values()),
                           20, "no clone in progress")
                runs = c.call("daemon.status")["reconcile"]["runs"]
                wait_reconciled(env, runs_after=runs + 2, timeout=30)
                wait_until(lambda: consistent(c), 20, "every container of ours to be live")
                if returned:
                    got = c.call("sandbox.get", {"id": first["id"]})
                    assert got["state"] == "ready" and got["expires_at"] == first["expires_at"], (got, first)
                again = c.call("sandbox.create", params, timeout=120)
                if first is not None:
                    assert again["id"] == first["id"] and again["vmid"] == first["vmid"], (again, first)
                x = c.call("sandbox.exec", {"id": again["id"], "command": "echo ok"})
                assert x["stdout"] == "ok\n", x
                keyed = [v for v, m in ours().items() if m["sandbox"] == again["id"]]
                assert len(keyed) == 1, ours()
                assert len(ours()) == 1, ours()  # no second container for the key
                clean_all(c)
                foreign_intact()
            return t

        def destroy_kill(point, rep):
            def t():
                c = env.client(timeout=120)
                sb = c.call("sandbox.create", {"ttl_s": 600})
                restart_with_crash(env, point)  # a clean stop keeps it, the restart re-attaches
                c = env.client(timeout=120)
                wait_reconciled(env, runs_after=1)
                assert c.call("sandbox.get", {"id": sb["id"]})["state"] == "ready"
                try:
                    c.call("sandbox.destroy", {"id": sb["id"]}, timeout=60)
                except (ConnectionError, OSError, e2elib.RpcError):
                    pass
                wait_dead(env)
                launch(env)
                c = env.client(timeout=120)
                wait_reconciled(env, runs_after=1)
                wait_until(lambda: sb["vmid"] not in env.containers(), 20, "the container to go")
                e = c.error("sandbox.get", {"id": sb["id"]})
                assert e.code == -32001, e.err
                wait_until(lambda: sb["id"] not in records(env), 10, "the record to go")
                foreign_intact()
            return t

        def state_folder_lost():
            c = env.client(timeout=120)
            a = c.call("sandbox.create", {"ttl_s": 500, "idempotency_key": "lost-a", "cores": 1})
            b = c.call("sandbox.create", {"ttl_s": 400, "internet": True})
            assert env.stop_daemon() == 0
            shutil.rmtree(os.path.join(env.dir, "state"))
            launch(env)
            c = env.client(timeout=120)
            st = wait_reconciled(env, runs_after=1)
            assert st["reconcile"]["reattached"] >= 2, st
            assert open(os.path.join(env.dir, "state", "instance")).read().strip() == instance
            for old in (a, b):
                got = c.call("sandbox.get", {"id": old["id"]})
                for k in ("vmid", "ip", "owner_uid", "expires_at", "created_at", "internet", "state"):
                    assert got[k] == old[k], (k, got, old)
                x = c.call("sandbox.exec", {"id": old["id"], "command": "echo back"})
                assert x["stdout"] == "back\n", x
            again = c.call("sandbox.create", {"ttl_s": 500, "idempotency_key": "lost-a", "cores": 1})
            assert again["id"] == a["id"], (again, a)
            e = c.error("sandbox.create", {"ttl_s": 501, "idempotency_key": "lost-a", "cores": 1})
            assert e.code == -32010, e.err
            assert set(records(env)) == {a["id"], b["id"]}, records(env)
            # and the next restart (with the rebuilt registry) keeps them
            assert env.stop_daemon() == 0
            launch(env)
            c = env.client(timeout=120)
            wait_reconciled(env, runs_after=2)
            assert c.call("sandbox.get", {"id": a["id"]})["state"] == "ready"
            assert c.call("sandbox.get", {"id": b["id"]})["state"] == "ready"
            clean_all(c)
            foreign_intact()

        def corrupt_record():
            c = env.client(timeout=120)
            a = c.call("sandbox.create", {"ttl_s": 500})
            kill9(env)
            with open(os.path.join(env.dir, "state", "sandboxes", a["id"] + ".json"), "w") as f:
                f.write('{"version": 1, "id": "' + a["id"] + '", "inst')  # torn
            launch(env)
            c = env.client(timeout=120)
            st = wait_reconciled(env, runs_after=1)
            assert st["reconcile"]["registry_problems"] >= 1, st
            got = c.call("sandbox.get", {"id": a["id"]})
            assert got["state"] == "ready" and got["expires_at"] == a["expires_at"], (got, a)
            assert c.call("sandbox.exec", {"id": a["id"], "command": "echo ok"})["stdout"] == "ok\n"
            clean_all(c)

        def stuck_lock():
            c = env.client(timeout=120)
            a = c.call("sandbox.create", {"ttl_s": 500})
            env.sim.admin("POST", f"/ct/{a['vmid']}/lock", {"lock": "backup"})
            n0 = wait_reconciled(env)["reconcile"]["runs"]

            def listed():
                st = c.call("daemon.status")["reconcile"]
                return [s for s in st["stuck"] if s["vmid"] == a["vmid"] and s["lock"] == "backup"]
            wait_until(listed, 15, "the stuck container in daemon.status")
            assert c.call("daemon.status")["reconcile"]["runs"] >= n0 + 1
            assert "stuck with lock 'backup'" in env.daemon_log()
            env.sim.admin("DELETE", f"/ct/{a['vmid']}/lock")
            wait_until(lambda: not listed(), 15, "the stuck entry to clear")
            clean_all(c)

        def clean_stop_keeps_then_destroy_on_stop():
            c = env.client(timeout=120)
            a = c.call("sandbox.create", {"ttl_s": 500})
            assert env.stop_daemon() == 0
            assert a["vmid"] in env.containers()
            with open(env.config, "a") as f:
                f.write("destroy_on_stop = true\n")
            launch(env)
            c = env.client(timeout=120)
            wait_reconciled(env)
            assert c.call("sandbox.exec", {"id": a["id"], "command": "echo ok"})["stdout"] == "ok\n"
            assert env.stop_daemon() == 0
            assert a["vmid"] not in env.containers(), env.containers()
            assert not records(env), records(env)
            with open(env.config) as f:
                text = f.read().replace("destroy_on_stop = true\n", "")
            with open(env.config, "w") as f:
                f.write(text)
            launch(env)

        tests.append(("foreign containers survive reconciles", foreign_survive))
        for rep in range(REPEAT):
            for point, returned in CREATE_POINTS:
                tests.append((f"kill -9 at {point} (#{rep + 1})", create_kill(point, returned, rep)))
            for point in DESTROY_POINTS:
                tests.append((f"kill -9 at {point} (#{rep + 1})", destroy_kill(point, rep)))
        tests += [("state folder lost: rebuilt from the markers", state_folder_lost),
                  ("a corrupt record is resolved from Proxmox", corrupt_record),
                  ("a lock that stays is reported as stuck", stuck_lock),
                  ("clean stop keeps sandboxes; destroy_on_stop destroys them", clean_stop_keeps_then_destroy_on_stop),
                  ("foreign containers survived everything", foreign_intact)]
        run_tests(env, tests)


if __name__ == "__main__":
    main()
