#!/usr/bin/env python3
"""Proxmox VE versions against DHCP addressing (2-node simulated cluster): a node older than
8.1 (no GET .../interfaces) gets no DHCP sandbox, with a clear reason, while the other node
takes them; with static addressing it does; an API node older than 8.3 (GET .../interfaces
not forwarded to the container's node) refuses every DHCP create in a cluster."""

import time

from e2elib import Env, RpcError, run, static_network

COPIES = {"pve1": 9000, "pve2": 9001}


def daemon_config(static=False):
    def cfg(info):
        keys = sorted({info["templates"][str(v)]["host_key"] for v in COPIES.values()})
        d = {"proxmox": {"nodes": ",".join(COPIES),
                         "template": ",".join(f"{v}@{n}" for n, v in COPIES.items())},
             "ssh": {"template_host_key": ",".join(keys)},
             "sandbox": {"create_timeout_s": "20"}}
        if static:
            d["network"] = static_network(info, first=100, count=10)
        return d
    return cfg


def sim_config(versions):
    return {"node_count": 2, "node_versions": versions}


def wait_log(env, text, timeout=10):
    """Waits for the daemon to have read the versions (it reads them at start)."""
    deadline = time.time() + timeout
    while time.time() < deadline and text not in env.daemon_log():
        time.sleep(0.1)


def refused(c, params, text):
    try:
        sb = c.call("sandbox.create", params)
    except RpcError as e:
        assert text in e.data.get("reason", ""), e.err
        return
    raise AssertionError(f"created {sb}")


def old_node():
    with Env(sim_config=sim_config({"pve2": {"pve_manager": "8.0.4", "pve_container": "5.0.4"}}),
             daemon_config=daemon_config()) as env:
        c = env.client()
        wait_log(env, "node pve2 runs Proxmox VE 8.0.4")
        refused(c, {"node": "pve2"}, "node pve2 runs Proxmox VE 8.0.4, which has no GET")
        sbs = [c.call("sandbox.create", {"ttl_s": 600}) for _ in range(3)]
        assert all(sb["node"] == "pve1" and sb["state"] == "ready" for sb in sbs), sbs
        for sb in sbs:
            c.call("sandbox.destroy", {"id": sb["id"]})
        env.wait_no_containers(30)


def old_node_static():
    with Env(sim_config=sim_config({"pve2": {"pve_manager": "8.0.4", "pve_container": "5.0.4"}}),
             daemon_config=daemon_config(static=True)) as env:
        c = env.client()
        wait_log(env, "node pve2 runs Proxmox VE 8.0.4")
        sb = c.call("sandbox.create", {"node": "pve2", "ttl_s": 600})
        assert sb["node"] == "pve2" and sb["state"] == "ready", sb
        c.call("sandbox.destroy", {"id": sb["id"]})
        env.wait_no_containers(30)


def old_api_node():
    v = {"pve_manager": "8.2.4", "pve_container": "5.1.12"}
    with Env(sim_config=sim_config({"pve1": v, "pve2": v}), daemon_config=daemon_config()) as env:
        c = env.client()
        wait_log(env, "the Proxmox API answers with Proxmox VE 8.2.4")
        for params in ({"node": "pve2"}, {}):
            refused(c, params, "does not forward GET /nodes/{node}/lxc/{vmid}/interfaces")
        assert not env.containers()


if __name__ == "__main__":
    run([("a node older than 8.1 gets no DHCP sandbox", old_node),
         ("with static addressing it does", old_node_static),
         ("an API node older than 8.3 refuses DHCP creates in a cluster", old_api_node)])
