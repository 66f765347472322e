"""The firewall as enforced: the stored firewall configuration (cluster options, security
groups, each container's options, rules and IP sets) turned into one nftables ruleset in
the node namespace (tables inet and bridge "pvesim").

As pve-firewall does, the configuration is compiled and applied on a fixed cycle
(firewall_period seconds, 10 on a real node) whose phase is chosen at random when the
simulator starts and has nothing to do with API calls: a change becomes effective at the
next tick. firewall_period 0 applies every change at once. A container starting or
getting its address re-applies the last compiled configuration at once (its ports and
address are runtime facts, not configuration).

ipfilter as on a node: with ipfilter=1, or whenever an ipfilter-net0 set exists (whatever
the option: pve-firewall Firewall.pm generate_tap_rules_direction, proxmox-firewall
firewall.rs), the container may send IPv4 only from addresses in its ipfilter-net0 set, to
which pve-firewall adds a static ip= of net0 implicitly; a DHCP lease is in no set. The
nftables firewall (setting firewall_nftables) adds the static ip= only when no
ipfilter-net0 set exists. Before a lease exists the container has no address and sends no IPv4 of its own (the
simulated DHCP exchange happens out of band, as the DHCP packets from 0.0.0.0 the real
chain lets through). Packets from the container's own address that ipfilter drops are
counted per container in a table that survives reloads (GET /admin/state,
"ipfilter_drops")."""

import copy
import ipaddress
import json
import random
import re
import threading
import time

from .nodes import node_down_text
from .schema import ParamErr, parse_net
from .util import PREFIX, log

MACROS = {
    "DNS": [("udp", "53"), ("tcp", "53")],
    "HTTP": [("tcp", "80")],
    "HTTPS": [("tcp", "443")],
    "SSH": [("tcp", "22")],
    "Ping": [("icmp", None)],
    "Web": [("tcp", "80"), ("tcp", "443")],
}


def nft_addrs(spec):
    items = []
    for a in spec.split(","):
        a = a.strip()
        if not a:
            continue
        if a.startswith("+") or ":" in a:
            return None  # a set in a list (not a valid rule) and IPv6 are not modelled
        try:
            if "-" in a:
                lo, hi = a.split("-", 1)
                ipaddress.IPv4Address(lo)
                ipaddress.IPv4Address(hi)
            else:
                ipaddress.IPv4Network(a, strict=False)
        except ValueError:
            return None
        items.append(a)
    if not items:
        return None
    return items[0] if len(items) == 1 else "{ " + ", ".join(items) + " }"


def nft_ports(spec):
    items = [p.strip().replace(":", "-") for p in spec.split(",") if p.strip()]
    for p in items:
        if not re.fullmatch(r"\d+(-\d+)?", p):
            return None
    return items[0] if len(items) == 1 else "{ " + ", ".join(items) + " }"


def nft_set_match(spec, sets, kw):
    """The matches for an IP set reference (+name, +guest/name) among the guest's sets, as
    pve-firewall resolves them; None when the reference resolves to nothing (a cluster set,
    not modelled, or a missing one: the rule has errors and is left out) or the set has no
    IPv4 entry (it matches nothing). nomatch entries are exceptions: an address in one does
    not match even when a wider entry holds it."""
    m = re.fullmatch(r"\+(?:(guest|dc)/)?([A-Za-z][A-Za-z0-9_-]+)", spec)
    if not m or m.group(1) == "dc" or m.group(2) not in (sets or {}):
        return None
    match, nomatch = [], []
    for e in sets[m.group(2)].get("entries", []):
        if ":" in e["cidr"]:
            continue  # IPv6 is not modelled
        (nomatch if e.get("nomatch") else match).append(ipaddress.ip_network(e["cidr"], strict=False))
    if not match:
        return None

    def nft_set(nets):
        return "{ " + ", ".join(str(n.network_address) if n.prefixlen == 32 else str(n)
                                for n in ipaddress.collapse_addresses(nets)) + " }"
    out = [f"ip {kw} {nft_set(match)}"]
    if nomatch:
        out.insert(0, f"ip {kw} != {nft_set(nomatch)}")
    return out


def rule_to_nft(r, verdict, sets=None):
    """Return nft rule lines for one rule (type in/out), or [] when it cannot match. sets:
    the guest's IP sets, for a rule of the guest's own (a security group's rule sees none)."""
    base = []
    for key, kw in (("source", "saddr"), ("dest", "daddr")):
        if r.get(key) and r[key].startswith("+"):
            a = nft_set_match(r[key], sets, kw)
            if a is None:
                return []
            base += a
        elif r.get(key):
            a = nft_addrs(r[key])
            if a is None:
                return []
            base.append(f"ip {kw} {a}")
    variants = []
    if r.get("macro"):
        mac = MACROS.get(r["macro"])
        if mac is None:
            return []
        for proto, dport in mac:
            variants.append((proto, dport, None))
    else:
        proto = r.get("proto")
        variants.append((proto, r.get("dport"), r.get("sport")))
    lines = []
    for proto, dport, sport in variants:
        m = list(base)
        protos = [proto] if proto else ([None] if not (dport or sport) else ["tcp", "udp"])
        for pr in protos:
            mm = list(m)
            if pr in ("tcp", "udp"):
                mm.append(f"meta l4proto {pr}")
                if dport:
                    p = nft_ports(dport)
                    if p is None:
                        return []
                    mm.append(f"{pr} dport {p}")
                if sport:
                    p = nft_ports(sport)
                    if p is None:
                        return []
                    mm.append(f"{pr} sport {p}")
            elif pr in ("icmp",):
                mm.append("meta l4proto icmp")
            elif pr is not None:
                mm.append(f"meta l4proto {pr}")
            lines.append(" ".join(mm + [verdict]))
    return lines


def verdict_for(action, direction):
    if action == "ACCEPT":
        return "return" if direction == "out" else "accept"
    if action == "DROP":
        return "drop"
    return "jump pvefw_reject"  # a REJECT rule: -j PVEFW-reject


# REJECT as pve-firewall (Firewall.pm, PVEFW-reject): broadcasts, multicast sources and ICMP
# dropped; TCP answered with a reset, UDP with ICMP port-unreachable, the rest with ICMP
# host-prohibited. Only IPv4 is modelled.
REJECT_CHAIN = """ chain pvefw_reject {
  fib daddr type broadcast drop
  ip saddr 224.0.0.0/4 drop
  meta l4proto icmp drop
  ip protocol tcp reject with tcp reset
  ip protocol udp reject with icmp type port-unreachable
  meta nfproto ipv4 reject with icmp type host-prohibited
 }
"""

# policy REJECT (ruleset_add_chain_policy): first PVEFW-Reject, which lets critical ICMP
# through and drops noise (invalid state, UPnP, new TCP that is not a SYN, DNS replies),
# then -g PVEFW-reject.
REJECT_POLICY = ["icmp type destination-unreachable icmp code frag-needed return", "icmp type time-exceeded return",
                 "ct state invalid drop", "udp dport 1900 drop",
                 "meta l4proto tcp tcp flags & (fin|syn|rst|ack) != syn drop", "udp sport 53 drop",
                 "goto pvefw_reject"]


def policy_lines(policy, direction):
    """The end of a guest chain for its policy (ruleset_add_chain_policy)."""
    if policy == "REJECT":
        return [l.replace(" return", " accept") if direction == "in" else l for l in REJECT_POLICY]
    return [verdict_for(policy, direction)]


def ipfilter_on(c):
    """ipfilter is in force with the option, and with any ipfilter-net0 set."""
    return bool(int(c["options"].get("ipfilter", 0) or 0)) or "ipfilter-net0" in c.get("ipsets", {})


def static_allowed(c):
    """The static ip= ipfilter lets through: pve-firewall merges it into the set; the
    nftables firewall only into the set it makes when there is none."""
    if not c.get("static_ip"):
        return None
    if c.get("nftables") and "ipfilter-net0" in c.get("ipsets", {}):
        return None
    return c["static_ip"]


def ipfilter_drops_own(c, ip):
    """True when the container's ipfilter drops packets from its own address ip."""
    if not ip or not ipfilter_on(c):
        return False
    a = ipaddress.IPv4Address(ip)
    allowed = static_allowed(c) == ip
    for e in c.get("ipsets", {}).get("ipfilter-net0", {}).get("entries", []):
        if ":" in e["cidr"]:
            continue
        if a in ipaddress.ip_network(e["cidr"], strict=False):
            if e.get("nomatch"):
                return True
            allowed = True
    return not allowed


def bridge_rules(port, c, mac):
    """Bridge input rules of a filtered container: macfilter and ipfilter."""
    br_in = []
    if int(c["options"].get("macfilter", 1)) and mac:
        br_in.append(f'iifname "{port}" ether saddr != {mac.lower()} drop')
    if ipfilter_on(c):
        # as PVE: only sources in the guest's ipfilter-net0 set (plus a static ip=) pass;
        # a DHCP lease is in no set by itself
        allowed, nomatch = [], []
        if static_allowed(c):
            allowed.append(static_allowed(c))
        for e in c.get("ipsets", {}).get("ipfilter-net0", {}).get("entries", []):
            if ":" in e["cidr"]:
                continue  # IPv6 is not modelled
            (nomatch if e.get("nomatch") else allowed).append(e["cidr"])
        for n in nomatch:
            br_in.append(f'iifname "{port}" ether type ip ip saddr {n} drop')
        allowed = [str(n.network_address) if n.prefixlen == 32 else str(n) for n in
                   ipaddress.collapse_addresses(ipaddress.ip_network(x, strict=False) for x in allowed)]
        if allowed:
            br_in.append(f'iifname "{port}" ether type ip ip saddr != {{ {", ".join(allowed)} }} drop')
        else:
            br_in.append(f'iifname "{port}" ether type ip drop')
    return br_in


def ct_chains(vmid, c, groups):
    """The ct<vmid>_out and ct<vmid>_in chains: enabled rules in order, groups expanded in place."""
    out_rules, in_rules = [], []
    sets = c.get("ipsets", {})
    for r in c["rules"]:
        if not int(r.get("enable", 0) or 0):
            continue
        if r["type"] == "group":
            g = groups.get(r["action"])
            if not g:
                continue
            for gr in g["rules"]:
                if int(gr.get("enable", 0) or 0) and gr["type"] in ("in", "out"):
                    (out_rules if gr["type"] == "out" else in_rules).append((gr, None))
        elif r["type"] in ("in", "out"):
            (out_rules if r["type"] == "out" else in_rules).append((r, sets))
    ol = []
    for r, rs in out_rules:
        ol += rule_to_nft(r, verdict_for(r["action"], "out"), rs)
    pol = c["options"].get("policy_out") or "ACCEPT"
    if pol != "ACCEPT":
        ol += policy_lines(pol, "out")
    il = []
    for r, rs in in_rules:
        il += rule_to_nft(r, verdict_for(r["action"], "in"), rs)
    il += policy_lines(c["options"].get("policy_in") or "DROP", "in")
    return [f"chain ct{vmid}_out {{\n" + "".join(f"  {l}\n" for l in ol) + "}",
            f"chain ct{vmid}_in {{\n" + "".join(f"  {l}\n" for l in il) + "}"]


def ruleset_text(fwd, chains, br_in, inp=()):
    text = f"""table inet {PREFIX}
delete table inet {PREFIX}
table bridge {PREFIX}
delete table bridge {PREFIX}
table inet {PREFIX} {{
 chain forward {{
  type filter hook forward priority 0; policy accept;
  ct state established,related accept
  ct state invalid drop
{''.join(f'  {l}{chr(10)}' for l in fwd)} }}
 chain input {{
  type filter hook input priority 0; policy accept;
  iifname "vmbr0" ct state established,related accept
  iifname "vmbr0" meta l4proto icmp accept
{''.join(f'  {l}{chr(10)}' for l in inp)}  iifname "vmbr0" drop
 }}
{REJECT_CHAIN}{chr(10).join(chains)}
}}
table bridge {PREFIX} {{
 chain forward {{
  type filter hook forward priority 0; policy accept;
  iifname "veth*" oifname "veth*" drop
 }}
 chain input {{
  type filter hook input priority 0; policy accept;
{''.join(f'  {l}{chr(10)}' for l in br_in)} }}
}}
"""
    return text


def stats_text(counted):
    """The counting table: kept across reloads (only its chain is flushed), one named
    counter per container that ever had its own address dropped by ipfilter."""
    lines = [f"table bridge {PREFIX}_stats {{",
             " chain input { type filter hook input priority -10; policy accept; }", "}",
             f"flush chain bridge {PREFIX}_stats input"]
    for vmid, port, ip in counted:
        lines.append(f"add counter bridge {PREFIX}_stats ipf{vmid}")
        lines.append(f'add rule bridge {PREFIX}_stats input iifname "{port}" ether type ip ip saddr {ip} '
                     f'counter name "ipf{vmid}"')
    return "\n".join(lines) + "\n"


class FirewallMixin:
    """Sim methods: firewall snapshots, the cycle, and applying the ruleset."""

    def fw_snapshot(self):
        snap = {"cluster": copy.deepcopy(self.cluster_fw), "groups": copy.deepcopy(self.groups), "ct": {}}
        for vmid, ct in self.cts.items():
            netfw, static_ip = 0, None
            try:
                net = parse_net(ct["conf"]["net0"])
                netfw = net.get("firewall", 0)
                if net.get("ip") and net["ip"] not in ("dhcp", "manual"):
                    static_ip = net["ip"].split("/")[0]
            except (KeyError, ParamErr):
                pass
            f = self.fw.get(vmid, {"options": {}, "rules": []})
            snap["ct"][vmid] = {"options": copy.deepcopy(f["options"]), "rules": copy.deepcopy(f["rules"]),
                                "ipsets": copy.deepcopy(f.get("ipsets", {})), "netfw": netfw,
                                "static_ip": static_ip,
                                "nftables": bool(self.settings.get("firewall_nftables"))}
        return snap

    def firewall_changed(self):
        """The stored firewall configuration changed: applied now with firewall_period 0,
        else at the next tick of the cycle."""
        if float(self.settings["firewall_period"]) <= 0:
            self.firewall_tick()

    def firewall_tick(self):
        """One pve-firewall cycle: compile the stored configuration and apply it."""
        with self.lock:
            if self.closed:
                return
            self.applied_fw = self.fw_snapshot()
            self.fw_ticks += 1
            self.fw_last_tick = time.time()
            self.apply_firewall()

    def firewall_start_cycle(self):
        """(Re)start the cycle with the current firewall_period and a random phase."""
        with self.lock:
            self.fw_cycle_gen += 1
            gen = self.fw_cycle_gen
            period = float(self.settings["firewall_period"])
            if period <= 0 or self.closed:
                self.fw_next_tick = None
                return
            phase = self.settings.get("firewall_phase")
            if phase is None or not 0 <= float(phase) <= period:
                phase = random.uniform(0, period)
            self.fw_next_tick = time.monotonic() + float(phase)

        def run():
            while True:
                with self.lock:
                    if self.closed or gen != self.fw_cycle_gen:
                        return
                    due = self.fw_next_tick
                wait = due - time.monotonic()
                if wait > 0:
                    self.fw_wake.wait(min(wait, 0.5))
                    continue
                self.firewall_tick()
                with self.lock:
                    if gen == self.fw_cycle_gen:
                        self.fw_next_tick = due + period
                        while self.fw_next_tick <= time.monotonic():
                            self.fw_next_tick += period
        threading.Thread(target=run, daemon=True, name="pve-firewall").start()

    def firewall_status(self):
        nxt = self.fw_next_tick
        return {"period": float(self.settings["firewall_period"]), "ticks": self.fw_ticks,
                "last_tick": self.fw_last_tick,
                "next_tick": None if nxt is None else time.time() + max(0.0, nxt - time.monotonic()),
                "ipfilter_drops": self.ipfilter_drops()}

    def ipfilter_drops(self):
        """{vmid: packets} dropped by ipfilter from the container's own address, since start."""
        if not self.net.enabled:
            return {}
        try:
            r = self.net.nsx(self.net.node_ns, "nft", "-j", "list", "table", "bridge", PREFIX + "_stats",
                             check=False)
            objs = json.loads(r.stdout or "{}").get("nftables", [])
        except (ValueError, RuntimeError):
            return {}
        out = {}
        for o in objs:
            c = o.get("counter")
            if c and c.get("name", "").startswith("ipf"):
                out[c["name"][3:]] = c.get("packets", 0)
        return out

    def fw_active(self, snap, vmid):
        c = snap["ct"].get(vmid)
        if not c:
            return False
        return bool(int(snap["cluster"]["options"].get("enable", 0) or 0)) and \
            bool(int(c["options"].get("enable", 0) or 0)) and bool(c["netfw"])

    def build_nft(self):
        snap = self.applied_fw or self.fw_snapshot()
        fwd, chains, br_in, counted, inp = [], [], [], [], []
        for vmid in sorted(self.rt):
            rt = self.rt[vmid]
            if not self.fw_active(snap, vmid):
                continue
            c = snap["ct"][vmid]
            port = f"veth{vmid}i0"
            ip = rt.get("ip")
            br_in += bridge_rules(port, c, rt.get("mac"))
            if ipfilter_drops_own(c, ip):
                counted.append((vmid, port, ip))
            if not ip:
                br_in.append(f'iifname "{port}" ether type ip drop')
                continue
            chains += ct_chains(vmid, c, snap["groups"])
            fwd.append(f"ip saddr {ip} jump ct{vmid}_out")
            fwd.append(f"ip daddr {ip} jump ct{vmid}_in")
            # to the node itself too: on a node the guest's OUT chain sees every packet that
            # leaves its port (the firewall bridge), whatever its destination
            inp.append(f'iifname "vmbr0" ip saddr {ip} jump ct{vmid}_out')
        return ruleset_text(fwd, chains, br_in, inp) + stats_text(counted) + node_down_text(self.node_down_ports())

    def apply_firewall(self):
        with self.lock:
            if self.closed:
                return
            text = self.build_nft()
            try:
                self.net.apply_nft(text)
            except RuntimeError as e:
                log("nft apply failed:", e)
                log(text)
