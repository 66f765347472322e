#!/usr/bin/env python3
"""process.start with descriptors (stdin_fd, stdout_fd, stderr_fd): 64 MiB through stdin_fd
and back through stdout_fd with the SHA-256 compared and the daemon's memory bounded, a reader
slower than the process losing nothing past the output retention, stderr apart, a quiet process
still delivered, the client going away while the pump runs, the pump ending with the sandbox,
bad indexes and directions and a fifth pump of one uid refused with nothing launched and
the descriptors closed, the daemon's stop and kill -9 ending the pumps (one stuck on a full
pipe included) while the processes go on, and `sandboxctl start --attach`."""

import fcntl
import hashlib
import os
import select
import struct
import subprocess
import termios
import threading
import time

from e2elib import BUILD, Env, RpcError, data_of, run
from test_recovery_util import kill9, launch
from test_transfer import call_fds, error_fds, reset_hwm, vm_hwm

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")
MIB = 1 << 20
RSS_GROWTH_MAX = 32 << 20  # what the daemon may grow by while 64 MiB moves


def read_to_eof(fd, timeout=300):
    """Everything from fd until EOF (bounded: fails after timeout seconds without a byte)."""
    out = bytearray()
    while True:
        r, _, _ = select.select([fd], [], [], timeout)
        assert r, f"no byte and no EOF within {timeout} s (got {len(out)} bytes)"
        b = os.read(fd, 1 << 16)
        if not b:
            return bytes(out)
        out += b


def pipe_bytes(fd):
    """Bytes waiting in a pipe (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def drain(fd, h, stall_s=300):
    """Reads fd to its end, hashing what comes into h; returns the bytes read. A wait of
    stall_s with nothing to read fails."""
    n = 0
    while True:
        r, _, _ = select.select([fd], [], [], stall_s)
        assert r, f"stalled after {n} bytes"
        b = os.read(fd, 1 << 16)
        if not b:
            return n
        h.update(b)
        n += len(b)


def feeder(fd, blocks, h):
    """Writes the blocks into fd (hashing them), then closes it; runs in a thread."""
    try:
        for b in blocks:
            v = memoryview(b)
            while v:
                v = v[os.write(fd, v):]
            h.update(b)
    finally:
        os.close(fd)


def main():
    # The sanitizers' quarantine would count freed blocks as growth (see test_transfer.py).
    os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "detect_leaks=1") + \
        ":quarantine_size_mb=4:thread_local_quarantine_size_kb=64"
    # Retention of 1 MiB per stream: 64 MiB through `cat` only arrives whole because the pump
    # keeps what it has not copied yet.
    conf = {"sandbox": {"process_output_max_bytes": str(1 << 20)}}
    with Env(daemon_config=conf) as env:
        c = env.client()
        pid = env.proc.pid
        sid = c.call("sandbox.create", {"ttl_s": 900})["id"]

        def procs():
            return sorted(p["process"] for p in c.call("process.list", {"id": sid})["processes"])

        def wait_exit(proc):
            r = c.call("process.wait", {"id": sid, "process": proc, "timeout_ms": 60000})
            assert r["state"] == "exited", r
            return r

        def cat_64mib():
            in_r, in_w = os.pipe()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            block = os.urandom(MIB)
            blocks = [i.to_bytes(8, "little") + block[8:] for i in range(64)]
            sent = hashlib.sha256()
            reset_hwm(pid)
            base = vm_hwm(pid)
            t0 = time.monotonic()
            p = call_fds(c, "process.start",
                         {"id": sid, "command": "cat; echo cat-done >&2",
                          "stdin_fd": 0, "stdout_fd": 1, "stderr_fd": 2},
                         [in_r, out_w, err_w])
            for fd in (in_r, out_w, err_w):
                os.close(fd)  # the daemon holds its own copies
            assert p["state"] == "running" and p["stdin"] is True, p
            t = threading.Thread(target=feeder, args=(in_w, blocks, sent))
            t.start()
            got = hashlib.sha256()
            n = drain(out_r, got)
            t.join()
            took = time.monotonic() - t0
            err = read_to_eof(err_r)
            os.close(out_r)
            os.close(err_r)
            grew = vm_hwm(pid) - base
            print(f"  64 MiB through stdin_fd, cat and stdout_fd in {took:.1f} s "
                  f"({64 / took:.1f} MiB/s each way); daemon peak RSS growth {grew >> 20} MiB")
            assert n == 64 * MIB, n
            assert got.hexdigest() == sent.hexdigest()
            assert err == b"cat-done\n", err
            assert wait_exit(p["process"])["exit_code"] == 0
            assert grew < RSS_GROWTH_MAX, grew
            # process.read still works (the retained tail of the output).
            r = c.call("process.read", {"id": sid, "process": p["process"], "stream": "stderr"})
            assert data_of(r, "data") == b"cat-done\n", r

        def slow_reader_loses_nothing():
            # 8 MiB written at once while nobody reads the pipe: the output files hold 8 times
            # the retention before the process ends; the pump still delivers every byte.
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            script = ("head -c 8388608 /dev/urandom >/tmp/r8; sha256sum </tmp/r8 >&2; "
                      "cat /tmp/r8; rm -f /tmp/r8")
            p = call_fds(c, "process.start", {"id": sid, "command": script, "stdout_fd": 0,
                                              "stderr_fd": 1}, [out_w, err_w])
            os.close(out_w)
            os.close(err_w)
            assert wait_exit(p["process"])["exit_code"] == 0
            r = c.call("process.read", {"id": sid, "process": p["process"], "length": 1})
            assert r["available_from"] > 0, r  # retention dropped the start for process.read
            got = hashlib.sha256(read_to_eof(out_r)).hexdigest()
            want = read_to_eof(err_r).split()[0].decode()
            os.close(out_r)
            os.close(err_r)
            assert got == want, (got, want)

        def quiet_process():
            out_r, out_w = os.pipe()
            p = call_fds(c, "process.start",
                         {"id": sid, "command": "sleep 3; echo late; sleep 1; echo later",
                          "stdout_fd": 0}, [out_w])
            os.close(out_w)
            assert p["stdin"] is False, p
            assert read_to_eof(out_r) == b"late\nlater\n"
            os.close(out_r)
            assert wait_exit(p["process"])["exit_code"] == 0

        def client_goes_away():
            c2 = env.client()
            out_r, out_w = os.pipe()
            script = "i=0; while [ $i -lt 30 ]; do echo n-$i; i=$((i+1)); sleep 0.1; done"
            p = call_fds(c2, "process.start", {"id": sid, "command": script, "stdout_fd": 0},
                         [out_w])
            os.close(out_w)
            c2.close()
            # The pump goes on without its client, and the process too.
            got = read_to_eof(out_r)
            os.close(out_r)
            want = "".join(f"n-{i}\n" for i in range(30)).encode()
            assert got == want, got
            assert wait_exit(p["process"])["exit_code"] == 0
            r = c.call("process.read", {"id": sid, "process": p["process"], "offset": 0})
            assert data_of(r, "data") == want, r

        def refused_launch_nothing():
            before = procs()
            rd, wr = os.pipe()
            cases = [
                ({"stdout_fd": 3}, [wr], "stdout_fd"),        # missing index
                ({"stdout_fd": 0}, [rd], "stdout_fd"),        # not open for writing
                ({"stdin_fd": 0}, [wr], "stdin_fd"),          # not open for reading
                ({"stdin_fd": 1, "stdout_fd": 0}, [wr], "stdin_fd"),
                ({"stdin_fd": 0, "stdin": False}, [rd], "stdin_fd"),
                ({"stdout_fd": 0, "stderr_fd": 0}, [wr], "stdout_fd"),
            ]
            for extra, fds, param in cases:
                e = error_fds(c, "process.start", {"id": sid, "command": "echo no", **extra}, fds)
                assert e.code == -32602 and e.err["data"]["param"] == param, (extra, e.err)
            # A missing sandbox: the descriptors it named are closed too.
            e = error_fds(c, "process.start", {"id": "sb-doesnotexist00", "command": "echo",
                                               "stdout_fd": 0}, [wr])
            assert e.code != -32602, e.err
            os.close(wr)
            # The daemon kept no copy of the write end: the reader sees EOF at once.
            assert read_to_eof(rd, timeout=30) == b""
            os.close(rd)
            assert procs() == before, (before, procs())

        def slot_limit():
            # Each pump holds a transfer slot (4 per uid): a fifth start is -32007, launches
            # nothing and closes its descriptor; the slots come back as the pumps end.
            before = procs()
            pipes, started = [], []
            for _ in range(4):
                rd, wr = os.pipe()
                p = call_fds(c, "process.start", {"id": sid, "command": "sleep 60",
                                                  "stdout_fd": 0}, [wr])
                os.close(wr)
                pipes.append(rd)
                started.append(p["process"])
            rd, wr = os.pipe()
            e = error_fds(c, "process.start", {"id": sid, "command": "echo no", "stdout_fd": 0},
                          [wr])
            assert e.code == -32007, e.err
            os.close(wr)
            assert read_to_eof(rd, timeout=30) == b""
            os.close(rd)
            assert procs() == sorted(before + started), (before, started, procs())
            for proc in started:
                c.call("process.kill", {"id": sid, "process": proc})
            for rd in pipes:
                assert read_to_eof(rd, timeout=60) == b""
                os.close(rd)
            rd, wr = os.pipe()
            call_fds(c, "process.start", {"id": sid, "command": "echo back", "stdout_fd": 0}, [wr])
            os.close(wr)
            assert read_to_eof(rd) == b"back\n"
            os.close(rd)

        def pump_ends_with_sandbox():
            sb2 = c.call("sandbox.create", {"ttl_s": 900})["id"]
            out_r, out_w = os.pipe()
            call_fds(c, "process.start", {"id": sb2, "command": "echo up; sleep 1000",
                                          "stdout_fd": 0}, [out_w])
            os.close(out_w)
            assert os.read(out_r, 100) == b"up\n"
            c.call("sandbox.destroy", {"id": sb2})
            assert read_to_eof(out_r, timeout=120) == b""
            os.close(out_r)

        def sandboxctl_attach():
            ctl_env = dict(os.environ, SANDBOXD_SOCKET=env.socket)
            p = subprocess.run([SANDBOXCTL, "start", sid, "--attach", "--",
                                "sh", "-c", "tr a-z A-Z; echo oops >&2; exit 7"],
                               env=ctl_env, input=b"hello attach\n", capture_output=True,
                               timeout=300)
            assert p.returncode == 7, (p.returncode, p.stderr)
            assert p.stdout == b"HELLO ATTACH\n", p.stdout
            assert p.stderr == b"oops\n", p.stderr
            p = subprocess.run([SANDBOXCTL, "start", sid, "-a", "--", "sh", "-c", "kill -TERM $$"],
                               env=ctl_env, stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=300)
            assert p.returncode == 128 + 15, (p.returncode, p.stderr)

        def daemon_stop_ends_pump():
            # The pump ends with the daemon, by SIGTERM (a clean exit, its descriptors closed)
            # or kill -9; either way the process keeps running with its stdin still open (the
            # pump's end is not the input's end), and the next daemon reaches it by offset.
            nonlocal c
            script = 'while read -r l; do echo "got $l"; done; echo stdin-ended; sleep 1000'
            for how in ("SIGTERM", "kill -9"):
                in_r, in_w = os.pipe()
                out_r, out_w = os.pipe()
                p = call_fds(c, "process.start", {"id": sid, "command": script, "stdin_fd": 0,
                                                  "stdout_fd": 1}, [in_r, out_w])
                os.close(in_r)
                os.close(out_w)
                os.write(in_w, b"a\n")
                assert os.read(out_r, 100) == b"got a\n"
                if how == "SIGTERM":
                    # A second pump stuck on a pipe nobody reads (full) must not hold the stop.
                    full_r, full_w = os.pipe()
                    # Bursts larger than the room left, so that a plain write into the full
                    # pipe would block in the kernel, out of reach of the stop.
                    full_cmd = ("i=0; while [ $i -lt 60 ]; do head -c 40001 /dev/zero; "
                                "sleep 0.2; i=$((i+1)); done; sleep 1000")
                    call_fds(c, "process.start", {"id": sid, "command": full_cmd,
                                                  "stdout_fd": 0}, [full_w])
                    os.close(full_w)
                    for _ in range(1200):  # until the pipe is nearly full (bounded: 60 s)
                        if pipe_bytes(full_r) >= 60000:
                            break
                        time.sleep(0.05)
                    time.sleep(1)  # the pump meets the full pipe
                    assert pipe_bytes(full_r) >= 60000, pipe_bytes(full_r)
                c.close()
                if how == "SIGTERM":
                    rc = env.stop_daemon()
                    assert rc == 0, (rc, env.daemon_log()[-3000:])
                    assert read_to_eof(out_r, timeout=60) == b""
                    os.close(full_r)
                else:
                    kill9(env)
                    assert read_to_eof(out_r, timeout=60) == b""  # the daemon's copy is gone
                os.close(out_r)
                os.close(in_w)
                launch(env)
                c = env.client()
                proc = p["process"]
                r = c.call("process.wait", {"id": sid, "process": proc, "timeout_ms": 0})
                assert r["state"] == "running", (how, r)
                w = c.call("process.write", {"id": sid, "process": proc, "data": "b\n",
                                             "close": True})
                assert w["closed"] is True, w
                out = b""
                while not out.endswith(b"stdin-ended\n"):
                    r = c.call("process.read", {"id": sid, "process": proc, "offset": len(out),
                                                "wait_ms": 5000})
                    assert r["next_offset"] > len(out), (how, out, r)
                    out += data_of(r, "data")
                assert out == b"got a\ngot b\nstdin-ended\n", (how, out)
                c.call("process.kill", {"id": sid, "process": proc})

        run([
            ("refused_launch_nothing", refused_launch_nothing),
            ("quiet_process", quiet_process),
            ("slow_reader_loses_nothing", slow_reader_loses_nothing),
            ("cat_64mib", cat_64mib),
            ("client_goes_away", client_goes_away),
            ("slot_limit", slot_limit),
            ("pump_ends_with_sandbox", pump_ends_with_sandbox),
            ("sandboxctl_attach", sandboxctl_attach),
            ("daemon_stop_ends_pump", daemon_stop_ends_pump),  # last: restarts the daemon
        ])


if __name__ == "__main__":
    main()
