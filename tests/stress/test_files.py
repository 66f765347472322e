#!/usr/bin/env python3
"""file.read / file.write against files that are not regular files, and against an SFTP server
that stops answering: every file operation answers within its deadline (-32006 past it), frees
its worker thread, and the next one on the same sandbox works on a new session; FIFOs, sockets
and devices are refused (-32009, EINVAL) and left untouched; /proc files read to their end;
length 0 reads nothing; sandbox.create (whose durable registry writes must not wait behind
remote file I/O) completes while every worker thread is held by stuck reads.

Stuck SFTP servers are made on purpose: the processes serving the daemon's SFTP connection to
a sandbox are found from the host (the connection its first file operation opens) and stopped
with SIGSTOP; a file swapped for a FIFO between the daemon's stat and its open is made by
delaying the server's openat(2) under strace. Every wait is bounded."""

import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

from e2elib import Env, RpcError, data_of  # noqa: E402

DEADLINE_MS = 6000
# An answer past the deadline by more than this is a failure (2 cores, sanitizers).
SLACK_S = 4.0


# ---- the container's processes, seen from the host

def _children():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _subtree(kids, pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def sftp_servers(env, vmid, exclude=()):
    """Host pids of the processes serving the daemon's SFTP connections to the container (the
    sshd connections with an "@internal-sftp" session), leaving out those in exclude."""
    root = env.containers()[vmid]["pid"]
    kids = _children()
    listener = [p for p in _subtree(kids, root)
                if _cmdline(p).startswith(("/usr/sbin/sshd -D", "sshd: /usr/sbin/sshd -D"))]
    assert len(listener) == 1, listener
    out = []
    for conn in kids.get(listener[0], []):
        pids = _subtree(kids, conn)
        if conn not in exclude and any("@internal-sftp" in _cmdline(p) for p in pids):
            out.append(pids)
    return out


def sftp_server(env, c, sb, exclude=()):
    """The processes serving the daemon's current SFTP session to sb (opened if need be)."""
    r = c.call("file.read", {"id": sb["id"], "path": "/etc/hostname"}, timeout=30)
    assert r["eof"] is True, r
    found = sftp_servers(env, sb["vmid"], exclude)
    assert len(found) == 1, found
    return found[0]


def signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def rootfs(env, vmid):
    return env.sim.admin("GET", f"/ct/{vmid}")["rootfs"]


def release_fifo(path):
    """Lets a reader blocked in open(2) on the FIFO go (it then reads end of file)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


def wait_answer(c, i, limit):
    """(seconds, result or RpcError); AssertionError when nothing came within limit."""
    t0 = time.time()
    try:
        res = c.wait(i, timeout=limit)
    except RpcError as e:
        res = e
    except TimeoutError:
        raise AssertionError(f"no answer within {limit:.0f} s")
    return time.time() - t0, res


def is_deadline(res):
    return isinstance(res, RpcError) and res.code == -32006


def is_not_regular(res):
    return isinstance(res, RpcError) and res.code == -32009 and res.data.get("errno") == "EINVAL"


def main():
    cfg = {"ssh": {"file_timeout_ms": str(DEADLINE_MS)}}
    try:
        env = Env(daemon_config=cfg)
        env.__enter__()
    except (RuntimeError, AssertionError) as e:
        # A daemon without file deadlines refuses the key: test it as it is.
        if "file_timeout_ms" not in str(e) + str(e.__context__):
            raise
        print("note: the daemon has no [ssh] file_timeout_ms; running without it", flush=True)
        env = Env()
        env.__enter__()
    cleanups = []
    try:
        run_bounded(cases(env, cleanups))
    finally:
        for f in reversed(cleanups):
            try:
                f()
            except Exception:
                pass
        env.__exit__(None, None, None)


def cases(env, cleanups):
    limit = DEADLINE_MS / 1000 + SLACK_S
    c = env.client()
    sbs = [c.call("sandbox.create", {"ttl_s": 900}) for _ in range(5)]
    a, others = sbs[0], sbs[1:]
    roots = {s["id"]: rootfs(env, s["vmid"]) for s in sbs}
    frozen = []
    cleanups.append(lambda: signal_all(frozen, signal.SIGCONT))

    def host_path(s, path):
        return os.path.join(roots[s["id"]], path.lstrip("/"))

    def mkfifo(s, path):
        r = c.call("sandbox.exec", {"id": s["id"], "command": f"mkfifo {path} && echo ok"})
        assert r["stdout"] == "ok\n", r
        cleanups.append(lambda: release_fifo(host_path(s, path)))

    def fifo_read():
        mkfifo(a, "/root/fifo")
        try:
            dt, res = wait_answer(c, c.send("file.read", {"id": a["id"], "path": "/root/fifo"}), limit)
        finally:
            release_fifo(host_path(a, "/root/fifo"))
        print(f"     FIFO read: {getattr(res, 'err', res)} after {dt * 1000:.0f} ms", flush=True)
        assert is_not_regular(res) or is_deadline(res), res
        # The sandbox's next file operation works.
        dt, res = wait_answer(c, c.send("file.read", {"id": a["id"], "path": "/etc/hostname"}), limit)
        assert not isinstance(res, RpcError) and res["eof"] is True, res

    def special_files():
        r = c.call("sandbox.exec", {"id": a["id"], "command":
                                    "ln -s /root/fifo /root/to-fifo && ln -s /nowhere /root/dangling "
                                    "&& ln -s /root /root/to-dir && echo ok"})
        assert r["stdout"] == "ok\n", r
        for p in ("/dev/null", "/dev/zero", "/dev/urandom", "/root/to-fifo"):
            dt, res = wait_answer(c, c.send("file.read", {"id": a["id"], "path": p}), limit)
            assert is_not_regular(res), (p, res)
        st = os.lstat(host_path(a, "/dev/null"))
        for p in ("/dev/null", "/dev/zero", "/root/fifo", "/root/to-fifo", "/root/dangling"):
            dt, res = wait_answer(c, c.send("file.write", {"id": a["id"], "path": p, "content": "x"}),
                                  limit)
            assert is_not_regular(res), (p, res)
        e = c.error("file.write", {"id": a["id"], "path": "/root/to-dir", "content": "x"})
        assert e.code == -32009 and e.data.get("errno") == "EISDIR", e.err
        st2 = os.lstat(host_path(a, "/dev/null"))
        assert (st2.st_mode, st2.st_rdev, st2.st_ino) == (st.st_mode, st.st_rdev, st.st_ino), st2
        r = c.call("sandbox.exec", {"id": a["id"], "command":
                                    "stat -c %F /dev/null /dev/zero /root/fifo; readlink /root/to-fifo; "
                                    "readlink /root/dangling; ls -a /root /dev | grep -v -e '^.sandboxd-nsexec-' -e '^.sandboxd-serve-' | grep -c sandboxd"})
        assert r["stdout"] == ("character special file\ncharacter special file\nfifo\n/root/fifo\n"
                               "/nowhere\n0\n"), r
        # A symbolic link to a regular file: the file is replaced, the link kept.
        c.call("file.write", {"id": a["id"], "path": "/root/real", "content": "old"})
        c.call("sandbox.exec", {"id": a["id"], "command": "ln -s real /root/link"})
        c.call("file.write", {"id": a["id"], "path": "/root/link", "content": "new", "mode": "0600"})
        r = c.call("sandbox.exec", {"id": a["id"], "command":
                                    "readlink /root/link; cat /root/real; echo; stat -c %a /root/real"})
        assert r["stdout"] == "real\nnew\n600\n", r

    def proc_files():
        r = c.call("file.read", {"id": a["id"], "path": "/proc/self/status"})
        text = data_of(r, "content")
        assert b"Name:" in text and r["eof"] is True and r["size"] == len(text), r
        r = c.call("file.read", {"id": a["id"], "path": "/proc/cpuinfo"})
        assert b"processor" in data_of(r, "content") and r["eof"] is True, r
        r = c.call("file.read", {"id": a["id"], "path": "/proc/self/status", "offset": 2, "length": 4})
        assert len(data_of(r, "content")) == 4 and r["eof"] is False, r

    def length_zero():
        c.call("file.write", {"id": a["id"], "path": "/root/five", "content": "hello"})
        r = c.call("file.read", {"id": a["id"], "path": "/root/five", "length": 0})
        assert data_of(r, "content") == b"" and r["size"] == 5 and r["eof"] is False, r
        r = c.call("file.read", {"id": a["id"], "path": "/root/five", "offset": 5, "length": 0})
        assert data_of(r, "content") == b"" and r["size"] == 5 and r["eof"] is True, r
        r = c.call("file.read", {"id": a["id"], "path": "/root/five", "offset": 1})
        assert data_of(r, "content") == b"ello" and r["eof"] is True, r

    def create_while(reads, t_sent, what):
        """Sends a create while reads are out; it must complete before any file deadline."""
        time.sleep(0.3)
        dtc, created = wait_answer(c, c.send("sandbox.create", {"ttl_s": 300}), DEADLINE_MS / 1000)
        answers, at = [], []
        for i in reads:
            answers.append(wait_answer(c, i, limit))
            at.append(f"{(time.time() - t_sent) * 1000:.0f}")
        print(f"     {what}: the create took {dtc * 1000:.0f} ms; the reads were answered by "
              f"{', '.join(at)} ms", flush=True)
        assert not isinstance(created, RpcError) and created["state"] == "ready", created
        c.call("sandbox.destroy", {"id": created["id"]}, timeout=60)
        return answers

    def four_fifo_reads():
        for s in others:
            mkfifo(s, "/root/fifo")
        t0 = time.time()
        reads = [c.send("file.read", {"id": s["id"], "path": "/root/fifo"}) for s in others]
        try:
            answers = create_while(reads, t0, "4 FIFO reads on 4 sandboxes")
        finally:
            for s in others:
                release_fifo(host_path(s, "/root/fifo"))
        assert all(is_not_regular(r) or is_deadline(r) for _, r in answers), answers

    def four_stopped_servers():
        # Every thread of libuv's pool (4 by default) held by a read that cannot finish.
        servers = [sftp_server(env, c, s) for s in others]
        for pids in servers:
            frozen.extend(pids)
            signal_all(pids, signal.SIGSTOP)
        t0 = time.time()
        reads = [c.send("file.read", {"id": s["id"], "path": "/etc/hostname"}) for s in others]
        queued = c.send("file.write", {"id": others[0]["id"], "path": "/root/queued", "content": "q"})
        try:
            answers = create_while(reads, t0, "4 stopped SFTP servers")
            dtq, rq = wait_answer(c, queued, limit)
        finally:
            signal_all(frozen, signal.SIGCONT)
        assert all(is_deadline(r) for _, r in answers) and is_deadline(rq), (answers, rq)
        assert time.time() - t0 >= DEADLINE_MS / 1000 - 0.5
        # The stopped sessions stay stopped: new ones serve the next operations.
        for s in others:
            r = c.call("file.write", {"id": s["id"], "path": "/root/after", "content": "a"}, timeout=limit)
            r = c.call("file.read", {"id": s["id"], "path": "/root/after"}, timeout=limit)
            assert r["content"] == "a", r

    def swapped_after_stat():
        if not shutil.which("strace"):
            print("     skipped: strace is not installed", flush=True)
            return
        s = c.call("sandbox.create", {"ttl_s": 300})
        cleanups.append(lambda: c.call("sandbox.destroy", {"id": s["id"]}, timeout=60))
        roots[s["id"]] = rootfs(env, s["vmid"])
        pids = sftp_server(env, c, s)
        c.call("file.write", {"id": s["id"], "path": "/root/swap", "content": "regular"}, timeout=limit)
        # The server's next openat(2) waits 2 s: well after its stat said "regular file".
        tr = subprocess.Popen(["strace", "-qq", "-e", "trace=openat", "-e",
                               "inject=openat:delay_enter=2000000", "-o", "/dev/null"] +
                              [x for p in pids for x in ("-p", str(p))],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cleanups.append(lambda: (tr.poll() is None and tr.kill(), tr.wait()))
        cleanups.append(lambda: release_fifo(host_path(s, "/root/swap")))
        try:
            time.sleep(1.0)  # attached
            i = c.send("file.read", {"id": s["id"], "path": "/root/swap"})
            time.sleep(1.0)
            tmp = host_path(s, "/root/.swap-fifo")
            os.mkfifo(tmp)
            os.rename(tmp, host_path(s, "/root/swap"))
            dt, res = wait_answer(c, i, limit)
        finally:
            tr.kill()
            tr.wait()
            release_fifo(host_path(s, "/root/swap"))
        print(f"     swapped for a FIFO between stat and open: {getattr(res, 'err', res)} after "
              f"{dt * 1000:.0f} ms", flush=True)
        # The open blocked on the FIFO (no writer): only the deadline ends it.
        assert is_deadline(res), res
        e = c.error("file.read", {"id": s["id"], "path": "/root/swap"}, timeout=limit)
        assert is_not_regular(e), e.err
        r = c.call("file.write", {"id": s["id"], "path": "/root/swap2", "content": "ok"}, timeout=limit)
        assert r["bytes"] == 2, r
        c.call("sandbox.destroy", {"id": s["id"]}, timeout=60)

    def usage():
        pid = env.proc.pid
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))
        return len(os.listdir(f"/proc/{pid}/fd")), rss // 1024

    fds0, rss0 = usage()

    def daemon_answers():
        st = c.call("daemon.status", timeout=10)
        assert st["sandboxes"].get("ready", 0) == len(sbs), st
        # One SFTP session per sandbox is kept (none at the start); stopped ones are gone.
        fds, rss = usage()
        print(f"     descriptors {fds0} -> {fds}, RSS {rss0} -> {rss} MiB", flush=True)
        assert fds <= fds0 + len(sbs) + 4, (fds0, fds)
        assert rss <= rss0 + 128, (rss0, rss)

    return [
        ("FIFO read: refused, the next read works", fifo_read),
        ("devices, FIFOs and links to them: refused, left untouched", special_files),
        ("/proc files read to their end", proc_files),
        ("length 0 reads nothing", length_zero),
        ("4 FIFO reads on 4 sandboxes: a create completes", four_fifo_reads),
        ("4 stopped SFTP servers: a create completes, deadline, new sessions", four_stopped_servers),
        ("swapped for a FIFO after the stat: deadline", swapped_after_stat),
        ("the daemon answers", daemon_answers),
    ]


def run_bounded(tests):
    """e2elib.run() without the exit: failures are counted, then reported by main's caller."""
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
    global FAILED
    FAILED = failed


FAILED = 0

if __name__ == "__main__":
    main()
    sys.exit(1 if FAILED else 0)
