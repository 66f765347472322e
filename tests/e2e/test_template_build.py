#!/usr/bin/env python3
"""Templates built from a file (`sandboxctl template build NAME -f FILE [--context DIR]`) and
template defaults (template.create's `defaults`), against the simulator, busybox template: a
build with every instruction (FROM, RUN in both forms, COPY of files and a folder, ENV in both
forms, WORKDIR, USER, comments and continued lines) streams each step under its `Step N/M`
header and makes a template whose sandboxes see the files and get its env, cwd and user in
sandbox.exec and process.start, a call's own env, cwd and user winning (env per variable); a
failing RUN, and Ctrl-C, leave no container, no sandbox and no template, and name the step;
bad files are refused with their line numbers before anything is created; the defaults
survive kill -9 and a lost state folder (they live beside the template's marker); bad
defaults are refused by template.create."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from e2elib import BUILD, Env, RpcError, data_of, run
from test_recovery_util import kill9, launch, restart_with_crash, wait_dead, wait_reconciled

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")

GOOD = """# every instruction of the subset
FROM default
RUN echo 'ann:x:1234:1234::/home/ann:/bin/sh' >>/etc/passwd && \\
    # users are written by hand: this busybox has no adduser
    echo 'ann:x:1234:' >>/etc/group && \\
    mkdir -p /home/ann && chown 1234:1234 /home/ann
COPY hello.txt /opt/hello.txt
COPY sub /opt/sub
env GREETING="hello world" MODE=build
ENV PLAIN a plain value
WORKDIR /srv/app
COPY hello.txt tool.sh ./
RUN ["sh", "-c", "echo $GREETING > greeting.txt; pwd > where.txt"]
USER ann
RUN id -un > /tmp/who.txt; echo step-output-marker; echo to-stderr >&2
"""


def code_of(c, method, params):
    try:
        c.call(method, params)
    except RpcError as e:
        return e.code, e.err.get("data") or {}
    raise AssertionError(f"{method} {params} was accepted")


def templates(c):
    return {t["name"]: t for t in c.call("template.list")["templates"]}


def main():
    ctx = tempfile.mkdtemp(prefix="sandboxd-build-ctx-")
    outside = tempfile.mkdtemp(prefix="sandboxd-build-out-")
    with open(os.path.join(ctx, "hello.txt"), "w") as f:
        f.write("hello from the context\n")
    os.mkdir(os.path.join(ctx, "sub"))
    with open(os.path.join(ctx, "sub", "a.txt"), "w") as f:
        f.write("a in sub\n")
    with open(os.path.join(ctx, "tool.sh"), "w") as f:
        f.write("#!/bin/sh\necho tool ran\n")
    os.chmod(os.path.join(ctx, "tool.sh"), 0o755)
    with open(os.path.join(outside, "secret"), "w") as f:
        f.write("not for the sandbox\n")
    os.symlink(os.path.join(outside, "secret"), os.path.join(ctx, "leak"))

    def build(env, name, text, extra=(), wait=True):
        path = os.path.join(ctx, f"{name}.build")
        with open(path, "w") as f:
            f.write(text)
        args = [SANDBOXCTL, "--socket", env.socket, "template", "build", name, "-f", path,
                "--context", ctx, *extra]
        if not wait:
            return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True), path
        return subprocess.run(args, capture_output=True, text=True, timeout=300), path

    with Env(daemon_config={"sandbox": {"reconcile_interval_s": "2"}}) as env:
        c = env.client()
        st = {}

        def nothing_left(before):
            assert set(env.containers()) == before, (env.containers().keys(), before)
            assert [s for s in c.call("sandbox.list")["sandboxes"]
                    if s["id"] != st["sb"]["id"]] == [], c.call("sandbox.list")

        def build_all():
            r, _ = build(env, "app", GOOD)
            assert r.returncode == 0, (r.stdout, r.stderr)
            lines = r.stdout.splitlines()
            last = "Step 11/11: RUN id -un > /tmp/who.txt; echo step-output-marker; echo to-stderr >&2"
            assert lines[0] == "Step 1/11: FROM default", lines
            assert "Step 3/11: COPY hello.txt /opt/hello.txt" in lines, lines
            assert "Step 5/11: ENV GREETING=\"hello world\" MODE=build" in lines, lines
            # each step's output streamed after its header, before the commit
            assert lines.index(last) < lines.index("step-output-marker") < \
                lines.index("Committing template app"), lines
            assert lines[-1].startswith("Built template app (container "), lines
            assert "to-stderr" in r.stderr, r.stderr
            t = templates(c)["app"]
            assert t["defaults"] == {"env": {"GREETING": "hello world", "MODE": "build",
                                             "PLAIN": "a plain value"},
                                     "cwd": "/srv/app", "user": "ann"}, t
            assert c.call("sandbox.list")["sandboxes"] == []  # the build sandbox became it

        def sandbox_sees_it():
            sb = c.call("sandbox.create", {"ttl_s": 600, "template": "app"})
            st["sb"] = sb
            out = c.call("sandbox.exec", {"id": sb["id"], "command":
                         "pwd; id -un; echo $GREETING/$MODE/$PLAIN; cat /opt/hello.txt "
                         "/opt/sub/a.txt hello.txt greeting.txt where.txt /tmp/who.txt; "
                         "./tool.sh; stat -c %u /opt/hello.txt"})
            assert out["exit_code"] == 0, out
            assert out["stdout"] == ("/srv/app\nann\nhello world/build/a plain value\n"
                                     "hello from the context\na in sub\nhello from the context\n"
                                     "hello world\n/srv/app\nann\ntool ran\n0\n"), out

        def call_wins():
            sid = st["sb"]["id"]
            out = c.call("sandbox.exec", {"id": sid, "env": {"GREETING": "mine"}, "cwd": "/tmp",
                                          "user": "root",
                                          "command": "pwd; id -un; echo $GREETING/$MODE"})
            assert out["stdout"] == "/tmp\nroot\nmine/build\n", out
            p = c.call("process.start", {"id": sid, "command": "pwd; id -un; echo $GREETING"})
            c.call("process.wait", {"id": sid, "process": p["process"], "timeout_ms": 20000})
            r = c.call("process.read", {"id": sid, "process": p["process"], "wait_ms": 2000})
            assert data_of(r, "data") == b"/srv/app\nann\nhello world\n", r
            p = c.call("process.start", {"id": sid, "user": "0", "cwd": "/",
                                         "env": {"MODE": "own"}, "command": "pwd; id -u; echo $MODE"})
            c.call("process.wait", {"id": sid, "process": p["process"], "timeout_ms": 20000})
            r = c.call("process.read", {"id": sid, "process": p["process"], "wait_ms": 2000})
            assert data_of(r, "data") == b"/\n0\nown\n", r

        def inherited():
            # FROM a template with defaults: they are the build's start (a base image's ENV,
            # WORKDIR and USER); COPY and WORKDIR still write as root
            r, _ = build(env, "app2", "FROM app\nCOPY sub /opt/two\nENV MODE=two\n"
                                      "RUN echo $GREETING $MODE $(id -un) $(pwd) > /tmp/inh.txt\n")
            assert r.returncode == 0, (r.stdout, r.stderr)
            t = templates(c)["app2"]
            assert t["defaults"] == {"env": {"GREETING": "hello world", "MODE": "two",
                                             "PLAIN": "a plain value"},
                                     "cwd": "/srv/app", "user": "ann"}, t
            sb = c.call("sandbox.create", {"ttl_s": 60, "template": "app2"})
            out = c.call("sandbox.exec", {"id": sb["id"], "command":
                                          "cat /tmp/inh.txt /opt/two/a.txt; stat -c %u /opt/two"})
            assert out["stdout"] == "hello world two ann /srv/app\na in sub\n0\n", out
            # a folder transfer runs as root, as file writes do, not as the template's user
            r = subprocess.run([SANDBOXCTL, "--socket", env.socket, "put", "-r", "-q", sb["id"],
                                os.path.join(ctx, "sub"), "/opt/put"], capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0, r
            out = c.call("sandbox.exec", {"id": sb["id"], "command": "stat -c %u /opt/put/a.txt"})
            assert out["stdout"] == "0\n", out
            c.call("sandbox.destroy", {"id": sb["id"]})

        def failing_run():
            before = set(env.containers())
            r, path = build(env, "broken", "FROM default\nRUN echo before-fail\n\n"
                                           "RUN echo failing; exit 3\nRUN echo never\n")
            assert r.returncode != 0, r
            assert "before-fail" in r.stdout and "never" not in r.stdout, r.stdout
            assert f"step 3/4 ({path}:4, RUN) failed: exit status 3" in r.stderr, r.stderr
            assert "broken" not in templates(c)
            nothing_left(before)

        def bad_files():
            before = set(env.containers())
            cases = [("FROM default\nRUN true\nEXPOSE 80\n", 3, 'unknown instruction "EXPOSE"'),
                     ("FROM default\n# c\nCOPY ../x /x\n", 3, "outside the context"),
                     ("FROM default\nCOPY /etc/passwd /x\n", 2, "outside the context"),
                     ("FROM default\nRUN true\nCOPY leak /x\n", 3, "outside the context (a "
                                                                   "symbolic link"),
                     ("FROM default\nCOPY missing /x\n", 2, "No such file"),
                     ("# no FROM\nRUN true\n", 2, "must start with FROM")]
            for text, line, says in cases:
                r, path = build(env, "bad", text)
                assert r.returncode == 1, (text, r)
                assert f"{path}:{line}: " in r.stderr and says in r.stderr, (text, r.stderr)
                assert "Step 1/" not in r.stdout, r.stdout
            r, _ = build(env, "app", "FROM default\n")
            assert r.returncode == 1 and "a template named app exists" in r.stderr, r.stderr
            assert set(env.containers()) == before, env.containers().keys()
            assert "bad" not in templates(c)

        def ctrl_c():
            before = set(env.containers())
            p, _ = build(env, "slow", "FROM default\nRUN echo sleeping; sleep 60\nRUN true\n",
                         wait=False)
            buf = ""
            deadline = time.time() + 120
            while "sleeping" not in buf:
                assert time.time() < deadline and p.poll() is None, buf
                buf += p.stdout.readline()
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=60)
            assert p.returncode == 130, (p.returncode, out, err)
            assert "interrupted at step 2/3" in err, err
            assert "slow" not in templates(c)
            deadline = time.time() + 30
            while set(env.containers()) != before:
                assert time.time() < deadline, env.containers().keys()
                time.sleep(0.2)
            assert [s for s in c.call("sandbox.list")["sandboxes"]
                    if s["id"] != st["sb"]["id"]] == []

        def bad_defaults():
            sb = c.call("sandbox.create", {"ttl_s": 60})
            for d, param in [({"cwd": "relative"}, "defaults.cwd"),
                             ({"user": "-x"}, "defaults.user"),
                             ({"env": {"1A": "x"}}, "defaults.env"),
                             ({"shell": "/bin/sh"}, "defaults.shell"),
                             ({"env": {"A": "x" * 4000}, "cwd": "/" + "d" * 200}, "defaults"),
                             ("text", "defaults")]:
                code, data = code_of(c, "template.create", {"id": sb["id"], "name": "nope",
                                                            "defaults": d})
                assert code == -32602 and data.get("param") == param, (d, code, data)
            c.call("sandbox.destroy", {"id": sb["id"]})
            assert "nope" not in templates(c)

        def survives_kill_and_lost_state():
            nonlocal c
            c.close()
            kill9(env)
            shutil.rmtree(os.path.join(env.dir, "state", "sandboxes"))
            os.unlink(os.path.join(env.dir, "state", "reconciled"))
            launch(env)
            wait_reconciled(env)
            c = env.client()
            t = templates(c)["app"]
            assert t["defaults"]["cwd"] == "/srv/app" and t["defaults"]["user"] == "ann", t
            assert t["defaults"]["env"]["GREETING"] == "hello world", t
            out = c.call("sandbox.exec", {"id": st["sb"]["id"], "command": "pwd; id -un; echo $GREETING"})
            assert out["stdout"] == "/srv/app\nann\nhello world\n", out

        def python_client():
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                            "clients", "python"))
            import sandboxd
            import sandboxd_build
            before = set(env.containers())
            seen = []
            with sandboxd.Client(env.socket) as pc:
                try:
                    pc.build_template("pybad", "FROM default\nCOPY ../x /x\n", ctx)
                    raise AssertionError("built")
                except sandboxd_build.BuildFileError as e:
                    assert e.line == 2 and "outside the context" in str(e), e
                try:
                    pc.build_template("pybad", "FROM default\nRUN exit 4\n", ctx,
                                      out=lambda s, d: seen.append(d))
                    raise AssertionError("built")
                except sandboxd_build.BuildStepError as e:
                    assert e.step == 2 and e.line == 2 and "exit status 4" in str(e), e
                nothing_left(before)
                t = pc.build_template("pyapp", "FROM default\nENV K='v w'\nWORKDIR /w\n"
                                      "COPY hello.txt sub ./\nRUN cat hello.txt a.txt\n", ctx,
                                      out=lambda s, d: seen.append(d))
                assert t["defaults"] == {"env": {"K": "v w"}, "cwd": "/w"}, t
                assert b"hello from the context\na in sub\n" in b"".join(seen), seen
                assert b"Step 5/5: RUN cat hello.txt a.txt\n" in seen, seen
                sb = pc.create(template="pyapp", ttl_s=60)
                r = sb.exec("pwd; echo $K; ls")
                assert r.stdout == "/w\nv w\na.txt\nhello.txt\n", r
                sb.destroy()

        def fork_and_pool():
            kids = c.call("sandbox.fork", {"id": st["sb"]["id"], "count": 1})["sandboxes"]
            out = c.call("sandbox.exec", {"id": kids[0]["id"], "command": "pwd; id -un; echo $MODE"})
            assert out["stdout"] == "/srv/app\nann\nbuild\n", out
            c.call("sandbox.destroy", {"id": kids[0]["id"]})
            with open(env.config, "a") as f:
                f.write("[pool]\nwarm.app = 1\n")
            env.proc.send_signal(signal.SIGHUP)
            deadline = time.time() + 60
            while templates(c)["app"]["used_by"]["pool_ready"] < 1:
                assert time.time() < deadline, templates(c)["app"]
                time.sleep(0.2)
            members = set(env.containers())
            sb = c.call("sandbox.create", {"ttl_s": 60, "template": "app"})
            assert sb["vmid"] in members, (sb, members)
            out = c.call("sandbox.exec", {"id": sb["id"], "command": "pwd; id -un; echo $MODE"})
            assert out["stdout"] == "/srv/app\nann\nbuild\n", out
            c.call("sandbox.destroy", {"id": sb["id"]})

        def crash_with_defaults():
            nonlocal c
            c.close()
            # killed once Proxmox converted it, before the daemon recorded anything of it: the
            # defaults, at their largest, come back from the description with the template
            restart_with_crash(env, "template-converted")
            c = env.client()
            sb = c.call("sandbox.create", {"ttl_s": 600})
            big = {"env": {"V%02d" % i: "x" * 58 for i in range(64)}, "cwd": "/srv/" + "d" * 180,
                   "user": "1234"}
            try:
                c.call("template.create", {"id": sb["id"], "name": "crashy", "defaults": big},
                       timeout=60)
                raise AssertionError("the daemon did not crash")
            except AssertionError:
                raise
            except Exception:
                pass
            c.close()
            wait_dead(env)
            launch(env)
            wait_reconciled(env)
            c = env.client()
            t = templates(c)["crashy"]
            assert t["defaults"] == big, t

        run_tests = [("a build with every instruction", build_all),
                     ("a sandbox of it sees the files, env, cwd and user", sandbox_sees_it),
                     ("a call's own env, cwd and user win", call_wins),
                     ("a build FROM it inherits its defaults", inherited),
                     ("a failing RUN leaves nothing behind", failing_run),
                     ("bad files refused with their line numbers", bad_files),
                     ("Ctrl-C destroys the build sandbox", ctrl_c),
                     ("template.create refuses bad defaults", bad_defaults),
                     ("the Python client's build_template", python_client),
                     ("a fork and a warm pool member get them too", fork_and_pool),
                     ("defaults survive kill -9 and a lost state folder",
                      survives_kill_and_lost_state),
                     ("kill -9 at the conversion keeps the largest defaults", crash_with_defaults)]
        try:
            run(run_tests)
        finally:
            c.close()
            shutil.rmtree(ctx, ignore_errors=True)
            shutil.rmtree(outside, ignore_errors=True)


if __name__ == "__main__":
    main()
