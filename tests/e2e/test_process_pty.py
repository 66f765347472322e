#!/usr/bin/env python3
"""Background processes on a terminal (process.start with pty): the command sees a /dev/pts
terminal of the requested size, process.resize changes it (SIGWINCH), process.write reaches a program reading the terminal, the
exit status and signals come through, stderr stays empty; bad sizes are refused; a sandbox
that cannot make a terminal refuses pty with a documented error and starts nothing."""

import os
import subprocess

import e2elib
from e2elib import Env, data_of, expect_error, run


def read_all(c, sid, proc, stream="stdout"):
    """The whole stream, from 0 to its end (the process has to end)."""
    out, offset = b"", 0
    while True:
        r = c.call("process.read", {"id": sid, "process": proc, "stream": stream,
                                    "offset": offset, "wait_ms": 5000})
        out += data_of(r, "data")
        offset = r["next_offset"]
        if r["eof"]:
            return out


def read_until(c, sid, proc, want, limit=200):
    """Reads stdout until it holds want (at most limit long-polls)."""
    out, offset = b"", 0
    for _ in range(limit):
        r = c.call("process.read", {"id": sid, "process": proc, "offset": offset, "wait_ms": 2000})
        out += data_of(r, "data")
        offset = r["next_offset"]
        if want in out or r["eof"]:
            break
    assert want in out, out
    return out


def main():
    with Env() as env:
        c = env.client()
        sid = c.call("sandbox.create", {"ttl_s": 900})["id"]

        def terminal_size_and_input():
            # The prompt is printed only once the size is known; the input is read from the
            # terminal (not from a pipe: `read` on /dev/tty).
            cmd = ("tty; stty size; echo term=$TERM; echo ready; "
                   "read -r line </dev/tty; echo got-$line; exit 7")
            p = c.call("process.start", {"id": sid, "command": cmd, "pty": {"cols": 132, "rows": 41}})
            assert p["stdin"] is True and p["pty"] == {"cols": 132, "rows": 41}, p
            proc = p["process"]
            read_until(c, sid, proc, b"ready")
            w = c.call("process.write", {"id": sid, "process": proc, "data": "hello pty\n"})
            assert w["written"] == 10, w
            out = read_all(c, sid, proc)
            lines = out.decode().split("\r\n")
            assert lines[0].startswith("/dev/pts/"), out
            assert lines[1] == "41 132", out
            assert "term=xterm" in lines, out
            assert "got-hello pty" in lines, out
            assert read_all(c, sid, proc, "stderr") == b"", "stderr not empty"
            r = c.call("process.wait", {"id": sid, "process": proc, "timeout_ms": 10000})
            assert r["state"] == "exited" and r["exit_code"] == 7, r

        def argv_env_and_close():
            # argv and env on a terminal; closing stdin is end of file for the terminal's reader.
            p = c.call("process.start", {"id": sid, "argv": ["sh", "-c", "stty size; echo $TERM; cat"],
                                         "env": {"TERM": "vt100"}, "pty": {"cols": 2, "rows": 1000}})
            proc = p["process"]
            read_until(c, sid, proc, b"vt100")
            c.call("process.write", {"id": sid, "process": proc, "data": "abc\n", "close": True})
            out = read_all(c, sid, proc)
            assert out.startswith(b"1000 2\r\nvt100\r\n"), out
            assert out.count(b"abc") >= 1, out
            r = c.call("process.wait", {"id": sid, "process": proc, "timeout_ms": 10000})
            assert r["state"] == "exited" and r["exit_code"] == 0, r

        def kill_on_terminal():
            p = c.call("process.start", {"id": sid, "command": "echo up; sleep 1000",
                                         "pty": {"cols": 80, "rows": 24}})
            read_until(c, sid, p["process"], b"up")
            r = c.call("process.kill", {"id": sid, "process": p["process"], "signal": "SIGTERM"})
            assert r["state"] == "exited" and r["signal"] == "SIGTERM", r

        def resize():
            # process.resize sets the terminal's size and the foreground program gets SIGWINCH;
            # bad sizes, a process without a terminal and an ended one are refused.
            cmd = ("trap 'echo winch; stty size' WINCH; echo ready; "
                   "while :; do l=; read -r l </dev/tty; [ \"$l\" = q ] && exit 5; done")
            p = c.call("process.start", {"id": sid, "command": cmd, "pty": {"cols": 80, "rows": 24}})
            proc = p["process"]
            read_until(c, sid, proc, b"ready")
            r = c.call("process.resize", {"id": sid, "process": proc, "cols": 132, "rows": 7})
            assert r == {"process": proc, "cols": 132, "rows": 7, "state": "running",
                         "exit_code": None, "signal": None}, r
            read_until(c, sid, proc, b"winch\r\n7 132")
            for bad, param in (({"cols": 0, "rows": 7}, "cols"), ({"cols": 80, "rows": 1001}, "rows"),
                               ({"cols": 80}, "rows"), ({"rows": 8}, "cols"),
                               ({"cols": "80", "rows": 8}, "cols")):
                expect_error(c, "process.resize", {"id": sid, "process": proc, **bad}, -32602, param)
            c.call("process.write", {"id": sid, "process": proc, "data": "q\n"})
            r = c.call("process.wait", {"id": sid, "process": proc, "timeout_ms": 10000})
            assert r["exit_code"] == 5, r
            err = expect_error(c, "process.resize", {"id": sid, "process": proc, "cols": 9, "rows": 9},
                               -32002)
            assert err["data"]["reason"] == "the process has ended", err
            p = c.call("process.start", {"id": sid, "command": "sleep 30"})
            err = expect_error(c, "process.resize", {"id": sid, "process": p["process"],
                                                     "cols": 9, "rows": 9}, -32002)
            assert "without a terminal" in err["data"]["reason"], err
            assert err["data"]["process"] == p["process"], err
            c.call("process.kill", {"id": sid, "process": p["process"]})

        def sigint_reaches_the_command():
            # The command does not inherit SIGINT ignored (a `&` launch would give it that):
            # process.kill SIGINT ends it, with or without a terminal, and Ctrl-C on a terminal too.
            for pty in (None, {"cols": 80, "rows": 24}):
                prm = {"id": sid, "command": "grep SigIgn /proc/self/status; echo up; exec sleep 100"}
                if pty:
                    prm["pty"] = pty
                p = c.call("process.start", prm)
                out = read_until(c, sid, p["process"], b"up")
                assert b"SigIgn:\t0000000000000000" in out, out
                r = c.call("process.kill", {"id": sid, "process": p["process"], "signal": "SIGINT"})
                assert r["state"] == "exited" and r["signal"] == "SIGINT", r
            p = c.call("process.start", {"id": sid, "command": "echo up; exec sleep 100",
                                         "pty": {"cols": 80, "rows": 24}})
            read_until(c, sid, p["process"], b"up")
            c.call("process.write", {"id": sid, "process": p["process"], "data": "\x03"})
            r = c.call("process.wait", {"id": sid, "process": p["process"], "timeout_ms": 10000})
            assert r["state"] == "exited" and r["signal"] == "SIGINT", r

        def bad_sizes():
            for pty in ({"cols": 0, "rows": 24}, {"cols": 80, "rows": 1001}, {"cols": 80},
                        {"cols": 80, "rows": 24, "x": 1}, {"cols": "80", "rows": 24}, True, None):
                expect_error(c, "process.start", {"id": sid, "command": "true", "pty": pty},
                             -32602, "pty")

        def no_terminal_in_sandbox():
            # Without util-linux script the sandbox cannot make a terminal: refused, nothing
            # started; without pty the same sandbox still runs processes.
            before = len(c.call("process.list", {"id": sid})["processes"])
            r = c.call("sandbox.exec", {"id": sid, "command": "rm -f \"$(command -v script)\"; "
                                                            "command -v script || echo gone"})
            assert r["stdout"].strip() == "gone", r
            err = expect_error(c, "process.start", {"id": sid, "command": "true",
                                                    "pty": {"cols": 80, "rows": 24}}, -32602, "pty")
            assert "terminal" in err["data"]["reason"], err
            assert len(c.call("process.list", {"id": sid})["processes"]) == before
            p = c.call("process.start", {"id": sid, "command": "echo plain"})
            assert read_all(c, sid, p["process"]) == b"plain\n"

        def sandboxctl_start_pty():
            # Without a terminal of its own (pipes here), sandboxctl asks for 80x24.
            ctl = os.path.join(e2elib.BUILD, "clients", "cli", "sandboxctl")

            def sc(*args):
                return subprocess.run([ctl, "--socket", env.socket, *args], capture_output=True,
                                      stdin=subprocess.DEVNULL, timeout=120)
            r = sc("start", sid, "--pty", "--", "sh", "-c", "tty; stty size")
            assert r.returncode == 0, r
            proc = r.stdout.decode().strip()
            r = sc("logs", "-f", sid, proc)
            assert r.returncode == 0, r
            lines = r.stdout.decode().split("\r\n")
            assert lines[0].startswith("/dev/pts/") and lines[1] == "24 80", r.stdout

        def destroy():
            c.call("sandbox.destroy", {"id": sid})
            c.close()

        run([("a terminal of the requested size; input reaches the reader", terminal_size_and_input),
             ("argv, env and close on a terminal", argv_env_and_close),
             ("process.kill on a terminal", kill_on_terminal),
             ("process.resize", resize),
             ("SIGINT reaches the command; Ctrl-C on a terminal", sigint_reaches_the_command),
             ("bad pty sizes", bad_sizes),
             ("sandboxctl start --pty", sandboxctl_start_pty),
             ("a sandbox without a terminal refuses pty", no_terminal_in_sandbox),
             ("destroy", destroy)])


if __name__ == "__main__":
    main()
