#!/usr/bin/env python3
"""Stress: connection floods and protocol abuse against a sandboxd without Proxmox.

Each case attacks its own daemon (started like tests/daemon/daemon_test.py does, with the
test hooks on), then checks that it still answers daemon.status and that the memory its
connections hold by its own accounting (daemon.status memory.bytes: partial lines, replies
not yet read) and its open descriptors came back to within a small bound of what they
were before the attack, and that the accounting never passed memory_budget. The
resident memory (VmRSS) is printed, not bounded: what the allocator keeps cached after
a burst depends on the machine's load, and leaks are LeakSanitizer's job (the daemon
must exit 0). Repeated attacks are measured from after their first round, and the
daemon is given up to 10 s to come back. A daemon that died is counted, restarted, and
the case fails.

Usage: test_conn.py [CASE ...]   (default: every case; the daemon binary is
$SANDBOXD_BUILD_ROOT/daemon/sandboxd, by default build/ in the source tree)
"""
import json
import os
import resource
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("SANDBOXD_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("SANDBOXD_BUILD_ROOT", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "daemon"))

import daemon_test  # noqa: E402
from daemon_test import Client, check, rss_kib  # noqa: E402

MAX_REQUEST = 65536
INFLIGHT = 32
CONFIG = f"max_request_bytes = {MAX_REQUEST}\nmax_inflight_per_connection = {INFLIGHT}\n"
MEM_SLACK = 64 * 1024  # bytes accounted: a connection or two still closing
RECOVER_S = 10
DAEMON_ENV = {"ASAN_OPTIONS": ":".join(filter(None, [
    os.environ.get("ASAN_OPTIONS"), "quarantine_size_mb=4",
    "allocator_release_to_os_interval_ms=500"]))}
FD_SLACK = 2
REPEATS = 20
CASES = {}


def case(fn):
    CASES[fn.__name__[len("case_"):]] = fn
    return fn


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Target:
    """The daemon under attack; restarted (and the death counted) when it dies."""

    def __init__(self):
        self.d = None
        self.deaths = 0
        self.start()

    def start(self):
        self.d = daemon_test.Daemon(config=CONFIG, env=DAEMON_ENV, args=("--log-level", "info"))

    def alive(self):
        return self.d.proc.poll() is None

    def died(self):
        """After an attack: True (and a fresh daemon) when it died."""
        if self.alive():
            return False
        self.deaths += 1
        lines = self.d.logtext().splitlines()
        why = [x for x in lines if "Assertion" in x or "ERROR" in x or "runtime error" in x]
        print(f"  daemon died (status {self.d.proc.returncode}): "
              f"{(why or lines or ['no log'])[-1][:200]}")
        self.d.logf.close()
        subprocess.run(["rm", "-rf", self.d.dir])
        self.start()
        return True

    @property
    def sock(self):
        return self.d.sock

    @property
    def pid(self):
        return self.d.proc.pid

    def connections(self):
        """The daemon's connection count (the asking one included), or None
        while a connection cap refuses the question."""
        c = Client(self.sock, timeout=10)
        c.request("daemon.status", id="count")
        m = c.recv()
        c.close()
        check(m is not None, "connection closed without a reply to daemon.status")
        if m.get("id") is None and m.get("error", {}).get("code") == -32007:
            return None
        check("result" in m, f"daemon.status failed: {m}")
        return m["result"]["connections"]

    def settle(self, timeout=10):
        """Waits until the daemon counts only the asking connection."""
        deadline = time.time() + timeout
        n = None
        while time.time() < deadline:
            n = self.connections()
            if n == 1:
                return
            time.sleep(0.05)
        raise AssertionError(f"daemon still counts {n} connections after {timeout}s")

    def memory(self):
        """daemon.status memory: {"bytes", "peak", "budget"} (the asking connection's
        own buffers included)."""
        c = Client(self.sock, timeout=10)
        m = c.call("daemon.status")
        c.close()
        check("result" in m and "memory" in m["result"], f"daemon.status: {m}")
        return m["result"]["memory"]

    def footprint(self):
        """(bytes the connections hold, open descriptors, VmRSS in KiB) once the daemon
        counts only the asking connection."""
        self.settle()
        return self.memory()["bytes"], fd_count(self.pid), rss_kib(self.pid)

    def stop(self):
        if self.d and self.alive():
            self.d.stop()


def print_memory(pid):
    """What the daemon's resident memory is made of (anonymous, file, shared) and its
    largest resident mappings, so that a failed bound says where the memory went."""
    with open(f"/proc/{pid}/status") as f:
        print("  " + " ".join(x.split(":")[0] + "=" + x.split()[1] for x in f
                              if x.startswith(("RssAnon", "RssFile", "RssShmem", "Threads"))))
    maps, cur = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if "-" in line.split()[0] and not line.split()[0].endswith(":"):
                cur = line.split()
            elif line.startswith("Rss:") and cur:
                maps.append((int(line.split()[1]), cur[0], cur[-1] if len(cur) > 5 else ""))
    for kib, rng, name in sorted(maps, reverse=True)[:6]:
        print(f"    {kib} KiB {rng} {name}")


def check_recovered(t, before):
    """The daemon answers, and its memory and descriptors come back near `before`
    within RECOVER_S seconds."""
    check(t.alive(), "daemon died")
    deadline = time.time() + RECOVER_S
    t0 = time.time()
    while True:
        mem, fds, rss = t.footprint()
        if (mem - before[0] <= MEM_SLACK and fds - before[1] <= FD_SLACK) \
                or time.time() > deadline:
            break
        time.sleep(0.5)
    peak = t.memory()
    print(f"  held {before[0]} -> {mem} bytes (peak {peak['peak']}), fds {before[1]} -> {fds}, "
          f"rss {before[2]} -> {rss} KiB "
          f"(after {time.time() - t0:.1f}s)")
    if mem - before[0] > MEM_SLACK:
        print_memory(t.pid)
    check(mem - before[0] <= MEM_SLACK, f"the connections hold {mem - before[0]} more bytes")
    check(peak["peak"] <= peak["budget"], f"accounted memory {peak} passed the budget")
    check(fds - before[1] <= FD_SLACK, f"{fds - before[1]} more open descriptors")


def connect(path, deadline):
    """A connected socket, or None when the daemon is gone. A full listen backlog
    (EAGAIN) is waited out until the deadline."""
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        try:
            s.connect(path)
            return s
        except BlockingIOError:
            s.close()
            if time.time() > deadline:
                raise AssertionError("listen backlog stayed full")
            time.sleep(0.001)
        except OSError:
            s.close()
            return None


def open_many(path, n):
    socks = []
    deadline = time.time() + 30
    for _ in range(n):
        s = connect(path, deadline)
        if s is None:
            break  # the daemon is gone: the caller notices
        socks.append(s)
    return socks


def rounds(t, what, n, attack):
    """Runs attack() n times; the footprint is taken after the first round."""
    deaths = 0
    before = None
    for i in range(n):
        attack()
        time.sleep(0.05)
        deaths += t.died()
        if i == 0 and deaths == 0:
            before = t.footprint()
    print(f"  {what} x{n}: daemon died {deaths}/{n}")
    check(deaths == 0, f"daemon died in {deaths} of {n} rounds of {what}")
    check_recovered(t, before)


def flood(t, n):
    """n connections opened, then all closed at once."""
    def attack():
        socks = open_many(t.sock, n)
        check(len(socks) == n or not t.alive(), f"only {len(socks)} of {n} connected")
        for s in socks:
            s.close()
    rounds(t, f"{n} connections opened then closed", REPEATS, attack)


@case
def case_flood_65(t):
    flood(t, 65)


@case
def case_flood_256(t):
    flood(t, 256)


@case
def case_flood_1000(t):
    flood(t, 1000)


@case
def case_connect_close_loop(t):
    """1,000 connect/close pairs as fast as possible."""
    def attack():
        deadline = time.time() + 30
        for _ in range(1000):
            s = connect(t.sock, deadline)
            if s is None:
                break
            s.close()
    rounds(t, "1000 connect/close", 10, attack)


@case
def case_oversize_then_close(t):
    """A line over max_request_bytes, then the client closes at once (8 clients)."""
    big = b'{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{"x":"' \
        + b"a" * (MAX_REQUEST + 4096)

    def attack():
        for s in open_many(t.sock, 8):
            try:
                s.sendall(big)
            except OSError:
                pass
            s.close()
    rounds(t, "oversized line then close (8 clients)", REPEATS, attack)


def sleeps(c, n, ms):
    c.send(b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "test.sleep",
                                "params": {"ms": ms}}).encode() + b"\n" for i in range(n)))


def wait_counted(t, n, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if t.connections() == n:
            return True
        time.sleep(0.05)
    return False


@case
def case_close_at_inflight_cap(t):
    """Exactly max_inflight_per_connection requests in flight, then a full close:
    the daemon is not reading, yet it notices within a few seconds and cancels."""
    before = t.footprint()
    noticed = 0
    rounds = 5
    for k in range(rounds):
        base = t.connections()  # earlier clients the daemon missed still count
        c = Client(t.sock)
        sleeps(c, INFLIGHT, 30000)
        check(wait_counted(t, base + 1, 5), "the client was not counted")
        time.sleep(0.3)  # the daemon reads all of them and stops at the cap
        c.close()
        t0 = time.time()
        if wait_counted(t, base, 4):
            noticed += 1
            print(f"  round {k}: hang-up noticed after {time.time() - t0:.2f}s")
        else:
            print(f"  round {k}: hang-up not noticed in 4s")
        if t.died():
            break
    cancelled = t.d.logtext().count(f"client gone with {INFLIGHT} request(s) in flight")
    print(f"  noticed {noticed}/{rounds}, cancellations logged {cancelled}")
    check(noticed == rounds, f"hang-up at the in-flight cap noticed in {noticed} of {rounds}")
    check(cancelled == rounds, f"{cancelled} cancellations logged, want {rounds}")
    # A half-close at the cap is not a hang-up: every reply arrives, then EOF.
    c = Client(t.sock)
    sleeps(c, INFLIGHT, 300)
    time.sleep(0.1)
    c.s.shutdown(socket.SHUT_WR)
    got = set()
    for _ in range(INFLIGHT):
        m = c.recv()
        check(m is not None, f"closed after {len(got)} replies following a half-close")
        check(m.get("result", {}).get("slept_ms") == 300, m)
        got.add(m["id"])
    check(got == set(range(INFLIGHT)), got)
    check(c.at_eof(), "connection not closed after the last reply")
    c.close()
    check_recovered(t, before)


@case
def case_close_while_output_backs_up(t):
    """A client that never reads: output backs up past the high-water mark and
    reading stops; then it closes. The daemon notices and frees the output."""
    def attack():
        c = Client(t.sock)
        req = {"jsonrpc": "2.0", "id": 1, "method": "test.notify", "params": {"count": 10000}}
        c.send(b"".join(json.dumps(dict(req, id=i)).encode() + b"\n" for i in range(1, 8)))
        time.sleep(0.5)
        c.close()
        check(wait_counted(t, 1, 4), "a client that stopped reading and closed is still counted")
    rounds(t, "unread output then close", 5, attack)


def raw_call(t, line):
    """Sends one raw line on a fresh connection; returns the raw reply line."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(t.sock)
    s.sendall(line + b"\n")
    buf = b""
    while b"\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    return buf.split(b"\n", 1)[0]


@case
def case_ids_out_of_range(t):
    """Integer ids beyond int64 are refused (-32600, id null), never altered."""
    before = t.footprint()
    for big in (b"123456789012345678901234567890", b"18446744073709551616",
                b"9223372036854775808", b"-9223372036854775809"):
        raw = raw_call(t, b'{"jsonrpc":"2.0","id":' + big + b',"method":"daemon.status"}')
        m = json.loads(raw)
        check(m.get("error", {}).get("code") == -32600 and m["id"] is None,
              f"id {big.decode()}: {raw[:200]!r}")
    # Two ids that would collide once clamped: no reply carries a made-up id.
    raw = raw_call(t, b'[{"jsonrpc":"2.0","id":123456789012345678901234567890,'
                   b'"method":"daemon.status"},{"jsonrpc":"2.0",'
                   b'"id":123456789012345678901234567891,"method":"daemon.status"}]')
    check(b"18446744073709551615" not in raw and raw.count(b"-32600") == 2, raw[:300])
    # Ids in range, and numbers with a fraction or exponent, come back exactly.
    for ok in (b"9223372036854775807", b"-9223372036854775808", b"1.5e3", b"1e400",
               b"0.1000000000000000000001"):
        raw = raw_call(t, b'{"jsonrpc":"2.0","id":' + ok + b',"method":"daemon.status"}')
        check(raw.endswith(b'"id":' + ok + b"}") and b'"result"' in raw,
              f"id {ok.decode()}: {raw[-120:]!r}")
    check_recovered(t, before)


@case
def case_nul_in_method(t):
    """A NUL inside the method name (or a member name) is refused, not cut."""
    before = t.footprint()
    raw = raw_call(t, b'{"jsonrpc":"2.0","id":5,"method":"daemon.status\\u0000junk"}')
    m = json.loads(raw)
    check(m.get("error", {}).get("code") == -32600 and m["id"] == 5, raw[:200])
    raw = raw_call(t, b'{"jsonrpc":"2.0","id":6,"method\\u0000junk":"daemon.status"}')
    m = json.loads(raw)
    check(m.get("error", {}).get("code") == -32600 and m["id"] is None, raw[:200])
    check_recovered(t, before)


def call_as(path, uid, method, params):
    """Child process: one call as uid; returns the reply (or the exception) as JSON."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            c = Client(path, timeout=10)
            m = c.call(method, params)
            os.write(w, json.dumps(m).encode())
        except Exception as e:  # noqa
            os.write(w, json.dumps({"exception": repr(e)}).encode())
        os._exit(0)
    os.close(w)
    out = b""
    while True:
        d = os.read(r, 65536)
        if not d:
            break
        out += d
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(out)


@case
def case_list_all_non_admin(t):
    """sandbox.list {"all": true} is for admins: another uid gets -32008."""
    check(os.getuid() == 0, "needs root (setuid to another uid)")
    before = t.footprint()
    m = call_as(t.sock, 65534, "sandbox.list", {"all": True})
    check(m.get("error", {}).get("code") == -32008, m)
    m = call_as(t.sock, 65534, "sandbox.list", {})
    check(m.get("result", {}).get("sandboxes") == [], m)
    c = Client(t.sock)
    m = c.call("sandbox.list", {"all": True})
    c.close()
    check("result" in m, m)  # root is an admin
    check_recovered(t, before)


def send_fds(c, line, fds):
    """line (bytes) with fds as SCM_RIGHTS in one sendmsg()."""
    socket.send_fds(c.s, [line], fds)


@case
def case_descriptor_flood(t):
    """Requests carrying descriptors (SCM_RIGHTS): lines that are no request, requests that
    fail, more than a line may carry (MSG_CTRUNC), batches, hang-ups right after sending,
    and pipelines past the in-flight cap. Every descriptor the daemon received is closed
    again: its descriptor count comes back, and the write end's copies are all gone (the
    read end sees EOF once ours is closed)."""
    before = t.footprint()
    r, w = os.pipe()
    lines = [
        b"garbage\n",
        b"\n",
        b'{"jsonrpc":"2.0","id":1,"method":"file.write","params":{"id":"sb-x","path":"/a",'
        b'"content_fd":0}}\n',
        b'{"jsonrpc":"2.0","id":2,"method":"file.read","params":{"id":"sb-x","path":"/a",'
        b'"to_fd":7}}\n',
        b'{"jsonrpc":"2.0","id":3,"method":"daemon.status"}\n',
        b'[{"jsonrpc":"2.0","id":4,"method":"daemon.status"}]\n',
        b'{"jsonrpc":"2.0","id":5,"method":"no.such"}\n',
        b'{"jsonrpc":"2.0","id":6,"method":"test.sleep","params":{"ms":20}}\n',
    ]
    for rnd in range(REPEATS):
        cs = []
        for i in range(8):
            c = Client(t.sock, timeout=10)
            n = 1 + (rnd + i) % 10  # 9 and 10: more than a line may carry
            for k, line in enumerate(lines):
                try:
                    send_fds(c, line, [w, r][: 1 + k % 2] * (n // (1 + k % 2) or 1))
                except OSError:
                    break  # closed by the daemon (too many descriptors)
            cs.append(c)
        for i, c in enumerate(cs):
            if i % 2:
                c.close()  # hang up with replies pending
                continue
            c.s.shutdown(socket.SHUT_WR)
            while c.recv() is not None:
                pass
            c.close()
    os.close(w)
    deadline = time.time() + RECOVER_S
    os.set_blocking(r, False)
    while True:
        try:
            eof = os.read(r, 1) == b""
        except BlockingIOError:
            eof = False
        if eof or time.time() > deadline:
            break
        time.sleep(0.1)
    os.close(r)
    check(eof, "the daemon still holds a descriptor it was sent")
    check_recovered(t, before)


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(max(8192, soft), hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    check(want >= 2200, f"RLIMIT_NOFILE too low ({want})")
    daemon_test.SANDBOXD = os.path.join(BUILD, "daemon", "sandboxd")
    names = sys.argv[1:] or list(CASES)
    failed = []
    deaths = 0
    try:
        for name in names:
            t0 = time.time()
            print(f"case {name}", flush=True)
            t = Target()
            try:
                CASES[name](t)
                check(not t.died(), "daemon died")
                t.stop()  # exit status 0: no leak, no handle left open
                print(f"ok   {name} ({time.time() - t0:.1f}s)", flush=True)
            except Exception as e:  # noqa
                failed.append(name)
                print(f"FAIL {name} ({time.time() - t0:.1f}s): {e}", flush=True)
            deaths += t.deaths
            for p in daemon_test.STARTED:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            daemon_test.STARTED.clear()
            subprocess.run(["rm", "-rf", t.d.dir])
    finally:
        for p in daemon_test.STARTED:
            if p.poll() is None:
                p.kill()
                p.wait()
    print(f"{len(names) - len(failed)} passed, {len(failed)} failed"
          + (f": {' '.join(failed)}" if failed else "") + f"; daemon died {deaths} time(s)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
