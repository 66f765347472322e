#!/usr/bin/env python3
"""The file system methods (file.list, file.stat, file.remove, file.mkdir, file.rename) and
file.write's offset/append, against pve-sim: files, folders, symbolic links, missing paths,
permission errors, a recursive removal that does not follow links out of the tree, the
content cap under the request line cap, another uid refused, sandboxctl's commands, and
-32006 at file_timeout_ms on a session that stopped answering."""

import json
import os
import shutil
import signal
import subprocess

from e2elib import BUILD, Env, RpcError, b64, calls_as_uid, data_of, run

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")


def sh(c, sid, command):
    r = c.call("sandbox.exec", {"id": sid, "command": command})
    assert r["exit_code"] == 0, r
    return r["stdout"]


def errno_of(e):
    assert isinstance(e, RpcError), e
    return e.code, e.data.get("errno")


def sshd_sessions(state_dir):
    """Pids of every per-connection process of the sshd listeners of one pve-sim (one
    `sshd -D -e -f STATE_DIR/.../sshd_config` per container); other simulators on this host
    are left alone."""
    procs = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except (OSError, IndexError, ValueError):
            continue
        procs[int(d)] = (ppid, cmd)
    mark = b"sshd -D -e -f " + state_dir.encode() + b"/"
    listeners = {p for p, (_, cmd) in procs.items() if mark in cmd}
    out, grew = set(), True
    while grew:
        grew = False
        for p, (ppid, _) in procs.items():
            if p not in out and p not in listeners and (ppid in listeners or ppid in out):
                out.add(p)
                grew = True
    return out  # (the shell that started a listener matches too: listeners are never in it)


def deadline_test(env):
    """A file method on a session that stopped answering gets -32006 at file_timeout_ms, and
    the next one runs on a new session (a daemon started afresh with a short
    file_timeout_ms, and a sandbox of its own)."""
    assert env.stop_daemon() == 0
    shutil.rmtree(env.dir, ignore_errors=True)  # start_daemon makes a new one
    env.daemon_config = {"ssh": {"file_timeout_ms": "4000"}}
    env.start_daemon()
    c = env.client()
    sid = c.call("sandbox.create", {})["id"]
    c.call("file.stat", {"id": sid, "path": "/"})  # the SFTP session is up
    frozen = sshd_sessions(env.sim.state_dir)
    assert frozen, "no sshd session found"
    for p in frozen:
        os.kill(p, signal.SIGSTOP)
    try:
        e = c.error("file.list", {"id": sid, "path": "/root"})
        assert e.code == -32006 and e.data["timeout_ms"] == 4000, e
        assert "file operation" in e.data["reason"], e.data
        r = c.call("file.mkdir", {"id": sid, "path": "/root/after", "parents": True})
        assert r == {"created": True}, r
    finally:
        for p in frozen:
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
    assert c.call("file.stat", {"id": sid, "path": "/root/after"})["type"] == "dir"


def main():
    with Env() as env:
        c = env.client()
        sb = c.call("sandbox.create", {})
        sid = sb["id"]
        sh(c, sid, "mkdir -p /root/t/d/e && printf hello > /root/t/f && ln -s f /root/t/l && "
                   "ln -s /nowhere /root/t/dangling && mkfifo /root/t/p && chmod 0751 /root/t/d && "
                   "touch -d @1700000000 /root/t/f")

        def list_folder():
            r = c.call("file.list", {"id": sid, "path": "/root/t"})
            assert r["truncated"] is False, r
            by = {e["name"]: e for e in r["entries"]}
            assert [e["name"] for e in r["entries"]] == sorted(by), r
            assert set(by) == {"d", "f", "l", "dangling", "p"}, by
            assert by["f"]["type"] == "file" and by["f"]["size"] == 5, by["f"]
            assert by["f"]["mtime"] == 1700000000 and by["f"]["mode"] == "0644", by["f"]
            assert by["d"]["type"] == "dir" and by["d"]["mode"] == "0751", by["d"]
            assert by["l"]["type"] == "symlink" and by["dangling"]["type"] == "symlink", by
            assert by["p"]["type"] == "other", by["p"]
            # A link to a folder is followed; the limit truncates.
            sh(c, sid, "ln -s /root/t /root/tl")
            r = c.call("file.list", {"id": sid, "path": "/root/tl", "limit": 2})
            assert r["truncated"] is True and len(r["entries"]) == 2, r
            # Not a folder, missing, bad limit.
            assert errno_of(c.error("file.list", {"id": sid, "path": "/root/t/f"})) == (-32009, "ENOTDIR")
            assert errno_of(c.error("file.list", {"id": sid, "path": "/root/none"})) == (-32009, "ENOENT")
            assert errno_of(c.error("file.list", {"id": sid, "path": "/root/t/f/x"})) == (-32009, "ENOTDIR")
            # A name that is not UTF-8 comes back as name_b64.
            sh(c, sid, "mkdir /root/u && touch \"/root/u/$(printf '\\377x')\"")
            r = c.call("file.list", {"id": sid, "path": "/root/u"})
            assert r["entries"][0].get("name_b64") == b64(b"\xffx") and "name" not in r["entries"][0], r
            e = c.error("file.list", {"id": sid, "path": "/root", "limit": 10001})
            assert e.code == -32602 and e.data["param"] == "limit", e
            e = c.error("file.list", {"id": sid, "path": "root"})
            assert e.code == -32602 and e.data["param"] == "path", e

        def stat_things():
            s = c.call("file.stat", {"id": sid, "path": "/root/t/l"})
            assert s["type"] == "symlink" and s["target"] == "f" and s["name"] == "l", s
            s = c.call("file.stat", {"id": sid, "path": "/root/t/l", "follow": True})
            assert s["type"] == "file" and s["size"] == 5 and "target" not in s, s
            s = c.call("file.stat", {"id": sid, "path": "/root/t/d"})
            assert s["type"] == "dir" and s["mode"] == "0751", s
            s = c.call("file.stat", {"id": sid, "path": "/"})
            assert s["type"] == "dir" and s["name"] == "/", s
            assert errno_of(c.error("file.stat", {"id": sid, "path": "/root/t/dangling", "follow": True})) == (-32009, "ENOENT")
            assert c.call("file.stat", {"id": sid, "path": "/root/t/dangling"})["target"] == "/nowhere"
            assert errno_of(c.error("file.stat", {"id": sid, "path": "/root/none"})) == (-32009, "ENOENT")

        def mkdir_modes():
            r = c.call("file.mkdir", {"id": sid, "path": "/root/m", "mode": "0700"})
            assert r == {"created": True}, r
            assert sh(c, sid, "stat -c %a /root/m") == "700\n"
            assert errno_of(c.error("file.mkdir", {"id": sid, "path": "/root/m"})) == (-32009, "EEXIST")
            assert errno_of(c.error("file.mkdir", {"id": sid, "path": "/root/a/b/c"})) == (-32009, "ENOENT")
            r = c.call("file.mkdir", {"id": sid, "path": "/root/a/b/c", "parents": True})
            assert r == {"created": True}, r
            assert sh(c, sid, "stat -c %a /root/a/b/c") == "755\n"
            assert c.call("file.mkdir", {"id": sid, "path": "/root/a/b/c", "parents": True}) == {"created": False}
            assert errno_of(c.error("file.mkdir", {"id": sid, "path": "/root/t/f", "parents": True})) == (-32009, "EEXIST")
            assert errno_of(c.error("file.mkdir", {"id": sid, "path": "/root/t/f/x", "parents": True})) == (-32009, "ENOTDIR")
            e = c.error("file.mkdir", {"id": sid, "path": "/root/z", "mode": "9"})
            assert e.code == -32602 and e.data["param"] == "mode", e

        def rename_things():
            sh(c, sid, "printf old > /root/r1 && printf new > /root/r2 && mkdir /root/rd && ln -s /root/t /root/rl")
            assert c.call("file.rename", {"id": sid, "from": "/root/r2", "to": "/root/r1"}) == {}
            assert sh(c, sid, "cat /root/r1; test -e /root/r2 || echo gone") == "newgone\n"
            # Over a folder: refused, nothing moved.
            assert errno_of(c.error("file.rename", {"id": sid, "from": "/root/r1", "to": "/root/rd"})) == (-32009, "EISDIR")
            assert errno_of(c.error("file.rename", {"id": sid, "from": "/root/rd", "to": "/root/r1"})) == (-32009, "ENOTDIR")
            # Over a link to a folder: the link is replaced, the folder untouched.
            c.call("file.rename", {"id": sid, "from": "/root/r1", "to": "/root/rl"})
            got = sh(c, sid, "cat /root/rl; test -L /root/rl || echo notlink; ls /root/t | wc -l")
            assert got == "newnotlink\n5\n", got
            # A folder to a new name, a missing source.
            c.call("file.rename", {"id": sid, "from": "/root/rd", "to": "/root/rd2"})
            assert c.call("file.stat", {"id": sid, "path": "/root/rd2"})["type"] == "dir"
            assert errno_of(c.error("file.rename", {"id": sid, "from": "/root/none", "to": "/root/x"})) == (-32009, "ENOENT")
            assert errno_of(c.error("file.rename", {"id": sid, "from": "/root/rl", "to": "/root/none/x"})) == (-32009, "ENOENT")

        def remove_tree():
            sh(c, sid, "mkdir -p /root/outside /root/tree/a/b /root/tree/empty && printf keep > /root/outside/k && "
                       "ln -s /root/outside /root/tree/a/out && ln -s /root/outside/k /root/tree/kl && "
                       "printf x > /root/tree/a/b/f && ln -s /root/outside /root/tree/a/b/out2")
            # Not recursive: a folder with contents is refused.
            assert errno_of(c.error("file.remove", {"id": sid, "path": "/root/tree"})) == (-32009, "ENOTEMPTY")
            r = c.call("file.remove", {"id": sid, "path": "/root/tree", "recursive": True})
            assert r == {"removed": 8}, r  # 7 entries and the folder
            assert sh(c, sid, "cat /root/outside/k; test -e /root/tree || echo gone") == "keepgone\n"
            # A link is removed itself, never its target; an empty folder; a file.
            sh(c, sid, "ln -s /root/outside /root/ol && mkdir /root/em")
            assert c.call("file.remove", {"id": sid, "path": "/root/ol"}) == {"removed": 1}
            assert c.call("file.remove", {"id": sid, "path": "/root/em"}) == {"removed": 1}
            assert c.call("file.remove", {"id": sid, "path": "/root/outside/k"}) == {"removed": 1}
            assert errno_of(c.error("file.remove", {"id": sid, "path": "/root/outside/k"})) == (-32009, "ENOENT")
            assert errno_of(c.error("file.remove", {"id": sid, "path": "/", "recursive": True})) == (-32009, "EPERM")
            # A trailing slash or "." would reach through a link: the link itself is removed,
            # "." is refused.
            sh(c, sid, "ln -s /root/outside /root/ol2")
            assert errno_of(c.error("file.remove", {"id": sid, "path": "/root/ol2/.", "recursive": True})) == (-32009, "EINVAL")
            assert c.call("file.remove", {"id": sid, "path": "/root/ol2/", "recursive": True}) == {"removed": 1}
            assert sh(c, sid, "test -d /root/outside && echo there") == "there\n"
            assert sh(c, sid, "ls /root/outside | wc -l") == "0\n"

        def permission_errors():
            # /proc is mounted in the container and refuses root too; each error is the
            # kernel's (through SFTP), and nothing changes.
            for m, p, want in (("file.mkdir", {"path": "/proc/x"}, "ENOENT"),
                               ("file.mkdir", {"path": "/proc/sys/x", "parents": True}, "ENOENT"),
                               ("file.remove", {"path": "/proc/version"}, "EACCES"),
                               # rm -rf fails in there: the walk over SFTP names the error
                               ("file.remove", {"path": "/proc/1", "recursive": True}, "EACCES"),
                               ("file.rename", {"from": "/proc/version", "to": "/proc/v2"}, "ENOENT"),
                               # SFTP v3 reports this write as a generic failure
                               ("file.write", {"path": "/proc/version", "content": "x", "append": True}, "EIO")):
                p["id"] = sid
                e = c.error(m, p)
                assert e.code == -32009 and e.data["errno"] == want, (m, p, e)
            assert c.call("file.stat", {"id": sid, "path": "/proc/version"})["type"] == "file"
            # stat says 0 bytes: the read that finds the end finds the text, which is kept
            r = c.call("file.read", {"id": sid, "path": "/proc/version"})
            assert r["content"] == sh(c, sid, "cat /proc/version") and r["eof"], r
            assert sh(c, sid, "test -d /proc/1 && echo there") == "there\n"

        def write_offset_append():
            p = "/root/w"
            c.call("file.write", {"id": sid, "path": p, "content": "hello world", "mode": "0600"})
            r = c.call("file.write", {"id": sid, "path": p, "content": "HELLO", "offset": 0})
            assert r == {"bytes": 5}, r
            c.call("file.write", {"id": sid, "path": p, "content_b64": b64(b"\x00!"), "append": True})
            got = c.call("file.read", {"id": sid, "path": p})
            assert data_of(got, "content") == b"HELLO world\x00!", got
            assert sh(c, sid, f"stat -c %a {p}") == "600\n"  # an in-place write keeps the mode
            # Past the end: a gap of zeros; a new file gets the mode.
            c.call("file.write", {"id": sid, "path": p, "content": "Z", "offset": 16})
            got = c.call("file.read", {"id": sid, "path": p})
            assert data_of(got, "content") == b"HELLO world\x00!\x00\x00\x00Z", got
            c.call("file.write", {"id": sid, "path": "/root/new/n", "content": "a", "append": True, "mode": "0640"})
            assert sh(c, sid, "cat /root/new/n; stat -c %a /root/new/n") == "a640\n"
            # Through a link, the link kept; a folder, a FIFO refused.
            c.call("file.write", {"id": sid, "path": "/root/t/l", "content": "!", "append": True})
            assert sh(c, sid, "cat /root/t/f; test -L /root/t/l && echo link") == "hello!link\n"
            assert errno_of(c.error("file.write", {"id": sid, "path": "/root/t/d", "content": "x", "offset": 0})) == (-32009, "EISDIR")
            assert errno_of(c.error("file.write", {"id": sid, "path": "/root/t/p", "content": "x", "append": True})) == (-32009, "EINVAL")
            # Limits: both at once, a negative offset, an end past 2^53 - 1.
            e = c.error("file.write", {"id": sid, "path": p, "content": "x", "offset": 0, "append": True})
            assert e.code == -32602 and e.data["param"] == "append", e
            e = c.error("file.write", {"id": sid, "path": p, "content": "x", "offset": -1})
            assert e.code == -32602 and e.data["param"] == "offset", e
            e = c.error("file.write", {"id": sid, "path": p, "content": "xy", "offset": (1 << 53) - 2})
            assert e.code == -32602 and e.data["param"] == "offset", e

        def content_cap():
            # With the default 16 MiB request line, base64 content of 12 MiB minus a little fits;
            # 12 MiB itself does not (the line would be longer than 16 MiB).
            data = os.urandom(12 * 1024 * 1024 - 4096)
            r = c.call("file.write", {"id": sid, "path": "/root/big", "content_b64": b64(data)})
            assert r["bytes"] == len(data), r
            r = c.call("file.read", {"id": sid, "path": "/root/big", "offset": len(data) - 100, "length": 100})
            assert data_of(r, "content") == data[-100:], r
            # a reply serialised off the loop and written in parts: whole, byte for byte
            r = c.call("file.read", {"id": sid, "path": "/root/big", "length": 1 << 20})
            assert data_of(r, "content") == data[:1 << 20] and not r["eof"], r["size"]
            big = env.client()
            try:
                big.call("file.write", {"id": sid, "path": "/root/big2", "content_b64": b64(os.urandom(12 * 1024 * 1024))})
                raise AssertionError("a line over the cap was accepted")
            except ConnectionError:
                pass  # answered -32600 with id null, then closed
            big.close()
            assert sh(c, sid, "test -e /root/big2 || echo no") == "no\n"

        def other_uid_refused():
            sh(c, sid, "printf k > /root/keep")

            calls = {
                "file.list": {"id": sid, "path": "/root"},
                "file.stat": {"id": sid, "path": "/root/keep"},
                "file.remove": {"id": sid, "path": "/root/keep"},
                "file.mkdir": {"id": sid, "path": "/root/made"},
                "file.rename": {"id": sid, "from": "/root/keep", "to": "/root/moved"},
                "file.write": {"id": sid, "path": "/root/keep", "content": "x", "append": True},
            }
            out = calls_as_uid(env.socket, 65534, calls.items())
            assert all(v == -32001 for v in out.values()), out
            assert sh(c, sid, "cat /root/keep; test -e /root/made || echo no") == "kno\n"

        def sandboxctl_commands():
            def ctl(*args, rc=0):
                r = subprocess.run([SANDBOXCTL, "--socket", env.socket, *args], capture_output=True,
                                   text=True, timeout=120)
                assert r.returncode == rc, (args, r.returncode, r.stdout, r.stderr)
                return r
            ctl("mkdir", "-p", "-m", "0700", sid, "/root/ctl/a/b")
            assert sh(c, sid, "stat -c %a /root/ctl/a/b") == "700\n"
            sh(c, sid, "printf 12345 > /root/ctl/a/f && ln -s f /root/ctl/a/l")
            out = ctl("ls", sid, "/root/ctl/a").stdout.splitlines()
            assert len(out) == 3 and out[0].startswith("drwx------") and out[0].endswith(" b"), out
            assert out[1].startswith("-rw-r--r--") and " 5 " in out[1] and out[1].endswith(" f"), out
            assert out[2].startswith("lrwxrwxrwx") and out[2].endswith(" l"), out
            st = ctl("stat", sid, "/root/ctl/a/l").stdout
            assert "type   symlink" in st and "target f" in st, st
            st = ctl("stat", "-L", sid, "/root/ctl/a/l").stdout
            assert "type   file" in st and "size   5" in st, st
            js = json.loads(ctl("--json", "ls", sid, "/root/ctl").stdout)
            assert [e["name"] for e in js["entries"]] == ["a"] and js["truncated"] is False, js
            ctl("mv", sid, "/root/ctl/a/f", "/root/ctl/g")
            r = ctl("rm", sid, "/root/ctl/a", rc=2)
            assert "ENOTEMPTY" in r.stderr or "not empty" in r.stderr, r.stderr
            ctl("rm", "-r", sid, "/root/ctl/a")
            assert sh(c, sid, "ls /root/ctl") == "g\n"
            r = ctl("ls", sid, "/root/none", rc=2)
            assert "-32009" in r.stderr, r.stderr
            ctl("rm", sid, rc=64)
            ctl("mv", sid, "/a", rc=64)

        run([("file.list", list_folder),
             ("file.stat", stat_things),
             ("file.mkdir", mkdir_modes),
             ("file.rename", rename_things),
             ("file.remove recursive keeps link targets", remove_tree),
             ("permission errors", permission_errors),
             ("file.write offset and append", write_offset_append),
             ("content cap under the request line cap", content_cap),
             ("another uid gets -32001", other_uid_refused),
             ("sandboxctl ls, stat, rm, mkdir, mv", sandboxctl_commands),
             ("-32006 at file_timeout_ms, then a new session", lambda: deadline_test(env))])


if __name__ == "__main__":
    main()
