#!/usr/bin/env python3
"""sandboxd against a busy Proxmox node (2-node simulated cluster with pvedaemon's 3 workers
per node and pveproxy's proxy timeout set short): a clone that outlasts the proxy timeout
(596 while it still runs) yields a sandbox, with nothing leaked and its node not taken out
of placement; a burst of creates never has more than [proxmox] max_calls_per_node calls in
flight at a node; a refused token (pveproxy holds every 401 back 3 s) reads in daemon.status
as an authentication failure, not as a timeout."""

import os
import secrets
import time

from e2elib import Env, create_parallel, run

NODES = ["pve1", "pve2"]
COPIES = {"pve1": 9000, "pve2": 9001}
CAP = 2


def daemon_config(info):
    keys = sorted({info["templates"][str(v)]["host_key"] for v in COPIES.values()})
    return {"proxmox": {"nodes": ",".join(NODES),
                        "template": ",".join(f"{v}@{n}" for n, v in COPIES.items()),
                        "max_calls_per_node": str(CAP)},
            "ssh": {"template_host_key": ",".join(keys)},
            "sandbox": {"reconcile_interval_s": "2", "orphan_grace_s": "2"}}


def bad_token():
    path = f"/run/sandboxd-e2e-badtoken-{secrets.token_hex(3)}"
    with open(path, "w") as f:
        f.write("00000000-0000-0000-0000-000000000000\n")
    os.chmod(path, 0o600)
    try:
        with Env(sim_config={"auth_failure_delay": 3.0},
                 daemon_config={"proxmox": {"token_secret_file": path}}) as env:
            c = env.client()
            deadline = time.time() + 30
            while True:
                st = c.call("daemon.status")["proxmox"]
                if st["reachable"] is False or time.time() > deadline:
                    break
                time.sleep(0.2)
            assert st["reachable"] is False, st
            assert "401" in st["last_error"] and "authentication failed" in st["last_error"], st
    finally:
        os.unlink(path)


def main():
    with Env(sim_config={"node_count": 2, "proxy_timeout": 1.0},
             daemon_config=daemon_config) as env:
        c = env.client()
        sim = env.sim

        def slow_clone():
            # the clone POST takes 2.5 s in pvedaemon: pveproxy answers 596 after 1 s
            f = sim.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/*/clone",
                                              "latency": 2.5, "count": 1})
            try:
                sb = c.call("sandbox.create", {"ttl_s": 600})
            finally:
                sim.raw("DELETE", f"/admin/faults/{f['id']}")
            assert sb["state"] == "ready", sb
            time.sleep(3)  # anything the clone made late has appeared by now
            cts = env.containers()
            assert set(cts) == {sb["vmid"]}, (cts, sb)
            w = sim.admin("GET", "/workers")
            assert sum(v["timeouts"] for v in w.values()) == 1, w
            out = c.call("sandbox.exec", {"id": sb["id"], "command": "true"})
            assert out["exit_code"] == 0, out
            log = env.daemon_log()
            assert "event=node.down" not in log, log[-3000:]
            c.call("sandbox.destroy", {"id": sb["id"]})
            env.wait_no_containers(30)

        def burst():
            # every config call takes 0.3 s: without the cap the creates pile up at a node.
            # pveproxy's own timeout is back at 30 s here: this case is about the cap, and on a
            # loaded machine a call of a create may take past the short one (a POST that gets
            # its 596 is not repeated, so the create would fail)
            sim.admin("POST", "/settings", {"proxy_timeout": 30.0})
            f = sim.admin("POST", "/faults", {"path": "/nodes/*/lxc/*/config", "latency": 0.3})
            try:
                sim.admin("POST", "/workers")  # reset the peaks
                made, errors = create_parallel(env.client, 10, 10, {"ttl_s": 600})
            finally:
                sim.raw("DELETE", f"/admin/faults/{f['id']}")
            assert not errors, errors
            w = sim.admin("GET", "/workers")
            assert all(w[n]["inflight_peak"] <= CAP for n in w), w
            assert max(w[n]["inflight_peak"] for n in w) == CAP, w
            for sb in made:
                c.call("sandbox.destroy", {"id": sb["id"]})
            env.wait_no_containers(60)

        run([("a clone past the proxy timeout (596) still yields a sandbox", slow_clone),
             ("a burst of creates stays within max_calls_per_node", burst),
             ("a refused token reads as an authentication failure", bad_token)])


if __name__ == "__main__":
    main()
