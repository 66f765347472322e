#!/usr/bin/env python3
"""Ownership by peer uid: another uid sees -32001 for every method on a sandbox it does not
own, never sees it in a list and gets -32008 for a list of every owner's sandboxes; root
(admin) sees and acts on every sandbox. Then every method the daemon offers (rpc.discover),
called by another uid with the ids and names of root's sandbox, process, snapshot, forward,
preview, volume and template: each is refused with its documented code and nothing of
root's changes; a method this test does not know fails it, so a new method comes with its
ownership check."""

import socket

from e2elib import Env, results_as_uid, run

def calls_on(env, uid, calls):
    """Each [method, params] as uid, in turn on one connection: [[method, code or
    "succeeded", result], ...]."""
    got = results_as_uid(env.socket, uid, calls, timeout=600)
    return [[m, "succeeded" if "result" in g else g["code"], g.get("result")]
            for (m, _), g in zip(calls, got)]


HOLDER = "sandboxd-volumes"  # the volume holder's hostname (docs/protocol.md)
# Methods that name no sandbox, volume or template of anyone.
NO_OBJECT = {"daemon.status", "rpc.discover"}
# Methods whose ownership another test checks with a uid of its own.
ELSEWHERE = {"daemon.subscribe": "test_observability: another uid's events never reach a subscriber"}


def foreign_calls(o, mine):
    """(method, params, the codes allowed) of another uid against root's objects o; mine: the
    caller's own sandbox (for the calls that name root's objects from it)."""
    a, proc, fw, pv = o["sandbox"], o["process"], o["forward"], o["preview"]
    nf = (-32001,)
    return [
        ("sandbox.get", {"id": a}, nf),
        ("sandbox.renew", {"id": a, "ttl_s": 60}, nf),
        ("sandbox.set_internet", {"id": a, "enabled": True}, nf),
        ("sandbox.resize", {"id": a, "cores": 2}, nf),
        ("sandbox.exec", {"id": a, "command": "touch /root/pwned"}, nf),
        ("file.write", {"id": a, "path": "/root/pwned", "content": "x"}, nf),
        ("file.read", {"id": a, "path": "/etc/passwd"}, nf),
        ("file.list", {"id": a, "path": "/root"}, nf),
        ("file.stat", {"id": a, "path": "/root"}, nf),
        ("file.remove", {"id": a, "path": "/root/keep", "recursive": True}, nf),
        ("file.mkdir", {"id": a, "path": "/root/pwned"}, nf),
        ("file.rename", {"id": a, "from": "/root/keep", "to": "/root/moved"}, nf),
        ("process.start", {"id": a, "command": "touch /root/pwned"}, nf),
        ("process.read", {"id": a, "process": proc}, nf),
        ("process.write", {"id": a, "process": proc, "data": "x"}, nf),
        ("process.wait", {"id": a, "process": proc, "timeout_ms": 10}, nf),
        ("process.kill", {"id": a, "process": proc}, nf),
        ("process.list", {"id": a}, nf),
        ("process.resize", {"id": a, "process": proc, "cols": 80, "rows": 24}, nf),
        ("sandbox.forward", {"id": a, "port": 22}, nf),
        ("sandbox.forwards", {"id": a}, nf),
        ("sandbox.unforward", {"id": a, "forward": fw}, nf),
        ("sandbox.preview", {"id": a, "port": 22}, nf),
        ("sandbox.previews", {"id": a}, nf),
        ("sandbox.unpreview", {"id": a, "preview": pv}, nf),
        ("sandbox.snapshot", {"id": a, "name": "theirs"}, nf),
        ("sandbox.snapshots", {"id": a}, nf),
        ("sandbox.rollback", {"id": a, "name": "s1"}, nf),
        ("sandbox.snapshot_delete", {"id": a, "name": "s1"}, nf),
        ("sandbox.fork", {"id": a, "count": 1}, nf),
        ("sandbox.pause", {"id": a}, nf),
        ("sandbox.resume", {"id": a}, nf),
        ("sandbox.attach", {"id": a, "volume": o["volume"], "path": "/mnt/v"}, nf),
        ("sandbox.detach", {"id": a, "volume": o["volume"]}, nf),
        ("template.create", {"id": a, "name": "stolen"}, nf),
        ("sandbox.destroy", {"id": a}, nf),
        # root's objects named from the caller's own sandbox, or by name
        ("process.kill", {"id": mine, "process": proc}, (-32602,)),
        ("sandbox.unforward", {"id": mine, "forward": fw}, (-32602,)),
        ("sandbox.unpreview", {"id": mine, "preview": pv}, (-32602,)),
        ("sandbox.attach", {"id": mine, "volume": o["volume"], "path": "/mnt/v"}, (-32602,)),
        ("sandbox.detach", {"id": mine, "volume": o["volume"]}, (-32602,)),
        ("sandbox.create", {"template": o["template"]}, (-32602,)),
        ("sandbox.create", {"volumes": [{"name": o["volume"], "path": "/mnt/v"}]}, (-32602,)),
        ("volume.create", {"name": o["volume"], "size_gb": 1}, (-32602,)),
        ("volume.delete", {"name": o["volume"]}, (-32602,)),
        ("template.delete", {"name": o["template"]}, (-32602,)),
        ("template.publish", {"name": o["template"]}, (-32008,)),
        ("sandbox.list", {"all": True}, (-32008,)),
        ("daemon.metrics", {}, (-32008,)),
        # lists: succeed, without root's objects
        ("sandbox.list", {}, ("succeeded",)),
        ("volume.list", {}, ("succeeded",)),
        ("template.list", {}, ("succeeded",)),
    ]


def root_objects(root):
    """A sandbox of root's with a process, a file, a snapshot, a forward and a preview; a
    volume; a template made from a second sandbox."""
    a = root.call("sandbox.create", {"ttl_s": 900})["id"]
    root.call("file.write", {"id": a, "path": "/root/keep", "content": "root's\n"})
    proc = root.call("process.start", {"id": a, "command": "sleep 600"})["process"]
    root.call("sandbox.snapshot", {"id": a, "name": "s1"})
    fw = root.call("sandbox.forward", {"id": a, "port": 22})["forward"]
    pv = root.call("sandbox.preview", {"id": a, "port": 22})["preview"]
    root.call("volume.create", {"name": "rootvol", "size_gb": 1})
    b = root.call("sandbox.create", {"ttl_s": 900})["id"]
    root.call("template.create", {"id": b, "name": "roottpl"})
    return {"sandbox": a, "process": proc, "forward": fw, "preview": pv, "volume": "rootvol",
            "template": "roottpl"}


def root_objects_intact(root, o):
    a = o["sandbox"]
    got = root.call("sandbox.get", {"id": a})
    assert got["state"] == "ready" and got["internet"] is False and got["cores"] == 1, got
    r = root.call("sandbox.exec", {"id": a, "command": "cat /root/keep; ls /root"})
    assert r["stdout"] == "root's\nkeep\n", r
    procs = root.call("process.list", {"id": a})["processes"]
    assert [p["state"] for p in procs if p["process"] == o["process"]] == ["running"], procs
    assert [s["name"] for s in root.call("sandbox.snapshots", {"id": a})["snapshots"]] == ["s1"]
    assert [f["forward"] for f in root.call("sandbox.forwards", {"id": a})["forwards"]] == [o["forward"]]
    assert [p["preview"] for p in root.call("sandbox.previews", {"id": a})["previews"]] == [o["preview"]]
    vols = root.call("volume.list")["volumes"]
    assert [(v["name"], v["owner_uid"], v["attached_to"]) for v in vols] == [("rootvol", 0, None)], vols
    tpl = [t for t in root.call("template.list")["templates"] if t["name"] == o["template"]]
    assert len(tpl) == 1 and tpl[0]["owner_uid"] == 0 and tpl[0]["published"] is False, tpl


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    conf = {"preview": {"listen": f"127.0.0.1:{free_port()}",
                        "base_url": "http://{port}-{id}.preview.test"}}
    with Env(daemon_config=conf) as env:
        root = env.client()
        st = {}

        def other_uid_sees_nothing():
            a = root.call("sandbox.create", {})
            st["a"] = a
            other = a["id"]
            out = calls_on(env, 65534, [
                ["sandbox.get", {"id": other}],
                ["sandbox.set_internet", {"id": other, "enabled": True}],
                ["sandbox.resize", {"id": other, "cores": 1}],
                ["sandbox.exec", {"id": other, "command": "true"}],
                ["file.write", {"id": other, "path": "/root/x", "content": "x"}],
                ["file.read", {"id": other, "path": "/etc/passwd"}],
                ["sandbox.destroy", {"id": other}],
                ["sandbox.list", {}],
                ["sandbox.list", {"all": True}],
                ["sandbox.create", {"labels": {"who": "nobody"}}]])
            for m, code, _ in out[:7]:
                assert code == -32001, (m, code, out)
            assert other not in [s["id"] for s in out[7][2]["sandboxes"]], out
            # Listing every owner's sandboxes is for admins only.
            assert out[8][1] == -32008, out
            mine = out[9][2]
            assert mine["owner_uid"] == 65534, out
            r = calls_on(env, 65534, [["sandbox.exec", {"id": mine["id"], "command": "echo mine"}]])
            assert r[0][2]["stdout"] == "mine\n", r
            st["b"] = mine
            # Nothing was changed on root's sandbox: still there, internet still off.
            got = root.call("sandbox.get", {"id": a["id"]})
            assert got["state"] == "ready" and got["internet"] is False, got
            r = root.call("sandbox.exec", {"id": a["id"], "command": "test -e /root/x; echo $?"})
            assert r["stdout"] == "1\n", r

        def admin_sees_all():
            b = st["b"]
            own = [s["id"] for s in root.call("sandbox.list")["sandboxes"]]
            assert own == [st["a"]["id"]], own
            every = {s["id"] for s in root.call("sandbox.list", {"all": True})["sandboxes"]}
            assert every == {st["a"]["id"], b["id"]}, every
            r = root.call("sandbox.exec", {"id": b["id"], "command": "echo admin"})
            assert r["stdout"] == "admin\n", r
            for sb in (st["a"], b):
                assert root.call("sandbox.destroy", {"id": sb["id"]})["state"] == "destroyed"
            env.wait_no_containers(5)

        def every_method_against_root_objects():
            o = root_objects(root)
            mine = calls_on(env, 65534, [["sandbox.create", {"ttl_s": 900}]])[0][2]["id"]
            calls = foreign_calls(o, mine)
            methods = {m["name"] for m in root.call("rpc.discover")["methods"]}
            unknown = methods - {c[0] for c in calls} - NO_OBJECT - set(ELSEWHERE)
            assert not unknown, f"methods without an ownership check here: {sorted(unknown)}"
            out = calls_on(env, 65534, [[m, p] for m, p, _ in calls])
            for (m, p, codes), (_, code, res) in zip(calls, out):
                assert code in codes, (m, p, code, res)
            lists = {m: res for m, code, res in out if code == "succeeded"}
            assert [s["id"] for s in lists["sandbox.list"]["sandboxes"]] == [mine], lists
            assert lists["volume.list"]["volumes"] == [], lists
            assert o["template"] not in [t["name"] for t in lists["template.list"]["templates"]]
            root_objects_intact(root, o)
            # the caller's own sandbox still answers it: the refusals cost it nothing
            r = calls_on(env, 65534, [["sandbox.exec", {"id": mine, "command": "echo ok"}],
                                      ["sandbox.destroy", {"id": mine}]])
            assert r[0][2]["stdout"] == "ok\n" and r[1][2]["state"] == "destroyed", r
            for sid in (o["sandbox"],):
                root.call("sandbox.destroy", {"id": sid})
            root.call("template.delete", {"name": o["template"]})
            root.call("volume.delete", {"name": o["volume"]})
            # what is left is the volume holder, which outlives its volumes
            left = [v for v in env.containers()
                    if env.sim.ok("GET", f"/nodes/pve/lxc/{v}/config").get("hostname") != HOLDER]
            assert not left, env.containers()

        run([("another uid gets -32001 for every method", other_uid_sees_nothing),
             ("root sees and destroys every sandbox", admin_sees_all),
             ("every method, another uid, root's objects", every_method_against_root_objects)])


if __name__ == "__main__":
    main()
