#!/usr/bin/env python3
"""Leases: ttl_s on create, expires_at, expiry destroys the sandbox within seconds, a step
of the wall clock ends none early, sandbox.renew (registry + Proxmox marker) keeps it,
limits, sandboxctl renew."""

import calendar
import os
import subprocess
import time

import e2elib
from e2elib import Env
from test_recovery_util import FAST_RECONCILE, description, marker_fields, records, run_tests, wait_until


def ts(s):
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


def main():
    cfg = {"sandbox": dict(FAST_RECONCILE["sandbox"], max_ttl_s="600", default_ttl_s="300")}
    with Env(daemon_config=cfg) as env:
        c = env.client()
        tests = []

        def default_ttl():
            sb = c.call("sandbox.create", {})
            assert ts(sb["expires_at"]) - ts(sb["created_at"]) == 300, sb
            m = marker_fields(description(env, sb["vmid"]))
            assert int(m["expires"]) == ts(sb["expires_at"]), (m, sb)
            c.call("sandbox.destroy", {"id": sb["id"]})

        def ttl_expires():
            sb = c.call("sandbox.create", {"ttl_s": 2})
            assert ts(sb["expires_at"]) - ts(sb["created_at"]) == 2, sb
            t0 = time.time()
            wait_until(lambda: sb["vmid"] not in env.containers(), 15, "the expired sandbox to go")
            took = time.time() - t0

            def gone():
                try:
                    c.call("sandbox.get", {"id": sb["id"]})
                    return False
                except e2elib.RpcError as e:
                    assert e.code == -32001, e.err
                    return True
            wait_until(gone, 5, "sandbox.get to say -32001")
            assert took < 10, took
            wait_until(lambda: sb["id"] not in records(env), 5, "its record to go")
            st = c.call("daemon.status")
            assert st["reconcile"]["expired_destroyed"] >= 1, st

        def renew_keeps():
            # a lease of 10 s renewed to 20 s three times, then used past its first end
            sb = c.call("sandbox.create", {"ttl_s": 10})
            first_end = ts(sb["expires_at"])
            for _ in range(3):
                time.sleep(1.5)
                t0 = time.time()
                r = c.call("sandbox.renew", {"id": sb["id"], "ttl_s": 20})
                t1 = time.time()
                assert r["id"] == sb["id"] and r["state"] == "ready", r
                exp = ts(r["expires_at"])
                assert int(t0) + 20 - 1 <= exp <= t1 + 20 + 1, (t0, t1, r)
                # the registry and the marker both carry the new lease
                assert records(env)[sb["id"]]["expires_at"] in (exp, r["expires_at"]), records(env)[sb["id"]]
                m = marker_fields(description(env, sb["vmid"]))
                assert int(m["expires"]) == exp, (m, r)
            time.sleep(max(0.0, first_end + 2 - time.time()))
            x = c.call("sandbox.exec", {"id": sb["id"], "command": "echo alive"})
            assert x["stdout"] == "alive\n", x
            # sandboxctl renew ID TTL
            ctl = os.path.join(e2elib.BUILD, "clients", "cli", "sandboxctl")
            p = subprocess.run([ctl, "--socket", env.socket, "--json", "renew", sb["id"], "120"],
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, (p.stdout, p.stderr)
            g = c.call("sandbox.get", {"id": sb["id"]})
            assert ts(g["expires_at"]) >= time.time() + 100, g
            c.call("sandbox.destroy", {"id": sb["id"]})

        def renew_limits():
            sb = c.call("sandbox.create", {"ttl_s": 60})
            for bad in (0, -1, 601):
                e = c.error("sandbox.renew", {"id": sb["id"], "ttl_s": bad})
                assert e.code == -32602, e.err
            e = c.error("sandbox.renew", {"id": "sb-nosuchthing", "ttl_s": 10})
            assert e.code == -32001, e.err
            e = c.error("sandbox.create", {"ttl_s": 601})
            assert e.code == -32602, e.err
            g = c.call("sandbox.get", {"id": sb["id"]})
            assert g["expires_at"] == sb["expires_at"], (g, sb)
            c.call("sandbox.destroy", {"id": sb["id"]})

        def clock_step():
            # A step of the wall clock (NTP) ends no lease early: lease ends move with it.
            sbs = [c.call("sandbox.create", {"ttl_s": 60}) for _ in range(3)]
            c.call("test.clock_step", {"seconds": 3600})
            try:
                time.sleep(3)  # lease ticks after the step
                for sb in sbs:
                    g = c.call("sandbox.get", {"id": sb["id"]})
                    assert g["state"] == "ready", g
                    assert ts(g["expires_at"]) - ts(sb["expires_at"]) == 3600, (g, sb)
                assert "wall clock stepped by +3600 s" in env.daemon_log()
            finally:
                c.call("test.clock_step", {"seconds": -3600})
            wait_until(lambda: "wall clock stepped by -3600 s" in env.daemon_log(), 10,
                       "the step back to be logged")
            for sb in sbs:
                g = c.call("sandbox.get", {"id": sb["id"]})
                assert g["state"] == "ready" and g["expires_at"] == sb["expires_at"], (g, sb)
                c.call("sandbox.destroy", {"id": sb["id"]})

        tests += [("default ttl in expires_at and the marker", default_ttl),
                  ("a wall clock step ends no lease early", clock_step),
                  ("ttl_s 2: destroyed a few seconds after expiry", ttl_expires),
                  ("renew keeps it (registry + marker), sandboxctl renew", renew_keeps),
                  ("renew and create ttl limits", renew_limits)]
        run_tests(env, tests)


if __name__ == "__main__":
    main()
