#!/usr/bin/env python3
"""Transfers through descriptors passed on the socket (SCM_RIGHTS): 1 GiB each way with the
SHA-256 compared and the daemon's memory bounded, exec with stdin_fd/stdout_fd/stderr_fd,
bad indexes and directions refused, descriptors of failed requests closed (no leak in the
daemon), and sandboxctl put/get of files and folder trees through them."""

import collections
import hashlib
import json
import os
import socket
import stat
import subprocess
import tempfile
import threading
import time

from e2elib import BUILD, Env, RpcError, run

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")
GIB = 1 << 30
MIB = 1 << 20
RSS_GROWTH_MAX = 64 << 20  # what the daemon may grow by while 1 GiB moves


def call_fds(c, method, params, fds, timeout=600):
    """One request line sent with descriptors in the same sendmsg()."""
    i = next(c.ids)
    line = (json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode()
    with c.lock:
        n = socket.send_fds(c.sock, [line], fds)
        c.sock.sendall(line[n:])  # a long line: the rest after the descriptors
    return c.wait(i, timeout)


def error_fds(c, method, params, fds):
    try:
        r = call_fds(c, method, params, fds)
    except RpcError as e:
        return e
    raise AssertionError(f"{method} {params} succeeded: {r}")


def vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def reset_hwm(pid):
    # Writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS.
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def open_fds(pid):
    d = f"/proc/{pid}/fd"
    return sorted(os.readlink(os.path.join(d, n)) for n in os.listdir(d))


def make_big(path, size):
    """A file of size bytes that is not one repeated block, and its SHA-256."""
    h = hashlib.sha256()
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(size >> 20):
            b = i.to_bytes(8, "little") + block[8:]
            f.write(b)
            h.update(b)
    return h.hexdigest()


def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def main():
    # The sanitizers' quarantine keeps freed blocks (libssh allocates one per SFTP packet)
    # and would be counted as growth: keep it small so that RSS shows what is held.
    os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "detect_leaks=1") + \
        ":quarantine_size_mb=4:thread_local_quarantine_size_kb=64"
    # A short file timeout, to see the inactivity deadline fire (1 GiB still moves: it is
    # counted from the last byte moved, not from the start).
    with Env(daemon_config={"ssh": {"file_timeout_ms": "10000"}}) as env, tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        c = env.client()
        pid = env.proc.pid
        sb = c.call("sandbox.create", {})["id"]
        ctl_env = dict(os.environ, SANDBOXD_SOCKET=env.socket)

        def remote_sha(path):
            r = c.call("sandbox.exec", {"id": sb, "command": f"sha256sum {path}"})
            assert r["exit_code"] == 0, r
            return r["stdout"].split()[0]

        def ctl(*args, input=None, check=True):
            p = subprocess.run([SANDBOXCTL, *args], env=ctl_env, input=input,
                               capture_output=True, timeout=600)
            if check and p.returncode != 0:
                raise AssertionError(f"sandboxctl {args}: {p.returncode}\n{p.stderr.decode()}")
            return p

        def gib_each_way():
            src = os.path.join(tmp, "big")
            digest = make_big(src, GIB)
            reset_hwm(pid)
            base = vm_hwm(pid)
            with open(src, "rb") as f:
                r = call_fds(c, "file.write", {"id": sb, "path": "/root/big", "content_fd": 0,
                                               "mode": "0600"}, [f.fileno()])
            assert r["bytes"] == GIB, r
            assert remote_sha("/root/big") == digest
            grew_in = vm_hwm(pid) - base
            dst = os.path.join(tmp, "big.back")
            with open(dst, "wb") as f:
                r = call_fds(c, "file.read", {"id": sb, "path": "/root/big", "to_fd": 0}, [f.fileno()])
            assert r["bytes"] == GIB, r
            assert os.path.getsize(dst) == GIB and sha_file(dst) == digest
            grew = vm_hwm(pid) - base
            print(f"  daemon peak RSS growth: {grew_in >> 20} MiB in, {grew >> 20} MiB both ways")
            assert grew < RSS_GROWTH_MAX, grew
            os.unlink(dst)
            # A pipe as the source and a slice into a pipe as the sink.
            rd, wr = os.pipe()
            os.write(wr, b"through a pipe\n")
            os.close(wr)
            r = call_fds(c, "file.write", {"id": sb, "path": "/root/piped", "content_fd": 0}, [rd])
            os.close(rd)
            assert r["bytes"] == 15, r
            rd, wr = os.pipe()
            r = call_fds(c, "file.read", {"id": sb, "path": "/root/piped", "to_fd": 0,
                                          "offset": 10, "length": 4}, [wr])
            os.close(wr)
            assert r["bytes"] == 4 and os.read(rd, 100) == b"pipe", r
            os.close(rd)

        def bad_descriptors():
            before = open_fds(pid)
            rd, wr = os.pipe()
            e = error_fds(c, "file.write", {"id": sb, "path": "/root/x", "content_fd": 1}, [rd])
            assert e.code == -32602 and e.data["param"] == "content_fd", e.err
            e = error_fds(c, "file.write", {"id": sb, "path": "/root/x", "content_fd": 0}, [wr])
            assert e.code == -32602 and "reading" in e.data["reason"], e.err
            e = error_fds(c, "file.read", {"id": sb, "path": "/root/piped", "to_fd": 0}, [rd])
            assert e.code == -32602 and "writing" in e.data["reason"], e.err
            e = c.error("file.write", {"id": sb, "path": "/root/x", "content_fd": 0})
            assert e.code == -32602 and e.data["param"] == "content_fd", e.err
            e = error_fds(c, "file.write", {"id": sb, "path": "/root/x", "content_fd": 8}, [rd])
            assert e.code == -32602, e.err
            e = error_fds(c, "sandbox.exec", {"id": sb, "command": "cat", "stdin_fd": 0,
                                              "stdout_fd": 0}, [rd])
            assert e.code == -32602, e.err
            # Failed requests: the daemon closes what came with them.
            e = error_fds(c, "file.write", {"id": "sb-nope", "path": "/x", "content_fd": 0}, [rd])
            assert e.code == -32001, e.err
            e = error_fds(c, "no.such", {}, [rd, wr])
            assert e.code == -32601, e.err
            e = error_fds(c, "file.read", {"id": sb, "path": "/root/missing", "to_fd": 0}, [wr])
            assert e.code == -32009 and e.data["errno"] == "ENOENT", e.err
            e = error_fds(c, "file.write", {"id": sb, "path": "/nodir/x", "content_fd": 0,
                                            "make_parents": False}, [rd])
            assert e.code == -32009, e.err
            # A write end passed with requests that failed: once ours is closed the read
            # end sees EOF only if the daemon closed its copies too.
            os.close(wr)
            os.set_blocking(rd, False)
            assert os.read(rd, 1) == b""
            os.close(rd)
            # Sockets may come and go (SSH sessions); pipes must not stay. The daemon closes a
            # transfer's descriptor just after its reply, so one of the transfers before may
            # still show in `before`, and one of these may take a moment to go.
            want = collections.Counter(x for x in before if x.startswith("pipe:"))
            deadline = time.time() + 10
            while True:
                extra = collections.Counter(x for x in open_fds(pid) if x.startswith("pipe:"))
                extra.subtract(want)
                extra = +extra
                if not extra or time.time() > deadline:
                    break
                time.sleep(0.1)
            assert not extra, (before, open_fds(pid))

        def exec_descriptors():
            src = os.path.join(tmp, "in.txt")
            with open(src, "wb") as f:
                f.write(b"hello descriptors\n" * 100000)
            out = os.path.join(tmp, "out.txt")
            err_r, err_w = os.pipe()
            with open(src, "rb") as fi, open(out, "wb") as fo:
                r = call_fds(c, "sandbox.exec", {"id": sb, "command": "tr a-z A-Z; echo done >&2",
                                                 "stdin_fd": 0, "stdout_fd": 1, "stderr_fd": 2},
                             [fi.fileno(), fo.fileno(), err_w])
            os.close(err_w)
            assert r["exit_code"] == 0 and r["stdout_bytes"] == 1800000, r
            assert os.read(err_r, 100) == b"done\n"
            os.close(err_r)
            with open(out, "rb") as f:
                assert f.read() == b"HELLO DESCRIPTORS\n" * 100000
            # stdout into a descriptor, stderr captured; an exit status.
            rd, wr = os.pipe()
            r = call_fds(c, "sandbox.exec", {"id": sb, "command": "echo out; echo err >&2; exit 7",
                                             "stdout_fd": 0}, [wr])
            os.close(wr)
            assert r["exit_code"] == 7 and r["stderr"] == "err\n" and os.read(rd, 100) == b"out\n", r
            os.close(rd)
            # The exec timeout still applies.
            rd, wr = os.pipe()
            r = call_fds(c, "sandbox.exec", {"id": sb, "command": "sleep 30", "timeout_ms": 500,
                                             "stdin_fd": 0}, [rd])
            os.close(rd)
            os.close(wr)
            assert r["timed_out"] is True and r["exit_code"] is None, r
            # A client that goes away: its command is killed and its descriptors let go.
            c2 = env.client()
            in_r, in_w = os.pipe()
            out_r, out_w = os.pipe()
            line = {"jsonrpc": "2.0", "id": 1, "method": "sandbox.exec",
                    "params": {"id": sb, "command": "sleep 123456", "timeout_ms": 600000,
                               "stdin_fd": 0, "stdout_fd": 1}}
            socket.send_fds(c2.sock, [(json.dumps(line) + "\n").encode()], [in_r, out_w])
            os.close(in_r)
            os.close(out_w)
            count = "nsenter -m -t 1 sh -c \"grep -las '12345[6]' /proc/[0-9]*/cmdline\" | wc -l"
            for _ in range(100):
                if c.call("sandbox.exec", {"id": sb, "command": count})["stdout"] != "0\n":
                    break
                time.sleep(0.1)
            c2.close()
            for _ in range(100):
                if c.call("sandbox.exec", {"id": sb, "command": count})["stdout"] == "0\n":
                    break
                time.sleep(0.1)
            else:
                raise AssertionError("the command outlived its client")
            # The daemon let go of its copy of stdout: the pipe ends.
            assert os.read(out_r, 10) == b""
            os.close(out_r)
            os.close(in_w)

        def caps_and_stalls():
            # A pipe nobody feeds: the inactivity deadline ends the transfer with -32006.
            rd, wr = os.pipe()
            e = error_fds(c, "file.write", {"id": sb, "path": "/root/stalled", "content_fd": 0}, [rd])
            assert e.code == -32006 and "no byte moved" in e.data["reason"], e.err
            os.close(rd)
            os.close(wr)
            # No temporary file left: the error answers at the deadline, and the transfer's
            # worker removes its file as soon as it sees it (within a poll slice).
            for _ in range(50):
                r = c.call("sandbox.exec", {"id": sb, "command": "ls -a /root | grep -c stalled || true"})
                if r["stdout"] == "0\n":
                    break
                time.sleep(0.1)
            assert r["stdout"] == "0\n", r
            # 4 transfers per uid: a 5th is -32007; they finish when their pipes end.
            sbs = [sb] + [c.call("sandbox.create", {})["id"] for _ in range(4)]
            pipes = [os.pipe() for _ in range(5)]
            ids = []
            for i in range(5):
                line = {"jsonrpc": "2.0", "id": 1000 + i, "method": "file.write",
                        "params": {"id": sbs[i], "path": "/root/capped", "content_fd": 0}}
                with c.lock:
                    socket.send_fds(c.sock, [(json.dumps(line) + "\n").encode()], [pipes[i][0]])
                ids.append(1000 + i)
            try:
                c.wait(ids[4], 60)
                raise AssertionError("a 5th transfer ran")
            except RpcError as e:
                assert e.code == -32007 and "limit 4" in e.data["reason"], e.err
            for i in range(4):
                os.write(pipes[i][1], b"x")
                os.close(pipes[i][1])
                assert c.wait(ids[i], 60)["bytes"] == 1
            for rd, wr in pipes:
                os.close(rd)
            os.close(pipes[4][1])
            for other in sbs[1:]:
                c.call("sandbox.destroy", {"id": other})

        def cancelled_upload():
            # A client that hangs up cancels its upload: it stops, and its temporary file
            # goes (also when the cancel cut the file session in the middle of a write).
            c2 = env.client()
            rd, wr = os.pipe()
            stop = threading.Event()

            def feed():
                block = os.urandom(1 << 16)
                try:
                    while not stop.is_set():
                        os.write(wr, block)
                except OSError:
                    pass
                finally:
                    os.close(wr)

            feeder = threading.Thread(target=feed)
            feeder.start()
            line = {"jsonrpc": "2.0", "id": 1, "method": "file.write",
                    "params": {"id": sb, "path": "/root/cancelled", "content_fd": 0}}
            socket.send_fds(c2.sock, [(json.dumps(line) + "\n").encode()], [rd])
            os.close(rd)
            temps = "ls -a /root | grep -c '^.cancelled.sandboxd-' || true"
            for _ in range(200):
                if c.call("sandbox.exec", {"id": sb, "command": temps})["stdout"] != "0\n":
                    break
                time.sleep(0.05)
            else:
                raise AssertionError("the upload did not start")
            c2.close()
            feeder.join(30)  # the daemon let go of the pipe: the feeder gets EPIPE
            stop.set()
            assert not feeder.is_alive(), "the upload went on after its client went away"
            for _ in range(150):
                r = c.call("sandbox.exec", {"id": sb, "command": temps + "; ls /root"})
                if r["stdout"].startswith("0\n"):
                    break
                time.sleep(0.2)
            else:
                raise AssertionError(f"temporary file left behind: {r}")
            assert "cancelled" not in r["stdout"], r

        def long_command():
            # A 1 MiB heredoc: the command travels on its stdin, ahead of the request's own.
            head = "cat > /root/heredoc <<'SANDBOXD_EOF'\n"
            tail = "\nSANDBOXD_EOF\nsha256sum < /root/heredoc; cat"
            lines = "".join(f"line {i:07d} {'x' * 40}\n" for i in range(MIB // 53 + 1))
            body = lines[:MIB - len(head) - len(tail)]
            want = hashlib.sha256((body + "\n").encode()).hexdigest()
            cmd = head + body + tail
            assert len(cmd) == MIB, len(cmd)
            r = c.call("sandbox.exec", {"id": sb, "command": cmd, "stdin": "and its stdin"})
            assert r["exit_code"] == 0, (r["exit_code"], r["stderr"][:500])
            assert r["stdout"] == f"{want}  -\nand its stdin", r["stdout"][:500]
            # With stdin_fd: the pipe's data follows the command.
            rd, wr = os.pipe()
            os.write(wr, b"from a pipe\n")
            os.close(wr)
            r = call_fds(c, "sandbox.exec", {"id": sb, "command": cmd, "stdin_fd": 0}, [rd])
            os.close(rd)
            assert r["exit_code"] == 0 and r["stdout"] == f"{want}  -\nfrom a pipe\n", r["stdout"][:500]
            # Its timeout still kills everything it started.
            pad = "#" + "p" * (200 * 1024)
            r = c.call("sandbox.exec", {"id": sb, "timeout_ms": 2000, "command":
                                        f"setsid sleep 7654321 & sleep 7654320 {pad}"})
            assert r["timed_out"] is True, r
            count = "nsenter -m -t 1 sh -c \"grep -las '765432[0]\\|765432[1]' /proc/[0-9]*/cmdline\" | wc -l"
            for _ in range(50):
                if c.call("sandbox.exec", {"id": sb, "command": count})["stdout"] == "0\n":
                    break
                time.sleep(0.1)
            else:
                raise AssertionError("a long command's processes outlived its timeout")
            # Over the cap: refused.
            e = c.error("sandbox.exec", {"id": sb, "command": "#" * (2 * MIB + 1)})
            assert e.code == -32602 and e.data.get("param") == "command", e.err

        def ctl_put_get():
            small = os.path.join(tmp, "14mb")
            with open(small, "wb") as f:
                f.write(os.urandom(14_000_000))
            ctl("put", sb, small, "/root/14mb")
            assert remote_sha("/root/14mb") == sha_file(small)
            back = os.path.join(tmp, "14mb.back")
            ctl("get", sb, "/root/14mb", back)
            assert sha_file(back) == sha_file(small)
            # stdin and stdout
            ctl("put", sb, "-", "/root/stdin.txt", input=b"from stdin\n")
            p = ctl("get", sb, "/root/stdin.txt", "-")
            assert p.stdout == b"from stdin\n", p
            p = ctl("get", sb, "/root/nothere", os.path.join(tmp, "x"), check=False)
            assert p.returncode == 2 and b"No such file" in p.stderr, p
            assert not os.path.exists(os.path.join(tmp, "x")), "partial copy left"
            big = os.path.join(tmp, "big")
            ctl("put", sb, big, "/root/big2")
            assert remote_sha("/root/big2") == sha_file(big)
            c.call("sandbox.exec", {"id": sb, "command": "rm -f /root/big /root/big2"})
            os.unlink(big)

        def ctl_tree():
            top = os.path.join(tmp, "tree")
            os.makedirs(os.path.join(top, "a", "b"))
            os.makedirs(os.path.join(top, "empty"))
            with open(os.path.join(top, "a", "b", "run.sh"), "w") as f:
                f.write("#!/bin/sh\necho hi\n")
            os.chmod(os.path.join(top, "a", "b", "run.sh"), 0o750)
            with open(os.path.join(top, "secret"), "w") as f:
                f.write("s")
            os.chmod(os.path.join(top, "secret"), 0o600)
            os.chmod(os.path.join(top, "empty"), 0o700)
            os.symlink("a/b/run.sh", os.path.join(top, "link"))
            os.symlink("/nowhere", os.path.join(top, "dangling"))
            ctl("put", "-r", sb, top, "/root/tree")
            r = c.call("sandbox.exec", {"id": sb, "command":
                                        "cd /root/tree && stat -c '%n %a %F' secret empty a/b/run.sh"
                                        " && readlink link && readlink dangling && ./link"})
            assert r["exit_code"] == 0, r
            lines = r["stdout"].splitlines()
            assert lines[0] == "secret 600 regular file", lines
            assert lines[1] == "empty 700 directory", lines
            assert lines[2] == "a/b/run.sh 750 regular file", lines
            assert lines[3:] == ["a/b/run.sh", "/nowhere", "hi"], lines
            back = os.path.join(tmp, "tree.back")
            ctl("get", "-r", sb, "/root/tree", back)
            assert stat.S_IMODE(os.stat(os.path.join(back, "secret")).st_mode) == 0o600
            assert stat.S_IMODE(os.stat(os.path.join(back, "empty")).st_mode) == 0o700
            assert os.listdir(os.path.join(back, "empty")) == []
            assert stat.S_IMODE(os.stat(os.path.join(back, "a", "b", "run.sh")).st_mode) == 0o750
            assert os.readlink(os.path.join(back, "link")) == "a/b/run.sh"
            assert os.readlink(os.path.join(back, "dangling")) == "/nowhere"

        def ctl_exec():
            p = ctl("exec", sb, "--", "sh", "-c", "tr a-z A-Z; echo e >&2; exit 3",
                    input=b"abc\n", check=False)
            assert p.returncode == 3 and p.stdout == b"ABC\n" and p.stderr == b"e\n", p
            p = ctl("exec", sb, "--max-output", "10", "--", "sh", "-c", "seq 1 1000", check=False)
            assert p.returncode == 0 and p.stdout == b"1\n2\n3\n4\n5\n", p  # the command's status
            assert b"truncated" in p.stderr, p
            # A reader that goes away: no SIGPIPE death.
            p = subprocess.run(f"{SANDBOXCTL} exec {sb} -- seq 1 1000000 | head -1",
                               shell=True, env=ctl_env, capture_output=True, timeout=120)
            assert p.stdout == b"1\n", p

        def socket_and_fifo_sinks():
            # Whole writes into a stream socket (send without blocking) and a FIFO (opened
            # again without blocking): every byte arrives in order, read slowly at first.
            data = os.urandom(8 << 20)
            src = os.path.join(tmp, "sink-src")
            with open(src, "wb") as f:
                f.write(data)
            with open(src, "rb") as f:
                r = call_fds(c, "file.write", {"id": sb, "path": "/root/sink", "content_fd": 0},
                             [f.fileno()])
            assert r["bytes"] == len(data), r
            fifo = os.path.join(tmp, "sink-fifo")
            os.mkfifo(fifo)
            for kind in ("socket", "fifo"):
                if kind == "socket":
                    rd, wr = socket.socketpair()
                    rfd, wfd = rd.detach(), wr.detach()
                else:
                    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
                    wfd = os.open(fifo, os.O_WRONLY)
                    os.set_blocking(rfd, True)
                got = bytearray()

                def drain():
                    time.sleep(0.5)  # the daemon meets a full buffer first
                    while b := os.read(rfd, 1 << 16):
                        got.extend(b)

                t = threading.Thread(target=drain)
                t.start()
                r = call_fds(c, "file.read", {"id": sb, "path": "/root/sink", "to_fd": 0}, [wfd])
                os.close(wfd)
                t.join(120)
                os.close(rfd)
                assert r["bytes"] == len(data) and bytes(got) == data, (kind, r, len(got))
            os.unlink(fifo)

        run([("1 GiB each way through descriptors", gib_each_way),
             ("a socket and a FIFO as sinks", socket_and_fifo_sinks),
             ("bad descriptors, and no leak", bad_descriptors),
             ("exec with descriptors", exec_descriptors),
             ("inactivity deadline and transfer caps", caps_and_stalls),
             ("a cancelled upload leaves no temporary file", cancelled_upload),
             ("a 1 MiB command, with stdin and stdin_fd", long_command),
             ("sandboxctl put/get", ctl_put_get),
             ("sandboxctl put -r/get -r", ctl_tree),
             ("sandboxctl exec", ctl_exec)])


if __name__ == "__main__":
    main()
