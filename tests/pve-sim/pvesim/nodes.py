"""The cluster's nodes: capacity, the load their running containers put on them, and a node
taken down and brought back (POST /admin/node/NAME/down|up).

A node that is down is cut off as a real one would be, while the simulator (the other
nodes' pveproxy) keeps serving: every request for /nodes/NAME/... answers
"595 No route to host" with an empty body after node_down_delay seconds (pveproxy's
failed attempt to proxy it); /cluster/resources and /nodes show the node "offline" without
its stats, and its guests with status "unknown"; IPv4 packets to and from its containers
are dropped in the node namespace (a connect times out, nothing refuses it). Its containers,
their processes and its running tasks carry on, so bringing it up again restores all."""

import re
import time

from .config import DEFAULT_CAPACITY
from .schema import ApiError
from .util import PREFIX

BASE_MEM = 512 << 20           # a node's own memory use, without guests
NODE_PATH = re.compile(r"^/nodes/([^/]+)(?:/|$)")


class NodesMixin:
    """Sim methods: per-node capacity, load and online state."""

    def node_capacity(self, node):
        cap = dict(DEFAULT_CAPACITY)
        cap.update((self.cfg.get("node_capacity") or {}).get(node) or {})
        return cap

    def node_version(self, node):
        """(pve-manager version dict as /version gives it, pve-container version tuple)."""
        nv = (self.cfg.get("node_versions") or {}).get(node) or {}
        v = dict(self.cfg["version"])
        if nv.get("pve_manager"):
            v["version"] = nv["pve_manager"]
            v["release"] = ".".join(nv["pve_manager"].split(".")[:2])
        ct = tuple(int(x) for x in str(nv.get("pve_container", "5.2.7")).split("."))
        return v, ct

    def node_online(self, node):
        return node not in self.nodes_down

    def node_load(self, node):
        """mem (bytes) and cpu (fraction of maxcpu) as pvestatd would report them now: the
        node's base use plus each running container's configured memory and some CPU."""
        running = [ct for ct in self.cts.values() if ct["node"] == node and ct.get("running")]
        mem = BASE_MEM + sum(int(ct["conf"].get("memory", 512)) << 20 for ct in running)
        cpu = min(1.0, 0.01 + 0.02 * len(running))
        return {"mem": mem, "cpu": round(cpu, 4),
                "uptime": int(time.monotonic() - self.boot_mono) + 1000}

    def node_stats(self, node):
        """The node entry of /cluster/resources and /nodes (stats lag like the guests' with
        resources_lag); an offline node has no mem, cpu, disk, uptime (nor maxmem)."""
        d = {"id": f"node/{node}", "type": "node", "node": node, "level": "",
             "ssl_fingerprint": self.fingerprint}
        cap = self.node_capacity(node)
        if not self.node_online(node):
            # extract_node_stats keeps the maxima of the last RRD sample (maxmem left out here too)
            d.update({"status": "offline", "maxcpu": cap["maxcpu"], "maxdisk": 100 << 30})
            return d
        load = self.rrd_nodes.get(node) if float(self.settings["resources_lag"]) > 0 else None
        load = load or self.node_load(node)
        d.update({"status": "online", "cpu": load["cpu"], "maxcpu": cap["maxcpu"], "mem": load["mem"],
                  "maxmem": cap["maxmem"], "disk": 1 << 30, "maxdisk": 100 << 30, "uptime": load["uptime"]})
        return d

    def offline_guest(self, ct, e):
        """A guest entry of /cluster/resources for a guest on an offline node: what the
        cluster file system knows (vmid, node, name, pool, tags, lock), status unknown."""
        keep = ("id", "type", "vmid", "node", "name", "template", "pool", "tags", "lock")
        d = {k: e[k] for k in keep if k in e}
        d["status"] = "unknown"
        return d

    def set_node_online(self, node, online):
        with self.lock:
            if online:
                self.nodes_down.discard(node)
            else:
                self.nodes_down.add(node)
            self.apply_firewall()

    def node_down_ports(self):
        """Bridge ports of the containers on nodes that are down (whether running or not)."""
        return [f"veth{vmid}i0" for vmid, ct in sorted(self.cts.items()) if ct["node"] in self.nodes_down]

    def nodes_status(self):
        out = {}
        for n in self.cfg["nodes"]:
            cts = sorted(v for v, ct in self.cts.items() if ct["node"] == n)
            d = {"online": self.node_online(n), "containers": cts,
                 "running": [v for v in cts if self.cts[v].get("running")]}
            d.update(self.node_capacity(n))
            d.update({k: v for k, v in self.node_load(n).items() if k != "uptime"})
            out[n] = d
        return out


def node_down_text(ports):
    """The nftables table that cuts the containers of nodes that are down off the network:
    IPv4 to and from their bridge ports dropped (ARP still answers, so a connect times out
    instead of failing with "no route to host"). Replaced as a whole at every apply."""
    chains = []
    for hook, key in (("input", "iifname"), ("forward", None), ("output", "oifname")):
        body = []
        for p in ports:
            if key is None:
                body.append(f'iifname "{p}" ether type ip drop')
                body.append(f'oifname "{p}" ether type ip drop')
            else:
                body.append(f'{key} "{p}" ether type ip drop')
        chains.append(f" chain {hook} {{\n  type filter hook {hook} priority -200; policy accept;\n" +
                      "".join(f"  {l}\n" for l in body) + " }\n")
    return (f"table bridge {PREFIX}_down\ndelete table bridge {PREFIX}_down\n"
            f"table bridge {PREFIX}_down {{\n" + "".join(chains) + "}\n")


def node_down_check(sim, path):
    """A request for /nodes/NAME/... while NAME is down: 595 after node_down_delay."""
    m = NODE_PATH.match(path)
    if not m:
        return
    node = m.group(1)
    with sim.lock:
        down = node in sim.nodes_down
    if down:
        time.sleep(float(sim.settings["node_down_delay"]))
        raise ApiError(595, "No route to host")
