#!/usr/bin/env python3
"""sandbox.exec under attack, against the simulator: every way a command can try to outlive
its timeout (or its client) must fail, background processes end with the command, a timeout
has one result shape and says whether the command started, max_output_bytes 0 keeps nothing,
and the published size limits are the real ones (a request at every limit runs, one byte more
is refused as invalid params).

Leftover processes are found by a separate exec that scans the container's /proc for the
unique sleep durations each case uses. Every wait is bounded."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

from e2elib import Env, RpcError, run  # noqa: E402

MARK = "SANDBOXD_EXEC_ID"

# Each escape is one exec with a 2 s timeout; its leftover is `sleep <n>`.
ESCAPES = {
    # The reported one: out of the process group and without the marker.
    "issue": f"env -u {MARK} setsid /bin/sleep 700101 >/dev/null 2>&1 & sleep 700100",
    "setsid": "setsid sleep 700102 & sleep 700100",
    "double fork": f"(env -u {MARK} setsid sh -c 'sleep 700103 &' &); sleep 700100",
    "env -u marker": f"env -u {MARK} sleep 700104 & sleep 700100",
    "env -i": "env -i /bin/setsid /bin/sleep 700105 & sleep 700100",
    "daemon(3)": (f"(cd /; env -u {MARK} setsid sh -c "
                  "'exec </dev/null >/dev/null 2>&1; sleep 700106 &' &); sleep 700100"),
    "nohup": f"env -u {MARK} setsid nohup sleep 700107 >/dev/null 2>&1 & sleep 700100",
    "disown": f"sh -c 'env -u {MARK} setsid sleep 700108 & disown 2>/dev/null; true'; sleep 700100",
    "nested unshare -pf": f"env -u {MARK} setsid unshare -pf sleep 700109 >/dev/null 2>&1 & sleep 700100",
}


def worst(n):
    """n bytes of the worst mix for shell quoting: one ' to three of \" $ `."""
    return ("'\"$`" * (n // 4 + 1))[:n]


def main():
    with Env() as env:
        c = env.client()
        sb = c.call("sandbox.create", {"ttl_s": 900})
        sid = sb["id"]
        limits = c.call("rpc.discover")["x-limits"]

        def ex(params, timeout=120, client=None):
            p = {"id": sid}
            p.update(params)
            return (client or c).call("sandbox.exec", p, timeout=timeout)

        def leftovers(regex):
            """Pids of processes with an argument that matches regex exactly."""
            # (in the container's /proc; `; true` keeps sh from becoming grep, whose own argv
            # holds the regex)
            r = ex({"command": 'nsenter -m -t 1 sh -c \'grep -l -s -z -x -E "$P" /proc/[0-9]*/cmdline; true\'',
                    "env": {"P": regex}, "timeout_ms": 20000})
            return sorted(int(f.split("/")[2]) for f in r["stdout"].split())

        def gone_within(regex, seconds):
            deadline = time.time() + seconds
            left = leftovers(regex)
            while left and time.time() < deadline:
                time.sleep(0.25)
                left = leftovers(regex)
            return left

        def escapes_after_timeout():
            ids = {name: c.send("sandbox.exec", {"id": sid, "command": cmd, "timeout_ms": 2000})
                   for name, cmd in ESCAPES.items()}
            failed = []
            for name, i in ids.items():
                r = c.wait(i, timeout=60)
                assert r["timed_out"] is True, (name, r)
            t_end = time.time()
            for name, i in ids.items():
                n = ESCAPES[name].split("sleep ")[1].split()[0]
                left = gone_within(n, max(0.0, t_end + 5 - time.time()))
                print(f"     {name}: {len(left)} left", flush=True)
                if left:
                    failed.append((name, left))
            assert not leftovers("7001[0-9][0-9]"), leftovers("7001[0-9][0-9]")
            assert not failed, f"escaped the timeout: {failed}"

        def kills_own_wrapper():
            # The command's process group holds whatever waits for it (sshd's child):
            # a command that kills it ends killed, and what it detached ends too.
            t0 = time.time()
            r = ex({"command": f"env -u {MARK} setsid sleep 700111 & sleep 0.3; kill -KILL 0",
                    "timeout_ms": 20000})
            print(f"     result in {time.time() - t0:.1f} s: exit_code={r['exit_code']} "
                  f"signal={r['signal']}", flush=True)
            assert r["signal"] == "SIGKILL" and r["exit_code"] is None, r
            left = gone_within("700111", 5)
            assert not left, f"survived: {left}"

        def cancel_on_disconnect():
            c2 = env.client()
            c2.send("sandbox.exec", {"id": sid, "timeout_ms": 60000,
                                     "command": f"env -u {MARK} setsid sleep 700121 & "
                                                "(setsid sh -c 'sleep 700122 &' &); sleep 700120"})
            deadline = time.time() + 10
            while len(leftovers("70012[0-2]")) < 3 and time.time() < deadline:
                time.sleep(0.1)
            assert len(leftovers("70012[0-2]")) == 3, leftovers("70012[0-2]")
            c2.close()
            left = gone_within("70012[0-2]", 8)
            assert not left, f"survived the client: {left}"

        def background_ends_with_command():
            t0 = time.time()
            r = ex({"command": "sleep 700201 & echo started", "timeout_ms": 8000}, timeout=60)
            took = time.time() - t0
            print(f"     `sleep 700201 & echo started`: {took:.2f} s, exit_code={r['exit_code']}, "
                  f"timed_out={r['timed_out']}", flush=True)
            assert r["timed_out"] is False and r["exit_code"] == 0, r
            assert r["stdout"] == "started\n", r
            assert took < 3, took
            assert not gone_within("700201", 3)
            # Detached and without output: ends all the same.
            r = ex({"command": f"env -u {MARK} setsid sleep 700202 >/dev/null 2>&1 & exit 4"})
            assert r["exit_code"] == 4, r
            assert not gone_within("700202", 3)
            # Orphans handed to the namespace's init are reaped while the command runs.
            r = ex({"command": "i=0; while [ $i -lt 20 ]; do (sleep 0.05 &); i=$((i+1)); done; "
                               "sleep 1; grep -l -s '^[0-9]* ([^)]*) Z' /proc/[0-9]*/stat | wc -l"})
            assert r["stdout"].strip() == "0", f"zombies: {r}"

        def status_signal_stdin_env_cwd():
            cases = [
                ({"command": "exit 7"}, 7, None),
                ({"command": "kill -TERM $$"}, None, "SIGTERM"),
                ({"command": "echo before; kill -KILL $$"}, None, "SIGKILL"),
                ({"command": "kill -SEGV $$"}, None, "SIGSEGV"),
                ({"argv": ["sh", "-c", "exit 3"]}, 3, None),
            ]
            for params, code, sig in cases:
                r = ex(params)
                assert (r["exit_code"], r["signal"]) == (code, sig), (params, r)
                assert r["timed_out"] is False and r["started"] is True, r
            r = ex({"command": "cat; printf '|%s|%s|' \"$A\" \"$(pwd)\"", "stdin": "in put\n",
                    "env": {"A": "it's \"q\" $x"}, "cwd": "/tmp"})
            assert r["stdout"] == "in put\n|it's \"q\" $x|/tmp|", r
            assert r["exit_code"] == 0, r

        def timeout_one_ms_shape():
            shapes = set()
            for _ in range(30):
                r = ex({"command": "true", "timeout_ms": 1})
                assert "started" in r, r
                shapes.add((r["timed_out"], r["exit_code"], r["signal"]))
                if r["timed_out"]:
                    assert r["exit_code"] is None and r["signal"] is None, r
                else:
                    assert r["exit_code"] == 0 and r["started"] is True, r
            print(f"     shapes seen: {sorted(shapes, key=str)}", flush=True)

        def queued_behind_32():
            busy = env.client()
            ids = [busy.send("sandbox.exec", {"id": sid, "command": "sleep 700301",
                                              "timeout_ms": 6000}) for _ in range(32)]
            time.sleep(0.5)
            t0 = time.time()
            r = ex({"command": "echo never", "timeout_ms": 2000}, timeout=60)
            print(f"     33rd exec: {time.time() - t0:.1f} s, timed_out={r['timed_out']}, "
                  f"started={r.get('started')}, exit_code={r['exit_code']}", flush=True)
            assert r["timed_out"] is True and r.get("started") is False, r
            assert r["exit_code"] is None and r["signal"] is None and r["stdout"] == "", r
            assert r["duration_ms"] >= 1990, r
            started = 0
            for i in ids:
                rr = busy.wait(i, timeout=60)
                assert rr["timed_out"] is True, rr
                started += rr["started"]
            busy.close()
            print(f"     of the 32 long ones {started} had started", flush=True)
            assert not gone_within("700301", 5)

        def max_output_zero():
            r = ex({"command": "echo hello; echo err >&2", "max_output_bytes": 0})
            assert r["stdout"] == "" and r["stderr"] == "", r
            assert r["stdout_truncated"] is True and r["stderr_truncated"] is True, r
            r = ex({"command": "true", "max_output_bytes": 0})
            assert r["stdout_truncated"] is False and r["stderr_truncated"] is False, r
            r = ex({"command": "echo hello", "max_output_bytes": 0, "stream": True})
            assert r["stdout_truncated"] is True, r

        def limits_are_real():
            cmax, emax, pmax = (limits["command_max_bytes"], limits["env_max_bytes"],
                                limits["path_max_bytes"])
            amax, anum, evars = (limits["argv_max_bytes"], limits["argv_max_entries"],
                                 limits["env_max_vars"])
            print(f"     published: command {cmax}, argv {anum} entries / {amax} bytes, "
                  f"env {evars} vars / {emax} bytes, path {pmax}", flush=True)
            head = "echo ok #"
            cmd = head + worst(cmax - len(head))
            r = ex({"command": cmd})
            assert (r["exit_code"], r["stdout"]) == (0, "ok\n"), r
            e = c.error("sandbox.exec", {"id": sid, "command": cmd + "x"})
            assert e.code == -32602 and e.data.get("param") == "command", e.err
            # Every field at its limit at once: a worst-case cwd (made first), env and command.
            cwd, comp = "/tmp/lim", 0
            while len(cwd) < pmax:
                n = min(200, pmax - len(cwd) - 1)
                if pmax - len(cwd) - 1 - n == 1:
                    n -= 1
                cwd += "/" + worst(n).replace("/", "_")
                comp += 1
            assert len(cwd) == pmax
            r = ex({"argv": ["mkdir", "-p", cwd]})
            assert r["exit_code"] == 0, r
            per = emax // evars
            envs = {}
            for i in range(evars):
                name = f"V{i}"
                envs[name] = worst(per - len(name))
            assert sum(len(k) + len(v) for k, v in envs.items()) <= emax
            head = 'echo ok "$V0" #'
            r = ex({"command": head + worst(cmax - len(head)), "env": envs, "cwd": cwd})
            assert (r["exit_code"], r["stdout"]) == (0, "ok " + envs["V0"] + "\n"), r
            per = amax // anum
            argv = ["true"] + [worst(per - 1) for _ in range(anum - 1)]
            argv[1] += worst(per - 1 - len("true"))
            assert sum(len(a) + 1 for a in argv) == amax
            r = ex({"argv": argv, "env": envs, "cwd": cwd})
            assert r["exit_code"] == 0, r
            e = c.error("sandbox.exec", {"id": sid, "argv": argv + [""]})
            assert e.code == -32602 and e.data.get("param") == "argv", e.err
            e = c.error("sandbox.exec", {"id": sid, "command": "true",
                                         "env": dict(envs, V0=envs["V0"] + "x")})
            assert e.code == -32602 and e.data.get("param") == "env", e.err
            ex({"argv": ["rm", "-rf", "/tmp/lim"]})

        def daemon_still_fine():
            st = c.call("daemon.status")
            assert st["sandboxes"].get("ready") == 1, st
            r = ex({"command": "echo fine"})
            assert r["stdout"] == "fine\n", r

        run([
            ("escapes after a timeout", escapes_after_timeout),
            ("a command that kills its own wrapper", kills_own_wrapper),
            ("cancel when the client goes away", cancel_on_disconnect),
            ("background processes end with the command", background_ends_with_command),
            ("exit status, signals, stdin, env, cwd", status_signal_stdin_env_cwd),
            ("timeout_ms 1: one shape", timeout_one_ms_shape),
            ("queued behind 32 long execs", queued_behind_32),
            ("max_output_bytes 0", max_output_zero),
            ("published limits are the real ones", limits_are_real),
            ("daemon still answers", daemon_still_fine),
        ])


if __name__ == "__main__":
    main()
