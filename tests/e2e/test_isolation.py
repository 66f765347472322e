#!/usr/bin/env python3
"""Isolation prerequisites: Proxmox filters nothing of a NIC without firewall=1 (pve-firewall
skips it), nothing at all with the datacenter firewall off, and an unprivileged container is
what the isolation assumes. The daemon reads every template's configuration at start and at
reload (daemon.status "checks"), refuses creates from a template that fails (naming the
template and the key), checks each clone's configuration before its start, and refuses
creates while the datacenter firewall is off."""

import re
import signal
import time

from e2elib import Env, RpcError, run

NOFW, PRIV = 9001, 9002
SIM = {
    "templates": [
        {"vmid": 9000, "node": "pve", "storage": "local-lvm", "hostname": "sandbox-template"},
        {"vmid": NOFW, "node": "pve", "storage": "local-lvm", "hostname": "nofw", "net_firewall": 0},
        {"vmid": PRIV, "node": "pve", "storage": "local-lvm", "hostname": "priv", "unprivileged": 0},
    ],
    "tokens": [
        {"id": "root@pam!admin", "secret": None, "acl": {"/": "Administrator"}},
        {"id": "sandboxd@pve!sandboxd", "secret": None,
         "acl": {"/pool/sandboxd": ["PVEVMAdmin", "Pool.Audit"], "/vms/9000": "PVETemplateUser",
                 f"/vms/{NOFW}": "PVETemplateUser", f"/vms/{PRIV}": "PVETemplateUser",
                 "/": ["Sys.Audit"]}},
    ],
}


def daemon_config(info):
    keys = {str(v): info["templates"][str(v)]["host_key"] for v in (NOFW, PRIV)}
    return {"templates": {"nofw": str(NOFW), "nofw.host_key": keys[str(NOFW)],
                          "priv": str(PRIV), "priv.host_key": keys[str(PRIV)]}}


def msg(e):
    return f"{e.err.get('message')} {e.data}"


def refused(c, params):
    try:
        r = c.call("sandbox.create", params)
    except RpcError as e:
        return e
    c.call("sandbox.destroy", {"id": r["id"]})
    raise AssertionError(f"sandbox.create {params} was accepted: {r}")


def main():
    with Env(sim_config=SIM, daemon_config=daemon_config) as env:
        c = env.client()

        def checks(pred, timeout=15):
            deadline = time.time() + timeout
            while True:
                st = c.call("daemon.status").get("checks")
                if st and pred(st):
                    return st
                if time.time() > deadline:
                    raise AssertionError(f"daemon.status checks: {st}")
                time.sleep(0.1)

        def templates_at_start():
            st = checks(lambda s: all(t["ok"] is not None for t in s["templates"].values()))
            t = st["templates"]
            assert st["datacenter_firewall"] is True, st
            assert t["default"] == {"ok": True, "error": None}, t
            assert t["nofw"]["ok"] is False and "firewall=1" in t["nofw"]["error"], t
            assert "'nofw'" in t["nofw"]["error"] and str(NOFW) in t["nofw"]["error"], t
            assert t["priv"]["ok"] is False and "unprivileged" in t["priv"]["error"], t
            assert "template 'nofw'" in env.daemon_log(), "not logged"

        def refused_templates():
            for name, key in (("nofw", "firewall=1"), ("priv", "unprivileged")):
                e = refused(c, {"template": name})
                assert e.code == -32007 and key in msg(e) and f"'{name}'" in msg(e), e.err
            assert not env.containers(), env.containers()  # nothing was cloned
            sb = c.call("sandbox.create", {})  # the good template still works
            c.call("sandbox.destroy", {"id": sb["id"]})

        def clone_checked_and_reload():
            # the template loses firewall=1 after the check: the clone's own check refuses it
            # before its start, and a reload refuses the template itself
            conf = env.sim.ok("GET", "/nodes/pve/lxc/9000/config")
            good = conf["net0"]
            env.sim.ok("PUT", "/nodes/pve/lxc/9000/config", {"net0": re.sub(r",?firewall=1", "", good)})
            try:
                e = refused(c, {})
                assert e.code == -32007 and "firewall=1" in msg(e), e.err
                assert "template 'default'" in msg(e) or "(template 'default')" in msg(e), e.err
                env.wait_no_containers()
                env.proc.send_signal(signal.SIGHUP)
                checks(lambda s: s["templates"]["default"]["ok"] is False)
                e = refused(c, {})
                assert e.code == -32007 and "template 'default'" in msg(e), e.err
            finally:
                env.sim.ok("PUT", "/nodes/pve/lxc/9000/config", {"net0": good})
            env.proc.send_signal(signal.SIGHUP)
            checks(lambda s: s["templates"]["default"]["ok"] is True)
            sb = c.call("sandbox.create", {})
            c.call("sandbox.destroy", {"id": sb["id"]})

        def datacenter_firewall_off():
            env.sim.ok("PUT", "/cluster/firewall/options", {"enable": 0})
            try:
                # the create reads it before the start, whatever the daemon read last
                e = refused(c, {})
                assert e.code == -32007 and "datacenter firewall is disabled" in msg(e), e.err
                env.wait_no_containers()
                env.proc.send_signal(signal.SIGHUP)  # read again at reload
                checks(lambda s: s["datacenter_firewall"] is False)
                e = refused(c, {"internet": True})
                assert e.code == -32007 and "datacenter firewall" in msg(e), e.err
                env.wait_no_containers()
            finally:
                env.sim.ok("PUT", "/cluster/firewall/options", {"enable": 1})
            # on again: the next create works at once (it reads the switch itself)
            sb = c.call("sandbox.create", {})
            c.call("sandbox.destroy", {"id": sb["id"]})
            env.proc.send_signal(signal.SIGHUP)
            checks(lambda s: s["datacenter_firewall"] is True)

        run([("templates checked at start (daemon.status, log)", templates_at_start),
             ("creates from a refused template are refused", refused_templates),
             ("each clone checked before its start; templates again at reload", clone_checked_and_reload),
             ("datacenter firewall off: creates refused", datacenter_firewall_off)])


if __name__ == "__main__":
    main()
