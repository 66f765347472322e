#!/usr/bin/env python3
"""Ownership by peer uid: another uid sees -32001 for every method on a sandbox it does not
own, never sees it in a list and gets -32008 for a list of every owner's sandboxes; root
(admin) sees and acts on every sandbox."""

import json
import os
import subprocess
import sys

from e2elib import Env, run

# The child runs as another uid: it needs an interpreter that uid can execute.
CHILD_PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from e2elib import Client
sock, other = sys.argv[2], sys.argv[3]
c = Client(sock, timeout=120)
out = {"codes": {}}
calls = {
    "sandbox.get": {"id": other},
    "sandbox.set_internet": {"id": other, "enabled": True},
    "sandbox.resize": {"id": other, "cores": 1},
    "sandbox.exec": {"id": other, "command": "true"},
    "file.write": {"id": other, "path": "/root/x", "content": "x"},
    "file.read": {"id": other, "path": "/etc/passwd"},
    "sandbox.destroy": {"id": other},
}
for m, p in calls.items():
    try:
        c.call(m, p)
        out["codes"][m] = "succeeded"
    except Exception as e:
        out["codes"][m] = getattr(e, "code", str(e))
out["list"] = [s["id"] for s in c.call("sandbox.list")["sandboxes"]]
try:
    c.call("sandbox.list", {"all": True})
    out["list_all"] = "succeeded"
except Exception as e:
    out["list_all"] = getattr(e, "code", str(e))
mine = c.call("sandbox.create", {"labels": {"who": "nobody"}})
out["mine"] = mine
out["mine_exec"] = c.call("sandbox.exec", {"id": mine["id"], "command": "echo mine"})["stdout"]
print(json.dumps(out))
"""


def as_uid(uid, env, other):
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    r = subprocess.run([CHILD_PY, "-c", CHILD, os.path.dirname(os.path.abspath(__file__)), env.socket, other],
                       capture_output=True, text=True, timeout=300, preexec_fn=drop)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    with Env() as env:
        root = env.client()
        st = {}

        def other_uid_sees_nothing():
            a = root.call("sandbox.create", {})
            st["a"] = a
            out = as_uid(65534, env, a["id"])
            for m, code in out["codes"].items():
                assert code == -32001, (m, code, out)
            assert a["id"] not in out["list"], out
            # Listing every owner's sandboxes is for admins only.
            assert out["list_all"] == -32008, out
            assert out["mine_exec"] == "mine\n" and out["mine"]["owner_uid"] == 65534, out
            st["b"] = out["mine"]
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

        run([("another uid gets -32001 for every method", other_uid_sees_nothing),
             ("root sees and destroys every sandbox", admin_sees_all)])


if __name__ == "__main__":
    main()
