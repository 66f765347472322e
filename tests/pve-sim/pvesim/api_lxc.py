"""Container endpoints under /nodes/{node}/lxc: list, indexes, config, clone, resize,
start/stop/shutdown, status, interfaces, destroy. Long operations run as tasks."""

import copy
import os
import re
import time
from types import SimpleNamespace

from .api import route
from .schema import (NODE_RE, POOL_RE, STORAGE_RE, P, ApiError, ParamErr, die, fmt_dns, fmt_tags, format_size,
                     parse_net, parse_size, perr, print_net, print_rootfs, random_mac, rootfs_parts, split_list)
from .tasks import TaskFail
from .util import log
from .volumes import apply_mp_config, check_mp_args, is_mp, is_unused

INT_KEYS = {"cores", "memory", "swap", "cpuunits", "unprivileged", "template", "onboot", "protection",
            "console", "debug", "tty"}
NUM_KEYS = {"cpulimit"}

CONF_SCHEMA = {
    "cores": P("int", min=1, max=8192),
    "memory": P("int", min=16),
    "swap": P("int", min=0),
    "cpulimit": P("number", min=0, max=8192),
    "cpuunits": P("int", min=0, max=500000),
    "hostname": P("string", maxlen=255, fmt=fmt_dns),
    "description": P("string", maxlen=8192),
    "tags": P("string", fmt=fmt_tags),
    "onboot": P("bool"), "protection": P("bool"), "console": P("bool"), "debug": P("bool"),
    "template": P("bool"), "unprivileged": P("bool"),
    "tty": P("int", min=0, max=6),
    "features": P("string"),
    "ostype": P("enum", enum=["debian", "devuan", "ubuntu", "centos", "fedora", "opensuse", "archlinux",
                              "alpine", "gentoo", "nixos", "unmanaged"]),
    "arch": P("enum", enum=["amd64", "i386", "arm64", "armhf", "riscv32", "riscv64"]),
    "nameserver": P("string"),
    "searchdomain": P("string"),
    "startup": P("string"),
    "timezone": P("string"),
    "lock": P("enum", enum=["backup", "create", "destroyed", "disk", "fstrim", "migrate", "mounted",
                            "rollback", "snapshot", "snapshot-delete"]),
    "delete": P("string"),
    "revert": P("string"),
    "digest": P("string", maxlen=40),
    "rootfs": P("string"),
}
CONF_PATTERNS = [(r"net\d+", P("string")), (r"mp\d+", P("string")), (r"unused\d+", P("string"))]

CONF_PRIV = {"cores": "VM.Config.CPU", "cpulimit": "VM.Config.CPU", "cpuunits": "VM.Config.CPU",
             "memory": "VM.Config.Memory", "swap": "VM.Config.Memory", "rootfs": "VM.Config.Disk"}


@route("GET", "/nodes/{node}/lxc")
def h_lxc_list(c):
    c.args({})
    node = c.node()
    s = c.sim
    with s.lock:
        out = [s.vmstatus(ct) for vmid, ct in sorted(s.cts.items())
               if ct["node"] == node and c.can_vm(vmid, "VM.Audit")]
        if s.settings["legacy_vmid_strings"]:
            for e in out:
                e["vmid"] = str(e["vmid"])
        return out


@route("POST", "/nodes/{node}/lxc/{vmid}/clone")
def h_clone(c):
    a = c.args({"newid": P("int", min=100, max=999999999), "hostname": P("string", fmt=fmt_dns),
                "description": P("string", maxlen=8192), "pool": P("string", pattern=POOL_RE),
                "full": P("bool"), "storage": P("string", pattern=STORAGE_RE),
                "target": P("string", pattern=NODE_RE), "snapname": P("string", maxlen=40),
                "bwlimit": P("number", min=0)}, required=("newid",))
    node = c.node()
    vmid = c.vmid()
    newid = a["newid"]
    s = c.sim
    pool = a.get("pool")
    with s.lock:
        if pool is not None and pool not in s.pools:
            raise ApiError(403, f"Permission check failed (pool '{pool}' does not exist)")
        c.need_vm(vmid, "VM.Clone")
        if pool is not None:
            c.need(f"/pool/{pool}", "VM.Allocate")
        else:
            c.need(f"/vms/{newid}", "VM.Allocate")
        target = a.get("target")
        if target is not None and target not in s.cfg["nodes"]:
            raise die(f"no such cluster node '{target}'")
        src = s.ct_on(node, vmid)
        s.check_lock(src)
        if newid in s.cts:
            raise die(f"CT {newid} already exists on node '{s.cts[newid]['node']}'")
        is_tmpl = src["conf"].get("template") == "1"
        full = a.get("full", 0 if is_tmpl else 1)
        rootfs = rootfs_parts(src["conf"]["rootfs"])
        # reserve newid, lock source
        src["conf"]["lock"] = "disk"
        s.cts[newid] = {"vmid": newid, "node": node, "conf": {"lock": "create"}, "description": None,
                        "running": False, "linked_from": None, "pool": None}
        err = clone_refusal(s, a, node, src, full, is_tmpl, rootfs["volume"])
        if err:
            src["conf"].pop("lock", None)
            del s.cts[newid]
            raise die(err)
        s.save()
    job = SimpleNamespace(a=a, vmid=vmid, newid=newid, src=src, full=full, rootfs=rootfs, pool=pool,
                          target=target, dst_store=a.get("storage") or rootfs["volume"].split(":", 1)[0])
    return c.start_task(node, "vzclone", vmid, lambda t, ferr: clone_copy(s, t, ferr, job))


def clone_refusal(s, a, node, src, full, is_tmpl, src_vol):
    """Why this clone cannot be done, or None; checked once newid is reserved."""
    storage = a.get("storage")
    target = a.get("target")
    src_store = src_vol.split(":", 1)[0]
    sd = s.cfg["storages"].get(src_store, {"type": "dir"})
    if storage is not None and not full:
        return "parameter 'storage' not allowed for linked clones"
    if storage is not None and storage not in s.cfg["storages"]:
        return f"storage '{storage}' does not exist"
    if storage is not None and target is not None and not int(s.cfg["storages"][storage].get("shared", 0)):
        return f"can't clone to non-shared storage '{storage}'"
    snapname = a.get("snapname")
    if snapname and snapname not in (src.get("snapshots") or {}):
        return f"snapshot '{snapname}' does not exist"
    if full and src.get("running") and not snapname:
        return "Full clone of a running container is only possible from a snapshot"
    if not full and (not is_tmpl or sd.get("type") not in ("lvmthin", "zfspool", "rbd", "btrfs")):
        return f"Linked clone feature for '{src_vol}' is not available"
    if target is not None and target != node and not int(
            s.cfg["storages"].get(storage or src_store, {}).get("shared", 0)):
        return f"can't clone CT to node '{target}' (CT uses local storage)"
    return None


def clone_copy(s, t, ferr, j):
    """The clone task: copy the root filesystem, write the new config, release the locks;
    on failure drop the half-made clone."""
    vmid, newid, src, a = j.vmid, j.newid, j.src, j.a
    src_vol = j.rootfs["volume"]
    t.log(f"creating a clone of container {vmid} with ID {newid}")
    try:
        time.sleep(float(s.settings["clone_time"]))
        if j.full:
            t.log(f"create full clone of mountpoint rootfs ({src_vol})")
            vol = s.volname(j.dst_store, newid, src_vol)
        else:
            t.log(f"create linked clone of mount point rootfs ({src_vol})")
            vol = s.volname(j.dst_store, newid, src_vol, linked=True)
        if ferr is not None:
            raise TaskFail(f"clone failed: {ferr}")
        snapname = a.get("snapname")
        if snapname:
            s.clone_root_snapshot(vmid, newid, snapname)
        else:
            s.clone_root(vmid, newid)
        with s.lock:
            base = src["snapshots"][snapname]["conf"] if snapname else src["conf"]
            conf = {k: v for k, v in base.items() if k not in ("template", "lock", "parent", "snaptime")}
            for k in list(conf):
                if re.fullmatch(r"net\d+", k):
                    try:
                        nd = parse_net(conf[k])
                        nd["hwaddr"] = random_mac()
                        conf[k] = print_net(nd)
                    except ParamErr:
                        pass
            rp = dict(j.rootfs)
            rp["volume"] = vol
            conf["rootfs"] = print_rootfs(rp)
            s.clone_mps(conf, newid)
            if "hostname" in a:
                conf["hostname"] = a["hostname"]
            conf["lock"] = "create"
            ct = s.cts[newid]
            ct["conf"] = conf
            ct["description"] = a["description"] if "description" in a else src.get("description")
            ct["linked_from"] = None if j.full else vmid
            s.fw[newid] = copy.deepcopy(s.fw.get(vmid, {"options": {}, "rules": []}))
            if j.pool:
                ct["pool"] = j.pool
            conf.pop("lock", None)
            if j.target is not None:
                ct["node"] = j.target
            s.save()
        with open(os.path.join(s.ct_dir(newid), "rootfs", "etc", "hostname"), "w") as f:
            f.write(conf.get("hostname", f"CT{newid}") + "\n")
        s.firewall_changed()
    except BaseException:
        with s.lock:
            if s.cts.get(newid, {}).get("conf", {}).get("lock") == "create":
                del s.cts[newid]
                s.remove_ct(newid)
            src["conf"].pop("lock", None)
            s.save()
        raise
    with s.lock:
        src["conf"].pop("lock", None)
        s.save()


@route("GET", "/nodes/{node}/lxc/{vmid}")
def h_vm_index(c):
    c.args({})
    node = c.node()
    vmid = c.vmid()
    c.need_vm(vmid, "VM.Audit")
    with c.sim.lock:
        c.sim.ct_on(node, vmid)
    return [{"subdir": x} for x in ("config", "pending", "status", "vncproxy", "termproxy", "vncwebsocket",
                                    "spiceproxy", "migrate", "clone", "rrd", "rrddata", "firewall", "snapshot",
                                    "resize", "interfaces")]


@route("GET", "/nodes/{node}/lxc/{vmid}/status")
def h_status_index(c):
    c.args({})
    node = c.node()
    vmid = c.vmid()
    c.need_vm(vmid, "VM.Audit")
    with c.sim.lock:
        c.sim.ct_on(node, vmid)
    return [{"subdir": x} for x in ("current", "start", "stop", "shutdown", "suspend", "resume", "reboot")]


@route("GET", "/nodes/{node}/lxc/{vmid}/config")
def h_config_get(c):
    a = c.args({"current": P("bool"), "snapshot": P("string", maxlen=40)})
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    c.need_vm(vmid, "VM.Audit")
    with s.lock:
        ct = s.ct_on(node, vmid)
        conf = ct["conf"]
        if "snapshot" in a:
            snap = (ct.get("snapshots") or {}).get(a["snapshot"])
            if snap is None:
                raise die(f"snapshot '{a['snapshot']}' does not exist")
            conf = dict(snap["conf"], snaptime=snap["snaptime"])
        elif not a.get("current") and ct.get("pending_mp"):  # pending values, as Proxmox
            conf = dict(conf)
            for k, v in ct["pending_mp"].items():
                if v is None:
                    conf.pop(k, None)
                else:
                    conf[k] = v
        d = {}
        for k, v in conf.items():
            if k in INT_KEYS:
                d[k] = int(v)
            elif k in NUM_KEYS:
                f = float(v)
                d[k] = int(f) if f == int(f) else f
            else:
                d[k] = v
        if ct.get("description") is not None:
            d["description"] = "".join(l + "\n" for l in ct["description"].split("\n"))
        d["digest"] = s.digest(ct)
        return d


@route("GET", "/nodes/{node}/lxc/{vmid}/pending")
def h_pending(c):
    """Each config key with its pending value or removal (mount points of a running CT)."""
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    c.need_vm(vmid, "VM.Audit")
    with s.lock:
        ct = s.ct_on(node, vmid)
        pend = ct.get("pending_mp") or {}
        out = []
        for k in sorted(set(ct["conf"]) | set(pend)):
            e = {"key": k}
            if k in ct["conf"]:
                v = ct["conf"][k]
                e["value"] = int(v) if k in INT_KEYS else v
            if k in pend:
                if pend[k] is None:
                    e["delete"] = 1
                else:
                    e["pending"] = pend[k]
            out.append(e)
        return out


@route("PUT", "/nodes/{node}/lxc/{vmid}/config")
def h_config_put(c):
    a = c.args(CONF_SCHEMA, patterns=CONF_PATTERNS)
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    dels = split_list(a.get("delete", ""))
    keys = [k for k in a if k not in ("delete", "revert", "digest")] + dels
    if not keys:
        raise die("no options specified")
    for k in keys:
        c.need_vm(vmid, CONF_PRIV.get(k, "VM.Config.Network" if k.startswith("net") else
                                     "VM.Config.Disk" if is_mp(k) or is_unused(k) else "VM.Config.Options"))
    errors = {}
    for k in dels:
        if k not in CONF_SCHEMA and not any(re.fullmatch(p, k) for p, _ in CONF_PATTERNS) or k in ("delete", "revert", "digest"):
            errors["delete"] = f"invalid format - invalid configuration ID '{k}'\n"
    for k in ("unprivileged", "template"):
        if k in a:
            errors[k] = "unable to modify read-only option"
    nets = {}
    for k in a:
        if re.fullmatch(r"net\d+", k):
            try:
                nets[k] = parse_net(a[k], k)
            except ParamErr as e:
                errors[k] = str(e)
    if "rootfs" in a:
        errors["rootfs"] = "unable to modify read-only option"
    if errors:
        raise perr(errors)
    mps = check_mp_args(c, a, dels)
    fl = s.take_flock(vmid)
    try:
        with s.lock:
            ct = s.ct_on(node, vmid)
            s.check_lock(ct)
            if "digest" in a and a["digest"] != s.digest(ct):
                raise die("detected modified configuration - file changed by other user? Try again.")
            for k in dels:
                if k in ("memory", "rootfs", "ostype"):
                    raise die(f"unable to delete required option '{k}'")
            net_changed = mac_changed = False
            old_mac = s.mac_of(ct)
            apply_mp_config(s, vmid, ct, mps, dels)
            for k in dels:
                if k == "description":
                    ct["description"] = None
                elif is_mp(k) or is_unused(k):
                    continue
                else:
                    ct["conf"].pop(k, None)
                if k == "net0":
                    net_changed = True
            for k, v in a.items():
                if k in ("delete", "revert", "digest") or k in mps:
                    continue
                if k == "description":
                    ct["description"] = v
                elif k in nets:
                    ct["conf"][k] = print_net(nets[k])
                    if k == "net0":
                        net_changed = True
                elif k in ("onboot", "protection", "console", "debug"):
                    ct["conf"][k] = str(v)
                elif k == "cpulimit":
                    ct["conf"][k] = str(int(v) if v == int(v) else v)
                else:
                    ct["conf"][k] = str(v)
            new_mac = s.mac_of(ct)
            if net_changed and ct.get("running") and new_mac and new_mac != old_mac:
                mac_changed = True
            if net_changed and old_mac and old_mac != new_mac:
                # a running CT keeps the old lease until its interface takes the new MAC
                s.release_leases([old_mac])
            # hostname is a fastplug option: the config changes at once, the running
            # container keeps its name (UTS and /etc/hostname) until its next start
            if "hostname" in a and not ct.get("running"):
                try:
                    with open(os.path.join(s.ct_dir(vmid), "rootfs", "etc", "hostname"), "w") as f:
                        f.write(a["hostname"] + "\n")
                except OSError:
                    pass
            s.save()
            if ("cores" in a or "memory" in a) and ct.get("running"):
                s.net.ct_limits(vmid, ct["conf"].get("cores", 1), ct["conf"].get("memory", 512))
            if net_changed and ct.get("running"):
                s.net.ct_rate(vmid, s.net0_rate(ct))  # applied live, as pve-container does
            if mac_changed:
                rt = s.rt.get(vmid)
                if rt:
                    rt["ip"] = None
                    rt["mac"] = new_mac
                    # freed once the new MAC has its lease, so the new lease is another address
                    rt.setdefault("old_macs", []).append(old_mac)
                    s.net.ct_set_mac(vmid, new_mac)
                    s.schedule_ip(vmid, float(s.settings["dhcp_delay"]))
        if net_changed:
            s.firewall_changed()
    finally:
        fl.release()
    return None


@route("PUT", "/nodes/{node}/lxc/{vmid}/resize")
def h_resize(c):
    a = c.args({"disk": P("string", pattern=r"rootfs|mp\d+"), "size": P("string", pattern=r"\+?\d+(\.\d+)?[KMGT]?"),
                "digest": P("string", maxlen=40)}, required=("disk", "size"))
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    c.need_vm(vmid, "VM.Config.Disk")
    with s.lock:
        ct = s.ct_on(node, vmid)
        s.check_lock(ct)
        if "digest" in a and a["digest"] != s.digest(ct):
            raise die("detected modified configuration - file changed by other user? Try again.")
        if a["disk"] not in ct["conf"]:
            raise perr({"disk": f"unable to resize '{a['disk']}' - no such mount point"})
        rp = rootfs_parts(ct["conf"][a["disk"]])
        cur = parse_size(rp.get("size", "4G")) or 0
        sz = a["size"]
        new = parse_size(sz.lstrip("+"))
        if sz.startswith("+"):
            new += cur
        if new < cur:
            raise die("unable to shrink disk size")
        if new == cur:
            raise die("disk is already at specified size")

    def work(t, ferr):
        if ferr is not None:
            raise TaskFail(ferr)
        with s.lock:
            ct2 = s.cts.get(vmid)
            if not ct2:
                raise TaskFail(f"Configuration file 'nodes/{node}/lxc/{vmid}.conf' does not exist")
            rp2 = rootfs_parts(ct2["conf"][a["disk"]])
            rp2["size"] = format_size(new)
            ct2["conf"][a["disk"]] = print_rootfs(rp2)
            if is_mp(a["disk"]) and s.vol_size(rp2["volume"]) is not None:
                with open(s.vol_path(rp2["volume"]) + ".size", "w") as f:
                    f.write(f"{new}\n")
            t.log(f"Size of logical volume {rp2['volume']} changed to {format_size(new)}.")
            s.save()
    return c.start_task(node, "resize", vmid, work)


def power_args(c, extra):
    sch = {"skiplock": P("bool")}
    sch.update(extra)
    a = c.args(sch)
    if a.get("skiplock") and c.token.user != "root@pam":
        raise perr({"skiplock": "Only root may use this option."})
    return a


def task_load(s, node, vmid, skiplock):
    ct = s.cts.get(vmid)
    if ct is None or ct["node"] != node:
        raise TaskFail(f"Configuration file 'nodes/{node}/lxc/{vmid}.conf' does not exist")
    if not skiplock and ct["conf"].get("lock"):
        raise TaskFail(f"CT is locked ({ct['conf']['lock']})")
    return ct


@route("POST", "/nodes/{node}/lxc/{vmid}/status/start")
def h_start(c):
    a = power_args(c, {"debug": P("bool")})
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    c.need_vm(vmid, "VM.PowerMgmt")
    with s.lock:
        if s.is_running(vmid):
            raise die(f"CT {vmid} already running")

    def work(t, ferr):
        fl = s.take_flock(vmid)
        try:
            time.sleep(float(s.settings["start_time"]))
            with s.lock:
                ct = task_load(s, node, vmid, a.get("skiplock"))
                if ct["conf"].get("template") == "1":
                    raise TaskFail("you can't start a CT if it's a template")
                if ct.get("running"):
                    raise TaskFail(f"CT {vmid} already running")
                vol = rootfs_parts(ct["conf"].get("rootfs", "")).get("volume", "")
            if ferr is not None:
                raise TaskFail(ferr)
            if not os.path.isdir(os.path.join(s.ct_dir(vmid), "rootfs")):  # freed by a failed destroy
                raise TaskFail(f"can't activate volume '{vol}': no such volume")
            try:
                s.ct_runtime_start(vmid)
            except Exception as e:
                log(f"CT {vmid}: start failed: {e}")
                s.ct_runtime_stop(vmid)
                raise TaskFail(f"startup for container '{vmid}' failed")
            s.save()
        finally:
            fl.release()
        s.schedule_ip(vmid, float(s.settings["dhcp_delay"]))
    return c.start_task(node, "vzstart", vmid, work)


def stop_like(c, ttype, extra):
    a = power_args(c, extra)
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    c.need_vm(vmid, "VM.PowerMgmt")
    with s.lock:
        if not s.is_running(vmid):
            raise die(f"CT {vmid} not running")

    def work(t, ferr):
        fl = s.take_flock(vmid)
        try:
            with s.lock:
                task_load(s, node, vmid, a.get("skiplock"))
            if ferr is not None:
                raise TaskFail(ferr)
            time.sleep(float(s.settings["stop_time"]))
            s.ct_runtime_stop(vmid)
            s.save()
        finally:
            fl.release()
    return c.start_task(node, ttype, vmid, work)


@route("POST", "/nodes/{node}/lxc/{vmid}/status/stop")
def h_stop(c):
    return stop_like(c, "vzstop", {"overrule-shutdown": P("bool")})


@route("POST", "/nodes/{node}/lxc/{vmid}/status/shutdown")
def h_shutdown(c):
    return stop_like(c, "vzshutdown", {"timeout": P("int", min=0), "forceStop": P("bool")})


@route("GET", "/nodes/{node}/lxc/{vmid}/status/current")
def h_current(c):
    c.args({})
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    c.need_vm(vmid, "VM.Audit")
    with s.lock:
        ct = s.ct_on(node, vmid)
        d = s.vmstatus(ct)
        d["ha"] = {"managed": 0}
        return d


@route("GET", "/nodes/{node}/lxc/{vmid}/interfaces")
def h_interfaces(c):
    node = c.pp["node"]
    ctver = c.sim.node_version(node)[1] if node in c.sim.cfg["nodes"] else (9,)
    # absent before pve-container 5.0.6 (Proxmox VE 8.1)
    if not c.sim.settings["interfaces_endpoint"] or ctver < (5, 0, 6):
        raise ApiError(501, f"Method 'GET {c.path}' not implemented")
    c.args({})
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    c.need_vm(vmid, "VM.Audit")
    with s.lock:
        ct = s.cts.get(vmid)
        if not ct or ct["node"] != node or not ct.get("running") or vmid not in s.rt:
            return None
        # before 5.2.0 ("fix #5674") the call is not forwarded to the CT's node: the node
        # whose pveproxy answers looks into its own containers only
        if ctver < (5, 2, 0) and node != s.cfg["nodes"][0]:
            return None
        rt = s.rt[vmid]
    if s.net.enabled:
        raw = s.net.ct_interfaces(vmid)
    else:
        raw = [{"ifname": "lo", "address": "00:00:00:00:00:00",
                "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8},
                              {"family": "inet6", "local": "::1", "prefixlen": 128}]},
               {"ifname": "eth0", "address": rt["mac"].lower(),
                "addr_info": ([{"family": "inet", "local": rt["ip"], "prefixlen": s.net.bridge.prefixlen}]
                              if rt.get("ip") else [])}]
    # an address code inside the container put on eth0 (setting interfaces_extra_ipv4): the
    # real call reports whatever the namespace holds (pve-container LXC.pm:1214-1243)
    extra = (s.settings.get("interfaces_extra_ipv4") or {})
    extra = extra.get(str(vmid)) or extra.get("*")
    if extra:
        for l in raw:
            if l.get("ifname") == "eth0":
                l["addr_info"] = [{"family": "inet", "local": extra, "prefixlen": s.net.bridge.prefixlen}] + \
                    [ai for ai in l.get("addr_info", []) if ai.get("local") != extra]
    out = []
    for l in raw:
        e = {"name": l.get("ifname"), "hwaddr": l.get("address", ""), "hardware-address": l.get("address", "")}
        ips = []
        for ai in l.get("addr_info", []):
            fam = ai.get("family")
            if fam not in ("inet", "inet6"):
                continue
            e[fam] = f"{ai['local']}/{ai['prefixlen']}"
            ips.append({"ip-address-type": fam, "ip-address": ai["local"], "prefix": ai["prefixlen"]})
        e["ip-addresses"] = ips
        out.append(e)
    return out


def destroy_volumes(s, node, vmid, ct, unreferenced):
    """The volume part of a destroy (pve-container destroy_lxc_container): the CT's own
    volumes are freed (one already gone is no error: a retry after a failed destroy goes on);
    with destroy-unreferenced-disks, listing every storage of the node for leftover volumes
    then dies on an offline one, leaving the config with its volumes freed."""
    with s.lock:
        store = rootfs_parts(ct["conf"].get("rootfs", "")).get("volume", "").split(":", 1)[0]
        offline = sorted(st for n, st in s.storages_offline if n == node)
    if store in offline:
        raise TaskFail(f"storage '{store}' is not online")
    if ct["conf"].get("template") == "1":
        return  # a base volume: checked for linked clones below
    s.free_root(vmid)
    s.free_ct_volumes(ct, vmid, unreferenced)
    if unreferenced and offline:
        raise TaskFail(f"storage '{offline[0]}' is not online")


@route("DELETE", "/nodes/{node}/lxc/{vmid}")
def h_destroy(c):
    a = c.args({"force": P("bool"), "purge": P("bool"), "destroy-unreferenced-disks": P("bool")})
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    c.need_vm(vmid, "VM.Allocate")
    with s.lock:
        ct = s.ct_on(node, vmid)
        if ct["conf"].get("protection") == "1":
            raise die(f"can't remove CT {vmid} - protection mode enabled")
        s.check_lock(ct)
        if ct.get("running") and not a.get("force"):
            raise die(f"unable to destroy CT {vmid} - container is running")

    def work(t, ferr):
        fl = s.take_flock(vmid)
        try:
            with s.lock:
                ct2 = task_load(s, node, vmid, False)
                running = ct2.get("running")
            if running:
                t.log(f"forced to stop CT {vmid} before destroying!")
                s.ct_runtime_stop(vmid)
            time.sleep(float(s.settings["destroy_time"]))
            if ferr is not None:
                raise TaskFail(ferr)
            destroy_volumes(s, node, vmid, ct2, a.get("destroy-unreferenced-disks"))
            with s.lock:
                if ct2["conf"].get("template") == "1":
                    users = [v for v, x in s.cts.items() if x.get("linked_from") == vmid]
                    vol = rootfs_parts(ct2["conf"]["rootfs"])["volume"]
                    st = s.cfg["storages"].get(vol.split(":", 1)[0], {})
                    if users and st.get("type") != "lvmthin":
                        raise TaskFail(f"base volume '{vol.split(':', 1)[1]}' is still in use by linked clones")
                macs = [s.mac_of({"conf": {"net0": v}}) for k, v in ct2["conf"].items()
                        if re.fullmatch(r"net\d+", k)]
                ct2["conf"] = {"lock": "destroyed"}
                s.release_leases(macs, skip=vmid)
                ct2["description"] = None
                s.fw.pop(vmid, None)
                if a.get("purge"):
                    t.log(f"purging CT {vmid} from related configurations..")
                s.save()
            s.remove_ct(vmid)
            with s.lock:
                s.cts.pop(vmid, None)
                s.save()
            s.firewall_changed()
        finally:
            fl.release()
    return c.start_task(node, "vzdestroy", vmid, work)
