"""Firewall endpoints: /cluster/firewall/options and /groups (security groups and their
rules), and per container .../firewall/options, /rules and /ipset (guest IP sets). Every
change reaches the nftables ruleset through sim.firewall_changed()."""

import ipaddress
import json
import re

from .api import ROUTES, route
from .firewall import MACROS
from .schema import GROUP_RE, P, ApiError, die, int_path, perr, split_list
from .util import sha1

RULE_SCHEMA = {
    "type": P("enum", enum=["in", "out", "forward", "group"]),
    "action": P("string", pattern=r"[A-Za-z][A-Za-z0-9\-\_]+"),
    "source": P("string", maxlen=512), "dest": P("string", maxlen=512),
    "proto": P("string"), "dport": P("string"), "sport": P("string"),
    "iface": P("string", pattern=r"net\d+"), "macro": P("string", maxlen=128),
    "comment": P("string"), "log": P("enum", enum=["emerg", "alert", "crit", "err", "warning", "notice",
                                                     "info", "debug", "nolog"]),
    "icmp-type": P("string"), "enable": P("int", min=0), "pos": P("int", min=0),
    "digest": P("string", maxlen=64),
}
RULE_FIELDS = ["type", "action", "source", "dest", "proto", "dport", "sport", "iface", "macro",
               "comment", "log", "icmp-type", "enable"]

FWOPT_SCHEMA = {
    "enable": P("bool"), "policy_in": P("enum", enum=["ACCEPT", "REJECT", "DROP"]),
    "policy_out": P("enum", enum=["ACCEPT", "REJECT", "DROP"]),
    "dhcp": P("bool"), "ndp": P("bool"), "radv": P("bool"), "macfilter": P("bool"), "ipfilter": P("bool"),
    "log_level_in": RULE_SCHEMA["log"], "log_level_out": RULE_SCHEMA["log"],
    "delete": P("string"), "digest": P("string", maxlen=64),
}
CLUSTER_FWOPT_SCHEMA = {
    "enable": P("int", min=0), "policy_in": FWOPT_SCHEMA["policy_in"], "policy_out": FWOPT_SCHEMA["policy_out"],
    "policy_forward": P("enum", enum=["ACCEPT", "DROP"]),
    "ebtables": P("bool"), "log_ratelimit": P("string"), "delete": P("string"), "digest": P("string", maxlen=64),
}


def fw_digest(obj):
    return sha1(json.dumps(obj, sort_keys=True))


def rule_out(r, pos, digest):
    d = {"pos": pos, "digest": digest}
    for k in RULE_FIELDS:
        if k in r:
            d[k] = r[k]
    d.setdefault("enable", 0)
    if d.get("source") or d.get("dest"):
        d["ipversion"] = 6 if ":" in (d.get("source", "") + d.get("dest", "")) else 4
    return d


def rules_list(rules):
    dg = fw_digest(rules)
    return [rule_out(r, i, dg) for i, r in enumerate(rules)]


def guest_ipsets(c):
    """The IP sets of the guest whose rules are changed (none for a security group's)."""
    if "vmid" not in c.pp:
        return {}
    with c.sim.lock:
        return dict(c.sim.fw.get(c.vmid(), {}).get("ipsets", {}))


def check_rule(c, a, allow_group=True):
    errors = {}
    typ = a.get("type")
    act = a.get("action")
    if typ == "group":
        if not allow_group:
            errors["type"] = "security groups cannot contain group rules"
        elif act not in c.sim.groups:
            errors["action"] = f"security group '{act}' does not exist"
    elif typ is not None and act is not None and act not in ("ACCEPT", "DROP", "REJECT"):
        errors["action"] = f"value '{act}' does not have a value in the enumeration 'ACCEPT, DROP, REJECT'"
    if a.get("macro") and a["macro"] not in MACROS:
        errors["macro"] = f"unknown macro '{a['macro']}'"
    for k in ("source", "dest"):
        if a.get(k) and a[k].startswith("+"):
            # an IP set reference (Firewall.pm verify_rule): +name is the guest's set of that
            # name or else the cluster's (cluster sets are not modelled: none exists)
            m = re.fullmatch(r"\+(?:(guest|dc)/)?(" + IPSET_RE + ")", a[k])
            if not m:
                errors[k] = f"invalid ipset name '{a[k]}'"
            elif m.group(1) != "dc" and m.group(2) not in guest_ipsets(c):
                errors[k] = f"no such ipset '{m.group(2)}'"
            elif m.group(1) == "dc":
                errors[k] = f"no such ipset '{m.group(2)}'"
        elif a.get(k):
            for item in a[k].split(","):
                try:
                    if "-" in item:
                        for x in item.split("-", 1):
                            ipaddress.ip_address(x)
                    else:
                        ipaddress.ip_network(item, strict=False)
                except ValueError:
                    errors[k] = "invalid format - value does not look like a valid IP address or CIDR network\n"
    for k in ("dport", "sport"):
        if a.get(k):
            for item in a[k].split(","):
                if not re.fullmatch(r"\d+(:\d+)?", item):
                    errors[k] = f"invalid port '{item}'"
    if errors:
        raise perr(errors)


def rules_common(c, rules_get, rules_save, read_priv, write_priv, allow_group=True):
    """Shared logic for .../rules and .../rules/{pos}."""
    pos = c.pp.get("pos")
    s = c.sim
    if c.method == "GET":
        c.args({})
        read_priv()
        with s.lock:
            rules = rules_get()
            if pos is None:
                return rules_list(rules)
            if pos >= len(rules):
                raise die(f"no rule at position {pos}")
            return rule_out(rules[pos], pos, fw_digest(rules))
    if c.method == "POST":
        sch = dict(RULE_SCHEMA)
        a = c.args(sch, required=("type", "action"))
        write_priv()
        check_rule(c, a, allow_group)
        with s.lock:
            rules = rules_get()
            if "digest" in a and a["digest"] != fw_digest(rules):
                raise die("detected modified configuration - file changed by other user? Try again.")
            r = {k: a[k] for k in RULE_FIELDS if k in a}
            r.setdefault("enable", 0)
            at = min(a.get("pos", 0), len(rules))
            rules.insert(at, r)
            rules_save(rules)
        s.firewall_changed()
        return None
    if c.method == "PUT":
        sch = dict(RULE_SCHEMA)
        sch["moveto"] = P("int", min=0)
        sch["delete"] = P("string")
        a = c.args(sch)
        write_priv()
        check_rule(c, a, allow_group)
        with s.lock:
            rules = rules_get()
            if "digest" in a and a["digest"] != fw_digest(rules):
                raise die("detected modified configuration - file changed by other user? Try again.")
            if pos >= len(rules):
                raise die(f"no rule at position {pos}")
            r = rules[pos]
            if "moveto" in a:
                rules.pop(pos)
                rules.insert(min(a["moveto"], len(rules)), r)
            else:
                for k in RULE_FIELDS:
                    if k in a:
                        r[k] = a[k]
                for k in split_list(a.get("delete", "")):
                    if k in ("type", "action"):
                        raise perr({"delete": f"unable to delete required property '{k}'"})
                    r.pop(k, None)
            rules_save(rules)
        s.firewall_changed()
        return None
    if c.method == "DELETE":
        a = c.args({"digest": P("string", maxlen=64)})
        write_priv()
        with s.lock:
            rules = rules_get()
            if "digest" in a and a["digest"] != fw_digest(rules):
                raise die("detected modified configuration - file changed by other user? Try again.")
            if pos >= len(rules):
                raise die(f"no rule at position {pos}")
            rules.pop(pos)
            rules_save(rules)
        s.firewall_changed()
        return None


def ct_fw(c):
    c.node()
    vmid = c.vmid()
    return c.sim.fw.setdefault(vmid, {"options": {}, "rules": []})


def ct_rules_handler(c):
    vmid = c.vmid()
    if "pos" in c.pp:
        c.pp["pos"] = int_path(c.pp["pos"], "pos")

    def get():
        return ct_fw(c)["rules"]

    def save(rules):
        ct_fw(c)["rules"] = rules
        c.sim.save()
    return rules_common(c, get, save, lambda: c.need_vm(vmid, "VM.Audit"),
                        lambda: c.need_vm(vmid, "VM.Config.Network"))


for _m in ("GET", "POST"):
    route(_m, "/nodes/{node}/lxc/{vmid}/firewall/rules")(ct_rules_handler)
for _m in ("GET", "PUT", "DELETE"):
    route(_m, "/nodes/{node}/lxc/{vmid}/firewall/rules/{pos}")(ct_rules_handler)


def options_common(c, get, save, schema, read, write):
    s = c.sim
    if c.method == "GET":
        c.args({})
        read()
        with s.lock:
            o = get()
            d = dict(o)
            d["digest"] = fw_digest(o)
            return d
    a = c.args(schema)
    write()
    with s.lock:
        o = get()
        if "digest" in a and a["digest"] != fw_digest(o):
            raise die("detected modified configuration - file changed by other user? Try again.")
        dels = split_list(a.get("delete", ""))
        for k in dels:
            if k not in schema or k in ("delete", "digest"):
                raise perr({"delete": f"no such option '{k}'"})
        for k in dels:
            o.pop(k, None)
        for k, v in a.items():
            if k not in ("delete", "digest"):
                o[k] = v
        save(o)
    s.firewall_changed()
    return None


@route("GET", "/nodes/{node}/lxc/{vmid}/firewall/options")
@route("PUT", "/nodes/{node}/lxc/{vmid}/firewall/options")
def h_ct_fwopts(c):
    vmid = c.vmid()
    f = ct_fw(c)

    def save(o):
        f["options"] = o
        c.sim.save()
    return options_common(c, lambda: f["options"], save, FWOPT_SCHEMA,
                          lambda: c.need_vm(vmid, "VM.Audit"), lambda: c.need_vm(vmid, "VM.Config.Network"))


@route("GET", "/nodes/{node}/lxc/{vmid}/firewall")
def h_ct_fw_index(c):
    c.args({})
    c.node()
    return [{"name": "rules"}, {"name": "aliases"}, {"name": "ipset"}, {"name": "options"}, {"name": "log"},
            {"name": "refs"}]


# ---- guest IP sets (/nodes/{node}/lxc/{vmid}/firewall/ipset): part of the CT's .fw file

IPSET_RE = r"[A-Za-z][A-Za-z0-9\-\_]+"


def ipset_norm(cidr):
    """The stored form of an ipset entry: /32 (/128) dropped, a host CIDR masked."""
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        raise perr({"cidr": "invalid format - value does not look like a valid IP address or CIDR network\n"})
    if net.prefixlen == 0:
        raise ApiError(400, "a zero prefix is not allowed in ipset entries")
    if net.prefixlen == net.max_prefixlen:
        return str(net.network_address)
    return str(net)


def ct_ipsets(c):
    return ct_fw(c).setdefault("ipsets", {})


def ct_ipset(c):
    name = c.pp["name"]
    sets = ct_ipsets(c)
    if name not in sets:
        raise die(f"no such IPSet '{name}'")
    return sets[name]


@route("GET", "/nodes/{node}/lxc/{vmid}/firewall/ipset")
def h_ct_ipsets(c):
    c.args({})
    vmid = c.vmid()
    c.need_vm(vmid, "VM.Audit")
    with c.sim.lock:
        sets = ct_ipsets(c)
        dg = fw_digest(sets)
        out = []
        for n, d in sorted(sets.items()):
            e = {"name": n, "digest": dg}
            if d.get("comment"):
                e["comment"] = d["comment"]
            out.append(e)
        return out


@route("POST", "/nodes/{node}/lxc/{vmid}/firewall/ipset")
def h_ct_ipset_create(c):
    a = c.args({"name": P("string", pattern=IPSET_RE, maxlen=64), "comment": P("string"),
                "rename": P("string", pattern=IPSET_RE), "digest": P("string", maxlen=64)}, required=("name",))
    vmid = c.vmid()
    c.need_vm(vmid, "VM.Config.Network")
    s = c.sim
    with s.lock:
        sets = ct_ipsets(c)
        if "digest" in a and a["digest"] != fw_digest(sets):
            raise die("detected modified configuration - file changed by other user? Try again.")
        n = a["name"]
        if "rename" in a:
            # as pve-firewall API2/Firewall/IPSet.pm:679-698: parameter errors on "name"
            old = a["rename"]
            if old not in sets:
                raise perr({"name": f"IPSet '{old}' does not exist"})
            if n in sets and n != old:
                raise perr({"name": f"IPSet '{n}' does already exist"})
            d = sets.pop(old)
            if "comment" in a:
                d["comment"] = a["comment"]
            sets[n] = d
        else:
            if n in sets:
                raise die(f"IPSet '{n}' already exists")
            sets[n] = {"comment": a.get("comment", ""), "entries": []}
        s.save()
    s.firewall_changed()
    return None


def ipset_entry_out(e, digest):
    d = {"cidr": e["cidr"], "digest": digest}
    if e.get("comment"):
        d["comment"] = e["comment"]
    if e.get("nomatch"):
        d["nomatch"] = 1
    return d


@route("GET", "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}")
@route("POST", "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}")
@route("DELETE", "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}")
def h_ct_ipset(c):
    vmid = c.vmid()
    s = c.sim
    if c.method == "GET":
        c.args({})
        c.need_vm(vmid, "VM.Audit")
        with s.lock:
            entries = ct_ipset(c)["entries"]
            dg = fw_digest(entries)
            return [ipset_entry_out(e, dg) for e in entries]
    if c.method == "POST":
        a = c.args({"cidr": P("string", maxlen=64), "comment": P("string"), "nomatch": P("bool")},
                   required=("cidr",))
        c.need_vm(vmid, "VM.Config.Network")
        cidr = ipset_norm(a["cidr"])
        with s.lock:
            entries = ct_ipset(c)["entries"]
            if any(e["cidr"] == cidr for e in entries):
                raise perr({"cidr": f"address '{cidr}' already exists"})
            e = {"cidr": cidr}
            if a.get("comment"):
                e["comment"] = a["comment"]
            if a.get("nomatch"):
                e["nomatch"] = 1
            entries.insert(0, e)
            s.save()
        s.firewall_changed()
        return None
    a = c.args({"force": P("bool"), "digest": P("string", maxlen=64)})
    c.need_vm(vmid, "VM.Config.Network")
    with s.lock:
        sets = ct_ipsets(c)
        d = ct_ipset(c)
        if "digest" in a and a["digest"] != fw_digest(d["entries"]):
            raise die("detected modified configuration - file changed by other user? Try again.")
        if d["entries"] and not a.get("force"):
            raise die(f"IPSet '{c.pp['name']}' is not empty")
        del sets[c.pp["name"]]
        s.save()
    s.firewall_changed()
    return None


def h_ct_ipset_entry(c):
    """.../ipset/{name}/{cidr}: the cidr may arrive raw ("10.0.0.0/24") or URL-encoded."""
    vmid = c.vmid()
    s = c.sim
    cidr = c.pp["cidr"]
    if c.method == "DELETE":
        a = c.args({"digest": P("string", maxlen=64)})
        c.need_vm(vmid, "VM.Config.Network")
        with s.lock:
            entries = ct_ipset(c)["entries"]
            if "digest" in a and a["digest"] != fw_digest(entries):
                raise die("detected modified configuration - file changed by other user? Try again.")
            # not normalised: deleting 10.0.0.5/32 leaves a stored 10.0.0.5 (idempotent)
            kept = [e for e in entries if e["cidr"] != cidr]
            if len(kept) != len(entries):
                entries[:] = kept
                s.save()
        s.firewall_changed()
        return None
    if c.method == "GET":
        c.args({})
        c.need_vm(vmid, "VM.Audit")
        with s.lock:
            entries = ct_ipset(c)["entries"]
            for e in entries:
                if e["cidr"] == cidr:
                    return ipset_entry_out(e, fw_digest(entries))
            raise die("no such IP/Network")
    a = c.args({"comment": P("string"), "nomatch": P("bool"), "digest": P("string", maxlen=64)})
    c.need_vm(vmid, "VM.Config.Network")
    with s.lock:
        entries = ct_ipset(c)["entries"]
        if "digest" in a and a["digest"] != fw_digest(entries):
            raise die("detected modified configuration - file changed by other user? Try again.")
        for e in entries:
            if e["cidr"] == cidr:
                if "comment" in a:
                    e["comment"] = a["comment"]
                if "nomatch" in a:
                    if a["nomatch"]:
                        e["nomatch"] = 1
                    else:
                        e.pop("nomatch", None)
                s.save()
                break
        else:
            raise die("no such IP/Network")
    s.firewall_changed()
    return None


for _m in ("GET", "PUT", "DELETE"):
    ROUTES.append((_m, re.compile(r"^/nodes/(?P<node>[^/]+)/lxc/(?P<vmid>[^/]+)/firewall/ipset/(?P<name>[^/]+)/"
                                  r"(?P<cidr>.+)$"), h_ct_ipset_entry))


@route("GET", "/cluster/firewall/options")
@route("PUT", "/cluster/firewall/options")
def h_cl_fwopts(c):
    s = c.sim

    def save(o):
        s.cluster_fw["options"] = o
        s.save()
    return options_common(c, lambda: s.cluster_fw["options"], save, CLUSTER_FWOPT_SCHEMA,
                          lambda: c.need("/", "Sys.Audit"), lambda: c.need("/", "Sys.Modify"))


@route("GET", "/cluster/firewall/groups")
def h_groups(c):
    c.args({})
    c.need("/", "Sys.Audit")
    s = c.sim
    with s.lock:
        return [{"group": g, "comment": d.get("comment", ""), "digest": fw_digest(s.groups)}
                for g, d in sorted(s.groups.items())]


@route("POST", "/cluster/firewall/groups")
def h_group_create(c):
    a = c.args({"group": P("string", pattern=GROUP_RE, maxlen=18), "comment": P("string"),
                "rename": P("string", pattern=GROUP_RE), "digest": P("string", maxlen=64)}, required=("group",))
    c.need("/", "Sys.Modify")
    s = c.sim
    with s.lock:
        g = a["group"]
        if "rename" in a:
            old = a["rename"]
            if old not in s.groups:
                raise die(f"Security group '{old}' does not exist")
            if g in s.groups and g != old:
                raise die(f"Security group '{g}' already exists")
            d = s.groups.pop(old)
            if "comment" in a:
                d["comment"] = a["comment"]
            s.groups[g] = d
        else:
            if g in s.groups:
                raise die(f"Security group '{g}' already exists")
            s.groups[g] = {"comment": a.get("comment", ""), "rules": []}
        s.save()
    s.firewall_changed()
    return None


def group_of(c):
    g = c.pp["group"]
    if g not in c.sim.groups:
        raise die(f"no such security group '{g}'")
    return c.sim.groups[g]


def group_rules_handler(c):
    s = c.sim
    if "pos" in c.pp:
        c.pp["pos"] = int_path(c.pp["pos"], "pos")
    if c.method == "DELETE" and "pos" not in c.pp:
        c.args({})
        c.need("/", "Sys.Modify")
        with s.lock:
            g = group_of(c)
            if g["rules"]:
                raise die(f"Security group '{c.pp['group']}' is not empty")
            for f in s.fw.values():
                for r in f["rules"]:
                    if r.get("type") == "group" and r.get("action") == c.pp["group"]:
                        raise die(f"Security group '{c.pp['group']}' is used by other rules")
            del s.groups[c.pp["group"]]
            s.save()
        return None
    with s.lock:
        group_of(c)

    def get():
        return group_of(c)["rules"]

    def save(rules):
        group_of(c)["rules"] = rules
        s.save()
    return rules_common(c, get, save, lambda: c.need("/", "Sys.Audit"), lambda: c.need("/", "Sys.Modify"),
                        allow_group=False)


for _m in ("GET", "POST", "DELETE"):
    route(_m, "/cluster/firewall/groups/{group}")(group_rules_handler)
for _m in ("GET", "PUT", "DELETE"):
    route(_m, "/cluster/firewall/groups/{group}/{pos}")(group_rules_handler)
