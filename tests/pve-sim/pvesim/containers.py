"""Containers: volume names, root filesystems (busybox, host keys, clones), the config file
text and its digest and locks, status as the API reports it, and the runtime (network
namespace and sshd up or down, restart after a simulator restart)."""

import os
import re
import shutil
import threading
import time
import urllib.parse

from . import rootfs
from .schema import ParamErr, die, parse_net, parse_size, random_mac, rootfs_parts
from .util import log, run, sha1


def host_key_path(ctdir):
    """A container's ed25519 host key, inside its root file system as on a real node."""
    return os.path.join(ctdir, "rootfs", "etc", "ssh", "ssh_host_ed25519_key")


def copy_binary(root, path):
    """Copies a dynamically linked program and the libraries ldd names into root, at the same
    paths (root's lib and usr/bin are symlinks, as in the busybox layout)."""
    files = [path]
    for line in run(["ldd", path]).stdout.splitlines():
        m = re.search(r"(/\S+)", line.split("=>")[-1])
        if m:
            files.append(m.group(1))
    for f in files:
        dst = os.path.join(root, f.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(os.path.realpath(f), dst)


class ContainersMixin:
    """Sim methods for containers; self.cts holds their configs, self.rt the running ones."""

    def volname(self, storage, newid, src_vol, base=False, linked=False):
        st = self.cfg["storages"].get(storage, {"type": "dir"})
        typ = st.get("type", "dir")
        if base:
            if typ == "dir":
                return f"{storage}:{newid}/base-{newid}-disk-0.raw"
            if typ == "zfspool":
                return f"{storage}:basevol-{newid}-disk-0"
            return f"{storage}:base-{newid}-disk-0"
        if linked and src_vol:
            sv = src_vol.split(":", 1)[1]
            if typ == "lvmthin":
                return f"{storage}:vm-{newid}-disk-0"
            if typ == "zfspool":
                return f"{storage}:{sv}/subvol-{newid}-disk-0"
            return f"{storage}:{sv}/vm-{newid}-disk-0"
        if typ == "dir":
            return f"{storage}:{newid}/vm-{newid}-disk-0.raw"
        if typ == "zfspool":
            return f"{storage}:subvol-{newid}-disk-0"
        return f"{storage}:vm-{newid}-disk-0"

    # ---- container root filesystems
    def ct_dir(self, vmid):
        return self.path("ct", str(vmid))

    def template_os(self, vmid):
        """busybox or debian: the template's own `os`, else the config's `template_os`."""
        for td in self.cfg["templates"]:
            if int(td["vmid"]) == vmid:
                return td.get("os") or self.cfg["template_os"]
        return self.cfg["template_os"]

    def make_template_root(self, vmid):
        if self.template_os(vmid) == "debian":
            self.make_debian_root(vmid)
            return
        d = self.ct_dir(vmid)
        rootfs.remove_ct_dir(d)
        os.makedirs(d, mode=0o755)
        root = os.path.join(d, "rootfs")
        os.makedirs(root, mode=0o755)
        for sub, mode in (("bin", 0o755), ("etc", 0o755), ("root", 0o700), ("root/.ssh", 0o700), ("tmp", 0o1777),
                          ("dev", 0o755), ("dev/pts", 0o755), ("proc", 0o555), ("sys", 0o555), ("var", 0o755),
                          ("var/tmp", 0o1777), ("home", 0o755), ("run", 0o755), ("usr", 0o755)):
            p = os.path.join(root, sub)
            os.makedirs(p, exist_ok=True)
            os.chmod(p, mode)
        shutil.copy2("/bin/busybox", os.path.join(root, "bin", "busybox"))
        applets = run(["/bin/busybox", "--list"]).stdout.split()
        for a in applets:
            if a != "busybox":
                try:
                    os.symlink("busybox", os.path.join(root, "bin", a))
                except FileExistsError:
                    pass
        for l, t in (("sbin", "bin"), ("usr/bin", "../bin"), ("usr/sbin", "../bin"), ("lib", "usr/lib")):
            os.symlink(t, os.path.join(root, l))
        os.makedirs(os.path.join(root, "usr", "lib"), exist_ok=True)
        with open(os.path.join(root, "bin", "bash"), "w") as f:
            f.write('#!/bin/sh\nexec /bin/sh "$@"\n')
        os.chmod(os.path.join(root, "bin", "bash"), 0o755)
        files = {
            "etc/passwd": "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
            "etc/group": "root:x:0:\nnogroup:x:65534:\n",
            "etc/shadow": "root:*:19000:0:99999:7:::\n",
            "etc/hostname": self.cts[vmid]["conf"].get("hostname", "ct") + "\n",
            "etc/hosts": "127.0.0.1 localhost\n",
            "etc/resolv.conf": f"nameserver {self.net.inet_ip}\n" if getattr(self, "net", None) else "",
            "etc/os-release": 'NAME="pve-sim busybox"\nID=pvesim\nPRETTY_NAME="pve-sim container"\n',
            "etc/profile": "export PATH=/bin:/sbin:/usr/bin:/usr/sbin\n",
        }
        for fn, content in files.items():
            with open(os.path.join(root, fn), "w") as f:
                f.write(content)
        os.chmod(os.path.join(root, "etc/shadow"), 0o600)
        key = self.cfg.get("authorized_key")
        ak = os.path.join(root, "root/.ssh/authorized_keys")
        with open(ak, "w") as f:
            if key:
                f.write(open(key).read().strip() + "\n")
        os.chmod(ak, 0o600)
        for name, maj, mi, mode in (("null", 1, 3, 0o666), ("zero", 1, 5, 0o666), ("full", 1, 7, 0o666),
                                    ("random", 1, 8, 0o666), ("urandom", 1, 9, 0o666), ("tty", 5, 0, 0o666),
                                    ("ptmx", 5, 2, 0o666)):
            p = os.path.join(root, "dev", name)
            os.mknod(p, mode | 0o020000, os.makedev(maj, mi))
            os.chmod(p, mode)
        # As in a real template: the host key lives in the container's /etc/ssh (every clone
        # starts with it), and ssh-keygen is there to regenerate it.
        os.makedirs(os.path.join(root, "etc", "ssh"), mode=0o755, exist_ok=True)
        copy_binary(root, shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen")
        # util-linux script(1), as Debian and Ubuntu templates have it (busybox has none): the
        # terminal of background processes started with a pty.
        if shutil.which("script"):
            copy_binary(root, shutil.which("script"))
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@pve-sim-template-{vmid}",
             "-f", host_key_path(d)])

    def make_debian_root(self, vmid):
        """A template on the cached Debian 12 image (built first if missing): an overlay with
        the image below and, in its own layer, what the simulator writes into every template."""
        d = self.ct_dir(vmid)
        rootfs.new_overlay(d, [rootfs.build_image()])
        root = os.path.join(d, "rootfs")
        key = self.cfg.get("authorized_key")
        files = {
            "etc/hostname": self.cts[vmid]["conf"].get("hostname", "ct") + "\n",
            "etc/hosts": "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n",
            "etc/resolv.conf": f"nameserver {self.net.inet_ip}\n" if getattr(self, "net", None) else "",
            "root/.ssh/authorized_keys": (open(key).read().strip() + "\n") if key else "",
        }
        for fn, content in files.items():
            with open(os.path.join(root, fn), "w") as f:
                f.write(content)
        os.chmod(os.path.join(root, "root/.ssh/authorized_keys"), 0o600)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@pve-sim-template-{vmid}",
             "-f", host_key_path(d)])

    def root_os(self, vmid):
        """What a container's root is: debian (an overlay on the image) or busybox."""
        return "debian" if rootfs.read_layers(self.ct_dir(vmid)) is not None else "busybox"

    def mount_roots(self):
        """Mount the overlay root of every container that has one (at start)."""
        for vmid in sorted(self.cts):
            try:
                rootfs.mount_root(self.ct_dir(vmid))
            except RuntimeError as e:
                log(f"CT {vmid}: {e}")

    def unmount_roots(self):
        for vmid in sorted(self.cts):
            rootfs.unmount_root(self.ct_dir(vmid))

    def free_root(self, vmid):
        """A destroy frees the volume: the root file system goes (unmounted first)."""
        rootfs.free_root(self.ct_dir(vmid))

    def remove_ct(self, vmid):
        rootfs.remove_ct_dir(self.ct_dir(vmid))

    def host_key_fp(self, vmid):
        r = run(["ssh-keygen", "-l", "-E", "sha256", "-f", host_key_path(self.ct_dir(vmid)) + ".pub"],
                check=False)
        parts = r.stdout.split()
        return parts[1] if len(parts) > 1 else ""

    def clone_root(self, src, dst):
        sd, dd = self.ct_dir(src), self.ct_dir(dst)
        if rootfs.clone_overlay(sd, dd):
            return
        rootfs.remove_ct_dir(dd)
        os.makedirs(dd, mode=0o755)
        run(["cp", "-a", os.path.join(sd, "rootfs"), os.path.join(dd, "rootfs")])

    def clone_root_snapshot(self, src, dst, name):
        """dst's root as src's was at snapshot `name` (a full clone from a snapshot)."""
        sd, dd = self.ct_dir(src), self.ct_dir(dst)
        if rootfs.clone_overlay_snapshot(sd, dd, name):
            return
        rootfs.remove_ct_dir(dd)
        os.makedirs(dd, mode=0o755)
        run(["cp", "-a", "--reflink=auto", rootfs.snap_dir(sd, name), os.path.join(dd, "rootfs")])

    # ---- configs, locks, status
    def ct_on(self, node, vmid):
        ct = self.cts.get(vmid)
        if ct is None or ct["node"] != node:
            raise die(f"Configuration file 'nodes/{node}/lxc/{vmid}.conf' does not exist")
        return ct

    def flock(self, vmid):
        with self.lock:
            return self.flocks.setdefault(vmid, threading.Lock())

    def take_flock(self, vmid):
        fl = self.flock(vmid)
        if not fl.acquire(timeout=self.settings["flock_timeout"]):
            raise die(f"can't lock file '/run/lock/lxc/pve-config-{vmid}.lock' - got timeout")
        return fl

    def check_lock(self, ct):
        lk = ct["conf"].get("lock")
        if lk:
            raise die(f"CT is locked ({lk})")

    def conf_text(self, ct):
        lines = []
        if ct.get("description") is not None:
            for l in ct["description"].split("\n"):
                lines.append("#" + urllib.parse.quote(l, safe=" !\"$&'()*+,-./:;<=>?@[]^_`{|}~"))
        for k in sorted(ct["conf"]):
            lines.append(f"{k}: {ct['conf'][k]}")
        pend = ct.get("pending_mp") or {}
        if pend:
            lines += ["", "[pve:pending]"]
            lines += [f"{k}: {v}" for k, v in sorted(pend.items()) if v is not None]
            dels = sorted(k for k, v in pend.items() if v is None)
            if dels:
                lines.append("delete: " + ",".join(dels))
        for name, snap in sorted((ct.get("snapshots") or {}).items()):  # as write_pct_config
            lines += ["", f"[{name}]"]
            for l in (snap.get("description") or "").split("\n") if snap.get("description") else []:
                lines.append("#" + urllib.parse.quote(l, safe=" !\"$&'()*+,-./:;<=>?@[]^_`{|}~"))
            body = dict(snap["conf"], snaptime=str(snap["snaptime"]))
            if snap.get("parent"):
                body["parent"] = snap["parent"]
            for k in sorted(body):
                lines.append(f"{k}: {body[k]}")
        return "\n".join(lines) + "\n"

    def digest(self, ct):
        return sha1(self.conf_text(ct))

    def is_running(self, vmid):
        ct = self.cts.get(vmid)
        return bool(ct and ct.get("running"))

    def ct_ip(self, vmid):
        rt = self.rt.get(vmid)
        return rt.get("ip") if rt else None

    def mac_of(self, ct):
        try:
            return parse_net(ct["conf"]["net0"])["hwaddr"]
        except (KeyError, ParamErr):
            return None

    def vmstatus(self, ct, for_list=False):
        conf = ct["conf"]
        vmid = ct["vmid"]
        running = ct.get("running", False)
        rt = self.rt.get(vmid, {})
        size = parse_size(rootfs_parts(conf.get("rootfs", "")).get("size", "4G")) or (4 << 30)
        mem = int(conf.get("memory", 512)) << 20
        d = {"vmid": vmid, "type": "lxc", "status": "running" if running else "stopped",
             "name": (conf.get("hostname") or f"CT{vmid}").strip(), "cpus": int(conf.get("cores", 1)),
             "cpu": 0.001 if running else 0, "mem": (mem // 16) if running else 0, "maxmem": mem,
             "swap": 0, "maxswap": int(conf.get("swap", 512)) << 20,
             "disk": (size // 8) if running else 0, "maxdisk": size,
             "uptime": int(time.time() - rt.get("started", time.time())) if running else 0,
             "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0}
        if running and rt.get("proc") is not None:
            d["pid"] = rt["proc"].pid
            d.update({"pressurecpusome": 0, "pressurecpufull": 0, "pressureiosome": 0, "pressureiofull": 0,
                      "pressurememorysome": 0, "pressurememoryfull": 0})
        if conf.get("lock"):
            d["lock"] = conf["lock"]
        if conf.get("tags"):
            d["tags"] = conf["tags"]
        if conf.get("template") == "1":
            d["template"] = 1
        return d

    def resource(self, ct, with_pool=True):
        conf = ct["conf"]
        vs = self.vmstatus(ct)
        d = {"id": f"lxc/{ct['vmid']}", "type": "lxc", "vmid": ct["vmid"], "node": ct["node"],
             "status": vs["status"], "name": vs["name"], "template": 1 if conf.get("template") == "1" else 0,
             "maxcpu": vs["cpus"], "cpu": vs["cpu"], "maxmem": vs["maxmem"], "mem": vs["mem"],
             "maxdisk": vs["maxdisk"], "disk": vs["disk"], "netin": 0, "netout": 0, "diskread": 0,
             "diskwrite": 0, "uptime": vs["uptime"]}
        if conf.get("tags"):
            d["tags"] = conf["tags"]
        if conf.get("lock"):
            d["lock"] = conf["lock"]
        if with_pool and ct.get("pool"):
            d["pool"] = ct["pool"]
        return d


    # ---- container runtime
    def ct_runtime_start(self, vmid, restore=False):
        ct = self.cts[vmid]
        with self.lock:
            self.apply_pending_mps(ct)
        if ct["conf"].get("nameserver"):  # pve-container writes it into the container at start
            try:
                with open(os.path.join(self.ct_dir(vmid), "rootfs", "etc", "resolv.conf"), "w") as f:
                    f.write("".join(f"nameserver {x}\n" for x in ct["conf"]["nameserver"].split()))
            except OSError:
                pass
        mac = self.mac_of(ct) or random_mac()
        proc = self.net.ct_up(vmid, mac, os.path.join(self.ct_dir(vmid), "rootfs"), self.ct_dir(vmid),
                              sshd=vmid not in self.no_sshd)
        self.net.ct_rate(vmid, self.net0_rate(ct), fresh=True)
        with self.lock:
            self.rt[vmid] = {"proc": proc, "ip": None, "mac": mac, "started": time.time(), "timer": None}
            ct["running"] = True
            if self.fw_active(self.applied_fw or self.fw_snapshot(), vmid):
                self.apply_firewall()

    def net0_rate(self, ct):
        """net0's rate= (MB/s), or None."""
        try:
            return parse_net(ct["conf"]["net0"]).get("rate")
        except (KeyError, ParamErr):
            return None

    def ct_runtime_stop(self, vmid):
        with self.lock:
            rt = self.rt.pop(vmid, None)
            ct = self.cts.get(vmid)
            if ct:
                ct["running"] = False
        if rt:
            if rt.get("timer"):
                rt["timer"].cancel()
            if self.release_leases(rt.get("old_macs", [])):
                self.save()
            self.net.kill_proc(rt.get("proc"))
        self.net.ct_down(vmid)
        with self.lock:
            if self.fw_active(self.applied_fw or self.fw_snapshot(), vmid):
                self.apply_firewall()

    def restore(self):
        policy = self.cfg["on_restart"]
        for vmid, lk in ((self.cfg.get("ct_faults") or {}).get("locks") or {}).items():
            ct = self.cts.get(int(vmid))
            if ct:
                if lk:
                    ct["conf"]["lock"] = lk
                else:
                    ct["conf"].pop("lock", None)
        for vmid, ct in sorted(self.cts.items()):
            if ct.get("running"):
                if policy == "restore":
                    try:
                        self.ct_runtime_start(vmid, restore=True)
                        self.schedule_ip(vmid, 0)
                    except Exception as e:
                        log(f"CT {vmid}: restore failed: {e}")
                        ct["running"] = False
                else:
                    ct["running"] = False
        self.save()
