#!/usr/bin/env python3
"""Background processes (process.*): a process outlives its client and a kill -9 of the daemon,
its output is read by offset with nothing lost or doubled, stdin is fed and closed, the whole
tree is killed; 50 processes in one sandbox; the limits and their errors; another uid can
neither see nor touch them; a long-poll returns when data arrives; sandbox.exec of a command
that leaves a background child returns when the command exits."""

import json
import os
import subprocess
import sys
import time

import e2elib
from e2elib import Env, RpcError, b64, data_of, expect_error, run
from test_recovery_util import kill9, launch

CHILD_PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def read_all(c, sid, proc, stream="stdout", offset=0, until_eof=True, wait_ms=2000):
    """Reads from offset to the end (until eof), checking that the offsets chain."""
    out = b""
    while True:
        r = c.call("process.read", {"id": sid, "process": proc, "stream": stream, "offset": offset,
                                    "wait_ms": wait_ms})
        assert r["offset"] == offset, (r, offset)
        data = data_of(r, "data")
        assert r["next_offset"] == offset + len(data), r
        out += data
        offset = r["next_offset"]
        if r["eof"] or (not until_eof and not data):
            return out, offset, r


def main():
    conf = {"sandbox": {"max_processes": "60", "process_output_max_bytes": "65536"}}
    with Env(daemon_config=conf) as env:
        c = env.client()
        sb = c.call("sandbox.create", {"ttl_s": 900})
        sid = sb["id"]

        def survives_kill9_nothing_lost():
            # Numbered lines, some before the restart and some after; stdin echoed to stdout.
            script = ("i=0; while [ $i -lt 200 ]; do echo line-$i; i=$((i+1)); done; "
                      "echo to-stderr >&2; "
                      "while read -r l; do echo got-$l; done; echo stdin-closed; sleep 1000")
            p = c.call("process.start", {"id": sid, "command": script, "stdin": True})
            proc = p["process"]
            assert p["state"] == "running" and p["stdin"] is True, p
            head, off, _ = read_all(c, sid, proc, until_eof=False)
            c.close()
            kill9(env)
            launch(env)
            c2 = env.client()
            lst = c2.call("process.list", {"id": sid})["processes"]
            assert [x["state"] for x in lst if x["process"] == proc] == ["running"], lst
            c2.call("process.write", {"id": sid, "process": proc, "data": "alpha\n"})
            c2.call("process.write", {"id": sid, "process": proc, "data_b64": b64(b"beta\n"),
                                      "close": True})
            # Everything from the offset reached before the restart, then all again from 0.
            want = b"".join(b"line-%d\n" % i for i in range(200)) + b"got-alpha\ngot-beta\nstdin-closed\n"
            rest = b""
            deadline = time.time() + 60
            while head + rest != want and time.time() < deadline:
                more, off, _ = read_all(c2, sid, proc, offset=off, until_eof=False)
                rest += more
            assert head + rest == want, (head + rest)[-300:]
            whole, _, _ = read_all(c2, sid, proc, until_eof=False)
            assert whole == want
            err, _, _ = read_all(c2, sid, proc, stream="stderr", until_eof=False)
            assert err == b"to-stderr\n", err
            expect_error(c2, "process.write", {"id": sid, "process": proc, "data": "x"}, -32002)
            k = c2.call("process.kill", {"id": sid, "process": proc, "signal": "SIGTERM"})
            assert k["sent"] == "SIGTERM", k
            w = c2.call("process.wait", {"id": sid, "process": proc, "timeout_ms": 20000})
            assert w["state"] == "exited" and w["signal"] == "SIGTERM" and w["exit_code"] is None, w
            # A process that has ended is left alone.
            k = c2.call("process.kill", {"id": sid, "process": proc})
            assert k["sent"] is None and k["state"] == "exited" and k["signal"] == "SIGTERM", k
            _, _, last = read_all(c2, sid, proc)
            assert last["eof"] and last["state"] == "exited", last
            return c2

        def exit_code_and_tree_kill(c2):
            p = c2.call("process.start", {"id": sid, "argv": ["sh", "-c", "echo out; exit 7"]})
            w = c2.call("process.wait", {"id": sid, "process": p["process"], "timeout_ms": 20000})
            assert w == {"process": p["process"], "state": "exited", "exit_code": 7, "signal": None}, w
            # Without cwd a process starts in the user's home, as an exec does.
            home = c2.call("sandbox.exec", {"id": sid, "command": "pwd"})["stdout"]
            p = c2.call("process.start", {"id": sid, "command": "pwd"})
            c2.call("process.wait", {"id": sid, "process": p["process"], "timeout_ms": 20000})
            out, _, _ = read_all(c2, sid, p["process"])
            assert out.decode() == home and ".sandboxd-proc" not in home, (out, home)
            # A tree: the command leaves children in their own process group; SIGKILL ends them all.
            p = c2.call("process.start", {"id": sid, "command":
                                          "setsid sleep 1001 & sleep 1002 & echo $$; wait"})
            c2.call("process.read", {"id": sid, "process": p["process"], "wait_ms": 10000})
            ps = lambda: c2.call("sandbox.exec", {"id": sid, "command": "nsenter -m -t 1 ps -o args"})["stdout"]
            assert "sleep 1001" in ps() and "sleep 1002" in ps()
            k = c2.call("process.kill", {"id": sid, "process": p["process"]})
            assert k["state"] == "exited" and k["signal"] == "SIGKILL", k
            left = ps()
            assert "sleep 1001" not in left and "sleep 1002" not in left, left

        def as_user(c2):
            c2.call("sandbox.exec", {"id": sid, "command":
                    "echo 'ann:x:1234:1234::/home/ann:/bin/sh' >>/etc/passwd && "
                    "mkdir -p /home/ann && chown 1234:1234 /home/ann"})
            before = len(c2.call("process.list", {"id": sid})["processes"])
            e = c2.error("process.start", {"id": sid, "user": "bob", "command": "touch /tmp/ran"})
            assert e.code == -32602 and e.data.get("param") == "user", e.err
            assert len(c2.call("process.list", {"id": sid})["processes"]) == before
            # The records stay root's: the process can neither write its exit status nor its pid.
            p = c2.call("process.start", {"id": sid, "user": "ann", "stdin": True, "command":
                        "id -u; echo $HOME; pwd; d=/root/.sandboxd-proc/$SANDBOXD_PROCESS; "
                        "(echo 0 >$d/exit) 2>/dev/null || echo denied; (echo 1 >$d/cpid) 2>/dev/null "
                        "|| echo denied; read l; echo got-$l >mine; cat mine; sleep 1000"})
            proc = p["process"]
            c2.call("process.write", {"id": sid, "process": proc, "data": "x\n"})
            out, deadline = b"", time.time() + 15
            while not out.endswith(b"got-x\n"):
                assert time.time() < deadline, out
                r = c2.call("process.read", {"id": sid, "process": proc, "offset": len(out), "wait_ms": 2000})
                out += data_of(r, "data")
            assert out == b"1234\n/home/ann\n/home/ann\ndenied\ndenied\ngot-x\n", out
            r = c2.call("sandbox.exec", {"id": sid, "command":
                        f"stat -c %u /proc/$(cat /root/.sandboxd-proc/{proc}/cpid) /home/ann/mine"})
            assert r["stdout"] == "1234\n1234\n", r
            k = c2.call("process.kill", {"id": sid, "process": proc})
            assert k["state"] == "exited" and k["signal"] == "SIGKILL", k
            # On a terminal too (the pty file runs the same switch).
            p = c2.call("process.start", {"id": sid, "user": "1234", "pty": {"cols": 80, "rows": 24},
                                          "command": "id -u; tty"})
            w = c2.call("process.wait", {"id": sid, "process": p["process"], "timeout_ms": 20000})
            out, _, _ = read_all(c2, sid, p["process"])
            assert w["exit_code"] == 0 and out.startswith(b"1234\r\n/dev/pts/"), (w, out)
            r = c2.call("sandbox.exec", {"id": sid, "command": "nsenter -m -t 1 ps -o args | grep '[s]leep 1000' || true"})
            assert r["stdout"] == "", r

        def stdin_closed_at_once(c):
            # data written and stdin closed right after the start, before the command may have
            # opened its stdin: the data must reach it and the command must see EOF
            for i in range(10):
                p = c.call("process.start", {"id": sid, "command": "cat", "stdin": True})
                c.call("process.write", {"id": sid, "process": p["process"], "data": f"v{i}\n",
                                         "close": True})
                w = c.call("process.wait", {"id": sid, "process": p["process"], "timeout_ms": 20000})
                assert w["state"] == "exited" and w["exit_code"] == 0, w
                out, _, _ = read_all(c, sid, p["process"])
                assert out == f"v{i}\n".encode(), out

        def long_poll_returns_on_data(c2):
            p = c2.call("process.start", {"id": sid, "command": "read -r x; echo \"[$x]\"; sleep 1000",
                                          "stdin": True})
            proc = p["process"]
            c3 = env.client()
            rid = c3.send("process.read", {"id": sid, "process": proc, "offset": 0, "wait_ms": 60000})
            time.sleep(0.5)  # the read is waiting in the container (no timing asserted)
            c2.call("process.write", {"id": sid, "process": proc, "data": "ping\n"})
            r = c3.wait(rid, timeout=120)
            assert data_of(r, "data") == b"[ping]\n" and not r["eof"], r
            c3.close()
            # wait_ms with nothing new and the process running: returns empty at the deadline.
            r = c2.call("process.read", {"id": sid, "process": proc, "offset": 7, "wait_ms": 200})
            assert r["next_offset"] == 7 and data_of(r, "data") == b"" and r["state"] == "running", r
            c2.call("process.kill", {"id": sid, "process": proc})

        def long_polls_capped(c2):
            # 16 long-polls at once per sandbox (the engine's count): the 17th is -32007, and
            # the count comes back as they end.
            proc = c2.call("process.start", {"id": sid, "command": "sleep 1000"})["process"]
            c3 = env.client()
            ids = [c3.send("process.wait", {"id": sid, "process": proc, "timeout_ms": 3000})
                   for _ in range(16)]
            e = c3.error("process.wait", {"id": sid, "process": proc, "timeout_ms": 3000})
            assert e.code == -32007 and "long-polls" in e.data["reason"], e.err
            for i in ids:
                r = c3.wait(i, timeout=120)
                assert r["state"] == "running", r
            r = c3.call("process.wait", {"id": sid, "process": proc, "timeout_ms": 100})
            assert r["state"] == "running", r
            c3.close()
            c2.call("process.kill", {"id": sid, "process": proc})

        def retention_drops_oldest(c2):
            # 64 KiB kept per stream (segments of 64 KiB): 400 KiB written, the start is dropped.
            p = c2.call("process.start", {"id": sid, "command":
                                          "head -c 409600 /dev/zero | tr '\\0' x; sleep 3"})
            w = c2.call("process.wait", {"id": sid, "process": p["process"], "timeout_ms": 30000})
            assert w["state"] == "exited" and w["exit_code"] == 0, w
            r = c2.call("process.read", {"id": sid, "process": p["process"], "offset": 0,
                                         "length": 1024})
            assert r["size"] == 409600, r
            assert r["available_from"] > 0 and r["offset"] == r["available_from"], r
            assert r["size"] - r["available_from"] >= 65536, r
            assert data_of(r, "data") == b"x" * 1024
            data, _, last = read_all(c2, sid, p["process"], offset=r["available_from"])
            assert data == b"x" * (409600 - r["available_from"]) and last["eof"], last

        def fifty_processes_and_limits(c2):
            before = len(c2.call("process.list", {"id": sid})["processes"])
            procs = [c2.call("process.start", {"id": sid, "argv": ["sh", "-c", f"echo p{i}; sleep 1000"]})["process"]
                     for i in range(50)]
            lst = c2.call("process.list", {"id": sid})["processes"]
            running = [x for x in lst if x["state"] == "running"]
            assert set(procs) <= {x["process"] for x in running}, lst
            assert len(lst) >= before + 50
            for i, pr in enumerate(procs):
                r = c2.call("process.read", {"id": sid, "process": pr, "wait_ms": 10000})
                assert data_of(r, "data") == f"p{i}\n".encode(), (i, r)
            # 60 running allowed: start until refused.
            extra = []
            err = None
            for _ in range(20):
                try:
                    extra.append(c2.call("process.start", {"id": sid, "command": "sleep 1000"})["process"])
                except RpcError as e:
                    err = e
                    break
            assert err is not None and err.code == -32003, err and err.err
            assert len(running) - len(procs) + len(procs) + len(extra) == 60, (len(running), len(extra))
            for pr in procs + extra:
                c2.call("process.kill", {"id": sid, "process": pr})
            c2.call("process.start", {"id": sid, "command": "true"})  # room again

        def bad_params(c2):
            expect_error(c2, "process.start", {"id": sid, "command": "x", "pty": {"cols": 0, "rows": 24}},
                         -32602, "pty")
            expect_error(c2, "process.start", {"id": sid, "command": "x" * 9000}, -32602, "command")
            expect_error(c2, "process.start", {"id": sid, "command": "true", "cwd": "/nonexistent"},
                         -32602, "cwd")
            expect_error(c2, "process.read", {"id": sid, "process": "pr-0000000000000000"}, -32602, "process")
            expect_error(c2, "process.read", {"id": sid, "process": "nope"}, -32602, "process")
            expect_error(c2, "process.read", {"id": sid, "process": "pr-0000000000000000",
                                              "wait_ms": 60001}, -32602, "wait_ms")
            p = c2.call("process.start", {"id": sid, "command": "echo abc"})
            c2.call("process.wait", {"id": sid, "process": p["process"]})
            r = c2.call("process.read", {"id": sid, "process": p["process"], "offset": 1, "length": 1})
            assert data_of(r, "data") == b"b" and r["next_offset"] == 2 and not r["eof"], r
            expect_error(c2, "process.read", {"id": sid, "process": p["process"], "offset": 5}, -32602, "offset")
            expect_error(c2, "process.write", {"id": sid, "process": p["process"], "data": "x"}, -32002)
            expect_error(c2, "process.kill", {"id": sid, "process": p["process"], "signal": "SIGBOGUS"},
                         -32602, "signal")

        def other_uid_cannot_touch(c2):
            p = c2.call("process.start", {"id": sid, "command": "sleep 1000"})
            child = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from e2elib import Client
c = Client(sys.argv[2], timeout=120)
codes = {}
for m, p in [("process.list", {"id": sys.argv[3]}),
             ("process.read", {"id": sys.argv[3], "process": sys.argv[4]}),
             ("process.write", {"id": sys.argv[3], "process": sys.argv[4], "data": "x"}),
             ("process.kill", {"id": sys.argv[3], "process": sys.argv[4]}),
             ("process.wait", {"id": sys.argv[3], "process": sys.argv[4], "timeout_ms": 0}),
             ("process.start", {"id": sys.argv[3], "command": "true"})]:
    try:
        c.call(m, p)
        codes[m] = "succeeded"
    except Exception as e:
        codes[m] = getattr(e, "code", str(e))
print(json.dumps(codes))
"""

            def drop():
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            r = subprocess.run([CHILD_PY, "-c", child, os.path.dirname(os.path.abspath(__file__)), env.socket,
                                sid, p["process"]], capture_output=True, text=True, timeout=300, preexec_fn=drop)
            assert r.returncode == 0, r.stderr
            codes = json.loads(r.stdout.strip().splitlines()[-1])
            assert set(codes.values()) == {-32001}, codes
            w = c2.call("process.wait", {"id": sid, "process": p["process"], "timeout_ms": 0})
            assert w["state"] == "running", w
            c2.call("process.kill", {"id": sid, "process": p["process"]})

        def exec_with_background_child(c2):
            r = c2.call("sandbox.exec", {"id": sid, "command": "sleep 4242 & echo started; exit 3",
                                         "timeout_ms": 30000})
            assert r["stdout"] == "started\n" and r["exit_code"] == 3 and not r["timed_out"], r
            ps = c2.call("sandbox.exec", {"id": sid, "command": "nsenter -m -t 1 ps -o args"})["stdout"]
            assert "sleep 4242" not in ps, ps

        def sandboxctl_commands(c2):
            ctl = os.path.join(e2elib.BUILD, "clients", "cli", "sandboxctl")

            def sc(*args, **kw):
                return subprocess.run([ctl, "--socket", env.socket, *args], capture_output=True, timeout=120, **kw)
            r = sc("exec", sid, "-u", "1234", "--", "id", "-u")
            assert r.returncode == 0 and r.stdout == b"1234\n", r
            r = sc("start", sid, "--user", "1234", "--attach", "--", "id", "-u")
            assert r.returncode == 0 and r.stdout == b"1234\n", r
            r = sc("exec", sid, "-u", "no-such-user", "--", "true")
            assert r.returncode != 0 and b"user" in r.stderr, r
            r = sc("start", sid, "--", "sh", "-c", "echo one; echo two >&2; sleep 1; echo three")
            assert r.returncode == 0, r.stderr
            proc = r.stdout.decode().strip()
            assert proc.startswith("pr-"), r.stdout
            r = sc("ps", sid)
            assert r.returncode == 0 and proc in r.stdout.decode(), r
            r = sc("logs", "-f", sid, proc)
            assert r.returncode == 0 and r.stdout == b"one\nthree\n", r
            r = sc("logs", "--stderr", sid, proc)
            assert r.returncode == 0 and r.stdout == b"two\n", r
            r = sc("ps", sid)
            line = [x for x in r.stdout.decode().splitlines() if x.startswith(proc)][0]
            assert "exited 0" in line, line
            p = c2.call("process.start", {"id": sid, "command": "sleep 1000"})
            r = sc("kill", sid, p["process"], "TERM")
            assert r.returncode == 0 and "exited SIGTERM" in r.stdout.decode(), r
            r = sc("kill", sid, "pr-0000000000000000")
            assert r.returncode == 2 and b"no such process" in r.stderr, r

        state = {}

        def first():
            state["c"] = survives_kill9_nothing_lost()

        tests = [("survives client, kill -9 and restart; nothing lost or doubled", first)]
        for name, fn in [("exit code and tree kill", exit_code_and_tree_kill),
                         ("as a user: id, home, records out of reach, kill", as_user),
                         ("stdin written and closed at once after the start", stdin_closed_at_once),
                         ("long-poll returns when data arrives", long_poll_returns_on_data),
                         ("long-polls per sandbox are capped", long_polls_capped),
                         ("retention drops the oldest bytes", retention_drops_oldest),
                         ("50 processes and the process limit", fifty_processes_and_limits),
                         ("bad params and states", bad_params),
                         ("another uid cannot see or touch them", other_uid_cannot_touch),
                         ("sandbox.exec returns with a background child", exec_with_background_child),
                         ("sandboxctl start, ps, logs, kill", sandboxctl_commands)]:
            tests.append((name, (lambda f: lambda: f(state["c"]))(fn)))

        def destroy():
            state["c"].call("sandbox.destroy", {"id": sid})
            state["c"].close()
        tests.append(("destroy", destroy))
        run(tests)


if __name__ == "__main__":
    main()
