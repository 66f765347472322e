"""Shared by the client tests (not a test by itself): the e2e harness (pve-sim + sandboxd),
a restart of the daemon on the same socket and state folder, and a small MCP client that
drives `sandboxctl mcp` over pipes."""

import json
import os
import queue
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("SANDBOXD_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("SANDBOXD_BUILD_ROOT", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
sys.path.insert(0, os.path.join(SRC, "clients", "python"))

import e2elib  # noqa: E402
from e2elib import Env, run  # noqa: E402,F401

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")

# The daemon closes idle connections after this long in these tests, so that the
# clients' reconnects are exercised (the default is 300 s).
IDLE_MS = 2000


def enable_test_hooks(idle_ms=IDLE_MS):
    """Must run before Env(): the daemon inherits the environment."""
    os.environ["SANDBOXD_TEST_HOOKS"] = "1"
    os.environ["SANDBOXD_TEST_IDLE_MS"] = str(idle_ms)
    os.environ["SANDBOXD_TEST_SHUTDOWN_MS"] = "1000"  # requests in flight at a restart


def relaunch(env):
    """Starts sandboxd again with env's config: same socket, same state folder."""
    assert env.proc is None
    env.errlog = open(env.errlog_path, "a")
    e = dict(os.environ)
    e.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.proc = subprocess.Popen([e2elib.SANDBOXD, "--config", env.config, "--log-level",
                                 env.log_level], stdout=env.errlog, stderr=env.errlog, env=e)
    deadline = time.time() + 30
    while time.time() < deadline:
        if env.proc.poll() is not None:
            raise RuntimeError(f"sandboxd exited {env.proc.returncode}:\n{env.daemon_log()[-5000:]}")
        try:
            c = e2elib.Client(env.socket, timeout=10)
            st = c.call("daemon.status")
            c.close()
            # Sandboxes are usable again once the first reconcile re-attached them.
            if (st.get("reconcile") or {}).get("runs", 1) >= 1:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("sandboxd did not come up:\n" + env.daemon_log()[-5000:])


def restart(env):
    assert env.stop_daemon() == 0, env.daemon_log()[-5000:]
    relaunch(env)


class McpError(Exception):
    def __init__(self, err):
        super().__init__(f"{err.get('code')} {err.get('message')}")
        self.code = err.get("code")
        self.err = err


class Mcp:
    """`sandboxctl mcp ARGS` with pipes; replies matched by id, notifications kept."""

    def __init__(self, socket, *args, timeout=120):
        self.timeout = timeout
        self.proc = subprocess.Popen([SANDBOXCTL, "--socket", socket, "mcp", *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.lines = queue.Queue()
        self.replies = {}
        self.notes = []
        self.next_id = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.errtext = []
        self.errreader = threading.Thread(target=self._read_err, daemon=True)
        self.errreader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def _read_err(self):
        for line in self.proc.stderr:
            self.errtext.append(line.decode(errors="replace"))

    def send_raw(self, text):
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def send(self, method, params=None, notify=False):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if not notify:
            self.next_id += 1
            msg["id"] = self.next_id
        self.send_raw(json.dumps(msg))
        return msg.get("id")

    def next_message(self, timeout=None):
        m = self.lines.get(timeout=timeout or self.timeout)
        assert m is not None, "sandboxctl mcp closed its output:\n" + "".join(self.errtext)
        return m

    def wait(self, i, timeout=None):
        deadline = time.time() + (timeout or self.timeout)
        while i not in self.replies:
            left = deadline - time.time()
            assert left > 0, f"no reply to {i}"
            m = self.next_message(left)
            if isinstance(m, dict) and "id" in m and ("result" in m or "error" in m):
                self.replies[m["id"]] = m
            else:
                self.notes.append(m)
        m = self.replies.pop(i)
        if "error" in m:
            raise McpError(m["error"])
        return m["result"]

    def request(self, method, params=None, timeout=None):
        return self.wait(self.send(method, params), timeout)

    def error(self, method, params=None):
        try:
            r = self.request(method, params)
        except McpError as e:
            return e
        raise AssertionError(f"{method} succeeded: {r}")

    def initialize(self, version="2025-06-18"):
        r = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "test", "version": "1"}})
        self.send("notifications/initialized", notify=True)
        return r

    def tools(self):
        return {t["name"]: t for t in self.request("tools/list")["tools"]}

    def call(self, name, args=None, timeout=None):
        params = {"name": name}
        if args is not None:
            params["arguments"] = args
        return self.request("tools/call", params, timeout)

    def ok(self, name, args=None, timeout=None):
        r = self.call(name, args, timeout)
        assert r.get("isError") is False, (name, args, r)
        return r

    def fails(self, name, args=None, timeout=None):
        r = self.call(name, args, timeout)
        assert r.get("isError") is True, (name, args, r)
        return text(r)

    def close(self, timeout=60):
        """Closes its input; returns the exit status."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(5)
        self.errreader.join(5)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def text(result):
    return "\n".join(c["text"] for c in result["content"] if c["type"] == "text")


def tool_env(extra=None):
    """The environment for a client's own toolchain (go, node, npm): this one without the
    sanitizer settings, which are for the C programs, plus extra."""
    e = dict(os.environ)
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        e.pop(k, None)
    e.update(extra or {})
    return e


def sh(args, cwd, env, timeout=300):
    """Runs a client's tool in cwd; its output, asserting that it succeeded."""
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"{' '.join(args)} exited {p.returncode}:\n{out}"
    return out


free_port = e2elib.free_port  # a loopback TCP port free now (for [preview] listen)
