"""Container snapshots under /nodes/{node}/lxc/{vmid}/snapshot: list, create, rollback,
delete (pve-container API2/LXC/Snapshot.pm, AbstractConfig snapshot_*). Disk only, as on a
real node; each runs as a task holding the CT's `snapshot`, `rollback` or `snapshot-delete`
lock, so other config and lifecycle calls fail `CT is locked (...)` meanwhile.

On the container's files: a snapshot copies the disk's state (an overlay root's upper layer,
a plain root entirely) into ct/<vmid>/snap/<name>; a rollback stops the container and puts
that copy back; the config keeps `[name]` sections and `parent` as a real node's does."""

import copy
import re
import time

from . import rootfs
from .api import route
from .api_lxc import task_load
from .schema import P, ParamErr, check_value, die, perr, rootfs_parts
from .tasks import TaskFail


def fmt_configid(v):
    """pve-configid (PVE::JSONSchema): a letter, then letters, digits, _ or -; at least two."""
    if not re.fullmatch(r"[a-z][a-z0-9_\-]+", v, re.I):
        raise ParamErr(f"invalid format - invalid configuration ID '{v}'\n")
    return v


SNAPNAME = P("string", maxlen=40, fmt=fmt_configid)
SNAP_TYPES = ("lvmthin", "zfspool", "rbd", "btrfs", "zfs", "iscsidirect")


def path_snapname(c):
    try:
        return check_value(c.pp["snapname"], SNAPNAME)
    except ParamErr as e:
        raise perr({"snapname": str(e)})


def can_snapshot(s, ct):
    """The storage of the CT's root has the snapshot feature (not dir, nfs, cifs, thick lvm)."""
    store = rootfs_parts(ct["conf"].get("rootfs", "")).get("volume", "").split(":", 1)[0]
    if store in (s.settings.get("snapshot_unsupported") or []):
        return False
    return s.cfg["storages"].get(store, {"type": "dir"}).get("type") in SNAP_TYPES


@route("GET", "/nodes/{node}/lxc/{vmid}/snapshot")
def h_snap_list(c):
    c.args({})
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    c.need_vm(vmid, "VM.Audit")
    with s.lock:
        ct = s.ct_on(node, vmid)
        out = []
        for name, snap in (ct.get("snapshots") or {}).items():
            e = {"name": name, "snaptime": snap.get("snaptime", 0), "description": snap.get("description") or ""}
            if snap.get("parent"):
                e["parent"] = snap["parent"]
            out.append(e)
        cur = {"name": "current", "digest": s.digest(ct), "running": 1 if ct.get("running") else 0,
               "description": "You are here!"}
        if ct["conf"].get("parent"):
            cur["parent"] = ct["conf"]["parent"]
        out.append(cur)
        return out


def locked_task(c, node, vmid, lock, work):
    """Take the CT's lock `lock` for the task running work(ct); released at its end."""
    s = c.sim

    def body(t, ferr):
        fl = s.take_flock(vmid)
        try:
            with s.lock:
                ct = task_load(s, node, vmid, False)
                ct["conf"]["lock"] = lock
                s.save()
        finally:
            fl.release()
        try:
            time.sleep(float(s.settings["snapshot_time"]))
            if ferr is not None:
                raise TaskFail(ferr)
            work(t, ct)
        finally:
            with s.lock:
                if s.cts.get(vmid) is ct and ct["conf"].get("lock") == lock:
                    ct["conf"].pop("lock", None)
                s.save()
    return body


@route("POST", "/nodes/{node}/lxc/{vmid}/snapshot")
def h_snap_create(c):
    a = c.args({"snapname": SNAPNAME, "description": P("string", maxlen=8192)}, required=("snapname",))
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    name = a["snapname"]
    c.need_vm(vmid, "VM.Snapshot")
    for reserved in ("current", "vzdump"):
        if name == reserved:
            raise die(f"unable to use snapshot name '{reserved}' (reserved name)")
    with s.lock:
        s.ct_on(node, vmid)

    def work(t, ct):
        with s.lock:
            if name in (ct.get("snapshots") or {}):
                raise TaskFail(f"snapshot name '{name}' already used")
            if not can_snapshot(s, ct):
                raise TaskFail("snapshot feature is not available")
        t.log(f"create snapshot '{name}' of CT {vmid}")
        rootfs.take_snapshot(s.ct_dir(vmid), name)
        with s.lock:
            conf = {k: v for k, v in ct["conf"].items() if k not in ("lock", "parent")}
            snap = {"conf": copy.deepcopy(conf), "snaptime": int(time.time()),
                    "description": a.get("description") or "", "parent": ct["conf"].get("parent")}
            ct.setdefault("snapshots", {})[name] = snap
            ct["conf"]["parent"] = name
            s.save()
    return c.start_task(node, "vzsnapshot", vmid, locked_task(c, node, vmid, "snapshot", work))


@route("POST", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback")
def h_snap_rollback(c):
    a = c.args({"start": P("bool")})
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    name = path_snapname(c)
    c.need_vm(vmid, "VM.Snapshot")
    if a.get("start"):
        c.need_vm(vmid, "VM.PowerMgmt")
    with s.lock:
        s.ct_on(node, vmid)

    def work(t, ct):
        with s.lock:
            snap = (ct.get("snapshots") or {}).get(name)
            running = ct.get("running")
        if snap is None:
            raise TaskFail(f"snapshot '{name}' does not exist")
        if running:
            t.log(f"stopping CT {vmid} for the rollback")
            s.ct_runtime_stop(vmid)
        old_mac = s.mac_of(ct)
        rootfs.rollback_snapshot(s.ct_dir(vmid), name)
        with s.lock:
            ct["conf"] = dict(copy.deepcopy(snap["conf"]), parent=name, lock="rollback")
            new_mac = s.mac_of(ct)
            if old_mac and old_mac != new_mac:
                s.release_leases([old_mac])
            s.save()
        if a.get("start"):
            with s.lock:
                ct["conf"].pop("lock", None)
            s.ct_runtime_start(vmid)
            s.save()
            s.schedule_ip(vmid, float(s.settings["dhcp_delay"]))
    return c.start_task(node, "vzrollback", vmid, locked_task(c, node, vmid, "rollback", work))


@route("DELETE", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}")
def h_snap_delete(c):
    c.args({"force": P("bool")})
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    name = path_snapname(c)
    c.need_vm(vmid, "VM.Snapshot")
    with s.lock:
        s.ct_on(node, vmid)

    def work(t, ct):
        with s.lock:
            snaps = ct.get("snapshots") or {}
            snap = snaps.get(name)
        if snap is None:
            raise TaskFail(f"snapshot '{name}' does not exist")
        rootfs.delete_snapshot(s.ct_dir(vmid), name)
        with s.lock:
            del snaps[name]
            for other in snaps.values():
                if other.get("parent") == name:
                    other["parent"] = snap.get("parent")
            if ct["conf"].get("parent") == name:
                if snap.get("parent"):
                    ct["conf"]["parent"] = snap["parent"]
                else:
                    ct["conf"].pop("parent", None)
            if not snaps:
                ct.pop("snapshots", None)
            s.save()
    return c.start_task(node, "vzdelsnapshot", vmid, locked_task(c, node, vmid, "snapshot-delete", work))


@route("GET", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config")
def h_snap_config(c):
    c.args({})
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    name = path_snapname(c)
    c.need_vm(vmid, "VM.Snapshot")
    with s.lock:
        ct = s.ct_on(node, vmid)
        snap = (ct.get("snapshots") or {}).get(name)
        if snap is None:
            raise die(f"snapshot '{name}' does not exist")
        d = dict(snap["conf"], snaptime=snap["snaptime"])
        if snap.get("description"):
            d["description"] = snap["description"]
        if snap.get("parent"):
            d["parent"] = snap["parent"]
        d["digest"] = s.digest(ct)
        return d
