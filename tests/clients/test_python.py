#!/usr/bin/env python3
"""clients/python/sandboxd.py against pve-sim + sandboxd: the whole surface (create, get, list,
exec in every form, exec_stream, files and the file system methods, internet, renew, destroy,
the context manager, the reserved process methods), one exception class per error code,
concurrent calls from threads on one client, the idle close, an error with id null, the daemon stopped and restarted
mid-session (a clear exception for the call in flight, then the next call works)."""

import hashlib
import os
import tempfile
import threading
import time

from clientlib import IDLE_MS, Env, enable_test_hooks, relaunch, restart, run

import sandboxd  # noqa: E402  (clients/python, put on the path by clientlib)

MAX_REQUEST = 4 * 1024 * 1024  # the daemon's line limit here, to provoke an id-null error


def main():
    enable_test_hooks()
    # no probe_address (set_internet's wait is refused): each create then waits one
    # firewall_period_s after its start, instead of probing its isolation
    with Env(daemon_config={"server": {"max_request_bytes": str(MAX_REQUEST)},
                            "proxmox": {"firewall_period_s": "1"},
                            "network": {"probe_address": None}}) as env:
        os.environ["SANDBOXD_SOCKET"] = env.socket
        client = sandboxd.Client()
        st = {}

        def daemon_and_tables():
            assert client.socket == env.socket
            assert client.status()["version"]
            doc = client.discover()
            names = {m["name"] for m in doc["methods"]}
            reserved = set(doc.get("x-reserved-methods", []))
            for attr, name in vars(sandboxd.Method).items():
                if attr.isupper() and name != sandboxd.Method.EXEC_OUTPUT:
                    assert name in names | reserved, (attr, name)
            assert client.offers("sandbox.exec") and not client.offers("no.such")
            assert client.limits["read_length_max"] == doc["x-limits"]["read_length_max"]
            # One class per error code the daemon documents, each an Error with its code.
            for ref in doc["components"]["errors"].values():
                cls = sandboxd._ERRORS[ref["code"]]
                assert issubclass(cls, sandboxd.Error) and cls.code == ref["code"], ref
                assert cls.__name__ in sandboxd.__all__, cls
            assert issubclass(sandboxd.ConnectionLost, sandboxd.Error)
            assert issubclass(sandboxd.Unavailable, sandboxd.Error)

        def create_get_list():
            sb = client.create(labels={"suite": "python"}, memory_mb=256, hostname="py-one")
            assert sb.state == "ready" and sb.id.startswith("sb-") and sb.ip, sb.info
            assert sb.memory_mb == 256 and sb.hostname == "py-one" and sb.labels == {"suite": "python"}
            assert sb.internet is False
            st["sb"] = sb
            assert client.get(sb.id).id == sb.id
            assert [s.id for s in client.list(labels={"suite": "python"})] == [sb.id]
            assert client.list(labels={"suite": "none"}) == []
            assert sb.refresh().state == "ready" and repr(sb).startswith("<Sandbox sb-")

        def exec_forms():
            sb = st["sb"]
            r = sb.exec("echo out; echo err >&2; exit 3")
            assert r.exit_code == 3 and r.stdout == "out\n" and r.stderr == "err\n", r
            assert r.output == "out\nerr\n" and not r.ok and r.signal is None and not r.timed_out
            r = sb.exec(["printf", "%s|", "a b", "it's", "$HOME"])
            assert r.stdout == "a b|it's|$HOME|" and r.ok, r
            r = sb.exec("pwd; echo $X; cat", cwd="/tmp", env={"X": "y z"}, stdin="text in")
            assert r.stdout == "/tmp\ny z\ntext in", r
            r = sb.exec("cat", stdin=b"\xff\x00\x01")
            assert r.stdout_bytes == b"\xff\x00\x01" and r.stdout == "\ufffd\x00\x01", r
            r = sb.exec("kill -9 $$")
            assert r.exit_code is None and r.signal == "SIGKILL", r
            r = sb.exec("sleep 5", timeout_ms=300)
            assert r.timed_out and not r.ok, r
            r = sb.exec("head -c 3000 /dev/zero | tr '\\0' x", max_output_bytes=1000)
            assert r.stdout == "x" * 1000 and r.stdout_truncated and not r.stderr_truncated, r

        def exec_stream():
            s = st["sb"].exec_stream("echo one; sleep 0.3; echo two >&2; echo three")
            chunks = list(s)
            assert "".join(c.data.decode() for c in chunks if c.stream == "stdout") == "one\nthree\n"
            assert [c.data for c in chunks if c.stream == "stderr"] == [b"two\n"], chunks
            assert s.result.exit_code == 0 and s.result.stdout == "one\nthree\n", s.result
            assert s.result.stderr == "two\n" and s.result.output == "one\nthree\ntwo\n"
            r = st["sb"].exec_stream(["sh", "-c", "exit 4"]).wait()
            assert r.exit_code == 4, r

        def per_call_timeouts():
            sb = st["sb"]
            for call in (lambda: sb.exec("sleep 2", timeout=0.3),
                         lambda: sb.exec_stream("echo x; sleep 2", timeout=0.3).wait()):
                t0 = time.monotonic()
                try:
                    call()
                    raise AssertionError("no timeout")
                except TimeoutError:
                    assert time.monotonic() - t0 < 1.5
            assert sb.exec("echo after", timeout=30).stdout == "after\n"
            assert sb.stat("/root", timeout=30)["type"] == "dir"

        def trees():
            sb = st["sb"]
            with tempfile.TemporaryDirectory() as top:
                src, dst = os.path.join(top, "src"), os.path.join(top, "dst")
                os.makedirs(os.path.join(src, "sub", "deep"))
                os.makedirs(os.path.join(src, "empty"))
                os.chmod(os.path.join(src, "empty"), 0o700)
                with open(os.path.join(src, "sub", "f.txt"), "wb") as f:
                    f.write(b"tree\n" * 1000)
                os.chmod(os.path.join(src, "sub", "f.txt"), 0o640)
                with open(os.path.join(src, "run.sh"), "w") as f:
                    f.write("#!/bin/sh\necho ran\n")
                os.chmod(os.path.join(src, "run.sh"), 0o755)
                os.symlink("sub/f.txt", os.path.join(src, "link"))
                sb.upload_dir(src, "/root/tree/in")
                assert sb.stat("/root/tree/in/link")["target"] == "sub/f.txt"
                assert sb.stat("/root/tree/in/empty")["mode"] == "0700"
                assert sb.stat("/root/tree/in/sub/f.txt")["mode"] == "0640"
                assert sb.exec("/root/tree/in/run.sh").stdout == "ran\n"
                assert sb.list_files("/root/tree/in/sub/deep") == []
                sb.download_dir("/root/tree/in", dst)

                def tree(root):
                    out = {}
                    for d, dirs, files in os.walk(root):
                        for n in dirs + files:
                            p = os.path.join(d, n)
                            st_ = os.lstat(p)
                            key = os.path.relpath(p, root)
                            if os.path.islink(p):
                                out[key] = ("link", os.readlink(p))
                            elif os.path.isdir(p):
                                out[key] = ("dir", oct(st_.st_mode & 0o7777))
                            else:
                                with open(p, "rb") as f:
                                    out[key] = ("file", oct(st_.st_mode & 0o7777), f.read())
                    return out

                assert tree(src) == tree(dst), (tree(src), tree(dst))
                assert len(tree(dst)) == 6, sorted(tree(dst))
            try:
                sb.download_dir("/root/no/such", os.path.join(top, "none"))
                raise AssertionError("no error")
            except sandboxd.FileError as e:
                assert e.data["path"] == "/root/no/such" and "tar" in e.reason, e.data
            sb.remove("/root/tree", recursive=True)

        def files():
            sb = st["sb"]
            assert sb.write_file("/root/d/e/f.txt", "héllo\n") == 7
            assert sb.read_file("/root/d/e/f.txt") == "héllo\n".encode()
            blob = bytes(range(256)) * 10
            assert sb.write_file("/root/blob", blob, mode=0o600) == len(blob)
            assert sb.read_file("/root/blob") == blob
            assert sb.read_file("/root/blob", offset=10, length=5) == blob[10:15]
            assert sb.exec("stat -c %a /root/blob").stdout == "600\n"
            # Larger than one file.read: one request, through a pipe passed as a descriptor.
            r = sb.exec("head -c 9000000 /dev/urandom > /root/big && sha256sum /root/big")
            want = r.stdout.split()[0]
            got = sb.read_file("/root/big")
            assert len(got) == 9000000 and hashlib.sha256(got).hexdigest() == want
            assert sb.read_file("/root/big", offset=8999990, length=100) == got[8999990:]
            # With every transfer slot of this uid held (4 reads from another sandbox into
            # pipes nobody drains), read_file gets Busy and reads in file.read chunks instead.
            other = client.create(memory_mb=128)
            other.exec("head -c 9000000 /dev/zero > /root/big")
            pipes = [os.pipe() for _ in range(4)]
            held = [threading.Thread(target=client.call, args=(
                "file.read", {"id": other.id, "path": "/root/big", "to_fd": 0}, None, [w]))
                for _, w in pipes]
            for t in held:
                t.start()
            time.sleep(0.5)
            chunked = []
            sb._read_chunks = lambda *a: chunked.append(a) or sandboxd.Sandbox._read_chunks(sb, *a)
            assert sb.read_file("/root/big", offset=5) == got[5:] and chunked, chunked
            del sb._read_chunks
            for rfd, wfd in pipes:
                os.close(wfd)
            for rfd, _ in pipes:
                while os.read(rfd, 1 << 20):
                    pass
                os.close(rfd)
            for t in held:
                t.join(30)
            other.destroy()
            # File objects travel as descriptors (no size limit, nothing in memory).
            with tempfile.TemporaryFile() as f:
                assert sb.read_file_into("/root/big", f) == 9000000
                f.seek(0)
                assert hashlib.sha256(f.read()).hexdigest() == want
                f.seek(0)
                assert sb.write_file("/root/big.copy", f, mode=0o640) == 9000000
            r = sb.exec("sha256sum < /root/big.copy; stat -c %a /root/big.copy")
            assert r.stdout.split() == [want, "-", "640"], r.stdout
            try:
                sb.write_file("/root/huge", b"x" * (client.limits["data_max_bytes"] + 1))
                raise AssertionError("no error")
            except sandboxd.InvalidParams as e:
                assert e.data["param"] == "content", e.data

        def filesystem():
            sb = st["sb"]
            assert sb.mkdir("/root/fs/a/b", parents=True) is True
            assert sb.mkdir("/root/fs/a/b", parents=True) is False
            assert sb.mkdir("/root/fs/m", mode=0o700) is True
            assert sb.stat("/root/fs/m")["mode"] == "0700"
            assert sb.write_file("/root/fs/a/f", "abc") == 3
            assert sb.write_file("/root/fs/a/f", "Z", offset=1) == 1
            assert sb.write_file("/root/fs/a/f", b"\x00", append=True) == 1
            assert sb.read_file("/root/fs/a/f") == b"aZc\x00"
            sb.exec("ln -s f /root/fs/a/l")
            names = [(e["name"], e["type"]) for e in sb.list_files("/root/fs/a")]
            assert names == [("b", "dir"), ("f", "file"), ("l", "symlink")], names
            r = sb.list_dir("/root/fs/a", limit=1)
            assert r["truncated"] and len(r["entries"]) == 1, r
            try:
                sb.list_files("/root/fs/a", limit=2)
                raise AssertionError("no error")
            except sandboxd.FileError as e:
                assert e.data["errno"] == "E2BIG", e.data
            assert sb.stat("/root/fs/a/l")["target"] == "f"
            assert sb.stat("/root/fs/a/l", follow=True)["size"] == 4
            sb.rename("/root/fs/a/f", "/root/fs/g")
            try:
                sb.remove("/root/fs/a")
                raise AssertionError("no error")
            except sandboxd.FileError as e:
                assert e.data["errno"] == "ENOTEMPTY", e.data
            assert sb.remove("/root/fs", recursive=True) == 6
            try:
                sb.stat("/root/fs")
                raise AssertionError("no error")
            except sandboxd.FileError as e:
                assert e.data["errno"] == "ENOENT", e.data

        def internet_renew():
            sb = st["sb"]
            assert sb.set_internet(True).internet is True and sb.internet is True
            assert "effective_by" in sb.info, sb.info
            assert sb.set_internet(False).internet is False
            try:  # no probe_address in this daemon's configuration
                sb.set_internet(True, wait=True, wait_timeout_s=5)
                raise AssertionError("wait without probe_address succeeded")
            except sandboxd.InvalidParams as e:
                assert e.data["param"] == "wait", e.data
            assert sb.refresh().internet is False
            before = sb.expires_at
            time.sleep(1.1)
            assert sb.renew(7200).expires_at > before, sb.info
            r = sb.resize(memory_mb=sb.info["memory_mb"] + 64)
            assert r is sb and sb.info["memory_mb"] == r.info["memory_mb"], sb.info
            assert client.get(sb.id).info["memory_mb"] == sb.info["memory_mb"]
            assert sb.info["template"] == "default", sb.info

        def errors():
            try:
                client.get("sb-nosuchthing")
                raise AssertionError("no error")
            except sandboxd.NoSuchSandbox as e:
                assert e.code == -32001 and e.reason and "No such sandbox" in str(e), e
            try:
                st["sb"].exec("")
                raise AssertionError("no error")
            except sandboxd.InvalidParams as e:
                assert e.code == -32602 and e.data["param"] == "command", e.data
            try:
                st["sb"].read_file("/no/such/file")
                raise AssertionError("no error")
            except sandboxd.FileError as e:
                assert e.data["errno"] == "ENOENT", e.data
                # The error names its file, in str() too (what a program prints).
                assert e.path == "/no/such/file" and "/no/such/file: " in str(e), str(e)
            try:
                st["sb"].rename("/tmp", "/tmp/inside")
                raise AssertionError("no error")
            except sandboxd.FileError as e:
                assert e.data["side"] in ("from", "to") and e.path, e.data
            try:
                client.create(no_such_param=1)
                raise AssertionError("no error")
            except sandboxd.InvalidParams as e:
                assert e.param == "no_such_param", e.data
                assert 'unknown parameter "no_such_param"' in str(e), str(e)
            try:
                client.call("no.such.method")
                raise AssertionError("no error")
            except sandboxd.MethodNotFound as e:
                assert e.code == -32601
            try:
                client.create(ttl_s=0)
                raise AssertionError("no error")
            except sandboxd.Error as e:
                assert type(e) is sandboxd.InvalidParams, type(e)
                assert e.param == "ttl_s" and "ttl_s" in str(e) and e.data["max"] > 0, e.data

        def create_env():
            secret = "py-secret-" + os.urandom(6).hex()
            with client.create(env={"PY_SECRET": secret, "MODE": "base"}) as sb:
                assert sorted(sb.env_names) == ["MODE", "PY_SECRET"], sb.info
                assert secret not in repr(sb.info) and secret not in repr(client.get(sb.id).info)
                assert sb.exec('echo "$PY_SECRET $MODE"').stdout == f"{secret} base\n"
                assert sb.exec('echo "$MODE"', env={"MODE": "call"}).stdout == "call\n"
                p = sb.start_process('echo "$PY_SECRET"')
                assert p.wait(timeout_ms=30000)["exit_code"] == 0
                assert p.read()["bytes"] == f"{secret}\n".encode()
            try:
                client.create(env={"1BAD": "x"})
                raise AssertionError("no error")
            except sandboxd.InvalidParams as e:
                assert e.param == "env" and '"1BAD"' in str(e), str(e)

        def snapshots():
            sb = st["sb"]
            sb.write_file("/root/snap.txt", b"before")
            snap = sb.snapshot("py1")
            assert snap["name"] == "py1" and snap["created_at"] > 0, snap
            sb.write_file("/root/snap.txt", b"after")
            assert [x["name"] for x in sb.snapshots()] == ["py1"]
            assert sb.rollback("py1") is sb and sb.state == "ready"
            assert sb.read_file("/root/snap.txt") == b"before"
            try:
                sb.rollback("nope")
                raise AssertionError("rollback to an unknown snapshot succeeded")
            except sandboxd.InvalidParams as e:
                assert e.data.get("param") == "name", e.data
            sb.delete_snapshot("py1")
            assert sb.snapshots() == []
            kids = sb.fork(count=1)
            assert len(kids) == 1 and kids[0].id != sb.id and kids[0].state == "ready", kids
            assert kids[0].read_file("/root/snap.txt") == b"before"
            kids[0].destroy()
            assert sb.snapshots() == []

        def reserved_methods():
            sb = st["sb"]
            calls = {"process.list": lambda: sb.processes()}
            for method, fn in calls.items():
                if client.offers(method):
                    fn()
                    print(f"  {method}: offered, called")
                else:
                    try:
                        fn()
                        raise AssertionError(f"{method} is not offered but succeeded")
                    except sandboxd.MethodNotFound:
                        pass
            if client.offers("process.start"):
                p = sb.start_process("echo hi; sleep 30")
                deadline = time.time() + 10
                while b"hi" not in p.read("stdout", wait_ms=500)["bytes"]:
                    assert time.time() < deadline
                p.kill()
                p.wait(timeout_ms=5000)
                # a terminal resized while its program waits: the program sees the new size
                p = sb.start_process("read -r x; stty size", stdin=True,
                                     pty={"cols": 80, "rows": 24})
                p.resize(100, 30)
                p.write("go\n")
                assert p.wait(timeout_ms=10000)["state"] == "exited"
                assert b"30 100" in b"".join(p.output()), b"".join(p.output())
                # stdin fed in two writes and closed; the output read by offset from a new
                # handle on a new connection, followed until the end.
                p = sb.start_process("while read -r l; do echo \"<$l>\"; done; exit 4", stdin=True)
                p.write("one\n")
                p.write(b"two\n", close=True)
                with sandboxd.Client(client.socket) as c2:
                    again = sandboxd.Sandbox(c2, {"id": sb.id}).process(p.process)
                    assert b"".join(again.output(follow=True)) == b"<one>\n<two>\n"
                    w = again.wait(timeout_ms=5000)
                    assert w["state"] == "exited" and w["exit_code"] == 4, w
                    assert b"".join(again.output(offset=6)) == b"<two>\n"
                assert p.process in [x["process"] for x in sb.processes()]
                try:
                    p.write("late")
                    raise AssertionError("write after exit succeeded")
                except sandboxd.BadState:
                    pass
                # Descriptors: a pipe into stdin, the output into another pipe until the end.
                in_r, in_w = os.pipe()
                out_r, out_w = os.pipe()
                p = sb.start_process(["tr", "a-z", "A-Z"], stdin_fd=in_r, stdout_fd=out_w)
                os.close(in_r)
                os.close(out_w)
                assert p.info["stdin"] is True, p.info
                os.write(in_w, b"through descriptors\n")
                os.close(in_w)
                with os.fdopen(out_r, "rb") as f:
                    assert f.read() == b"THROUGH DESCRIPTORS\n"
                assert p.wait(timeout_ms=10000)["exit_code"] == 0
            else:
                try:
                    sb.start_process("true")
                    raise AssertionError("no error")
                except sandboxd.MethodNotFound:
                    pass

        def threads():
            sb = st["sb"]
            errors, results = [], {}

            def worker(n):
                try:
                    for k in range(8):
                        r = sb.exec(f"echo {n}-{k}; sleep 0.0{k}")
                        assert r.stdout == f"{n}-{k}\n", (n, k, r)
                        results[(n, k)] = True
                    data = f"thread {n}\n" * 100
                    sb.write_file(f"/root/t{n}", data)
                    assert sb.read_file(f"/root/t{n}").decode() == data
                except Exception as e:  # noqa: BLE001
                    errors.append(e)

            made = []

            def creator():
                try:
                    made.append(client.create(labels={"suite": "threads"}))
                except Exception as e:  # noqa: BLE001
                    errors.append(e)

            ts = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
            ts += [threading.Thread(target=creator) for _ in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(120)
            assert not errors, errors
            assert len(results) == 64 and len(made) == 2, (len(results), made)
            for m in made:
                m.destroy()

        def context_manager():
            with client.create() as sb:
                assert sb.exec("true").ok
                sid = sb.id
            assert sb.state == "destroyed"
            try:
                state = client.get(sid).state
            except sandboxd.NoSuchSandbox:
                state = "gone"
            assert state in ("destroyed", "gone"), state

        def idle_close():
            time.sleep(IDLE_MS / 1000 * 1.6)  # the daemon closes the idle connection
            assert st["sb"].exec("echo again").stdout == "again\n"
            client.close()  # and an explicit close: the next call reconnects
            assert st["sb"].exec("echo reopened").stdout == "reopened\n"

        def id_null_error():
            # A line over the daemon's limit gets one -32600 with id null, then the close:
            # the call raises that error, not a bare connection loss.
            try:
                st["sb"].write_file("/root/x", os.urandom(MAX_REQUEST))
                raise AssertionError("no error")
            except sandboxd.InvalidRequest as e:
                assert e.code == -32600 and e.reason, e
            assert st["sb"].exec("echo fine").stdout == "fine\n"

        def restart_mid_session():
            sb = st["sb"]
            caught = []

            def long_exec():
                try:
                    sb.exec("sleep 30")
                except sandboxd.Error as e:
                    caught.append(e)

            t = threading.Thread(target=long_exec)
            t.start()
            time.sleep(0.5)
            restart(env)
            t.join(30)
            assert not t.is_alive() and len(caught) == 1, caught
            assert isinstance(caught[0], (sandboxd.ConnectionLost, sandboxd.ShuttingDown)), caught
            print(f"  in flight across the restart: {type(caught[0]).__name__}: {caught[0]}")
            assert sb.exec("echo after").stdout == "after\n"
            # Stopped: a clear Unavailable; started again: the next call works.
            assert env.stop_daemon() == 0
            try:
                sb.exec("true")
                raise AssertionError("no error")
            except sandboxd.Unavailable as e:
                assert env.socket in str(e), e
            relaunch(env)
            assert sb.exec("echo back").stdout == "back\n"

        def destroy():
            sb = st["sb"]
            sb.destroy()
            sb.destroy()  # idempotent
            try:
                sb.exec("true")
                raise AssertionError("no error")
            except (sandboxd.NoSuchSandbox, sandboxd.BadState) as e:
                assert e.code in (-32001, -32002), e
            env.wait_no_containers(timeout=30)

        try:
            run([("daemon, method table and error classes", daemon_and_tables),
                 ("create, get, list", create_get_list),
                 ("exec: command, argv, env, cwd, stdin, bytes, signal, timeout, truncation",
                  exec_forms),
                 ("exec_stream", exec_stream),
                 ("per-call timeouts", per_call_timeouts),
                 ("upload_dir and download_dir: links, modes, empty folders", trees),
                 ("write_file and read_file", files),
                 ("list, stat, remove, mkdir, rename, offset and append", filesystem),
                 ("set_internet and renew", internet_renew),
                 ("errors: one class per code", errors),
                 ("create(env=...): every exec and process, never returned", create_env),
                 ("file and process methods (when offered)", reserved_methods),
                 ("snapshot, snapshots, rollback, delete_snapshot", snapshots),
                 ("threads on one client", threads),
                 ("with client.create() as sb", context_manager),
                 ("idle close and reconnect", idle_close),
                 ("an error with id null", id_null_error),
                 ("daemon restart mid-session", restart_mid_session),
                 ("destroy", destroy)])
        finally:
            client.close()


if __name__ == "__main__":
    main()
