#!/usr/bin/env python3
"""Templates, operator caps and sandbox.resize against the simulator: a second template with
its own pinned host key and a smaller disk, in two copies on the node that clones run on at
once; every cap refusal (naming the cap and its value),
a disk below the template's refused, caps changed by SIGHUP; a resize seen inside the
running sandbox (nproc; the memory limit of its cgroup) and in Proxmox."""

import json
import os
import signal
import subprocess
import time

import e2elib
from e2elib import Env, RpcError, run

SMALL = 9001
TWIN = 9002  # a second copy of SMALL on the same node
SIM = {
    "templates": [
        {"vmid": 9000, "node": "pve", "storage": "local-lvm", "hostname": "sandbox-template",
         "memory": 512, "cores": 1, "disk": "8G"},
        {"vmid": SMALL, "node": "pve", "storage": "local-lvm", "hostname": "small-template",
         "memory": 256, "cores": 1, "disk": "4G"},
        {"vmid": TWIN, "node": "pve", "storage": "local-lvm", "hostname": "small-template",
         "memory": 256, "cores": 1, "disk": "4G", "copy_of": SMALL},
    ],
    "tokens": [
        {"id": "root@pam!admin", "secret": None, "acl": {"/": "Administrator"}},
        {"id": "sandboxd@pve!sandboxd", "secret": None,
         "acl": {"/pool/sandboxd": ["PVEVMAdmin", "Pool.Audit"], "/vms/9000": "PVETemplateUser",
                 f"/vms/{SMALL}": "PVETemplateUser", f"/vms/{TWIN}": "PVETemplateUser",
                 "/": ["Sys.Audit"]}},
    ],
}


def refused(c, method, params):
    try:
        c.call(method, params)
    except RpcError as e:
        assert e.code == -32602, (params, e.err)
        return e.err["data"]
    raise AssertionError(f"{method} {params} was accepted")


def marker_of(env, vmid):
    conf = env.sim.ok("GET", f"/nodes/pve/lxc/{vmid}/config")
    return next(l for l in (conf.get("description") or "").splitlines() if "sandboxd:" in l)


def main():
    with Env(sim_config=SIM) as env:
        # [ssh] template_host_key pins only the default template's key: the small template's
        # sandboxes connect only because of their own pin.
        small_key = env.sim.info["templates"][str(SMALL)]["host_key"]
        env.stop_daemon()
        with open(env.config) as f:
            text = f.read()
        with open(env.config, "w") as f:
            f.write(text + f"[templates]\nsmall = {SMALL}@pve,{TWIN}@pve\nsmall.host_key = {small_key}\n")
        from test_recovery_util import launch
        launch(env)
        c = env.client()
        made = []

        def second_template():
            sb = c.call("sandbox.create", {"template": "small", "ttl_s": 600})
            made.append(sb["id"])
            assert sb["template"] == "small" and sb["disk_gb"] == 8, sb  # grown to default_disk_gb
            out = c.call("sandbox.exec", {"id": sb["id"], "command": "cat /etc/hostname"})
            assert out["exit_code"] == 0, out
            assert " template=small" in marker_of(env, sb["vmid"]), marker_of(env, sb["vmid"])
            d = c.call("sandbox.create", {"ttl_s": 600})
            made.append(d["id"])
            assert d["template"] == "default", d
            assert " template=" not in marker_of(env, d["vmid"]) or "template=default" in marker_of(env, d["vmid"])
            data = refused(c, "sandbox.create", {"template": "nope"})
            assert data["param"] == "template" and data["templates"] == ["default", "small"], data
            # sandboxctl create --template, resize
            ctl = os.path.join(e2elib.BUILD, "clients", "cli", "sandboxctl")
            out = subprocess.run([ctl, "--socket", env.socket, "--json", "create", "--template", "small",
                                  "--ttl", "600"], capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            sc = json.loads(out.stdout)
            made.append(sc["id"])
            assert sc["template"] == "small", sc
            out = subprocess.run([ctl, "--socket", env.socket, "--json", "resize", sc["id"], "--memory", "300"],
                                 capture_output=True, text=True, timeout=120)
            assert out.returncode == 0 and json.loads(out.stdout)["memory_mb"] == 300, (out.stdout, out.stderr)

        def cap_refusals():
            before = set(env.containers())
            for p, cap, mx in (({"cores": 17}, "max_cores", 16),
                               ({"memory_mb": 65537}, "max_memory_mb", 65536),
                               ({"disk_gb": 257}, "max_disk_gb", 256)):
                data = refused(c, "sandbox.create", p)
                assert data["cap"] == cap and data["max"] == mx, data
            # The default template's disk (8 GB) is known since its first clone: refused at once.
            data = refused(c, "sandbox.create", {"disk_gb": 4})
            assert data["param"] == "disk_gb" and data["min"] == 8 and "cap" not in data, data
            # SIGHUP lowers a cap: the new value applies at once.
            with open(env.config) as f:
                text = f.read()
            with open(env.config, "w") as f:
                f.write(text.replace("[sandbox]\n", "[sandbox]\nmax_cores = 2\n", 1))
            env.proc.send_signal(signal.SIGHUP)
            deadline = time.time() + 20
            while time.time() < deadline:
                try:
                    c.call("sandbox.create", {"cores": 3, "ttl_s": 60, "template": "nope"})
                except RpcError as e:
                    if e.err["data"].get("cap") == "max_cores":
                        assert e.err["data"]["max"] == 2, e.err
                        break
                time.sleep(0.2)
            else:
                raise AssertionError("max_cores = 2 never applied after SIGHUP")
            assert set(env.containers()) == before, "a refused create left a container"

        def disk_below_template_unknown_size():
            # A fresh daemon does not know the small template's size before cloning it: the
            # refusal comes once the clone shows it, and the clone is destroyed.
            n = len(env.containers())
            env.stop_daemon()
            launch(env)
            c2 = env.client()
            data = refused(c2, "sandbox.create", {"template": "small", "disk_gb": 2})
            assert data["param"] == "disk_gb" and data["min"] == 4, data
            deadline = time.time() + 20
            while len(env.containers()) != n and time.time() < deadline:
                time.sleep(0.1)
            assert len(env.containers()) == n, env.containers()
            c2.close()

        def copies_clone_at_once():
            # Proxmox locks a template for its whole clone: with two copies two clones run at
            # once (seen as both copies locked together), and every create succeeds.
            env.sim.admin("PUT", "/settings", {"clone_time": 1.5})
            c4 = env.client()  # the daemon was restarted since c connected
            try:
                reqs = [c4.send("sandbox.create", {"template": "small", "ttl_s": 600}) for _ in range(4)]
                both, left = False, set(reqs)
                deadline = time.time() + 120
                while left and time.time() < deadline:
                    cts = env.sim.admin("GET", "/state")["containers"]
                    locks = {v: (cts.get(str(v)) or {}).get("lock") for v in (SMALL, TWIN)}
                    both = both or locks == {SMALL: "disk", TWIN: "disk"}
                    for r in list(left):
                        try:
                            made.append(c4.wait(r, timeout=0.05)["id"])
                            left.discard(r)
                        except TimeoutError:
                            pass
                assert not left, "creates did not finish"
                assert both, "the two copies never cloned at once"
            finally:
                env.sim.admin("PUT", "/settings", {"clone_time": 0.5})
                c4.close()

        def resize_seen_inside():
            c3 = env.client()
            sb = c3.call("sandbox.create", {"ttl_s": 600})
            made.append(sb["id"])
            nproc = lambda: int(c3.call("sandbox.exec", {"id": sb["id"], "command": "nproc"})["stdout"])
            assert nproc() == 1
            r = c3.call("sandbox.resize", {"id": sb["id"], "cores": 2, "memory_mb": 1024, "disk_gb": 12})
            assert (r["cores"], r["memory_mb"], r["disk_gb"]) == (2, 1024, 12), r
            if os.cpu_count() >= 2:
                assert nproc() == 2
            ns = env.sim.admin("GET", "/state")["containers"][str(sb["vmid"])]["netns"]
            lim = f"/sys/fs/cgroup/memory/pve-sim/{ns}/memory.limit_in_bytes"
            if os.path.exists(lim):
                assert int(open(lim).read()) == 1024 << 20
            conf = env.sim.ok("GET", f"/nodes/pve/lxc/{sb['vmid']}/config")
            assert conf["cores"] == 2 and conf["memory"] == 1024 and "size=12G" in conf["rootfs"], conf
            assert c3.call("sandbox.get", {"id": sb["id"]})["disk_gb"] == 12
            data = refused(c3, "sandbox.resize", {"id": sb["id"], "disk_gb": 10})
            assert data["min"] == 12, data
            data = refused(c3, "sandbox.resize", {"id": sb["id"], "cores": 3})  # max_cores = 2 now
            assert data["cap"] == "max_cores", data
            data = refused(c3, "sandbox.resize", {"id": sb["id"]})
            r = c3.call("sandbox.resize", {"id": sb["id"], "cores": 1})
            assert r["cores"] == 1 and nproc() == 1
            for i in made:
                c3.call("sandbox.destroy", {"id": i})
            env.wait_no_containers(30)
            c3.close()

        run([("a second template with its own host key", second_template),
             ("every cap refused, caps reloaded by SIGHUP", cap_refusals),
             ("disk below a template not yet cloned", disk_below_template_unknown_size),
             ("two copies of a template clone at once", copies_clone_at_once),
             ("resize of a running sandbox seen inside it", resize_seen_inside)])


if __name__ == "__main__":
    main()
