#!/usr/bin/env python3
"""Templates made from sandboxes (template.create, template.list, template.delete,
template.publish) against the simulator, busybox template: a sandbox with a file and an extra
executable becomes a template (the sandbox ends, its container is converted in Proxmox); a cold
create from it and one served from its warm pool ([pool] warm.NAME) both find the file and run
the tool; the template survives kill -9 and a lost state folder (its marker); another uid
neither sees, uses nor deletes it until an admin publishes it; the per-uid quota refuses a
second one; the delete is refused while a sandbox or a pool member uses it and removes the
Proxmox template after."""

import os
import shutil
import signal
import subprocess
import sys
import time

import e2elib
from e2elib import BUILD, Env, RpcError, results_as_uid, run
from test_recovery_util import (kill9, launch, marker_fields, records, restart_with_crash, wait_dead,
                                wait_reconciled)

NOBODY = 65534
SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")
TOOL = "#!/bin/sh\necho greetings from $(cat /etc/hostname)\n"

def as_uid(env, uid, calls):
    """Each (method, params) as uid: [{"result": ...} or {"code": N}]."""
    return results_as_uid(env.socket, uid, calls, timeout=180)


def code_of(c, method, params):
    try:
        c.call(method, params)
    except RpcError as e:
        return e.code, e.err.get("data") or {}
    raise AssertionError(f"{method} {params} was accepted")


def names(c):
    return {t["name"]: t for t in c.call("template.list")["templates"]}


def write_config(env, warm):
    with open(env.config) as f:
        text = f.read()
    text = text.replace("[pool]\nwarm.tools = 1\n", "")
    if warm:
        text += "[pool]\nwarm.tools = 1\n"
    with open(env.config, "w") as f:
        f.write(text)


def main():
    with Env(daemon_config={"templates": {"max_templates_per_uid": "1"},
                            "sandbox": {"reconcile_interval_s": "2"}}) as env:
        c = env.client()
        st = {}

        def make_template():
            sb = c.call("sandbox.create", {"ttl_s": 600, "hostname": "builder"})
            st["origin"] = sb
            c.call("file.write", {"id": sb["id"], "path": "/root/hello.txt",
                                  "content": "made in the builder\n"})
            c.call("file.write", {"id": sb["id"], "path": "/usr/local/bin/greet",
                                  "content": TOOL, "mode": "0755"})
            t = c.call("template.create", {"id": sb["id"], "name": "tools"})["template"]
            assert t["name"] == "tools" and t["vmid"] == sb["vmid"] and t["node"] == "pve", t
            assert t["origin"]["sandbox"] == sb["id"] and t["origin"]["uid"] == 0, t
            assert t["owner_uid"] == 0 and t["published"] is False, t
            assert t["used_by"] == {"sandboxes": 0, "pool": 0, "pool_ready": 0}, t
            assert t["disk_gb"] == sb["disk_gb"] == 8, t
            # the sandbox ended; its container is the template, marked as one
            code, _ = code_of(c, "sandbox.get", {"id": sb["id"]})
            assert code == -32001, code
            conf = env.sim.ok("GET", f"/nodes/pve/lxc/{sb['vmid']}/config")
            assert conf.get("template") == 1, conf
            m = marker_fields(conf.get("description") or "")
            assert m["tmpl"] == "1" and m["template"] == "tools" and m["sandbox"] == sb["id"], m
            ls = names(c)
            assert ls["default"]["origin"] == "config" and ls["tools"]["vmid"] == sb["vmid"], ls
            # bad input changes nothing
            assert code_of(c, "template.create", {"id": sb["id"], "name": "Bad_Name"})[0] == -32602
            assert code_of(c, "template.create", {"id": "nope", "name": "x"})[0] == -32001

        def cold_create():
            sb = c.call("sandbox.create", {"ttl_s": 600, "template": "tools"})
            st["cold"] = sb
            assert sb["template"] == "tools" and sb["node"] == "pve", sb
            out = c.call("sandbox.exec", {"id": sb["id"], "command": "cat /root/hello.txt; greet"})
            assert out["exit_code"] == 0, out
            assert out["stdout"].startswith("made in the builder\ngreetings from "), out
            assert names(c)["tools"]["used_by"]["sandboxes"] == 1

        def cli():
            out = subprocess.run([SANDBOXCTL, "--socket", env.socket, "template", "list"],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out
            line = next(l for l in out.stdout.splitlines() if l.startswith("tools "))
            assert f"sandbox:{st['origin']['id']}" in line and " 1+0" in line, line
            bad = subprocess.run([SANDBOXCTL, "--socket", env.socket, "template", "delete", "nope"],
                                 capture_output=True, text=True, timeout=60)
            assert bad.returncode != 0 and "no such template" in bad.stderr, bad
            # the Python client
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                            "clients", "python"))
            import sandboxd
            with sandboxd.Client(env.socket) as pc:
                t = {x["name"]: x for x in pc.templates()}["tools"]
                assert t["used_by"]["sandboxes"] == 1, t
                try:
                    pc.delete_template("tools")
                    raise AssertionError("deleted while used")
                except sandboxd.BadState:
                    pass

        def quota_and_names():
            code, data = code_of(c, "template.create", {"id": st["cold"]["id"], "name": "tools2"})
            assert code == -32003 and "max_templates_per_uid" in data["reason"], (code, data)
            # room for a second template, not for its disk: 8 + 8 GB > 12 GB
            with open(env.config) as f:
                text = f.read()
            limits = "max_templates_per_uid = 2\nmax_template_disk_gb_per_uid = 12\n"
            with open(env.config, "w") as f:
                f.write(text.replace("max_templates_per_uid = 1\n", limits))
            env.proc.send_signal(signal.SIGHUP)
            deadline = time.time() + 30
            while "max_templates_per_uid" in data["reason"]:
                assert time.time() < deadline, data
                time.sleep(0.2)
                code, data = code_of(c, "template.create", {"id": st["cold"]["id"], "name": "tools2"})
            assert code == -32003 and "max_template_disk_gb_per_uid" in data["reason"], (code, data)
            with open(env.config, "w") as f:
                f.write(text)
            env.proc.send_signal(signal.SIGHUP)
            code, data = code_of(c, "template.create", {"id": st["cold"]["id"], "name": "default"})
            assert code == -32602 and data.get("param") == "name", (code, data)
            code, _ = code_of(c, "template.publish", {"name": "nope"})
            assert code == -32602, code

        def other_uid():
            r = as_uid(env, NOBODY, [
                ["template.list", {}],
                ["sandbox.create", {"ttl_s": 60, "template": "tools"}],
                ["template.delete", {"name": "tools"}],
                ["template.create", {"id": st["cold"]["id"], "name": "mine"}],
                ["template.publish", {"name": "tools"}],
            ])
            assert [t["name"] for t in r[0]["result"]["templates"]] == ["default"], r
            assert r[1] == {"code": -32602} and r[2] == {"code": -32602}, r
            assert r[3] == {"code": -32001} and r[4] == {"code": -32008}, r

        def survives_kill_and_lost_state():
            nonlocal c
            c.close()
            kill9(env)
            shutil.rmtree(os.path.join(env.dir, "state", "sandboxes"))
            os.unlink(os.path.join(env.dir, "state", "reconciled"))
            write_config(env, warm=True)
            launch(env)
            wait_reconciled(env)
            c = env.client()
            t = names(c)["tools"]
            assert t["origin"]["sandbox"] == st["origin"]["id"] and t["owner_uid"] == 0, t
            assert t["disk_gb"] == 8, t  # read back from its rootfs
            out = c.call("sandbox.exec", {"id": st["cold"]["id"], "command": "greet"})
            assert out["stdout"].startswith("greetings from "), out

        def warm_create():
            deadline = time.time() + 60
            while names(c)["tools"]["used_by"]["pool_ready"] < 1:
                assert time.time() < deadline, names(c)
                time.sleep(0.2)
            members = {int(k) for k, v in env.containers().items()} - {st["cold"]["vmid"]}
            sb = c.call("sandbox.create", {"ttl_s": 600, "template": "tools"})
            st["warm"] = sb
            assert sb["vmid"] in members, (sb, members)
            pool = c.call("daemon.status")["pool"]
            assert pool["tools"]["target"] == 1 and pool["tools"]["hits"] >= 1, pool
            out = c.call("sandbox.exec", {"id": sb["id"], "command": "cat /root/hello.txt; greet"})
            assert out["stdout"].startswith("made in the builder\ngreetings from "), out

        def delete_refused_then_done():
            code, data = code_of(c, "template.delete", {"name": "tools"})
            assert code == -32002 and "in use" in data["reason"], (code, data)
            # published: visible to another uid (and usable), still not theirs to delete
            c.call("template.publish", {"name": "tools"})
            r = as_uid(env, NOBODY, [["template.list", {}], ["template.delete", {"name": "tools"}]])
            assert "tools" in [t["name"] for t in r[0]["result"]["templates"]], r
            assert r[1] == {"code": -32008}, r
            for k in ("cold", "warm"):
                c.call("sandbox.destroy", {"id": st[k]["id"]})
            write_config(env, warm=False)
            env.proc.send_signal(signal.SIGHUP)
            deadline = time.time() + 60
            while names(c)["tools"]["used_by"]["pool"] > 0:
                assert time.time() < deadline, names(c)
                time.sleep(0.2)
            out = c.call("template.delete", {"name": "tools"})
            assert out == {"name": "tools", "deleted": True}, out
            assert "tools" not in names(c)
            code, _ = code_of(c, "sandbox.create", {"ttl_s": 60, "template": "tools"})
            assert code == -32602
            st_ = env.sim.admin("GET", "/state")
            assert str(st["origin"]["vmid"]) not in st_["containers"], st_["containers"].keys()

        def crash_points():
            nonlocal c
            c.close()
            # killed once Proxmox converted it, before the daemon recorded anything of it
            restart_with_crash(env, "template-converted")
            c = env.client()
            sb = c.call("sandbox.create", {"ttl_s": 600})
            try:
                c.call("template.create", {"id": sb["id"], "name": "crashy"}, timeout=60)
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
            t = names(c)["crashy"]
            assert t["origin"]["sandbox"] == sb["id"] and t["vmid"] == sb["vmid"], t
            assert code_of(c, "sandbox.get", {"id": sb["id"]})[0] == -32001
            assert sb["id"] not in records(env), records(env).keys()
            # killed once the delete was sent: gone from Proxmox, so not found again
            c.close()
            restart_with_crash(env, "template-delete-sent:300")
            c = env.client()
            try:  # killed 300 ms after the delete was sent: it may have answered by then
                c.call("template.delete", {"name": "crashy"}, timeout=60)
            except Exception:
                pass
            c.close()
            wait_dead(env)
            launch(env)
            c = env.client()
            deadline = time.time() + 20  # the delete task may end after the first reconcile
            while "crashy" in names(c):
                assert time.time() < deadline, names(c)
                time.sleep(0.2)
            assert str(sb["vmid"]) not in env.sim.admin("GET", "/state")["containers"]

        run_tests = [("a sandbox with a file and a tool becomes a template", make_template),
                     ("a cold create from it finds both", cold_create),
                     ("sandboxctl template list, delete refused", cli),
                     ("quota and names refused", quota_and_names),
                     ("another uid cannot see, use or delete it", other_uid),
                     ("it survives kill -9 and a lost state folder", survives_kill_and_lost_state),
                     ("a create from its warm pool finds both", warm_create),
                     ("delete refused while used, published, then deleted", delete_refused_then_done),
                     ("kill -9 at the conversion and at the delete", crash_points)]
        try:
            run(run_tests)
        finally:
            c.close()


if __name__ == "__main__":
    main()
