#!/usr/bin/env python3
"""Template replicas against the simulator: with [templates] small.replicas = 3 the daemon
makes three copies of the template (full clones converted into templates, each with a replica
marker), they survive kill -9, an interrupted build and a lost state folder without a
duplicate, and three parallel cold creates clone from three different copies (the
simulator's linked_from of each clone); lowered to 1 at a restart, the two past it are
deleted only once no sandbox of the template is left; a template given another vmid has its
replicas made again from that one."""

import os
import shutil
import time

from e2elib import Env, run
from test_recovery_util import FAST_RECONCILE, kill9, launch, wait_dead

SMALL = 9001
OTHER = 9002  # the template small becomes at a restart
SIM = {
    "templates": [
        {"vmid": 9000, "node": "pve", "storage": "local-lvm", "hostname": "sandbox-template",
         "memory": 512, "cores": 1, "disk": "8G"},
        {"vmid": SMALL, "node": "pve", "storage": "local-lvm", "hostname": "small-template",
         "memory": 256, "cores": 1, "disk": "4G"},
        {"vmid": OTHER, "node": "pve", "storage": "local-lvm", "hostname": "small-template",
         "memory": 256, "cores": 1, "disk": "4G", "copy_of": SMALL},
    ],
    "tokens": [
        {"id": "root@pam!admin", "secret": None, "acl": {"/": "Administrator"}},
        {"id": "sandboxd@pve!sandboxd", "secret": None,
         "acl": {"/pool/sandboxd": ["PVEVMAdmin", "Pool.Audit"], "/vms/9000": "PVETemplateUser",
                 f"/vms/{SMALL}": "PVETemplateUser", f"/vms/{OTHER}": "PVETemplateUser",
                 "/": ["Sys.Audit"]}},
    ],
}


def replicas(env):
    """{vmid: description} of the simulator's replica templates (repl=1 markers)."""
    cts = env.sim.admin("GET", "/state")["containers"]
    out = {}
    for k, v in cts.items():
        if int(k) in (9000, SMALL, OTHER):
            continue
        try:
            conf = env.sim.ok("GET", f"/nodes/pve/lxc/{k}/config")
        except AssertionError:  # deleted since the state was read
            continue
        desc = conf.get("description") or ""
        if " repl=1" in desc:
            out[int(k)] = (v["template"], desc)
    return out


def wait_replicas(env, n, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = replicas(env)
        if len(r) == n and all(t for t, _ in r.values()):
            return set(r)
        time.sleep(0.3)
    raise AssertionError(f"not {n} replicas: {replicas(env)}")


def listed(env):
    c = env.client()
    try:
        t = next(t for t in c.call("template.list")["templates"] if t["name"] == "small")
        return {r["vmid"] for r in t.get("replicas") or []}
    finally:
        c.close()


def main():
    cfg = {k: dict(v) for k, v in FAST_RECONCILE.items()}
    with Env(sim_config=SIM, daemon_config=cfg) as env:
        small_key = env.sim.info["templates"][str(SMALL)]["host_key"]
        env.stop_daemon()
        with open(env.config, "a") as f:
            f.write(f"[templates]\nsmall = {SMALL}\nsmall.host_key = {small_key}\n"
                    "small.replicas = 3\n")
        launch(env)
        state = {}

        def three_made():
            state["v"] = wait_replicas(env, 3)
            deadline = time.time() + 20
            while listed(env) != state["v"] and time.time() < deadline:
                time.sleep(0.2)
            assert listed(env) == state["v"], (listed(env), state["v"])
            for vmid, (tmpl, desc) in replicas(env).items():
                assert tmpl and "tmpl=1" in desc and "template=small" in desc, desc
                assert f"sandbox=replica-of-{SMALL} " in desc, desc

        def survive_kill9():
            kill9(env)
            launch(env)
            time.sleep(3)  # a reconcile ran; any duplicate build would have begun
            assert wait_replicas(env, 3) == state["v"]
            deadline = time.time() + 20
            while listed(env) != state["v"] and time.time() < deadline:
                time.sleep(0.2)
            assert listed(env) == state["v"], listed(env)
            assert "making a replica" not in env.daemon_log().split("found in Proxmox")[-1]

        def interrupted_build():
            # one replica deleted behind the daemon's back: the restarted daemon builds one
            # again and is killed right after its clone; started once more it reaps the
            # half-made clone and builds again (3 in all, never 4)
            gone = max(state["v"])
            kill9(env)
            env.sim.ok("DELETE", f"/nodes/pve/lxc/{gone}", {"purge": 1})
            deadline = time.time() + 30
            while gone in replicas(env) and time.time() < deadline:
                time.sleep(0.2)
            launch(env, crash_at="replica-cloned")
            wait_dead(env)
            half = set(replicas(env)) - state["v"]
            assert len(half) == 1 and not replicas(env)[min(half)][0], replicas(env)
            # a stop while a build clones: the daemon exits cleanly (no leak, no crash)
            env.sim.admin("PUT", "/settings", {"clone_time": 3})
            mark = len(env.daemon_log())
            launch(env)
            deadline = time.time() + 30
            while "making a replica" not in env.daemon_log()[mark:] and time.time() < deadline:
                time.sleep(0.1)
            assert "making a replica" in env.daemon_log()[mark:]
            assert env.stop_daemon() == 0
            env.sim.admin("PUT", "/settings", {"clone_time": 0.5})
            launch(env)
            state["v"] = wait_replicas(env, 3)
            assert not half & state["v"], (half, state["v"])
            time.sleep(3)
            assert wait_replicas(env, 3) == state["v"]

        def lost_state_folder():
            kill9(env)
            shutil.rmtree(os.path.join(env.dir, "state"))
            launch(env)
            time.sleep(3)
            assert wait_replicas(env, 3) == state["v"]
            deadline = time.time() + 20
            while listed(env) != state["v"] and time.time() < deadline:
                time.sleep(0.2)
            assert listed(env) == state["v"], listed(env)

        def parallel_from_three_copies():
            env.sim.admin("PUT", "/settings", {"clone_time": 1.5})
            c = env.client()
            try:
                before = set(env.containers())
                reqs = [c.send("sandbox.create", {"template": "small", "ttl_s": 600})
                        for _ in range(3)]
                made = [c.wait(r, timeout=120) for r in reqs]
                cts = env.sim.admin("GET", "/state")["containers"]
                sources = [cts[str(sb["vmid"])].get("linked_from") for sb in made]
                assert not {sb["vmid"] for sb in made} & before
                assert len(set(sources)) == 3, sources
                assert set(sources) <= state["v"] | {SMALL}, sources
                for sb in made:
                    c.call("sandbox.destroy", {"id": sb["id"]})
                env.wait_no_containers(30)
            finally:
                env.sim.admin("PUT", "/settings", {"clone_time": 0.5})
                c.close()

        def lowered_removed_when_unused():
            # replicas = 1 at a restart: the two past it take no new clone, and are deleted
            # only once the sandbox of the template (maybe a linked clone of one) is gone
            c = env.client()
            sb = c.call("sandbox.create", {"template": "small", "ttl_s": 600})
            c.close()
            assert env.stop_daemon() == 0
            with open(env.config) as f:
                text = f.read()
            with open(env.config, "w") as f:
                f.write(text.replace("small.replicas = 3\n", "small.replicas = 1\n"))
            launch(env)
            deadline = time.time() + 20
            while len(listed(env)) != 1 and time.time() < deadline:
                time.sleep(0.2)
            kept = listed(env)
            assert len(kept) == 1 and kept <= state["v"], kept
            time.sleep(3)  # reconciles and looks ran: nothing deleted while the sandbox lives
            assert set(replicas(env)) == state["v"], replicas(env)
            c = env.client()
            c.call("sandbox.destroy", {"id": sb["id"]})
            c.close()
            deadline = time.time() + 60
            while set(replicas(env)) != kept and time.time() < deadline:
                time.sleep(0.3)
            assert set(replicas(env)) == kept, (replicas(env), kept)
            env.wait_no_containers(30)

        def template_moved():
            # small = OTHER at a restart: the replica of SMALL is no copy of it any more
            assert env.stop_daemon() == 0
            with open(env.config) as f:
                text = f.read()
            with open(env.config, "w") as f:
                f.write(text.replace(f"small = {SMALL}\n", f"small = {OTHER}\n"))
            launch(env)
            deadline = time.time() + 60
            while time.time() < deadline:
                r = replicas(env)
                if len(r) == 1 and all(t and f"sandbox=replica-of-{OTHER} " in d
                                       for t, d in r.values()):
                    break
                time.sleep(0.3)
            r = replicas(env)
            assert len(r) == 1 and not set(r) & state["v"], r
            assert all(f"sandbox=replica-of-{OTHER} " in d for _, d in r.values()), r

        run([("three replicas made and listed", three_made),
             ("they survive kill -9 without a duplicate", survive_kill9),
             ("an interrupted build is rolled back and made again", interrupted_build),
             ("they survive a lost state folder without a duplicate", lost_state_folder),
             ("three parallel cold creates clone from three copies", parallel_from_three_copies),
             ("replicas past a lowered N deleted once unused", lowered_removed_when_unused),
             ("a template given another vmid gets replicas of that one", template_moved)])


if __name__ == "__main__":
    main()
