#!/usr/bin/env python3
"""One uid's stuck file calls cannot hold the file workers another uid needs.

uid A (65534) owns 16 sandboxes whose SFTP servers stop answering (the processes serving the
daemon's SFTP session to each are stopped with SIGSTOP from the host, as test_files.py does)
and sends file calls to all of them, more than the daemon has file workers. While they hang
(each until the file deadline), uid B (root) writes files on a healthy sandbox of its own:
every write, command and daemon.status must be answered long before the deadline. p50/p99 are printed; the bound asserted
is loose (a loaded 2-core machine under sanitizers), the goal is 200 ms."""

import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)

from e2elib import Client, Env, RpcError  # noqa: E402
from test_files import sftp_servers, signal_all  # noqa: E402

DEADLINE_MS = 12000
A_UID = 65534
A_SANDBOXES = 16
CALLS_PER_SANDBOX = 3
MEASURE_S = 6.0
P99_BOUND_S = 2.0


def client_as(env, uid):
    """A connection whose peer credentials are uid's (SO_PEERCRED: the effective ids at
    connect time)."""
    os.setegid(uid)
    os.seteuid(uid)
    try:
        return Client(env.socket, timeout=120)
    finally:
        os.seteuid(0)
        os.setegid(0)


def wait_all(c, ids, timeout):
    out = []
    for i in ids:
        try:
            out.append(c.wait(i, timeout=timeout))
        except RpcError as e:
            out.append(e)
    return out


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    if os.getuid() != 0:
        print("SKIP: needs root (a second uid)", flush=True)
        sys.exit(77)
    env = Env(daemon_config={"ssh": {"file_timeout_ms": str(DEADLINE_MS)}})
    env.__enter__()
    frozen = []
    failed = False
    try:
        failed = not run(env, frozen)
    except Exception:
        import traceback
        traceback.print_exc()
        failed = True
    finally:
        signal_all(frozen, signal.SIGCONT)
        env.__exit__(None, None, None)
    sys.exit(1 if failed else 0)


def run(env, frozen):
    t0 = time.time()
    a = client_as(env, A_UID)
    b = env.client()
    ids = [a.send("sandbox.create", {"ttl_s": 600}) for _ in range(A_SANDBOXES)]
    ids.append(b.send("sandbox.create", {"ttl_s": 600}))
    sbs = wait_all(a, ids[:-1], 240)
    mine = b.wait(ids[-1], timeout=240)
    assert all(not isinstance(s, RpcError) for s in sbs), sbs
    print(f"     {A_SANDBOXES} sandboxes of uid {A_UID} and 1 of root in "
          f"{time.time() - t0:.1f} s", flush=True)

    # Each of A's sandboxes gets its SFTP session, then the session's server is stopped.
    opened = wait_all(a, [a.send("file.read", {"id": s["id"], "path": "/etc/hostname"})
                          for s in sbs], 60)
    assert all(not isinstance(r, RpcError) for r in opened), opened
    for s in sbs:
        found = sftp_servers(env, s["vmid"])
        assert len(found) == 1, found
        frozen.extend(found[0])
        signal_all(found[0], signal.SIGSTOP)
    b.call("file.write", {"id": mine["id"], "path": "/root/warm", "content": "w"}, timeout=60)

    # A's calls: one running on each sandbox, the others queued behind it.
    t_sent = time.time()
    stuck = [a.send("file.read", {"id": s["id"], "path": "/etc/hostname"})
             for _ in range(CALLS_PER_SANDBOX) for s in sbs]
    time.sleep(0.5)
    # Root's file.write, sandbox.exec and daemon.status in turn on its healthy sandbox.
    lat = {"file.write": [], "sandbox.exec": [], "daemon.status": []}
    n = 0
    while time.time() - t_sent < MEASURE_S or min(len(v) for v in lat.values()) < 5:
        t = time.time()
        timeout = DEADLINE_MS / 1000 + 30
        if n % 3 == 0:
            r = b.call("file.write", {"id": mine["id"], "path": f"/root/b{n % 4}",
                                      "content": "x" * 1024}, timeout=timeout)
            assert r["bytes"] == 1024, r
            what = "file.write"
        elif n % 3 == 1:
            r = b.call("sandbox.exec", {"id": mine["id"], "command": "echo ok"}, timeout=timeout)
            assert r["exit_code"] == 0 and r["stdout"] == "ok\n", r
            what = "sandbox.exec"
        else:
            r = b.call("daemon.status", timeout=timeout)
            assert "sandboxes" in r, r
            what = "daemon.status"
        lat[what].append(time.time() - t)
        n += 1
    ok = True
    for what, xs in lat.items():
        p50, p99 = percentile(xs, 50), percentile(xs, 99)
        print(f"     uid 0's {what} while uid {A_UID} holds {A_SANDBOXES} stuck sandboxes: "
              f"{len(xs)} calls, p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
              f"max {max(xs) * 1000:.0f} ms (goal 200 ms, bound {P99_BOUND_S * 1000:.0f} ms)",
              flush=True)
        ok = ok and p99 < P99_BOUND_S
    print(f"{'ok  ' if ok else 'FAIL'} another uid's file.write, exec and status stay fast",
          flush=True)

    # A's calls end at their deadline (or earlier, once let go) and the daemon is intact.
    signal_all(frozen, signal.SIGCONT)
    answers = wait_all(a, stuck, DEADLINE_MS / 1000 * (CALLS_PER_SANDBOX + 1) + 30)
    print(f"     uid {A_UID}'s {len(stuck)} calls answered "
          f"{time.time() - t_sent:.1f} s after they were sent", flush=True)
    r = a.call("file.read", {"id": sbs[0]["id"], "path": "/etc/hostname"}, timeout=60)
    assert r["eof"] is True, r
    st = b.call("daemon.status", timeout=10)
    assert "sandboxes" in st, st
    del answers
    a.close()
    b.close()
    print(f"     total {time.time() - t0:.1f} s", flush=True)
    return ok


if __name__ == "__main__":
    main()
