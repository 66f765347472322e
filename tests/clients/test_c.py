#!/usr/bin/env python3
"""clients/c (libsandboxd-client, the shared library) against pve-sim + sandboxd: a sandbox
made, exec plain and streamed (exec.output to the notification callback), errors with their
codes and data, 3 MiB through descriptors both ways, the idle close and the next call on a new
connection, a call in flight across a daemon restart (its error, then the next call works),
destroy; and the quickstart of docs/clients-c.md built and run, leaving no container behind."""

import os
import subprocess
import time

from clientlib import BUILD, IDLE_MS, Env, enable_test_hooks, restart, run

CHECK = os.path.join(BUILD, "tests", "clients", "c-client-check")
QUICKSTART = os.path.join(BUILD, "clients", "c", "quickstart")


def step(*args, timeout=120):
    p = subprocess.run([CHECK, *args], capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"c-client-check {' '.join(args)} exited {p.returncode}:\n{out}"
    return p.stdout


def main():
    enable_test_hooks()
    # no probe_address: each create waits one firewall_period_s after its start instead
    with Env(daemon_config={"proxmox": {"firewall_period_s": "1"},
                            "network": {"probe_address": None}}) as env:
        os.environ["SANDBOXD_SOCKET"] = env.socket
        st = {}

        def create():
            st["id"] = step("create").strip()
            assert st["id"].startswith("sb-"), st

        def exercise():
            out = step("exercise", st["id"], str(int(IDLE_MS * 1.6)))
            assert "reconnected after the idle close" in out, out

        def restart_mid_call():
            p = subprocess.Popen([CHECK, "restart", st["id"]], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                assert p.stdout.readline().strip() == "running"
                time.sleep(0.5)
                restart(env)
                p.stdin.write("go\n")
                p.stdin.flush()
                out, err = p.communicate(timeout=60)
            finally:
                if p.poll() is None:
                    p.kill()
            assert p.returncode == 0, out + err
            print("  " + out.strip())

        def destroy():
            step("destroy", st["id"])
            env.wait_no_containers(timeout=30)

        def quickstart():
            p = subprocess.run([QUICKSTART], capture_output=True, text=True, timeout=120)
            print("\n".join("  | " + l for l in (p.stdout + p.stderr).splitlines()))
            assert p.returncode == 0, p.stdout + p.stderr
            assert "sandbox sb-" in p.stdout and "exit 0, stdout: Linux" in p.stdout, p.stdout
            assert "read 14 bytes: <h1>Hello</h1>" in p.stdout, p.stdout
            env.wait_no_containers(timeout=30)

        run([("create", create),
             ("exec, streamed exec, errors, descriptors, idle close", exercise),
             ("a call in flight across a daemon restart", restart_mid_call),
             ("destroy", destroy),
             ("the quickstart built and run", quickstart)])


if __name__ == "__main__":
    main()
