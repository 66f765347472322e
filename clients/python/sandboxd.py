"""Python client of sandboxd: ephemeral Linux sandboxes over JSON-RPC 2.0 on a Unix socket.

One file, standard library only (Python 3.7 or newer). The wire contract is sandboxd's
docs/protocol.md; `Client.discover()` returns the daemon's own OpenRPC document.

    import sandboxd

    client = sandboxd.Client()                 # $SANDBOXD_SOCKET, else /run/sandboxd.sock
    with client.create(ttl_s=600) as sb:       # destroyed when the block ends
        res = sb.exec("uname -a")
        print(res.exit_code, res.stdout)
        sb.write_file("/root/hello.txt", "hello\\n")
        data = sb.read_file("/root/hello.txt")  # bytes

Threads: a Client holds one connection and a reader thread; calls from any number of threads
run concurrently on it and their replies are matched by id. When the connection closes (the
daemon restarted, or closed it after 5 idle minutes) the calls in flight raise ConnectionLost
(or the daemon's own error, such as ShuttingDown, when it sent one), and the next call opens a
new connection.

asyncio: `sandboxd.AsyncClient` (sandboxd_async.py, beside this file) has the same surface,
every call a coroutine, usable with `async with`. Every call of both takes timeout= (seconds).

Errors: every error the daemon returns is raised as the subclass of `sandboxd.Error` for its
code (`NoSuchSandbox`, `InvalidParams`, ...), with `code`, `message` and `data`.
"""

from __future__ import annotations

import array
import base64
import itertools
import json
import os
import queue
import select
import socket as _socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

__all__ = [
    "Client", "Sandbox", "Process", "Forward", "Preview", "ExecResult", "ExecStream",
    "OutputChunk", "Method",
    "Error", "ConnectionLost", "Unavailable", "ParseError", "InvalidRequest", "MethodNotFound",
    "InvalidParams", "InternalError", "NoSuchSandbox", "BadState", "QuotaExceeded",
    "ProxmoxError", "SSHError", "DeadlineExceeded", "Busy", "PermissionDenied", "FileError",
    "IdempotencyMismatch", "ShuttingDown", "ForkIncomplete", "AsyncClient",
]


def __getattr__(name: str) -> Any:
    # The asyncio client (sandboxd_async.py, beside this file), loaded on first use.
    if name in ("AsyncClient", "AsyncSandbox", "AsyncProcess", "AsyncExecStream", "AsyncForward",
                "AsyncPreview"):
        import sandboxd_async
        return getattr(sandboxd_async, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

DEFAULT_SOCKET = "/run/sandboxd.sock"
_TREE_TIMEOUT_MS = 24 * 3600 * 1000  # a tree transfer's exec: the largest exec timeout
_CLOSE_WAIT_S = 5.0  # for the reader to see the end of a connection a send failed on

Data = Union[bytes, str]


class Method:
    """Every method name this client sends, in one place (docs/protocol.md). `rpc.discover`
    tells which of them a daemon offers; process.* are reserved names in docs/protocol.md and
    answer MethodNotFound until the daemon has them."""

    CREATE = "sandbox.create"
    GET = "sandbox.get"
    LIST = "sandbox.list"
    RENEW = "sandbox.renew"
    RESIZE = "sandbox.resize"
    SET_INTERNET = "sandbox.set_internet"
    DESTROY = "sandbox.destroy"
    EXEC = "sandbox.exec"
    FILE_WRITE = "file.write"
    FILE_READ = "file.read"
    FILE_LIST = "file.list"
    FILE_STAT = "file.stat"
    FILE_REMOVE = "file.remove"
    FILE_MKDIR = "file.mkdir"
    FILE_RENAME = "file.rename"
    PROCESS_START = "process.start"
    PROCESS_READ = "process.read"
    PROCESS_WRITE = "process.write"
    PROCESS_WAIT = "process.wait"
    PROCESS_KILL = "process.kill"
    PROCESS_RESIZE = "process.resize"
    PROCESS_LIST = "process.list"
    FORWARD = "sandbox.forward"
    FORWARDS = "sandbox.forwards"
    UNFORWARD = "sandbox.unforward"
    PREVIEW = "sandbox.preview"
    PREVIEWS = "sandbox.previews"
    UNPREVIEW = "sandbox.unpreview"
    SNAPSHOT = "sandbox.snapshot"
    SNAPSHOTS = "sandbox.snapshots"
    ROLLBACK = "sandbox.rollback"
    PAUSE = "sandbox.pause"
    RESUME = "sandbox.resume"
    SNAPSHOT_DELETE = "sandbox.snapshot_delete"
    FORK = "sandbox.fork"
    TEMPLATE_LIST = "template.list"
    TEMPLATE_CREATE = "template.create"
    TEMPLATE_DELETE = "template.delete"
    TEMPLATE_PUBLISH = "template.publish"
    VOLUME_CREATE = "volume.create"
    VOLUME_LIST = "volume.list"
    VOLUME_DELETE = "volume.delete"
    ATTACH = "sandbox.attach"
    DETACH = "sandbox.detach"
    STATUS = "daemon.status"
    DISCOVER = "rpc.discover"
    EXEC_OUTPUT = "exec.output"  # the notification a streaming exec sends


# ---- errors ------------------------------------------------------------------------------


class Error(Exception):
    """An error from sandboxd (or from the connection to it). `code` is the JSON-RPC error
    code (None for connection errors), `data` the error's data (a dict; sandboxd's own errors
    always carry "reason")."""

    code: Optional[int] = None

    def __init__(self, message: str, code: Optional[int] = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.data: Dict[str, Any] = data if isinstance(data, dict) else (
            {} if data is None else {"value": data})

    @property
    def reason(self) -> Optional[str]:
        """What was wrong, a sentence naming its subject (`unknown parameter "foo"`,
        `ttl_s must be 1..86400 (max_ttl_s)`, `to /tmp/d: Is a directory`)."""
        return self.data.get("reason")

    @property
    def param(self) -> Optional[str]:
        """InvalidParams: the parameter at fault (data["param"]); data may also hold
        "variable" (an env variable), "min", "max" and "cap" (the operator's key)."""
        return self.data.get("param")

    @property
    def path(self) -> Optional[str]:
        """FileError: the file (data["path"]); for file.rename data["side"] says which of
        "from" and "to" it is."""
        return self.data.get("path")

    def __str__(self) -> str:
        text = self.message
        if self.code is not None:
            text = f"{text} ({self.code})"
        if self.reason:
            text = f"{text}: {self.reason}"
        return text


class ConnectionLost(Error):
    """The connection closed while the call was in flight: the call may or may not have taken
    effect. The next call opens a new connection."""


class Unavailable(Error):
    """The daemon's socket cannot be reached (not running, or no permission to use it)."""


class _NotSent(ConnectionLost):
    """The connection was found closed before the request was sent."""


class ParseError(Error):
    code = -32700


class InvalidRequest(Error):
    code = -32600


class MethodNotFound(Error):
    code = -32601


class InvalidParams(Error):
    """data: {"reason", "param"} names the parameter."""
    code = -32602


class InternalError(Error):
    code = -32603


class NoSuchSandbox(Error):
    code = -32001


class BadState(Error):
    """data: {"state"}."""
    code = -32002


class QuotaExceeded(Error):
    code = -32003


class ProxmoxError(Error):
    code = -32004


class SSHError(Error):
    code = -32005


class DeadlineExceeded(Error):
    code = -32006


class Busy(Error):
    code = -32007


class PermissionDenied(Error):
    code = -32008


class FileError(Error):
    """data: {"errno": "ENOENT" | "EACCES" | ...}."""
    code = -32009


class IdempotencyMismatch(Error):
    code = -32010


class ShuttingDown(Error):
    code = -32011


class ForkIncomplete(Error):
    """sandbox.fork made some children and some failed (rolled back): `sandboxes` holds the
    children made (live sandboxes of the caller), `failed` how many failed; `reason` says why
    the first one failed."""

    def __init__(self, sandboxes: List[Any], failed: int, reason: str) -> None:
        super().__init__("some fork children failed", None, {"reason": reason, "failed": failed})
        self.sandboxes = sandboxes
        self.failed = failed


def _fork_params(count: int, snapshot: Optional[str], ttl_s: Optional[int]) -> Dict[str, Any]:
    kw: Dict[str, Any] = {"count": int(count)}
    if snapshot is not None:
        kw["snapshot"] = snapshot
    if ttl_s is not None:
        kw["ttl_s"] = int(ttl_s)
    return kw


def _forked(r: Mapping[str, Any], wrap: Any) -> List[Any]:
    children = [wrap(i) for i in r.get("sandboxes") or []]
    if r.get("failed"):
        raise ForkIncomplete(children, int(r["failed"]), r.get("reason") or "")
    return children


_ERRORS: Dict[int, type] = {c.code: c for c in (
    ParseError, InvalidRequest, MethodNotFound, InvalidParams, InternalError, NoSuchSandbox,
    BadState, QuotaExceeded, ProxmoxError, SSHError, DeadlineExceeded, Busy, PermissionDenied,
    FileError, IdempotencyMismatch, ShuttingDown)}


def _error(err: Any) -> Error:
    if not isinstance(err, dict):
        return Error(f"malformed error: {err!r}")
    code = err.get("code")
    cls = _ERRORS.get(code, Error) if isinstance(code, int) else Error
    return cls(str(err.get("message") or "error"), code if isinstance(code, int) else None,
               err.get("data"))


# ---- binary data: `name` (UTF-8 text) or `name_b64` -------------------------------------


def _put_data(params: Dict[str, Any], name: str, data: Data) -> None:
    if isinstance(data, str):
        params[name] = data
        return
    try:
        params[name] = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        params[name + "_b64"] = base64.b64encode(data).decode("ascii")


def _get_data(obj: Mapping[str, Any], name: str) -> Optional[bytes]:
    if isinstance(obj.get(name), str):
        return obj[name].encode("utf-8")
    if isinstance(obj.get(name + "_b64"), str):
        return base64.b64decode(obj[name + "_b64"])
    return None


# ---- the connection ----------------------------------------------------------------------


class _Call:
    def __init__(self, stream: bool) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: Optional[Error] = None
        self.chunks: Optional["queue.Queue[Any]"] = queue.Queue() if stream else None

    def finish(self, result: Any = None, error: Optional[Error] = None) -> None:
        self.result, self.error = result, error
        self.done.set()
        if self.chunks is not None:
            self.chunks.put(None)


class _Connection:
    """One socket and its reader thread; requests are matched to replies by id."""

    def __init__(self, path: str) -> None:
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            self.sock.connect(path)
        except OSError as e:
            self.sock.close()
            raise Unavailable(f"cannot connect to sandboxd at {path}: {e.strerror or e}") from e
        self.send_lock = threading.Lock()
        self.lock = threading.Lock()
        self.calls: Dict[int, _Call] = {}
        self.ids = itertools.count(1)
        self.closed = False
        self.close_error: Optional[Dict[str, Any]] = None  # an error the daemon sent, id null
        self.reader = threading.Thread(target=self._read, name="sandboxd-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        why = "sandboxd closed the connection"
        try:
            f = self.sock.makefile("rb")
            for line in f:
                if line.strip():
                    self._dispatch(json.loads(line))
        except (OSError, ValueError) as e:
            why = f"connection to sandboxd failed: {e}"
        with self.lock:
            self.closed = True
            calls, self.calls = self.calls, {}
            err = self.close_error
        for call in calls.values():
            call.finish(error=_error(err) if err else ConnectionLost(why))
        try:
            self.sock.close()
        except OSError:
            pass

    def _dispatch(self, msg: Any) -> None:
        if not isinstance(msg, dict):
            return
        if msg.get("method") == Method.EXEC_OUTPUT:
            p = msg.get("params") or {}
            with self.lock:
                call = self.calls.get(p.get("request_id"))
            if call is not None and call.chunks is not None:
                call.chunks.put(OutputChunk(p.get("stream", "stdout"), _get_data(p, "data") or b""))
            return
        if "method" in msg:
            return
        rid = msg.get("id")
        if rid is None:
            # Not tied to a request (a line over the daemon's limit, a connection over a
            # cap): the daemon closes the connection next, and the calls in flight get this.
            if "error" in msg:
                with self.lock:
                    self.close_error = msg["error"]
            return
        with self.lock:
            call = self.calls.pop(rid, None)
        if call is None:
            return
        if "error" in msg:
            call.finish(error=_error(msg["error"]))
        else:
            call.finish(result=msg.get("result"))

    def start(self, method: str, params: Optional[Mapping[str, Any]], stream: bool = False,
              fds: Sequence[int] = ()) -> _Call:
        call = _Call(stream)
        with self.lock:
            if self.closed:
                raise _NotSent("connection closed")
            rid = next(self.ids)
            self.calls[rid] = call
        req: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            req["params"] = dict(params)
        line = json.dumps(req, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        try:
            with self.send_lock:
                if fds:
                    # Descriptors travel with the line, alone in one sendmsg().
                    n = self.sock.sendmsg([line], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                                                    array.array("i", fds))])
                    if n < len(line):
                        self.sock.sendall(line[n:])
                else:
                    self.sock.sendall(line)
        except OSError as e:
            with self.lock:
                self.calls.pop(rid, None)
            # Part of the line at most reached the daemon, which never runs a partial line.
            # It may have said why it stopped reading (a line over its limit): wait for that.
            self.close()
            if threading.current_thread() is not self.reader:
                self.reader.join(_CLOSE_WAIT_S)
            if self.close_error is not None:
                raise _error(self.close_error) from e
            raise _NotSent(f"sending {method}: {e}") from e
        return call

    def close(self) -> None:
        try:
            self.sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass


def _drain(fd: int, deadline: Optional[float]) -> bytes:
    """Everything read from fd until its end (before the monotonic deadline, if any)."""
    parts: List[bytes] = []
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not select.select([fd], [], [], left)[0]:
            raise TimeoutError("no reply from sandboxd in time (the request still runs there)")
        data = os.read(fd, 1 << 20)
        if not data:
            return b"".join(parts)
        parts.append(data)


def _wait(call: _Call, timeout: Optional[float]) -> Any:
    if not call.done.wait(timeout):
        raise TimeoutError("no reply from sandboxd in time (the request still runs there)")
    if call.error is not None:
        raise call.error
    return call.result


# ---- results -----------------------------------------------------------------------------


@dataclass
class OutputChunk:
    """Output of a streaming exec as it arrives: stream is "stdout" or "stderr"."""
    stream: str
    data: bytes


@dataclass
class ExecResult:
    exit_code: Optional[int]  # None when a signal ended the command
    signal: Optional[str]     # "SIGKILL", ...
    timed_out: bool
    stdout_bytes: bytes
    stderr_bytes: bytes
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", errors="replace")

    @property
    def output(self) -> str:
        """stdout, then stderr."""
        return (self.stdout_bytes + self.stderr_bytes).decode("utf-8", errors="replace")

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @classmethod
    def _from(cls, r: Mapping[str, Any], stdout: Optional[bytes] = None,
              stderr: Optional[bytes] = None) -> "ExecResult":
        return cls(exit_code=r.get("exit_code"), signal=r.get("signal"),
                   timed_out=bool(r.get("timed_out")),
                   stdout_bytes=stdout if stdout is not None else _get_data(r, "stdout") or b"",
                   stderr_bytes=stderr if stderr is not None else _get_data(r, "stderr") or b"",
                   stdout_truncated=bool(r.get("stdout_truncated")),
                   stderr_truncated=bool(r.get("stderr_truncated")),
                   duration_ms=int(r.get("duration_ms") or 0), raw=dict(r))


class ExecStream:
    """Iterate for OutputChunk values while the command runs; afterwards `result` holds the
    ExecResult (with the whole output). `wait()` does both. With a timeout, TimeoutError is
    raised when the command has not ended that many seconds after it was sent."""

    def __init__(self, call: _Call, timeout: Optional[float] = None) -> None:
        self._call = call
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._out: Dict[str, List[bytes]] = {"stdout": [], "stderr": []}
        self.result: Optional[ExecResult] = None

    def __iter__(self) -> Iterator[OutputChunk]:
        assert self._call.chunks is not None
        while self.result is None:
            left = None if self._deadline is None else max(0.0, self._deadline - time.monotonic())
            try:
                chunk = self._call.chunks.get(timeout=left)
            except queue.Empty:
                raise TimeoutError("sandboxd: the command has not ended in time (it still "
                                   "runs there)") from None
            if chunk is None:
                r = _wait(self._call, None)
                self.result = ExecResult._from(r, b"".join(self._out["stdout"]),
                                               b"".join(self._out["stderr"]))
                return
            self._out.setdefault(chunk.stream, []).append(chunk.data)
            yield chunk

    def wait(self) -> ExecResult:
        for _ in self:
            pass
        assert self.result is not None
        return self.result


# ---- the client --------------------------------------------------------------------------


class Client:
    """A connection to sandboxd, opened on first use and again after it closed."""

    def __init__(self, socket: Optional[str] = None, timeout: Optional[float] = None) -> None:
        self.socket = socket or os.environ.get("SANDBOXD_SOCKET") or DEFAULT_SOCKET
        self.timeout = timeout  # seconds to wait for a reply; None: as long as it takes
        self._lock = threading.Lock()
        self._conn: Optional[_Connection] = None
        self._doc: Optional[Dict[str, Any]] = None

    def _connection(self) -> _Connection:
        with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = _Connection(self.socket)
            return self._conn

    def _start(self, method: str, params: Optional[Mapping[str, Any]], stream: bool,
               fds: Sequence[int] = ()) -> _Call:
        try:
            return self._connection().start(method, params, stream, fds)
        except _NotSent:
            # The connection closed just before: nothing reached the daemon.
            return self._connection().start(method, params, stream, fds)

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None,
             timeout: Optional[float] = None, fds: Sequence[int] = ()) -> Any:
        """Calls any method; returns its result or raises its Error. fds: open descriptors
        passed with the request (SCM_RIGHTS), named by index in params (content_fd, to_fd,
        stdin_fd, stdout_fd, stderr_fd); the daemon closes its copies, the caller keeps
        its own."""
        call = self._start(method, params, False, fds)
        return _wait(call, timeout if timeout is not None else self.timeout)

    def _stream(self, method: str, params: Mapping[str, Any]) -> _Call:
        return self._start(method, params, True)

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the daemon
    def status(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        return self.call(Method.STATUS, timeout=timeout)

    def discover(self) -> Dict[str, Any]:
        """The daemon's OpenRPC document (fetched once per client)."""
        if self._doc is None:
            self._doc = self.call(Method.DISCOVER)
        return self._doc

    def offers(self, method: str) -> bool:
        return any(m.get("name") == method for m in self.discover().get("methods", []))

    @property
    def limits(self) -> Dict[str, Any]:
        """The daemon's published limits (x-limits of its OpenRPC document)."""
        return dict(self.discover().get("x-limits") or {})

    # -- sandboxes
    def create(self, *, env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
               **params: Any) -> "Sandbox":
        """sandbox.create: template, hostname, cores, memory_mb, disk_gb, net_rate_mbps (a
        bandwidth cap in Mbit/s, 0: none), internet (True, False, or {"allow": ["203.0.113.0/24:443", ...]}: an
        egress allow-list), ttl_s, labels, idempotency_key, node (admins, per the daemon's node_param), env (variables
        every later exec and process of the sandbox gets; secrets welcome: the daemon never
        returns them, `sb.env_names` lists the names), volumes ([{"name", "path",
        "read_only"?}]: the caller's volumes, mounted at path before the first start; a
        sandbox with volumes is never from the warm pool). Returns once the sandbox is ready
        (from the daemon's warm pool when it keeps one for the template)."""
        if env is not None:
            params["env"] = dict(env)
        return Sandbox(self, self.call(Method.CREATE, params, timeout))

    def get(self, id: str, timeout: Optional[float] = None) -> "Sandbox":
        return Sandbox(self, self.call(Method.GET, {"id": id}, timeout))

    def list(self, *, timeout: Optional[float] = None, **params: Any) -> List["Sandbox"]:
        """sandbox.list: all (admins), labels (filter)."""
        return [Sandbox(self, s) for s in self.call(Method.LIST, params, timeout)["sandboxes"]]

    # -- templates
    def templates(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """template.list: the templates the caller may use (name, node, vmid, origin,
        owner_uid, published, defaults, used_by)."""
        return self.call(Method.TEMPLATE_LIST, None, timeout)["templates"]

    def make_template(self, id: str, name: str, timeout: Optional[float] = None, *,
                      defaults: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """template.create: sandbox id becomes template name (the sandbox ends). defaults:
        {env, cwd, user} every exec and process of its sandboxes gets unless the call gives
        its own."""
        params: Dict[str, Any] = {"id": id, "name": name}
        if defaults:
            params["defaults"] = dict(defaults)
        return self.call(Method.TEMPLATE_CREATE, params, timeout)["template"]

    def build_template(self, name: str, dockerfile_text: str, context_dir: str = ".",
                       internet: bool = False,
                       out: Optional[Callable[[str, bytes], None]] = None) -> Dict[str, Any]:
        """Template name built from a Dockerfile subset (FROM, RUN, COPY, ENV, WORKDIR, USER)
        as `sandboxctl template build` does: COPY reads context_dir; each step's "Step N/M"
        line and RUN's output go to out(stream, data) (default: this process's stdout and
        stderr); ENV, WORKDIR and USER become its defaults. Raises BuildFileError (with
        `line`) before anything is made, BuildStepError (with `step`, `line`) after
        destroying the build sandbox. Needs sandboxd_build.py beside this file."""
        import sandboxd_build
        return sandboxd_build.build_template(self, name, dockerfile_text, context_dir, internet,
                                             out)

    def delete_template(self, name: str, timeout: Optional[float] = None) -> None:
        """template.delete: refused (BadState) while sandboxes or pool members use it."""
        self.call(Method.TEMPLATE_DELETE, {"name": name}, timeout)

    def publish_template(self, name: str, timeout: Optional[float] = None) -> Dict[str, Any]:
        """template.publish (admins): every uid may use it."""
        return self.call(Method.TEMPLATE_PUBLISH, {"name": name}, timeout)["template"]

    # -- volumes
    def create_volume(self, name: str, size_gb: int,
                      timeout: Optional[float] = None) -> Dict[str, Any]:
        """volume.create: a volume of size_gb GiB owned by the caller, storage that outlives
        sandboxes: {name, size_gb, owner_uid, attached_to}."""
        return self.call(Method.VOLUME_CREATE, {"name": name, "size_gb": size_gb},
                         timeout)["volume"]

    def volumes(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """volume.list: the caller's volumes (admins: all), by name."""
        return self.call(Method.VOLUME_LIST, None, timeout)["volumes"]

    def delete_volume(self, name: str, timeout: Optional[float] = None) -> None:
        """volume.delete: the volume and its data; refused (BadState) while attached."""
        self.call(Method.VOLUME_DELETE, {"name": name}, timeout)


class Sandbox:
    """One sandbox. Attributes mirror the sandbox object of docs/protocol.md; `info` is the
    last one received. As a context manager it is destroyed when the block ends."""

    def __init__(self, client: Client, info: Mapping[str, Any]) -> None:
        self.client = client
        self.info: Dict[str, Any] = dict(info)

    def __getattr__(self, name: str) -> Any:
        info = self.__dict__.get("info") or {}
        if name in info:
            return info[name]
        raise AttributeError(name)

    @property
    def id(self) -> str:
        return self.info["id"]

    @property
    def ip(self) -> Optional[str]:
        return self.info.get("ip")

    def __repr__(self) -> str:
        return f"<Sandbox {self.id} {self.info.get('state')} ip={self.ip}>"

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()

    def _call(self, method: str, timeout: Optional[float] = None, **params: Any) -> Any:
        return self.client.call(method, {"id": self.id, **params}, timeout)

    def _update(self, info: Mapping[str, Any]) -> "Sandbox":
        self.info = dict(info)
        return self

    def refresh(self, timeout: Optional[float] = None) -> "Sandbox":
        return self._update(self._call(Method.GET, timeout))

    def set_internet(self, enabled: bool, wait: bool = False,
                     wait_timeout_s: Optional[int] = None,
                     timeout: Optional[float] = None,
                     allow: Optional[List[str]] = None) -> "Sandbox":
        """Proxmox enforces the change at its next firewall cycle (info["effective_by"]);
        wait=True returns only once a probe from inside the sandbox confirms it. allow (with
        enabled): an allow-list (CIDR[:PORT] and domain-name entries) instead of HTTP, HTTPS and DNS; the list
        in force is info["internet_allow"]."""
        kw: Dict[str, Any] = {"enabled": bool(enabled)}
        if allow is not None:
            kw["allow"] = list(allow)
        if wait:
            kw["wait"] = True
        if wait_timeout_s is not None:
            kw["wait_timeout_s"] = int(wait_timeout_s)
        return self._update(self._call(Method.SET_INTERNET, timeout, **kw))

    def renew(self, ttl_s: int, timeout: Optional[float] = None) -> "Sandbox":
        return self._update(self._call(Method.RENEW, timeout, ttl_s=int(ttl_s)))

    def resize(self, cores: Optional[int] = None, memory_mb: Optional[int] = None,
               disk_gb: Optional[int] = None, timeout: Optional[float] = None,
               net_rate_mbps: Optional[int] = None) -> "Sandbox":
        """sandbox.resize: cores, memory and the bandwidth cap (net_rate_mbps, Mbit/s, 0:
        none) applied live, the disk only grows."""
        p = {k: int(v) for k, v in (("cores", cores), ("memory_mb", memory_mb),
                                    ("disk_gb", disk_gb), ("net_rate_mbps", net_rate_mbps))
             if v is not None}
        return self._update(self._call(Method.RESIZE, timeout, **p))

    def destroy(self, timeout: Optional[float] = None, wait: bool = True) -> None:
        """Destroy the sandbox; wait=False returns once the destroy has begun."""
        r = self._call(Method.DESTROY, timeout, **({} if wait else {"wait": False}))
        self.info["state"] = r.get("state", "destroyed") if isinstance(r, dict) else "destroyed"

    # -- commands
    def _exec_params(self, command: Union[str, Sequence[str]], stdin: Optional[Data],
                     kw: Dict[str, Any]) -> Dict[str, Any]:
        params: Dict[str, Any] = {"id": self.id, **kw}
        if isinstance(command, str):
            params["command"] = command
        else:
            params["argv"] = list(command)
        if stdin is not None:
            _put_data(params, "stdin", stdin)
        return params

    def exec(self, command: Union[str, Sequence[str]], *, stdin: Optional[Data] = None,
             timeout: Optional[float] = None, **kw: Any) -> ExecResult:
        """Runs command (a string for /bin/sh -c, or an argv list) and waits for it. Keyword
        arguments are sandbox.exec's: env, cwd, user (a name or uid in the container),
        timeout_ms, max_output_bytes. timeout (seconds)
        bounds this client's wait for the reply, as on every call."""
        return ExecResult._from(self.client.call(Method.EXEC,
                                                 self._exec_params(command, stdin, kw), timeout))

    def exec_stream(self, command: Union[str, Sequence[str]], *, stdin: Optional[Data] = None,
                    timeout: Optional[float] = None, **kw: Any) -> ExecStream:
        """Like exec, with the output delivered as it arrives: iterate the returned ExecStream
        for OutputChunk values, then read its `result`."""
        params = self._exec_params(command, stdin, kw)
        params["stream"] = True
        timeout = timeout if timeout is not None else self.client.timeout
        return ExecStream(self.client._stream(Method.EXEC, params), timeout)

    # -- files
    def write_file(self, path: str, data: Union[Data, IO[Any]], *,
                   mode: Optional[Union[int, str]] = None,
                   make_parents: Optional[bool] = None, offset: Optional[int] = None,
                   append: bool = False, timeout: Optional[float] = None) -> int:
        """Replaces the file at path atomically; returns the bytes written. With offset (or
        append) the data is written into the file in place at that byte offset (or at its
        end) instead: not atomic, and a missing file is created with mode. data may be an
        open file object (anything with fileno(): a file, a pipe, a socket): it is passed to
        the daemon as a descriptor and read from its current position to its end, with no
        size limit and nothing held in memory (not with offset or append)."""
        if hasattr(data, "fileno"):
            params_fd: Dict[str, Any] = {"id": self.id, "path": path, "content_fd": 0}
            if mode is not None:
                params_fd["mode"] = mode if isinstance(mode, str) else format(mode, "04o")
            if make_parents is not None:
                params_fd["make_parents"] = bool(make_parents)
            if offset is not None:
                params_fd["offset"] = offset
            if append:
                params_fd["append"] = True
            return self.client.call(Method.FILE_WRITE, params_fd, timeout,
                                    [data.fileno()])["bytes"]
        size = len(data.encode("utf-8")) if isinstance(data, str) else len(data)
        limit = self.client.limits.get("data_max_bytes")
        if isinstance(limit, int) and size > limit:
            raise InvalidParams("Invalid params", InvalidParams.code,
                                {"param": "content", "reason": f"larger than {limit} bytes"})
        params: Dict[str, Any] = {"path": path}
        _put_data(params, "content", data)
        if mode is not None:
            params["mode"] = mode if isinstance(mode, str) else format(mode, "04o")
        if make_parents is not None:
            params["make_parents"] = bool(make_parents)
        if offset is not None:
            params["offset"] = offset
        if append:
            params["append"] = True
        return self._call(Method.FILE_WRITE, timeout, **params)["bytes"]

    def read_file(self, path: str, offset: int = 0, length: Optional[int] = None,
                  timeout: Optional[float] = None) -> bytes:
        """The file's bytes from offset: all of them, or at most length. They come through a
        pipe passed to the daemon as a descriptor (file.read with to_fd): no base64 and one
        request whatever the size. When the daemon has no transfer slot free (Busy), the
        file is read in file.read chunks instead."""
        timeout = timeout if timeout is not None else self.client.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        params: Dict[str, Any] = {"id": self.id, "path": path, "to_fd": 0, "offset": offset}
        if length is not None:
            params["length"] = length
        rfd, wfd = os.pipe()
        try:
            try:
                call = self.client._start(Method.FILE_READ, params, False, [wfd])
            finally:
                os.close(wfd)
            out = _drain(rfd, deadline)
        finally:
            os.close(rfd)
        try:
            _wait(call, None if deadline is None else max(0.0, deadline - time.monotonic()))
        except Busy:
            if out:
                raise
            return self._read_chunks(path, offset, length, timeout)
        return out

    def _read_chunks(self, path: str, offset: int, length: Optional[int],
                     timeout: Optional[float]) -> bytes:
        out = bytearray()
        while True:
            params: Dict[str, Any] = {"path": path, "offset": offset + len(out)}
            if length is not None:
                params["length"] = length - len(out)
            r = self._call(Method.FILE_READ, timeout, **params)
            chunk = _get_data(r, "content") or b""
            out += chunk
            if r.get("eof") or not chunk or (length is not None and len(out) >= length):
                return bytes(out)

    def read_file_into(self, path: str, f: IO[Any], offset: int = 0,
                       length: Optional[int] = None, timeout: Optional[float] = None) -> int:
        """Writes the file's bytes from offset (all of them, or at most length) into the open
        file object f, passed to the daemon as a descriptor: no size limit, nothing held in
        memory. Returns the bytes written."""
        if hasattr(f, "flush"):
            f.flush()
        params: Dict[str, Any] = {"id": self.id, "path": path, "to_fd": 0, "offset": offset}
        if length is not None:
            params["length"] = length
        return self.client.call(Method.FILE_READ, params, timeout, [f.fileno()])["bytes"]

    def upload_dir(self, local: str, remote: str, timeout: Optional[float] = None) -> None:
        """Copies the folder local into the folder remote (made when missing), as
        `sandboxctl put -r` does: a tar stream from a local tar through a descriptor passed to
        a tar in the sandbox, keeping symbolic links, modes and empty folders."""
        if not os.path.isdir(local):
            raise NotADirectoryError(f"{local}: not a folder")
        self._tree(["tar", "-C", local, "-cf", "-", "."],
                   'mkdir -p "$1" && exec tar -C "$1" -xpf -', remote, True, timeout)

    def download_dir(self, remote: str, local: str, timeout: Optional[float] = None) -> None:
        """Copies the folder remote into the folder local (made when missing), as
        `sandboxctl get -r` does (the reverse of upload_dir)."""
        os.makedirs(local, exist_ok=True)
        self._tree(["tar", "-C", local, "-xpf", "-"], 'exec tar -C "$1" -cf - .', remote, False,
                   timeout)

    def _tree(self, argv: List[str], script: str, remote: str, up: bool,
              timeout: Optional[float]) -> None:
        """Runs the local tar argv and the remote script on the two ends of a pipe (up: the
        local tar feeds the remote one)."""
        tar = subprocess.Popen(argv, stdout=subprocess.PIPE if up else None,
                               stdin=None if up else subprocess.PIPE)
        pipe = tar.stdout if up else tar.stdin
        assert pipe is not None
        # as root, as file writes are, whatever the template's default user
        params = {"id": self.id, "argv": ["sh", "-c", script, "sh", remote],
                  "timeout_ms": _TREE_TIMEOUT_MS, "stdin_fd" if up else "stdout_fd": 0,
                  "user": "0"}
        try:
            r = ExecResult._from(self.client.call(Method.EXEC, params, timeout, [pipe.fileno()]))
        except BaseException:
            tar.kill()
            raise
        finally:
            pipe.close()
            status = tar.wait()
        if not r.ok:
            raise FileError("File error", FileError.code, {
                "reason": f"tar in the sandbox failed ({r.exit_code or r.signal}): "
                          f"{r.stderr.strip()}", "path": remote})
        if status != 0:
            raise Error(f"local tar failed (status {status}) for {argv[2]}")

    def list_files(self, path: str, limit: Optional[int] = None,
                   timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """The entries of a folder ({name, type, size, mode, mtime}), sorted by name. A folder
        with more than limit (default and at most 10000) entries raises FileError; use
        list_dir for the truncated listing instead."""
        r = self.list_dir(path, limit, timeout)
        if r["truncated"]:
            raise FileError("File error", FileError.code,
                            {"reason": f"{path} holds more than {len(r['entries'])} entries",
                             "errno": "E2BIG"})
        return r["entries"]

    def list_dir(self, path: str, limit: Optional[int] = None,
                 timeout: Optional[float] = None) -> Dict[str, Any]:
        """file.list as it is: {"entries": [...], "truncated": bool}."""
        return self._call(Method.FILE_LIST, timeout, path=path,
                          **({} if limit is None else {"limit": limit}))

    def stat(self, path: str, follow: bool = False,
             timeout: Optional[float] = None) -> Dict[str, Any]:
        """{name, type, size, mode, mtime, target?}: a symbolic link itself unless follow."""
        return self._call(Method.FILE_STAT, timeout, path=path, **({"follow": True} if follow else {}))

    def remove(self, path: str, recursive: bool = False,
               timeout: Optional[float] = None) -> int:
        """Removes a file, a link, an empty folder or (recursive) a tree, never following a
        link; returns the entries removed."""
        return self._call(Method.FILE_REMOVE, timeout, path=path, recursive=recursive)["removed"]

    def mkdir(self, path: str, parents: bool = False,
              mode: Optional[Union[int, str]] = None, timeout: Optional[float] = None) -> bool:
        """Makes a folder (mode exactly, default 0755); False when parents and it existed."""
        params: Dict[str, Any] = {"path": path, "parents": parents}
        if mode is not None:
            params["mode"] = mode if isinstance(mode, str) else format(mode, "04o")
        return self._call(Method.FILE_MKDIR, timeout, **params)["created"]

    def rename(self, src: str, dst: str, timeout: Optional[float] = None) -> None:
        """Renames src to dst; an existing regular file dst is replaced atomically."""
        self._call(Method.FILE_RENAME, timeout, **{"from": src, "to": dst})

    # -- background processes
    def start_process(self, command: Union[str, Sequence[str]], *,
                      stdin_fd: Optional[Union[int, IO[Any]]] = None,
                      stdout_fd: Optional[Union[int, IO[Any]]] = None,
                      stderr_fd: Optional[Union[int, IO[Any]]] = None,
                      timeout: Optional[float] = None, **kw: Any) -> "Process":
        """process.start; keyword arguments are its params (env, cwd, user, stdin, pty). stdin_fd,
        stdout_fd, stderr_fd: open descriptors (an int, or anything with fileno()) passed to
        the daemon, which feeds stdin_fd into the process's stdin until its end (then closes
        it) and copies the process's output into stdout_fd/stderr_fd as it comes, until the
        process ended; the daemon then closes its copies (the caller keeps and closes its
        own). The call returns once the process runs."""
        params = self._exec_params(command, None, kw)
        fds: List[int] = []
        for name, f in (("stdin_fd", stdin_fd), ("stdout_fd", stdout_fd),
                        ("stderr_fd", stderr_fd)):
            if f is not None:
                params[name] = len(fds)
                fds.append(f if isinstance(f, int) else f.fileno())
        r = self.client.call(Method.PROCESS_START, params, timeout, fds)
        return Process(self, r["process"], r)

    def process(self, process: str) -> "Process":
        """A handle on a background process started before (by any client of this owner)."""
        return Process(self, process, {"process": process})

    def processes(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return self._call(Method.PROCESS_LIST, timeout)["processes"]

    # -- port forwards
    def forward(self, port: int, listen: Optional[str] = None,
                timeout: Optional[float] = None) -> "Forward":
        """sandbox.forward: port of the sandbox on a Unix socket only this uid can open
        (`.socket`), or with listen="127.0.0.1:0" on a loopback TCP port (`.address`), which
        every local user can reach. `.close()` (or the end of a with block) closes it."""
        kw: Dict[str, Any] = {"port": int(port)}
        if listen is not None:
            kw["listen"] = listen
        return Forward(self, self._call(Method.FORWARD, timeout, **kw))

    def forwards(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return self._call(Method.FORWARDS, timeout)["forwards"]

    def preview(self, port: int, ttl_s: Optional[int] = None,
                timeout: Optional[float] = None) -> "Preview":
        """sandbox.preview: a signed URL (`.url`) to port of the sandbox through the daemon's
        preview listener, valid until `.expires_at` (Unix seconds; ttl_s, default the
        operator's), `.close()` or the sandbox's end. Whoever holds the URL reaches the port."""
        kw: Dict[str, Any] = {"port": int(port)}
        if ttl_s is not None:
            kw["ttl_s"] = int(ttl_s)
        return Preview(self, self._call(Method.PREVIEW, timeout, **kw))

    def previews(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return self._call(Method.PREVIEWS, timeout)["previews"]

    # -- snapshots (of the disk; Proxmox keeps them with the container)
    def snapshot(self, name: str, timeout: Optional[float] = None) -> Dict[str, Any]:
        """sandbox.snapshot: {"name", "created_at"}. name: a letter, then letters, digits,
        _ or -, 2..40 characters."""
        return self._call(Method.SNAPSHOT, timeout, name=name)["snapshot"]

    def snapshots(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """sandbox.snapshots: oldest first."""
        return self._call(Method.SNAPSHOTS, timeout)["snapshots"]

    def rollback(self, name: str, timeout: Optional[float] = None) -> "Sandbox":
        """sandbox.rollback: the disk back to snapshot name; the sandbox restarts and is ready
        again (its processes, commands and sessions of before end)."""
        return self._update(self._call(Method.ROLLBACK, timeout, name=name))

    def delete_snapshot(self, name: str, timeout: Optional[float] = None) -> None:
        self._call(Method.SNAPSHOT_DELETE, timeout, name=name)

    def fork(self, count: int = 1, snapshot: Optional[str] = None, ttl_s: Optional[int] = None,
             timeout: Optional[float] = None) -> List["Sandbox"]:
        """sandbox.fork: count (1..32) new sandboxes with this one's disk as of snapshot (or of
        now); this one keeps running. Raises ForkIncomplete (its .sandboxes: those made) when
        some children failed."""
        r = self._call(Method.FORK, timeout, **_fork_params(count, snapshot, ttl_s))
        return _forked(r, lambda i: Sandbox(self.client, i))

    # -- pause and resume (the container stopped, its disk kept)
    def pause(self, timeout: Optional[float] = None) -> "Sandbox":
        """sandbox.pause: the container stops, its disk is kept; `state` "paused" (its
        processes, sessions and forwards end; calls that need it raise BadState until
        resume())."""
        return self._update(self._call(Method.PAUSE, timeout))

    def resume(self, timeout: Optional[float] = None) -> "Sandbox":
        """sandbox.resume: started again, `state` "ready", same disk, host key and address."""
        return self._update(self._call(Method.RESUME, timeout))

    def attach(self, volume: str, path: str, read_only: bool = False,
               timeout: Optional[float] = None) -> "Sandbox":
        """sandbox.attach: the caller's volume mounted at path while the sandbox runs (a mount
        that could not be hot-plugged restarts the sandbox: its processes end)."""
        return self._update(self._call(Method.ATTACH, timeout, volume=volume, path=path,
                                       read_only=read_only))

    def detach(self, volume: str, timeout: Optional[float] = None) -> "Sandbox":
        """sandbox.detach: the volume back to the daemon; the sandbox restarts (its processes,
        sessions and forwards end) and is ready again."""
        return self._update(self._call(Method.DETACH, timeout, volume=volume))


class Process:
    """A background process started with Sandbox.start_process (process.*). It runs on in
    the sandbox when this client goes away; Sandbox.process(id) reaches it again."""

    def __init__(self, sandbox: Sandbox, process: str, info: Mapping[str, Any]) -> None:
        self.sandbox = sandbox
        self.process = process
        self.info = dict(info)

    def _call(self, method: str, timeout: Optional[float] = None, **params: Any) -> Any:
        return self.sandbox._call(method, timeout, process=self.process, **params)

    def read(self, stream: str = "stdout", offset: int = 0, timeout: Optional[float] = None,
             **kw: Any) -> Dict[str, Any]:
        """process.read: {data | data_b64, next_offset, eof, state, exit_code}; `bytes` holds
        the data decoded."""
        r = dict(self._call(Method.PROCESS_READ, timeout, stream=stream, offset=offset, **kw))
        r["bytes"] = _get_data(r, "data") or b""
        return r

    def output(self, stream: str = "stdout", offset: int = 0, follow: bool = False,
               wait_ms: int = 10000) -> Iterator[bytes]:
        """Yields the stream's bytes from offset in order, read by offset (nothing lost or
        doubled): up to what was written so far, or with follow until the process ended and
        everything was read. Bytes dropped by the daemon's output retention are skipped (the
        data starts at the result's `offset`)."""
        while True:
            r = self.read(stream, offset, **({"wait_ms": wait_ms} if follow else {}))
            if r["bytes"]:
                yield r["bytes"]
            offset = r["next_offset"]
            self.info["state"] = r["state"]
            if r["eof"] or (not follow and not r["bytes"]):
                return

    def write(self, data: Data, close: bool = False, timeout: Optional[float] = None) -> Any:
        params: Dict[str, Any] = {"close": close}
        _put_data(params, "data", data)
        return self._call(Method.PROCESS_WRITE, timeout, **params)

    def wait(self, timeout_ms: Optional[int] = None,
             timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._call(Method.PROCESS_WAIT, timeout,
                          **({} if timeout_ms is None else {"timeout_ms": timeout_ms}))

    def kill(self, signal: Optional[str] = None, timeout: Optional[float] = None) -> Any:
        return self._call(Method.PROCESS_KILL, timeout, **({} if signal is None else {"signal": signal}))

    def resize(self, cols: int, rows: int, timeout: Optional[float] = None) -> Any:
        """process.resize: the terminal of a process started with pty takes cols x rows."""
        return self._call(Method.PROCESS_RESIZE, timeout, cols=cols, rows=rows)


class _ForwardInfo:
    """What sandbox.forward returned, for Forward and the asyncio client's AsyncForward."""

    def __init__(self, sandbox: Any, info: Mapping[str, Any]) -> None:
        self.sandbox = sandbox
        self.info = dict(info)
        self.forward: str = info["forward"]
        self.port: int = info["port"]
        self.socket: Optional[str] = info.get("socket")
        self.address: Optional[str] = info.get("address")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.forward} {self.socket or self.address} -> {self.port}>"


class Forward(_ForwardInfo):
    """A port forward (Sandbox.forward): `socket` (a Unix socket's path) or `address`
    ("127.0.0.1:N"), `port` in the sandbox, `forward` its id."""

    sandbox: Sandbox

    def connect(self, timeout: Optional[float] = None) -> _socket.socket:
        """A new connection through the forward (to the sandbox's port)."""
        if self.socket:
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(self.socket)
            return s
        host, port = str(self.address).rsplit(":", 1)
        return _socket.create_connection((host, int(port)), timeout=timeout)

    def close(self, timeout: Optional[float] = None) -> None:
        """sandbox.unforward; a forward already gone (sandbox destroyed) is fine."""
        try:
            self.sandbox._call(Method.UNFORWARD, timeout, forward=self.forward)
        except (InvalidParams, NoSuchSandbox):
            pass

    def __enter__(self) -> "Forward":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Preview:
    """A preview URL (Sandbox.preview): `url`, `port` in the sandbox, `expires_at`, `preview`
    its id. `.close()` (or the end of a with block) revokes it."""

    def __init__(self, sandbox: "Sandbox", info: Mapping[str, Any]) -> None:
        self.sandbox = sandbox
        self.info = dict(info)
        self.preview: str = info["preview"]
        self.port: int = info["port"]
        self.url: str = info["url"]
        self.expires_at: int = info["expires_at"]

    def __repr__(self) -> str:
        return f"<Preview {self.preview} port {self.port}>"

    def close(self, timeout: Optional[float] = None) -> None:
        """sandbox.unpreview; a preview already gone (expired, sandbox destroyed) is fine."""
        try:
            self.sandbox._call(Method.UNPREVIEW, timeout, preview=self.preview)
        except (InvalidParams, NoSuchSandbox):
            pass

    def __enter__(self) -> "Preview":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
