#!/usr/bin/env python3
"""Transfer slots under attack from two real uids: each starts as many quiet background
processes with stdout_fd as it may (their pumps last as long as the processes), and a third
uid's short transfer through a descriptor must still run at once; no uid gets more than its
share of pumps (the last free ones are kept for a uid that holds none), and the pump slots
come back when the sandboxes go.

Needs root (the attackers are other uids, reached with setuid in forked children). Every
wait is bounded."""

import json
import os
import select
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

from e2elib import Client, Env, RpcError, run  # noqa: E402

ATTACKERS = (64001, 64002)
PUMPS_PER_UID = 4  # proto/api-limits.h PUMP_MAX_PER_UID
PUMP_MAX = 6  # PUMP_MAX
SLOTS_RESERVED = 2  # SLOTS_RESERVED
SHORT_TRANSFER_S = 5.0  # far more than a few bytes take, far less than a stall


def call_fds(c, method, params, fds, timeout=120):
    """One request line sent with descriptors in the same sendmsg()."""
    i = next(c.ids)
    line = (json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode()
    with c.lock:
        socket.send_fds(c.sock, [line], fds)
    return c.wait(i, timeout)


def read_to_eof(rd, timeout=60):
    """What the pipe gives until its end (bounded); closes rd."""
    out = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not select.select([rd], [], [], 1)[0]:
            continue
        d = os.read(rd, 100)
        if not d:
            break
        out += d
    os.close(rd)
    return out


def attacker(path, uid, extra):
    """Child process as uid: a sandbox, then as many quiet pumped processes as it may, then
    extra more; returns {"sandbox", "started", "refused": [codes]} as JSON."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        out = {"started": 0, "refused": []}
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            c = Client(path, timeout=120)
            out["sandbox"] = c.call("sandbox.create", {"ttl_s": 600})["id"]
            null = os.open("/dev/null", os.O_WRONLY)
            for _ in range(PUMPS_PER_UID + extra):
                try:
                    call_fds(c, "process.start", {"id": out["sandbox"], "command": "sleep 3600",
                                                  "stdout_fd": 0}, [null])
                    out["started"] += 1
                except RpcError as e:
                    out["refused"].append(e.code)
                    out.setdefault("reasons", []).append(str(e.err))
            os.close(null)
        except Exception as e:  # noqa
            out["exception"] = repr(e)
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        d = os.read(r, 65536)
        if not d:
            break
        data += d
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def main():
    if os.getuid() != 0:
        print("SKIP: needs root (setuid to other uids)")
        sys.exit(77)
    with Env() as env:
        c = env.client()
        sb = c.call("sandbox.create", {})["id"]
        attacks = []

        def quiet_pumps_of_two_uids():
            # Each attacker takes all the pumps it may: the first its 4, the second what is
            # left but the slots kept for uids that hold none.
            for uid in ATTACKERS:
                a = attacker(env.socket, uid, 1)
                assert "exception" not in a, a
                attacks.append(a)
                assert a["refused"] and set(a["refused"]) == {-32007}, a
            pumps = sum(a["started"] for a in attacks)
            # A short transfer of another uid runs at once.
            for n in range(3):
                rd, wr = os.pipe()
                os.write(wr, b"short transfer %d\n" % n)
                os.close(wr)
                t0 = time.time()
                try:
                    r = call_fds(c, "file.write", {"id": sb, "path": "/root/short", "content_fd": 0},
                                 [rd])
                except RpcError as e:
                    raise AssertionError(f"the pumps of two uids kept root's transfer out: {e.err}")
                finally:
                    os.close(rd)
                took = time.time() - t0
                print(f"short transfer beside {pumps} quiet pumps: {took * 1000:.0f} ms",
                      flush=True)
                assert r["bytes"] == len(b"short transfer 0\n") and took < SHORT_TRANSFER_S, (r, took)
            got = c.call("sandbox.exec", {"id": sb, "command": "cat /root/short"})["stdout"]
            assert got == "short transfer 2\n", got
            # No uid got more than its share.
            assert attacks[0]["started"] == PUMPS_PER_UID, attacks
            assert 1 <= attacks[1]["started"] <= PUMP_MAX - PUMPS_PER_UID - SLOTS_RESERVED + 1, attacks
            # And a pumped process of the third uid starts: a slot was kept for it.
            rd, wr = os.pipe()
            try:
                call_fds(c, "process.start", {"id": sb, "command": "echo third", "stdout_fd": 0}, [wr])
            except RpcError as e:
                raise AssertionError(f"the pumps of two uids kept root's process out: {e.err}")
            finally:
                os.close(wr)
            assert read_to_eof(rd) == b"third\n"

        def slots_come_back():
            # The attackers' sandboxes go (root is an admin): their pumps end and the slots
            # are free again: a pumped process of root runs and its output arrives.
            for a in attacks:
                c.call("sandbox.destroy", {"id": a["sandbox"]})
            deadline = time.time() + 60
            while True:
                rd, wr = os.pipe()
                try:
                    call_fds(c, "process.start", {"id": sb, "command": "echo back",
                                                  "stdout_fd": 0}, [wr])
                    break
                except RpcError as e:
                    assert e.code == -32007 and time.time() < deadline, e.err
                    os.close(rd)
                    time.sleep(0.5)
                finally:
                    os.close(wr)
            assert read_to_eof(rd) == b"back\n"

        run([("quiet pumps of two uids leave a third uid's transfer alone", quiet_pumps_of_two_uids),
             ("the pump slots come back", slots_come_back)])


if __name__ == "__main__":
    main()
