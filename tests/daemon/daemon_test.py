#!/usr/bin/env python3
"""sandboxd over a real Unix socket: the spawned daemon binary, driven by stdlib clients.

Usage: daemon_test.py TEST SANDBOXD SANDBOXCTL   (TEST "all" runs every test)
Each test starts its own daemon on a private socket and asserts that the daemon exits 0
on SIGTERM (under the sanitizers a leak or a leaked handle makes that fail).
"""
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SANDBOXD = SANDBOXCTL = None
TESTS = {}
OPTIONS = {}  # name -> (meson timeout in seconds, runs alone)
STARTED = []  # every daemon process started, killed at the end whatever happened


def test(fn=None, *, timeout=30, alone=False):
    """Registers a test; `--list` hands its name, timeout and whether it must run alone
    (it measures the daemon's memory or opens many sockets) to meson."""
    def register(f):
        name = f.__name__[len("test_"):]
        TESTS[name] = f
        OPTIONS[name] = (timeout, alone)
        return f
    return register(fn) if fn else register


def check(cond, msg="check failed"):
    if not cond:
        raise AssertionError(msg)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Daemon:
    def __init__(self, config="", env=None, args=(), socket_mode="0666", start=True):
        self.dir = tempfile.mkdtemp(prefix="sandboxd-test-")
        os.chmod(self.dir, 0o755)  # other uids connect in the per-uid test
        self.sock = os.path.join(self.dir, "sandboxd.sock")
        self.conf = os.path.join(self.dir, "sandboxd.conf")
        with open(self.conf, "w") as f:
            f.write(f"[server]\nsocket = {self.sock}\nsocket_mode = {socket_mode}\n"
                    f"socket_group =\n{config}")
        self.env = dict(os.environ)
        self.env["SANDBOXD_TEST_HOOKS"] = "1"
        self.env.pop("NOTIFY_SOCKET", None)
        self.env.pop("LISTEN_FDS", None)
        self.env.update(env or {})
        self.args = list(args)
        self.proc = None
        self.log = os.path.join(self.dir, "daemon.log")
        if start:
            self.start()

    def start(self, argv=None):
        argv = argv or [SANDBOXD, "--config", self.conf, "--log-level", "debug"] + self.args
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(argv, env=self.env, stderr=self.logf, stdout=self.logf)
        STARTED.append(self.proc)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited early ({self.proc.returncode}):\n"
                                     + self.logtext())
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.sock)
                s.close()
                self.settle()
                return
            except OSError:
                time.sleep(0.02)
        raise AssertionError("daemon did not start listening")

    def settle(self):
        """Waits until the daemon counts no connection but the one asking."""
        if self.env.get("SANDBOXD_TEST_HOOKS") != "1":
            time.sleep(0.1)
            return
        c = Client(self.sock)
        for _ in range(200):
            r = c.call("daemon.status")
            if r.get("result", {}).get("connections") == 1:
                break
            time.sleep(0.01)
        c.close()
        for _ in range(200):
            c = Client(self.sock)
            n = c.call("daemon.status").get("result", {}).get("connections")
            c.close()
            if n == 1:
                return
            time.sleep(0.01)

    def logtext(self):
        with open(self.log) as f:
            return f.read()

    def stop(self, expect_rc=0, timeout=30, owns_socket=True):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("daemon did not stop after SIGTERM:\n" + self.logtext()[-3000:])
        self.logf.close()
        check(rc == expect_rc, f"daemon exit status {rc}, expected {expect_rc}:\n"
              + self.logtext()[-5000:])
        if owns_socket:
            check(not os.path.exists(self.sock) or expect_rc != 0, "socket file left behind")
        subprocess.run(["rm", "-rf", self.dir])
        return rc


class Client:
    def __init__(self, path, timeout=30):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""
        self.next_id = 0

    def send(self, obj_or_bytes):
        if isinstance(obj_or_bytes, (bytes, bytearray)):
            self.s.sendall(obj_or_bytes)
        else:
            self.s.sendall(json.dumps(obj_or_bytes).encode() + b"\n")

    def request(self, method, params=None, id=None):
        if id is None:
            self.next_id += 1
            id = self.next_id
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return id

    def recv(self):
        """One JSON message, or None at EOF/reset."""
        while b"\n" not in self.buf:
            try:
                d = self.s.recv(1 << 20)
            except ConnectionResetError:
                d = b""
            if not d:
                return None
            self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, method, params=None):
        id = self.request(method, params)
        while True:
            m = self.recv()
            check(m is not None, f"connection closed waiting for {method}")
            if m.get("id") == id:
                return m

    def at_eof(self):
        return self.recv() is None

    def close(self):
        self.s.close()


def status_ok(path):
    c = Client(path)
    r = c.call("daemon.status")
    c.close()
    check("result" in r, f"status failed: {r}")
    return r["result"]


def wait_connections(path, n, timeout=10):
    """Polls daemon.status until it counts n connections (the asking one included)."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        c = Client(path)
        last = c.call("daemon.status")
        c.close()
        if last.get("result", {}).get("connections") == n:
            return
        time.sleep(0.05)
    raise AssertionError(f"expected {n} connections, last status: {last}")


@test
def test_status_and_discover():
    d = Daemon()
    c = Client(d.sock)
    r = c.call("daemon.status")["result"]
    check(r["version"] and isinstance(r["uptime_s"], int), r)
    check(r["connections"] == 1, r)
    check(isinstance(r["sandboxes"], dict) and all(isinstance(v, int) for v in r["sandboxes"].values()), r)
    check(r["proxmox"]["last_error"] == "not configured" and r["proxmox"]["reachable"] is None, r)
    # Peer credentials from SO_PEERCRED.
    check(r["caller"]["uid"] == os.getuid() and r["caller"]["pid"] == os.getpid(), r)
    doc = c.call("rpc.discover")["result"]
    check(doc["openrpc"].startswith("1."), doc.keys())
    names = [m["name"] for m in doc["methods"]]
    check("daemon.status" in names and "rpc.discover" in names, names)
    check("test.sleep" not in names, "test hook leaked into the API document")
    e = c.call("no.such.method")
    check(e["error"]["code"] == -32601, e)
    e = c.call("daemon.status", {"unexpected": 1})
    check(e["error"]["code"] == -32602, e)
    c.close()
    d.stop()


@test
def test_no_test_hooks_by_default():
    d = Daemon(env={"SANDBOXD_TEST_HOOKS": "0"})
    c = Client(d.sock)
    check(c.call("test.sleep", {"ms": 1})["error"]["code"] == -32601)
    c.close()
    d.stop()


@test(timeout=180, alone=True)
def test_concurrent_clients():
    d = Daemon(config="max_connections = 512\nmax_connections_per_uid = 512\n")
    errors = []
    n_clients, n_req = 200, 25

    def worker(k):
        try:
            c = Client(d.sock)
            for i in range(n_req):
                r = c.call("daemon.status")
                check("result" in r, r)
            c.close()
        except Exception as e:  # noqa
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    check(not errors, errors[:3])
    d.stop()


@test(timeout=60)
def test_pipelined_and_out_of_order():
    d = Daemon()
    c = Client(d.sock)
    n = 2000
    c.send(b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "daemon.status"}).encode()
                    + b"\n" for i in range(n)))
    seen = set()
    for _ in range(n):
        m = c.recv()
        check(m and "result" in m, m)
        seen.add(m["id"])
    check(seen == set(range(n)), "ids do not match")
    # Concurrency on one connection: a slow request does not hold up a fast one.
    c.request("test.sleep", {"ms": 500}, id="slow")
    c.request("daemon.status", id="fast")
    first = c.recv()
    check(first["id"] == "fast", f"responses not matched by id/concurrent: {first}")
    check(c.recv()["id"] == "slow")
    c.close()
    d.stop()


@test
def test_server_notifications():
    d = Daemon()
    c = Client(d.sock)
    c.request("test.notify", {"count": 5}, id="n1")
    seen = []
    while True:
        m = c.recv()
        check(m is not None)
        if "method" in m:
            check(m["method"] == "test.event" and "id" not in m, m)
            check(m["params"]["request_id"] == "n1", m)
            seen.append(m["params"]["seq"])
        else:
            check(m["id"] == "n1" and m["result"]["sent"] == 5, m)
            break
    check(seen == list(range(5)), f"notifications before the reply, in order: {seen}")
    c.close()
    d.stop()


@test
def test_batches():
    d = Daemon()
    c = Client(d.sock)
    c.send(b'[{"jsonrpc":"2.0","id":1,"method":"daemon.status"},'
           b'{"jsonrpc":"2.0","method":"daemon.status"},'
           b'{"jsonrpc":"2.0","id":2,"method":"nope"},'
           b'{"jsonrpc":"2.0","id":3,"method":"test.sleep","params":{"ms":200}},1]\n')
    r = c.recv()
    check(isinstance(r, list) and len(r) == 4, r)
    by_id = {x["id"]: x for x in r}
    check("result" in by_id[1] and by_id[2]["error"]["code"] == -32601, r)
    check(by_id[3]["result"]["slept_ms"] == 200, r)
    check(by_id[None]["error"]["code"] == -32600, r)
    # Batch of notifications only: no reply at all.
    c.send(b'[{"jsonrpc":"2.0","method":"daemon.status"},{"jsonrpc":"2.0","method":"x"}]\n')
    c.send(b'{"jsonrpc":"2.0","method":"daemon.status"}\n')
    check(c.call("daemon.status")["id"] == c.next_id, "notification was answered")
    c.send(b"[]\n")
    check(c.recv()["error"]["code"] == -32600)
    c.close()
    d.stop()


@test(timeout=60)
def test_inflight_backpressure():
    d = Daemon(config="max_inflight_per_connection = 4\n")
    c = Client(d.sock)
    n = 20
    t0 = time.time()
    for i in range(n):
        c.request("test.sleep", {"ms": 200}, id=i)
    got = []
    for _ in range(n):
        m = c.recv()
        check(m and m.get("result", {}).get("slept_ms") == 200, f"dropped or refused: {m}")
        got.append(m["id"])
    dt = time.time() - t0
    check(sorted(got) == list(range(n)))
    # 20 requests, 4 at a time, 200 ms each: at least 5 rounds.
    check(dt >= 0.95, f"in-flight cap not applied ({dt:.2f}s)")
    # Another connection is not affected meanwhile.
    status_ok(d.sock)
    c.close()
    d.stop()


@test
def test_connection_cap_global():
    d = Daemon(config="max_connections = 5\nmax_connections_per_uid = 5\n")
    held = [Client(d.sock) for _ in range(5)]
    for h in held:
        check("result" in h.call("daemon.status"))
    x = Client(d.sock)
    m = x.recv()
    check(m and m["error"]["code"] == -32007 and m["id"] is None, m)
    check(x.at_eof(), "over-cap connection not closed")
    held.pop().close()
    wait_connections(d.sock, 5)  # a place is free again
    for h in held:
        h.close()
    d.stop()


def call_as(path, uid, gid, method):
    """Child process: connect as uid:gid, print the reply to method as JSON."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            m = Client(path, timeout=10).call(method)
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


def connect_as(path, uid):
    """Child process: connect as uid, print the status reply (or error) as JSON."""
    return call_as(path, uid, uid, "daemon.status")


@test
def test_connection_cap_per_uid():
    if os.getuid() != 0:
        raise AssertionError("needs root (setuid to another uid)")
    d = Daemon(config="max_connections = 10\nmax_connections_per_uid = 2\n")
    held = [Client(d.sock) for _ in range(2)]
    for h in held:
        check("result" in h.call("daemon.status"))
    x = Client(d.sock)
    m = x.recv()
    check(m and m["error"]["code"] == -32007, m)
    check("uid" in m["error"]["data"]["reason"], m)
    x.close()
    # Another uid still gets in, and its uid is what the daemon sees.
    m = connect_as(d.sock, 65534)
    check("result" in m, m)
    check(m["result"]["caller"]["uid"] == 65534, m)
    for h in held:
        h.close()
    d.stop()


@test(timeout=60)
def test_refusals_rate_limited():
    """A uid hammering a connection cap gets a few log lines per interval, then one that
    says how many were suppressed, not a line (and an audit record) per refusal."""
    d = Daemon(config="max_connections = 10\nmax_connections_per_uid = 2\n",
               env={"SANDBOXD_TEST_LOG_INTERVAL_MS": "2000"})
    held = [Client(d.sock) for _ in range(2)]
    for h in held:
        check("result" in h.call("daemon.status"))
    t0 = time.time()
    for _ in range(200):
        x = Client(d.sock)
        m = x.recv()
        check(m and m["error"]["code"] == -32007, m)
        x.close()
    intervals = int((time.time() - t0) / 2.0) + 1
    lines = [ln for ln in d.logtext().splitlines() if "connection cap reached" in ln]
    check(0 < len(lines) <= 5 * intervals, f"{len(lines)} lines for 200 refusals in "
          f"{intervals} interval(s)")
    time.sleep(2.2)
    x = Client(d.sock)
    x.recv()
    x.close()
    deadline = time.time() + 5
    while True:
        lines = [ln for ln in d.logtext().splitlines() if "connection cap reached" in ln]
        if "suppressed" in lines[-1]:
            break
        check(time.time() < deadline, f"no 'suppressed' count: {lines[-1]}")
        time.sleep(0.05)
    # The metrics count every refusal, written or not.
    fams = {f["name"]: f for f in held[0].call("daemon.metrics")["result"]["metrics"]}
    hits = [x["value"] for x in fams["sandboxd_limits_hit_total"]["samples"]
            if x["labels"].get("limit") == "connections_per_uid"]
    check(hits and hits[0] >= 201, hits)
    for h in held:
        h.close()
    d.stop()


@test(timeout=60)
def test_request_size_cap():
    d = Daemon()
    c = Client(d.sock)
    big = b'{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{"x":"' + b"a" * (20 << 20)
    try:
        c.s.sendall(big + b'"}}\n')
    except (BrokenPipeError, ConnectionResetError):
        pass  # the daemon may close before everything is written
    m = c.recv()
    check(m and m["error"]["code"] == -32600 and m["id"] is None, m)
    check(c.at_eof(), "connection not closed after an oversized line")
    c.close()
    status_ok(d.sock)
    # A custom cap applies to lines just over it.
    d.stop()
    d = Daemon(config="max_request_bytes = 4096\n")
    c = Client(d.sock)
    c.send(b'{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{"x":"' + b"a" * 4000
           + b'"}}\n')
    m = c.recv()
    check(m["id"] == 1 and m["error"]["code"] == -32602, m)  # under the cap: answered
    c.send(b'{"x":"' + b"a" * 5000 + b'"}\n')
    m = c.recv()
    check(m["id"] is None and m["error"]["code"] == -32600, m)
    check(c.at_eof())
    d.stop()


@test(timeout=60)
def test_deep_nesting_and_garbage():
    d = Daemon()
    c = Client(d.sock)
    c.send(b"[" * 10000 + b"\n")
    m = c.recv()
    check(m["error"]["code"] == -32700 and m["id"] is None, m)
    c.send(b'{"a":' * 10000 + b"\n")
    check(c.recv()["error"]["code"] == -32700)
    nested = '{"jsonrpc":"2.0","id":7,"method":"daemon.status","params":' + '{"a":' * 40 + "1" \
        + "}" * 40 + "}"
    c.send(nested.encode() + b"\n")
    check(c.recv()["error"]["code"] == -32700)
    # Garbage, invalid UTF-8 and a NUL: one error each, the connection lives on.
    for junk in [b"garbage", b"\xff\xfe\xfd", b'{"jsonrpc":"2.0","id":1,"method":"\xc0\xaf"}',
                 b"{\x00}", b"}}}}", b'"just a string"', b"42", b"null",
                 b'{"jsonrpc":"1.0","id":1,"method":"daemon.status"}']:
        c.send(junk + b"\n")
        m = c.recv()
        check(m and m["error"]["code"] in (-32700, -32600), (junk, m))
    check("result" in c.call("daemon.status"))
    # Half a line, then hang up: the daemon keeps serving.
    h = Client(d.sock)
    h.send(b'{"jsonrpc":"2.0","id":1,"meth')
    h.close()
    # Random bytes.
    import random
    rnd = random.Random(1)
    g = Client(d.sock)
    for _ in range(50):
        blob = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300)))
        try:
            g.send(blob)
        except OSError:
            break
    g.close()
    status_ok(d.sock)
    c.close()
    d.stop()


@test(timeout=120, alone=True)
def test_thousand_connections():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(max(4096, soft), hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    check(want >= 2200, f"RLIMIT_NOFILE too low ({want})")
    d = Daemon()  # default caps: 256 global, 64 per uid
    conns, refused = [], 0
    for _ in range(1000):
        conns.append(Client(d.sock))
    accepted = []
    for c in conns:
        c.s.settimeout(30)
        try:
            c.send({"jsonrpc": "2.0", "id": 1, "method": "daemon.status"})
        except OSError:
            pass  # refused connections are closed after their error line
    for c in conns:
        m = c.recv()
        if m is None:
            raise AssertionError("connection closed without a reply")
        if "error" in m:
            check(m["error"]["code"] == -32007 and m["id"] is None, m)
            refused += 1
        else:
            accepted.append(c)
    check(len(accepted) == 64, f"{len(accepted)} accepted (per-uid cap is 64)")
    check(refused == 936, refused)
    for c in conns:
        c.close()
    wait_connections(d.sock, 1)
    d.stop()


@test(timeout=60, alone=True)
def test_slow_reader_bounded():
    d = Daemon(env={"SANDBOXD_TEST_STALL_MS": "3000"})
    time.sleep(0.2)
    base = rss_kib(d.proc.pid)
    c = Client(d.sock)
    c.s.setblocking(False)
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "rpc.discover"}).encode() + b"\n"
    chunk = line * 200
    sent = 0
    t0 = time.time()
    # Write requests without ever reading replies, for a bounded time.
    while time.time() - t0 < 2.0:
        try:
            sent += c.s.send(chunk)
        except BlockingIOError:
            select.select([], [c.s], [], 0.05)
    peak = rss_kib(d.proc.pid)
    # The daemon stopped reading once its queued output passed the cap: the client
    # is blocked after a few hundred requests instead of streaming for 2 s.
    check(sent < 16 << 20, f"daemon kept reading: {sent} bytes accepted")
    check(sent > 0)
    check(peak - base < 64 * 1024, f"daemon RSS grew by {peak - base} KiB")
    # Meanwhile other clients are served.
    status_ok(d.sock)
    # The stuck client is closed after the stall deadline.
    time.sleep(3)
    wait_connections(d.sock, 1)
    c.close()
    d.stop()
    print(f"slow reader: sent {sent} bytes, RSS {base} -> {peak} KiB")


@test
def test_idle_timeout():
    d = Daemon(env={"SANDBOXD_TEST_IDLE_MS": "300"})
    c = Client(d.sock)
    c.s.settimeout(5)
    t0 = time.time()
    check(c.at_eof(), "idle connection not closed")
    check(time.time() - t0 < 8, "idle connection closed too late")
    # Busy connections are not idle.
    c = Client(d.sock)
    m = c.call("test.sleep", {"ms": 900})
    check(m["result"]["slept_ms"] == 900, m)
    c.close()
    d.stop()


@test
def test_client_hangup_cancels():
    d = Daemon()
    # A full close while a request runs: the daemon notices within about a
    # second (not when the 5 s sleep ends) and cancels the request.
    c = Client(d.sock)
    c.request("test.sleep", {"ms": 5000})
    wait_connections(d.sock, 2)
    t0 = time.time()
    c.close()
    wait_connections(d.sock, 1, timeout=3)
    gone = time.time() - t0
    check(gone < 2.5, f"hangup noticed after {gone:.2f}s")
    check("client gone with 1 request(s) in flight, cancelling" in d.logtext(),
          "no cancellation logged:\n" + d.logtext()[-3000:])
    # Half-close first, full close later: the sweep notices the later close.
    c = Client(d.sock)
    c.request("test.sleep", {"ms": 5000})
    wait_connections(d.sock, 2)
    c.s.shutdown(socket.SHUT_WR)
    time.sleep(0.3)
    t0 = time.time()
    c.close()
    wait_connections(d.sock, 1, timeout=3)
    gone = time.time() - t0
    check(gone < 2.5, f"close after half-close noticed after {gone:.2f}s")
    check(d.logtext().count("client gone with 1 request(s) in flight") == 2,
          "second cancellation not logged")
    # A half-close alone is not a hangup: the replies still arrive.
    c = Client(d.sock)
    ids = [c.request("test.sleep", {"ms": 1000}), c.request("test.sleep", {"ms": 200})]
    c.s.shutdown(socket.SHUT_WR)
    got = {}
    for _ in ids:
        m = c.recv()
        check(m is not None, "connection closed before the replies after a half-close")
        got[m["id"]] = m
    check(got[ids[0]].get("result", {}).get("slept_ms") == 1000, got)
    check(got[ids[1]].get("result", {}).get("slept_ms") == 200, got)
    check(c.at_eof(), "connection not closed after the last reply")
    c.close()
    check(d.logtext().count("client gone with") == 2, "a half-close was taken for a hangup")
    d.stop()


@test
def test_graceful_shutdown():
    d = Daemon()
    c = Client(d.sock)
    c.request("test.sleep", {"ms": 2500}, id="slow")
    time.sleep(0.2)
    d.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    # Not accepting any more.
    try:
        Client(d.sock, timeout=2).call("daemon.status")
        raise AssertionError("still accepting after SIGTERM")
    except (OSError, AssertionError) as e:
        if "still accepting" in str(e):
            raise
    # New requests on the open connection: -32011; the in-flight one finishes.
    c.request("daemon.status", id="new")
    got = {}
    while len(got) < 2:
        m = c.recv()
        check(m is not None, f"connection closed early: {got}")
        got[m["id"]] = m
    check(got["new"]["error"]["code"] == -32011, got)
    check(got["slow"]["result"]["slept_ms"] == 2500, got)
    check(c.at_eof(), "connection left open after shutdown")
    check(d.proc.wait(10) == 0, "exit status")
    d.stop()


@test
def test_shutdown_deadline():
    d = Daemon(env={"SANDBOXD_TEST_SHUTDOWN_MS": "300"})
    c = Client(d.sock)
    c.request("test.sleep", {"ms": 30000}, id="slow")
    time.sleep(0.2)
    t0 = time.time()
    d.proc.send_signal(signal.SIGTERM)
    check(d.proc.wait(10) == 0)
    check(time.time() - t0 < 5, "deadline not applied")
    check(c.at_eof())
    d.stop()


@test
def test_socket_activation():
    d = Daemon(start=False)
    d.start([shutil_which("systemd-socket-activate"), "-l", d.sock, SANDBOXD, "--config",
             d.conf, "--log-level", "debug"])
    r = status_ok(d.sock)
    check(r["connections"] == 1)
    log = d.logtext()
    check("passed by systemd" in log, log)
    # The socket file belongs to whoever passed the socket: the daemon leaves it alone.
    d.stop(owns_socket=False)
    check(os.path.exists(d.sock) or True)
    subprocess.run(["rm", "-rf", d.dir])


def shutil_which(name):
    import shutil
    p = shutil.which(name)
    check(p, f"{name} not installed")
    return p


@test
def test_socket_activation_two_sockets():
    d = Daemon(start=False)
    sa = shutil_which("systemd-socket-activate")
    proc = subprocess.Popen([sa, "-l", d.sock, "-l", d.sock + "2", SANDBOXD, "--config", d.conf],
                            env=d.env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while not os.path.exists(d.sock) and time.time() < deadline:
        time.sleep(0.02)
    s = socket.socket(socket.AF_UNIX)
    s.connect(d.sock)  # starts the daemon, which refuses two sockets
    s.settimeout(20)
    try:
        check(s.recv(100) == b"", "daemon answered with two sockets passed")
    except ConnectionResetError:
        pass
    proc.wait(20)
    err = proc.stderr.read()
    check("exactly one" in err, err)
    check(proc.returncode == 1, proc.returncode)
    subprocess.run(["rm", "-rf", d.dir])


@test
def test_socket_activation_not_unix():
    d = Daemon(start=False)
    sa = shutil_which("systemd-socket-activate")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    proc = subprocess.Popen([sa, "-l", f"127.0.0.1:{port}", SANDBOXD, "--config", d.conf],
                            env=d.env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except OSError:
            check(time.time() < deadline, "systemd-socket-activate did not listen")
            time.sleep(0.05)
    s.settimeout(20)
    try:
        check(s.recv(100) == b"", "daemon served a TCP socket")
    except ConnectionResetError:
        pass
    proc.wait(20)
    err = proc.stderr.read()
    check(proc.returncode == 1 and "not a listening stream Unix socket" in err, err)
    subprocess.run(["rm", "-rf", d.dir])


@test
def test_stale_and_live_socket():
    d = Daemon(start=False)
    # A stale socket file (nothing listens) is replaced.
    s = socket.socket(socket.AF_UNIX)
    s.bind(d.sock)
    s.close()
    d.start()
    status_ok(d.sock)
    # A live one is an error.
    p = subprocess.run([SANDBOXD, "--config", d.conf], env=d.env, capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 1 and "in use" in p.stderr, p.stderr)
    status_ok(d.sock)  # and the running daemon is untouched
    d.stop()
    # A regular file at the path is not removed.
    d = Daemon(start=False)
    open(d.sock, "w").close()
    p = subprocess.run([SANDBOXD, "--config", d.conf], env=d.env, capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 1 and "not a socket" in p.stderr, p.stderr)
    check(os.path.isfile(d.sock))
    subprocess.run(["rm", "-rf", d.dir])


@test
def test_socket_mode():
    d = Daemon(socket_mode="0600")
    st = os.stat(d.sock)
    check(st.st_mode & 0o7777 == 0o600, oct(st.st_mode))
    d.stop()


@test
def test_cli():
    d = Daemon(start=False)
    p = subprocess.run([SANDBOXD, "--config", d.conf, "--check-config"], capture_output=True,
                       text=True)
    check(p.returncode == 0 and p.stdout.strip() == "OK", (p.returncode, p.stdout, p.stderr))
    with open(d.conf, "a") as f:
        f.write("max_inflight_per_connection = lots\n")
    p = subprocess.run([SANDBOXD, "--config", d.conf, "--check-config"], capture_output=True,
                       text=True)
    check(p.returncode == 1, p.returncode)
    check(f"{d.conf}:5:" in p.stderr and "max_inflight_per_connection" in p.stderr, p.stderr)
    p = subprocess.run([SANDBOXD, "--config", d.conf], capture_output=True, text=True)
    check(p.returncode == 1 and "max_inflight_per_connection" in p.stderr, p.stderr)
    p = subprocess.run([SANDBOXD, "--version"], capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.startswith("sandboxd "), p.stdout)
    p = subprocess.run([SANDBOXD, "--bogus"], capture_output=True, text=True)
    check(p.returncode != 0)
    p = subprocess.run([SANDBOXD, "--config", "/nonexistent.conf", "--check-config"],
                       capture_output=True, text=True)
    check(p.returncode == 1 and "/nonexistent.conf" in p.stderr, p.stderr)
    # [proxmox] present: required keys are checked, the secret must be readable.
    with open(d.conf, "w") as f:
        f.write("[proxmox]\nurl = https://127.0.0.1:8006\ntoken_id = a@pve!b\n"
                "template = 9000\n")
    p = subprocess.run([SANDBOXD, "--config", d.conf, "--check-config"], capture_output=True,
                       text=True)
    check(p.returncode == 1 and "pool" in p.stderr, p.stderr)
    cred = os.path.join(d.dir, "creds")
    os.mkdir(cred)
    with open(os.path.join(cred, "pve-token"), "w") as f:
        f.write("TOPSECRET\n")
    with open(os.path.join(cred, "ssh-key"), "w") as f:
        f.write("KEY\n")
    with open(d.conf, "a") as f:
        f.write("pool = p\n")
    # Outside the service the credentials are not there: checked at run time only.
    env = {k: v for k, v in os.environ.items() if k != "CREDENTIALS_DIRECTORY"}
    p = subprocess.run([SANDBOXD, "--config", d.conf, "--check-config"], capture_output=True,
                       text=True, env=env)
    check(p.returncode == 0 and "not checked" in p.stderr, p.stderr)
    env = dict(os.environ, CREDENTIALS_DIRECTORY=cred)
    p = subprocess.run([SANDBOXD, "--config", d.conf, "--check-config"], capture_output=True,
                       text=True, env=env)
    check(p.returncode == 0, p.stderr)
    check("TOPSECRET" not in p.stderr + p.stdout)
    subprocess.run(["rm", "-rf", d.dir])


@test
def test_sandboxctl():
    d = Daemon()
    env = dict(os.environ)
    p = subprocess.run([SANDBOXCTL, "--socket", d.sock, "status"], capture_output=True, text=True)
    check(p.returncode == 0 and "version" in p.stdout and "not configured" in p.stdout,
          (p.stdout, p.stderr))
    p = subprocess.run([SANDBOXCTL, "--socket", d.sock, "--json", "status"], capture_output=True,
                       text=True)
    check(p.returncode == 0 and json.loads(p.stdout)["connections"] == 1, p.stdout)
    p = subprocess.run([SANDBOXCTL, "--socket", d.sock, "call", "test.sleep", '{"ms": 5}'],
                       capture_output=True, text=True)
    check(p.returncode == 0 and json.loads(p.stdout) == {"slept_ms": 5}, p.stdout)
    p = subprocess.run([SANDBOXCTL, "--socket", d.sock, "call", "rpc.discover"],
                       capture_output=True, text=True)
    check(p.returncode == 0 and json.loads(p.stdout)["openrpc"], p.stderr)
    p = subprocess.run([SANDBOXCTL, "--socket", d.sock, "call", "nope"], capture_output=True,
                       text=True)
    check(p.returncode != 0 and "-32601" in p.stderr and p.stdout == "", (p.stdout, p.stderr))
    p = subprocess.run([SANDBOXCTL, "--socket", d.sock, "call", "daemon.status", "{bad"],
                       capture_output=True, text=True)
    check(p.returncode != 0 and "JSON" in p.stderr, p.stderr)
    p = subprocess.run([SANDBOXCTL, "--socket", d.dir + "/none.sock", "status"],
                       capture_output=True, text=True)
    check(p.returncode != 0 and "cannot connect" in p.stderr, p.stderr)
    p = subprocess.run([SANDBOXCTL, "frobnicate"], capture_output=True, text=True)
    check(p.returncode != 0 and "unknown command" in p.stderr, p.stderr)
    env["SANDBOXD_SOCKET"] = d.sock
    p = subprocess.run([SANDBOXCTL, "status"], capture_output=True, text=True, env=env)
    check(p.returncode == 0, p.stderr)
    d.stop()


@test
def test_reload():
    d = Daemon(config="max_connections = 2\nmax_connections_per_uid = 2\n")
    a, b = Client(d.sock), Client(d.sock)
    check("result" in a.call("daemon.status") and "result" in b.call("daemon.status"))
    x = Client(d.sock)
    check(x.recv()["error"]["code"] == -32007)
    with open(d.conf, "w") as f:
        f.write(f"[server]\nsocket = {d.sock}\nsocket_mode = 0666\nsocket_group =\n"
                "max_connections = 3\nmax_connections_per_uid = 3\n")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while True:
        y = Client(d.sock)
        try:
            m = y.call("daemon.status")
        except (OSError, AssertionError):
            m = {}
        if "result" in m:
            break
        y.close()
        check(time.time() < deadline, "reload did not raise the cap")
        time.sleep(0.1)
    # A broken file on reload keeps the running configuration.
    with open(d.conf, "a") as f:
        f.write("nonsense = 1\n")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "reload failed" not in d.logtext():
        check(time.time() < deadline, "no 'reload failed' in the log")
        time.sleep(0.1)
    check(d.proc.poll() is None, "daemon died on a bad reload")
    for c in (a, b, x, y):
        c.close()
    d.stop()


@test(timeout=90)
def test_admin_group_lookup():
    """admin_group through NSS: an entry larger than a fixed buffer still resolves, and a
    lookup that fails at reload keeps the previous members instead of emptying the set.
    The daemon runs in its own mount namespace with a stand-in /etc/group."""
    if os.getuid() != 0:
        raise AssertionError("needs root (a private mount namespace, setuid)")
    d = Daemon(config="admin_group = sdtadmins\n", start=False)
    group = os.path.join(d.dir, "group")
    gid = 64999

    def write_group(members):
        with open("/etc/group") as f:
            base = f.read()
        with open(group, "w") as f:  # in place: the bind mount keeps the inode
            f.write(base + f"sdtadmins:x:{gid}:" + ",".join(members) + "\n")

    # 8,000 member names without users: an entry of about 90 KiB.
    write_group([f"sdtmember{i:05d}" for i in range(8000)])
    d.start(["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/group && exec "$@"', group,
             SANDBOXD, "--config", d.conf, "--log-level", "debug"])
    m = call_as(d.sock, 65534, gid, "daemon.metrics")
    check("result" in m, f"a caller of the admin group's gid is not an admin: {m}")
    m = call_as(d.sock, 65534, 65534, "daemon.metrics")
    check(m.get("error", {}).get("code") == -32008, m)
    # A lookup error at reload (an entry over the daemon's 16 MiB bound) keeps the set.
    write_group([f"sdtmember{i:07d}" for i in range(1_200_000)])
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 30
    while "cannot resolve admin_group" not in d.logtext():
        check(time.time() < deadline, "no 'cannot resolve admin_group' in the log:\n"
              + d.logtext()[-2000:])
        time.sleep(0.1)
    m = call_as(d.sock, 65534, gid, "daemon.metrics")
    check("result" in m, f"a failed lookup at reload emptied the admin set: {m}")
    d.stop()


@test
def test_sd_notify_and_watchdog():
    d = Daemon(start=False)
    ns_path = os.path.join(d.dir, "notify.sock")
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(ns_path)
    ns.settimeout(20)
    d.env["NOTIFY_SOCKET"] = ns_path
    d.env["WATCHDOG_USEC"] = "200000"
    d.start()
    # WATCHDOG_PID is unset, so sd_watchdog_enabled() accepts it for any pid.
    msgs = []
    t0 = time.time()
    while time.time() - t0 < 3:
        try:
            msgs.append(ns.recv(4096).decode())
        except socket.timeout:
            break
        if sum("WATCHDOG=1" in m for m in msgs) >= 4:
            break
    check(any("READY=1" in m for m in msgs), msgs)
    check(any("STATUS=" in m for m in msgs), msgs)
    check(sum("WATCHDOG=1" in m for m in msgs) >= 4, msgs)
    d.proc.send_signal(signal.SIGTERM)
    t0 = time.time()
    while time.time() - t0 < 10:
        m = ns.recv(4096).decode()
        if "STOPPING=1" in m:
            break
    else:
        raise AssertionError("no STOPPING=1")
    d.stop()


def main():
    global SANDBOXD, SANDBOXCTL
    if sys.argv[1:] == ["--list"]:
        for n, (timeout, alone) in OPTIONS.items():
            print(n, timeout, "alone" if alone else "parallel")
        return
    name, SANDBOXD, SANDBOXCTL = sys.argv[1], os.path.abspath(sys.argv[2]), \
        os.path.abspath(sys.argv[3])
    names = list(TESTS) if name == "all" else [name]
    failed = 0
    for n in names:
        t0 = time.time()
        try:
            TESTS[n]()
            print(f"ok   {n} ({time.time() - t0:.2f}s)")
        except Exception as e:  # noqa
            failed += 1
            import traceback
            traceback.print_exc()
            print(f"FAIL {n}: {e}")
        finally:
            for p in STARTED:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            STARTED.clear()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
