#!/usr/bin/env python3
"""pve-sim as a cluster of three nodes (--node-count 3): a template copy per node, clones of
the copies side by side, cross-node clone errors, per-node capacity and load in
/cluster/resources, and a node taken down and brought back."""

import os
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import simlib  # noqa: E402

S = None
GIB = 1 << 30
BASE_MEM = 512 << 20
OFFLINE_ABSENT = ("mem", "cpu", "maxmem", "uptime", "disk")


def setUpModule():
    global S
    S = simlib.Sim({"node_down_delay": 0.2, "node_capacity": {"pve3": {"maxmem": 4 * GIB, "maxcpu": 4}}},
                   args=["--node-count", "3"]).start()


def tearDownModule():
    if S:
        S.destroy()


def nodes():
    return {e["node"]: e for e in S.ok("GET", "/cluster/resources", {"type": "node"})}


def guests():
    return {e["vmid"]: e for e in S.ok("GET", "/cluster/resources", {"type": "vm"})}


def task_status(upid):
    return S.ok("GET", f"/nodes/{upid.split(':')[1]}/tasks/{upid}/status")["status"]


def settings(**kw):
    r = S.raw("PUT", "/admin/settings", simlib.json.dumps(kw), {"Content-Type": "application/json"})
    assert r.status == 200, r


def wait_for(pred, what, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class TCluster(unittest.TestCase):
    def test_1_layout(self):
        self.assertIn(" node=pve1 template=9000 ", S.ready_line)
        self.assertEqual(S.info["nodes"], ["pve1", "pve2", "pve3"])
        n = nodes()
        self.assertEqual(sorted(n), ["pve1", "pve2", "pve3"])
        for name, e in n.items():
            self.assertEqual(e["status"], "online")
            self.assertEqual(e["mem"], BASE_MEM)
        self.assertEqual((n["pve1"]["maxmem"], n["pve1"]["maxcpu"]), (8 * GIB, 2))
        self.assertEqual((n["pve3"]["maxmem"], n["pve3"]["maxcpu"]), (4 * GIB, 4))
        self.assertEqual([e["node"] for e in S.ok("GET", "/nodes")], ["pve1", "pve2", "pve3"])
        g = guests()
        keys = {S.info["templates"][str(v)]["host_key"] for v in (9000, 9001, 9002)}
        self.assertEqual(len(keys), 1)    # one host key: the copies are copies
        for i, node in enumerate(("pve1", "pve2", "pve3")):
            vmid = 9000 + i
            self.assertEqual((g[vmid]["node"], g[vmid]["template"]), (node, 1))
            self.assertEqual(S.info["templates"][str(vmid)]["node"], node)
            # the sandboxd token may use every copy, each on its node's local storage
            conf = S.ok("GET", f"/nodes/{node}/lxc/{vmid}/config", token=simlib.DAEMON)
            self.assertTrue(conf["rootfs"].startswith(f"local-lvm:base-{vmid}-disk-0,"), conf)
            self.assertEqual(conf["hostname"], "sandbox-template")
        # a node answers its own probes: status with its capacity and load, version, index
        ns = S.ok("GET", "/nodes/pve3/status", token=simlib.DAEMON)
        self.assertEqual((ns["memory"]["total"], ns["memory"]["used"], ns["cpuinfo"]["cpus"]),
                         (4 * GIB, BASE_MEM, 4))
        self.assertEqual(S.ok("GET", "/nodes/pve2/version"), S.ok("GET", "/version"))
        self.assertIn({"name": "lxc"}, S.ok("GET", "/nodes/pve1"))
        st = S.admin("GET", "/state")["nodes"]
        self.assertEqual(st["pve2"]["online"], True)
        self.assertEqual(st["pve2"]["containers"], [9001])

    def test_2_clones_of_the_copies_run_side_by_side(self):
        settings(clone_time=1.5)
        try:
            ua = S.ok("POST", "/nodes/pve1/lxc/9000/clone", {"newid": 101, "pool": "sandboxd"}, token=simlib.DAEMON)
            ub = S.ok("POST", "/nodes/pve2/lxc/9001/clone", {"newid": 102, "pool": "sandboxd"}, token=simlib.DAEMON)
            # the lock is per template: a second clone of 9000 waits its turn...
            r = S.api("POST", "/nodes/pve1/lxc/9000/clone", {"newid": 104, "pool": "sandboxd"}, token=simlib.DAEMON)
            self.assertEqual((r.status, r.reason), (500, "CT is locked (disk)"))
            # ...while both clones run at once: B is running, and A, started before B, still is
            sb = task_status(ub)
            sa = task_status(ua)
            self.assertEqual((sb, sa), ("running", "running"))
            self.assertEqual(S.ok("GET", "/nodes/pve1/lxc/9000/config")["lock"], "disk")
            self.assertEqual(S.ok("GET", "/nodes/pve2/lxc/9001/config")["lock"], "disk")
            self.assertNotIn("lock", S.ok("GET", "/nodes/pve3/lxc/9002/config"))
            for u in (ua, ub):
                self.assertEqual(S.wait_task(u)["exitstatus"], "OK")
        finally:
            settings(clone_time=0.3)
        g = guests()
        self.assertEqual((g[101]["node"], g[102]["node"]), ("pve1", "pve2"))
        self.assertNotIn("lock", S.ok("GET", "/nodes/pve1/lxc/9000/config"))

    def test_3_cross_node_clone_errors(self):
        r = S.api("POST", "/nodes/pve2/lxc/9000/clone", {"newid": 110, "pool": "sandboxd"}, token=simlib.DAEMON)
        self.assertEqual((r.status, r.reason), (500, "Configuration file 'nodes/pve2/lxc/9000.conf' does not exist"))
        for full in (0, 1):
            r = S.api("POST", "/nodes/pve1/lxc/9000/clone", {"newid": 110, "target": "pve2", "full": full,
                                                               "pool": "sandboxd"}, token=simlib.DAEMON)
            self.assertEqual((r.status, r.reason), (500, "can't clone CT to node 'pve2' (CT uses local storage)"))
        self.assertEqual(S.ok("GET", "/cluster/nextid", {"vmid": 110}), "110")   # nothing reserved
        self.assertNotIn("lock", S.ok("GET", "/nodes/pve1/lxc/9000/config"))
        self.assertNotIn(110, guests())

    def test_4_node_load_follows_running_containers(self):
        self.assertEqual(nodes()["pve2"]["mem"], BASE_MEM)
        S.start_ct(102, node="pve2")
        mem102 = S.ok("GET", "/nodes/pve2/lxc/102/config")["memory"] << 20
        n = nodes()
        self.assertEqual(n["pve2"]["mem"], BASE_MEM + mem102)
        self.assertEqual((n["pve1"]["mem"], n["pve3"]["mem"]), (BASE_MEM, BASE_MEM))
        self.assertGreater(n["pve2"]["cpu"], n["pve1"]["cpu"])
        self.assertEqual(S.admin("GET", "/state")["nodes"]["pve2"]["running"], [102])
        # with resources_lag the node's load comes from the last snapshot, as from pvestatd's RRD
        settings(resources_lag=600)
        try:
            nodes()
            S.start_ct(101, node="pve1", wait_ip=False)
            self.assertEqual(nodes()["pve1"]["mem"], BASE_MEM)
            self.assertEqual(guests()[101]["status"], "stopped")
        finally:
            settings(resources_lag=0)
        self.assertEqual(nodes()["pve1"]["mem"], BASE_MEM + (512 << 20))

    def test_5_node_down_and_up(self):
        ip = S.wait_ip(102, node="pve2")
        r = S.ssh(ip, "echo kept > /root/kept; sleep 1000 >/dev/null 2>&1 & echo $!")
        self.assertEqual(r.returncode, 0, r.stderr)
        sleeper = r.stdout.strip()
        pid = S.admin("GET", "/state")["containers"]["102"]["pid"]
        settings(clone_time=1.0)
        upid = S.ok("POST", "/nodes/pve2/lxc/9001/clone", {"newid": 103})
        settings(clone_time=0.3)

        self.assertEqual(S.node_down("pve2"), {"node": "pve2", "online": False})
        for method, path in (("GET", "/nodes/pve2/lxc"), ("GET", "/nodes/pve2/lxc/102/status/current"),
                             ("GET", f"/nodes/pve2/tasks/{upid}/status"), ("POST", "/nodes/pve2/lxc/102/status/stop"),
                             ("GET", "/nodes/pve2"), ("GET", "/nodes/pve2/status"),
                             ("GET", "/nodes/pve2/version")):
            r = S.api(method, path)
            self.assertEqual((r.status, r.reason, r.body), (595, "No route to host", b""), path)
        self.assertEqual(S.api("GET", "/nodes/pve1/lxc").status, 200)    # the other nodes answer
        n = nodes()
        self.assertEqual(n["pve2"]["status"], "offline")
        for k in OFFLINE_ABSENT:
            self.assertNotIn(k, n["pve2"])
        self.assertEqual(n["pve1"]["status"], "online")
        self.assertEqual({e["node"]: e["status"] for e in S.ok("GET", "/nodes")}["pve2"], "offline")
        g = guests()
        self.assertEqual({k: g[102][k] for k in ("vmid", "node", "name", "pool", "status")},
                         {"vmid": 102, "node": "pve2", "name": "sandbox-template", "pool": "sandboxd",
                          "status": "unknown"})
        self.assertEqual(g[9001]["status"], "unknown")
        self.assertEqual(g[101]["status"], "running")
        self.assertFalse(S.admin("GET", "/state")["nodes"]["pve2"]["online"])
        # the node's containers are cut off: packets dropped, so a connect times out
        s = socket.socket()
        s.settimeout(2)
        with self.assertRaises(socket.timeout):
            s.connect((ip, 22))
        s.close()
        # its running task carries on while it is down
        wait_for(lambda: S.admin("GET", "/state")["containers"]["103"]["lock"] is None, "the clone on pve2")

        self.assertEqual(S.node_up("pve2"), {"node": "pve2", "online": True})
        self.assertEqual(S.wait_task(upid)["exitstatus"], "OK")
        self.assertEqual(S.ok("GET", "/nodes/pve2/status")["memory"]["used"], BASE_MEM + (512 << 20))
        self.assertEqual(S.ok("GET", "/nodes/pve2/lxc/102/status/current")["status"], "running")
        r = S.ssh(ip, f"cat /root/kept; kill -0 {sleeper} && echo alive")
        self.assertEqual((r.returncode, r.stdout), (0, "kept\nalive\n"), r.stderr)
        self.assertEqual(S.admin("GET", "/state")["containers"]["102"]["pid"], pid)   # the same sshd
        n = nodes()
        self.assertEqual(n["pve2"]["status"], "online")
        self.assertEqual(n["pve2"]["mem"], BASE_MEM + (512 << 20))
        self.assertEqual(guests()[102]["status"], "running")

    def test_6_admin_unknown_node(self):
        for act in ("down", "up"):
            r = S.raw("POST", f"/admin/node/nosuch/{act}")
            self.assertEqual(r.status, 404, r)
        self.assertTrue(all(v["online"] for v in S.admin("GET", "/state")["nodes"].values()))

    def test_8_workers_and_proxy_timeout(self):
        """pvedaemon serves 3 container calls per node at once (the rest queue); past the proxy
        timeout the client gets an empty 596 while the call still runs to its end."""
        import threading
        settings(proxy_timeout=1.0)
        fault = S.admin("POST", "/faults", {"method": "GET", "path": "/nodes/pve1/lxc/9000/config",
                                            "latency": 0.6})
        try:
            S.admin("POST", "/workers")  # reset the peak
            out = []

            def call():
                out.append(S.api("GET", "/nodes/pve1/lxc/9000/config").status)
            ts = [threading.Thread(target=call) for _ in range(6)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            # 3 at once, 0.6 s each: the second three are served at 1.2 s, after the timeout
            self.assertEqual(sorted(out), [200, 200, 200, 596, 596, 596])
            wait_for(lambda: S.admin("GET", "/workers")["pve1"]["busy"] == 0, "the workers to finish")
            w = S.admin("GET", "/workers")["pve1"]
            self.assertEqual(w["peak"], 3)
            self.assertEqual(w["inflight_peak"], 6)
            self.assertEqual(w["served"], 6)
            self.assertEqual(w["timeouts"], 3)
            # another node's workers are its own; calls outside /lxc are not counted
            self.assertEqual(S.api("GET", "/nodes/pve2/lxc/9001/config").status, 200)
            self.assertEqual(S.admin("GET", "/workers")["pve2"]["peak"], 1)
            # a clone past the proxy timeout: 596 at once, the container appears later
            S.admin("DELETE", f"/faults/{fault['id']}")
            fault = S.admin("POST", "/faults", {"method": "POST", "path": "/nodes/pve1/lxc/9000/clone",
                                                "latency": 1.5, "count": 1})
            r = S.api("POST", "/nodes/pve1/lxc/9000/clone", {"newid": 140})
            self.assertEqual((r.status, r.body), (596, b""))
            self.assertNotIn(140, guests())
            wait_for(lambda: 140 in guests() and guests()[140].get("lock") is None, "the late clone")
            S.wait_task(S.ok("DELETE", "/nodes/pve1/lxc/140"))
        finally:
            S.raw("DELETE", "/admin/faults")
            settings(proxy_timeout=30.0)

    def test_7_bad_node_config(self):
        for args in (["--node-count", "0"], ["--node-count", "2", "--node", "a"]):
            r = subprocess.run([sys.executable, simlib.SIM, "--state-dir", "/run/pve-sim-test-never"] + args,
                               capture_output=True, text=True, timeout=30)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("node", r.stderr)
            self.assertFalse(os.path.exists("/run/pve-sim-test-never"))


if __name__ == "__main__":
    simlib.run_tests("__main__")
