#!/usr/bin/env python3
"""clients/c (libsandboxd-client, the shared library) against pve-sim + sandboxd: a sandbox
made, exec plain and streamed (exec.output to the notification callback), errors with their
codes and data, 3 MiB through descriptors both ways, the idle close and the next call on a new
connection, a call in flight across a daemon restart (its error, then the next call works),
destroy; the quickstart of docs/clients-c.md built and run, leaving no container behind; and
the installed library (meson install into a scratch folder) used as docs/clients-c.md says:
the quickstart compiled with `cc ... $(pkg-config --cflags --libs sandboxd-client)` and run."""

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time

from clientlib import BUILD, IDLE_MS, SRC, Env, enable_test_hooks, restart, run

CHECK = os.path.join(BUILD, "tests", "clients", "c-client-check")
QUICKSTART = os.path.join(BUILD, "clients", "c", "quickstart")


def step(*args, timeout=120):
    p = subprocess.run([CHECK, *args], capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"c-client-check {' '.join(args)} exited {p.returncode}:\n{out}"
    return p.stdout


def build_options():
    with open(os.path.join(BUILD, "meson-info", "intro-buildoptions.json")) as f:
        return {o["name"]: o["value"] for o in json.load(f)}


def compiler():
    """The build's C compiler (the installed library carries its sanitizers)."""
    with open(os.path.join(BUILD, "compile_commands.json")) as f:
        return shlex.split(json.load(f)[0]["command"])[0]


def installed_quickstart(work):
    """Installs into work/dest, compiles the quickstart against what pkg-config says there;
    returns the program and its environment."""
    dest = os.path.join(work, "dest")
    p = subprocess.run(["meson", "install", "-C", BUILD, "--destdir", dest, "--no-rebuild",
                        "--quiet"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    opts = build_options()
    libdir = os.path.join(dest + opts["prefix"], opts["libdir"])
    # The installed .pc, its prefix moved to where the files landed (as if installed there).
    with open(os.path.join(libdir, "pkgconfig", "sandboxd-client.pc")) as f:
        pc = f.read()
    assert pc.startswith(f"prefix={opts['prefix']}\n"), pc
    os.makedirs(os.path.join(work, "pkgconfig"))
    with open(os.path.join(work, "pkgconfig", "sandboxd-client.pc"), "w") as f:
        f.write(f"prefix={dest}{opts['prefix']}\n" + pc.split("\n", 1)[1])
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(work, "pkgconfig"))
    p = subprocess.run(["pkg-config", "--cflags", "--libs", "sandboxd-client"], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    flags = p.stdout.split()
    assert any(f.startswith("-I" + dest) for f in flags), flags
    sanitize = opts.get("b_sanitize", "none")
    extra = [] if sanitize == "none" else ["-fsanitize=" + sanitize]
    exe = os.path.join(work, "quickstart")
    src = os.path.join(SRC, "clients", "c", "examples", "quickstart.c")
    p = subprocess.run([compiler(), *extra, src, *flags, "-o", exe], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, " ".join(p.args) + "\n" + p.stdout + p.stderr
    return exe, dict(os.environ, LD_LIBRARY_PATH=libdir)


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

        def quickstart(exe=QUICKSTART, env_=None):
            p = subprocess.run([exe], capture_output=True, text=True, timeout=120, env=env_)
            print("\n".join("  | " + l for l in (p.stdout + p.stderr).splitlines()))
            assert p.returncode == 0, p.stdout + p.stderr
            assert "sandbox sb-" in p.stdout and "exit 0, stdout: Linux" in p.stdout, p.stdout
            assert "read 14 bytes: <h1>Hello</h1>" in p.stdout, p.stdout
            env.wait_no_containers(timeout=30)

        def installed():
            work = tempfile.mkdtemp(prefix="test-c-")
            try:
                quickstart(*installed_quickstart(work))
            finally:
                shutil.rmtree(work, ignore_errors=True)

        run([("create", create),
             ("exec, streamed exec, errors, descriptors, idle close", exercise),
             ("a call in flight across a daemon restart", restart_mid_call),
             ("destroy", destroy),
             ("the quickstart built and run", quickstart),
             ("the installed library, through pkg-config", installed)])


if __name__ == "__main__":
    main()
