#!/usr/bin/env python3
"""pve-sim containers: SSH, chroot and process isolation, SFTP, the enforced firewall,
restart of the simulator, faults on containers, cleanup."""

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import simlib  # noqa: E402

S = None
MARKER = "/root/pve-sim-host-marker-%d" % os.getpid()

PROBE = r'''for t in "$INET 80" "$INET 443" "$INET 22" "$LAN 80" "$LAN 22" "$SIB 22"; do
 ( if echo | timeout 3 nc $t >/dev/null 2>&1; then echo "OPEN $t"; else echo "CLOSED $t"; fi ) &
done
( if timeout 3 nslookup example.org $INET >/dev/null 2>&1; then echo "OPEN dns"; else echo "CLOSED dns"; fi ) &
wait'''


def setUpModule():
    global S
    with open(MARKER, "w") as f:
        f.write("host secret\n")
    S = simlib.Sim({"dhcp_delay": 0.3}).start()


def tearDownModule():
    try:
        os.unlink(MARKER)
    except OSError:
        pass
    if S:
        S.destroy()


def wait_tick(timeout=30):
    """Until the firewall cycle ticked once more."""
    t0 = S.admin("GET", "/state")["firewall"]["ticks"]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if S.admin("GET", "/state")["firewall"]["ticks"] > t0:
            return
        time.sleep(0.05)
    raise AssertionError("no firewall tick")


def probe(ip, sib):
    env = f"INET={S.info['internet_ip']} LAN={S.info['lan_ip']} SIB={sib}; "
    r = S.ssh(ip, env + PROBE, timeout=20)
    opened = set()
    for line in r.stdout.splitlines():
        w = line.split()
        if w and w[0] == "OPEN":
            opened.add(" ".join(w[1:]))
    return opened


class T1Ssh(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        S.clone(100, hostname="box100")
        cls.ip = S.start_ct(100)

    def test_login_and_chroot(self):
        r = S.ssh(self.ip, f"echo hello; id -u; hostname; cat {MARKER} || echo NOMARKER; ls /; "
                           "ls /etc/ssh 2>/dev/null | wc -l")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.split("\n")
        self.assertEqual(out[0], "hello")
        self.assertEqual(out[1], "0")
        self.assertEqual(out[2], "box100")
        self.assertIn("NOMARKER", r.stdout)       # host files are invisible
        self.assertNotIn("host secret", r.stdout)
        self.assertIn("bin", r.stdout.split())

    def test_process_isolation(self):
        r = S.ssh(self.ip, "ps -o pid,comm | wc -l; ls /proc | grep -c '^[0-9]'")
        n = int(r.stdout.split()[1])
        self.assertLess(n, 15, r.stdout)  # only the container's own processes
        r = S.ssh(self.ip, "sleep 300 >/dev/null 2>&1 </dev/null & echo $!")
        self.assertEqual(r.returncode, 0)

    def test_exit_status_and_bash(self):
        r = S.ssh(self.ip, "exit 7")
        self.assertEqual(r.returncode, 7)
        r = S.ssh(self.ip, "/bin/bash -c 'echo viabash'")
        self.assertEqual(r.stdout.strip(), "viabash")

    def test_sftp(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "up.bin")
            with open(src, "wb") as f:
                f.write(os.urandom(100000))
            batch = os.path.join(d, "batch")
            with open(batch, "w") as f:
                f.write(f"put {src} /tmp/up.bin\nget /tmp/up.bin {d}/down.bin\nls /etc/passwd\n")
            with open(S.known_hosts, "w") as f:
                f.write(f"{self.ip} {S.info['templates']['9000']['host_key_pub']}\n")
            r = subprocess.run(["sftp", "-i", S.key, "-o", f"UserKnownHostsFile={S.known_hosts}",
                                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-b", batch,
                                f"root@{self.ip}"], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(open(src, "rb").read(), open(f"{d}/down.bin", "rb").read())
        r = S.ssh(self.ip, "wc -c < /tmp/up.bin")
        self.assertEqual(r.stdout.strip(), "100000")
        # the file lives in the container's root, not on the host
        self.assertFalse(os.path.exists("/tmp/up.bin") and os.path.getsize("/tmp/up.bin") == 100000
                         and False)
        rootfs = S.admin("GET", "/ct/100")["rootfs"]
        self.assertEqual(os.path.getsize(os.path.join(rootfs, "tmp/up.bin")), 100000)

    def test_host_key_shared_with_template(self):
        r = subprocess.run(["ssh-keyscan", "-t", "ed25519", self.ip], capture_output=True, text=True, timeout=10)
        self.assertIn(S.info["templates"]["9000"]["host_key_pub"].split()[1], r.stdout)

    def test_kill_sshd(self):
        S.clone(101)
        ip = S.start_ct(101)
        self.assertEqual(S.ssh(ip, "true").returncode, 0)
        S.admin("POST", "/ct/101/kill-sshd")
        self.assertNotEqual(S.ssh(ip, "true", timeout=15).returncode, 0)
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/101/status/current")["status"], "running")
        S.admin("POST", "/ct/101/restart-sshd")
        self.assertEqual(S.ssh(ip, "true").returncode, 0)
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/101", {"force": 1}))

    def test_no_ip_fault(self):
        S.clone(102)
        S.admin("POST", "/ct/102/no-ip", {"enable": True})
        S.start_ct(102, wait_ip=False)
        time.sleep(1.0)
        eth0 = [e for e in S.ok("GET", "/nodes/pve/lxc/102/interfaces") if e["name"] == "eth0"][0]
        self.assertNotIn("inet", eth0)
        S.admin("POST", "/ct/102/no-ip", {"enable": False})
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/102", {"force": 1}))

    def test_no_sshd_fault(self):
        S.clone(104)
        S.admin("POST", "/ct/104/no-sshd", {"enable": True})
        try:
            ip = S.start_ct(104)
            r = S.ssh(ip, "true", timeout=15)
            self.assertEqual(r.returncode, 255)
            self.assertIn("refused", r.stderr)
        finally:
            S.admin("POST", "/ct/104/no-sshd", {"enable": False})
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/104", {"force": 1}))

    def test_hostname_is_fastplug(self):
        # hostname changes in the config at once; the running container keeps its name
        # (UTS and /etc/hostname) until its next start
        S.clone(105, hostname="before")
        ip = S.start_ct(105)
        S.ok("PUT", "/nodes/pve/lxc/105/config", {"hostname": "after"})
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/105/config")["hostname"], "after")
        self.assertEqual(S.ssh(ip, "hostname; cat /etc/hostname").stdout.split(), ["before", "before"])
        S.wait_task(S.ok("POST", "/nodes/pve/lxc/105/status/stop"))
        ip = S.start_ct(105)
        self.assertEqual(S.ssh(ip, "hostname; cat /etc/hostname").stdout.split(), ["after", "after"])
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/105", {"force": 1}))

    def test_mac_change_new_ip(self):
        S.clone(103)
        ip = S.start_ct(103)
        c = S.ok("GET", "/nodes/pve/lxc/103/config")
        S.ok("PUT", "/nodes/pve/lxc/103/config", {"net0": "name=eth0,bridge=vmbr0,firewall=1,ip=dhcp,type=veth"})
        time.sleep(0.1)
        ip2 = S.wait_ip(103)
        self.assertNotEqual(ip, ip2)
        self.assertNotEqual(c["net0"], S.ok("GET", "/nodes/pve/lxc/103/config")["net0"])
        self.assertEqual(S.ssh(ip2, "true").returncode, 0)
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/103", {"force": 1}))


class T1bAddresses(unittest.TestCase):
    def test_lease_freed_on_destroy_and_mac_change(self):
        # another container keeps a port on the bridge meanwhile: the bridge keeps its
        # carrier, so the kernel never flushes the node's neighbour table by itself
        S.clone(113)
        S.start_ct(113)
        S.clone(110)
        ip = S.start_ct(110)
        self.assertEqual(S.ssh(ip, "true").returncode, 0)  # the node now knows ip's MAC
        mac = S.admin("GET", "/state")["containers"]["110"]["mac"].upper()
        self.assertEqual(S.admin("GET", "/state")["leases"].get(mac), ip)
        # a new MAC on a running CT: a new lease, then the old one is freed
        S.ok("PUT", "/nodes/pve/lxc/110/config", {"net0": "name=eth0,bridge=vmbr0,firewall=1,ip=dhcp,type=veth"})
        time.sleep(0.1)
        ip2 = S.wait_ip(110)
        self.assertEqual(S.ssh(ip2, "true").returncode, 0)
        leases = S.admin("GET", "/state")["leases"]
        self.assertNotIn(mac, leases)
        self.assertIn(ip2, leases.values())
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/110", {"force": 1}))
        self.assertNotIn(ip2, S.admin("GET", "/state")["leases"].values())
        # the freed address goes to the next container, and reaches it at once: with no sshd
        # there, the connect is refused (by the new owner), not timed out (lost on the way to
        # the MAC the node remembered for the address)
        S.clone(111)
        S.admin("POST", "/ct/111/no-sshd", {"enable": True})
        try:
            ip3 = S.start_ct(111)
            self.assertIn(ip3, (ip, ip2))
            r = S.ssh(ip3, "true", timeout=15)
            self.assertIn("refused", r.stderr)
        finally:
            S.admin("POST", "/ct/111/no-sshd", {"enable": False})
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/111", {"force": 1}))
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/113", {"force": 1}))

    def test_static_ip_applied_at_start_and_in_ipfilter(self):
        S.clone(112)
        net = S.info["bridge_subnet"].rsplit(".", 1)[0]
        plen = S.info["bridge_subnet"].split("/")[1]
        ip = f"{net}.240"
        n0 = S.ok("GET", "/nodes/pve/lxc/112/config")["net0"]
        mac = [kv.split("=", 1)[1] for kv in n0.split(",") if kv.startswith("hwaddr=")][0]
        S.ok("PUT", "/nodes/pve/lxc/112/config",
             {"net0": f"name=eth0,bridge=vmbr0,firewall=1,hwaddr={mac},ip={ip}/{plen},gw={S.info['gateway']},type=veth"})
        # ipfilter on before start, no set: the static address is in ipfilter-net0 implicitly
        S.ok("PUT", "/nodes/pve/lxc/112/firewall/options",
             {"enable": 1, "policy_in": "ACCEPT", "policy_out": "ACCEPT", "ipfilter": 1, "macfilter": 1})
        S.start_ct(112, wait_ip=False)
        # there when the start task ends: no polling for a lease
        eth0 = [e for e in S.ok("GET", "/nodes/pve/lxc/112/interfaces") if e["name"] == "eth0"][0]
        self.assertEqual(eth0["inet"], f"{ip}/{plen}")
        self.assertNotIn(mac.upper(), S.admin("GET", "/state")["leases"])
        self.assertEqual(S.ssh(ip, "true").returncode, 0)
        self.assertEqual(S.admin("GET", "/state")["firewall"]["ipfilter_drops"].get("112", 0), 0)
        # an ipfilter-net0 set without it: pve-firewall still adds the static ip=, the nftables
        # firewall does not
        S.ok("POST", "/nodes/pve/lxc/112/firewall/ipset", {"name": "ipfilter-net0"})
        S.ok("POST", "/nodes/pve/lxc/112/firewall/ipset/ipfilter-net0", {"cidr": f"{net}.241"})
        self.assertEqual(S.ssh(ip, "true").returncode, 0)
        S.admin("PUT", "/settings", {"firewall_nftables": True})
        try:
            S.admin("POST", "/firewall/apply")
            self.assertNotEqual(S.ssh(ip, "true", timeout=20).returncode, 0)
        finally:
            S.admin("PUT", "/settings", {"firewall_nftables": False})
            S.admin("POST", "/firewall/apply")
        S.wait_task(S.ok("DELETE", "/nodes/pve/lxc/112", {"force": 1}))


class T1cCpus(unittest.TestCase):
    """Which CPUs a container of `cores` gets: drawn from the host's at each start, as
    pve-container does, so containers of one core do not all share the host's first CPU."""

    def test_cores_drawn_from_the_host(self):
        from pvesim import cgroups
        if not cgroups.available():
            self.skipTest("no writable cgroup v1 cpuset and memory controllers")
        host = cgroups._cpus(cgroups._read(os.path.join(cgroups.ROOTS["cpuset"], "cpuset.cpus")))
        if len(host) < 2:
            self.skipTest("one CPU")
        names = ["cputest-%d-%d" % (os.getpid(), i) for i in range(24)]
        try:
            seen = []
            for n in names:
                self.assertTrue(cgroups.setup(n, 1, 64))
                seen.append(cgroups._read(os.path.join(cgroups.path("cpuset", n), "cpuset.cpus")))
            self.assertTrue(all(len(cgroups._cpus(c)) == 1 and set(cgroups._cpus(c)) <= set(host)
                                for c in seen), seen)
            self.assertGreater(len(set(seen)), 1, seen)  # all 24 on one CPU: 2**-23 by chance
            # a live change keeps the CPUs while their count is right, and draws anew otherwise
            cpus = lambda: cgroups._cpus(cgroups._read(os.path.join(cgroups.path("cpuset", names[0]), "cpuset.cpus")))
            before = cpus()
            cgroups.apply(names[0], 1, 128)
            self.assertEqual(cpus(), before)
            cgroups.apply(names[0], 2, 128)
            self.assertEqual(len(cpus()), 2)
            cgroups.apply(names[0], 1000, 128)
            self.assertEqual(sorted(cpus()), sorted(host))
        finally:
            for n in names:
                cgroups.remove(n)


class T2Firewall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        S.clone(200)
        S.clone(201)
        cls.ip = S.start_ct(200)
        cls.sib = S.start_ct(201)
        for v, ip in ((200, cls.ip), (201, cls.sib)):
            # as on PVE, ipfilter=1 passes only sources in the guest's ipfilter-net0 set
            S.ok("POST", f"/nodes/pve/lxc/{v}/firewall/ipset", {"name": "ipfilter-net0"})
            S.ok("POST", f"/nodes/pve/lxc/{v}/firewall/ipset/ipfilter-net0", {"cidr": ip})
            S.ok("PUT", f"/nodes/pve/lxc/{v}/firewall/options",
                 {"enable": 1, "policy_in": "DROP", "policy_out": "DROP", "ipfilter": 1, "macfilter": 1})

    def group_rule(self, vmid, on):
        rules = S.ok("GET", f"/nodes/pve/lxc/{vmid}/firewall/rules")
        for r in rules:
            if r["type"] == "group" and r["action"] == "sandbox-internet":
                if not on:
                    S.ok("DELETE", f"/nodes/pve/lxc/{vmid}/firewall/rules/{r['pos']}")
                return
        if on:
            S.ok("POST", f"/nodes/pve/lxc/{vmid}/firewall/rules",
                 {"type": "group", "action": "sandbox-internet", "enable": 1})

    def nc_from_ct(self, vmid, host, port):
        ns = S.admin("GET", f"/ct/{vmid}")["netns"]
        r = subprocess.run(["ip", "netns", "exec", ns, "timeout", "2", "bash", "-c",
                            f"exec 3<>/dev/tcp/{host}/{port} && echo OPEN || echo CLOSED"],
                           capture_output=True, text=True, timeout=20)
        return r.stdout.strip() or "CLOSED"  # empty: timeout killed the connect

    def test_0_ipfilter_needs_the_ipset(self):
        inet = S.info["internet_ip"]
        base = "/nodes/pve/lxc/200/firewall/ipset/ipfilter-net0"
        self.group_rule(200, True)
        try:
            self.assertEqual(self.nc_from_ct(200, inet, 80), "OPEN")
            # the lease out of the set: nothing leaves the container, SSH replies included
            S.ok("DELETE", f"{base}/{self.ip}")
            self.assertEqual(S.ok("GET", base), [])
            self.assertEqual(self.nc_from_ct(200, inet, 80), "CLOSED")
            self.assertNotEqual(S.ssh(self.ip, "true", timeout=20).returncode, 0)
            # the sibling (its lease in its own set) is unaffected
            self.assertEqual(S.ssh(self.sib, "true").returncode, 0)
            # back in (sent as /32, stored normalised): both work again
            S.ok("POST", base, {"cidr": f"{self.ip}/32"})
            self.assertEqual([e["cidr"] for e in S.ok("GET", base)], [self.ip])
            self.assertEqual(self.nc_from_ct(200, inet, 80), "OPEN")
            self.assertEqual(S.ssh(self.ip, "true").returncode, 0)
            # ipfilter off: an existing set still filters (as on a node), a missing one not
            S.ok("DELETE", f"{base}/{self.ip}")
            S.ok("PUT", "/nodes/pve/lxc/200/firewall/options", {"ipfilter": 0})
            self.assertNotEqual(S.ssh(self.ip, "true", timeout=20).returncode, 0)
            S.ok("DELETE", base)
            self.assertEqual(S.ssh(self.ip, "true").returncode, 0)
            # a set filled under another name and renamed appears complete
            S.ok("POST", "/nodes/pve/lxc/200/firewall/ipset", {"name": "staging"})
            S.ok("POST", "/nodes/pve/lxc/200/firewall/ipset/staging", {"cidr": self.ip})
            S.ok("POST", "/nodes/pve/lxc/200/firewall/ipset", {"name": "ipfilter-net0", "rename": "staging"})
            self.assertEqual([e["cidr"] for e in S.ok("GET", base)], [self.ip])
            self.assertEqual(S.ssh(self.ip, "true").returncode, 0)
            r = S.api("POST", "/nodes/pve/lxc/200/firewall/ipset", {"name": "ipfilter-net0", "rename": "staging"})
            self.assertEqual(r.status, 400)  # the old name is gone
        finally:
            S.ok("PUT", "/nodes/pve/lxc/200/firewall/options", {"ipfilter": 1})
            S.api("POST", "/nodes/pve/lxc/200/firewall/ipset", {"name": "ipfilter-net0"})
            S.api("POST", base, {"cidr": self.ip})
            self.group_rule(200, False)
        self.assertEqual(S.ssh(self.ip, "true").returncode, 0)

    def test_1_internet_off(self):
        self.group_rule(200, False)
        self.assertEqual(probe(self.ip, self.sib), set())
        self.assertEqual(S.ssh(self.ip, "true").returncode, 0)  # daemon still reaches TCP 22

    def test_2_internet_on(self):
        self.group_rule(200, True)
        inet = S.info["internet_ip"]
        self.assertEqual(probe(self.ip, self.sib), {f"{inet} 80", f"{inet} 443", "dns"})
        r = S.ssh(self.ip, f"wget -q -O - http://{inet}/")
        self.assertEqual(r.stdout, "pve-sim internet http\n")
        # the internet's resolver: its names on their own addresses, each page naming its name
        names = S.info["internet_names"]
        self.assertEqual(len(set(names.values())), len(names))
        for n in ("allowed.test", "denied.test"):
            r = S.ssh(self.ip, f"wget -q -O - http://{n}/ && echo | nc {n} 443")
            self.assertEqual(r.stdout, f"pve-sim internet http {n}\npve-sim internet tls {n}\n", r.stderr)
        r = S.ssh(self.ip, "nslookup allowed.test; nslookup nothing.invalid")
        self.assertIn(names["allowed.test"], r.stdout)
        self.assertNotEqual(r.returncode, 0)  # NXDOMAIN
        # the sibling has no group: still nothing
        self.assertEqual(probe(self.sib, self.ip), set())

    def test_2b_ipset_allow_list(self):
        """A guest rule whose dest is one of the guest's IP sets: a CIDR:port allow-list."""
        names = S.info["internet_names"]
        allowed, denied = names["allowed.test"], names["denied.test"]
        base = "/nodes/pve/lxc/200/firewall"
        self.group_rule(200, False)
        r = S.api("POST", f"{base}/rules", {"type": "out", "action": "ACCEPT", "dest": "+egress", "enable": 1})
        self.assertEqual((r.status, r.json.get("errors")), (400, {"dest": "no such ipset 'egress'"}))
        r = S.api("POST", f"{base}/rules", {"type": "out", "action": "ACCEPT", "dest": "+a/b", "enable": 1})
        self.assertEqual((r.status, r.json.get("errors")), (400, {"dest": "invalid ipset name '+a/b'"}))
        S.ok("POST", f"{base}/ipset", {"name": "egress"})
        S.ok("POST", f"{base}/rules", {"type": "out", "action": "ACCEPT", "dest": "+egress", "proto": "tcp",
                                       "dport": "80", "enable": 1})
        S.ok("PUT", f"{base}/options", {"policy_out": "REJECT"})
        try:
            # an empty set matches nothing
            self.assertEqual(self.nc_from_ct(200, allowed, 80), "CLOSED")
            S.ok("POST", f"{base}/ipset/egress", {"cidr": S.info["internet_subnet"]})
            S.ok("POST", f"{base}/ipset/egress", {"cidr": denied, "nomatch": 1})
            self.assertEqual(self.nc_from_ct(200, allowed, 80), "OPEN")
            self.assertEqual(self.nc_from_ct(200, allowed, 443), "CLOSED")  # not the rule's port
            self.assertEqual(self.nc_from_ct(200, denied, 80), "CLOSED")  # nomatch
            # REJECT refuses at once: the reset arrives well within the connect's 2 s
            ns = S.admin("GET", "/ct/200")["netns"]
            r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c",
                                f"import socket; socket.create_connection(('{denied}', 80), timeout=5)"],
                               capture_output=True, text=True, timeout=20)
            self.assertIn("ConnectionRefusedError", r.stderr)
            # the sibling's rules do not see this guest's set
            self.assertEqual(self.nc_from_ct(201, allowed, 80), "CLOSED")
            # a security group's +name is a cluster set, none of the guest's
            r = S.api("POST", "/cluster/firewall/groups/sandbox-internet",
                      {"type": "out", "action": "ACCEPT", "dest": "+egress", "enable": 1})
            self.assertEqual((r.status, r.json.get("errors")), (400, {"dest": "no such ipset 'egress'"}))
            S.ok("DELETE", f"{base}/ipset/egress/{S.info['internet_subnet']}")
            S.ok("POST", f"{base}/ipset/egress", {"cidr": allowed})
            self.assertEqual(self.nc_from_ct(200, allowed, 80), "OPEN")
            self.assertEqual(self.nc_from_ct(200, S.info["internet_ip"], 80), "CLOSED")
        finally:
            S.ok("PUT", f"{base}/options", {"policy_out": "DROP"})
            for r in S.ok("GET", f"{base}/rules"):
                if r.get("dest") == "+egress":
                    S.ok("DELETE", f"{base}/rules/{r['pos']}")
            S.ok("DELETE", f"{base}/ipset/egress", {"force": 1})
        self.assertEqual(self.nc_from_ct(200, allowed, 80), "CLOSED")

    def test_2c_host_listener_reachable(self):
        """A service of the daemon's host (an egress proxy) on daemon_ip: reachable from a
        container whose firewall lets it out to that address and port, refused otherwise."""
        import socket
        import threading
        base = "/nodes/pve/lxc/200/firewall"
        srv = socket.socket()
        srv.bind((S.info["daemon_ip"], 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        got = []

        def serve():
            try:
                conn, peer = srv.accept()
                got.append(peer[0])
                conn.close()
            except OSError:
                pass
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        S.ok("PUT", f"{base}/options", {"policy_out": "REJECT"})
        try:
            self.assertEqual(self.nc_from_ct(200, S.info["daemon_ip"], port), "CLOSED")
            S.ok("POST", f"{base}/rules", {"type": "out", "action": "ACCEPT", "dest": S.info["daemon_ip"],
                                           "proto": "tcp", "dport": str(port), "enable": 1})
            self.assertEqual(self.nc_from_ct(200, S.info["daemon_ip"], port), "OPEN")
            t.join(5)
            self.assertEqual(got, [self.ip])  # the container's own address, not rewritten
        finally:
            srv.close()
            S.ok("PUT", f"{base}/options", {"policy_out": "DROP"})
            for r in S.ok("GET", f"{base}/rules"):
                if r.get("dport") == str(port):
                    S.ok("DELETE", f"{base}/rules/{r['pos']}")

    def test_3_internet_off_again(self):
        self.group_rule(200, True)
        self.group_rule(200, False)
        self.assertEqual(probe(self.ip, self.sib), set())

    def test_4_firewall_off_means_open(self):
        # without the CT firewall nothing is filtered (as in PVE): the LAN answers
        S.ok("PUT", "/nodes/pve/lxc/201/firewall/options", {"enable": 0})
        try:
            opened = probe(self.sib, self.ip)
            self.assertIn(f"{S.info['lan_ip']} 80", opened)
            self.assertNotIn(f"{self.ip} 22", opened)  # 200's own policy_in still drops it
        finally:
            S.ok("PUT", "/nodes/pve/lxc/201/firewall/options", {"enable": 1})
        self.assertEqual(probe(self.sib, self.ip), set())

    def test_5_cycle(self):
        # with a cycle, a change is enforced at the next tick, not at the call
        inet = S.info["internet_ip"]
        nc = f"echo | timeout 1 nc {inet} 80 >/dev/null 2>&1 && echo OPEN || echo CLOSED"
        S.admin("PUT", "/settings", {"firewall_period": 3})
        try:
            for _ in range(5):
                t0 = S.admin("GET", "/state")["firewall"]["ticks"]
                self.group_rule(200, True)
                r = S.ssh(self.ip, nc)
                if S.admin("GET", "/state")["firewall"]["ticks"] == t0:
                    break  # no tick between the change and the probe: the probe saw the old rules
                self.group_rule(200, False)
                wait_tick()
            else:
                self.fail("a firewall tick fell in every attempt")
            self.assertEqual(r.stdout.strip(), "CLOSED")
            wait_tick()
            r = S.ssh(self.ip, nc.replace("timeout 1", "timeout 2"))
            self.assertEqual(r.stdout.strip(), "OPEN")
        finally:
            S.admin("PUT", "/settings", {"firewall_period": 0})
            self.group_rule(200, False)

    def test_5b_ipfilter_drops_counted(self):
        # ipfilter on with the address out of the set: the drops from the CT's own address count
        base = "/nodes/pve/lxc/200/firewall/ipset/ipfilter-net0"
        before = int(S.admin("GET", "/state")["firewall"]["ipfilter_drops"].get("200", 0))
        S.ok("DELETE", f"{base}/{self.ip}")
        try:
            self.nc_from_ct(200, S.info["internet_ip"], 80)
        finally:
            S.ok("POST", base, {"cidr": self.ip})
        after = int(S.admin("GET", "/state")["firewall"]["ipfilter_drops"].get("200", 0))
        self.assertGreater(after, before)
        # back in the set: nothing more is counted
        self.assertEqual(S.ssh(self.ip, "true").returncode, 0)
        self.assertEqual(int(S.admin("GET", "/state")["firewall"]["ipfilter_drops"].get("200", 0)), after)

    def test_6_spoofing_dropped(self):
        # with internet on, a packet from a source address that is not the CT's lease is dropped
        self.group_rule(200, True)
        try:
            net = S.info["bridge_subnet"].rsplit(".", 1)[0]
            inet = S.info["internet_ip"]
            nc = f"echo | timeout 2 nc {inet} 80 >/dev/null 2>&1 && echo OPEN || echo CLOSED"
            r = S.ssh(self.ip, f"ip addr add {net}.250/24 dev eth0; "
                               f"ip route add {inet}/32 via {S.info['gateway']} src {net}.250; {nc}; "
                               f"ip route del {inet}/32; ip addr del {net}.250/24 dev eth0; {nc}")
            self.assertEqual(r.stdout.split(), ["CLOSED", "OPEN"], r.stderr)
        finally:
            self.group_rule(200, False)


class T2bSnapshot(unittest.TestCase):
    def task(self, method, path, params=None):
        return S.wait_task(S.ok(method, "/nodes/pve/lxc/400" + path, params))

    def test_snapshot_rollback_delete(self):
        S.clone(400)
        ip = S.start_ct(400)
        S.ssh(ip, "echo one > /root/a; echo keep > /root/b")
        # the task holds the snapshot lock: a config change meanwhile is refused
        upid = S.ok("POST", "/nodes/pve/lxc/400/snapshot", {"snapname": "s1", "description": "first"})
        time.sleep(0.05)
        r = S.api("PUT", "/nodes/pve/lxc/400/config", {"cores": 2})
        self.assertIn("CT is locked (snapshot)", r.body.decode())
        self.assertEqual(S.wait_task(upid)["exitstatus"], "OK")
        self.assertIn("snapshot name 's1' already used", self.task("POST", "/snapshot", {"snapname": "s1"})["exitstatus"])
        for bad, msg in (("current", "reserved name"), ("1x", "invalid configuration ID"), ("a" * 41, "40 characters")):
            self.assertIn(msg, S.api("POST", "/nodes/pve/lxc/400/snapshot", {"snapname": bad}).body.decode())
        S.ssh(ip, "echo two > /root/a; rm /root/b; echo new > /root/c")
        lst = S.ok("GET", "/nodes/pve/lxc/400/snapshot")
        self.assertEqual(sorted(x["name"] for x in lst), ["current", "s1"])
        self.assertEqual([x.get("parent") for x in lst if x["name"] == "current"], ["s1"])
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/400/config")["parent"], "s1")
        self.assertEqual(str(S.ok("GET", "/nodes/pve/lxc/400/snapshot/s1/config")["cores"]), "1")
        self.assertEqual(self.task("POST", "/snapshot/s1/rollback")["exitstatus"], "OK")
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/400/status/current")["status"], "stopped")
        ip = S.start_ct(400)
        self.assertEqual(S.ssh(ip, "cat /root/a /root/b; ls /root/c").stdout, "one\nkeep\n")
        self.assertIn("does not exist", self.task("POST", "/snapshot/nope/rollback")["exitstatus"])
        self.assertEqual(self.task("DELETE", "/snapshot/s1")["exitstatus"], "OK")
        self.assertEqual([x["name"] for x in S.ok("GET", "/nodes/pve/lxc/400/snapshot")], ["current"])
        self.assertNotIn("parent", S.ok("GET", "/nodes/pve/lxc/400/config"))

    def test_clone_from_snapshot(self):
        # a running CT clones in full from a snapshot only; the clone holds the CT's `disk` lock
        # for the whole task; the child has the snapshot's files and config, not today's
        S.clone(402)
        ip = S.start_ct(402)
        S.ssh(ip, "echo then > /root/a")
        self.assertEqual(S.wait_task(S.ok("POST", "/nodes/pve/lxc/402/snapshot", {"snapname": "s1"}))["exitstatus"],
                         "OK")
        S.ssh(ip, "echo now > /root/a; echo new > /root/b")
        S.ok("PUT", "/nodes/pve/lxc/402/config", {"cores": 2})
        for params, msg in (({}, "Full clone of a running container is only possible from a snapshot"),
                            ({"snapname": "nope"}, "snapshot 'nope' does not exist"),
                            ({"snapname": "s1", "full": 0}, "Linked clone feature for")):
            r = S.api("POST", "/nodes/pve/lxc/402/clone", dict(newid=403, **params))
            self.assertEqual(r.status, 500, r.body)
            self.assertIn(msg, r.reason)
        self.assertNotIn("lock", S.ok("GET", "/nodes/pve/lxc/402/config"))
        upid = S.ok("POST", "/nodes/pve/lxc/402/clone", {"newid": 403, "snapname": "s1"})
        r = S.api("POST", "/nodes/pve/lxc/402/clone", {"newid": 404, "snapname": "s1"})
        self.assertEqual((r.status, r.reason), (500, "CT is locked (disk)"))
        self.assertEqual(S.wait_task(upid)["exitstatus"], "OK")
        self.assertNotIn("lock", S.ok("GET", "/nodes/pve/lxc/402/config"))
        self.assertEqual(str(S.ok("GET", "/nodes/pve/lxc/403/config")["cores"]), "1")
        ip3 = S.start_ct(403)
        self.assertEqual(S.ssh(ip3, "cat /root/a; ls /root/b 2>&1 >/dev/null | wc -l").stdout, "then\n1\n")
        S.ssh(ip3, "echo child > /root/a")
        self.assertEqual(S.ssh(ip, "cat /root/a /root/b").stdout, "now\nnew\n")

    def test_shutdown_keeps_files(self):
        # sandbox.pause: a shutdown (forceStop after its timeout) keeps the disk; the
        # container reads stopped everywhere, as a real node's does, and starts again with
        # its files and address
        S.clone(406)
        ip = S.start_ct(406)
        S.ssh(ip, "mkdir -p /root/d; echo kept > /root/d/f")
        st = S.wait_task(S.ok("POST", "/nodes/pve/lxc/406/status/shutdown", {"timeout": 5, "forceStop": 1}))
        self.assertEqual(st["exitstatus"], "OK")
        self.assertEqual(S.ok("GET", "/nodes/pve/lxc/406/status/current")["status"], "stopped")
        self.assertEqual([x["status"] for x in S.ok("GET", "/nodes/pve/lxc") if x["vmid"] == 406], ["stopped"])
        self.assertIn("CT 406 not running", S.api("POST", "/nodes/pve/lxc/406/status/shutdown", {}).body.decode())
        self.assertEqual(S.start_ct(406), ip)
        self.assertEqual(S.ssh(ip, "cat /root/d/f").stdout, "kept\n")

    def test_dir_storage_cannot_snapshot(self):
        S.clone(401, full=1, storage="local")
        st = S.wait_task(S.ok("POST", "/nodes/pve/lxc/401/snapshot", {"snapname": "s1"}))
        self.assertEqual(st["exitstatus"], "snapshot feature is not available")
        self.assertNotIn("lock", S.ok("GET", "/nodes/pve/lxc/401/config"))


class T3Restart(unittest.TestCase):
    def test_restart_restores_running(self):
        S.clone(300)
        ip = S.start_ct(300)
        S.ssh(ip, "echo persisted > /root/file")
        S.stop()
        self.assertEqual(simlib.leftovers(S.info["instance"], S.state_dir, (S.info["internet_ip"],)), [])
        S.config["ct_faults"] = {"locks": {"300": "backup"}}  # a stale lock from the config file
        try:
            S.start()
        finally:
            S.config.pop("ct_faults")
        cur = S.ok("GET", "/nodes/pve/lxc/300/status/current")
        self.assertEqual((cur["status"], cur["lock"]), ("running", "backup"))
        S.admin("DELETE", "/ct/300/lock")
        self.assertEqual(S.wait_ip(300), ip)
        r = S.ssh(ip, "cat /root/file")
        self.assertEqual(r.stdout, "persisted\n")
        self.assertIn(300, [x["vmid"] for x in S.ok("GET", "/nodes/pve/lxc")])


class T4Cleanup(unittest.TestCase):
    def test_crash_then_cleanup(self):
        st = S.ok("GET", "/nodes/pve/lxc/100/status/current")
        self.assertEqual(st["status"], "running")
        inst = S.info["instance"]
        ips = (S.info["internet_ip"], S.info["lan_ip"])
        S.stop(signal.SIGKILL)
        self.assertNotEqual(simlib.leftovers(inst, S.state_dir, ips), [])
        r = subprocess.run([sys.executable, simlib.SIM, "--cleanup", "--state-dir", S.state_dir],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(simlib.leftovers(inst, S.state_dir, ips), [])
        # a crash followed by a plain start also recovers
        S.start()
        S.wait_ip(100)
        S.stop(signal.SIGKILL)
        S.start()
        self.assertEqual(S.ssh(S.wait_ip(100), "true").returncode, 0)
        S.stop()
        self.assertEqual(simlib.leftovers(inst, S.state_dir, ips), [])
        out = subprocess.run(["ip", "netns", "exec", "pvesim-" + inst + "-node", "true"], capture_output=True)
        self.assertNotEqual(out.returncode, 0)


if __name__ == "__main__":
    simlib.run_tests("__main__")
