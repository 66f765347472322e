"""Helpers shared by the recovery, lease and idempotency tests (not a test by itself):
restart the daemon of an e2elib.Env on the SAME state folder (so the instance id and the
registry survive), kill -9 it, crash it at a named point, read the simulator's view."""

import json
import os
import subprocess
import time

import e2elib
from e2elib import Client

os.environ["SANDBOXD_TEST_HOOKS"] = "1"

# Recovery runs every 2 s in these tests; orphans are reaped 2 s after their create began.
FAST_RECONCILE = {"sandbox": {"reconcile_interval_s": "2", "orphan_grace_s": "2",
                              "create_timeout_s": "30"}}


def launch(env, crash_at=None):
    """Starts sandboxd again with env's config (same socket, same state folder)."""
    assert env.proc is None
    env.errlog = open(env.errlog_path, "a")
    e = dict(os.environ)
    e.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    e["SANDBOXD_TEST_HOOKS"] = "1"
    e.pop("SANDBOXD_TEST_CRASH_AT", None)
    if crash_at:
        e["SANDBOXD_TEST_CRASH_AT"] = crash_at
    wrap = env.daemon_wrap(env.sim.info, env.dir) if env.daemon_wrap else []
    env.proc = subprocess.Popen(wrap + [e2elib.SANDBOXD, "--config", env.config, "--log-level", env.log_level],
                                stdout=env.errlog, stderr=env.errlog, env=e)
    deadline = time.time() + 30
    while time.time() < deadline:
        if env.proc.poll() is not None:
            raise RuntimeError(f"sandboxd exited {env.proc.returncode}:\n{env.daemon_log()[-5000:]}")
        try:
            c = Client(env.socket, timeout=10)
            c.call("daemon.status")
            c.close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("sandboxd did not come up:\n" + env.daemon_log()[-5000:])


def kill9(env):
    if env.proc is None:
        return
    env.proc.kill()
    env.proc.wait()
    env.proc = None


def wait_dead(env, timeout=60):
    """Waits for a daemon that crashes itself (test crash point)."""
    rc = env.proc.wait(timeout=timeout)
    env.proc = None
    return rc


def restart_with_crash(env, point):
    if env.proc is not None:
        assert env.stop_daemon() == 0
    launch(env, crash_at=point)


def wait_reconciled(env, runs_after=1, timeout=20):
    """Waits until the daemon completed `runs_after` reconcile runs; returns daemon.status."""
    c = env.client(timeout=30)
    try:
        deadline = time.time() + timeout
        while True:
            st = c.call("daemon.status")
            rc = st.get("reconcile") or {}
            if rc.get("runs", 0) >= runs_after and rc.get("ok"):
                return st
            assert time.time() < deadline, st
            time.sleep(0.1)
    finally:
        c.close()


def sim_ct(env, vmid):
    return env.sim.admin("GET", f"/ct/{vmid}")


def description(env, vmid):
    d = env.sim.ok("GET", f"/nodes/pve/lxc/{vmid}/config")
    return d.get("description") or ""


def marker_fields(desc):
    for line in desc.splitlines():
        line = line.strip().lstrip("#").strip()
        if line.startswith("sandboxd:"):
            return dict(kv.split("=", 1) for kv in line.replace("+", " ").split()[1:] if "=" in kv)
    return None


def marked_containers(env):
    """vmid -> marker fields for every non-template container holding a sandboxd marker."""
    out = {}
    for vmid in env.containers():
        try:
            m = marker_fields(description(env, vmid))
        except AssertionError:
            continue
        if m:
            out[vmid] = m
    return out


def records(env):
    d = os.path.join(env.dir, "state", "sandboxes")
    out = {}
    for n in os.listdir(d) if os.path.isdir(d) else []:
        if n.endswith(".json"):
            try:
                with open(os.path.join(d, n)) as f:
                    out[n[:-5]] = json.load(f)
            except FileNotFoundError:
                pass  # removed by the daemon between the listing and the read: gone
    return out


def wait_until(fn, timeout=20, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}: {last}")


def foreign_container(env, vmid, description=None):
    """A container in the pool created directly through the API (no marker, or a given
    description), started."""
    params = {"hostname": f"foreign{vmid}", "pool": env.sim.info.get("pool", "sandboxd")}
    if description is not None:
        params["description"] = description
    env.sim.clone(vmid, **params)
    return vmid


def run_tests(env, tests):
    """e2elib.run, printing the daemon's log tail when something failed (the Env removes its
    folder, log included, on exit)."""
    try:
        e2elib.run(tests)
    except SystemExit as ex:
        if ex.code:
            import sys
            print(env.daemon_log()[-30000:], file=sys.stderr)
        raise
