"""Networking, all inside namespaces the simulator creates: the node, internet and LAN
namespaces, the host link and route, the bridge, one namespace, veth port and sshd per
running container, DHCP leases, and the cleanup of this and dead instances."""

import fcntl
import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

from . import cgroups, rootfs
from .schema import DNS_RE, ParamErr, parse_net
from .util import PREFIX, RUN_DIR, SELF, log, pid_alive, run
from .volumes import mount_script

# ---- instances: what a simulator (alive or dead) owns, found by name


def list_netns():
    r = run(["ip", "-j", "netns", "list"], check=False)
    try:
        return [x["name"] for x in json.loads(r.stdout or "[]")]
    except ValueError:
        return []


def kill_netns_pids(ns):
    r = run(["ip", "netns", "pids", ns], check=False)
    pids = [int(x) for x in r.stdout.split() if x.isdigit()]
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.time() + 3
    while time.time() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.02)


def cleanup_instance(inst, kill_owner=False):
    """Remove every namespace, link and process of instance `inst`."""
    pidfile = os.path.join(RUN_DIR, inst + ".pid")
    if kill_owner:
        try:
            pid = int(open(pidfile).read().split()[0])
            if pid != os.getpid() and pid_alive(pid):
                os.kill(pid, signal.SIGTERM)
                deadline = time.time() + 10
                while time.time() < deadline and pid_alive(pid):
                    time.sleep(0.05)
        except (OSError, ValueError, IndexError):
            pass
    pfx = f"{PREFIX}-{inst}-"
    for ns in list_netns():
        if ns.startswith(pfx):
            kill_netns_pids(ns)
            run(["ip", "netns", "del", ns], check=False)
    run(["ip", "link", "del", f"pvs{inst}"], check=False)
    cgroups.remove_prefix(pfx)
    try:
        state_dir = open(pidfile).read().split(None, 1)[1].strip()
        if state_dir:
            rootfs.unmount_all_under(state_dir)  # overlay roots of its Debian containers
    except (OSError, IndexError):
        pass
    try:
        os.unlink(pidfile)
    except OSError:
        pass


def instance_owner_alive(inst):
    try:
        pid = int(open(os.path.join(RUN_DIR, inst + ".pid")).read().split()[0])
        if pid == os.getpid() or not pid_alive(pid):
            return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"pve-sim" in f.read()  # not a recycled pid
    except (OSError, ValueError, IndexError):
        return False


def all_instances():
    insts = set()
    for ns in list_netns():
        m = re.match(PREFIX + r"-([0-9a-f]{4})-", ns)
        if m:
            insts.add(m.group(1))
    r = run(["ip", "-j", "link", "show"], check=False)
    try:
        for l in json.loads(r.stdout or "[]"):
            m = re.fullmatch(r"pvs([0-9a-f]{4})", l.get("ifname", ""))
            if m:
                insts.add(m.group(1))
    except ValueError:
        pass
    try:
        for f in os.listdir(RUN_DIR):
            if f.endswith(".pid"):
                insts.add(f[:-4])
    except OSError:
        pass
    return insts


def cleanup_stale(own):
    for inst in all_instances():
        if inst == own or not instance_owner_alive(inst):
            cleanup_instance(inst)


class Net:
    """This instance's namespaces, links and processes (sim.net); with containers off
    (--no-containers) only the addresses are chosen and nothing is created."""

    def __init__(self, sim):
        self.sim = sim
        c = sim.cfg
        inst = sim.inst
        self.inst = inst
        self.choose_subnets(None, check_host=False)
        self.node_ns = f"{PREFIX}-{inst}-node"
        self.inet_ns = f"{PREFIX}-{inst}-inet"
        self.lan_ns = f"{PREFIX}-{inst}-lan"
        self.host_if = f"pvs{inst}"
        self.procs = []
        self.enabled = c["containers"]

    def ct_ns(self, vmid):
        return f"{PREFIX}-{self.inst}-ct{vmid}"

    def choose_subnets(self, stored, check_host=True):
        """Pick the bridge/transit/LAN subnets: the configured ones, else the ones this
        state folder used before, else the first free /24 set after the instance's own."""
        c = self.sim.cfg
        routes = []
        if check_host:
            for args in (["route", "show", "table", "all"], ["addr", "show"]):
                r = run(["ip", "-4", "-j"] + args, check=False)
                try:
                    for e in json.loads(r.stdout or "[]"):
                        items = [e.get("dst", "")] + [f"{a['local']}/{a['prefixlen']}" for a in e.get("addr_info", [])]
                        for d in items:
                            try:
                                if d and d != "default":
                                    routes.append(ipaddress.IPv4Network(d, strict=False))
                            except ValueError:
                                pass
                except ValueError:
                    pass

        def free(*nets):
            return not any(n.overlaps(r) for n in nets for r in routes)

        def cand(k):
            return (ipaddress.IPv4Network(c["bridge_subnet"] or f"10.213.{k}.0/24"),
                    ipaddress.IPv4Network(c["transit_subnet"] or f"10.215.{k}.0/30"),
                    ipaddress.IPv4Network(c["lan_subnet"] or f"10.214.{k}.0/24"))
        k0 = int(self.inst, 16) % 250
        choice = None
        if c["bridge_subnet"] and c["transit_subnet"]:
            choice = cand(k0)
        elif stored:
            st = (ipaddress.IPv4Network(stored["bridge"]), ipaddress.IPv4Network(stored["transit"]),
                  ipaddress.IPv4Network(stored["lan"]))
            if (not c["bridge_subnet"] or st[0] == cand(k0)[0]) and free(st[0], st[1]):
                choice = st
        if choice is None:
            for i in range(250):
                b, t, l = cand((k0 + i) % 250)
                if free(b, t):
                    choice = (b, t, l)
                    break
        if choice is None:
            raise SystemExit("pve-sim: no free subnet for the bridge; set bridge_subnet and transit_subnet")
        if check_host and not free(choice[0], choice[1]):
            raise SystemExit(f"pve-sim: host routes overlap {choice[0]} / {choice[1]}; "
                             "set bridge_subnet / transit_subnet")
        self.bridge, self.transit, self.lan = choice
        self.inet = ipaddress.IPv4Network(c["internet_subnet"])
        self.gw = str(self.bridge.network_address + 1)
        self.host_ip = str(self.transit.network_address + 1)
        self.node_ip = str(self.transit.network_address + 2)
        self.inet_ip = str(self.inet.network_address + 2)
        # names the internet's resolver serves, each on an address of the internet host
        self.inet_names = {n: str(self.inet.network_address + 2 + i)
                           for i, n in enumerate(("internet.test", "allowed.test", "denied.test"))}
        self.lan_ip = str(self.lan.network_address + 2)
        return {"bridge": str(self.bridge), "transit": str(self.transit), "lan": str(self.lan)}

    def nsx(self, ns, *cmd, check=True, input=None):
        return run(["ip", "netns", "exec", ns] + list(cmd), check=check, input=input)

    def setup(self):
        if not self.enabled:
            self.sim.netcfg = self.choose_subnets(self.sim.netcfg, check_host=False)
            return
        # serialise subnet choice and route setup between instances starting together
        lk = open(os.path.join(RUN_DIR, ".setup.lock"), "w")
        fcntl.flock(lk, fcntl.LOCK_EX)
        try:
            self.sim.netcfg = self.choose_subnets(self.sim.netcfg)
            self._setup()
        finally:
            lk.close()

    def _setup(self):
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        n = self.node_ns
        for ns in (n, self.inet_ns, self.lan_ns):
            run(["ip", "netns", "add", ns])
        # host <-> node: only the bridge subnet is routed from the host
        run(["ip", "link", "add", self.host_if, "type", "veth", "peer", "name", "uplink", "netns", n])
        self.batch(None, [f"addr add {self.host_ip}/{self.transit.prefixlen} dev {self.host_if}",
                          f"link set {self.host_if} up",
                          f"route add {self.bridge} via {self.node_ip} dev {self.host_if} src {self.host_ip}"])
        if self.sim.cfg["internet_route"]:
            self.batch(None, [f"route add {self.inet} via {self.node_ip} dev {self.host_if} src {self.host_ip}"])
        # a fixed bridge address, as a node's bridge has from its uplink: without it Linux
        # gives the bridge its lowest port's MAC, and each container start or destroy that
        # changes it would flush the node's neighbour table, hiding stale entries
        bmac = f"02:00:{self.inst[:2]}:{self.inst[2:]}:00:01"
        nodecmds = ["link set lo up", f"link add vmbr0 address {bmac} type bridge",
                    f"addr add {self.gw}/{self.bridge.prefixlen} dev vmbr0", "link set vmbr0 up",
                    f"addr add {self.node_ip}/{self.transit.prefixlen} dev uplink", "link set uplink up"]
        hosts = ((self.inet_ns, self.inet, "inet0", "internet"), (self.lan_ns, self.lan, "lan0", "lan"))
        for ns, net, ifn, name in hosts:
            run(["ip", "link", "add", ifn, "netns", n, "type", "veth", "peer", "name", "eth0", "netns", ns])
            gw = str(net.network_address + 1)
            ip = str(net.network_address + 2)
            nodecmds += [f"addr add {gw}/{net.prefixlen} dev {ifn}", f"link set {ifn} up"]
            extra = [f"addr add {a}/{net.prefixlen} dev eth0" for a in self.inet_names.values()
                     if a != ip] if ns == self.inet_ns else []
            self.batch(ns, ["link set lo up", f"addr add {ip}/{net.prefixlen} dev eth0"] + extra +
                       ["link set eth0 up", f"route add default via {gw}"])
            self.nsx(ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
        self.batch(n, nodecmds)
        self.nsx(n, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.send_redirects=0",
                 "net.ipv4.conf.default.send_redirects=0", "net.ipv6.conf.all.disable_ipv6=1",
                 "net.ipv6.conf.default.disable_ipv6=1", "net.ipv4.conf.vmbr0.proxy_arp=1",
                 "net.ipv4.conf.vmbr0.proxy_arp_pvlan=1", "net.ipv4.conf.vmbr0.send_redirects=0",
                 # as docs/sandbox-setup.md asks of a node: no per-address limit on the ICMP
                 # errors REJECT answers with (by default 6, then one a second per sandbox)
                 "net.ipv4.icmp_ratelimit=0")
        for ns, net, ifn, name in hosts:
            ip = str(net.network_address + 2)
            logf = open(os.path.join(self.sim.state_dir, f"{name}-host.log"), "ab")
            p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, SELF, "--serve-host", name,
                                  "--host-ip", ip, "--dns-answer", self.inet_ip, "--instance", self.inst,
                                  "--dns-names", ",".join(f"{k}={v}" for k, v in self.inet_names.items())],
                                 stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True)
            self.procs.append(p)

    def batch(self, ns, cmds):
        pre = ["ip"] + (["-n", ns] if ns else [])
        run(pre + ["-batch", "-"], input="".join(c + "\n" for c in cmds))

    # -- containers
    def ct_up(self, vmid, mac, rootdir, ctdir, sshd=True):
        if not self.enabled:
            return None
        ns = self.ct_ns(vmid)
        self.ct_down(vmid)
        run(["ip", "netns", "add", ns])
        port = f"veth{vmid}i0"
        run(["ip", "link", "add", port, "netns", self.node_ns, "type", "veth", "peer", "name", "eth0", "netns", ns])
        self.batch(ns, ["link set lo up", f"link set eth0 address {mac.lower()}", "link set eth0 up"])
        self.batch(self.node_ns, [f"link set {port} master vmbr0", f"link set dev {port} type bridge_slave isolated on",
                                  f"link set {port} up"])
        return self.start_sshd(vmid, rootdir, ctdir) if sshd else None

    def start_sshd(self, vmid, rootdir, ctdir):
        if not self.enabled:
            return None
        ns = self.ct_ns(vmid)
        conf = os.path.join(ctdir, "sshd_config")
        with open(conf, "w") as f:
            f.write(f"""# pve-sim container {vmid}
Port 22
ListenAddress 0.0.0.0
HostKey {rootdir}/etc/ssh/ssh_host_ed25519_key
PidFile {rootdir}/run/sshd.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile {rootdir}/root/.ssh/authorized_keys
ChrootDirectory {rootdir}
Subsystem sftp internal-sftp
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
AllowTcpForwarding {"local" if self.sim.cfg.get("sshd_tcp_forwarding", True) else "no"}
PermitOpen 127.0.0.1:*
AllowAgentForwarding no
PermitUserEnvironment no
MaxSessions 256
MaxStartups 200:30:400
LoginGraceTime 30
LogLevel INFO
""")

        logpath = os.path.join(ctdir, "sshd.log")
        logf = open(logpath, "ab")
        logpos = logf.tell()
        hn = "ct%d" % vmid
        # as pve-container's setup at start: the config's hostname into /etc/hostname (a
        # change to a running CT waits for this: hostname is a fastplug option)
        cfg_hn = self.sim.cts.get(vmid, {}).get("conf", {}).get("hostname")
        if cfg_hn:
            try:
                with open(os.path.join(rootdir, "etc", "hostname"), "w") as f:
                    f.write(cfg_hn + "\n")
            except OSError:
                pass
        try:
            hn = open(os.path.join(rootdir, "etc", "hostname")).read().strip() or hn
        except OSError:
            pass
        if not re.fullmatch(DNS_RE, hn):
            hn = "ct%d" % vmid
        # A devpts instance of its own on /dev/pts, as LXC mounts one in every container.
        script = (f"mount -t proc proc {rootdir}/proc && "
                  f"{{ mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts {rootdir}/dev/pts "
                  f"2>/dev/null || true; }} && hostname {hn.split('.')[0]} && "
                  f"exec /usr/sbin/sshd -D -e -f {conf}")
        mounts = mount_script(rootdir, self.sim.ct_mounts(vmid))  # mpN, as LXC mounts them at start
        if mounts:
            script = mounts + " && " + script
        conf = self.sim.cts.get(vmid, {}).get("conf", {})
        groups = cgroups.setup(ns, conf.get("cores", 1), conf.get("memory", 512))
        p = subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "--pid", "--mount", "--uts", "--fork", "--kill-child",
                              "--propagation", "private", "--", "/bin/sh", "-c", script],
                             stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True,
                             preexec_fn=(lambda: cgroups.join(groups)) if groups else None)
        # wait until sshd listens inside the namespace
        deadline = time.time() + 5
        while time.time() < deadline:
            if p.poll() is not None:
                raise RuntimeError(f"sshd for CT {vmid} exited with {p.returncode}")
            with open(logpath, "rb") as lf:
                lf.seek(logpos)
                if b"Server listening on" in lf.read():
                    break
            time.sleep(0.01)
        return p

    def kill_proc(self, p):
        if p is None:
            return
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def ct_down(self, vmid):
        if not self.enabled:
            return
        ns = self.ct_ns(vmid)
        if os.path.exists(f"/run/netns/{ns}"):
            kill_netns_pids(ns)
            run(["ip", "netns", "del", ns], check=False)
        cgroups.remove(ns)

    def ct_limits(self, vmid, cores, memory_mb):
        """A config PUT changed a running container's cores or memory: applied live."""
        if self.enabled:
            cgroups.apply(self.ct_ns(vmid), cores, memory_mb)

    def ct_rate(self, vmid, rate, fresh=False):
        """net0 rate= (MB/s, as Proxmox: MiB/s) on the container's host-side port, as pve-common's
        tap_rate_limit: htb on egress (towards the container) and a police on ingress (from
        it), burst 1 MiB; no rate (or 0) removes both. Applied at start and to a running
        container on a net0 change (LXC/Config.pm). A kernel without tc's basic classifier
        and police action cannot police: traffic from the container is then shaped by the
        same htb on the container's side of the pair (eth0's egress), which the container's
        root could remove, unlike on a node."""
        if not self.enabled or (fresh and not rate):  # a new port has nothing to remove
            return
        port = f"veth{vmid}i0"
        ct = self.ct_ns(vmid)
        node_tc = ["ip", "netns", "exec", self.node_ns, "tc"]
        ct_tc = ["ip", "netns", "exec", ct, "tc"]
        run(node_tc + ["qdisc", "del", "dev", port, "root"], check=False)
        run(node_tc + ["qdisc", "del", "dev", port, "ingress"], check=False)
        if os.path.exists(f"/run/netns/{ct}"):
            run(ct_tc + ["qdisc", "del", "dev", "eth0", "root"], check=False)
        if not rate or not os.path.exists(f"/run/netns/{ct}"):
            return
        bps = int(float(rate) * 1024 * 1024)
        burst = 1024 * 1024

        def htb(tc, dev):
            run(tc + ["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"])
            run(tc + ["class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", f"{bps}bps",
                      "burst", f"{burst}b"])
        htb(node_tc, port)
        run(node_tc + ["qdisc", "add", "dev", port, "handle", "ffff:", "ingress"])
        r = run(node_tc + ["filter", "add", "dev", port, "parent", "ffff:", "prio", "50", "basic", "police",
                           "rate", f"{bps}bps", "burst", f"{burst}b", "mtu", "64kb", "drop"], check=False)
        if r.returncode != 0:
            run(node_tc + ["qdisc", "del", "dev", port, "ingress"], check=False)
            htb(ct_tc, "eth0")

    def ct_set_ip(self, vmid, ip, prefixlen=None, gw=None):
        if not self.enabled:
            return
        self.batch(self.ct_ns(vmid), [f"addr add {ip}/{prefixlen or self.bridge.prefixlen} dev eth0",
                                      f"route replace default via {gw or self.gw}"])
        # the node forgets any neighbour entry of the address, as a DHCP client's or ifupdown's
        # gratuitous ARP would make it: an address handed out again reaches its new owner at once
        self.forget_neigh(ip)

    def forget_neigh(self, ip):
        if self.enabled:
            run(["ip", "-n", self.node_ns, "neigh", "del", ip, "dev", "vmbr0"], check=False)

    def ct_set_mac(self, vmid, mac):
        if not self.enabled:
            return
        ns = self.ct_ns(vmid)
        run(["ip", "-n", ns, "addr", "flush", "dev", "eth0", "scope", "global"], check=False)
        run(["ip", "-n", ns, "link", "set", "eth0", "down"], check=False)
        run(["ip", "-n", ns, "link", "set", "eth0", "address", mac.lower()], check=False)
        run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=False)

    def ct_interfaces(self, vmid):
        r = run(["ip", "-n", self.ct_ns(vmid), "-j", "addr", "show"], check=False)
        try:
            return json.loads(r.stdout or "[]")
        except ValueError:
            return []

    def apply_nft(self, text):
        if not self.enabled:
            return
        self.nsx(self.node_ns, "nft", "-f", "-", input=text)

    def teardown(self):
        for p in self.procs:
            self.kill_proc(p)
        self.procs = []


class DhcpMixin:
    """Sim methods: leases (one address per MAC, kept in the state) and their late arrival;
    a static ip= in net0 applied at start as pve-container does (no lease then).

    A lease is freed when its container is destroyed, and when net0 gets another MAC (at once
    if the container is stopped, else once the new MAC has its own lease, so the new lease is
    another address). Leases of MACs no container has are dropped when the state is loaded."""

    def static_net(self, ct):
        """(ip, prefixlen, gw) of a static ip= in net0, or None."""
        try:
            net = parse_net(ct["conf"]["net0"])
        except (KeyError, ParamErr):
            return None
        ip = net.get("ip")
        if not ip or ip in ("dhcp", "manual") or "/" not in ip:
            return None
        a, _, plen = ip.partition("/")
        return a, int(plen), net.get("gw")

    def macs_in_use(self, skip=None):
        """MACs of every container's net* and running interface (skip: a vmid to leave out)."""
        macs = set()
        with self.lock:
            for vmid, ct in self.cts.items():
                if vmid == skip:
                    continue
                for k, v in ct["conf"].items():
                    if re.fullmatch(r"net\d+", k):
                        try:
                            macs.add(parse_net(v)["hwaddr"].upper())
                        except (KeyError, ParamErr):
                            pass
                rt = self.rt.get(vmid)
                if rt and rt.get("mac"):
                    macs.add(rt["mac"].upper())
        return macs

    def release_leases(self, macs, skip=None):
        """Free the leases of macs no other container still uses; True if any was freed."""
        with self.lock:
            used = self.macs_in_use(skip)
            gone = [m for m in {x.upper() for x in macs if x} if m in self.leases and m not in used]
            for m in gone:
                log(f"DHCP lease {self.leases[m]} of {m} released")
                self.net.forget_neigh(self.leases[m])
                del self.leases[m]
            return bool(gone)

    def prune_leases(self):
        """Drop leases of MACs no container has (state folders written before leases were freed)."""
        with self.lock:
            used = self.macs_in_use()
            for m in [m for m in self.leases if m.upper() not in used]:
                del self.leases[m]

    def lease(self, mac):
        mac = mac.upper()
        with self.lock:
            if mac in self.leases:
                if ipaddress.IPv4Address(self.leases[mac]) in self.net.bridge:
                    return self.leases[mac]
                del self.leases[mac]
            used = set(self.leases.values())
            for ct in self.cts.values():  # a DHCP server never hands out a static address in use
                st = self.static_net(ct)
                if st:
                    used.add(st[0])
            pool = int(self.settings.get("dhcp_pool_size") or 0)
            for h in self.net.bridge.hosts():
                ip = str(h)
                off = int(h) - int(self.net.bridge.network_address)
                if off < 10 or (pool and off >= 10 + pool):
                    continue
                if ip not in used:
                    self.leases[mac] = ip
                    return ip
        raise RuntimeError("DHCP pool exhausted")

    def schedule_ip(self, vmid, delay):
        with self.lock:
            rt = self.rt.get(vmid)
            if rt is None:
                return
            if rt.get("timer"):
                rt["timer"].cancel()
            gen = rt["gen"] = rt.get("gen", 0) + 1

            def assign():
                with self.lock:
                    rt2 = self.rt.get(vmid)
                    if rt2 is not rt or rt.get("gen") != gen or self.closed:
                        return
                    if self.settings["ip_never"] or vmid in self.no_ip:
                        return
                    st = self.static_net(self.cts[vmid])
                    plen = gw = None
                    if st:
                        ip, plen, gw = st
                    else:
                        ip = self.lease(rt["mac"])
                        self.release_leases(rt.pop("old_macs", []))
                    try:
                        self.net.ct_set_ip(vmid, ip, plen, gw)
                    except RuntimeError as e:
                        log(f"CT {vmid}: cannot assign {ip}: {e}")
                        return
                    rt["ip"] = ip
                    self.apply_firewall()
                    self.save()
            if self.static_net(self.cts[vmid]):
                t = None
                assign()  # pve-container writes a static address into the container at start
            elif delay <= 0:
                t = None
                threading.Thread(target=assign, daemon=True).start()
            else:
                t = threading.Timer(delay, assign)
                t.daemon = True
                t.start()
            rt["timer"] = t
