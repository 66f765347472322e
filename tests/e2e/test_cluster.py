#!/usr/bin/env python3
"""Placement across the nodes of a 3-node simulated cluster, each node with its own copy of
the template: 30 creates spread over all nodes (none over max_per_node, the counts within one
of each other), each clone made from the copy on its own node; sandbox.create {node} for an
admin, refused for an unknown node or a node without the template."""

import threading

from e2elib import Env, RpcError, run

NODES = ["pve1", "pve2", "pve3"]
COPIES = {"pve1": 9000, "pve2": 9001, "pve3": 9002}


def sim_config():
    templates = [{"vmid": v, "node": n, "storage": "local-lvm", "hostname": "sandbox-template",
                  "memory": 512, "cores": 1, "disk": "8G"} for n, v in COPIES.items()]
    acl = {"/pool/sandboxd": ["PVEVMAdmin", "Pool.Audit"], "/": ["Sys.Audit"]}
    for v in COPIES.values():
        acl[f"/vms/{v}"] = "PVETemplateUser"
    return {"nodes": NODES, "templates": templates,
            "tokens": [{"id": "root@pam!admin", "secret": None, "acl": {"/": "Administrator"}},
                       {"id": "sandboxd@pve!sandboxd", "secret": None, "acl": acl}]}


def daemon_config(info):
    keys = sorted({info["templates"][str(v)]["host_key"] for v in COPIES.values()})
    return {"proxmox": {"nodes": ",".join(NODES),
                        "template": ",".join(f"{v}@{n}" for n, v in COPIES.items()),
                        "max_per_node": "11"},
            "ssh": {"template_host_key": ",".join(keys)},
            "sandbox": {"max_per_uid": "40", "max_total": "64"}}


def create_many(c_factory, n, parallel=6):
    """n creates, parallel at a time; returns the sandboxes."""
    out, errors = [], []
    lock = threading.Lock()

    def worker(k):
        c = c_factory()
        try:
            for _ in range(k):
                sb = c.call("sandbox.create", {"ttl_s": 900})
                with lock:
                    out.append(sb)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            c.close()

    per = [n // parallel + (1 if i < n % parallel else 0) for i in range(parallel)]
    ts = [threading.Thread(target=worker, args=(k,)) for k in per]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    return out


def clone_source(env, node, vmid):
    """The template a container was cloned from, as the simulator recorded it."""
    conf = env.sim.ok("GET", f"/nodes/{node}/lxc/{vmid}/config")
    return conf


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
            for bad in ("pve9", "-x"):
                try:
                    c.call("sandbox.create", {"node": bad})
                    raise AssertionError(f"node {bad} accepted")
                except RpcError as e:
                    assert e.code == -32602, e.err
                    assert e.data.get("param") == "node", e.err
            c.call("sandbox.destroy", {"id": sb["id"]})
            env.wait_no_containers(30)

        run_all = [("spread over 3 nodes", spread), ("sandbox.create {node}", node_param)]
        run(run_all)


if __name__ == "__main__":
    main()
