"""Cluster-wide read endpoints: /version, /cluster/nextid, /cluster/resources, /nodes, /pools."""

import time

from .api import route
from .schema import POOL_RE, P, die, perr


@route("GET", "/version")
def h_version(c):
    c.args({})
    return dict(c.sim.cfg["version"])


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
        if typ in (None, "vm"):
            lag = float(s.settings["resources_lag"])
            if lag > 0 and time.time() - s.rrd_time >= lag:
                s.rrd = {v: {k: e[k] for k in ("status", "name", "uptime", "mem", "disk", "cpu")}
                         for v, e in ((v, s.resource(ct)) for v, ct in s.cts.items())}
                s.rrd_time = time.time()
            for vmid in sorted(s.cts):
                if c.can_vm(vmid, "VM.Audit"):
                    e = s.resource(s.cts[vmid])
                    if lag > 0:
                        old = s.rrd.get(vmid)
                        if old is None:
                            e = {k: e[k] for k in ("id", "type", "vmid", "node", "template") if k in e}
                            e["status"] = "unknown"
                        else:
                            e.update(old)
                    out.append(e)
        if typ in (None, "node"):
            for n in s.cfg["nodes"]:
                if c.token.has(f"/nodes/{n}", "Sys.Audit"):
                    out.append(node_entry(s, n))
        if typ in (None, "storage"):
            for n in s.cfg["nodes"]:
                for st, sd in s.cfg["storages"].items():
                    if c.token.has(f"/storage/{st}", "Datastore.Audit"):
                        out.append({"id": f"storage/{n}/{st}", "type": "storage", "node": n, "storage": st,
                                    "status": "available", "plugintype": sd.get("type", "dir"),
                                    "shared": int(sd.get("shared", 0)), "content": "rootdir,images",
                                    "disk": 1 << 30, "maxdisk": 100 << 30})
    return out


def node_entry(s, n):
    return {"id": f"node/{n}", "type": "node", "node": n, "status": "online", "cpu": 0.01, "maxcpu": 2,
            "mem": 1 << 30, "maxmem": 8 << 30, "disk": 1 << 30, "maxdisk": 100 << 30,
            "uptime": int(time.monotonic() - s.boot_mono) + 1000, "level": "",
            "ssl_fingerprint": s.fingerprint}


@route("GET", "/nodes")
def h_nodes(c):
    c.args({})
    return [node_entry(c.sim, n) for n in c.sim.cfg["nodes"]]


def pool_members(c, pid, typ=None):
    s = c.sim
    out = []
    for vmid in sorted(s.cts):
        ct = s.cts[vmid]
        if ct.get("pool") == pid and typ in (None, "lxc"):
            out.append(s.resource(ct, with_pool=False))
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
