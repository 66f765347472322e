#!/usr/bin/env python3
"""sandboxctl as a terminal, against pve-sim + sandboxd, run under a real pseudo-terminal:
`exec --tty` puts the local terminal in raw mode (a typed key is echoed once, by the remote
terminal) and restores it on every way out; the remote terminal has the local window's size
and follows a resize (TIOCSWINSZ + SIGWINCH); Ctrl-C reaches the remote program as a key
(exit 130: 128 + SIGINT, the remote status); SIGTERM, SIGHUP and a hang-up of the local
terminal end the remote process; the exit status is the remote command's; `start --pty
--attach` does the same. And the rest of the CLI's manners: every command's --help, `logs -f`
exiting with the process's status, `put -r` saying what it wrote, `--max-output` keeping the
command's status."""

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import tempfile
import termios
import time

from clientlib import SANDBOXCTL, Env, run


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Term:
    """sandboxctl ARGS on a new pseudo-terminal, as its controlling terminal (stdin, stdout and
    stderr), of rows x cols; the test types into the master side and reads what it shows."""

    def __init__(self, socket, *args, rows=24, cols=80):
        self.master, self.slave = os.openpty()
        set_size(self.slave, rows, cols)
        self.mode = termios.tcgetattr(self.slave)
        self.out = b""

        def child_setup():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen([SANDBOXCTL, "--socket", socket, *args], stdin=self.slave,
                                     stdout=self.slave, stderr=self.slave,
                                     preexec_fn=child_setup)

    def read(self, timeout=0.2):
        r, _, _ = select.select([self.master], [], [], timeout)
        if r:
            try:
                self.out += os.read(self.master, 65536)
            except OSError:  # EIO: every slave descriptor is closed
                time.sleep(timeout)
        return self.out

    def expect(self, want, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if want in self.read():
                return self.out
        raise AssertionError(f"{want!r} not shown: {self.out!r}")

    def type(self, data):
        os.write(self.master, data)

    def local_mode(self):
        return termios.tcgetattr(self.slave)

    def raw(self):
        m = self.local_mode()
        return not (m[3] & (termios.ECHO | termios.ICANON | termios.ISIG))

    def wait(self, timeout=60):
        deadline = time.time() + timeout
        while self.proc.poll() is None and time.time() < deadline:
            self.read(0.1)
        if self.proc.poll() is None:
            self.proc.kill()
            raise AssertionError(f"sandboxctl did not end: {self.out!r}")
        self.read(0.05)
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


def main():
    with Env() as env:
        c = env.client()
        sid = c.call("sandbox.create", {"ttl_s": 900})["id"]

        def ctl(*args, **kw):
            return subprocess.run([SANDBOXCTL, "--socket", env.socket, *args], capture_output=True,
                                  timeout=120, **kw)

        def running():
            return [p for p in c.call("process.list", {"id": sid})["processes"]
                    if p["state"] == "running"]

        def gone(timeout=20):
            deadline = time.time() + timeout
            while running() and time.time() < deadline:
                time.sleep(0.2)
            return not running()

        def raw_mode_and_echo_once():
            t = Term(env.socket, "exec", "-t", sid, "--", "sh", "-c",
                     "echo ready; read -r l; echo \"got:$l\"; exit 3")
            try:
                t.expect(b"ready")
                assert t.raw(), t.local_mode()
                t.type(b"x")
                t.expect(b"x", 10)
                time.sleep(1)
                t.read()
                after = t.out.split(b"ready", 1)[1]
                assert after.count(b"x") == 1, t.out  # echoed by the remote terminal only
                t.type(b"\x1b[A\x7fy\r")  # ESC passes through; DEL edits on the remote side
                t.expect(b"got:x\x1b[y\r\n")
                assert t.wait() == 3, t.out
                assert t.local_mode() == t.mode, "local terminal not restored"
            finally:
                t.close()

        def size_and_resize():
            t = Term(env.socket, "exec", "--tty", sid, "--", "sh", "-c",
                     "stty size; trap 'stty size' WINCH; echo ready; "
                     "while :; do sleep 0.1; done", rows=33, cols=111)
            try:
                t.expect(b"33 111\r\n")
                t.expect(b"ready")
                set_size(t.master, 20, 70)
                os.kill(t.proc.pid, signal.SIGWINCH)
                t.expect(b"20 70\r\n", 30)
                t.type(b"\x03")
                assert t.wait() == 130, t.out
                assert t.local_mode() == t.mode
            finally:
                t.close()

        def ctrl_c_stops_sleep():
            t = Term(env.socket, "exec", "-t", sid, "--", "sh", "-c", "echo ready; exec sleep 100")
            try:
                t.expect(b"ready")
                time.sleep(0.5)
                t0 = time.time()
                t.type(b"\x03")
                # 130 = 128 + SIGINT: the remote status, as a local shell would report it
                assert t.wait(30) == 130, t.out
                assert time.time() - t0 < 20
                assert gone(), running()
                assert t.local_mode() == t.mode
            finally:
                t.close()

        def ended_with_sandboxctl():
            for how in ("SIGTERM", "SIGHUP", "hang-up"):
                t = Term(env.socket, "exec", "-t", sid, "--", "sh", "-c",
                         "echo ready; exec sleep 100")
                try:
                    t.expect(b"ready")
                    assert len(running()) == 1, running()
                    if how == "hang-up":
                        os.close(t.master)
                        t.master = os.open("/dev/null", os.O_RDONLY)
                    else:
                        t.proc.send_signal(getattr(signal, how))
                    rc = t.wait(30)
                    assert rc == 128 + signal.SIGHUP or rc == 128 + signal.SIGKILL, (how, rc, t.out)
                    assert gone(), (how, running())
                    if how != "hang-up":
                        assert t.local_mode() == t.mode, how
                finally:
                    t.close()

        def start_pty_attach():
            t = Term(env.socket, "start", sid, "--pty", "--attach", "--", "sh", "-c",
                     "stty size; read -r l; echo \"got:$l\"; exit 4", rows=10, cols=50)
            try:
                t.expect(b"10 50\r\n")
                assert t.raw()
                t.type(b"hi\r")
                t.expect(b"got:hi")
                assert t.out.count(b"hi") == 2, t.out  # the echo, then got:hi
                assert t.wait() == 4, t.out
                assert t.local_mode() == t.mode
            finally:
                t.close()

        def tty_without_terminal():
            # Pipes: no raw mode; the end of stdin is the end of the terminal's input.
            r = ctl("exec", "-t", sid, "--", "sh", "-c", "stty size; cat; exit 6",
                    input=b"piped\n")
            assert r.returncode == 6, r
            assert b"24 80" in r.stdout and b"piped" in r.stdout, r
            r = ctl("exec", "-t", sid, "--timeout", "1500", "--", "sleep", "100",
                    stdin=subprocess.DEVNULL)
            assert r.returncode == 124 and b"timed out" in r.stderr, r
            assert gone(), running()

        def old_timeout_flag():
            r = ctl("exec", sid, "-t", "5000", "--", "true")
            assert r.returncode == 64 and b"--timeout" in r.stderr, r
            r = ctl("exec", sid, "--tty", "--max-output", "5", "--", "true")
            assert r.returncode == 64 and b"--max-output" in r.stderr, r
            r = ctl("exec", sid, "--timeout", "5000", "--", "sh", "-c", "exit 9")
            assert r.returncode == 9, r

        def per_command_help():
            for cmd in ("status", "create", "resize", "list", "show", "exec", "put", "get", "ls",
                        "stat", "rm", "mkdir", "mv", "internet", "renew", "destroy", "ps", "start",
                        "logs", "kill", "call", "metrics", "events"):
                r = subprocess.run([SANDBOXCTL, "--socket", "/nonexistent", cmd, "--help"],
                                   capture_output=True, timeout=10)
                assert r.returncode == 0, (cmd, r)
                text = r.stdout.decode()
                assert text.startswith(f"Usage: sandboxctl {cmd}"), (cmd, text)
                assert r.stderr == b"", (cmd, r)
            r = ctl("exec", "--help")
            assert b"--tty" in r.stdout and b"--timeout" in r.stdout, r
            # after --, --help is the command's
            r = ctl("exec", sid, "--", "echo", "--help")
            assert r.returncode == 0 and r.stdout == b"--help\n", r

        def logs_follow_status():
            r = ctl("start", sid, "--", "sh", "-c", "echo hi; sleep 1; exit 7")
            proc = r.stdout.decode().strip()
            r = ctl("logs", "-f", sid, proc)
            assert r.returncode == 7 and r.stdout == b"hi\n", r
            r = ctl("logs", sid, proc)  # without -f: 0 as before
            assert r.returncode == 0, r
            r = ctl("start", sid, "--", "sh", "-c", "kill -TERM $$")
            r = ctl("logs", "-f", sid, r.stdout.decode().strip())
            assert r.returncode == 128 + signal.SIGTERM, r

        def put_tree_report():
            with tempfile.TemporaryDirectory() as d:
                os.makedirs(os.path.join(d, "a", "b"))
                open(os.path.join(d, "one"), "wb").write(b"x" * 1000)
                open(os.path.join(d, "a", "two"), "wb").write(b"y" * 24)
                open(os.path.join(d, "a", "b", "three"), "wb").write(b"")
                r = ctl("put", "-r", sid, d, "/root/tree")
                assert r.returncode == 0, r
                assert r.stderr == b"3 files, 3 folders, 1024 bytes written\n", r
                r = ctl("put", "-r", "-q", sid, d, "/root/tree2")
                assert r.returncode == 0 and r.stderr == b"", r
            r = ctl("exec", sid, "--", "sh", "-c", "wc -c </root/tree/one; ls /root/tree2/a/b")
            assert r.stdout == b"1000\nthree\n", r

        def max_output_keeps_status():
            r = ctl("exec", sid, "--max-output", "3", "--", "sh", "-c", "echo 123456; exit 5")
            assert r.returncode == 5, r
            assert r.stdout == b"123", r
            assert b"truncated" in r.stderr and b"3 bytes" in r.stderr, r
            r = ctl("exec", sid, "--max-output", "100", "--", "sh", "-c", "echo 12; exit 0")
            assert r.returncode == 0 and r.stderr == b"", r

        def destroy():
            c.call("sandbox.destroy", {"id": sid})
            c.close()

        run([("raw mode, one echo, ESC, exit status, mode restored", raw_mode_and_echo_once),
             ("the local window's size, and a resize", size_and_resize),
             ("Ctrl-C stops a remote sleep", ctrl_c_stops_sleep),
             ("SIGTERM, SIGHUP, hang-up end the remote process", ended_with_sandboxctl),
             ("start --pty --attach", start_pty_attach),
             ("exec --tty without a local terminal; --timeout", tty_without_terminal),
             ("-t is --tty, --timeout has its long form only", old_timeout_flag),
             ("every command's --help", per_command_help),
             ("logs -f exits with the process's status", logs_follow_status),
             ("put -r reports what it wrote", put_tree_report),
             ("--max-output keeps the command's status", max_output_keeps_status),
             ("destroy", destroy)])


if __name__ == "__main__":
    main()
