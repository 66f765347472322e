"""Persistence in the state folder: state.json (containers, firewall, pools, leases, token
secrets, subnets), one file per task in tasks/, and the first-run defaults (templates and
the default security group)."""

import json
import os
import secrets

from .auth import Token
from .schema import fmt_tags, parse_net, print_net, random_mac
from .tasks import Task
from .util import sha1

DEFAULT_GROUP = "sandbox-internet"


class StateMixin:
    """Sim methods: load and save the state folder."""

    def path(self, *p):
        return os.path.join(self.state_dir, *p)

    def save(self):
        with self.lock:
            d = {"version": 1, "cts": self.cts, "fw": self.fw, "cluster_fw": self.cluster_fw,
                 "groups": self.groups, "pools": self.pools, "leases": self.leases, "tokens": self.token_secrets,
                 "net": self.netcfg}
            tmp = self.path("state.json.tmp")
            with open(tmp, "w") as f:
                json.dump(d, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path("state.json"))

    def save_task(self, t):
        d = self.path("tasks")
        fn = os.path.join(d, sha1(t.upid) + ".json")
        with open(fn + ".tmp", "w") as f:
            json.dump(t.to_json(), f)
        os.replace(fn + ".tmp", fn)

    def load(self):
        os.makedirs(self.path("tasks"), mode=0o700, exist_ok=True)
        os.makedirs(self.path("ct"), mode=0o755, exist_ok=True)
        st = None
        try:
            with open(self.path("state.json")) as f:
                st = json.load(f)
        except FileNotFoundError:
            pass
        if st:
            self.cts = {int(k): v for k, v in st["cts"].items()}
            self.fw = {int(k): v for k, v in st["fw"].items()}
            self.cluster_fw = st["cluster_fw"]
            self.groups = st["groups"]
            self.pools = st["pools"]
            self.leases = st["leases"]
            self.token_secrets = st.get("tokens", {})
            self.netcfg = st.get("net")
        else:
            self.netcfg = None
            self.cts, self.fw, self.leases, self.token_secrets = {}, {}, {}, {}
            self.cluster_fw = {"options": dict(self.cfg["cluster_firewall"] or {})}
            self.groups = {}
            self.pools = {}
        for p in self.cfg["pools"]:
            self.pools.setdefault(p["poolid"], {"comment": p.get("comment", "")})
        self.tokens = {}
        for td in self.cfg["tokens"]:
            t = Token(td)
            if t.secret is None:
                t.secret = self.token_secrets.get(t.id) or secrets.token_hex(16)
            self.token_secrets[t.id] = t.secret
            self.tokens[t.id] = t
        for f in os.listdir(self.path("tasks")):
            if f.endswith(".json"):
                try:
                    with open(self.path("tasks", f)) as fh:
                        t = Task.from_json(self, json.load(fh))
                    self.tasks[t.upid] = t
                except (OSError, ValueError, KeyError):
                    pass

    def init_defaults(self, net):
        groups = self.cfg["security_groups"]
        if groups is None:
            groups = {DEFAULT_GROUP: {"comment": "outbound internet: DNS, HTTP, HTTPS", "rules": [
                {"type": "out", "action": "ACCEPT", "proto": "udp", "dport": "53", "dest": str(net.inet), "enable": 1},
                {"type": "out", "action": "ACCEPT", "proto": "tcp", "dport": "53", "dest": str(net.inet), "enable": 1},
                {"type": "out", "action": "ACCEPT", "proto": "tcp", "dport": "80", "dest": str(net.inet), "enable": 1},
                {"type": "out", "action": "ACCEPT", "proto": "tcp", "dport": "443", "dest": str(net.inet), "enable": 1},
            ]}}
        for g, gd in groups.items():
            self.groups.setdefault(g, {"comment": gd.get("comment", ""), "rules": gd.get("rules", [])})
        daemon_ip = self.cfg["daemon_address"] or net.host_ip
        for td in self.cfg["templates"]:
            vmid = int(td["vmid"])
            if vmid in self.cts:
                continue
            node = td.get("node") or self.cfg["nodes"][0]
            storage = td.get("storage", "local-lvm")
            conf = {
                "arch": "amd64", "cores": str(td.get("cores", 1)), "hostname": td.get("hostname", "sandbox-template"),
                "memory": str(td.get("memory", 512)), "swap": "512", "ostype": "debian",
                "net0": print_net({"name": "eth0", "bridge": "vmbr0", "firewall": 1, "hwaddr": random_mac(),
                                   "ip": "dhcp", "type": "veth"}),
                "rootfs": self.volname(storage, vmid, None, base=True) + f",size={td.get('disk', '8G')}",
                "template": "1", "unprivileged": "1", "features": "nesting=1",
            }
            if not int(td.get("net_firewall", 1)):
                # no firewall=1 on net0: pve-firewall skips the NIC (no policy, no ipfilter)
                conf["net0"] = print_net({k: v for k, v in parse_net(conf["net0"]).items() if k != "firewall"})
            if not int(td.get("unprivileged", 1)):
                del conf["unprivileged"]  # a privileged container: Proxmox omits the key
            if td.get("tags"):
                conf["tags"] = fmt_tags(td["tags"])
            self.cts[vmid] = {"vmid": vmid, "node": node, "conf": conf, "description": td.get("description"),
                              "running": False, "linked_from": None, "pool": td.get("pool")}
            self.fw[vmid] = {"options": dict(td.get("firewall_options") or {}), "rules": td.get("firewall_rules") or [
                {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22", "source": daemon_ip,
                 "enable": 1, "comment": "sandboxd ssh"}]}
            src = td.get("copy_of")
            if src is not None and int(src) in self.cts and os.path.isdir(self.ct_dir(int(src))):
                # a copy of another template on its own node: the same root, host key included
                self.clone_root(int(src), vmid)
            else:
                self.make_template_root(vmid)
        self.save()
