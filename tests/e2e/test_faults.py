#!/usr/bin/env python3
"""A Proxmox fault on each step of create leaves no container and no record behind and
returns -32004 (-32006 for an IP that never appears); a destroy while the create runs
fails that create with -32002 and leaves nothing behind; a wrong pinned host key is
refused with -32005 (and a datacenter firewall that is off is reported at startup); an
unreachable Proxmox fails a create (-32004 or -32006) within 30 s and daemon.status
reports it unreachable."""

import os
import time

from e2elib import Env, run

FAULTS = [
    ("clone task fails", {"method": "POST", "path": "/nodes/*/lxc/*/clone", "task_error": "storage full"}, {}),
    ("clone refused", {"method": "POST", "path": "/nodes/*/lxc/*/clone", "status": 403,
                       "message": "Permission check failed (/vms/9000, VM.Clone)"}, {}),
    ("config refused", {"method": "PUT", "path": "/nodes/*/lxc/*/config", "status": 400,
                        "message": "Parameter verification failed."}, {}),
    ("config read fails", {"method": "GET", "path": "/nodes/*/lxc/*/config", "status": 403,
                           "message": "Permission check failed"}, {}),
    ("resize task fails", {"method": "PUT", "path": "/nodes/*/lxc/*/resize", "task_error": "no space"},
     {"disk_gb": 12}),
    ("firewall options refused", {"method": "PUT", "path": "/nodes/*/lxc/*/firewall/options", "status": 403,
                                  "message": "Permission check failed"}, {}),
    ("internet rule refused", {"method": "POST", "path": "/nodes/*/lxc/*/firewall/rules", "status": 403,
                               "message": "Permission check failed"}, {"internet": True}),
    ("start task fails", {"method": "POST", "path": "/nodes/*/lxc/*/status/start",
                          "task_error": "startup for container failed"}, {}),
    ("interfaces refused", {"method": "GET", "path": "/nodes/*/lxc/*/interfaces", "status": 403,
                            "message": "Permission check failed"}, {}),
]


def check_clean(env, c):
    env.wait_no_containers(10)
    deadline = time.time() + 5  # the record's removal is durable a moment after the reply
    while os.listdir(os.path.join(env.dir, "state", "sandboxes")) and time.time() < deadline:
        time.sleep(0.05)
    assert os.listdir(os.path.join(env.dir, "state", "sandboxes")) == []
    st = c.call("daemon.status")
    assert st["sandboxes"]["total"] == 0, st
    assert c.call("sandbox.list")["sandboxes"] == []


def main():
    with Env(daemon_config={"sandbox": {"create_timeout_s": "10"}}) as env:
        c = env.client()
        tests = []

        def fault_case(fault, params):
            def t():
                env.sim.admin("DELETE", "/faults")
                f = dict(fault)
                f["count"] = 1
                env.sim.admin("POST", "/faults", f)
                e = c.error("sandbox.create", params)
                assert e.code == -32004, e.err
                assert "http_status" in e.data and e.data.get("message"), e.err
                if "task_error" in fault:
                    assert e.data["http_status"] == 0 and e.data.get("upid", "").startswith("UPID:"), e.err
                    assert fault["task_error"] in e.data["message"], e.err
                else:
                    assert e.data["http_status"] == fault["status"], e.err
                check_clean(env, c)
            return t

        for name, fault, params in FAULTS:
            tests.append((f"fault: {name}", fault_case(fault, params)))

        def ip_never():
            env.sim.admin("DELETE", "/faults")
            env.sim.admin("PUT", "/settings", {"ip_never": True})
            t0 = time.time()
            e = c.error("sandbox.create", {})
            env.sim.admin("PUT", "/settings", {"ip_never": False})
            assert e.code == -32006, e.err
            assert time.time() - t0 < 30, time.time() - t0
            check_clean(env, c)

        def still_works():
            r = c.call("sandbox.create", {})
            assert c.call("sandbox.exec", {"id": r["id"], "command": "echo ok"})["stdout"] == "ok\n"
            c.call("sandbox.destroy", {"id": r["id"]})
            check_clean(env, c)

        def destroy_while_creating():
            env.sim.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/*/status/start",
                                               "latency": 1.0, "count": 1})
            i = c.send("sandbox.create", {})
            deadline = time.time() + 20
            while True:
                lst = c.call("sandbox.list")["sandboxes"]
                if lst and lst[0]["state"] == "creating" and lst[0]["vmid"]:
                    break
                assert time.time() < deadline, lst
                time.sleep(0.05)
            e = c.error("sandbox.exec", {"id": lst[0]["id"], "command": "true"})
            assert e.code == -32002 and e.data.get("state") == "creating", e.err
            d = c.call("sandbox.destroy", {"id": lst[0]["id"]})
            assert d == {"id": lst[0]["id"], "state": "destroyed"}, d
            e = None
            try:
                c.wait(i)
            except Exception as ex:  # noqa: BLE001
                e = ex
            assert e is not None and e.code == -32002, e
            check_clean(env, c)

        tests += [("fault: IP never appears (-32006)", ip_never), ("destroy while creating", destroy_while_creating), ("a create after the faults works", still_works)]

        # Wrong pinned host key: a second daemon on the same simulator.
        def wrong_host_key():
            bad = "SHA256:" + "A" * 43
            env.stop_daemon()
            env.host_key = bad
            # Also: the startup check of the datacenter firewall says loudly when it is off.
            env.sim.ok("PUT", "/cluster/firewall/options", {"enable": 0})
            env.start_daemon()
            deadline = time.time() + 10
            while "datacenter firewall is DISABLED" not in env.daemon_log():
                assert time.time() < deadline, env.daemon_log()[-2000:]
                time.sleep(0.1)
            env.sim.ok("PUT", "/cluster/firewall/options", {"enable": 1})
            c2 = env.client()
            st = c2.call("daemon.status")
            assert st["proxmox"]["reachable"] is True and st["proxmox"]["last_error"] is None, st
            e = c2.error("sandbox.create", {})
            assert e.code == -32005, e.err
            check_clean(env, c2)

        tests.append(("wrong pinned host key is refused (-32005)", wrong_host_key))

        def proxmox_down():
            env.sim.stop()
            c3 = env.client()
            t0 = time.time()
            e = c3.error("sandbox.create", {})
            assert e.code in (-32004, -32006), e.err
            assert time.time() - t0 < 30, time.time() - t0
            deadline = time.time() + 30
            while True:
                st = c3.call("daemon.status")
                if st["proxmox"]["reachable"] is False:
                    break
                assert time.time() < deadline, st
                time.sleep(0.5)
            assert st["proxmox"]["last_error"], st
            assert st["sandboxes"]["total"] == 0, st

        tests.append(("Proxmox down: create fails, status says unreachable", proxmox_down))
        run(tests)


if __name__ == "__main__":
    main()
