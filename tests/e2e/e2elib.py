"""End-to-end harness: a pve-sim instance, a sandboxd configured for it, and a JSON-RPC client."""

import base64
import contextlib
import itertools
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.environ.get("SANDBOXD_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SANDBOXD_BUILD_ROOT", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "pve-sim"))

import simlib  # noqa: E402

SANDBOXD = os.path.join(BUILD, "daemon", "sandboxd")

# Small delays: the suite must stay well under its time budget on 2 cores.
FAST_SIM = {"dhcp_delay": 0.1, "clone_time": 0.1, "start_time": 0.05, "stop_time": 0.05,
            "destroy_time": 0.05, "auth_failure_delay": 0.1}


class RpcError(Exception):
    def __init__(self, err):
        super().__init__(f"{err.get('code')} {err.get('message')} {err.get('data')}")
        self.code = err.get("code")
        self.data = err.get("data") or {}
        self.err = err


def expect_error(c, method, params, code, param=None):
    """Calls method and asserts that it fails with code (and names param); the error."""
    try:
        c.call(method, params)
    except RpcError as e:
        assert e.code == code, (method, params, e.err)
        if param is not None:
            assert e.err["data"].get("param") == param, e.err
        return e.err
    raise AssertionError(f"{method} {params} succeeded")


class Client:
    """One connection; thread-safe calls matched by id; notifications collected."""

    def __init__(self, path, timeout=300):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.ids = itertools.count(1)
        self.replies = {}
        self.notes = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.closed = False
        self.reader.start()

    def _read(self):
        buf = b""
        try:
            while True:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if not line.strip():
                        continue
                    msg = json.loads(line)
                    with self.cv:
                        if "id" in msg and ("result" in msg or "error" in msg):
                            self.replies[msg["id"]] = msg
                        else:
                            self.notes.append(msg)
                        self.cv.notify_all()
        except OSError:
            pass
        with self.cv:
            self.closed = True
            self.cv.notify_all()

    def send(self, method, params=None):
        i = next(self.ids)
        req = {"jsonrpc": "2.0", "id": i, "method": method}
        if params is not None:
            req["params"] = params
        data = (json.dumps(req) + "\n").encode()
        with self.lock:
            self.sock.sendall(data)
        return i

    def wait(self, i, timeout=300):
        deadline = time.time() + timeout
        with self.cv:
            while i not in self.replies:
                if self.closed:
                    raise ConnectionError("connection closed")
                left = deadline - time.time()
                if left <= 0:
                    raise TimeoutError(f"no reply to request {i}")
                self.cv.wait(left)
            msg = self.replies.pop(i)
        if "error" in msg:
            raise RpcError(msg["error"])
        return msg["result"]

    def call(self, method, params=None, timeout=300):
        return self.wait(self.send(method, params), timeout)

    def error(self, method, params=None, timeout=300):
        """Calls and returns the RpcError (fails if the call succeeded)."""
        try:
            r = self.call(method, params, timeout)
        except RpcError as e:
            return e
        raise AssertionError(f"{method} {params} succeeded: {r}")

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def b64(data):
    return base64.b64encode(data).decode()


def data_of(obj, name):
    if name in obj:
        return obj[name].encode()
    return base64.b64decode(obj[name + "_b64"])


def free_port():
    """A loopback TCP port nobody listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def recv_all(s, ends=(ConnectionResetError, socket.timeout)):
    """What s receives until its peer closes it, or until one of ends is raised."""
    out = b""
    while True:
        try:
            d = s.recv(65536)
        except ends:
            return out
        if not d:
            return out
        out += d


def ws_echo(sock, rest, payloads):
    """Sends each payload as one binary WebSocket frame (unmasked: the peer, an echo of
    bytes, sends the frame back as it is) and asserts the same bytes come back. rest: what
    was read already past the handshake's head. Returns what was read past the last echo."""
    for payload in payloads:
        n = len(payload)
        frame = bytes([0x82]) + (bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big"))
        frame += payload
        sock.sendall(frame)
        while len(rest) < len(frame):
            d = sock.recv(65536)
            assert d, rest
            rest += d
        assert rest[:len(frame)] == frame
        rest = rest[len(frame):]
    return rest


@contextlib.contextmanager
def dripping(socks, byte, interval=0.1):
    """While the with block runs, a thread sends byte on each of socks every interval
    seconds (a slowloris); errors of sockets closed by their peer are passed over."""
    stop = threading.Event()

    def drip():
        while not stop.is_set():
            for s in socks:
                try:
                    s.send(byte)
                except OSError:
                    pass
            time.sleep(interval)
    t = threading.Thread(target=drip)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def container_procs(c, sid, pattern):
    """The command lines of sandbox sid's processes that match pattern (grep's), as its
    container's pid 1 sees them: each exec runs in a PID namespace and /proc of its own,
    where the container's other processes never show. On pve-sim that /proc lists every
    process of the host: pattern must name something no other test runs (a sleep of a
    duration no other test uses)."""
    r = c.call("sandbox.exec", {"id": sid, "command": f"nsenter -m -t 1 ps -o args | grep '{pattern}' || true"})
    assert r["exit_code"] == 0, r
    return r["stdout"].splitlines()


def wait_procs(c, sid, pattern, n, timeout=30):
    """Polls container_procs() until n processes match pattern; asserts they do in time.
    Returns their command lines."""
    deadline = time.time() + timeout
    while True:
        got = container_procs(c, sid, pattern)
        if len(got) == n or time.time() > deadline:
            break
        time.sleep(0.2)
    assert len(got) == n, (pattern, n, got)
    return got


class Env:
    """pve-sim + sandboxd. Use as a context manager."""

    def __init__(self, sim_config=None, daemon_config=None, host_key=None, log_level="debug",
                 daemon_wrap=None):
        cfg = dict(FAST_SIM)
        cfg.update(sim_config or {})
        self.sim = simlib.Sim(config=cfg)
        self.daemon_config = daemon_config or {}
        self.host_key = host_key
        self.log_level = log_level
        # a callable given the simulator's info and the daemon's folder: a command line
        # the daemon's is appended to (e.g. unshare), or None
        self.daemon_wrap = daemon_wrap
        self.proc = None
        self.dir = None
        self.keep_log = False

    def __enter__(self):
        try:
            self.sim.start()
            self.start_daemon()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        # a failed case (run() exits non-zero) or an exception keeps the daemon's log
        if exc_type is not None and not (issubclass(exc_type, SystemExit) and not exc.code):
            self.keep_log = True
        self.close()

    def start_daemon(self):
        self.dir = f"/run/sandboxd-e2e-{secrets.token_hex(3)}"
        os.makedirs(self.dir, mode=0o755)
        os.chmod(self.dir, 0o755)
        info = self.sim.info
        tok = simlib.DAEMON
        secret_file = os.path.join(self.dir, "pve-token")
        with open(secret_file, "w") as f:
            f.write(info["tokens"][tok] + "\n")
        os.chmod(secret_file, 0o600)
        self.socket = os.path.join(self.dir, "sandboxd.sock")
        tmpl = str(info.get("template", 9000))
        host_key = self.host_key or info["templates"][tmpl]["host_key"]
        sections = {
            "server": {"socket": self.socket, "socket_mode": "0666", "socket_group": "root",
                       "state_dir": os.path.join(self.dir, "state")},
            "proxmox": {"url": info["url"], "token_id": tok, "token_secret_file": secret_file,
                        "nodes": "pve", "template": tmpl, "pool": info.get("pool", "sandboxd"),
                        "fingerprint": info["fingerprint"], "vmid_range": "1000-1999"},
            "ssh": {"user": "root", "key_file": self.sim.key, "template_host_key": host_key,
                    "connect_timeout_ms": "5000"},
            # The create proves each sandbox's isolation from inside before READY: a connect
            # to the simulated internet (internet off) or LAN host (internet on) must fail.
            # Without them each create would wait a whole firewall_period_s instead.
            "network": {"probe_address": f"{info['internet_ip']}:80",
                        "lan_probe_address": f"{info['lan_ip']}:80"},
            # forward sockets in this daemon's own folder (the default /run/sandboxd is shared)
            "forward": {"socket_dir": os.path.join(self.dir, "fwd")},
            # last: tests append [sandbox] keys to the file
            "sandbox": {"create_timeout_s": "60", "max_per_uid": "64", "max_total": "128"},
        }
        # a callable gets the simulator's info (addresses are chosen when it starts)
        extra = self.daemon_config(info) if callable(self.daemon_config) else self.daemon_config
        for sec, kv in extra.items():
            sections.setdefault(sec, {}).update(kv)
            for k in [k for k, v in kv.items() if v is None]:  # None: the key left out
                del sections[sec][k]
        self.config = os.path.join(self.dir, "sandboxd.conf")
        with open(self.config, "w") as f:
            for sec, kv in sections.items():
                f.write(f"[{sec}]\n")
                for k, v in kv.items():
                    f.write(f"{k} = {v}\n")
        self.errlog_path = os.path.join(self.dir, "sandboxd.err")
        self.errlog = open(self.errlog_path, "w+")
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        wrap = self.daemon_wrap(info, self.dir) if self.daemon_wrap else []
        self.proc = subprocess.Popen(wrap + [SANDBOXD, "--config", self.config, "--log-level", self.log_level],
                                     stdout=self.errlog, stderr=self.errlog, env=env)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sandboxd exited {self.proc.returncode}:\n{self.daemon_log()}")
            if os.path.exists(self.socket):
                try:
                    c = Client(self.socket, timeout=10)
                    c.call("daemon.status")
                    c.close()
                    return
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError("sandboxd did not come up:\n" + self.daemon_log())

    def stop_daemon(self):
        """SIGTERM; returns the exit status (sanitizer reports make it non-zero)."""
        if not self.proc:
            return 0
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc = None
        return rc

    def daemon_log(self):
        try:
            with open(self.errlog_path) as f:
                return f.read()
        except OSError:
            return ""

    def save_log(self):
        """Copies the daemon's whole log into the build's meson-logs folder (kept with the
        test log when the run failed); prints where."""
        if not getattr(self, "errlog_path", None):
            return
        script = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "e2e"
        dest = os.path.join(BUILD, "meson-logs", f"sandboxd-{script}-{os.path.basename(self.dir)}.log")
        try:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(self.errlog_path, dest)
            print(f"the daemon's log: {dest}", file=sys.stderr)
        except OSError as e:
            print(f"the daemon's log not kept: {e}", file=sys.stderr)

    def close(self):
        """Stops the daemon and the simulator; the daemon's folder (its log, state and
        configuration) goes too, unless E2E_KEEP is set in the environment."""
        rc = 0
        log = ""
        try:
            rc = self.stop_daemon()
            if rc != 0:
                log = self.daemon_log()  # before the folder goes
            if rc != 0 or self.keep_log:
                self.save_log()
        finally:
            self.sim.destroy()
            if self.dir and not os.environ.get("E2E_KEEP"):
                shutil.rmtree(self.dir, ignore_errors=True)
        if rc != 0:
            print(log[-20000:], file=sys.stderr)
            raise AssertionError(f"sandboxd exited with status {rc}")

    def client(self, timeout=300):
        return Client(self.socket, timeout)

    # ---- simulator views
    def containers(self):
        """Non-template containers the simulator holds."""
        st = self.sim.admin("GET", "/state")
        return {int(k): v for k, v in st["containers"].items() if not v["template"]}

    def wait_no_containers(self, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            cts = self.containers()
            if not cts:
                return
            time.sleep(0.1)
        raise AssertionError(f"containers left behind: {cts}")


def create_parallel(client_factory, n, parallel, params, timeout=300):
    """n sandbox.create calls with params over `parallel` connections from
    client_factory(), each making its share in turn; returns (the sandboxes made,
    the exceptions that stopped a connection's share)."""
    made, errors = [], []
    lock = threading.Lock()

    def worker(k):
        c = client_factory()
        try:
            for _ in range(k):
                sb = c.call("sandbox.create", params, timeout=timeout)
                with lock:
                    made.append(sb)
        except Exception as e:  # noqa: BLE001 - handed to the caller
            with lock:
                errors.append(e)
        finally:
            c.close()

    ts = [threading.Thread(target=worker, args=(n // parallel + (1 if i < n % parallel else 0),))
          for i in range(parallel)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return made, errors


# results_as_uid()'s child: another process (the dropped uid) makes each call in turn on one
# connection.
_AS_UID_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from e2elib import Client
c = Client(sys.argv[2], timeout=120)
out = []
for m, p in json.loads(sys.argv[3]):
    try:
        out.append({"result": c.call(m, p)})
    except Exception as e:
        out.append({"code": getattr(e, "code", str(e))})
print(json.dumps(out))
"""


def results_as_uid(socket_path, uid, calls, timeout=300):
    """Makes each (method, params) call of `calls` in turn on one connection from a process
    running as uid (and its gid, no groups); returns [{"result": ...} or {"code": N}, ...]."""
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    r = subprocess.run([py, "-c", _AS_UID_CHILD, os.path.dirname(os.path.abspath(__file__)), socket_path,
                        json.dumps([list(c) for c in calls])], capture_output=True, text=True,
                       timeout=timeout, preexec_fn=drop)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def calls_as_uid(socket_path, uid, calls, timeout=300):
    """results_as_uid() as {method: "succeeded" or the error code} (the last call of each)."""
    calls = list(calls)
    got = results_as_uid(socket_path, uid, calls, timeout)
    return {m: ("succeeded" if "result" in g else g["code"]) for (m, _), g in zip(calls, got)}


def run(tests):
    """Runs (name, fn) pairs in order; prints a line per test with its duration. E2E_ONLY in
    the environment runs only the tests whose name contains it."""
    only = os.environ.get("E2E_ONLY")
    tests = [t for t in tests if not only or only in t[0]]
    failed = 0
    t_all = time.time()
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
            print(f"ok   {name} ({time.time() - t0:.1f} s)", flush=True)
        except Exception:
            import traceback
            failed += 1
            print(f"FAIL {name} ({time.time() - t0:.1f} s)", flush=True)
            traceback.print_exc()
    print(f"{len(tests) - failed}/{len(tests)} passed in {time.time() - t_all:.1f} s", flush=True)
    sys.exit(1 if failed else 0)


def static_network(info, first=100, count=40):
    """[network] for static addressing: count addresses from host .first of the simulator's
    bridge subnet (its DHCP leases start at .10)."""
    net, plen = info["bridge_subnet"].split("/")
    base = net.rsplit(".", 1)[0]
    return {"mode": "static", "addresses": f"{base}.{first}-{base}.{first + count - 1}",
            "prefix": plen, "gateway": info["gateway"], "dns": "198.51.100.2"}
