#!/usr/bin/env python3
"""The Debian template image's cache (with a stand-in mmdebstrap, so no download): concurrent
builds wait for one, a failed build leaves nothing that looks valid, the key follows the package
list. And the overlay roots on the real image (when cached): a restart after kill -9 mounts them
again with their files, destroy and exit leave no mount. The real image is built first when
the machine has none (bounded by IMAGE_WAIT_S)."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import simlib  # noqa: E402
from pvesim import rootfs  # noqa: E402

IMAGE_WAIT_S = 400  # a cold build took 67-90 s on a shared 2-core machine; more under heavy load

FAKE = """#!/bin/sh
# stand-in for mmdebstrap: logs its call, makes a tiny root after a pause, or fails
echo "$$" >> "$FAKE_LOG"
sleep "${FAKE_SLEEP:-1}"
target=""
for a; do case "$a" in /*) target="$a";; esac; done
mkdir -p "$target/etc" "$target/dev" "$target/root" "$target/var/cache/apt/archives"
[ -n "$FAKE_FAIL" ] && { echo "E: no network" >&2; exit 1; }
echo 12.99 > "$target/etc/debian_version"
"""


def mounts_under(path):
    path = os.path.realpath(path).rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        return [l.split()[4] for l in f if l.split()[4].startswith(path)]


class TImageCache(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pve-sim-image-")
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir)
        with open(os.path.join(bindir, "mmdebstrap"), "w") as f:
            f.write(FAKE)
        os.chmod(os.path.join(bindir, "mmdebstrap"), 0o755)
        self.cache = os.path.join(self.tmp, "cache")
        self.log = os.path.join(self.tmp, "calls")
        self.env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"], PVESIM_CACHE_DIR=self.cache,
                        FAKE_LOG=self.log)

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])

    def build(self, check_only=False, **env):
        args = [sys.executable, simlib.SIM, "--build-template-image"] + (["--check-only"] if check_only else [])
        return subprocess.run(args, capture_output=True, text=True, env=dict(self.env, **env), timeout=60)

    def calls(self):
        try:
            return len(open(self.log).read().split())
        except OSError:
            return 0

    def test_concurrent_builds_make_one(self):
        self.assertEqual(self.build(check_only=True).returncode, 1)
        out = [None] * 3

        def one(i):
            out[i] = self.build(FAKE_SLEEP="2")
        ts = [threading.Thread(target=one, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for r in out:
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len({r.stdout for r in out}), 1)
        self.assertEqual(self.calls(), 1)  # the others waited on the lock, then found it built
        root = out[0].stdout.strip()
        self.assertTrue(root.startswith(self.cache + "/debian-") and root.endswith("/rootfs"), root)
        self.assertEqual(open(os.path.join(root, "etc", "debian_version")).read(), "12.99\n")
        # what the simulator adds: device nodes, /etc/ssh, no hostname or resolv.conf of the build
        for p in ("dev/null", "dev/ptmx", "dev/pts", "etc/ssh", "root/.ssh"):
            self.assertTrue(os.path.exists(os.path.join(root, p)), p)
        meta = json.load(open(os.path.join(os.path.dirname(root), "complete")))
        self.assertIn("python3-pytest", meta["packages"])
        self.assertEqual([x for x in os.listdir(self.cache) if x.startswith(".build-")], [])
        # cached: no second build, and --check-only says where
        self.assertEqual(self.build().stdout, out[0].stdout)
        self.assertEqual(self.build(check_only=True).stdout, out[0].stdout)
        self.assertEqual(self.calls(), 1)

    def test_failed_build_leaves_no_image(self):
        r = self.build(FAKE_FAIL="1", FAKE_SLEEP="0")
        self.assertEqual(r.returncode, 1)
        self.assertIn("mmdebstrap failed", r.stderr)
        self.assertIn("E: no network", r.stderr)
        self.assertEqual([x for x in os.listdir(self.cache) if not x.endswith(".lock")], [])
        self.assertEqual(self.build(check_only=True).returncode, 1)
        # a build that died half way (its temporary folder left) does not count either, and
        # the next build clears it
        dead = os.path.join(self.cache, f".build-debian-{rootfs.image_key()}-99999")
        os.makedirs(os.path.join(dead, "rootfs", "etc"))
        self.assertEqual(self.build(check_only=True).returncode, 1)
        r = self.build(FAKE_SLEEP="0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(dead))
        self.assertEqual(self.calls(), 2)

    def test_key_follows_package_list(self):
        k = rootfs.image_key()
        saved = list(rootfs.PACKAGES)
        try:
            rootfs.PACKAGES.append("ripgrep")
            self.assertNotEqual(rootfs.image_key(), k)
        finally:
            rootfs.PACKAGES[:] = saved
        self.assertEqual(rootfs.image_key(), k)


class TOverlayRoots(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # the real image: cached, or being built (tools/test starts that at its start), or built now
        t0 = time.time()
        r = subprocess.run([sys.executable, simlib.SIM, "--build-template-image"], capture_output=True, text=True,
                           timeout=IMAGE_WAIT_S)
        assert r.returncode == 0, r.stderr
        print(f"  Debian template image ready after {time.time() - t0:.1f} s")

    def test_kill9_restart_and_destroy(self):
        sim = simlib.Sim({"template_os": "debian"}, keep_state=True)
        try:
            sim.start(timeout=120)
            self.assertEqual(sim.info["templates"]["9000"]["os"], "debian")
            t0 = time.time()
            sim.wait_task(sim.clone(101))
            print(f"  linked clone of the Debian template: {time.time() - t0:.2f} s (clone_time 0.3 s)")
            ip = sim.start_ct(101)
            r = sim.ssh(ip, "echo kept > /root/f; python3 -c 'print(6*7)'")
            self.assertEqual((r.returncode, r.stdout), (0, "42\n"), r.stderr)
            sim.stop(signal.SIGKILL)  # leaves its mounts: the restart must take them over
            self.assertTrue(mounts_under(sim.state_dir))
            sim.start(timeout=60)
            ip = sim.wait_ip(101)
            r = sim.ssh(ip, "cat /root/f")
            self.assertEqual((r.returncode, r.stdout), (0, "kept\n"), r.stderr)
            self.assertEqual(len(mounts_under(sim.state_dir)), len(set(mounts_under(sim.state_dir))))
            sim.wait_task(sim.ok("POST", "/nodes/pve/lxc/101/status/stop"))
            sim.wait_task(sim.ok("DELETE", "/nodes/pve/lxc/101"))
            self.assertEqual([m for m in mounts_under(sim.state_dir) if "/ct/101/" in m + "/"], [])
            self.assertFalse(os.path.exists(os.path.join(sim.state_dir, "ct", "101")))
            sim.stop()
            self.assertEqual(mounts_under(sim.state_dir), [])
        finally:
            sim.keep_state = False
            sim.destroy()


if __name__ == "__main__":
    simlib.run_tests("__main__")
