#!/usr/bin/env python3
"""Placement across the nodes of a 3-node simulated cluster, each node with its own copy of
the template: 30 creates spread over all nodes (none over max_per_node, the counts within one
of each other), each clone made from the copy on its own node; sandbox.create {node} for an
admin, refused for an unknown node; a node answering 595; a node taken down in the middle of
creates (POST /admin/node/NAME/down): no create fails, its sandboxes read unreachable, and
after /up they work again and nothing is left behind (a lease that ended meanwhile is acted
on then); kill -9 with sandboxes on every node and a restart re-attaches all of them (with a
node down: as unreachable); the warm pool kept per node."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

from e2elib import Env, RpcError, create_parallel, run
from test_recovery_util import kill9, launch, wait_reconciled, wait_until

NODES = ["pve1", "pve2", "pve3"]
COPIES = {"pve1": 9000, "pve2": 9001, "pve3": 9002}


def sim_config():
    # three nodes of equal capacity, each with its own copy of the template (9000, 9001, 9002)
    return {"node_count": 3,
            "node_capacity": {n: {"maxmem": 8 << 30, "maxcpu": 2} for n in NODES}}


def daemon_config(info):
    keys = sorted({info["templates"][str(v)]["host_key"] for v in COPIES.values()})
    return {"proxmox": {"nodes": ",".join(NODES),
                        "template": ",".join(f"{v}@{n}" for n, v in COPIES.items()),
                        "max_per_node": "11"},
            # one vmid alone: its sandboxes go to the node Proxmox lists it on
            "templates": {"solo": "9002"},
            "ssh": {"template_host_key": ",".join(keys)},
            # reconcile every 2 s: a create's leftover on a node that came back goes quickly
            "sandbox": {"max_per_uid": "40", "max_total": "64", "reconcile_interval_s": "2",
                        "orphan_grace_s": "2"}}


def create_many(c_factory, n, parallel=6):
    """n creates, parallel at a time; returns the sandboxes."""
    made, errors = create_parallel(c_factory, n, parallel, {"ttl_s": 900})
    assert not errors, errors
    return made


# A caller that is not an admin (uid 65534) asks for a node: [proxmox] node_param = admin.
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from e2elib import Client, RpcError
c = Client(sys.argv[2], timeout=120)
try:
    c.call("sandbox.create", {"node": "pve1"})
    print(json.dumps({"code": "succeeded"}))
except RpcError as e:
    print(json.dumps({"code": e.code, "reason": (e.data or {}).get("reason", "")}))
"""


def as_nobody(env):
    def drop():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    r = subprocess.run([py, "-c", CHILD, os.path.dirname(os.path.abspath(__file__)), env.socket],
                       capture_output=True, text=True, timeout=120, preexec_fn=drop)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def states(c, ids):
    got = {s["id"]: s for s in c.call("sandbox.list", {})["sandboxes"]}
    return {i: got[i]["state"] for i in ids}


class NodeFailure:
    """Every API request under /nodes/NAME/ answers 595 (what Proxmox's proxy answers for a
    node it cannot reach), until ended."""

    def __init__(self, env, node):
        self.env, self.node = env, node

    def __enter__(self):
        self.fault = self.env.sim.admin("POST", "/faults", {"path": f"/nodes/{self.node}/*",
                                                            "status": 595})
        return self

    def __exit__(self, *a):
        self.env.sim.admin("DELETE", f"/faults/{self.fault['id']}")


def main():
    with Env(sim_config=sim_config(), daemon_config=daemon_config) as env:
        c = env.client()

        def spread():
            sbs = create_many(env.client, 30)
            counts = {n: 0 for n in NODES}
            for sb in sbs:
                assert sb["state"] == "ready", sb
                counts[sb["node"]] += 1
            assert max(counts.values()) - min(counts.values()) <= 1, counts
            assert all(v <= 11 for v in counts.values()), counts
            # every container lives on the node the daemon reports, cloned from its local copy
            cts = env.containers()
            for sb in sbs:
                ct = cts[sb["vmid"]]
                assert ct["node"] == sb["node"], (ct, sb)
            listed = c.call("sandbox.list", {})["sandboxes"]
            assert {s["node"] for s in listed} == set(NODES), listed
            out = c.call("sandbox.exec", {"id": sbs[-1]["id"], "command": "hostname"})
            assert out["exit_code"] == 0, out
            for sb in sbs:
                c.call("sandbox.destroy", {"id": sb["id"]})
            env.wait_no_containers(30)

        def node_param():
            sb = c.call("sandbox.create", {"node": "pve3", "ttl_s": 600})  # root: an admin
            assert sb["node"] == "pve3", sb
            assert env.containers()[sb["vmid"]]["node"] == "pve3"
            for bad in ("pve9", "-x", "a" * 64):
                try:
                    c.call("sandbox.create", {"node": bad})
                    raise AssertionError(f"node {bad} accepted")
                except RpcError as e:
                    assert e.code == -32602, e.err
                    assert e.data.get("param") == "node", e.err
            c.call("sandbox.destroy", {"id": sb["id"]})
            solo = c.call("sandbox.create", {"template": "solo", "ttl_s": 600})
            assert solo["node"] == "pve3" and solo["template"] == "solo", solo
            e = c.error("sandbox.create", {"template": "solo", "node": "pve1"})
            assert e.code == -32602 and e.data.get("param") == "node", e.err
            c.call("sandbox.destroy", {"id": solo["id"]})
            env.wait_no_containers(30)
            out = as_nobody(env)
            assert out["code"] == -32008 and "node_param" in out["reason"], out
            assert not env.containers()
            # node_param = any, applied by SIGHUP: now anyone may choose
            with open(env.config, "a") as f:
                f.write("[proxmox]\nnode_param = any\n")
            env.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: as_nobody(env)["code"] == "succeeded", 30, "node_param = any")
            assert [ct["node"] for ct in env.containers().values()] == ["pve1"]

        def node_fails():
            before = create_many(env.client, 6)
            on_pve2 = [sb["id"] for sb in before if sb["node"] == "pve2"]
            assert len(on_pve2) == 2, before
            sub = env.client()
            sub.send("daemon.subscribe", {})
            made = []
            with NodeFailure(env, "pve2"):
                # creates while the node fails: none fails because of it
                made = create_many(env.client, 9, parallel=3)
                assert all(sb["node"] != "pve2" for sb in made), made
                wait_until(lambda: set(states(c, on_pve2).values()) == {"unreachable"}, 30,
                           "sandboxes on pve2 unreachable")
                got = c.call("sandbox.get", {"id": on_pve2[0]})
                assert got["state"] == "unreachable" and got["node"] == "pve2", got
            wait_until(lambda: set(states(c, on_pve2).values()) == {"ready"}, 30,
                       "sandboxes on pve2 ready again")
            for sid in on_pve2:
                out = c.call("sandbox.exec", {"id": sid, "command": "true"})
                assert out["exit_code"] == 0, out
            # the events: unreachable, then ready again, for each sandbox on pve2
            seen = {}
            with sub.cv:
                for msg in sub.notes:
                    p = msg.get("params") or {}
                    if msg.get("method") == "sandbox.event" and p.get("id") in on_pve2:
                        seen.setdefault(p["id"], []).append((p["old_state"], p["state"]))
            for i in on_pve2:
                assert seen[i][:2] == [("ready", "unreachable"), ("unreachable", "ready")], seen
            sub.close()
            log = env.daemon_log()
            assert "event=node.down node=pve2" in log and "event=node.up node=pve2" in log, log[-3000:]
            assert "event=sandbox.replaced" in log, log[-3000:]  # a create moved off pve2
            for sb in before + made:
                c.call("sandbox.destroy", {"id": sb["id"]})
            env.wait_no_containers(60)

        def kill_restart():
            nonlocal c
            sbs = create_many(env.client, 6, parallel=3)
            assert {sb["node"] for sb in sbs} == set(NODES), sbs
            c.close()
            kill9(env)
            launch(env)
            wait_reconciled(env)
            c = env.client()
            listed = {s["id"]: s for s in c.call("sandbox.list", {})["sandboxes"]}
            assert set(listed) == {sb["id"] for sb in sbs}, (listed, sbs)
            for sb in sbs:
                got = listed[sb["id"]]
                assert (got["state"], got["node"], got["vmid"]) == ("ready", sb["node"], sb["vmid"]), got
                out = c.call("sandbox.exec", {"id": sb["id"], "command": "true"})
                assert out["exit_code"] == 0, out
            # again with a node down: its sandboxes come back unreachable, not gone
            on_pve2 = [sb["id"] for sb in sbs if sb["node"] == "pve2"]
            env.sim.admin("POST", "/node/pve2/down")
            c.close()
            kill9(env)
            launch(env)
            wait_reconciled(env)
            c = env.client()
            wait_until(lambda: set(states(c, on_pve2).values()) == {"unreachable"}, 30,
                       "sandboxes on pve2 unreachable after the restart")
            assert len(c.call("sandbox.list", {})["sandboxes"]) == len(sbs)
            env.sim.admin("POST", "/node/pve2/up")
            wait_until(lambda: set(states(c, on_pve2).values()) == {"ready"}, 30,
                       "sandboxes on pve2 ready again")
            for sid in on_pve2:
                out = c.call("sandbox.exec", {"id": sid, "command": "true"}, timeout=120)
                assert out["exit_code"] == 0, out
            assert set(env.containers()) == {sb["vmid"] for sb in sbs}
            for sb in sbs:
                c.call("sandbox.destroy", {"id": sb["id"]})
            env.wait_no_containers(30)

        def node_down_up():
            before = create_many(env.client, 6)
            on_pve3 = [sb["id"] for sb in before if sb["node"] == "pve3"]
            assert len(on_pve3) == 2, before
            # its lease ends while the node is down: destroyed once the node answers. The
            # lease outlasts the daemon's notice of the node's loss (the first failed call
            # to it, several seconds after it went down on a loaded machine): a lease that
            # ended before that notice is destroyed as usual, which is not this case.
            short = c.call("sandbox.create", {"node": "pve3", "ttl_s": 45})
            short_expiry = time.time() + 45
            result = {}

            def creates():
                # 6 at once: with pve3 holding one sandbox more (short), ties between nodes
                # go to the first node listed, so 4 at once may all land on pve1 and pve2
                # and none would wait for a clone on pve3 when it goes down
                result["made"] = create_many(env.client, 12, parallel=6)

            # clones on pve3 take 3 s: the node goes down while creates wait for them
            slow = env.sim.admin("POST", "/faults", {"method": "POST", "latency": 3,
                                                     "path": "/nodes/pve3/lxc/*/clone"})
            replaced = env.daemon_log().count("event=sandbox.replaced")
            t = threading.Thread(target=creates)
            t.start()
            time.sleep(1.0)
            # a create that asked for pve3 stays there: it fails instead of moving
            pinned_c = env.client()
            pinned = pinned_c.send("sandbox.create", {"node": "pve3"})
            time.sleep(0.5)
            env.sim.admin("POST", "/node/pve3/down")
            t.join()
            try:
                pinned_c.wait(pinned, timeout=120)
                raise AssertionError("a create that asked for pve3 moved")
            except RpcError as e:
                assert e.code == -32007 and "went down" in str(e), e.err
            pinned_c.close()
            env.sim.admin("DELETE", f"/faults/{slow['id']}")
            assert env.daemon_log().count("event=sandbox.replaced") > replaced, "no create moved"
            made = result["made"]  # create_many asserts that none failed
            assert len(made) == 12 and all(sb["state"] == "ready" for sb in made), made
            wait_until(lambda: set(states(c, on_pve3).values()) == {"unreachable"}, 30,
                       "sandboxes on pve3 unreachable")
            # the creates after the node went down went elsewhere
            late = c.call("sandbox.create", {"ttl_s": 600})
            assert late["node"] != "pve3", late
            made.append(late)
            e = c.error("sandbox.create", {"node": "pve3"})
            assert e.code == -32007, e.err
            # a destroy on the node that is down does not wait out its deadline: it fails at
            # once, and reconcile destroys the sandbox once the node answers
            doomed_id = on_pve3.pop()
            doomed = next(sb for sb in before if sb["id"] == doomed_id)
            t0 = time.time()
            e = c.error("sandbox.destroy", {"id": doomed["id"]})
            assert time.time() - t0 < 15, f"the destroy took {time.time() - t0:.1f} s"
            assert e.code == -32004 and "pve3 is down" in e.data.get("reason", ""), e.err
            assert c.call("sandbox.get", {"id": doomed["id"]})["state"] == "failed"
            assert time.time() < short_expiry, "pve3 was noticed down only after the lease ended"
            wait_until(lambda: time.time() > short_expiry + 2, 60, "the short lease to end")
            got = c.call("sandbox.get", {"id": short["id"]})  # kept while its node is down
            assert got["state"] == "unreachable", got
            assert short["vmid"] in env.containers()
            env.sim.admin("POST", "/node/pve3/up")
            wait_until(lambda: short["vmid"] not in env.containers(), 30,
                       "the expired sandbox destroyed once its node answers")
            wait_until(lambda: doomed["vmid"] not in env.containers(), 30,
                       "the failed destroy done once its node answers")
            wait_until(lambda: set(states(c, on_pve3).values()) == {"ready"}, 30,
                       "sandboxes on pve3 ready again")
            for sid in on_pve3:
                out = c.call("sandbox.exec", {"id": sid, "command": "true"}, timeout=120)
                assert out["exit_code"] == 0, out
            # every container is a live sandbox's: the leftovers of creates that moved went
            kept = [sb for sb in before + made if sb["id"] != doomed["id"]]
            live = {sb["vmid"] for sb in kept}
            wait_until(lambda: set(env.containers()) == live, 60, "only live containers")
            for sb in kept:
                c.call("sandbox.destroy", {"id": sb["id"]})
            env.wait_no_containers(60)

        def pool_per_node():
            def set_warm(n):
                with open(env.config) as f:
                    text = f.read().split("[pool]")[0]
                with open(env.config, "w") as f:
                    f.write(text + f"[pool]\nwarm = {n}\n")
                env.proc.send_signal(signal.SIGHUP)

            def pool():
                return c.call("daemon.status")["pool"]["default"]

            set_warm(1)
            wait_until(lambda: pool()["ready"] == 3 and pool()["filling"] == 0, 60,
                       "one member ready on each node")
            # a fill that failed (its node slow to answer on a loaded machine) may still be
            # on its way out: then only the three members are left
            wait_until(lambda: sorted(ct["node"] for ct in env.containers().values()) == NODES,
                       60, "one container on each node")
            hits = pool()["hits"]
            sb = c.call("sandbox.create", {"node": "pve2", "ttl_s": 600})
            assert sb["node"] == "pve2" and pool()["hits"] == hits + 1, (sb, pool())
            wait_until(lambda: pool()["ready"] == 3, 60, "pve2's member replaced")
            env.sim.admin("POST", "/node/pve3/down")
            try:
                # pve3's member is neither counted nor handed out while pve3 is down
                wait_until(lambda: pool()["ready"] == 2, 30, "pve3's member not counted")
                took = c.call("sandbox.create", {"ttl_s": 600})
                assert took["node"] != "pve3", took
            finally:
                env.sim.admin("POST", "/node/pve3/up")
            wait_until(lambda: pool()["ready"] == 3 and pool()["filling"] == 0, 60,
                       "every node's member ready again")
            set_warm(0)
            wait_until(lambda: pool()["ready"] == 0, 60, "the pool emptied")

        def cleanup():
            """After each test, pass or fail: nothing of it is left for the next one."""
            cc = env.client()
            try:
                for sb in cc.call("sandbox.list", {"all": True})["sandboxes"]:
                    try:
                        cc.call("sandbox.destroy", {"id": sb["id"]})
                    except RpcError:
                        pass
            finally:
                cc.close()
            env.wait_no_containers(60)

        def guarded(fn):
            def g():
                try:
                    fn()
                finally:
                    cleanup()
            return g

        run_all = [("spread over 3 nodes", spread), ("sandbox.create {node}", node_param),
                   ("a node answers 595, then again", node_fails),
                   ("a node taken down mid-run, then up", node_down_up),
                   ("kill -9 with sandboxes on every node, restart", kill_restart),
                   ("the warm pool per node", pool_per_node)]
        run([(name, guarded(fn)) for name, fn in run_all])


if __name__ == "__main__":
    main()
