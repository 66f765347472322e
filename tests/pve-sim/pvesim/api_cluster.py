"""Cluster-wide read endpoints: /version, /cluster/nextid, /cluster/resources, /nodes, /pools."""

import time

from .api import route
from .schema import POOL_RE, P, die, perr


@route("GET", "/version")
def h_version(c):
    c.args({})
    return c.sim.node_version(c.sim.cfg["nodes"][0])[0]  # the node whose pveproxy answers


@route("GET", "/cluster/nextid")
def h_nextid(c):
    a = c.args({"vmid": P("int", min=100, max=999999999)})
    s = c.sim
    with s.lock:
        if "vmid" in a:
            if a["vmid"] in s.cts:
                raise perr({"vmid": f"VM {a['vmid']} already exists"})
            return str(a["vmid"])
        lo, hi = s.cfg["nextid_range"]
        for i in range(lo, hi):
            if i not in s.cts:
                return str(i)
    raise die(f"unable to get any free VMID in range [{lo}, {hi}]")


@route("GET", "/cluster/resources")
def h_resources(c):
    a = c.args({"type": P("enum", enum=["vm", "storage", "node", "sdn"])})
    s = c.sim
    out = []
    typ = a.get("type")
    with s.lock:
        refresh_rrd(s)
        if typ in (None, "vm"):
            out += [guest_entry(s, s.cts[vmid]) for vmid in sorted(s.cts) if c.can_vm(vmid, "VM.Audit")]
        if typ in (None, "node"):
            for n in s.cfg["nodes"]:
                if c.token.has(f"/nodes/{n}", "Sys.Audit"):
                    out.append(s.node_stats(n))
        if typ in (None, "storage"):
            for n in s.cfg["nodes"]:
                for st, sd in s.cfg["storages"].items():
                    if c.token.has(f"/storage/{st}", "Datastore.Audit"):
                        out.append({"id": f"storage/{n}/{st}", "type": "storage", "node": n, "storage": st,
                                    "status": "unknown" if (n, st) in s.storages_offline else "available",
                                    "plugintype": sd.get("type", "dir"),
                                    "shared": int(sd.get("shared", 0)), "content": "rootdir,images",
                                    "disk": 1 << 30, "maxdisk": 100 << 30})
    return out


RRD_PURGE_S = 300  # pmxcfs drops the RRD entries not updated for 5 minutes


def rrd_used(s):
    """Whether guest statuses come from the RRD-like cache: with resources_lag > 0, or while
    pvestatd is stalled (it then keeps what it had, or nothing after a pve-cluster restart)."""
    return float(s.settings["resources_lag"]) > 0 or s.pvestatd_stalled


def refresh_rrd(s, force=False):
    """With resources_lag > 0, the guests' status/name/stats and the nodes' load come from a
    snapshot refreshed every resources_lag seconds (pvestatd's RRD updates); a stalled pvestatd
    refreshes nothing."""
    lag = float(s.settings["resources_lag"])
    if s.pvestatd_stalled:
        return
    if force or (lag > 0 and time.time() - s.rrd_time >= lag):
        s.rrd = {v: {k: e[k] for k in ("status", "name", "uptime", "mem", "disk", "cpu")}
                 for v, e in ((v, s.resource(ct)) for v, ct in s.cts.items())}
        s.rrd_nodes = {n: s.node_load(n) for n in s.cfg["nodes"]}
        s.rrd_time = time.time()


def set_pvestatd(s, stalled=None, cluster_restart=False):
    """The admin faults: pvestatd stalled (the cache stops refreshing, and reads `unknown` for
    every guest once older than 5 minutes) or running again; a pve-cluster restart (the cache
    emptied: every status `unknown` until pvestatd refreshes it)."""
    with s.lock:
        if stalled is not None:
            if stalled and not s.pvestatd_stalled:
                refresh_rrd(s, force=float(s.settings["resources_lag"]) <= 0)
            s.pvestatd_stalled = bool(stalled)
        if cluster_restart:
            s.rrd = {}
            s.rrd_nodes = {}
            s.rrd_time = time.time()
        return {"stalled": s.pvestatd_stalled, "entries": len(s.rrd), "age": round(time.time() - s.rrd_time, 1)}


def guest_entry(s, ct, with_pool=True, lagged=True):
    """A guest in /cluster/resources or a pool's members, status from the RRD cache (see
    rrd_used(): a guest missing from it, created since the last snapshot or purged, shows
    status unknown without name); status unknown on a node that is offline."""
    e = s.resource(ct, with_pool)
    if not s.node_online(ct["node"]):
        return s.offline_guest(ct, e)
    if lagged and rrd_used(s):
        old = s.rrd.get(ct["vmid"]) if time.time() - s.rrd_time <= RRD_PURGE_S else None
        if old is None:
            e = {k: e[k] for k in ("id", "type", "vmid", "node", "template") if k in e}
            e["status"] = "unknown"
        else:
            e.update(old)
    return e


@route("GET", "/nodes")
def h_nodes(c):
    c.args({})
    s = c.sim
    with s.lock:
        refresh_rrd(s)
        return [s.node_stats(n) for n in s.cfg["nodes"]]


def pool_members(c, pid, typ=None):
    """The pool's guests as /cluster/resources shows them (status from the RRD cache) but
    without lock (pve-manager's extract_vm_stats)."""
    s = c.sim
    out = []
    refresh_rrd(s)
    for vmid in sorted(s.cts):
        ct = s.cts[vmid]
        if ct.get("pool") == pid and typ in (None, "lxc"):
            e = guest_entry(s, ct, with_pool=False)
            e.pop("lock", None)
            out.append(e)
    return out


@route("GET", "/pools")
def h_pools(c):
    a = c.args({"poolid": P("string", pattern=POOL_RE), "type": P("enum", enum=["qemu", "lxc", "storage"])})
    s = c.sim
    with s.lock:
        if "poolid" in a:
            pid = a["poolid"]
            c.need(f"/pool/{pid}", "Pool.Audit")
            if pid not in s.pools:
                raise die(f"pool '{pid}' does not exist")
            return [{"poolid": pid, "comment": s.pools[pid].get("comment", ""),
                     "members": pool_members(c, pid, a.get("type"))}]
        return [{"poolid": p, "comment": d.get("comment", "")} for p, d in sorted(s.pools.items())
                if c.token.has(f"/pool/{p}", "Pool.Audit")]


@route("GET", "/pools/{poolid}")
def h_pool(c):
    a = c.args({"type": P("enum", enum=["qemu", "lxc", "storage"])})
    pid = c.pp["poolid"]
    s = c.sim
    c.need(f"/pool/{pid}", "Pool.Audit")
    with s.lock:
        if pid not in s.pools:
            raise die(f"pool '{pid}' does not exist")
        return {"members": pool_members(c, pid, a.get("type")), "comment": s.pools[pid].get("comment", ""),
                "poolid": pid}
