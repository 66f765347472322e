#!/usr/bin/env python3
"""sandbox.pause and sandbox.resume against the simulator: a pause stops the container and
keeps its disk (files kept, the background process ended), calls that need the container
fail with -32002 state "paused", the resume brings it back READY at the same address with the
same host key; the paused lease and quotas (max_paused_ttl_s, max_paused_per_uid, resume
refused while max_per_uid is full); another uid refused; a paused sandbox survives kill -9
and a lost state folder, neither started nor destroyed; kill -9 at each crash point of a pause
and a resume leaves it paused (container stopped, marker paused) and resumable."""

import calendar
import os
import shutil
import subprocess
import sys
import time

from e2elib import BUILD, SRC, Env, RpcError, calls_as_uid, data_of, expect_error, run, wait_procs
from test_recovery_util import description, kill9, launch, wait_dead, wait_reconciled

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")
PAUSED_TTL = 3600
RUNNING_TTL = 900


def epoch(rfc3339):
    return calendar.timegm(time.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ"))


def sh(c, sid, cmd):
    r = c.call("sandbox.exec", {"id": sid, "command": cmd})
    assert r["exit_code"] == 0, r
    return r["stdout"]


def retry_busy(c, method, sid, timeout=30):
    """method on sid, again while another operation on it still runs (-32007): the pause a
    restart finishes."""
    deadline = time.time() + timeout
    while True:
        try:
            return c.call(method, {"id": sid})
        except RpcError as e:
            if e.code != -32007 or time.time() > deadline:
                raise
            time.sleep(0.2)


def resume(c, sid):
    return retry_busy(c, "sandbox.resume", sid)


def wait_until(pred, timeout, what):
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, what
        time.sleep(0.1)


def main():
    cfg = {"sandbox": {"max_paused_ttl_s": str(PAUSED_TTL), "max_paused_per_uid": "2",
                       "default_ttl_s": str(RUNNING_TTL),
                       "max_per_uid": "2", "reconcile_interval_s": "2"}}
    with Env(sim_config={"dhcp_delay": 0.2}, daemon_config=cfg) as env:
        st = {}
        c = env.client()

        def running(vmid):
            return env.containers()[vmid]["running"]

        def pause_resume_keeps_files():
            sb = c.call("sandbox.create", {})
            sid = st["a"] = sb["id"]
            st["vmid"], st["ip"] = sb["vmid"], sb["ip"]
            c.call("file.write", {"id": sid, "path": "/root/kept.txt", "content": "kept\n"})
            key = st["key"] = sh(c, sid, "cat /etc/ssh/ssh_host_*_key.pub | sort")
            c.call("process.start", {"id": sid, "command": "sleep 4501"})
            wait_procs(c, sid, "^sleep 4501", 1)  # seen running: its absence below means something
            t0 = time.time()
            p = c.call("sandbox.pause", {"id": sid})
            assert p["state"] == "paused" and p["ip"] == sb["ip"], p
            assert abs(epoch(p["expires_at"]) - (t0 + PAUSED_TTL)) < 30, p
            assert not running(sb["vmid"])
            assert c.call("sandbox.get", {"id": sid})["state"] == "paused"
            gauge = [f for f in c.call("daemon.metrics")["metrics"] if f["name"] == "sandboxd_sandboxes"][0]
            assert [x["value"] for x in gauge["samples"] if x["labels"]["state"] == "paused"] == [1], gauge
            assert [s["state"] for s in c.call("sandbox.list")["sandboxes"] if s["id"] == sid] == ["paused"]
            # a pause of a paused sandbox answers it as it is
            assert c.call("sandbox.pause", {"id": sid})["state"] == "paused"
            # calls that need the container: -32002, state "paused", nothing started
            for m, prm in (("sandbox.exec", {"id": sid, "command": "true"}),
                           ("file.read", {"id": sid, "path": "/root/kept.txt"}),
                           ("process.start", {"id": sid, "command": "true"}),
                           ("sandbox.snapshot", {"id": sid, "name": "s1"}),
                           ("sandbox.resize", {"id": sid, "cores": 2})):
                e = expect_error(c, m, prm, -32002)
                assert e["data"]["state"] == "paused" and "paused" in e["data"]["reason"], (m, e)
            assert not running(sb["vmid"])
            t0 = time.time()
            r = c.call("sandbox.resume", {"id": sid})
            assert r["state"] == "ready" and r["ip"] == sb["ip"], r
            assert abs(epoch(r["expires_at"]) - (t0 + RUNNING_TTL)) < 30, r  # a running lease
            assert data_of(c.call("file.read", {"id": sid, "path": "/root/kept.txt"}), "content") == b"kept\n"
            assert sh(c, sid, "cat /etc/ssh/ssh_host_*_key.pub | sort") == key
            wait_procs(c, sid, "^sleep 4501", 0)  # the pause stopped it with the container
            log = env.daemon_log()
            assert f"event=sandbox.paused sandbox={sid}" in log and f"event=sandbox.resumed sandbox={sid}" in log
            m = c.call("daemon.metrics")["metrics"]
            pauses = [f for f in m if f["name"] == "sandboxd_pauses_total"][0]
            got = {tuple(s["labels"].values()): s["value"] for s in pauses["samples"]}
            assert got.get(("pause", "done")) == 1 and got.get(("resume", "done")) == 1, got

        def quotas_and_lease():
            a = st["a"]
            b = c.call("sandbox.create", {})["id"]
            expect_error(c, "sandbox.create", {}, -32003)  # max_per_uid 2: a and b run
            c.call("sandbox.pause", {"id": a})
            c2 = c.call("sandbox.create", {})["id"]  # a paused counts against neither
            e = expect_error(c, "sandbox.resume", {"id": a}, -32003)
            assert "max_per_uid" in e["data"]["reason"], e
            assert c.call("sandbox.get", {"id": a})["state"] == "paused"
            c.call("sandbox.pause", {"id": b})
            e = expect_error(c, "sandbox.pause", {"id": c2}, -32003)  # max_paused_per_uid 2
            assert "max_paused_per_uid" in e["data"]["reason"], e
            # renew of a paused sandbox: within max_paused_ttl_s
            expect_error(c, "sandbox.renew", {"id": a, "ttl_s": PAUSED_TTL + 1}, -32602, "ttl_s")
            t0 = time.time()
            got = c.call("sandbox.renew", {"id": a, "ttl_s": 600})
            assert got["state"] == "paused" and abs(epoch(got["expires_at"]) - (t0 + 600)) < 30, got
            c.call("sandbox.destroy", {"id": c2})
            # a paused sandbox whose lease ends is destroyed as any other
            c.call("sandbox.renew", {"id": b, "ttl_s": 1})
            wait_until(lambda: b not in [x["id"] for x in c.call("sandbox.list")["sandboxes"]], 30,
                       "the paused sandbox's lease to end")
            # a destroy asked for during a pause follows it
            c3 = c.call("sandbox.create", {})["id"]
            i = c.send("sandbox.pause", {"id": c3})
            c2_ = env.client()
            c2_.call("sandbox.destroy", {"id": c3})
            c2_.close()
            try:
                c.wait(i)
            except RpcError:
                pass
            assert c3 not in [x["id"] for x in c.call("sandbox.list")["sandboxes"]]
            assert c.call("sandbox.get", {"id": a})["state"] == "paused"

        def other_uid_refused():
            a = st["a"]
            out = calls_as_uid(env.socket, 65534, [("sandbox.pause", {"id": a}),
                                                   ("sandbox.resume", {"id": a})])
            assert all(v == -32001 for v in out.values()), out
            assert c.call("sandbox.get", {"id": a})["state"] == "paused"
            assert not running(st["vmid"])

        def survives_kill9_and_lost_state():
            nonlocal c
            a, vmid = st["a"], st["vmid"]
            before = c.call("sandbox.get", {"id": a})
            c.close()
            kill9(env)
            launch(env)
            wait_reconciled(env)
            c = env.client()
            got = c.call("sandbox.get", {"id": a})
            assert got["state"] == "paused" and got["expires_at"] == before["expires_at"], got
            assert not running(vmid)
            c.close()
            kill9(env)
            shutil.rmtree(os.path.join(env.dir, "state"))
            launch(env)
            wait_reconciled(env)
            c = env.client()
            got = c.call("sandbox.get", {"id": a})
            assert got["state"] == "paused" and got["expires_at"] == before["expires_at"], got
            assert vmid in env.containers() and not running(vmid)
            r = c.call("sandbox.resume", {"id": a})
            assert r["state"] == "ready" and r["ip"] == before["ip"], r
            assert sh(c, a, "cat /root/kept.txt") == "kept\n"
            assert sh(c, a, "cat /etc/ssh/ssh_host_*_key.pub | sort") == st["key"]

        def crash_points():
            nonlocal c
            a, vmid = st["a"], st["vmid"]
            for point, method in (("pause-recorded", "sandbox.pause"), ("pause-marked", "sandbox.pause"),
                                  ("pause-sent", "sandbox.pause"), ("resume-started", "sandbox.resume"),
                                  ("resume-marked", "sandbox.resume")):
                if method == "sandbox.resume":
                    retry_busy(c, "sandbox.pause", a)
                c.close()
                kill9(env)
                launch(env, crash_at=point)
                c = env.client()
                try:
                    if method == "sandbox.resume":
                        resume(c, a)
                    else:
                        c.call(method, {"id": a}, timeout=60)
                except (ConnectionError, OSError, RpcError) as e:
                    assert getattr(e, "code", None) in (None, -32011), (point, e)
                assert wait_dead(env) != 0, point
                launch(env)
                wait_reconciled(env)
                c = env.client()
                # finished (a pause) or rolled back (a resume): paused, its container stopped
                assert c.call("sandbox.get", {"id": a})["state"] == "paused", point
                wait_until(lambda: not running(vmid), 30, f"{point}: the container to stop")
                wait_until(lambda: " paused=1 " in description(env, vmid), 10,
                           f"{point}: the marker to say paused")
                if method == "sandbox.pause":
                    r = resume(c, a)
                    assert r["state"] == "ready", (point, r)
                    assert sh(c, a, "cat /root/kept.txt") == "kept\n"
            # usable after all of it
            r = resume(c, a)
            assert r["state"] == "ready" and sh(c, a, "echo alive") == "alive\n"

        def resume_on_use_and_auto_pause():
            e = expect_error(c, "sandbox.create", {"auto_pause_s": PAUSED_TTL + 1}, -32602, "auto_pause_s")
            sb = c.call("sandbox.create", {"resume_on_use": True, "auto_pause_s": 1})
            sid = sb["id"]
            proc = c.call("process.start", {"id": sid, "command": "sleep 300"})["process"]
            time.sleep(2.5)  # idle past auto_pause_s, but a background process runs: not paused
            assert c.call("sandbox.get", {"id": sid})["state"] == "ready"
            c.call("process.kill", {"id": sid, "process": proc})
            wait_until(lambda: c.call("sandbox.get", {"id": sid})["state"] == "paused", 30,
                       "the idle sandbox to pause itself")
            wait_until(lambda: not running(sb["vmid"]), 30, "its container to stop")
            retry_busy(c, "sandbox.pause", sid)  # the pause's last step done
            # resume_on_use: an exec resumes it first, then runs (two at once share the resume)
            i = c.send("sandbox.exec", {"id": sid, "command": "echo one"})
            c2 = env.client()
            assert sh(c2, sid, "echo two") == "two\n"
            assert c.wait(i)["stdout"] == "one\n"
            c2.close()
            got = c.call("sandbox.get", {"id": sid})
            assert got["state"] == "ready" and got["ip"] == sb["ip"], got
            c.call("sandbox.destroy", {"id": sid})

        def cli():
            a = st["a"]

            def ctl(*args):
                r = subprocess.run([SANDBOXCTL, "--socket", env.socket, *args], capture_output=True,
                                   text=True, timeout=120)
                return r.returncode, r.stdout, r.stderr
            rc, out, err = ctl("pause", a)
            assert rc == 0 and out.split()[:2] == [a, "paused"], (rc, out, err)
            rc, out, err = ctl("resume", a)
            assert rc == 0 and out.split()[:2] == [a, "ready"], (rc, out, err)
            # the Python client
            sys.path.insert(0, os.path.join(SRC, "clients", "python"))
            import sandboxd
            sb = sandboxd.Client(env.socket).get(a)
            assert sb.pause().info["state"] == "paused"
            try:
                sb.exec("true")
                raise AssertionError("exec on a paused sandbox")
            except sandboxd.BadState as e:
                assert "paused" in str(e), e
            assert sb.resume().info["state"] == "ready" and sb.ip == st["ip"]
            c.call("sandbox.destroy", {"id": a})
            env.wait_no_containers()

        run([("pause_resume_keeps_files", pause_resume_keeps_files),
             ("quotas_and_lease", quotas_and_lease),
             ("other_uid_refused", other_uid_refused),
             ("survives_kill9_and_lost_state", survives_kill9_and_lost_state),
             ("crash_points", crash_points),
             ("resume_on_use_and_auto_pause", resume_on_use_and_auto_pause),
             ("cli", cli)])


if __name__ == "__main__":
    main()
