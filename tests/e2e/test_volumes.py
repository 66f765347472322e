#!/usr/bin/env python3
"""Volumes against the simulator: volume.create makes the volume holder once (a stopped clone
of the template, marked in its description, never started) and a mount point on it with the
volume's line in the same write; volume.list shows the caller's volumes (an admin's: all);
volume.delete destroys the volume's storage. Refusals change nothing: a name in use,
size_gb past max_volume_gb, max_volumes_per_uid, another uid's volume. The holder is never
taken for an orphan by the reconcile, and the volumes are found again after kill -9 and a
lost state folder; kill -9 at each crash point of a create and a delete leaves every volume
listed whole or not at all, and no storage behind."""

import os
import re
import shutil
import subprocess
import threading
import time

import sys

from e2elib import BUILD, SRC, Env, RpcError, calls_as_uid, expect_error, run
from test_recovery_util import FAST_RECONCILE, kill9, launch, wait_dead, wait_reconciled

sys.path.insert(0, os.path.join(SRC, "clients", "python"))
import sandboxd  # noqa: E402

HOLDER = "sandboxd-volumes"
SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")
OTHER_UID = 4242



def crash_in(env, point, method, params):
    """Starts the daemon with crash point `point`, makes the call that must end it there,
    then starts it again; returns a client of the new daemon."""
    launch(env, crash_at=point)
    c = env.client()
    try:
        c.call(method, params, timeout=120)
        raise AssertionError(f"{point}: no crash")
    except (ConnectionError, OSError, RpcError) as e:
        assert getattr(e, "code", None) in (None, -32011), (point, e)
    assert wait_dead(env) != 0, point
    launch(env)
    return env.client()

def main():
    cfg = {"sandbox": dict(FAST_RECONCILE["sandbox"], max_volumes_per_uid="3", max_volume_gb="4")}
    with Env(daemon_config=cfg) as env:
        st = {}
        c = env.client()

        def conf(vmid):
            return env.sim.ok("GET", f"/nodes/pve/lxc/{vmid}/config")

        def holders():
            return [v for v, ct in env.containers().items()
                    if conf(v).get("hostname") == HOLDER]

        def holder_volumes(unused_ok=False):
            """name -> (mpN value, owner) from the holder's description and config; every
            mount point has its line, and a line without its mount point is a volume
            attached to a sandbox (its value None)."""
            (h,) = holders()
            cf = conf(h)
            desc = cf.get("description", "")
            assert re.search(r"^sandboxd-holder:v1 instance=\S+ check=[0-9a-f]{8}$", desc, re.M), desc
            assert not env.containers()[h]["running"]
            lines = re.findall(r"^sandboxd-volume:v1 name=(\S+) owner=(\d+) size=(\d+) key=(mp\d+) "
                               r"check=[0-9a-f]{8}$", desc, re.M)
            mps = {k for k in cf if re.fullmatch(r"mp\d+", k)}
            assert mps <= {key for _, _, _, key in lines}, (mps, lines)
            assert unused_ok or not [k for k in cf if k.startswith("unused")], cf
            return {n: (cf.get(key), int(o), int(s)) for n, o, s, key in lines}

        def names(cl=None):
            return sorted(v["name"] for v in (cl or c).call("volume.list")["volumes"])

        def create_list_delete():
            assert c.call("volume.list") == {"volumes": []}
            assert holders() == []  # a list makes no holder
            v = c.call("volume.create", {"name": "data", "size_gb": 2})["volume"]
            assert v == {"name": "data", "size_gb": 2, "owner_uid": 0, "attached_to": None}, v
            (h,) = holders()
            st["holder"] = h
            vols = holder_volumes()
            assert vols["data"][1:] == (0, 2) and "size=2G" in vols["data"][0], vols
            c.call("volume.create", {"name": "logs", "size_gb": 1})
            assert holders() == [h]  # one holder
            assert names() == ["data", "logs"]
            assert c.call("volume.list")["volumes"][0] == v
            e = expect_error(c, "volume.create", {"name": "data", "size_gb": 1}, -32602, "name")
            e = expect_error(c, "volume.create", {"name": "big", "size_gb": 5}, -32602, "size_gb")
            assert "max_volume_gb" in str(e), e
            expect_error(c, "volume.create", {"name": "Bad_Name", "size_gb": 1}, -32602, "name")
            expect_error(c, "volume.delete", {"name": "nope"}, -32602, "name")
            assert set(holder_volumes()) == {"data", "logs"}
            m = [f for f in c.call("daemon.metrics")["metrics"] if f["name"] == "sandboxd_volume_calls_total"][0]
            got = {tuple(x["labels"].values()): x["value"] for x in m["samples"]}
            assert got.get(("create", "done")) == 2 and got.get(("create", "failed")) == 1, got
            vol_data = holder_volumes()["logs"][0].split(",")[0]  # local-lvm:vm-H-disk-K
            store, _, disk = vol_data.partition(":")
            path = os.path.join(env.sim.state_dir, "storage", store, disk)
            assert os.path.isdir(path), path
            assert c.call("volume.delete", {"name": "logs"}) == {"name": "logs", "deleted": True}
            assert names() == ["data"]
            assert set(holder_volumes()) == {"data"}
            assert not os.path.exists(path), path  # its storage destroyed

        def create_volumes_refused():
            """sandbox.create's malformed volumes, an unknown volume and another uid's are
            refused: nothing is left, the volume stays whole on the holder, unattached."""
            c.call("volume.create", {"name": "mnt", "size_gb": 1})
            before_cts = set(env.containers())
            before = holder_volumes()
            for bad in ([{"name": "nope", "path": "/mnt/data"}],
                        [{"name": "mnt", "path": "/mnt/a"}, {"name": "nope", "path": "/mnt/b"}]):
                e = expect_error(c, "sandbox.create", {"volumes": bad}, -32602, "volumes")
                assert "no such volume" in str(e), e
            out = calls_as_uid(env.socket, OTHER_UID, [
                ["sandbox.create", {"volumes": [{"name": "mnt", "path": "/mnt/data"}]}]])
            assert out == {"sandbox.create": -32602}, out
            for vm in set(env.containers()) - before_cts:
                wait_gone(vm)  # the failed creates' rollbacks took "mnt" back, then deleted
            for bad, param in ((["mnt"], "volumes[0]"),
                               ([{"name": "mnt", "path": "mnt"}], "volumes[0].path"),
                               ([{"name": "mnt", "path": "/a/../b"}], "volumes[0].path"),
                               ([{"name": "mnt", "path": "/a,b=c"}], "volumes[0].path"),
                               ([{"name": "Mnt", "path": "/x"}], "volumes[0].name"),
                               ([{"name": "mnt", "path": "/x", "read_only": "yes"}],
                                "volumes[0].read_only"),
                               ([{"name": "mnt", "path": "/x"}, {"name": "mnt", "path": "/y"}],
                                "volumes"),
                               ([{"name": f"v{i}", "path": f"/v{i}"} for i in range(9)], "volumes"),
                               ({"name": "mnt"}, "volumes")):
                expect_error(c, "sandbox.create", {"volumes": bad}, -32602, param)
            assert set(env.containers()) == before_cts
            assert c.call("sandbox.list")["sandboxes"] == []
            after = holder_volumes()  # back from the failed creates (its disk renamed by a move)
            assert {n: v[1:] for n, v in after.items()} == {n: v[1:] for n, v in before.items()}
            assert None not in [v[0] for v in after.values()], after
            v = [x for x in c.call("volume.list")["volumes"] if x["name"] == "mnt"]
            assert v == [{"name": "mnt", "size_gb": 1, "owner_uid": 0, "attached_to": None}], v
            c.call("volume.delete", {"name": "mnt"})

        def sh(sid, cmd):
            r = c.call("sandbox.exec", {"id": sid, "command": cmd})
            assert r["exit_code"] == 0, r
            return r["stdout"]

        def attach_at_create():
            """sandbox.create {volumes}: each volume is mounted at its path before the first
            start (its line in the sandbox's description at its key, the holder's line kept
            without its mount point); a file written in it by one sandbox is read by the next
            after a destroy, read_only mounts it read-only; while attached, another create
            naming it and volume.delete are refused."""
            def attaches_done():
                m = [f for f in c.call("daemon.metrics")["metrics"]
                     if f["name"] == "sandboxd_volume_calls_total"][0]
                return {tuple(x["labels"].values()): x["value"]
                        for x in m["samples"]}.get(("attach", "done"), 0)
            attached_before = attaches_done()
            c.call("volume.create", {"name": "shared", "size_gb": 1})
            c.call("volume.create", {"name": "second", "size_gb": 1})
            sb = c.call("sandbox.create", {"volumes": [{"name": "shared", "path": "/mnt/shared"},
                                                       {"name": "second", "path": "/srv/b"}]})
            vm = sb["vmid"]
            cf = conf(vm)
            for name, path in (("shared", "/mnt/shared"), ("second", "/srv/b")):
                (key,) = re.findall(rf"^sandboxd-volume:v1 name={name} owner=0 size=1 key=(mp\d+) ",
                                    cf["description"], re.M)
                assert f",mp={path}," in cf[key] + ",", cf
                assert holder_volumes()[name][0] is None  # attached: the line stays, no mount
            assert "sandboxd:" in cf["description"]  # the marker rewritten with the host key
            assert sh(sb["id"], "echo from-first > /mnt/shared/f && cat /mnt/shared/f") == "from-first\n"
            listed = {v["name"]: v["attached_to"] for v in c.call("volume.list")["volumes"]}
            assert listed["shared"] == sb["id"] and listed["second"] == sb["id"], listed
            assert attaches_done() == attached_before + 2
            e = expect_error(c, "sandbox.create", {"volumes": [{"name": "shared", "path": "/x"}]},
                             -32602, "volumes")
            assert "attached to another sandbox" in str(e), e
            e = expect_error(c, "volume.delete", {"name": "shared"}, -32002)
            assert e["data"]["state"] == "attached", e
            assert c.call("sandbox.destroy", {"id": sb["id"]})["state"] == "destroyed"
            assert vm not in env.containers()
            assert holder_volumes()["shared"][0] is not None
            assert set(names()) >= {"shared", "second"}
            assert [v["attached_to"] for v in c.call("volume.list")["volumes"]
                    if v["name"] in ("shared", "second")] == [None, None]
            sb2 = c.call("sandbox.create", {"volumes": [{"name": "shared", "path": "/data",
                                                        "read_only": True}]})
            assert ",ro=1" in [v for k, v in conf(sb2["vmid"]).items() if re.fullmatch(r"mp\d+", k)][0]
            assert sh(sb2["id"], "cat /data/f") == "from-first\n"
            r = c.call("sandbox.exec", {"id": sb2["id"], "command": "touch /data/g"})
            assert r["exit_code"] != 0, r  # read-only
            c.call("sandbox.destroy", {"id": sb2["id"]})
            c.call("volume.delete", {"name": "shared"})
            c.call("volume.delete", {"name": "second"})

        def attach_crash_points():
            """kill -9 at each point of an attach at create (and at the start after it): the
            interrupted create is rolled back by the restarted daemon, which takes the volume
            back to the holder before the container is deleted; the file stays, the volume
            listed once, unattached, and attachable again."""
            nonlocal c
            c.call("volume.create", {"name": "ac", "size_gb": 1})
            for point in ("volume-attach-line", "volume-attach-path", "volume-attach-moved",
                          "create-starting"):
                with open(os.path.join(on_holder("ac"), "proof"), "w") as f:
                    f.write(point + "\n")
                before = set(env.containers())
                c.close()
                kill9(env)
                c = crash_in(env, point, "sandbox.create",
                             {"volumes": [{"name": "ac", "path": "/mnt/ac"}],
                              "idempotency_key": "k-" + point})
                # right after the restart: listed once, where it is (the interrupted create's
                # container once moved), until the rollback takes it back
                (v,) = [v for v in c.call("volume.list")["volumes"] if v["name"] == "ac"]
                assert v["attached_to"] is None or v["attached_to"].startswith("sb-"), (point, v)
                for vm in set(env.containers()) - before:
                    wait_gone(vm)
                assert names().count("ac") == 1, (point, names())
                with open(os.path.join(on_holder("ac"), "proof")) as f:
                    assert f.read() == point + "\n", point
                assert set(holder_volumes()) == set(names()), point
            sb = c.call("sandbox.create", {"volumes": [{"name": "ac", "path": "/mnt/ac"}]})
            assert sh(sb["id"], "cat /mnt/ac/proof") == "create-starting\n"
            c.call("sandbox.destroy", {"id": sb["id"]})
            c.call("volume.delete", {"name": "ac"})

        def destroy_mid_attach():
            """A destroy asked for while the volume moves into the new sandbox: the create
            fails once the move ended, its rollback takes the volume back before the delete;
            the file stays."""
            c.call("volume.create", {"name": "race", "size_gb": 1})
            with open(os.path.join(on_holder("race"), "f"), "w") as f:
                f.write("raced\n")
            (h,) = holders()
            before = set(env.containers())
            env.sim.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/*/move_volume",
                                              "latency": 2})
            out = {}

            def create():
                try:
                    out["ok"] = env.client().call("sandbox.create",
                                                  {"volumes": [{"name": "race", "path": "/mnt/race"}]})
                except RpcError as e:
                    out["err"] = e
            t = threading.Thread(target=create)
            t.start()
            deadline = time.time() + 60
            while not any(",mp=/mnt/race" in v for k, v in conf(h).items() if k.startswith("mp")):
                assert time.time() < deadline
                time.sleep(0.05)
            (sb,) = c.call("sandbox.list")["sandboxes"]
            assert c.call("sandbox.destroy", {"id": sb["id"]})["state"] == "destroyed"
            t.join(120)
            env.sim.admin("DELETE", "/faults")
            assert "err" in out, out
            assert set(env.containers()) == before
            with open(os.path.join(on_holder("race"), "f")) as f:
                assert f.read() == "raced\n"
            c.call("volume.delete", {"name": "race"})

        def attached_sandbox_ops():
            """A sandbox with a volume: snapshot, rollback, fork and template.create are refused
            (-32602 naming id), nothing changed; a pause and a resume (which rewrite the
            marker) keep the volume's line, its mount point and its file, also after kill -9
            and a lost state folder."""
            nonlocal c
            c.call("volume.create", {"name": "ops", "size_gb": 1})
            sb = c.call("sandbox.create", {"volumes": [{"name": "ops", "path": "/mnt/ops"}]})
            sid, vm = sb["id"], sb["vmid"]
            sh(sid, "echo kept > /mnt/ops/f")
            before = conf(vm)
            for method, params in (("sandbox.snapshot", {"id": sid, "name": "s1"}),
                                   ("sandbox.rollback", {"id": sid, "name": "s1"}),
                                   ("sandbox.fork", {"id": sid, "count": 1}),
                                   ("template.create", {"id": sid, "name": "from-vol"})):
                e = expect_error(c, method, params, -32602, "id")
                assert "cannot be snapshotted" in str(e), e
            assert c.call("sandbox.snapshots", {"id": sid}) == {"snapshots": []}
            assert conf(vm) == before
            assert c.call("sandbox.pause", {"id": sid})["state"] == "paused"
            cf = conf(vm)
            (key,) = re.findall(r"^sandboxd-volume:v1 name=ops owner=0 size=1 key=(mp\d+) ",
                                cf["description"], re.M)
            assert "paused=1" in cf["description"] and key in cf, cf
            assert c.call("sandbox.resume", {"id": sid})["state"] == "ready"
            cf = conf(vm)
            assert re.search(rf"^sandboxd-volume:v1 name=ops owner=0 size=1 key={key} ",
                             cf["description"], re.M) and key in cf, cf
            assert sh(sid, "cat /mnt/ops/f") == "kept\n"
            # kill -9 and a lost state folder: the sandbox is rebuilt from its marker, the
            # volume listed as attached to it, its line kept by the next marker write
            c.close()
            kill9(env)
            shutil.rmtree(os.path.join(env.dir, "state"))
            launch(env)
            wait_reconciled(env, runs_after=1)
            c = env.client()
            (v,) = [v for v in c.call("volume.list")["volumes"] if v["name"] == "ops"]
            assert v["attached_to"] == sid, v
            e = expect_error(c, "sandbox.snapshot", {"id": sid, "name": "s1"}, -32602, "id")
            assert c.call("sandbox.pause", {"id": sid})["state"] == "paused"
            assert c.call("sandbox.resume", {"id": sid})["state"] == "ready"
            assert sh(sid, "cat /mnt/ops/f") == "kept\n"
            c.call("sandbox.destroy", {"id": sid})
            with open(os.path.join(on_holder("ops"), "f")) as f:
                assert f.read() == "kept\n"
            c.call("volume.delete", {"name": "ops"})

        def attach_detach():
            """sandbox.attach hot-plugs a volume into a running sandbox (its processes keep
            running); sandbox.detach stops it, moves the volume back to the holder, starts it
            and returns it ready; the file written in one sandbox is read in the next.
            Refusals change nothing: attached already (here or elsewhere), a volume not
            attached there, a path taken, another uid, a paused sandbox."""
            def calls(op):
                m = [f for f in c.call("daemon.metrics")["metrics"]
                     if f["name"] == "sandboxd_volume_calls_total"][0]
                return {tuple(x["labels"].values()): x["value"]
                        for x in m["samples"]}.get((op, "done"), 0)
            c.call("volume.create", {"name": "att", "size_gb": 1})
            c.call("volume.create", {"name": "att2", "size_gb": 1})
            sb1, sb2 = c.call("sandbox.create", {}), c.call("sandbox.create", {})
            s1, s2 = sb1["id"], sb2["id"]
            c.call("process.start", {"id": s1, "command": "exec sleep 1000"})

            def alive():
                ps = c.call("process.list", {"id": s1})["processes"]
                return [p["state"] for p in ps] == ["running"]
            attached, detached = calls("attach"), calls("detach")
            r = c.call("sandbox.attach", {"id": s1, "volume": "att", "path": "/mnt/att"})
            assert r["id"] == s1 and r["state"] == "ready", r
            assert alive()  # hot-plugged: nothing stopped
            e = expect_error(c, "sandbox.snapshot", {"id": s1, "name": "s1"}, -32602, "id")
            assert "cannot be snapshotted" in str(e), e
            assert sh(s1, "echo from-s1 > /mnt/att/f && cat /mnt/att/f") == "from-s1\n"
            assert holder_volumes()["att"][0] is None
            listed = {v["name"]: v["attached_to"] for v in c.call("volume.list")["volumes"]}
            assert listed["att"] == s1 and listed["att2"] is None, listed
            assert calls("attach") == attached + 1
            before1, before2 = conf(sb1["vmid"]), conf(sb2["vmid"])
            e = expect_error(c, "sandbox.attach", {"id": s1, "volume": "att", "path": "/mnt/x"},
                             -32602, "volume")
            assert "already" in str(e), e
            e = expect_error(c, "sandbox.attach", {"id": s2, "volume": "att", "path": "/mnt/att"},
                             -32602, "volume")
            assert "attached to another sandbox" in str(e), e
            e = expect_error(c, "sandbox.attach", {"id": s1, "volume": "att2", "path": "/mnt/att"},
                             -32602, "path")
            e = expect_error(c, "sandbox.attach", {"id": s1, "volume": "nope", "path": "/mnt/n"},
                             -32602, "volume")
            assert "no such volume" in str(e), e
            for bad, param in (({"id": s1, "volume": "att2", "path": "rel"}, "path"),
                               ({"id": s1, "volume": "att2", "path": "/a/../b"}, "path"),
                               ({"id": s1, "volume": "Att", "path": "/a"}, "volume"),
                               ({"id": s1, "volume": "att2"}, "path"),
                               ({"id": s1, "volume": "att2", "path": "/a", "read_only": 1},
                                "read_only")):
                expect_error(c, "sandbox.attach", bad, -32602, param)
            e = expect_error(c, "sandbox.detach", {"id": s2, "volume": "att"}, -32602, "volume")
            e = expect_error(c, "sandbox.detach", {"id": s1, "volume": "att2"}, -32602, "volume")
            assert "not attached" in str(e), e
            out = calls_as_uid(env.socket, OTHER_UID, [
                ["sandbox.attach", {"id": s2, "volume": "att2", "path": "/mnt/o"}],
                ["sandbox.detach", {"id": s1, "volume": "att"}],
                ["volume.create", {"name": "theirs-att", "size_gb": 1}]])
            assert out == {"sandbox.attach": -32001, "sandbox.detach": -32001,
                           "volume.create": "succeeded"}, out
            # another uid's volume into this uid's sandbox (even asked by an admin)
            e = expect_error(c, "sandbox.attach", {"id": s2, "volume": "theirs-att", "path": "/t"},
                             -32602, "volume")
            assert "no such volume" in str(e), e
            c.call("volume.delete", {"name": "theirs-att"})
            assert conf(sb1["vmid"]) == before1 and conf(sb2["vmid"]) == before2
            assert alive()  # never stopped
            r = c.call("sandbox.detach", {"id": s1, "volume": "att"})
            assert r["state"] == "ready", r
            assert calls("detach") == detached + 1
            assert not alive()  # the container was stopped
            assert sh(s1, "test -e /mnt/att/f || echo gone") == "gone\n"
            assert "name=att " not in conf(sb1["vmid"])["description"]  # its line removed
            # attached, no snapshot; detached, the sandbox has no volume: a snapshot works
            assert c.call("sandbox.snapshot", {"id": s1, "name": "after"})["snapshot"]["name"] == "after"
            c.call("sandbox.snapshot_delete", {"id": s1, "name": "after"})
            with open(os.path.join(on_holder("att"), "f")) as f:
                assert f.read() == "from-s1\n"
            r = c.call("sandbox.attach", {"id": s2, "volume": "att", "path": "/data",
                                          "read_only": True})
            assert sh(s2, "cat /data/f") == "from-s1\n"
            assert c.call("sandbox.exec", {"id": s2, "command": "touch /data/g"})["exit_code"] != 0
            listed = {v["name"]: v["attached_to"] for v in c.call("volume.list")["volumes"]}
            assert listed["att"] == s2, listed
            assert c.call("sandbox.pause", {"id": s1})["state"] == "paused"
            e = expect_error(c, "sandbox.attach", {"id": s1, "volume": "att2", "path": "/p"}, -32002)
            assert e["data"]["state"] == "paused", e
            c.call("sandbox.destroy", {"id": s1})
            c.call("sandbox.destroy", {"id": s2})  # takes att back
            assert [v["attached_to"] for v in c.call("volume.list")["volumes"]
                    if v["name"] in ("att", "att2")] == [None, None]
            c.call("volume.delete", {"name": "att"})
            c.call("volume.delete", {"name": "att2"})

        def attach_hotplug_fails():
            """A hot-plug Proxmox could not make (the move's task ends with a warning, the
            mount point pending): the attach restarts the sandbox and answers once the path
            is mounted; its processes ended, nothing stays pending."""
            c.call("volume.create", {"name": "hpf", "size_gb": 1})
            with open(os.path.join(on_holder("hpf"), "proof"), "w") as f:
                f.write("kept\n")
            sb = c.call("sandbox.create", {})
            sid = sb["id"]
            c.call("process.start", {"id": sid, "command": "exec sleep 1000"})
            env.sim.admin("POST", "/faults", {"method": "POST", "hotplug_error": "mount failed",
                                              "path": "/nodes/*/lxc/*/move_volume", "count": 1})
            r = c.call("sandbox.attach", {"id": sid, "volume": "hpf", "path": "/mnt/hpf"})
            assert r["id"] == sid and r["state"] == "ready", r
            assert env.sim.admin("GET", "/faults") == [], "the fault was not used"
            assert sh(sid, "cat /mnt/hpf/proof") == "kept\n"
            ps = c.call("process.list", {"id": sid})["processes"]
            assert [p["state"] for p in ps] != ["running"], ps  # restarted
            pend = env.sim.ok("GET", f"/nodes/pve/lxc/{sb['vmid']}/pending")
            assert not [e for e in pend if "pending" in e or "delete" in e], pend
            listed = {v["name"]: v["attached_to"] for v in c.call("volume.list")["volumes"]}
            assert listed["hpf"] == sid, listed
            assert holder_volumes()["hpf"][0] is None
            r = c.call("sandbox.detach", {"id": sid, "volume": "hpf"})
            assert r["state"] == "ready", r
            with open(os.path.join(on_holder("hpf"), "proof")) as f:
                assert f.read() == "kept\n"
            c.call("sandbox.destroy", {"id": sid})
            c.call("volume.delete", {"name": "hpf"})

        def attach_detach_crash_points():
            """kill -9 at each point of an attach and of a detach: the volume is attached to
            the sandbox (mounted) or back on the holder (listed once, its file whole), never
            lost; a detach always ends detached; the sandbox is ready (a container the detach
            stopped is started again) and serves commands; the next attach or detach works."""
            nonlocal c
            c.call("volume.create", {"name": "acp", "size_gb": 1})
            with open(os.path.join(on_holder("acp"), "proof"), "w") as f:
                f.write("kept\n")
            sb = c.call("sandbox.create", {"ttl_s": 3600})
            sid = sb["id"]

            def crash(point, method, params, detached=False):
                """detached: the volume must end on the holder, the sandbox serving commands
                (a detach the re-attach finishes, commands refused meanwhile)."""
                nonlocal c
                c.close()
                kill9(env)
                c = crash_in(env, point, method, params)
                deadline = time.time() + 120
                while c.call("sandbox.get", {"id": sid})["state"] != "ready":
                    assert time.time() < deadline, (point, c.call("sandbox.get", {"id": sid}))
                    time.sleep(0.5)
                while detached:
                    (v,) = [v for v in c.call("volume.list")["volumes"] if v["name"] == "acp"]
                    try:
                        if v["attached_to"] is None and sh(sid, "echo ok") == "ok\n":
                            break
                    except RpcError as e:
                        assert e.code == -32007, (point, e)
                    assert time.time() < deadline, (point, v)
                    time.sleep(0.5)
                (v,) = [v for v in c.call("volume.list")["volumes"] if v["name"] == "acp"]
                assert v["attached_to"] in (None, sid), (point, v)
                if v["attached_to"] == sid:
                    # mounted (a pending mount point is applied by a restart after the
                    # re-attach, commands refused meanwhile)
                    r = None
                    while True:
                        try:
                            r = c.call("sandbox.exec", {"id": sid, "command": "cat /mnt/acp/proof"})
                            if r["exit_code"] == 0:
                                break
                        except RpcError as e:
                            assert e.code == -32007, (point, e)
                        assert time.time() < deadline, (point, r)
                        time.sleep(0.5)
                    assert r["stdout"] == "kept\n", (point, r)
                else:
                    with open(os.path.join(on_holder("acp"), "proof")) as f:
                        assert f.read() == "kept\n", point
                assert set(holder_volumes()) == set(names()), point
                return v["attached_to"] == sid

            attach = {"id": sid, "volume": "acp", "path": "/mnt/acp"}
            for point in ("attach-recorded", "volume-attach-line", "volume-attach-path",
                          "volume-attach-moved"):
                if crash(point, "sandbox.attach", attach):
                    c.call("sandbox.detach", {"id": sid, "volume": "acp"})
            # an attach whose hot-plug failed, killed in its restart: the start that follows
            # (the reconcile's or its own) applies the pending mount point
            for point in ("volume-attach-moved", "attach-stopped", "attach-started"):
                env.sim.admin("POST", "/faults", {"method": "POST", "hotplug_error": "mount failed",
                                                  "path": "/nodes/*/lxc/*/move_volume", "count": 1})
                assert crash(point, "sandbox.attach", attach), point
                c.call("sandbox.detach", {"id": sid, "volume": "acp"})
            # a detach killed at any point ends detached: its intent is recorded before the
            # stop, the re-attach finishes it
            for point in ("detach-recorded", "detach-stopped", "volume-take-back-line",
                          "volume-take-back-moved", "detach-started"):
                c.call("sandbox.attach", attach)
                assert not crash(point, "sandbox.detach", {"id": sid, "volume": "acp"},
                                 detached=True), point
                assert sh(sid, "test -e /mnt/acp/proof || echo gone") == "gone\n", point
            assert sh(sid, "echo ok") == "ok\n"
            c.call("sandbox.destroy", {"id": sid})
            c.call("volume.delete", {"name": "acp"})

        def sandboxctl():
            def ctl(*args):
                return subprocess.run([SANDBOXCTL, "--socket", env.socket, "volume", *args],
                                      capture_output=True, text=True, timeout=120)
            r = ctl("create", "cli-vol", "1")
            assert r.returncode == 0 and r.stdout.split() == ["cli-vol", "1", "0", "-"], r
            r = ctl("list")
            assert r.returncode == 0 and [ln.split()[0] for ln in r.stdout.splitlines()] == \
                ["cli-vol", "data"], r
            r = ctl("create", "cli-vol", "1")
            assert r.returncode != 0 and "name" in r.stderr, r
            r = subprocess.run([SANDBOXCTL, "--socket", env.socket, "create", "--volume",
                                "cli-vol:/mnt/cli:ro"], capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r
            (sid,) = [s["id"] for s in c.call("sandbox.list")["sandboxes"]]
            (vm,) = [s["vmid"] for s in c.call("sandbox.list")["sandboxes"]]
            assert [v for k, v in conf(vm).items() if re.fullmatch(r"mp\d+", k)][0].endswith(
                ",mp=/mnt/cli,ro=1,size=1G"), conf(vm)
            r = ctl("list")
            assert r.stdout.split()[:4] == ["cli-vol", "1", "0", sid], r
            c.call("sandbox.destroy", {"id": sid})
            # attach and detach on a running sandbox
            sid = c.call("sandbox.create", {})["id"]

            def top(*args):
                return subprocess.run([SANDBOXCTL, "--socket", env.socket, *args],
                                      capture_output=True, text=True, timeout=120)
            r = top("attach", sid, "cli-vol:/mnt/c:ro")
            assert r.returncode == 0 and r.stdout.split()[:2] == [sid, "ready"], r
            assert ctl("list").stdout.split()[:4] == ["cli-vol", "1", "0", sid]
            assert c.call("sandbox.exec", {"id": sid, "command": "touch /mnt/c/x"})["exit_code"] != 0
            r = top("attach", sid, "cli-vol")
            assert r.returncode == 64 and "NAME:PATH" in r.stderr, r
            r = top("detach", sid, "cli-vol")
            assert r.returncode == 0 and r.stdout.split()[:2] == [sid, "ready"], r
            r = top("detach", sid, "cli-vol")
            assert r.returncode != 0 and "not attached" in r.stderr, r
            assert ctl("list").stdout.split()[:4] == ["cli-vol", "1", "0", "-"]
            c.call("sandbox.destroy", {"id": sid})
            r = subprocess.run([SANDBOXCTL, "--socket", env.socket, "create", "--volume", "cli-vol"],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 64 and "NAME:PATH" in r.stderr, r
            r = ctl("delete", "cli-vol")
            assert r.returncode == 0 and r.stdout == "cli-vol deleted\n", r
            assert names() == ["data"]

        def python_client():
            py = sandboxd.Client(env.socket)
            try:
                v = py.create_volume("py-vol", 1)
                assert v == {"name": "py-vol", "size_gb": 1, "owner_uid": 0, "attached_to": None}, v
                assert [x["name"] for x in py.volumes()] == ["data", "py-vol"]
                try:
                    py.create_volume("py-vol", 1)
                    raise AssertionError("a name in use was accepted")
                except sandboxd.InvalidParams:
                    pass
                sb = py.create(volumes=[{"name": "py-vol", "path": "/mnt/py"}])
                assert sb.exec("echo py > /mnt/py/f").exit_code == 0
                assert [x["attached_to"] for x in py.volumes() if x["name"] == "py-vol"] == [sb.id]
                assert sb.detach("py-vol").state == "ready"
                assert [x["attached_to"] for x in py.volumes() if x["name"] == "py-vol"] == [None]
                assert sb.attach("py-vol", "/srv/again", read_only=True).state == "ready"
                assert sb.exec("cat /srv/again/f").stdout == "py\n"
                try:
                    sb.attach("py-vol", "/srv/twice")
                    raise AssertionError("an attached volume was attached again")
                except sandboxd.InvalidParams:
                    pass
                sb.destroy()
                py.delete_volume("py-vol")
                assert [x["name"] for x in py.volumes()] == ["data"]
            finally:
                py.close()

        def quota_and_uids():
            c.call("volume.create", {"name": "q2", "size_gb": 1})
            c.call("volume.create", {"name": "q3", "size_gb": 1})
            e = expect_error(c, "volume.create", {"name": "q4", "size_gb": 1}, -32003)
            assert "max_volumes_per_uid" in str(e), e
            assert names() == ["data", "q2", "q3"]
            # another uid: sees none of them, cannot delete them, has its own quota
            out = calls_as_uid(env.socket, OTHER_UID, [
                ["volume.list", {}], ["volume.delete", {"name": "data"}],
                ["volume.create", {"name": "data", "size_gb": 1}]])
            assert out == {"volume.list": "succeeded", "volume.delete": -32602,
                           "volume.create": -32602}, out
            out = calls_as_uid(env.socket, OTHER_UID, [["volume.create", {"name": "theirs", "size_gb": 1}]])
            assert out == {"volume.create": "succeeded"}, out
            assert names() == ["data", "q2", "q3", "theirs"]  # uid 0 is an admin: sees all
            vols = holder_volumes()
            assert vols["theirs"][1] == OTHER_UID and vols["data"][1] == 0, vols
            c.call("volume.delete", {"name": "theirs"})  # an admin's delete
            log = env.daemon_log()
            assert re.search(r"event=volume.create .*caller_uid=4242 owner_uid=4242 .*'theirs'", log), log[-3000:]
            assert re.search(r"event=volume.delete .*caller_uid=0 owner_uid=4242 .*'theirs'", log), log[-3000:]
            c.call("volume.delete", {"name": "q3"})
            assert names() == ["data", "q2"]

        def parallel_creates():
            errs = []

            def one(n):
                cl = env.client()
                try:
                    cl.call("volume.create", {"name": n, "size_gb": 1})
                except RpcError as e:
                    errs.append((n, e.code))
                finally:
                    cl.close()
            ts = [threading.Thread(target=one, args=(n,)) for n in ("p1", "p2", "p3")]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            # max_volumes_per_uid 3: data and q2 are there, one of the three fits
            assert sorted(code for _, code in errs) == [-32003, -32003], errs
            vols = holder_volumes()
            assert len(vols) == 3 and len({mp.split(",")[0] for mp, _, _ in vols.values()}) == 3, vols
            for n, _ in [(n, 0) for n in vols if n.startswith("p")]:
                c.call("volume.delete", {"name": n})
            assert names() == ["data", "q2"]

        def holder_survives_reconcile_kill9_lost_state():
            nonlocal c
            h = st["holder"]
            before = c.call("volume.list")
            wait_reconciled(env, runs_after=3, timeout=30)
            assert h in env.containers() and not env.containers()[h]["running"]
            assert f"container {h}: the volume holder" in env.daemon_log()
            c.close()
            kill9(env)
            launch(env)
            wait_reconciled(env, runs_after=2)
            c = env.client()
            assert c.call("volume.list") == before
            c.close()
            kill9(env)
            shutil.rmtree(os.path.join(env.dir, "state"))
            launch(env)
            wait_reconciled(env, runs_after=2)
            c = env.client()
            assert c.call("volume.list") == before
            assert holders() == [h] and not env.containers()[h]["running"]
            c.call("volume.create", {"name": "after", "size_gb": 1})
            assert holders() == [h]
            c.call("volume.delete", {"name": "after"})

        def crash_points():
            nonlocal c
            for point, method, name in (("volume-create-sent", "volume.create", "c1"),
                                        ("volume-delete-sent", "volume.delete", "q2"),
                                        ("volume-delete-detached", "volume.delete", "data")):
                c.close()
                kill9(env)
                launch(env, crash_at=point)
                c = env.client()
                prm = {"name": name, "size_gb": 1} if method == "volume.create" else {"name": name}
                try:
                    c.call(method, prm, timeout=60)
                except (ConnectionError, OSError, RpcError) as e:
                    assert getattr(e, "code", None) in (None, -32011), (point, e)
                assert wait_dead(env) != 0, point
                launch(env)
                c = env.client()
                listed = names()
                if point == "volume-delete-detached":
                    # the mount point and its line went in one write: the volume is
                    # unusedN on the holder until the next call destroys it
                    assert name not in listed, (point, listed)
                    (h,) = holders()
                    assert [k for k in conf(h) if k.startswith("unused")], conf(h)
                elif method == "volume.create":
                    # the write went out or not: the volume is whole or absent
                    assert listed in (["c1", "data", "q2"], ["data", "q2"]), (point, listed)
                assert set(holder_volumes(unused_ok=True)) == set(listed), point
                # the next call destroys what a delete left as unusedN
                out = calls_as_uid(env.socket, OTHER_UID, [["volume.create", {"name": "probe", "size_gb": 1}]])
                assert out == {"volume.create": "succeeded"}, (point, out)
                assert set(holder_volumes()) == set(listed) | {"probe"}, point
                c.call("volume.delete", {"name": "probe"})
            for n in names():
                c.call("volume.delete", {"name": n})
            assert names() == [] and holder_volumes() == {}
            # nothing of a volume is left on the storage: only the holder's root disk
            h = st["holder"]
            root = os.path.join(env.sim.state_dir, "storage")
            rootfs = conf(h)["rootfs"].split(",")[0].partition(":")[2].replace("/", "_")
            left = [n for _, ds, fs in os.walk(root) for n in ds + fs
                    if f"vm-{h}-disk-" in n and n != rootfs]
            assert left == [], (left, rootfs)

        def holder_gone():
            """An operator deleted the (empty) holder: the next call makes a new one."""
            (h,) = holders()
            env.sim.wait_task(env.sim.ok("DELETE", f"/nodes/pve/lxc/{h}"))
            assert holders() == []
            c.call("volume.create", {"name": "again", "size_gb": 1})
            (h2,) = holders()
            assert h2 != h and set(holder_volumes()) == {"again"}
            c.call("volume.delete", {"name": "again"})

        def stop_mid_call():
            """A stop while a create clones the holder (held up in Proxmox) and more calls
            wait: each call ends (answered during the stop's drain, -32011, or the
            connection's end) and the daemon exits cleanly; after a start one holder at most,
            found again, its volumes whole."""
            nonlocal c
            (h,) = holders()
            env.sim.wait_task(env.sim.ok("DELETE", f"/nodes/pve/lxc/{h}"))
            env.sim.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/*/clone",
                                                    "latency": 2, "count": 1})
            ids = [c.send("volume.create", {"name": f"s{i}", "size_gb": 1}) for i in range(3)]
            ids.append(c.send("volume.list", {}))
            time.sleep(0.5)  # the holder's clone is held up in Proxmox meanwhile
            assert env.stop_daemon() == 0
            for i in ids:
                try:
                    c.wait(i, timeout=30)
                except (ConnectionError, OSError):
                    pass
            c.close()
            launch(env)
            c = env.client()
            time.sleep(3)  # a clone Proxmox went on with ends meanwhile
            before = holders()
            assert len(before) <= 1, before
            created = c.call("volume.list")["volumes"]
            for v in created:  # a create whose write went out before the stop
                c.call("volume.delete", {"name": v["name"]})
            c.call("volume.create", {"name": "after-stop", "size_gb": 1})
            (h2,) = holders()
            assert not before or before == [h2]
            c.call("volume.delete", {"name": "after-stop"})

        def holder_full():
            """A description with no room for one more line: -32003, nothing changed."""
            if not holders():
                c.call("volume.create", {"name": "first", "size_gb": 1})
                c.call("volume.delete", {"name": "first"})
            (h,) = holders()
            desc = conf(h)["description"]
            note = "a human's note " * ((8170 - len(desc)) // 15)  # no room for a line
            env.sim.ok("PUT", f"/nodes/pve/lxc/{h}/config", {"description": desc + note + "\n"})
            e = expect_error(c, "volume.create", {"name": "nofit", "size_gb": 1}, -32003)
            assert "full" in str(e), e
            assert names() == [] and holder_volumes() == {}
            env.sim.ok("PUT", f"/nodes/pve/lxc/{h}/config", {"description": desc})
            c.call("volume.create", {"name": "fits", "size_gb": 1})
            assert set(holder_volumes()) == {"fits"}
            c.call("volume.delete", {"name": "fits"})

        def move_in_by_hand(name):
            """A new sandbox with volume `name` moved into it from the holder by hand (its line
            with it), as a crash between an attach's writes could leave it: (sandbox, vmid,
            key, path of the volume's folder)."""
            (h,) = holders()
            hconf = conf(h)
            key = [k for k in hconf if re.fullmatch(r"mp\d+", k)
                   and hconf[k] == holder_volumes()[name][0]][0]
            line = [ln for ln in hconf["description"].splitlines() if f" name={name} " in ln][0]
            sb = c.call("sandbox.create", {})
            vm = sb["vmid"]
            env.sim.wait_task(env.sim.ok("POST", f"/nodes/pve/lxc/{h}/move_volume",
                                         {"volume": key, "target-vmid": vm, "target-volume": key}))
            desc = conf(vm)["description"]
            env.sim.ok("PUT", f"/nodes/pve/lxc/{vm}/config",
                       {"description": desc.rstrip("\n") + "\n" + line + "\n"})
            env.sim.ok("PUT", f"/nodes/pve/lxc/{h}/config",
                       {"description": hconf["description"].replace(line + "\n", "")})
            store, _, disk = conf(vm)[key].split(",")[0].partition(":")
            return sb, vm, key, os.path.join(env.sim.state_dir, "storage", store, disk)

        def on_holder(name):
            """The folder of volume `name` on the holder, which has it back, unattached."""
            (h,) = holders()
            mp = holder_volumes()[name][0]
            assert [v for v in c.call("volume.list")["volumes"] if v["name"] == name] == \
                [{"name": name, "size_gb": 1, "owner_uid": 0, "attached_to": None}]
            store, _, disk = mp.split(",")[0].partition(":")
            return os.path.join(env.sim.state_dir, "storage", store, disk)

        def destroy_takes_volume_back():
            """A sandbox's destroy moves each volume it holds back to the holder (the holder's
            line first, then the move) before the container is deleted: the file stays."""
            c.call("volume.create", {"name": "back", "size_gb": 1})
            sb, vm, key, folder = move_in_by_hand("back")
            with open(os.path.join(folder, "proof"), "w") as f:
                f.write("came back\n")
            assert "back" not in names()  # its line is in the sandbox now
            assert c.call("sandbox.destroy", {"id": sb["id"]}) == {"id": sb["id"], "state": "destroyed"}
            assert vm not in env.containers()
            with open(os.path.join(on_holder("back"), "proof")) as f:
                assert f.read() == "came back\n"
            assert re.search(r"volume 'back' \(mp\d+\) goes back to the volume holder", env.daemon_log())
            c.call("volume.delete", {"name": "back"})

        def wait_gone(vm):
            deadline = time.time() + 60  # a run's delete ends after the run
            while vm in env.containers() and time.time() < deadline:
                wait_reconciled(env, runs_after=1)
            assert vm not in env.containers()

        def no_delete_with_volume():
            """When a volume cannot go back to the holder (its move refused), its container is
            never deleted: the caller's destroy fails naming it, the reconcile's delete of the
            unrecorded container after a lost state folder is refused alike; the volume's file
            stays. Once moves work again, the reconcile takes the volume back and deletes the
            container."""
            nonlocal c
            c.call("volume.create", {"name": "kept", "size_gb": 1})
            sb, vm, key, folder = move_in_by_hand("kept")
            with open(os.path.join(folder, "proof"), "w") as f:
                f.write("still here\n")
            env.sim.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/*/move_volume",
                                              "status": 403,
                                              "message": "Permission check failed (/vms/1, VM.Config.Disk)"})
            try:
                c.call("sandbox.destroy", {"id": sb["id"]})
                raise AssertionError("a container holding a volume was destroyed")
            except RpcError as e:
                assert e.code == -32002 and "cannot go back to the volume holder" in str(e.err), e.err
            assert vm in env.containers() and key in conf(vm)
            # failed, tried again by each reconcile run
            assert c.call("sandbox.get", {"id": sb["id"]})["state"] in ("failed", "destroying")
            # the reconcile's delete: the state folder lost, the container stopped and unrecorded
            c.close()
            kill9(env)
            shutil.rmtree(os.path.join(env.dir, "state"))
            assert not env.containers()[vm]["running"]  # stopped by the destroy
            launch(env)
            wait_reconciled(env, runs_after=2)
            c = env.client()
            assert vm in env.containers() and key in conf(vm)
            assert re.search(rf"container {vm} holds volume 'kept' \({key}\), which cannot go back "
                             r"to the volume holder \(.*\): not deleted", env.daemon_log()), \
                env.daemon_log()[-2000:]
            with open(os.path.join(folder, "proof")) as f:
                assert f.read() == "still here\n"
            env.sim.admin("DELETE", "/faults")
            wait_gone(vm)
            with open(os.path.join(on_holder("kept"), "proof")) as f:
                assert f.read() == "still here\n"
            c.call("volume.delete", {"name": "kept"})

        def destroy_crash_points():
            """kill -9 at each point of a destroy's take back: the restarted daemon's reconcile
            takes the volume back (or finds it back) and deletes the container; the file
            stays, the volume listed once, unattached."""
            nonlocal c
            for point in ("volume-take-back-line", "volume-take-back-moved", "destroy-volume-back"):
                c.call("volume.create", {"name": "cp", "size_gb": 1})
                sb, vm, key, folder = move_in_by_hand("cp")
                with open(os.path.join(folder, "proof"), "w") as f:
                    f.write(point + "\n")
                c.close()
                kill9(env)
                launch(env, crash_at=point)
                c = env.client()
                try:
                    c.call("sandbox.destroy", {"id": sb["id"]}, timeout=60)
                except (ConnectionError, OSError, RpcError) as e:
                    assert getattr(e, "code", None) in (None, -32011), (point, e)
                assert wait_dead(env) != 0, point
                launch(env)
                c = env.client()
                wait_gone(vm)
                assert names().count("cp") == 1, (point, names())
                with open(os.path.join(on_holder("cp"), "proof")) as f:
                    assert f.read() == point + "\n", point
                assert set(holder_volumes()) == set(names()), point
                c.call("volume.delete", {"name": "cp"})

        run([("create_list_delete", create_list_delete),
             ("create_volumes_refused", create_volumes_refused),
             ("attach_at_create", attach_at_create),
             ("attach_crash_points", attach_crash_points),
             ("attached_sandbox_ops", attached_sandbox_ops),
             ("destroy_mid_attach", destroy_mid_attach),
             ("attach_detach", attach_detach),
             ("attach_hotplug_fails", attach_hotplug_fails),
             ("attach_detach_crash_points", attach_detach_crash_points),
             ("sandboxctl", sandboxctl),
             ("python_client", python_client),
             ("quota_and_uids", quota_and_uids),
             ("parallel_creates", parallel_creates),
             ("holder_survives_reconcile_kill9_lost_state", holder_survives_reconcile_kill9_lost_state),
             ("crash_points", crash_points),
             ("holder_gone", holder_gone),
             ("stop_mid_call", stop_mid_call),
             ("holder_full", holder_full),
             ("destroy_takes_volume_back", destroy_takes_volume_back),
             ("no_delete_with_volume", no_delete_with_volume),
             ("destroy_crash_points", destroy_crash_points)])


if __name__ == "__main__":
    main()
