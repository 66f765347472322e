#!/usr/bin/env python3
"""pve-sim mount point volumes: mpN allocation, bind mounts inside the container (at start
and hot-plugged), unusedN, move_volume to another container with real files, its refusals,
privileges, clone and destroy, mounts again after a simulator restart."""

import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import simlib  # noqa: E402
from simlib import DAEMON  # noqa: E402

S = None
N = "/nodes/pve/lxc"


def setUpModule():
    global S
    S = simlib.Sim({"dhcp_delay": 0.3}).start()


def tearDownModule():
    if S:
        S.destroy()


def conf(vmid):
    return S.ok("GET", f"{N}/{vmid}/config")


def move(vmid, key, target, tkey=None, token=simlib.ADMIN):
    p = {"volume": key, "target-vmid": target}
    if tkey:
        p["target-volume"] = tkey
    return S.api("POST", f"{N}/{vmid}/move_volume", p, token=token)


def move_ok(vmid, key, target, tkey=None):
    r = move(vmid, key, target, tkey)
    assert r.status == 200, r
    st = S.wait_task(r.data)
    assert st["exitstatus"] == "OK", st
    return r.data


def stop(vmid):
    S.wait_task(S.ok("POST", f"{N}/{vmid}/status/stop"))


def vol_dir(volid):
    store, _, name = volid.partition(":")
    return os.path.join(S.state_dir, "storage", store, name.replace("/", "_"))


class T1Volumes(unittest.TestCase):
    def test_1_allocate_mount_move(self):
        S.clone(101, pool="sandboxd")
        S.clone(102, pool="sandboxd")
        S.ok("PUT", f"{N}/101/config", {"mp0": "local-lvm:2,mp=/data"}, token=DAEMON)
        self.assertEqual(conf(101)["mp0"], "local-lvm:vm-101-disk-1,mp=/data,size=2G")
        self.assertTrue(os.path.isdir(vol_dir("local-lvm:vm-101-disk-1")))
        ip = S.start_ct(101)
        r = S.ssh(ip, "echo kept > /data/f && cat /data/f && echo root > /rootfile")
        self.assertEqual(r.stdout.strip(), "kept", r.stderr)
        # the file is on the volume, not in the container's root
        with open(os.path.join(vol_dir("local-lvm:vm-101-disk-1"), "f")) as f:
            self.assertEqual(f.read(), "kept\n")
        r = move(101, "mp0", 102)
        self.assertEqual(r.status, 500)
        self.assertIn("Cannot move in-use volume while the source CT is running", r.reason)
        stop(101)
        upid = move_ok(101, "mp0", 102)
        self.assertIn(":move_volume:101-mp0>102-mp0:", upid)
        self.assertNotIn("mp0", conf(101))
        self.assertEqual(conf(102)["mp0"], "local-lvm:vm-102-disk-1,mp=/data,size=2G")
        self.assertFalse(os.path.exists(vol_dir("local-lvm:vm-101-disk-1")))
        ip = S.start_ct(102)
        r = S.ssh(ip, "cat /data/f; cat /rootfile 2>/dev/null || echo NOROOT")
        self.assertEqual(r.stdout.split(), ["kept", "NOROOT"], r.stderr)
        # hot-plugged into a running container
        S.clone(103, pool="sandboxd")
        ip3 = S.start_ct(103)
        stop(102)
        S.ok("PUT", f"{N}/102/config", {"mp0": "local-lvm:vm-102-disk-1,mp=/srv/vol,ro=1"})
        move_ok(102, "mp0", 103, "mp3")
        self.assertEqual(conf(103)["mp3"], "local-lvm:vm-103-disk-1,mp=/srv/vol,ro=1,size=2G")
        r = S.ssh(ip3, "cat /srv/vol/f; echo x > /srv/vol/g 2>/dev/null || echo READONLY")
        self.assertEqual(r.stdout.split(), ["kept", "READONLY"], r.stderr)

    def test_2_refusals(self):
        S.clone(111)
        S.clone(112)
        S.ok("PUT", f"{N}/111/config", {"mp0": "local-lvm:1,mp=/a", "mp1": "local-lvm:1,mp=/b"})
        S.ok("PUT", f"{N}/112/config", {"mp0": "local-lvm:1,mp=/a"})
        cases = [({"volume": "rootfs", "target-vmid": 112}, "Cannot move to/from 'rootfs'"),
                 ({"volume": "mp0", "target-vmid": 112},
                  "Target volume key 'mp0' is already in use for container '112'"),
                 ({"volume": "mp7", "target-vmid": 112, "target-volume": "mp7"},
                  "volume 'mp7' for container '111' does not exist"),
                 ({"volume": "mp0", "target-vmid": 999, "target-volume": "mp5"}, "could not find CT 999"),
                 ({"volume": "mp0", "target-vmid": 9000, "target-volume": "mp5"},
                  "Can't move volumes from or to template CT")]
        for p, msg in cases:
            r = S.api("POST", f"{N}/111/move_volume", p)
            self.assertEqual((r.status, r.reason), (500, msg), p)
        r = S.api("POST", f"{N}/111/move_volume", {"volume": "mp0"})
        self.assertEqual(r.status, 400)
        self.assertIn("target-vmid", (r.json or {}).get("errors", {}))
        for bad in ("local-lvm:1", "local-lvm:1,mp=/a/../etc", "1,mp=/x"):
            r = S.api("PUT", f"{N}/111/config", {"mp4": bad})
            self.assertEqual(r.status, 400, bad)
        # removal from a stopped CT keeps the volume as unusedN; unused cannot become a mount point
        S.ok("PUT", f"{N}/111/config", {"delete": "mp1"})
        c = conf(111)
        self.assertEqual(c["unused0"], "local-lvm:vm-111-disk-2")
        self.assertNotIn("mp1", c)
        r = move(111, "unused0", 112, "mp1")
        self.assertEqual((r.status, r.reason), (500, "Moving an unused volume to a used one is not possible"))
        move_ok(111, "unused0", 112, "unused0")
        self.assertEqual(conf(112)["unused0"], "local-lvm:vm-112-disk-2")
        # deleting an unused volume frees it
        S.ok("PUT", f"{N}/112/config", {"delete": "unused0"})
        self.assertFalse(os.path.exists(vol_dir("local-lvm:vm-112-disk-2")))
        # a volume in a snapshot stays
        S.wait_task(S.ok("POST", f"{N}/111/snapshot", {"snapname": "s1"}))
        r = move(111, "mp0", 112, "mp2")
        self.assertEqual((r.status, r.reason), (500, "Cannot move volume used by a snapshot to another container"))

    def test_3_privileges(self):
        S.clone(121, pool="sandboxd")
        S.clone(122)  # outside the daemon's pool
        S.ok("PUT", f"{N}/121/config", {"mp0": "local-lvm:1,mp=/a"}, token=DAEMON)
        r = S.api("PUT", f"{N}/121/config", {"mp1": "local:1,mp=/b"}, token=DAEMON)
        self.assertEqual((r.status, r.reason),
                         (403, "Permission check failed (/storage/local, Datastore.AllocateSpace)"))
        r = move(121, "mp0", 122, token=DAEMON)
        self.assertEqual((r.status, r.reason), (403, "Permission check failed (/vms/122, VM.Config.Disk)"))

    def test_4_running_removal_pending_clone_destroy(self):
        S.clone(131, pool="sandboxd")
        S.ok("PUT", f"{N}/131/config", {"mp0": "local-lvm:1,mp=/a"})
        ip = S.start_ct(131)
        S.ssh(ip, "echo one > /a/f")
        S.ok("PUT", f"{N}/131/config", {"delete": "mp0"})
        # cannot be hot-unplugged: pending until the next start, mounted meanwhile
        self.assertIn("mp0", S.ok("GET", f"{N}/131/config", {"current": 1}))
        self.assertNotIn("mp0", conf(131))
        pend = {e["key"]: e for e in S.ok("GET", f"{N}/131/pending")}
        self.assertEqual(pend["mp0"].get("delete"), 1)
        self.assertEqual(S.ssh(ip, "cat /a/f").stdout, "one\n")
        stop(131)
        S.start_ct(131, wait_ip=False)
        c = conf(131)
        self.assertNotIn("mp0", c)
        self.assertEqual(c["unused0"], "local-lvm:vm-131-disk-1")
        stop(131)
        S.ok("PUT", f"{N}/131/config", {"mp2": "local-lvm:vm-131-disk-1,mp=/b"})
        c = conf(131)
        self.assertNotIn("unused0", c)
        # a clone gets its own copy of each mount point
        S.clone(132, src=131, full=1)
        self.assertEqual(conf(132)["mp2"], "local-lvm:vm-132-disk-1,mp=/b,size=1G")
        with open(os.path.join(vol_dir("local-lvm:vm-132-disk-1"), "f")) as f:
            self.assertEqual(f.read(), "one\n")
        # a destroy frees every volume of the config
        S.wait_task(S.ok("DELETE", f"{N}/131", {"purge": 1}))
        self.assertFalse(os.path.exists(vol_dir("local-lvm:vm-131-disk-1")))
        self.assertTrue(os.path.exists(vol_dir("local-lvm:vm-132-disk-1")))

    def test_5_restart_mounts_again(self):
        S.clone(141, pool="sandboxd")
        S.ok("PUT", f"{N}/141/config", {"mp0": "local-lvm:1,mp=/persist"})
        ip = S.start_ct(141)
        S.ssh(ip, "echo before > /persist/f")
        S.stop(signal.SIGKILL)
        S.start()
        ip = S.wait_ip(141)
        r = S.ssh(ip, "cat /persist/f && echo after >> /persist/f")
        self.assertEqual(r.stdout, "before\n", r.stderr)
        with open(os.path.join(vol_dir(conf(141)["mp0"].split(",")[0]), "f")) as f:
            self.assertEqual(f.read(), "before\nafter\n")

    def test_6_hotplug_fails_pending(self):
        """A failed hot-plug is a warning: the mount point stays pending until the next start."""
        S.clone(151, pool="sandboxd")
        S.clone(152, pool="sandboxd")
        S.ok("PUT", f"{N}/151/config", {"mp0": "local-lvm:1,mp=/late"})
        ip = S.start_ct(151)
        S.ssh(ip, "echo kept > /late/f")
        stop(151)
        ip2 = S.start_ct(152)
        S.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/151/move_volume",
                                    "hotplug_error": "mount failed", "count": 1})
        r = move(151, "mp0", 152, "mp4")
        self.assertEqual(r.status, 200, r)
        st = S.wait_task(r.data)
        self.assertEqual(st["exitstatus"], "WARNINGS: 1", st)
        log = [x["t"] for x in S.ok("GET", f"/nodes/pve/tasks/{r.data}/log")]
        self.assertIn("WARN: unable to hotplug mp4: mount failed", log)
        vol = "local-lvm:vm-152-disk-1,mp=/late,size=1G"
        self.assertNotIn("mp0", conf(151))
        self.assertEqual(conf(152)["mp4"], vol)  # pending values merged in
        self.assertNotIn("mp4", S.ok("GET", f"{N}/152/config", {"current": 1}))
        pend = {e["key"]: e for e in S.ok("GET", f"{N}/152/pending")}
        self.assertEqual(pend["mp4"], {"key": "mp4", "pending": vol})
        r = S.ssh(ip2, "cat /late/f 2>/dev/null || echo NOTMOUNTED")
        self.assertEqual(r.stdout, "NOTMOUNTED\n", r.stderr)
        # applied at the next start
        stop(152)
        ip2 = S.start_ct(152)
        self.assertEqual(S.ok("GET", f"{N}/152/config", {"current": 1})["mp4"], vol)
        self.assertNotIn("pending", {e["key"]: e for e in S.ok("GET", f"{N}/152/pending")}["mp4"])
        self.assertEqual(S.ssh(ip2, "cat /late/f").stdout, "kept\n")


if __name__ == "__main__":
    simlib.run_tests("__main__")
