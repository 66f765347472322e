#!/usr/bin/env python3
"""sandbox.create's env and errors that name their subject, against the simulator: the
variables reach every exec and background process (the call's own env wins per name), in a
sandbox served from the warm pool and in a cold one; they are never returned (only
env_names), never in the daemon's log, audit trail, events or Proxmox (markers, descriptions);
they survive a kill -9 of the daemon (the registry record, 0600); an idempotent retry
compares them; their limits; and -32602/-32009 errors that name the parameter, the variable,
the operator's cap with its number, the file and the side of a rename."""

import json
import os
import secrets
import stat
import subprocess

from e2elib import BUILD, Env, RpcError, data_of, run
from test_recovery_util import FAST_RECONCILE, kill9, launch, records, wait_until

SECRET = "tok-" + secrets.token_hex(12)
ENV = {"SECRET_TOKEN": SECRET, "GREETING": "hello"}
SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")
CONFIG = {"sandbox": dict(FAST_RECONCILE["sandbox"], max_ttl_s="86400", default_ttl_s="3600"),
          "pool": {"warm": "1", "max_filling": "1"}}


def out_of(r):
    return data_of(r, "stdout").decode()


def read_process(c, sid, proc):
    c.call("process.wait", {"id": sid, "process": proc, "timeout_ms": 30000})
    r = c.call("process.read", {"id": sid, "process": proc, "offset": 0})
    return data_of(r, "data").decode()


def not_logged(env):
    lines = [l for l in env.daemon_log().splitlines() if SECRET in l]
    assert not lines, lines[:5]


def error(c, method, params):
    try:
        r = c.call(method, params)
    except RpcError as e:
        return e
    raise AssertionError(f"{method} {params} succeeded: {r}")


def main():
    with Env(daemon_config=CONFIG) as env:
        c = env.client()
        sub = env.client()
        sub.send("daemon.subscribe")
        wait_until(lambda: c.call("daemon.status")["pool"]["default"]["ready"] == 1, 120,
                   "a warm pool member")
        state = {}

        def applied_to_exec_and_process():
            sb = c.call("sandbox.create", {"env": ENV, "idempotency_key": "env-1"})
            state["sid"] = sid = sb["id"]
            assert c.call("daemon.status")["pool"]["default"]["hits"] >= 1  # a hand-over
            r = c.call("sandbox.exec", {"id": sid, "command": 'echo "$SECRET_TOKEN $GREETING"'})
            assert out_of(r) == f"{SECRET} hello\n", r
            r = c.call("sandbox.exec", {"id": sid, "argv": ["sh", "-c", 'echo "$GREETING"'],
                                        "env": {"GREETING": "override", "OTHER": "1"}})
            assert out_of(r) == "override\n", r  # the call's env wins per name
            p = c.call("process.start", {"id": sid, "command": 'echo "$SECRET_TOKEN/$GREETING"'})
            assert read_process(c, sid, p["process"]) == f"{SECRET}/hello\n"
            p = c.call("process.start", {"id": sid, "command": 'echo "$GREETING"',
                                         "env": {"GREETING": "mine"}})
            assert read_process(c, sid, p["process"]) == "mine\n"
            # A cold create (the pool is being refilled, or empty) gets its env too.
            sb2 = c.call("sandbox.create", {"env": {"ONLY": "cold-or-warm"}})
            r = c.call("sandbox.exec", {"id": sb2["id"], "command": 'echo "$ONLY"'})
            assert out_of(r) == "cold-or-warm\n", r
            state["sid2"] = sb2["id"]

        def never_returned():
            sid = state["sid"]
            got = c.call("sandbox.get", {"id": sid})
            assert sorted(got["env_names"]) == ["GREETING", "SECRET_TOKEN"], got
            lst = c.call("sandbox.list")
            assert SECRET not in json.dumps(got) and SECRET not in json.dumps(lst)
            assert [s["env_names"] for s in lst["sandboxes"] if s["id"] == sid] == \
                [got["env_names"]], lst
            # Neither the log (debug level) and its audit records, nor events, nor Proxmox.
            not_logged(env)
            assert SECRET not in json.dumps(sub.notes), "the secret is in an event"
            assert SECRET not in json.dumps(env.sim.admin("GET", "/state")), "in Proxmox"
            rec = os.path.join(env.dir, "state", "sandboxes", sid + ".json")
            assert stat.S_IMODE(os.stat(rec).st_mode) == 0o600
            assert records(env)[sid]["env"] == ENV

        def idempotent_retry_compares_env():
            again = c.call("sandbox.create", {"env": dict(reversed(list(ENV.items()))),
                                              "idempotency_key": "env-1"})
            assert again["id"] == state["sid"], again
            e = error(c, "sandbox.create", {"env": dict(ENV, SECRET_TOKEN="other"),
                                            "idempotency_key": "env-1"})
            assert e.code == -32010 and SECRET not in json.dumps(e.err), e.err

        def survives_kill9():
            c.close()
            kill9(env)
            launch(env)
            c2 = env.client()
            r = c2.call("sandbox.exec", {"id": state["sid"], "command": 'echo "$SECRET_TOKEN"'})
            assert out_of(r) == SECRET + "\n", r
            assert c2.call("sandbox.get", {"id": state["sid"]})["env_names"]
            state["c"] = c2

        def limits():
            c2 = state["c"]
            e = error(c2, "sandbox.create", {"env": {"9BAD": "x"}})
            assert e.code == -32602 and e.data["param"] == "env", e.err
            assert 'variable name "9BAD"' in e.data["reason"], e.err
            e = error(c2, "sandbox.create", {"env": {"BIG": "v" * 5000}})
            assert e.data["variable"] == "BIG" and e.data["max"] == 4096, e.err
            assert "v" * 100 not in json.dumps(e.err), "the value is echoed"
            e = error(c2, "sandbox.create", {"env": {f"V{i}": "x" for i in range(65)}})
            assert "more than 64 variables" in e.data["reason"], e.err
            # The sandbox's env and the call's together within process.start's 4096 bytes.
            sb = c2.call("sandbox.create", {"env": {"FILL": "f" * 4000}})
            e = error(c2, "process.start", {"id": sb["id"], "command": "true",
                                            "env": {"MORE": "m" * 200}})
            assert e.code == -32602 and e.data["param"] == "env" and e.data["max"] == 4096, e.err
            assert "sandbox's own env" in e.data["reason"], e.err
            assert c2.call("process.list", {"id": sb["id"]})["processes"] == []

        def sandboxctl_env_and_errors():
            def ctl(*args):
                return subprocess.run([SANDBOXCTL, "--socket", env.socket, *args],
                                      capture_output=True, text=True, timeout=300)

            p = ctl("create", "--env", f"CTL_SECRET={SECRET}", "--env", "B=x=y")
            assert p.returncode == 0, p.stderr
            assert SECRET not in p.stdout and "CTL_SECRET" in p.stdout, p.stdout
            sid = [l.split()[1] for l in p.stdout.splitlines() if l.startswith("id ")][0]
            p = ctl("exec", sid, "--", "sh", "-c", 'echo "$CTL_SECRET $B"')
            assert p.returncode == 0 and p.stdout == f"{SECRET} x=y\n", (p.stdout, p.stderr)
            p = ctl("create", "--env", "NOEQUALS")
            assert p.returncode != 0 and "--env wants key=value" in p.stderr, p.stderr
            p = ctl("renew", state["sid"], "200000")
            assert p.returncode != 0 and "ttl_s must be 1..86400 (max_ttl_s)" in p.stderr, p.stderr
            p = ctl("get", sid, "/no/such/file", "-")
            assert p.returncode != 0 and "/no/such/file: " in p.stderr, p.stderr

        def errors_name_their_subject():
            c2 = state["c"]
            sid = state["sid"]
            e = error(c2, "sandbox.create", {"foo": 1})
            assert e.data["reason"] == 'unknown parameter "foo"' and e.data["param"] == "foo", e.err
            for ttl in (200000, 40000000):  # over the operator's cap; over the schema's too
                e = error(c2, "sandbox.renew", {"id": sid, "ttl_s": ttl})
                assert e.data["reason"] == "ttl_s must be 1..86400 (max_ttl_s)", e.err
                assert e.data["max"] == 86400 and e.data["cap"] == "max_ttl_s", e.err
            e = error(c2, "sandbox.create", {"ttl_s": 90000})
            assert e.data["reason"] == "ttl_s must be 1..86400 (max_ttl_s)", e.err
            e = error(c2, "sandbox.exec", {"id": sid, "command": "true", "timeout_ms": 0})
            assert e.data["reason"].startswith("timeout_ms: "), e.err
            e = error(c2, "file.read", {"id": sid, "path": "/no/such/file"})
            assert e.code == -32009 and e.data["path"] == "/no/such/file", e.err
            assert e.data["reason"].startswith("/no/such/file: "), e.err
            e = error(c2, "file.rename", {"id": sid, "from": "/no/such", "to": "/tmp/x"})
            assert e.data["side"] == "from" and e.data["path"] == "/no/such", e.err
            c2.call("file.write", {"id": sid, "path": "/tmp/a", "content": "a"})
            c2.call("file.mkdir", {"id": sid, "path": "/tmp/d"})
            e = error(c2, "file.rename", {"id": sid, "from": "/tmp/a", "to": "/tmp/d"})
            assert e.data["side"] == "to" and e.data["path"] == "/tmp/d", e.err
            assert e.data["reason"].startswith("to /tmp/d: "), e.err
            e = error(c2, "file.rename", {"id": sid, "from": "/tmp/a", "to": "/no/dir/b"})
            assert e.data["side"] == "to" and e.data["path"] == "/no/dir/b", e.err
            not_logged(env)

        run([("env applied to exec and process, warm and cold", applied_to_exec_and_process),
             ("env never returned, logged, sent as an event or to Proxmox", never_returned),
             ("an idempotent retry compares env", idempotent_retry_compares_env),
             ("env survives kill -9 of the daemon", survives_kill9),
             ("env limits", limits),
             ("sandboxctl create --env; its errors name their subject", sandboxctl_env_and_errors),
             ("errors name their subject", errors_name_their_subject)])


if __name__ == "__main__":
    main()
