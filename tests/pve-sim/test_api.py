#!/usr/bin/env python3
"""pve-sim REST API: every endpoint, its error paths and exact texts (pve-api.md)."""

import os
import re
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import simlib  # noqa: E402
from simlib import ADMIN, DAEMON  # noqa: E402

UPID_RE = re.compile(r"^UPID:([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?):([0-9A-F]{8}):([0-9A-F]{8,9}):"
                     r"([0-9A-F]{8}):([^:\s/]+):([^:\s/]*):([^:\s/]+):$")

CONFIG = {
    "nodes": ["pve", "pve2"],
    "storages": {"local-lvm": {"type": "lvmthin", "shared": 0}, "ceph": {"type": "rbd", "shared": 1},
                 "local": {"type": "dir", "shared": 0}},
    "templates": [{"vmid": 9000, "node": "pve", "storage": "local-lvm"},
                  {"vmid": 9001, "node": "pve", "storage": "ceph"},
                  {"vmid": 9002, "node": "pve", "storage": "local"}],
    "pools": [{"poolid": "sandboxd", "comment": "sb"}, {"poolid": "other"}],
}

S = None


def setUpModule():
    global S
    S = simlib.Sim(CONFIG).start()


def tearDownModule():
    S.destroy()


class T01Basics(unittest.TestCase):
    def test_version(self):
        d = S.ok("GET", "/version")
        self.assertEqual(set(d), {"version", "release", "repoid"})

    def test_ready_line(self):
        self.assertRegex(S.ready_line, r"^pve-sim ready url=https://127\.0\.0\.1:\d+ fingerprint=([0-9A-F]{2}:){31}[0-9A-F]{2} ")
        self.assertTrue(S.ready["host_key"].startswith("SHA256:"))

    def test_nextid_string(self):
        r = S.api("GET", "/cluster/nextid")
        self.assertEqual(r.status, 200)
        self.assertIsInstance(r.data, str)
        self.assertEqual(r.data, "100")
        self.assertEqual(S.ok("GET", "/cluster/nextid", {"vmid": 555}), "555")
        r = S.api("GET", "/cluster/nextid", {"vmid": 9000})
        self.assertEqual((r.status, r.reason), (400, "Parameter verification failed."))
        self.assertEqual(r.json["errors"], {"vmid": "VM 9000 already exists"})
        self.assertIsNone(r.json["data"])

    def test_unknown_path_501(self):
        r = S.api("GET", "/nodes/pve/lxc/9000/foo")
        self.assertEqual((r.status, r.reason), (501, "Method 'GET /nodes/pve/lxc/9000/foo' not implemented"))
        r = S.api("POST", "/version")
        self.assertEqual((r.status, r.reason), (501, "Method 'POST /version' not implemented"))

    def test_delete_with_body_501(self):
        r = S.raw("DELETE", "/api2/json/nodes/pve/lxc/9000", body="force=1",
                  headers=dict(S.auth(), **{"Content-Type": "application/x-www-form-urlencoded"}))
        self.assertEqual((r.status, r.reason), (501, "Unexpected content for method 'DELETE'"))
        self.assertIn(9000, [c["vmid"] for c in S.ok("GET", "/nodes/pve/lxc")])

    def test_param_errors(self):
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": "x", "full": "true", "bogus": "1"})
        self.assertEqual((r.status, r.reason), (400, "Parameter verification failed."))
        self.assertEqual(r.json["errors"], {
            "newid": "type check ('integer') failed - got 'x'",
            "full": "type check ('boolean') failed - got 'true'",
            "bogus": "property is not defined in schema and the schema does not allow additional properties"})
        self.assertEqual(r.json["message"], "Parameter verification failed.\n")
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {})
        self.assertEqual(r.json["errors"], {"newid": "property is missing and it is not optional"})
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": 50})
        self.assertEqual(r.json["errors"], {"newid": "value must have a minimum value of 100"})
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": 120, "hostname": "a_b"})
        self.assertEqual(r.json["errors"], {"hostname": "invalid format - value does not look like a valid DNS name\n"})
        r = S.api("GET", "/nodes/pve/lxc/abc/config")
        self.assertEqual(r.json["errors"], {"vmid": "type check ('integer') failed - got 'abc'"})
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"vmid": 9001, "newid": 121})
        self.assertEqual(r.json["errors"],
                         {"vmid": "duplicate parameter (already defined in URI) with conflicting values!"})

    def test_old_error_format(self):
        S.admin("PUT", "/settings", {"error_format": "old"})
        try:
            r = S.api("GET", "/nodes/pve/lxc/777/config")
            self.assertEqual((r.status, r.reason), (500, "Configuration file 'nodes/pve/lxc/777.conf' does not exist"))
            self.assertEqual(r.json, {"data": None})
            r = S.api("GET", "/cluster/nextid", {"vmid": 9000})
            self.assertEqual(r.json, {"data": None, "errors": {"vmid": "VM 9000 already exists"}})
        finally:
            S.admin("PUT", "/settings", {"error_format": "new"})
        r = S.api("GET", "/nodes/pve/lxc/777/config")
        self.assertEqual(r.json, {"data": None, "message": "Configuration file 'nodes/pve/lxc/777.conf' does not exist\n"})

    def test_unknown_node(self):
        r = S.api("GET", "/nodes/nosuch/lxc")
        self.assertEqual(r.status, 500)
        self.assertTrue(r.reason.startswith("hostname lookup 'nosuch' failed"))

    def test_indexes(self):
        self.assertIn({"subdir": "config"}, S.ok("GET", "/nodes/pve/lxc/9000"))
        self.assertIn({"subdir": "current"}, S.ok("GET", "/nodes/pve/lxc/9000/status"))
        r = S.api("GET", "/nodes/pve2/lxc/9000/status")
        self.assertEqual((r.status, r.reason), (500, "Configuration file 'nodes/pve2/lxc/9000.conf' does not exist"))

    def test_nodes(self):
        self.assertEqual([n["node"] for n in S.ok("GET", "/nodes")], ["pve", "pve2"])


class T02Auth(unittest.TestCase):
    def test_no_ticket(self):
        t0 = time.time()
        r = S.api("GET", "/version", token=None)
        self.assertGreaterEqual(time.time() - t0, 0.2)
        self.assertEqual((r.status, r.reason, r.body), (401, "No ticket", b""))

    def test_bad_secret_unified(self):
        r = S.raw("GET", "/api2/json/version", headers=S.auth(ADMIN, "wrong"))
        self.assertEqual((r.status, r.reason, r.body), (401, "Authentication failed!", b""))
        r = S.raw("GET", "/api2/json/version", headers={"Authorization": "PVEAPIToken=nobody@pve!x=1"})
        self.assertEqual((r.status, r.reason), (401, "Authentication failed!"))

    def test_legacy_messages(self):
        S.admin("PUT", "/settings", {"auth_error_style": "legacy"})
        try:
            r = S.raw("GET", "/api2/json/version", headers=S.auth(ADMIN, "wrong"))
            self.assertEqual((r.status, r.reason, r.body), (401, "invalid token value!", b""))
            r = S.raw("GET", "/api2/json/version", headers={"Authorization": "PVEAPIToken=root@pam!nope=1"})
            self.assertEqual(r.reason, "no such token 'nope' for user 'root@pam'")
            r = S.raw("GET", "/api2/json/version", headers={"Authorization": "PVEAPIToken=x@pve!a=1"})
            self.assertEqual(r.reason, "no such user ('x@pve')")
            r = S.raw("GET", "/api2/json/version", headers={"Authorization": "PVEAPIToken=root@pam!admin"})
            self.assertEqual(r.reason, "no tokenid specified")
        finally:
            S.admin("PUT", "/settings", {"auth_error_style": "unified"})

    def test_space_form_and_escape(self):
        sec = S.info["tokens"][ADMIN]
        r = S.raw("GET", "/api2/json/version", headers={"Authorization": f"PVEAPIToken root%40pam!admin={sec}"})
        self.assertEqual(r.status, 200)


class T03Clone(unittest.TestCase):
    def test_clone_lifecycle(self):
        r = S.api("POST", "/nodes/pve/lxc/9000/clone",
                  {"newid": 200, "hostname": "sb200", "pool": "sandboxd", "description": "owner=1"})
        self.assertEqual(r.status, 200, r)
        upid = r.data
        m = UPID_RE.match(upid)
        self.assertIsNotNone(m, upid)
        self.assertEqual((m.group(1), m.group(6), m.group(7), m.group(8)), ("pve", "vzclone", "9000", ADMIN))
        # newid reserved at once with lock: create; template holds lock: disk
        c = S.ok("GET", "/nodes/pve/lxc/200/config")
        self.assertEqual(c["lock"], "create")
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/9000/config")["lock"], "disk")
        st = S.ok("GET", f"/nodes/pve/tasks/{upid}/status")
        self.assertEqual(st["status"], "running")
        self.assertNotIn("exitstatus", st)
        self.assertEqual((st["user"], st["tokenid"], st["id"], st["type"]), ("root@pam", "admin", "9000", "vzclone"))
        r2 = S.api("POST", "/nodes/pve/lxc/200/clone", {"newid": 201})
        self.assertEqual((r2.status, r2.reason), (500, "CT is locked (create)"))
        st = S.wait_task(upid)
        self.assertEqual(st["exitstatus"], "OK")
        log = S.api("GET", f"/nodes/pve/tasks/{upid}/log")
        self.assertEqual(log.json["total"], len(log.data))
        self.assertEqual(log.data[0], {"n": 1, "t": "creating a clone of container 9000 with ID 200"})
        self.assertEqual(log.data[-1]["t"], "TASK OK")
        self.assertIn("create linked clone of mount point rootfs (local-lvm:base-9000-disk-0)",
                      [l["t"] for l in log.data])
        c = S.ok("GET", "/nodes/pve/lxc/200/config")
        self.assertNotIn("lock", c)
        self.assertNotIn("template", c)
        self.assertEqual(c["hostname"], "sb200")
        self.assertEqual(c["description"], "owner=1\n")
        self.assertTrue(c["rootfs"].startswith("local-lvm:vm-200-disk-0,"))
        t = S.ok("GET", "/nodes/pve/lxc/9000/config")
        self.assertNotIn("lock", t)
        self.assertNotEqual(re.search("hwaddr=([^,]+)", c["net0"]).group(1),
                            re.search("hwaddr=([^,]+)", t["net0"]).group(1))
        self.assertIn("firewall=1", c["net0"])
        # firewall rules copied from the template
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/200/firewall/rules")[0]["dport"], "22")
        # in the pool
        pool = S.ok("GET", "/pools/sandboxd")
        self.assertEqual(pool["poolid"], "sandboxd")
        self.assertIn(200, [m["vmid"] for m in pool["members"]])
        self.assertNotIn("pool", pool["members"][0])
        self.assertEqual(S.ok("GET", "/pools", {"poolid": "sandboxd"})[0]["members"][0]["id"], "lxc/200")
        res = {x["vmid"]: x for x in S.ok("GET", "/cluster/resources", {"type": "vm"})}
        self.assertEqual(res[200]["pool"], "sandboxd")
        self.assertEqual(res[200]["type"], "lxc")
        self.assertEqual(res[9000]["template"], 1)
        # newid taken
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": 200})
        self.assertEqual((r.status, r.reason), (500, "CT 200 already exists on node 'pve'"))
        self.assertNotIn("lock", S.ok("GET", "/nodes/pve/lxc/9000/config"))

    def test_concurrent_clones_lock_disk(self):
        results = []

        def go(newid):
            results.append(S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": newid}))
        ts = [threading.Thread(target=go, args=(n,)) for n in (210, 211)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        codes = sorted((r.status, r.reason) for r in results)
        self.assertEqual(codes, [(200, "OK"), (500, "CT is locked (disk)")])
        ok = [r for r in results if r.status == 200][0]
        self.assertEqual(S.wait_task(ok.data)["exitstatus"], "OK")
        lost = [r for r in results if r.status == 500][0]
        self.assertEqual(lost.json["message"], "CT is locked (disk)\n")

    def test_nextid_race(self):
        ids = []
        ts = [threading.Thread(target=lambda: ids.append(S.ok("GET", "/cluster/nextid"))) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(len(set(ids)), 1)  # nextid reserves nothing
        newid = int(ids[0])
        results = []

        def go(src, extra):
            results.append(S.api("POST", f"/nodes/pve/lxc/{src}/clone", dict(newid=newid, **extra)))
        ts = [threading.Thread(target=go, args=a) for a in ((9001, {}), (9002, {"full": 1}))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        codes = sorted((r.status, r.reason) for r in results)
        self.assertEqual(codes, [(200, "OK"), (500, f"CT {newid} already exists on node 'pve'")])
        S.wait_task([r for r in results if r.status == 200][0].data)
        self.assertNotEqual(S.ok("GET", "/cluster/nextid"), str(newid))

    def test_clone_errors(self):
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": 220, "pool": "nope"})
        self.assertEqual((r.status, r.reason), (403, "Permission check failed (pool 'nope' does not exist)"))
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": 220, "storage": "local-lvm"})
        self.assertEqual((r.status, r.reason), (500, "parameter 'storage' not allowed for linked clones"))
        r = S.api("POST", "/nodes/pve/lxc/9002/clone", {"newid": 220, "full": 0})
        self.assertEqual((r.status, r.reason),
                         (500, "Linked clone feature for 'local:9002/base-9002-disk-0.raw' is not available"))
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": 220, "target": "pve2"})
        self.assertEqual((r.status, r.reason), (500, "can't clone CT to node 'pve2' (CT uses local storage)"))
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": 220, "target": "pve9"})
        self.assertEqual((r.status, r.reason), (500, "no such cluster node 'pve9'"))
        r = S.api("POST", "/nodes/pve2/lxc/9000/clone", {"newid": 220})
        self.assertEqual((r.status, r.reason), (500, "Configuration file 'nodes/pve2/lxc/9000.conf' does not exist"))
        for v in (9000, 9002):
            self.assertNotIn("lock", S.ok("GET", f"/nodes/pve/lxc/{v}/config"))
        r = S.api("GET", "/nodes/pve/lxc/220/config")
        self.assertEqual(r.status, 500)

    def test_target_node_and_wrong_node(self):
        upid = S.clone(230, src=9001, target="pve2", json_body=True)
        self.assertTrue(upid.startswith("UPID:pve:"))
        c = S.ok("GET", "/nodes/pve2/lxc/230/config")
        self.assertEqual(c["rootfs"].split(",")[0], "ceph:base-9001-disk-0/vm-230-disk-0")
        r = S.api("GET", "/nodes/pve/lxc/230/config")
        self.assertEqual((r.status, r.reason), (500, "Configuration file 'nodes/pve/lxc/230.conf' does not exist"))
        self.assertEqual([x["vmid"] for x in S.ok("GET", "/nodes/pve2/lxc")], [230])
        node = {x["vmid"]: x["node"] for x in S.ok("GET", "/cluster/resources", {"type": "vm"})}
        self.assertEqual(node[230], "pve2")
        # tasks are node-local
        r = S.api("GET", f"/nodes/pve2/tasks/{upid}/status")
        self.assertEqual((r.status, r.json["errors"]), (400, {"upid": "no such task"}))
        # delete on the right node
        u = S.ok("DELETE", "/nodes/pve2/lxc/230", {"purge": 1})
        self.assertEqual(S.wait_task(u)["exitstatus"], "OK")

    def test_full_clone(self):
        S.clone(235, src=9000, full=1, storage="local")
        c = S.ok("GET", "/nodes/pve/lxc/235/config")
        self.assertEqual(c["rootfs"].split(",")[0], "local:235/vm-235-disk-0.raw")


class T04Config(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        S.clone(300)

    def test_description_tags(self):
        S.ok("PUT", "/nodes/pve/lxc/300/config", {"description": "line1\nline2", "tags": "b;A,a c"})
        c = S.ok("GET", "/nodes/pve/lxc/300/config")
        self.assertEqual(c["description"], "line1\nline2\n")
        self.assertEqual(c["tags"], "a;b;c")
        r = S.api("PUT", "/nodes/pve/lxc/300/config", {"tags": "ok;bad!"})
        self.assertEqual(r.json["errors"], {"tags": "invalid format - invalid characters in tag\n"})
        lst = {x["vmid"]: x for x in S.ok("GET", "/nodes/pve/lxc")}
        self.assertEqual(lst[300]["tags"], "a;b;c")

    def test_types_and_digest(self):
        c = S.ok("GET", "/nodes/pve/lxc/300/config")
        self.assertIsInstance(c["memory"], int)
        self.assertIsInstance(c["unprivileged"], int)
        self.assertRegex(c["digest"], r"^[0-9a-f]{40}$")
        S.ok("PUT", "/nodes/pve/lxc/300/config", {"cores": 2, "memory": 1024, "digest": c["digest"]})
        c2 = S.ok("GET", "/nodes/pve/lxc/300/config")
        self.assertEqual((c2["cores"], c2["memory"]), (2, 1024))
        r = S.api("PUT", "/nodes/pve/lxc/300/config", {"cores": 1, "digest": c["digest"]})
        self.assertEqual((r.status, r.reason),
                         (500, "detected modified configuration - file changed by other user? Try again."))
        r = S.api("PUT", "/nodes/pve/lxc/300/config", {})
        self.assertEqual((r.status, r.reason), (500, "no options specified"))
        r = S.api("PUT", "/nodes/pve/lxc/300/config", {"memory": 8})
        self.assertEqual(r.json["errors"], {"memory": "value must have a minimum value of 16"})
        r = S.api("PUT", "/nodes/pve/lxc/300/config", {"delete": "memory"})
        self.assertEqual((r.status, r.reason), (500, "unable to delete required option 'memory'"))
        S.ok("PUT", "/nodes/pve/lxc/300/config", {"onboot": 1, "protection": 0})
        S.ok("PUT", "/nodes/pve/lxc/300/config", {"delete": "onboot,protection"})
        self.assertNotIn("onboot", S.ok("GET", "/nodes/pve/lxc/300/config"))
        S.ok("PUT", "/nodes/pve/lxc/300/config", {"swap": 0}, json_body=True)
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/300/config")["swap"], 0)

    def test_net_mac_gotcha(self):
        c = S.ok("GET", "/nodes/pve/lxc/300/config")
        mac = re.search("hwaddr=([^,]+)", c["net0"]).group(1)
        S.ok("PUT", "/nodes/pve/lxc/300/config", {"net0": c["net0"].replace("firewall=1", "firewall=0")})
        c2 = S.ok("GET", "/nodes/pve/lxc/300/config")
        self.assertEqual(c2["net0"], c["net0"].replace("firewall=1", "firewall=0"))
        S.ok("PUT", "/nodes/pve/lxc/300/config", {"net0": "name=eth0,bridge=vmbr0,firewall=yes,ip=dhcp"})
        c3 = S.ok("GET", "/nodes/pve/lxc/300/config")
        mac3 = re.search("hwaddr=([^,]+)", c3["net0"]).group(1)
        self.assertNotEqual(mac3, mac)
        self.assertEqual(c3["net0"], f"name=eth0,bridge=vmbr0,firewall=1,hwaddr={mac3},ip=dhcp")
        r = S.api("PUT", "/nodes/pve/lxc/300/config", {"net0": "bridge=vmbr0"})
        self.assertEqual(r.status, 400)
        self.assertIn("net0", r.json["errors"])

    def test_lock_blocks_put(self):
        S.admin("POST", "/ct/300/lock", {"lock": "backup"})
        try:
            r = S.api("PUT", "/nodes/pve/lxc/300/config", {"cores": 1})
            self.assertEqual((r.status, r.reason), (500, "CT is locked (backup)"))
            r = S.api("POST", "/nodes/pve/lxc/300/clone", {"newid": 301})
            self.assertEqual((r.status, r.reason), (500, "CT is locked (backup)"))
            r = S.api("DELETE", "/nodes/pve/lxc/300")
            self.assertEqual((r.status, r.reason), (500, "CT is locked (backup)"))
            u = S.ok("POST", "/nodes/pve/lxc/300/status/start")
            self.assertEqual(S.wait_task(u)["exitstatus"], "CT is locked (backup)")
            self.assertEqual(S.ok("GET", "/nodes/pve/lxc/300/status/current")["lock"], "backup")
        finally:
            S.admin("DELETE", "/ct/300/lock")

    def test_flock_timeout(self):
        S.admin("PUT", "/settings", {"flock_timeout": 0.3})
        try:
            S.admin("POST", "/ct/300/hold-flock", {"seconds": 1.5})
            r = S.api("PUT", "/nodes/pve/lxc/300/config", {"cores": 1})
            self.assertEqual((r.status, r.reason),
                             (500, "can't lock file '/run/lock/lxc/pve-config-300.lock' - got timeout"))
            u = S.ok("POST", "/nodes/pve/lxc/300/status/start")
            self.assertEqual(S.wait_task(u)["exitstatus"],
                             "can't lock file '/run/lock/lxc/pve-config-300.lock' - got timeout")
            time.sleep(1.5)
            S.ok("PUT", "/nodes/pve/lxc/300/config", {"cores": 1})
        finally:
            S.admin("PUT", "/settings", {"flock_timeout": 10})

    def test_resize(self):
        r = S.api("PUT", "/nodes/pve/lxc/300/resize", {"disk": "rootfs", "size": "10GiB"})
        self.assertEqual(r.json["errors"], {"size": "value does not match the regex pattern"})
        u = S.ok("PUT", "/nodes/pve/lxc/300/resize", {"disk": "rootfs", "size": "+2G"})
        self.assertIn(":resize:300:", u)
        self.assertEqual(S.wait_task(u)["exitstatus"], "OK")
        self.assertIn("size=10G", S.ok("GET", "/nodes/pve/lxc/300/config")["rootfs"])
        r = S.api("PUT", "/nodes/pve/lxc/300/resize", {"disk": "rootfs", "size": "4G"})
        self.assertEqual((r.status, r.reason), (500, "unable to shrink disk size"))
        r = S.api("PUT", "/nodes/pve/lxc/300/resize", {"disk": "rootfs", "size": "10G"})
        self.assertEqual((r.status, r.reason), (500, "disk is already at specified size"))
        u = S.ok("PUT", "/nodes/pve/lxc/300/resize", {"disk": "rootfs", "size": "10752M"})
        S.wait_task(u)
        self.assertIn("size=10752M", S.ok("GET", "/nodes/pve/lxc/300/config")["rootfs"])


class T05Power(unittest.TestCase):
    def test_start_stop_interfaces(self):
        S.clone(400, hostname="ct400")
        self.assertIsNone(S.ok("GET", "/nodes/pve/lxc/400/interfaces"))
        r = S.api("POST", "/nodes/pve/lxc/400/status/stop")
        self.assertEqual((r.status, r.reason), (500, "CT 400 not running"))
        u = S.ok("POST", "/nodes/pve/lxc/400/status/start")
        self.assertIn(":vzstart:400:", u)
        st = S.wait_task(u)
        self.assertEqual(st["exitstatus"], "OK")
        t_end = time.time()
        r = S.api("POST", "/nodes/pve/lxc/400/status/start")
        self.assertEqual((r.status, r.reason), (500, "CT 400 already running"))
        ifs = S.ok("GET", "/nodes/pve/lxc/400/interfaces")
        eth0 = [e for e in ifs if e["name"] == "eth0"][0]
        self.assertNotIn("inet", eth0)  # DHCP not done yet
        ip = S.wait_ip(400)
        self.assertGreaterEqual(time.time() - t_end, 0.25)
        self.assertTrue(ip.startswith(S.info["bridge_subnet"].rsplit(".", 1)[0] + "."))
        ifs = S.ok("GET", "/nodes/pve/lxc/400/interfaces")
        eth0 = [e for e in ifs if e["name"] == "eth0"][0]
        self.assertEqual(eth0["hwaddr"], eth0["hwaddr"].lower())
        self.assertIn({"ip-address-type": "inet", "ip-address": ip, "prefix": 24}, eth0["ip-addresses"])
        cur = S.ok("GET", "/nodes/pve/lxc/400/status/current")
        self.assertEqual((cur["status"], cur["name"], cur["vmid"], cur["ha"]), ("running", "ct400", 400, {"managed": 0}))
        self.assertIn("pid", cur)
        r = S.api("DELETE", "/nodes/pve/lxc/400")
        self.assertEqual((r.status, r.reason), (500, "unable to destroy CT 400 - container is running"))
        u = S.ok("POST", "/nodes/pve/lxc/400/status/shutdown", {"timeout": 5})
        self.assertIn(":vzshutdown:400:", u)
        self.assertEqual(S.wait_task(u)["exitstatus"], "OK")
        cur = S.ok("GET", "/nodes/pve/lxc/400/status/current")
        self.assertEqual((cur["status"], cur["uptime"], cur["mem"]), ("stopped", 0, 0))
        self.assertNotIn("pid", cur)
        self.assertIsNone(S.ok("GET", "/nodes/pve/lxc/400/interfaces"))
        # restart keeps the lease, stop via stop
        S.start_ct(400)
        self.assertEqual(S.wait_ip(400), ip)
        u = S.ok("POST", "/nodes/pve/lxc/400/status/stop")
        S.wait_task(u)
        # delete with force while running
        S.start_ct(400, wait_ip=False)
        u = S.ok("DELETE", "/nodes/pve/lxc/400", {"force": 1, "purge": 1, "destroy-unreferenced-disks": 1})
        st = S.wait_task(u)
        self.assertEqual(st["exitstatus"], "OK")
        lines = [l["t"] for l in S.api("GET", f"/nodes/pve/tasks/{u}/log").data]
        self.assertEqual(lines, ["forced to stop CT 400 before destroying!",
                                 "purging CT 400 from related configurations..", "TASK OK"])
        r = S.api("GET", "/nodes/pve/lxc/400/status/current")
        self.assertEqual((r.status, r.reason), (500, "Configuration file 'nodes/pve/lxc/400.conf' does not exist"))
        self.assertIsNone(S.ok("GET", "/nodes/pve/lxc/400/interfaces"))

    def test_start_missing_and_template(self):
        u = S.ok("POST", "/nodes/pve/lxc/999/status/start")
        self.assertEqual(S.wait_task(u)["exitstatus"], "Configuration file 'nodes/pve/lxc/999.conf' does not exist")
        log = S.api("GET", f"/nodes/pve/tasks/{u}/log").data
        self.assertEqual(log[-1]["t"], "TASK ERROR: Configuration file 'nodes/pve/lxc/999.conf' does not exist")
        u = S.ok("POST", "/nodes/pve/lxc/9000/status/start")
        self.assertEqual(S.wait_task(u)["exitstatus"], "you can't start a CT if it's a template")
        r = S.api("POST", "/nodes/pve/lxc/9000/status/start", {"skiplock": 1}, token=DAEMON)
        self.assertEqual((r.status, r.json["errors"]), (400, {"skiplock": "Only root may use this option."}))

    def test_protection(self):
        S.clone(410)
        S.ok("PUT", "/nodes/pve/lxc/410/config", {"protection": 1})
        r = S.api("DELETE", "/nodes/pve/lxc/410")
        self.assertEqual((r.status, r.reason), (500, "can't remove CT 410 - protection mode enabled"))
        S.ok("PUT", "/nodes/pve/lxc/410/config", {"delete": "protection"})
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/410"))

    def test_template_with_linked_clones(self):
        S.clone(420, src=9001)
        u = S.ok("DELETE", "/nodes/pve/lxc/9001")
        self.assertEqual(S.wait_task(u)["exitstatus"], "base volume 'base-9001-disk-0' is still in use by linked clones")
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/9001/config")["template"], 1)

    def test_convert_to_template(self):
        S.clone(430)
        S.wait_task(S.ok("POST", "/nodes/pve/lxc/430/status/start"))
        r = S.api("POST", "/nodes/pve/lxc/430/template")
        self.assertEqual((r.status, r.reason), (500, "you can't convert a CT to template if the CT is running"))
        S.wait_task(S.ok("POST", "/nodes/pve/lxc/430/status/stop"))
        self.assertIsNone(S.ok("POST", "/nodes/pve/lxc/430/template"))  # null: the task is not named
        for _ in range(100):
            c = S.ok("GET", "/nodes/pve/lxc/430/config")
            if c.get("template") == 1:
                break
            time.sleep(0.05)
        self.assertEqual((c.get("template"), c["rootfs"].split(",")[0]), (1, "local-lvm:base-430-disk-0"))
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/430/status/current")["template"], 1)
        r = S.api("POST", "/nodes/pve/lxc/430/template")
        self.assertEqual((r.status, r.reason), (500, "you can't convert a template to a template"))
        u = S.ok("POST", "/nodes/pve/lxc/430/status/start")
        self.assertEqual(S.wait_task(u)["exitstatus"], "you can't start a CT if it's a template")
        S.clone(431, src=430)  # a linked clone of it
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/431/config")["rootfs"].split(",")[0],
                         "local-lvm:vm-431-disk-0")
        S.clone(432)
        S.wait_task(S.ok("POST", "/nodes/pve/lxc/432/snapshot", {"snapname": "s1"}))
        r = S.api("POST", "/nodes/pve/lxc/432/template")
        self.assertEqual((r.status, r.reason), (500, "unable to create template, because CT contains snapshots"))

class T06Tasks(unittest.TestCase):
    def test_task_errors(self):
        r = S.api("GET", "/nodes/pve/tasks/garbage/status")
        self.assertEqual((r.status, r.json["errors"]), (400, {"upid": "unable to parse worker upid"}))
        fake = "UPID:pve:00001234:00001234:5F000000:vzstart:100:root@pam:"
        r = S.api("GET", f"/nodes/pve/tasks/{fake}/status")
        self.assertEqual((r.status, r.json["errors"]), (400, {"upid": "no such task"}))
        r = S.api("GET", f"/nodes/pve/tasks/{fake}/log")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.data, [{"n": 1, "t": "unable to open file - No such file or directory"}])

    def test_log_paging(self):
        u = S.clone(500)
        all_ = S.api("GET", f"/nodes/pve/tasks/{u}/log", {"limit": 0})
        n = all_.json["total"]
        self.assertEqual(len(all_.data), n)
        part = S.api("GET", f"/nodes/pve/tasks/{u}/log", {"start": 1, "limit": 1})
        self.assertEqual(part.data, [{"n": 2, "t": all_.data[1]["t"]}])
        self.assertEqual(part.json["total"], n)
        self.assertTrue(any(t["upid"] == u for t in S.ok("GET", "/nodes/pve/tasks", {"vmid": 9000})))


class T07Permissions(unittest.TestCase):
    def test_pool_scoped_token(self):
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/9000/config", token=DAEMON)["template"], 1)
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": 600}, token=DAEMON)
        self.assertEqual((r.status, r.reason), (403, "Permission check failed (/vms/600, VM.Allocate)"))
        r = S.api("POST", "/nodes/pve/lxc/9000/clone", {"newid": 600, "pool": "other"}, token=DAEMON)
        self.assertEqual((r.status, r.reason), (403, "Permission check failed (/pool/other, VM.Allocate)"))
        u = S.ok("POST", "/nodes/pve/lxc/9000/clone", {"newid": 600, "pool": "sandboxd"}, token=DAEMON)
        st = S.wait_task(u)
        self.assertEqual((st["exitstatus"], st["user"], st["tokenid"]), ("OK", "sandboxd@pve", "sandboxd"))
        S.ok("PUT", "/nodes/pve/lxc/600/config", {"cores": 2}, token=DAEMON)
        S.ok("POST", "/nodes/pve/lxc/600/firewall/rules", {"type": "group", "action": "sandbox-internet",
                                                           "enable": 1}, token=DAEMON)
        S.clone(601)  # outside the pool
        r = S.api("GET", "/nodes/pve/lxc/601/config", token=DAEMON)
        self.assertEqual((r.status, r.reason), (403, "Permission check failed (/vms/601, VM.Audit)"))
        r = S.api("POST", "/nodes/pve/lxc/601/status/start", token=DAEMON)
        self.assertEqual((r.status, r.reason), (403, "Permission check failed (/vms/601, VM.PowerMgmt)"))
        ids = [x["vmid"] for x in S.ok("GET", "/cluster/resources", {"type": "vm"}, token=DAEMON)]
        self.assertIn(600, ids)
        self.assertNotIn(601, ids)
        self.assertNotIn(601, [x["vmid"] for x in S.ok("GET", "/nodes/pve/lxc", token=DAEMON)])
        self.assertEqual(S.ok("GET", "/cluster/firewall/options", token=DAEMON)["enable"], 1)
        r = S.api("PUT", "/cluster/firewall/options", {"enable": 0}, token=DAEMON)
        self.assertEqual((r.status, r.reason), (403, "Permission check failed (/, Sys.Modify)"))
        r = S.api("GET", "/pools/other", token=DAEMON)
        self.assertEqual((r.status, r.reason), (403, "Permission check failed (/pool/other, Pool.Audit)"))
        r = S.api("GET", "/pools/nope")
        self.assertEqual((r.status, r.reason), (500, "pool 'nope' does not exist"))
        u = S.ok("DELETE", "/nodes/pve/lxc/600", {"purge": 1}, token=DAEMON)
        self.assertEqual(S.wait_task(u)["exitstatus"], "OK")


    def test_acl_propagation(self):
        """pve-access-control's roles(): propagate 0 applies to the exact path only, and a
        deeper ACL replaces what was inherited."""
        from pvesim.auth import Token
        t = Token({"id": "audit@pve!tok", "acl": {"/": {"roles": ["Sys.Audit"], "propagate": 0}}})
        self.assertTrue(t.has("/", "Sys.Audit"))
        self.assertFalse(t.has("/nodes/pve", "Sys.Audit"))
        t = Token({"id": "audit@pve!tok", "acl": {"/": {"roles": ["Sys.Audit"], "propagate": 0},
                                            "/nodes": ["Sys.Audit"]}})
        self.assertTrue(t.has("/nodes/pve", "Sys.Audit"))
        t = Token({"id": "audit@pve!tok", "acl": {"/": "PVEAuditor", "/vms/9000": "PVETemplateUser"}})
        self.assertTrue(t.has("/vms/9001", "Datastore.Audit"))
        self.assertFalse(t.has("/vms/9000", "Datastore.Audit"))  # replaced, not added to
        self.assertTrue(t.has("/vms/9000", "VM.Clone"))
        # The default sandboxd token, as the setup guide grants it, sees every node's load.
        for n in S.ok("GET", "/cluster/resources", {"type": "node"}, token=DAEMON):
            self.assertIn("maxmem", n)


class T08Firewall(unittest.TestCase):
    def test_ct_rules(self):
        S.clone(700)
        base = "/nodes/pve/lxc/700/firewall"
        S.ok("POST", base + "/rules", {"type": "out", "action": "ACCEPT", "dest": "10.0.0.0/8"})
        rules = S.ok("GET", base + "/rules")
        self.assertEqual(len(rules), 2)
        r0 = rules[0]
        self.assertEqual((r0["pos"], r0["type"], r0["action"], r0["dest"], r0["enable"], r0["ipversion"]),
                         (0, "out", "ACCEPT", "10.0.0.0/8", 0, 4))
        self.assertEqual(rules[0]["digest"], rules[1]["digest"])
        self.assertEqual(rules[1]["dport"], "22")
        S.ok("PUT", base + "/rules/0", {"enable": 1, "comment": "x"})
        self.assertEqual(S.ok("GET", base + "/rules/0")["enable"], 1)
        S.ok("PUT", base + "/rules/0", {"moveto": 1})
        self.assertEqual(S.ok("GET", base + "/rules/1")["dest"], "10.0.0.0/8")
        r = S.api("GET", base + "/rules/9")
        self.assertEqual((r.status, r.reason), (500, "no rule at position 9"))
        r = S.api("DELETE", base + "/rules/9")
        self.assertEqual((r.status, r.reason), (500, "no rule at position 9"))
        S.ok("DELETE", base + "/rules/1")
        self.assertEqual(len(S.ok("GET", base + "/rules")), 1)
        r = S.api("POST", base + "/rules", {"type": "group", "action": "nosuch"})
        self.assertEqual(r.status, 400)
        r = S.api("POST", base + "/rules", {"type": "out"})
        self.assertEqual(r.json["errors"], {"action": "property is missing and it is not optional"})

    def test_ct_options(self):
        base = "/nodes/pve/lxc/701/firewall/options"  # not checked for existence, like PVE
        o = S.ok("GET", base)
        self.assertEqual(list(o), ["digest"])
        S.ok("PUT", base, {"enable": 1, "policy_out": "DROP", "digest": o["digest"]})
        o2 = S.ok("GET", base)
        self.assertEqual((o2["enable"], o2["policy_out"]), (1, "DROP"))
        r = S.api("PUT", base, {"delete": "nosuch"})
        self.assertEqual(r.json["errors"], {"delete": "no such option 'nosuch'"})
        r = S.api("PUT", base, {"policy_in": "allow"})
        self.assertEqual(r.json["errors"], {"policy_in": "value 'allow' does not have a value in the enumeration 'ACCEPT, REJECT, DROP'"})
        S.ok("PUT", base, {"delete": "policy_out"})
        self.assertNotIn("policy_out", S.ok("GET", base))

    def test_groups(self):
        gs = {g["group"]: g for g in S.ok("GET", "/cluster/firewall/groups")}
        self.assertIn("sandbox-internet", gs)
        rules = S.ok("GET", "/cluster/firewall/groups/sandbox-internet")
        self.assertEqual(sorted(r["dport"] for r in rules), ["443", "53", "53", "80"])
        S.ok("POST", "/cluster/firewall/groups", {"group": "tgrp", "comment": "t"})
        r = S.api("POST", "/cluster/firewall/groups", {"group": "tgrp"})
        self.assertEqual((r.status, r.reason), (500, "Security group 'tgrp' already exists"))
        S.ok("POST", "/cluster/firewall/groups/tgrp", {"type": "in", "action": "DROP", "proto": "tcp", "dport": "80"})
        S.ok("POST", "/cluster/firewall/groups/tgrp", {"type": "out", "action": "ACCEPT", "enable": 1})
        g = S.ok("GET", "/cluster/firewall/groups/tgrp")
        self.assertEqual([(x["pos"], x["type"], x["enable"]) for x in g], [(0, "out", 1), (1, "in", 0)])
        r = S.api("DELETE", "/cluster/firewall/groups/tgrp")
        self.assertEqual((r.status, r.reason), (500, "Security group 'tgrp' is not empty"))
        S.ok("DELETE", "/cluster/firewall/groups/tgrp/0")
        S.ok("DELETE", "/cluster/firewall/groups/tgrp/0")
        S.ok("DELETE", "/cluster/firewall/groups/tgrp")
        r = S.api("GET", "/cluster/firewall/groups/tgrp")
        self.assertEqual((r.status, r.reason), (500, "no such security group 'tgrp'"))

    def test_ct_ipsets(self):
        base = "/nodes/pve/lxc/9000/firewall/ipset"
        self.assertEqual(S.ok("GET", base), [])
        S.ok("POST", base, {"name": "ipfilter-net0", "comment": "lease"})
        r = S.api("POST", base, {"name": "ipfilter-net0"})
        self.assertEqual((r.status, r.reason), (500, "IPSet 'ipfilter-net0' already exists"))
        r = S.api("POST", base, {"name": "0bad"})
        self.assertEqual(r.status, 400)
        self.assertIn("name", r.json["errors"])
        sets = S.ok("GET", base)
        self.assertEqual([(x["name"], x["comment"]) for x in sets], [("ipfilter-net0", "lease")])
        s = base + "/ipfilter-net0"
        S.ok("POST", s, {"cidr": "10.9.0.5/32"})
        S.ok("POST", s, {"cidr": "10.9.1.7/24", "comment": "net", "nomatch": 1})
        e = S.ok("GET", s)
        self.assertEqual([(x["cidr"], x.get("comment"), x.get("nomatch")) for x in e],
                         [("10.9.1.0/24", "net", 1), ("10.9.0.5", None, None)])
        self.assertEqual(e[0]["digest"], e[1]["digest"])
        r = S.api("POST", s, {"cidr": "10.9.0.5"})
        self.assertEqual((r.status, r.json["errors"]), (400, {"cidr": "address '10.9.0.5' already exists"}))
        r = S.api("POST", s, {"cidr": "10.0.0.0/0"})
        self.assertEqual((r.status, r.reason), (400, "a zero prefix is not allowed in ipset entries"))
        r = S.api("POST", base + "/nosuch", {"cidr": "10.9.0.6"})
        self.assertEqual((r.status, r.reason), (500, "no such IPSet 'nosuch'"))
        self.assertEqual(S.ok("GET", s + "/10.9.1.0/24")["comment"], "net")  # raw cidr in the path
        # the guest firewall file (ipsets included) is copied on clone
        S.wait_task(S.ok("POST", "/nodes/pve/lxc/9000/clone", {"newid": 702}))
        self.assertEqual(len(S.ok("GET", "/nodes/pve/lxc/702/firewall/ipset/ipfilter-net0")), 2)
        S.ok("DELETE", s + "/10.9.0.5/32")  # not normalised: removes nothing
        S.ok("DELETE", s + "/10.9.9.9")     # missing: idempotent
        self.assertEqual(len(S.ok("GET", s)), 2)
        S.ok("DELETE", s + "/10.9.1.0%2F24")
        r = S.api("DELETE", s)
        self.assertEqual((r.status, r.reason), (500, "IPSet 'ipfilter-net0' is not empty"))
        S.ok("DELETE", s, {"force": 1})
        self.assertEqual(S.ok("GET", base), [])
        self.assertEqual(len(S.ok("GET", "/nodes/pve/lxc/702/firewall/ipset/ipfilter-net0")), 2)
        r = S.api("POST", "/nodes/pve/lxc/9000/firewall/ipset", {"name": "x1"}, token=DAEMON)
        self.assertEqual((r.status, r.reason), (403, "Permission check failed (/vms/9000, VM.Config.Network)"))
        r = S.api("GET", "/nodes/pve/lxc/702/firewall/ipset", token=DAEMON)
        self.assertEqual((r.status, r.reason), (403, "Permission check failed (/vms/702, VM.Audit)"))
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/702", {"purge": 1}))

    def test_cluster_options(self):
        o = S.ok("GET", "/cluster/firewall/options")
        self.assertEqual(o["enable"], 1)
        self.assertIn("digest", o)


class T09Faults(unittest.TestCase):
    def tearDown(self):
        S.admin("DELETE", "/faults")

    def test_status_faults(self):
        S.admin("POST", "/faults", {"method": "GET", "path": "/version", "status": 500,
                                    "message": "cluster not ready - no quorum?", "count": 1})
        r = S.api("GET", "/version")
        self.assertEqual((r.status, r.reason), (500, "cluster not ready - no quorum?"))
        self.assertEqual(S.api("GET", "/version").status, 200)  # count exhausted
        S.admin("POST", "/faults", {"path": "/version", "status": 595, "count": 1})
        r = S.api("GET", "/version")
        self.assertEqual((r.status, r.reason, r.body), (595, "No route to host", b""))
        S.admin("POST", "/faults", {"path": "/version", "status": 596, "message": "Connection timed out", "count": 1})
        r = S.api("GET", "/version")
        self.assertEqual((r.status, r.reason, r.body), (596, "Connection timed out", b""))

    def test_reset_hang_latency(self):
        f = S.admin("POST", "/faults", {"path": "/version", "reset": True})
        with self.assertRaises((ConnectionError, OSError)):
            S.api("GET", "/version")
        S.admin("DELETE", f"/faults/{f['id']}")
        S.admin("POST", "/faults", {"path": "/version", "hang": True, "hang_seconds": 5, "count": 1})
        with self.assertRaises((socket.timeout, TimeoutError, OSError)):
            S.api("GET", "/version", timeout=0.5)
        S.admin("POST", "/faults", {"path": "/version", "latency": 0.4, "count": 1})
        t0 = time.time()
        self.assertEqual(S.api("GET", "/version").status, 200)
        self.assertGreaterEqual(time.time() - t0, 0.4)
        S.admin("POST", "/faults", {"path": "/version", "status": 500, "probability": 0.0})
        self.assertEqual(S.api("GET", "/version").status, 200)

    def test_task_faults(self):
        S.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/*/clone",
                                    "task_error": "can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout",
                                    "count": 1})
        u = S.ok("POST", "/nodes/pve/lxc/9000/clone", {"newid": 800})
        st = S.wait_task(u)
        self.assertEqual(st["exitstatus"],
                         "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout")
        self.assertEqual(S.api("GET", "/nodes/pve/lxc/800/config").status, 500)
        self.assertNotIn("lock", S.ok("GET", "/nodes/pve/lxc/9000/config"))
        S.clone(801)
        S.admin("POST", "/faults", {"path": "/nodes/*/lxc/801/status/start", "task_warnings": 1, "count": 1})
        u = S.ok("POST", "/nodes/pve/lxc/801/status/start")
        st = S.wait_task(u)
        self.assertEqual(st["exitstatus"], "WARNINGS: 1")
        log = [l["t"] for l in S.api("GET", f"/nodes/pve/tasks/{u}/log").data]
        self.assertEqual(log[-1], "TASK WARNINGS: 1")
        self.assertTrue(any(l.startswith("WARN: ") for l in log))
        S.wait_task(S.ok("POST", "/nodes/pve/lxc/801/status/stop"))


class T10Compat(unittest.TestCase):
    def tearDown(self):
        S.admin("PUT", "/settings", {"resources_lag": 0, "legacy_vmid_strings": False, "interfaces_endpoint": True})

    def test_resources_lag(self):
        S.admin("PUT", "/settings", {"resources_lag": 60})
        S.ok("GET", "/cluster/resources", {"type": "vm"})  # snapshot taken now
        S.clone(900, hostname="late")
        e = {x["vmid"]: x for x in S.ok("GET", "/cluster/resources", {"type": "vm"})}[900]
        self.assertEqual(e["status"], "unknown")
        self.assertNotIn("name", e)
        S.admin("PUT", "/settings", {"resources_lag": 0})
        e = {x["vmid"]: x for x in S.ok("GET", "/cluster/resources", {"type": "vm"})}[900]
        self.assertEqual((e["status"], e["name"]), ("stopped", "late"))

    def test_legacy_vmid_strings_and_no_interfaces(self):
        S.admin("PUT", "/settings", {"legacy_vmid_strings": True, "interfaces_endpoint": False})
        self.assertIn("9000", [x["vmid"] for x in S.ok("GET", "/nodes/pve/lxc")])
        r = S.api("GET", "/nodes/pve/lxc/9000/interfaces")
        self.assertEqual((r.status, r.reason), (501, "Method 'GET /nodes/pve/lxc/9000/interfaces' not implemented"))


class T10bPvestatdStorage(unittest.TestCase):
    def tearDown(self):
        S.admin("POST", "/pvestatd", {"stalled": False})
        S.admin("POST", "/storage/local/online")

    def members(self):
        return {x["vmid"]: x for x in S.ok("GET", "/pools/sandboxd")["members"]}

    def test_pvestatd_stalled(self):
        S.clone(910, hostname="st", pool="sandboxd")
        S.admin("POST", "/ct/910/lock", {"lock": "backup"})
        m = self.members()[910]
        self.assertEqual(m["status"], "stopped")
        self.assertNotIn("lock", m)  # pool members carry no lock
        S.admin("DELETE", "/ct/910/lock")
        self.assertTrue(S.admin("POST", "/pvestatd", {"stalled": True})["stalled"])
        S.wait_task(S.ok("POST", "/nodes/pve/lxc/910/status/start"))
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/910/status/current")["status"], "running")
        self.assertEqual(self.members()[910]["status"], "stopped")  # stale
        e = {x["vmid"]: x for x in S.ok("GET", "/cluster/resources", {"type": "vm"})}[910]
        self.assertEqual(e["status"], "stopped")
        S.clone(911, pool="sandboxd")  # created since: missing from the cache
        self.assertEqual(self.members()[911]["status"], "unknown")
        S.admin("POST", "/pve-cluster/restart")
        self.assertEqual({self.members()[v]["status"] for v in (910, 911)}, {"unknown"})
        S.admin("POST", "/pvestatd", {"stalled": False})
        self.assertEqual((self.members()[910]["status"], self.members()[911]["status"]), ("running", "stopped"))
        S.wait_task(S.ok("POST", "/nodes/pve/lxc/910/status/stop"))
        for v in (910, 911):
            S.wait_task(S.ok("DELETE", f"/nodes/pve/lxc/{v}"))

    def test_storage_offline_destroy(self):
        self.assertEqual(S.raw("POST", "/admin/storage/nope/offline", None, {}).status, 404)
        S.admin("POST", "/storage/local/offline")
        st = {x["storage"]: x["status"] for x in S.ok("GET", "/cluster/resources", {"type": "storage"})
              if x["node"] == "pve"}
        self.assertEqual((st["local"], st["local-lvm"]), ("unknown", "available"))
        S.clone(920)
        S.wait_task(S.ok("POST", "/nodes/pve/lxc/920/status/start"))
        u = S.ok("DELETE", "/nodes/pve/lxc/920", {"force": 1, "purge": 1, "destroy-unreferenced-disks": 1})
        self.assertEqual(S.wait_task(u)["exitstatus"], "storage 'local' is not online")
        self.assertIn("rootfs", S.ok("GET", "/nodes/pve/lxc/920/config"))  # half-deleted: config left
        self.assertFalse(os.path.isdir(S.admin("GET", "/ct/920")["rootfs"]))  # volume freed
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/920/status/current")["status"], "stopped")
        self.assertIn("can't activate volume", S.wait_task(S.ok("POST", "/nodes/pve/lxc/920/status/start"))["exitstatus"])
        u = S.ok("DELETE", "/nodes/pve/lxc/920", {"force": 1, "purge": 1})  # the retry finishes it
        self.assertEqual(S.wait_task(u)["exitstatus"], "OK")
        self.assertEqual(S.api("GET", "/nodes/pve/lxc/920/config").status, 500)
        S.clone(921)
        u = S.ok("DELETE", "/nodes/pve/lxc/921", {"force": 1, "purge": 1})
        self.assertEqual(S.wait_task(u)["exitstatus"], "OK")


class T11Instances(unittest.TestCase):
    def test_overlapping_subnet_refused(self):
        other = simlib.Sim({"bridge_subnet": S.info["bridge_subnet"], "transit_subnet": "10.216.1.0/30"})
        try:
            with self.assertRaises(RuntimeError) as cm:
                other.start()
            self.assertIn("overlap", str(cm.exception))
        finally:
            other.destroy()
        self.assertEqual(S.ok("GET", "/version")["release"], "8.4")

    def test_no_containers_mode(self):
        other = simlib.Sim({"containers": False, "dhcp_delay": 0.2})
        try:
            other.start()
            other.clone(100)
            ip = other.start_ct(100)
            self.assertTrue(ip.startswith(other.info["bridge_subnet"].rsplit(".", 1)[0]))
            self.assertEqual(other.info["bridge_subnet"], other.info["bridge_subnet"])
            other.wait_task(other.ok("POST", "/nodes/pve/lxc/100/status/stop"))
            self.assertIsNone(other.ok("GET", "/nodes/pve/lxc/100/interfaces"))
        finally:
            other.destroy()
        self.assertEqual(simlib.leftovers(other.info["instance"]), [])


if __name__ == "__main__":
    simlib.run_tests("__main__")
