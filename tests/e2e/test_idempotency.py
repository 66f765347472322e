#!/usr/bin/env python3
"""Idempotent create: the same idempotency_key with the same params from the same uid gives
the same sandbox — sent twice concurrently (the second waits for the first's outcome), again
later, and again after a restart (clean or kill -9); different params give -32010 and change
nothing; another uid's identical key is a different sandbox; a failed create is not
remembered (the retry creates)."""

import json
import os
import subprocess
import sys
import threading

import e2elib
from e2elib import Env
from test_recovery_util import (FAST_RECONCILE, kill9, launch, marked_containers, run_tests,
                                wait_reconciled)

CHILD_PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from e2elib import Client
c = Client(sys.argv[2], timeout=120)
print(json.dumps(c.call("sandbox.create", json.loads(sys.argv[3]))))
"""


def create_as(uid, env, params):
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    r = subprocess.run([CHILD_PY, "-c", CHILD, os.path.dirname(os.path.abspath(__file__)), env.socket,
                        json.dumps(params)], capture_output=True, text=True, timeout=300, preexec_fn=drop)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    with Env(daemon_config=FAST_RECONCILE) as env:
        tests = []

        def containers_for(sid):
            return [v for v, m in marked_containers(env).items() if m.get("sandbox") == sid]

        def concurrent():
            params = {"idempotency_key": "conc-1", "cores": 1, "labels": {"a": "b"}}
            out, errs = [None] * 4, []

            def one(i):
                try:
                    c = env.client(timeout=120)
                    out[i] = c.call("sandbox.create", params, timeout=120)
                    c.close()
                except Exception as e:  # noqa: BLE001
                    errs.append(e)
            ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            assert not errs, errs
            assert len({o["id"] for o in out}) == 1, out
            assert all(o["state"] == "ready" for o in out), out
            assert len(containers_for(out[0]["id"])) == 1
            # the same again later: same sandbox; reordered params are the same params
            c = env.client()
            again = c.call("sandbox.create", {"labels": {"a": "b"}, "cores": 1, "idempotency_key": "conc-1"})
            assert again["id"] == out[0]["id"], (again, out[0])
            # different params: -32010, nothing created
            n = len(env.containers())
            for other in ({"idempotency_key": "conc-1", "cores": 2, "labels": {"a": "b"}},
                          {"idempotency_key": "conc-1"}):
                e = c.error("sandbox.create", other)
                assert e.code == -32010 and e.data.get("reason"), e.err
            assert len(env.containers()) == n
            # another uid with the same key and params: its own sandbox
            theirs = create_as(65534, env, params)
            assert theirs["id"] != out[0]["id"] and theirs["owner_uid"] == 65534, theirs
            c.call("sandbox.destroy", {"id": theirs["id"]})

        def after_restarts():
            c = env.client()
            a = c.call("sandbox.create", {"idempotency_key": "restart-1", "ttl_s": 900})
            assert env.stop_daemon() == 0
            launch(env)
            c = env.client()
            b = c.call("sandbox.create", {"idempotency_key": "restart-1", "ttl_s": 900})
            assert b["id"] == a["id"] and b["vmid"] == a["vmid"] and b["expires_at"] == a["expires_at"], (a, b)
            kill9(env)
            launch(env)
            c = env.client()
            # sent right away: held until the first reconcile rebuilt the table
            b = c.call("sandbox.create", {"idempotency_key": "restart-1", "ttl_s": 900})
            assert b["id"] == a["id"], (a, b)
            e = c.error("sandbox.create", {"idempotency_key": "restart-1", "ttl_s": 901})
            assert e.code == -32010, e.err
            assert len(containers_for(a["id"])) == 1
            assert c.call("sandbox.exec", {"id": a["id"], "command": "echo same"})["stdout"] == "same\n"
            wait_reconciled(env)

        def failed_not_remembered():
            c = env.client()
            env.sim.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/*/status/start",
                                               "task_error": "startup failed", "count": 1})
            e = c.error("sandbox.create", {"idempotency_key": "fail-1"})
            assert e.code == -32004, e.err
            ok = c.call("sandbox.create", {"idempotency_key": "fail-1"})
            assert ok["state"] == "ready", ok
            assert c.call("sandbox.create", {"idempotency_key": "fail-1"})["id"] == ok["id"]

        def bad_key():
            c = env.client()
            e = c.error("sandbox.create", {"idempotency_key": "x" * 65})
            assert e.code == -32602, e.err

        tests += [("same key concurrently, again, other params, other uid", concurrent),
                  ("same key after a clean restart and after kill -9", after_restarts),
                  ("a failed create is not remembered", failed_not_remembered),
                  ("a key over 64 characters is refused", bad_key)]
        run_tests(env, tests)


if __name__ == "__main__":
    main()
