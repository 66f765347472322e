#!/usr/bin/env python3
"""tools/playground up / status / down: prints the documented keys and leaves nothing behind."""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import simlib  # noqa: E402

PLAYGROUND = os.path.join(os.path.dirname(os.path.dirname(simlib.HERE)), "tools", "playground")
KEYS = ["SANDBOXD_SOCKET", "SANDBOXD_CONFIG", "SANDBOXD_BIN", "SANDBOXD_SSH_KEY", "PVE_URL", "PVE_TOKEN_ID",
        "PVE_TOKEN_SECRET", "PVE_FINGERPRINT", "PVE_NODE", "PVE_TEMPLATE", "PVE_POOL", "SIM_INTERNET_IP",
        "SIM_LAN_IP", "PVE_TEMPLATE_HOST_KEY"]


class TPlayground(unittest.TestCase):
    def test_up_status_down(self):
        d = "/run/pve-sim-test-playground-%d" % os.getpid()
        run = lambda *a: subprocess.run([sys.executable, PLAYGROUND] + list(a) + ["--dir", d],
                                        capture_output=True, text=True, timeout=120)
        try:
            r = run("up", "--no-daemon", "--template-os", "busybox")  # the small template: fast
            self.assertEqual(r.returncode, 0, r.stderr)
            env = dict(l.split("=", 1) for l in r.stdout.splitlines())
            for k in KEYS:
                self.assertIn(k, env)
            self.assertTrue(env["PVE_TEMPLATE_HOST_KEY"].startswith("SHA256:"))
            self.assertRegex(env["PVE_FINGERPRINT"], r"^([0-9A-F]{2}:){31}[0-9A-F]{2}$")
            conf = open(env["SANDBOXD_CONFIG"]).read()
            for frag in (f"url = {env['PVE_URL']}", f"token_id = {env['PVE_TOKEN_ID']}",
                         f"fingerprint = {env['PVE_FINGERPRINT']}", f"template_host_key = {env['PVE_TEMPLATE_HOST_KEY']}",
                         f"key_file = {env['SANDBOXD_SSH_KEY']}", f"pool = {env['PVE_POOL']}"):
                self.assertIn(frag, conf)
            secret_file = [l.split("=", 1)[1].strip() for l in conf.splitlines() if l.startswith("token_secret_file")][0]
            self.assertEqual(open(secret_file).read().strip(), env["PVE_TOKEN_SECRET"])
            r = run("status")
            self.assertEqual(r.returncode, 0)
            self.assertIn("playground: up", r.stdout)
            # the API answers with the printed token
            import http.client, ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            host, port = env["PVE_URL"][len("https://"):].rsplit(":", 1)
            c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
            c.request("GET", f"/api2/json/nodes/{env['PVE_NODE']}/lxc/{env['PVE_TEMPLATE']}/config",
                      headers={"Authorization": f"PVEAPIToken={env['PVE_TOKEN_ID']}={env['PVE_TOKEN_SECRET']}"})
            self.assertEqual(c.getresponse().status, 200)
            inst = open(os.path.join(d, "pve-sim", "sim-info.json")).read().split('"instance": "')[1][:4]
        finally:
            r = run("down")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(d))
        self.assertEqual(simlib.leftovers(inst, d + "/pve-sim"), [])
        r = run("status")
        self.assertEqual(r.returncode, 3)


if __name__ == "__main__":
    simlib.run_tests("__main__")
