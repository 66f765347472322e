#!/usr/bin/env python3
"""pve-sim's versions per node (node_versions): GET /version is the answering node's (the
first), GET /nodes/N/version each node's; GET .../interfaces is absent (501) before
pve-container 5.0.6 and, before 5.2.0, not forwarded: null for another node's container."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import simlib  # noqa: E402

S = None
VERSIONS = {"pve2": {"pve_manager": "8.2.4", "pve_container": "5.1.12"},
            "pve3": {"pve_manager": "8.0.4", "pve_container": "5.0.4"}}


def setUpModule():
    global S
    S = simlib.Sim({"node_versions": VERSIONS, "dhcp_delay": 0.05, "clone_time": 0.05,
                    "start_time": 0.05}, args=["--node-count", "3", "--no-containers"]).start()


def tearDownModule():
    if S:
        S.destroy()


class TVersions(unittest.TestCase):
    def test_1_versions(self):
        self.assertEqual(S.ok("GET", "/version")["version"], "8.4.1")
        self.assertEqual(S.ok("GET", "/nodes/pve1/version")["version"], "8.4.1")
        v2 = S.ok("GET", "/nodes/pve2/version")
        self.assertEqual((v2["version"], v2["release"]), ("8.2.4", "8.2"))
        self.assertEqual(S.ok("GET", "/nodes/pve3/version")["version"], "8.0.4")
        self.assertIn("pve-manager/8.0.4/", S.ok("GET", "/nodes/pve3/status")["pveversion"])

    def test_2_interfaces(self):
        for vmid, node, src in ((201, "pve1", 9000), (202, "pve2", 9001), (203, "pve3", 9002)):
            S.wait_task(S.ok("POST", f"/nodes/{node}/lxc/{src}/clone", {"newid": vmid}))
            S.start_ct(vmid, node=node, wait_ip=False)
        self.assertTrue(S.wait_ip(201, node="pve1"))
        # pve2: 5.1.12 has the endpoint but answers from the first node: null, always
        for _ in range(5):
            self.assertIsNone(S.ok("GET", "/nodes/pve2/lxc/202/interfaces"))
        r = S.api("GET", "/nodes/pve3/lxc/203/interfaces")
        self.assertEqual(r.status, 501, r)
        self.assertIn("not implemented", r.reason)


if __name__ == "__main__":
    simlib.run_tests("__main__")
