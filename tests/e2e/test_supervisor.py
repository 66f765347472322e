#!/usr/bin/env python3
"""The exec supervisor (nsexec/serve.c) against the simulator: once the exec helper is in
place, each sandbox.exec without a user goes over a direct-tcpip channel to the
supervisor on the container's 127.0.0.1, which forks the command into a PID namespace of its own (the
command's parent is the supervisor's fork: its command line says --serve). Stdin, env, cwd,
exit codes, signals, output caps and the timeout behave as over an exec channel. A
supervisor that dies is started again (the next exec still works meanwhile); a uid other
than root in the container can neither read the supervisor's token nor run anything
without it; with sshd refusing the forward to the supervisor, or `[ssh] exec_supervisor =
false`, execs run over exec channels as before."""

import ctypes
import hashlib
import os
import signal
import socket
import struct
import time

from e2elib import BUILD, Env, run

HELPER = os.path.join(BUILD, "nsexec", "sandboxd-nsexec")
DIGEST = hashlib.sha256(open(HELPER, "rb").read()).hexdigest()
SOCK_DIR = f"root/.sandboxd-serve-{DIGEST[:16]}"
# The command line of the command's parent (the supervisor's fork, or the exec helper), read
# from the container's /proc (the simulator's containers give no namespace its own /proc).
PARENT = "read -r s </proc/self/stat; set -- ${s##*) }; tr '\\0' ' ' </proc/$2/cmdline"


def wait_until(pred, what, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return []


def supervisors(rootfs):
    """Host pids of the supervisor processes (not their per-exec forks) in a container."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or b"--serve" not in cmdline(p):
            continue
        try:
            if os.path.realpath(f"/proc/{p}/root") != os.path.realpath(rootfs):
                continue
            ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"--serve" not in cmdline(ppid):
            out.append(int(p))
    return out


def tagged(tag):
    """Host pids whose environment holds TAG=tag."""
    out = []
    needle = f"TAG={tag}".encode()
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and needle in open(f"/proc/{p}/environ", "rb").read().split(b"\0"):
                out.append(int(p))
        except OSError:
            pass
    return out


def ppid(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def via_supervisor(c, sb):
    r = c.call("sandbox.exec", {"id": sb["id"], "command": PARENT})
    assert r["exit_code"] == 0, r
    return "--serve" in r["stdout"]


def frame(t, payload=b""):
    return t + struct.pack(">I", len(payload)) + payload


def request_as(sup_pid, rootfs, uid, port, token, command):
    """In the supervisor's network namespace and root, as uid: sends a request carrying
    token to 127.0.0.1:port; returns the frame types that came back ("" when the connection
    closed without any), or "E<errno>" when the connection failed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        out = b""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/proc/{sup_pid}/ns/net", os.O_RDONLY)
            if libc.setns(fd, 0x40000000) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            os.chroot(rootfs)
            os.chdir("/")
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(30)
            s.connect((b"127.0.0.1", port))
            req = b"t" + token.encode() + b"\0m" + b"0" * 32 + b"\0a/bin/sh\0a-c\0a" + command.encode() + b"\0"
            s.sendall(frame(b"Q", req) + frame(b"E"))
            buf = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
            while len(buf) >= 5:
                n = struct.unpack(">I", buf[1:5])[0]
                out += buf[0:1]
                buf = buf[5 + n:]
        except OSError as e:
            out = b"E%d" % (e.errno or 0)
        except BaseException:  # noqa: B036 -- the child never returns into the harness
            out = b"F"
        finally:
            os.write(w, out)
            os._exit(0)
    os.close(w)
    res = b""
    while True:
        d = os.read(r, 4096)
        if not d:
            break
        res += d
    os.close(r)
    os.waitpid(pid, 0)
    return res.decode()


def main():
    with Env() as env:
        c = env.client()
        ct = os.path.join(env.sim.state_dir, "ct")
        state = {}

        def rootfs(sb):
            return os.path.join(ct, str(sb["vmid"]), "rootfs")

        def used():
            sb = c.call("sandbox.create", {})
            state["sb"] = sb
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo hi"})
            assert r["stdout"] == "hi\n", r
            wait_until(lambda: "-> serving" in env.daemon_log(), "the supervisor")
            assert len(supervisors(rootfs(sb))) == 1
            # The command's parent is the supervisor's fork; the command is pid 2.
            r = c.call("sandbox.exec", {"id": sb["id"], "command": PARENT + "; echo; echo $$"})
            assert "--serve" in r["stdout"] and r["stdout"].endswith("\n2\n"), r
            # A user's exec keeps the exec channel (the helper's own init).
            r = c.call("sandbox.exec", {"id": sb["id"], "user": "nobody", "command": PARENT})
            assert "--serve" not in r["stdout"] and "sandboxd-nsexec" in r["stdout"], r

        def semantics():
            sb = state["sb"]
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "cat; echo $FOO; pwd; echo e >&2; exit 3",
                                        "stdin": "in\n", "env": {"FOO": "bar baz"}, "cwd": "/tmp"})
            assert (r["stdout"], r["stderr"], r["exit_code"]) == ("in\nbar baz\n/tmp\n", "e\n", 3), r
            r = c.call("sandbox.exec", {"id": sb["id"], "argv": ["printf", "%s|", "a b", "c"]})
            assert r["stdout"] == "a b|c|" and r["exit_code"] == 0, r
            r = c.call("sandbox.exec", {"id": sb["id"], "argv": ["no-such-program"]})
            assert r["exit_code"] == 127, r
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "kill -TERM $$"})
            assert r["signal"] == "SIGTERM" and r["exit_code"] is None, r
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "head -c 300000 /dev/zero",
                                        "max_output_bytes": 1000})
            assert r["stdout_truncated"] is True and len(r["stdout"]) == 1000, r
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo $SANDBOXD_EXEC_ID"})
            assert len(r["stdout"].strip()) == 32, r
            # A timeout kills everything the command started, the background ones too.
            r = c.call("sandbox.exec", {"id": sb["id"], "timeout_ms": 1000,
                                        "command": "(setsid sleep 3401 &); sleep 3402 & echo s; sleep 3403"})
            assert r["timed_out"] is True and r["stdout"] == "s\n", r
            wait_until(lambda: not [p for p in os.listdir("/proc") if p.isdigit() and
                                    any(a.startswith(b"340") for a in cmdline(p))], "the sleeps to end")

        def past_execve_limits():
            """A command the supervisor's execve could not take (one string of 128 KiB or more)
            goes the exec channel's way and runs; one of 100 KiB still goes through the
            supervisor."""
            sb = state["sb"]
            for size, served in ((100 * 1024, True), (200 * 1024, False)):
                cmd = PARENT + "; : " + "x" * size + "; echo; echo done"
                r = c.call("sandbox.exec", {"id": sb["id"], "command": cmd})
                assert r["exit_code"] == 0 and r["stdout"].endswith("\ndone\n"), (size, r)
                assert ("--serve" in r["stdout"]) == served, (size, r["stdout"][:200])

        def cancelled():
            # The client goes away: the daemon's kill frame ends the command and what it
            # started in the background.
            sb = state["sb"]
            tag = os.urandom(6).hex()
            k = env.client()
            k.send("sandbox.exec", {"id": sb["id"], "env": {"TAG": tag},
                                    "command": "(sleep 3501 &); sleep 3502 & " + PARENT + "; sleep 3503"})
            wait_until(lambda: len(tagged(tag)) >= 3, "the command's processes")
            assert any(b"--serve" in cmdline(ppid(p)) for p in tagged(tag))
            k.close()
            wait_until(lambda: not tagged(tag), "every process of the exec to end")

        def root_only():
            sb = state["sb"]
            root = rootfs(sb)
            d = os.path.join(root, SOCK_DIR)
            assert oct(os.stat(d).st_mode & 0o777) == "0o700"
            assert oct(os.stat(os.path.join(d, "addr")).st_mode & 0o777) == "0o600"
            port, token = open(os.path.join(d, "addr")).read().split()
            assert 700 <= int(port) <= 999  # only root binds it: nobody else can stand in
            sup = supervisors(root)[0]
            # Another uid of the container cannot read the token...
            r = c.call("sandbox.exec", {"id": sb["id"], "user": "nobody", "command": f"cat /{SOCK_DIR}/addr"})
            assert r["exit_code"] != 0 and token not in r["stdout"], r
            # ...and without it a request runs nothing (its connection is closed at once).
            flag = os.path.join(root, "tmp", "ran")
            # (closed, or reset: the request's rest is never read)
            for t in ("0" * 32, token[:-1] + ("x" if token[-1] != "x" else "y")):
                got = request_as(sup, root, 65534, int(port), t, "touch /tmp/ran")
                assert got in ("", "E104"), got
            assert not os.path.exists(flag)
            # The same request with the token runs (the frames above were well formed).
            assert request_as(sup, root, 0, int(port), token, "touch /tmp/ran") == "X"
            assert os.path.exists(flag)
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo still"})
            assert r["stdout"] == "still\n", r

        def restarted():
            sb = state["sb"]
            old = supervisors(rootfs(sb))
            assert len(old) == 1
            os.kill(old[0], signal.SIGKILL)
            wait_until(lambda: not supervisors(rootfs(sb)), "the supervisor to end")
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo after"})
            assert r["stdout"] == "after\n" and r["exit_code"] == 0, r
            for _ in range(100):
                if via_supervisor(c, sb):
                    break
            else:
                raise AssertionError("no exec through a new supervisor")
            # (a check's --serve process may still be on its way out)
            wait_until(lambda: len(supervisors(rootfs(sb))) == 1, "one supervisor")
            new = supervisors(rootfs(sb))
            assert new != old, (old, new)
            c.call("sandbox.destroy", {"id": sb["id"]})

        run([("execs go through the supervisor", used), ("exec semantics", semantics),
             ("past execve's limits: the exec channel", past_execve_limits),
             ("a client gone kills the command", cancelled),
             ("only the token runs a command", root_only), ("a dead supervisor is restarted", restarted)])

    # sshd refuses the forward (no TCP forwarding): the exec channel, every time.
    with Env(sim_config={"sshd_tcp_forwarding": False}) as env:
        c = env.client()

        def refused():
            sb = c.call("sandbox.create", {})
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo hi"})
            assert r["stdout"] == "hi\n", r
            wait_until(lambda: "-> serving" in env.daemon_log(), "the supervisor")
            for _ in range(5):
                assert not via_supervisor(c, sb)
            assert "exec supervisor unreachable" in env.daemon_log()
            r = c.call("sandbox.exec", {"id": sb["id"], "timeout_ms": 1000, "command": "echo s; sleep 3404"})
            assert r["timed_out"] is True and r["stdout"] == "s\n", r

        run([("forward refused: exec channels", refused)])

    with Env(daemon_config={"ssh": {"exec_supervisor": "false"}}) as env:
        c = env.client()

        def off():
            sb = c.call("sandbox.create", {})
            c.call("sandbox.exec", {"id": sb["id"], "command": "true"})
            wait_until(lambda: "-> ready" in env.daemon_log(), "the helper")
            for _ in range(3):
                assert not via_supervisor(c, sb)
            assert "-> serving" not in env.daemon_log()

        run([("exec_supervisor = false", off)])


if __name__ == "__main__":
    main()
