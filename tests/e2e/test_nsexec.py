#!/usr/bin/env python3
"""The exec helper (nsexec/sandboxd-nsexec.c) against the simulator: the first exec on a
sandbox puts it in place (/root/.sandboxd-nsexec-<hash>, the daemon's own bytes) and later
execs run through it, in a PID namespace of their own: a timeout still kills everything
the command started; a crash of the helper (SIGKILL) ends the exec with that signal and
kills the command's namespace; a file of another content at the helper's name (a changed
binary) is replaced; where the helper cannot be put in place (a directory at its name) the
sandbox keeps the shell wrapper, with the same guarantees."""

import hashlib
import os
import shutil
import signal
import threading
import time

from e2elib import BUILD, Env, run

HELPER = os.path.join(BUILD, "nsexec", "sandboxd-nsexec")
DIGEST = hashlib.sha256(open(HELPER, "rb").read()).hexdigest()
NAME = f".sandboxd-nsexec-{DIGEST[:16]}"


def tagged(tag):
    """Host pids whose environment holds TAG=tag."""
    out = []
    needle = f"TAG={tag}".encode()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            env = open(f"/proc/{p}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            out.append(int(p))
    return out


def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return []


def ppid(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def helper_of(tag):
    """The host pid of the helper that runs the exec whose env holds TAG=tag (the env reaches
    the command, the helper is its parent), or None."""
    for p in tagged(tag):
        q = ppid(p)
        if q and cmdline(q)[0].endswith(NAME.encode()):
            return q
    return None


def pushed(env):
    """How many times the daemon put the helper in place (with or without the supervisor)."""
    log = env.daemon_log()
    return log.count("exec helper: pushing -> ready") + log.count("exec helper: pushing -> serving")


def wait_until(pred, what, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def main():
    with Env() as env:
        c = env.client()
        ct = os.path.join(env.sim.state_dir, "ct")
        tmpl_root = os.path.join(ct, str(env.sim.info.get("template", 9000)), "rootfs", "root")
        state = {}

        def root_of(sb):
            return os.path.join(ct, str(sb["vmid"]), "rootfs")

        def put_in_place():
            sb = c.call("sandbox.create", {})
            state["sb"] = sb
            path = os.path.join(root_of(sb), "root", NAME)
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo hi"})
            assert r["exit_code"] == 0 and r["stdout"] == "hi\n", r
            wait_until(lambda: pushed(env) or "exec helper: checking -> ready" in env.daemon_log()
                       or "exec helper: checking -> serving" in env.daemon_log(), "the helper")
            assert hashlib.sha256(open(path, "rb").read()).hexdigest() == DIGEST
            # A later exec runs through it: the exec's process is the helper.
            tag = os.urandom(6).hex()
            th = threading.Thread(target=lambda: env.client().call("sandbox.exec", {
                "id": sb["id"], "env": {"TAG": tag}, "command": "sleep 2; echo $$"}))
            th.start()
            wait_until(lambda: helper_of(tag), "an exec through the helper")
            th.join()

        def timeout_kills_everything():
            sb = state["sb"]
            tag = os.urandom(6).hex()
            r = c.call("sandbox.exec", {"id": sb["id"], "timeout_ms": 1000, "env": {"TAG": tag},
                                        "command": "(sleep 3300 &); (setsid sleep 3301 &); "
                                                   "sleep 3302 & echo started; sleep 3303"})
            assert r["timed_out"] is True and r["stdout"] == "started\n", r
            wait_until(lambda: not tagged(tag), "every process of the exec to end")
            # In the namespace: its own /proc, the command is pid 2 (pid 1 the helper's init).
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo $$; ls /proc | grep -c '^[0-9]'"})
            assert r["stdout"].split("\n")[0] == "2", r

        def helper_killed():
            sb = state["sb"]
            tag = os.urandom(6).hex()
            res = {}
            th = threading.Thread(target=lambda: res.update(r=env.client().call("sandbox.exec", {
                "id": sb["id"], "env": {"TAG": tag}, "timeout_ms": 120000,
                "command": "(sleep 3310 &); sleep 3311 & sleep 3312"})))
            th.start()
            wait_until(lambda: helper_of(tag) and len(tagged(tag)) >= 3, "the command's processes")
            os.kill(helper_of(tag), signal.SIGKILL)
            th.join(60)
            assert not th.is_alive()
            assert res["r"]["signal"] == "SIGKILL" and res["r"]["timed_out"] is False, res
            wait_until(lambda: not tagged(tag), "the namespace to end with the helper")
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo fine"})
            assert r["stdout"] == "fine\n", r

        def changed_binary():
            # A template whose /root holds another file at the helper's name: the sandbox's
            # first exec replaces it with the daemon's bytes.
            with open(os.path.join(tmpl_root, NAME), "wb") as f:
                f.write(b"#!/bin/sh\necho sandboxd-nsexec ok\n")
            os.chmod(os.path.join(tmpl_root, NAME), 0o755)
            n = pushed(env)
            try:
                sb = c.call("sandbox.create", {})
            finally:
                os.unlink(os.path.join(tmpl_root, NAME))
            path = os.path.join(root_of(sb), "root", NAME)
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo hi"})
            assert r["stdout"] == "hi\n", r
            wait_until(lambda: pushed(env) > n,
                       "the helper to be replaced")
            assert hashlib.sha256(open(path, "rb").read()).hexdigest() == DIGEST
            c.call("sandbox.destroy", {"id": sb["id"]})

        def fallback():
            # A directory at the helper's name: it cannot be put in place; the shell wrapper
            # runs every exec, and a timeout still kills what the command started.
            os.mkdir(os.path.join(tmpl_root, NAME))
            n = env.daemon_log().count("-> unavailable")
            try:
                sb = c.call("sandbox.create", {})
            finally:
                shutil.rmtree(os.path.join(tmpl_root, NAME))
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo hi"})
            assert r["stdout"] == "hi\n", r
            wait_until(lambda: env.daemon_log().count("-> unavailable") > n, "the fallback")
            tag = os.urandom(6).hex()
            res = {}
            th = threading.Thread(target=lambda: res.update(r=env.client().call("sandbox.exec", {
                "id": sb["id"], "timeout_ms": 3000, "env": {"TAG": tag},
                "command": "(sleep 3300 &); sleep 3302 & echo started; sleep 3303"})))
            th.start()
            wait_until(lambda: len(tagged(tag)) >= 3, "the command's processes")
            assert helper_of(tag) is None
            th.join(60)
            assert res["r"]["timed_out"] is True and res["r"]["stdout"] == "started\n", res
            wait_until(lambda: not tagged(tag), "every process of the exec to end")
            r = c.call("sandbox.exec", {"id": sb["id"], "argv": ["sh", "-c", "exit 7"]})
            assert r["exit_code"] == 7, r
            c.call("sandbox.destroy", {"id": sb["id"]})

        run([("helper put in place", put_in_place), ("timeout kills everything", timeout_kills_everything),
             ("helper killed", helper_killed), ("changed binary replaced", changed_binary),
             ("fallback to the shell wrapper", fallback)])


if __name__ == "__main__":
    main()
