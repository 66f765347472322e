#!/usr/bin/env python3
"""clients/python's asyncio client (sandboxd.AsyncClient) against pve-sim + sandboxd: create,
get, list, exec, exec_stream, concurrent calls on one connection, files (with descriptors),
the file system methods, processes (with descriptors), internet, renew, per-call timeouts,
errors, `async with`."""

import asyncio
import hashlib
import os
import tempfile

import clientlib
from clientlib import Env, enable_test_hooks, run

import sandboxd  # noqa: E402  (clients/python, put on the path by clientlib)


async def session(env):
    async with sandboxd.AsyncClient(env.socket) as client:
        assert (await client.status())["version"]
        assert await client.offers("sandbox.exec")
        async with await client.create(labels={"suite": "pyasync"}, memory_mb=256) as sb:
            assert sb.state == "ready" and sb.id.startswith("sb-"), sb.info
            assert (await client.get(sb.id)).id == sb.id
            assert [s.id for s in await client.list(labels={"suite": "pyasync"})] == [sb.id]

            r = await sb.exec("echo out; echo err >&2; exit 3")
            assert r.exit_code == 3 and r.stdout == "out\n" and r.stderr == "err\n", r
            r = await sb.exec(["cat"], stdin=b"\xff\x00", cwd="/tmp")
            assert r.stdout_bytes == b"\xff\x00", r

            s = await sb.exec_stream("echo one; sleep 0.3; echo two >&2; echo three")
            chunks = [c async for c in s]
            assert b"".join(c.data for c in chunks if c.stream == "stdout") == b"one\nthree\n"
            assert s.result.exit_code == 0 and s.result.stderr == "two\n", s.result
            # Concurrent calls and streams on one connection, each its own notifications.
            streams = [await sb.exec_stream(f"for i in 1 2 3; do echo {n}-$i; sleep 0.1; done")
                       for n in range(3)]
            results = await asyncio.gather(*(x.wait() for x in streams),
                                           *(sb.exec(f"echo {n}") for n in range(4)))
            for n in range(3):
                assert results[n].stdout == "".join(f"{n}-{i}\n" for i in (1, 2, 3)), results
            assert [x.stdout for x in results[3:]] == ["0\n", "1\n", "2\n", "3\n"]

            async with await sb.preview(8080, ttl_s=60) as pv:
                assert isinstance(pv, sandboxd.AsyncPreview), pv
                assert pv.url.startswith(f"http://8080-{sb.id}.preview.test:"), pv.url
                assert pv.preview in [x["preview"] for x in await sb.previews()]
            assert pv.preview not in [x["preview"] for x in await sb.previews()]

            # Per-call timeout: the wait ends, the connection goes on.
            try:
                await sb.exec("sleep 2", timeout=0.3)
                raise AssertionError("no timeout")
            except TimeoutError:
                pass
            try:
                await (await sb.exec_stream("echo x; sleep 2", timeout=0.3)).wait()
                raise AssertionError("no timeout")
            except TimeoutError:
                pass
            assert (await sb.exec("echo after", timeout=30)).stdout == "after\n"

            assert await sb.write_file("/root/a/b.txt", "héllo\n", make_parents=True) == 7
            assert await sb.read_file("/root/a/b.txt") == "héllo\n".encode()
            r = await sb.exec("head -c 3000000 /dev/urandom > /root/big && sha256sum /root/big")
            want = r.stdout.split()[0]
            big = await sb.read_file("/root/big")
            assert len(big) == 3000000 and hashlib.sha256(big).hexdigest() == want
            assert await sb.read_file("/root/big", offset=2999990, length=100) == big[2999990:]
            assert await sb._read_chunks("/root/big", 0, None, None) == big
            try:
                await sb.read_file("/no/such/file")
                raise AssertionError("no error")
            except sandboxd.FileError as e:
                assert e.data["errno"] == "ENOENT", e.data
            with tempfile.TemporaryFile() as f:
                assert await sb.read_file_into("/root/big", f) == 3000000
                f.seek(0)
                assert hashlib.sha256(f.read()).hexdigest() == want
                f.seek(0)
                assert await sb.write_file("/root/big.copy", f, mode=0o640) == 3000000
            r = await sb.exec("sha256sum < /root/big.copy; stat -c %a /root/big.copy")
            assert r.stdout.split() == [want, "-", "640"], r.stdout

            assert await sb.mkdir("/root/fs/x", parents=True) is True
            await sb.rename("/root/a/b.txt", "/root/fs/x/c")
            assert [e["name"] for e in await sb.list_files("/root/fs/x")] == ["c"]
            assert (await sb.stat("/root/fs/x/c"))["size"] == 7
            assert await sb.remove("/root/fs", recursive=True) == 3
            try:
                await sb.stat("/root/fs")
                raise AssertionError("no error")
            except sandboxd.FileError as e:
                assert e.data["errno"] == "ENOENT", e.data

            in_r, in_w = os.pipe()
            out_r, out_w = os.pipe()
            p = await sb.start_process(["tr", "a-z", "A-Z"], stdin_fd=in_r, stdout_fd=out_w)
            os.close(in_r)
            os.close(out_w)
            os.write(in_w, b"piped\n")
            os.close(in_w)
            assert (await p.wait(timeout_ms=10000))["state"] == "exited"
            got = b""
            while True:
                b = await asyncio.get_running_loop().run_in_executor(None, os.read, out_r, 4096)
                if not b:
                    break
                got += b
            os.close(out_r)
            assert got == b"PIPED\n", got
            p = await sb.start_process("cat", stdin=True)
            await p.write("fed\n", close=True)
            w = await p.wait(timeout_ms=10000)
            got = b"".join([x async for x in p.output(follow=True)])
            assert got == b"fed\n", (got, w)
            assert p.process in [x["process"] for x in await sb.processes()]

            assert (await sb.set_internet(True)).internet is True
            assert (await sb.set_internet(False)).internet is False
            before = sb.expires_at
            await asyncio.sleep(1.1)
            assert (await sb.renew(7200)).expires_at > before
            gone = sb.id
        try:
            await client.get(gone)
        except (sandboxd.NoSuchSandbox, sandboxd.BadState) as e:
            assert e.code in (-32001, -32002), e
        else:
            info = (await client.get(gone)).info
            assert info["state"] in ("destroying", "destroyed"), info
        try:
            await client.get("sb-nosuchthing")
            raise AssertionError("no error")
        except sandboxd.NoSuchSandbox as e:
            assert e.code == -32001
    try:
        await sandboxd.AsyncClient("/nonexistent.sock").status()
        raise AssertionError("no error")
    except sandboxd.Unavailable:
        pass


def main():
    enable_test_hooks()
    port = clientlib.free_port()
    with Env(daemon_config={"proxmox": {"firewall_period_s": "1"},
                            "network": {"probe_address": None},
                            "preview": {"listen": f"127.0.0.1:{port}",
                                        "base_url": f"http://{{port}}-{{id}}.preview.test:{port}"}
                            }) as env:
        run([("AsyncClient: the whole surface", lambda: asyncio.run(session(env)))])
        env.wait_no_containers(timeout=30)


if __name__ == "__main__":
    main()
