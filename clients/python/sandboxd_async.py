"""The asyncio client of sandboxd (`sandboxd.AsyncClient`): the threaded client's surface, with
every call a coroutine. Import it as `sandboxd.AsyncClient`; this file sits beside sandboxd.py.

    async with sandboxd.AsyncClient() as client:
        async with await client.create(ttl_s=600) as sb:
            res = await sb.exec("uname -a")
            async for chunk in await sb.exec_stream("make"):
                print(chunk.stream, chunk.data)

The connection is a Unix socket driven by the running loop's socket methods (sock_recv,
sock_sendall, and sendmsg when descriptors travel with a request), so descriptors are passed
exactly where the threaded client passes them. Replies and exec.output notifications are
routed to their call by id. Every call takes timeout= (seconds; default: the client's).
"""

from __future__ import annotations

import array
import asyncio
import itertools
import json
import os
import socket as _socket
from typing import IO, Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence, Union

import sandboxd as _s
from sandboxd import (DEFAULT_SOCKET, Busy, ConnectionLost, Data, ExecResult, FileError, InvalidParams,
                      Method, NoSuchSandbox, OutputChunk, Unavailable, _ForwardInfo, _error, _get_data,
                      _put_data)

__all__ = ["AsyncClient", "AsyncSandbox", "AsyncProcess", "AsyncExecStream", "AsyncForward",
           "AsyncPreview"]

_READ_SIZE = 65536


class _Call:
    def __init__(self, stream: bool) -> None:
        self.future: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        # A reply after the caller's timeout is not waited for: its error is dropped.
        self.future.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.chunks: Optional["asyncio.Queue[Any]"] = asyncio.Queue() if stream else None

    def finish(self, result: Any = None, error: Optional[_s.Error] = None) -> None:
        if not self.future.done():
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)
        if self.chunks is not None:
            self.chunks.put_nowait(None)


class _Connection:
    """One non-blocking socket and its reader task; requests are matched to replies by id."""

    def __init__(self, sock: _socket.socket) -> None:
        self.loop = asyncio.get_running_loop()
        self.sock = sock
        self.send_lock = asyncio.Lock()
        self.calls: Dict[int, _Call] = {}
        self.ids = itertools.count(1)
        self.closed = False
        self.close_error: Optional[Dict[str, Any]] = None
        self.reader = self.loop.create_task(self._read())

    @classmethod
    async def open(cls, path: str) -> "_Connection":
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, path)
        except OSError as e:
            sock.close()
            raise Unavailable(f"cannot connect to sandboxd at {path}: {e.strerror or e}") from e
        return cls(sock)

    async def _read(self) -> None:
        why = "sandboxd closed the connection"
        buf = b""
        try:
            while True:
                data = await self.loop.sock_recv(self.sock, _READ_SIZE)
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        self._dispatch(json.loads(line))
        except (OSError, ValueError) as e:
            why = f"connection to sandboxd failed: {e}"
        except asyncio.CancelledError:
            pass
        self.closed = True
        calls, self.calls = self.calls, {}
        for call in calls.values():
            call.finish(error=_error(self.close_error) if self.close_error
                        else ConnectionLost(why))
        self.sock.close()

    def _dispatch(self, msg: Any) -> None:
        if not isinstance(msg, dict):
            return
        if msg.get("method") == Method.EXEC_OUTPUT:
            p = msg.get("params") or {}
            call = self.calls.get(p.get("request_id"))
            if call is not None and call.chunks is not None:
                call.chunks.put_nowait(OutputChunk(p.get("stream", "stdout"),
                                                   _get_data(p, "data") or b""))
            return
        if "method" in msg:
            return
        rid = msg.get("id")
        if rid is None:
            if "error" in msg:
                self.close_error = msg["error"]
            return
        call = self.calls.pop(rid, None)
        if call is None:
            return
        if "error" in msg:
            call.finish(error=_error(msg["error"]))
        else:
            call.finish(result=msg.get("result"))

    async def _sendmsg(self, line: bytes, fds: Sequence[int]) -> int:
        """One sendmsg() with the descriptors; waits for the socket to take it."""
        anc = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))]
        while True:
            try:
                return self.sock.sendmsg([line], anc)
            except (BlockingIOError, InterruptedError):
                ready = self.loop.create_future()
                self.loop.add_writer(self.sock.fileno(), ready.set_result, None)
                try:
                    await ready
                finally:
                    self.loop.remove_writer(self.sock.fileno())

    async def start(self, method: str, params: Optional[Mapping[str, Any]], stream: bool,
                    fds: Sequence[int] = ()) -> _Call:
        if self.closed:
            raise _s._NotSent("connection closed")
        call = _Call(stream)
        rid = next(self.ids)
        self.calls[rid] = call
        req: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            req["params"] = dict(params)
        line = json.dumps(req, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        try:
            async with self.send_lock:
                if fds:
                    n = await self._sendmsg(line, fds)
                    line = line[n:]
                if line:
                    await self.loop.sock_sendall(self.sock, line)
        except OSError as e:
            self.calls.pop(rid, None)
            self.close()
            await asyncio.wait({self.reader}, timeout=_s._CLOSE_WAIT_S)
            if self.close_error is not None:
                raise _error(self.close_error) from e
            raise _s._NotSent(f"sending {method}: {e}") from e
        return call

    def close(self) -> None:
        try:
            self.sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass


async def _wait(call: _Call, timeout: Optional[float]) -> Any:
    try:
        return await asyncio.wait_for(asyncio.shield(call.future), timeout)
    except asyncio.TimeoutError:
        raise TimeoutError("no reply from sandboxd in time (the request still runs there)") \
            from None


async def _drain(fd: int, deadline: Optional[float]) -> bytes:
    """Everything read from fd until its end (before the loop-time deadline, if any)."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    parts: List[bytes] = []
    while True:
        try:
            data = os.read(fd, 1 << 20)
        except BlockingIOError:
            ready = loop.create_future()
            loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
            try:
                left = None if deadline is None else max(0.0, deadline - loop.time())
                await asyncio.wait_for(ready, left)
            except asyncio.TimeoutError:
                raise TimeoutError("no reply from sandboxd in time (the request still runs "
                                   "there)") from None
            finally:
                loop.remove_reader(fd)
            continue
        if not data:
            return b"".join(parts)
        parts.append(data)


class AsyncExecStream:
    """`async for` OutputChunk values while the command runs; afterwards `result` holds the
    ExecResult (with the whole output). `await wait()` does both. With a timeout,
    TimeoutError is raised when the command has not ended that many seconds after it was
    sent."""

    def __init__(self, call: _Call, timeout: Optional[float]) -> None:
        self._call = call
        loop = asyncio.get_running_loop()
        self._deadline = None if timeout is None else loop.time() + timeout
        self._out: Dict[str, List[bytes]] = {"stdout": [], "stderr": []}
        self.result: Optional[ExecResult] = None

    async def __aiter__(self) -> AsyncIterator[OutputChunk]:
        assert self._call.chunks is not None
        while self.result is None:
            left = (None if self._deadline is None
                    else max(0.0, self._deadline - asyncio.get_running_loop().time()))
            try:
                chunk = await asyncio.wait_for(self._call.chunks.get(), left)
            except asyncio.TimeoutError:
                raise TimeoutError("sandboxd: the command has not ended in time (it still "
                                   "runs there)") from None
            if chunk is None:
                r = await _wait(self._call, None)
                self.result = ExecResult._from(r, b"".join(self._out["stdout"]),
                                               b"".join(self._out["stderr"]))
                return
            self._out.setdefault(chunk.stream, []).append(chunk.data)
            yield chunk

    async def wait(self) -> ExecResult:
        async for _ in self:
            pass
        assert self.result is not None
        return self.result


def _mode(mode: Union[int, str]) -> str:
    return mode if isinstance(mode, str) else format(mode, "04o")


class AsyncClient:
    """A connection to sandboxd on the running loop, opened on first use and again after it
    closed. `async with AsyncClient() as client:` closes it at the end."""

    def __init__(self, socket: Optional[str] = None, timeout: Optional[float] = None) -> None:
        self.socket = socket or os.environ.get("SANDBOXD_SOCKET") or DEFAULT_SOCKET
        self.timeout = timeout
        self._lock: Optional[asyncio.Lock] = None
        self._conn: Optional[_Connection] = None
        self._doc: Optional[Dict[str, Any]] = None

    async def _connection(self) -> _Connection:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = await _Connection.open(self.socket)
            return self._conn

    async def _start(self, method: str, params: Optional[Mapping[str, Any]], stream: bool,
                     fds: Sequence[int] = ()) -> _Call:
        try:
            return await (await self._connection()).start(method, params, stream, fds)
        except _s._NotSent:
            return await (await self._connection()).start(method, params, stream, fds)

    def _timeout(self, timeout: Optional[float]) -> Optional[float]:
        return timeout if timeout is not None else self.timeout

    async def call(self, method: str, params: Optional[Mapping[str, Any]] = None,
                   timeout: Optional[float] = None, fds: Sequence[int] = ()) -> Any:
        """Calls any method; returns its result or raises its Error (as Client.call)."""
        call = await self._start(method, params, False, fds)
        return await _wait(call, self._timeout(timeout))

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            await asyncio.wait({conn.reader}, timeout=_s._CLOSE_WAIT_S)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def status(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self.call(Method.STATUS, timeout=timeout)

    async def discover(self) -> Dict[str, Any]:
        if self._doc is None:
            self._doc = await self.call(Method.DISCOVER)
        return self._doc

    async def offers(self, method: str) -> bool:
        return any(m.get("name") == method for m in (await self.discover()).get("methods", []))

    async def limits(self) -> Dict[str, Any]:
        return dict((await self.discover()).get("x-limits") or {})

    async def create(self, *, env: Optional[Mapping[str, str]] = None,
                     timeout: Optional[float] = None, **params: Any) -> "AsyncSandbox":
        """sandbox.create, as sandboxd.Client.create (env included)."""
        if env is not None:
            params["env"] = dict(env)
        return AsyncSandbox(self, await self.call(Method.CREATE, params, timeout))

    async def get(self, id: str, timeout: Optional[float] = None) -> "AsyncSandbox":
        return AsyncSandbox(self, await self.call(Method.GET, {"id": id}, timeout))

    async def list(self, *, timeout: Optional[float] = None,
                   **params: Any) -> List["AsyncSandbox"]:
        r = await self.call(Method.LIST, params, timeout)
        return [AsyncSandbox(self, s) for s in r["sandboxes"]]

    # templates (as sandboxd.Client)
    async def templates(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return (await self.call(Method.TEMPLATE_LIST, None, timeout))["templates"]

    async def make_template(self, id: str, name: str, timeout: Optional[float] = None, *,
                            defaults: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        params: Dict[str, Any] = {"id": id, "name": name}
        if defaults:
            params["defaults"] = dict(defaults)
        r = await self.call(Method.TEMPLATE_CREATE, params, timeout)
        return r["template"]

    async def delete_template(self, name: str, timeout: Optional[float] = None) -> None:
        await self.call(Method.TEMPLATE_DELETE, {"name": name}, timeout)

    async def publish_template(self, name: str,
                               timeout: Optional[float] = None) -> Dict[str, Any]:
        return (await self.call(Method.TEMPLATE_PUBLISH, {"name": name}, timeout))["template"]

    # volumes (as sandboxd.Client)
    async def create_volume(self, name: str, size_gb: int,
                            timeout: Optional[float] = None) -> Dict[str, Any]:
        r = await self.call(Method.VOLUME_CREATE, {"name": name, "size_gb": size_gb}, timeout)
        return r["volume"]

    async def volumes(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return (await self.call(Method.VOLUME_LIST, None, timeout))["volumes"]

    async def delete_volume(self, name: str, timeout: Optional[float] = None) -> None:
        await self.call(Method.VOLUME_DELETE, {"name": name}, timeout)


class AsyncSandbox:
    """One sandbox (as sandboxd.Sandbox); `async with` destroys it when the block ends."""

    def __init__(self, client: AsyncClient, info: Mapping[str, Any]) -> None:
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
        return f"<AsyncSandbox {self.id} {self.info.get('state')} ip={self.ip}>"

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.destroy()

    async def _call(self, method: str, timeout: Optional[float] = None, **params: Any) -> Any:
        return await self.client.call(method, {"id": self.id, **params}, timeout)

    def _update(self, info: Mapping[str, Any]) -> "AsyncSandbox":
        self.info = dict(info)
        return self

    async def refresh(self, timeout: Optional[float] = None) -> "AsyncSandbox":
        return self._update(await self._call(Method.GET, timeout))

    async def set_internet(self, enabled: bool, wait: bool = False,
                           wait_timeout_s: Optional[int] = None,
                           timeout: Optional[float] = None,
                           allow: Optional[List[str]] = None) -> "AsyncSandbox":
        kw: Dict[str, Any] = {"enabled": bool(enabled)}
        if allow is not None:
            kw["allow"] = list(allow)
        if wait:
            kw["wait"] = True
        if wait_timeout_s is not None:
            kw["wait_timeout_s"] = int(wait_timeout_s)
        return self._update(await self._call(Method.SET_INTERNET, timeout, **kw))

    async def renew(self, ttl_s: int, timeout: Optional[float] = None) -> "AsyncSandbox":
        return self._update(await self._call(Method.RENEW, timeout, ttl_s=int(ttl_s)))

    async def resize(self, cores: Optional[int] = None, memory_mb: Optional[int] = None,
                     disk_gb: Optional[int] = None,
                     timeout: Optional[float] = None,
                     net_rate_mbps: Optional[int] = None) -> "AsyncSandbox":
        p = {k: int(v) for k, v in (("cores", cores), ("memory_mb", memory_mb),
                                    ("disk_gb", disk_gb), ("net_rate_mbps", net_rate_mbps))
             if v is not None}
        return self._update(await self._call(Method.RESIZE, timeout, **p))

    async def destroy(self, timeout: Optional[float] = None, wait: bool = True) -> None:
        """Destroy the sandbox; wait=False returns once the destroy has begun."""
        r = await self._call(Method.DESTROY, timeout, **({} if wait else {"wait": False}))
        self.info["state"] = r.get("state", "destroyed") if isinstance(r, dict) else "destroyed"

    # -- commands
    def _exec_params(self, command: Union[str, Sequence[str]], stdin: Optional[Data],
                     kw: Dict[str, Any]) -> Dict[str, Any]:
        return _s.Sandbox._exec_params(self, command, stdin, kw)  # type: ignore[arg-type]

    async def exec(self, command: Union[str, Sequence[str]], *, stdin: Optional[Data] = None,
                   timeout: Optional[float] = None, **kw: Any) -> ExecResult:
        return ExecResult._from(await self.client.call(
            Method.EXEC, self._exec_params(command, stdin, kw), timeout))

    async def exec_stream(self, command: Union[str, Sequence[str]], *,
                          stdin: Optional[Data] = None, timeout: Optional[float] = None,
                          **kw: Any) -> AsyncExecStream:
        params = self._exec_params(command, stdin, kw)
        params["stream"] = True
        call = await self.client._start(Method.EXEC, params, True)
        return AsyncExecStream(call, self.client._timeout(timeout))

    # -- files
    async def write_file(self, path: str, data: Union[Data, IO[Any]], *,
                         mode: Optional[Union[int, str]] = None,
                         make_parents: Optional[bool] = None, offset: Optional[int] = None,
                         append: bool = False, timeout: Optional[float] = None) -> int:
        """As Sandbox.write_file; a file object travels as a descriptor."""
        params: Dict[str, Any] = {"id": self.id, "path": path}
        if mode is not None:
            params["mode"] = _mode(mode)
        if make_parents is not None:
            params["make_parents"] = bool(make_parents)
        if offset is not None:
            params["offset"] = offset
        if append:
            params["append"] = True
        if hasattr(data, "fileno"):
            params["content_fd"] = 0
            r = await self.client.call(Method.FILE_WRITE, params, timeout, [data.fileno()])
            return r["bytes"]
        size = len(data.encode("utf-8")) if isinstance(data, str) else len(data)
        limit = (await self.client.limits()).get("data_max_bytes")
        if isinstance(limit, int) and size > limit:
            raise InvalidParams("Invalid params", InvalidParams.code,
                                {"param": "content", "reason": f"larger than {limit} bytes"})
        _put_data(params, "content", data)
        return (await self.client.call(Method.FILE_WRITE, params, timeout))["bytes"]

    async def read_file(self, path: str, offset: int = 0, length: Optional[int] = None,
                        timeout: Optional[float] = None) -> bytes:
        """As Sandbox.read_file: through a pipe passed as a descriptor, in file.read chunks
        when the daemon answers Busy."""
        loop = asyncio.get_running_loop()
        timeout = self.client._timeout(timeout)
        deadline = None if timeout is None else loop.time() + timeout
        params: Dict[str, Any] = {"id": self.id, "path": path, "to_fd": 0, "offset": offset}
        if length is not None:
            params["length"] = length
        rfd, wfd = os.pipe()
        try:
            try:
                call = await self.client._start(Method.FILE_READ, params, False, [wfd])
            finally:
                os.close(wfd)
            out = await _drain(rfd, deadline)
        finally:
            os.close(rfd)
        try:
            await _wait(call, None if deadline is None else max(0.0, deadline - loop.time()))
        except Busy:
            if out:
                raise
            return await self._read_chunks(path, offset, length, timeout)
        return out

    async def _read_chunks(self, path: str, offset: int, length: Optional[int],
                           timeout: Optional[float]) -> bytes:
        out = bytearray()
        while True:
            params: Dict[str, Any] = {"path": path, "offset": offset + len(out)}
            if length is not None:
                params["length"] = length - len(out)
            r = await self._call(Method.FILE_READ, timeout, **params)
            chunk = _get_data(r, "content") or b""
            out += chunk
            if r.get("eof") or not chunk or (length is not None and len(out) >= length):
                return bytes(out)

    async def read_file_into(self, path: str, f: IO[Any], offset: int = 0,
                             length: Optional[int] = None,
                             timeout: Optional[float] = None) -> int:
        if hasattr(f, "flush"):
            f.flush()
        params: Dict[str, Any] = {"id": self.id, "path": path, "to_fd": 0, "offset": offset}
        if length is not None:
            params["length"] = length
        return (await self.client.call(Method.FILE_READ, params, timeout, [f.fileno()]))["bytes"]

    async def list_files(self, path: str, limit: Optional[int] = None,
                         timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        r = await self.list_dir(path, limit, timeout)
        if r["truncated"]:
            raise FileError("File error", FileError.code,
                            {"reason": f"{path} holds more than {len(r['entries'])} entries",
                             "errno": "E2BIG"})
        return r["entries"]

    async def list_dir(self, path: str, limit: Optional[int] = None,
                       timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._call(Method.FILE_LIST, timeout, path=path,
                                **({} if limit is None else {"limit": limit}))

    async def stat(self, path: str, follow: bool = False,
                   timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._call(Method.FILE_STAT, timeout, path=path,
                                **({"follow": True} if follow else {}))

    async def remove(self, path: str, recursive: bool = False,
                     timeout: Optional[float] = None) -> int:
        return (await self._call(Method.FILE_REMOVE, timeout, path=path,
                                 recursive=recursive))["removed"]

    async def mkdir(self, path: str, parents: bool = False,
                    mode: Optional[Union[int, str]] = None,
                    timeout: Optional[float] = None) -> bool:
        params: Dict[str, Any] = {"path": path, "parents": parents}
        if mode is not None:
            params["mode"] = _mode(mode)
        return (await self._call(Method.FILE_MKDIR, timeout, **params))["created"]

    async def rename(self, src: str, dst: str, timeout: Optional[float] = None) -> None:
        await self._call(Method.FILE_RENAME, timeout, **{"from": src, "to": dst})

    # -- background processes
    async def start_process(self, command: Union[str, Sequence[str]], *,
                            stdin_fd: Optional[Union[int, IO[Any]]] = None,
                            stdout_fd: Optional[Union[int, IO[Any]]] = None,
                            stderr_fd: Optional[Union[int, IO[Any]]] = None,
                            timeout: Optional[float] = None, **kw: Any) -> "AsyncProcess":
        params = self._exec_params(command, None, kw)
        fds: List[int] = []
        for name, f in (("stdin_fd", stdin_fd), ("stdout_fd", stdout_fd),
                        ("stderr_fd", stderr_fd)):
            if f is not None:
                params[name] = len(fds)
                fds.append(f if isinstance(f, int) else f.fileno())
        r = await self.client.call(Method.PROCESS_START, params, timeout, fds)
        return AsyncProcess(self, r["process"], r)

    def process(self, process: str) -> "AsyncProcess":
        return AsyncProcess(self, process, {"process": process})

    async def forward(self, port: int, listen: Optional[str] = None,
                      timeout: Optional[float] = None) -> "AsyncForward":
        """sandbox.forward (see Sandbox.forward): `.socket` or `.address`, `await .close()`,
        `.open_connection()` for asyncio streams through it."""
        kw: Dict[str, Any] = {"port": int(port)}
        if listen is not None:
            kw["listen"] = listen
        return AsyncForward(self, await self._call(Method.FORWARD, timeout, **kw))

    async def forwards(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return (await self._call(Method.FORWARDS, timeout))["forwards"]

    async def preview(self, port: int, ttl_s: Optional[int] = None,
                      timeout: Optional[float] = None) -> "AsyncPreview":
        """sandbox.preview (see Sandbox.preview): `.url`, `.expires_at`, `await .close()`."""
        kw: Dict[str, Any] = {"port": int(port)}
        if ttl_s is not None:
            kw["ttl_s"] = int(ttl_s)
        return AsyncPreview(self, await self._call(Method.PREVIEW, timeout, **kw))

    async def previews(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return (await self._call(Method.PREVIEWS, timeout))["previews"]

    async def snapshot(self, name: str, timeout: Optional[float] = None) -> Dict[str, Any]:
        return (await self._call(Method.SNAPSHOT, timeout, name=name))["snapshot"]

    async def snapshots(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return (await self._call(Method.SNAPSHOTS, timeout))["snapshots"]

    async def rollback(self, name: str, timeout: Optional[float] = None) -> "AsyncSandbox":
        return self._update(await self._call(Method.ROLLBACK, timeout, name=name))

    async def delete_snapshot(self, name: str, timeout: Optional[float] = None) -> None:
        await self._call(Method.SNAPSHOT_DELETE, timeout, name=name)

    async def fork(self, count: int = 1, snapshot: Optional[str] = None, ttl_s: Optional[int] = None,
                   timeout: Optional[float] = None) -> List["AsyncSandbox"]:
        """sandbox.fork (see Sandbox.fork)."""
        r = await self._call(Method.FORK, timeout, **_s._fork_params(count, snapshot, ttl_s))
        return _s._forked(r, lambda i: AsyncSandbox(self.client, i))

    async def pause(self, timeout: Optional[float] = None) -> "AsyncSandbox":
        return self._update(await self._call(Method.PAUSE, timeout))

    async def resume(self, timeout: Optional[float] = None) -> "AsyncSandbox":
        return self._update(await self._call(Method.RESUME, timeout))

    async def attach(self, volume: str, path: str, read_only: bool = False,
                     timeout: Optional[float] = None) -> "AsyncSandbox":
        return self._update(await self._call(Method.ATTACH, timeout, volume=volume, path=path,
                                             read_only=read_only))

    async def detach(self, volume: str, timeout: Optional[float] = None) -> "AsyncSandbox":
        return self._update(await self._call(Method.DETACH, timeout, volume=volume))

    async def processes(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return (await self._call(Method.PROCESS_LIST, timeout))["processes"]


class AsyncProcess:
    """A background process (as sandboxd.Process)."""

    def __init__(self, sandbox: AsyncSandbox, process: str, info: Mapping[str, Any]) -> None:
        self.sandbox = sandbox
        self.process = process
        self.info = dict(info)

    async def _call(self, method: str, timeout: Optional[float] = None, **params: Any) -> Any:
        return await self.sandbox._call(method, timeout, process=self.process, **params)

    async def read(self, stream: str = "stdout", offset: int = 0,
                   timeout: Optional[float] = None, **kw: Any) -> Dict[str, Any]:
        r = dict(await self._call(Method.PROCESS_READ, timeout, stream=stream, offset=offset,
                                  **kw))
        r["bytes"] = _get_data(r, "data") or b""
        return r

    async def output(self, stream: str = "stdout", offset: int = 0, follow: bool = False,
                     wait_ms: int = 10000) -> AsyncIterator[bytes]:
        while True:
            r = await self.read(stream, offset, **({"wait_ms": wait_ms} if follow else {}))
            if r["bytes"]:
                yield r["bytes"]
            offset = r["next_offset"]
            self.info["state"] = r["state"]
            if r["eof"] or (not follow and not r["bytes"]):
                return

    async def write(self, data: Data, close: bool = False,
                    timeout: Optional[float] = None) -> Any:
        params: Dict[str, Any] = {"close": close}
        _put_data(params, "data", data)
        return await self._call(Method.PROCESS_WRITE, timeout, **params)

    async def wait(self, timeout_ms: Optional[int] = None,
                   timeout: Optional[float] = None) -> Dict[str, Any]:
        return await self._call(Method.PROCESS_WAIT, timeout,
                                **({} if timeout_ms is None else {"timeout_ms": timeout_ms}))

    async def kill(self, signal: Optional[str] = None, timeout: Optional[float] = None) -> Any:
        return await self._call(Method.PROCESS_KILL, timeout,
                                **({} if signal is None else {"signal": signal}))

    async def resize(self, cols: int, rows: int, timeout: Optional[float] = None) -> Any:
        """process.resize: the terminal of a process started with pty takes cols x rows."""
        return await self._call(Method.PROCESS_RESIZE, timeout, cols=cols, rows=rows)


class AsyncForward(_ForwardInfo):
    """A port forward (AsyncSandbox.forward): `socket` or `address`, `port`, `forward`."""

    sandbox: AsyncSandbox

    async def open_connection(self) -> Any:
        """(reader, writer) of a new connection through the forward."""
        if self.socket:
            return await asyncio.open_unix_connection(self.socket)
        host, port = str(self.address).rsplit(":", 1)
        return await asyncio.open_connection(host, int(port))

    async def close(self, timeout: Optional[float] = None) -> None:
        """sandbox.unforward; a forward already gone is fine."""
        try:
            await self.sandbox._call(Method.UNFORWARD, timeout, forward=self.forward)
        except (InvalidParams, NoSuchSandbox):
            pass

    async def __aenter__(self) -> "AsyncForward":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncPreview:
    """A preview URL (AsyncSandbox.preview): `url`, `port`, `expires_at`, `preview`."""

    def __init__(self, sandbox: AsyncSandbox, info: Dict[str, Any]) -> None:
        self.sandbox = sandbox
        self.info = dict(info)
        self.preview: str = info["preview"]
        self.port: int = info["port"]
        self.url: str = info["url"]
        self.expires_at: int = info["expires_at"]

    async def close(self, timeout: Optional[float] = None) -> None:
        """sandbox.unpreview; a preview already gone is fine."""
        try:
            await self.sandbox._call(Method.UNPREVIEW, timeout, preview=self.preview)
        except (InvalidParams, NoSuchSandbox):
            pass

    async def __aenter__(self) -> "AsyncPreview":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
