"""POST /nodes/{node}/lxc/{vmid}/move_volume with target-vmid (pve-container API2/LXC.pm
move_volume, its reassign branch): a mount point or unused volume moves to another container
of the same node under a new name of the target's (rename_volume), the folder with it; a
running target takes a moved mount point at once (hot-plugged). A hot-plug that fails (the
`hotplug_error` fault, or a bind mount that fails) is only a warning, as in Proxmox
(pve-container src/PVE/LXC/Config.pm vmconfig_hotplug_pending: $add_hotplug_error; API2/LXC.pm
move_volume: `$rpcenv->warn($errors->{$_})`): the mpN stays a pending change (applied at the
next start), the task ends `WARNINGS: 1`. Moving to another storage (`storage`) is not
simulated."""

import re

from .api import route
from .schema import P, die, parse_kv, perr
from .tasks import TaskFail
from .volumes import is_mp, is_unused, print_mp, storage_of

VOLKEY = r"rootfs|mp\d+|unused\d+"


def reassign_check(s, node, vmid, target, key, tkey, a):
    """$load_and_check_reassign_configs: the refusals, in pve-container's order (the caller
    holds s.lock). Returns the source's volume id."""
    if key == "rootfs" or tkey == "rootfs":
        raise die("Cannot move to/from 'rootfs'")
    if is_unused(key) and not is_unused(tkey):
        raise die("Moving an unused volume to a used one is not possible")
    src, dst = s.cts.get(vmid), s.cts.get(target)
    if src is None:
        raise die(f"could not find CT {vmid}")
    if dst is None:
        raise die(f"could not find CT {target}")
    if src["node"] != dst["node"]:
        raise die(f"Both containers need to be on the same node ({src['node']} != {dst['node']})")
    s.ct_on(node, vmid)
    s.check_lock(src)
    s.check_lock(dst)
    if src["conf"].get("template") == "1" or dst["conf"].get("template") == "1":
        raise die("Can't move volumes from or to template CT")
    if a.get("digest") and a["digest"] != s.digest(src):
        raise die(f"Container {vmid}: detected modified configuration - file changed by other user? Try again.")
    if a.get("target-digest") and a["target-digest"] != s.digest(dst):
        raise die(f"Container {target}: detected modified configuration - file changed by other user? Try again.")
    if key not in src["conf"]:
        raise die(f"volume '{key}' for container '{vmid}' does not exist")
    if tkey in dst["conf"]:
        raise die(f"Target volume key '{tkey}' is already in use for container '{target}'")
    volid = parse_kv(src["conf"][key], "volume")["volume"]
    for sn in (src.get("snapshots") or {}).values():
        if any(parse_kv(v, "volume").get("volume") == volid for k, v in sn["conf"].items()
               if is_mp(k) or is_unused(k)):
            raise die("Cannot move volume used by a snapshot to another container")
    if src.get("running") and not is_unused(key):
        raise die("Cannot move in-use volume while the source CT is running - detach or shutdown first")
    return volid


def hotplug(s, t, target, tkey, d, herr):
    """update_pct_config of the target (s.lock held): the new mount point, hot-plugged into a
    running target; a failed hot-plug leaves it pending and is a warning of the task."""
    dst = s.cts[target]
    if not dst.get("running"):
        dst["conf"][tkey] = print_mp(d)
        return
    try:
        if herr:
            raise TaskFail(herr)
        s.hotplug_mount(target, d["volume"], d["mp"], d.get("ro") == "1")
    except Exception as e:
        dst.setdefault("pending_mp", {})[tkey] = print_mp(d)
        t.warn(f"unable to hotplug {tkey}: {getattr(e, 'msg', None) or e}")
        return
    dst["conf"][tkey] = print_mp(d)


@route("POST", "/nodes/{node}/lxc/{vmid}/move_volume")
def h_move_volume(c):
    a = c.args({"volume": P("string", pattern=VOLKEY), "target-vmid": P("int", min=100, max=999999999),
                "target-volume": P("string", pattern=VOLKEY), "storage": P("string"), "delete": P("bool"),
                "digest": P("string", maxlen=40), "target-digest": P("string", maxlen=40),
                "bwlimit": P("number", min=0)}, required=("volume",))
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    key = a["volume"]
    tkey = a.get("target-volume") or key
    target = a.get("target-vmid")
    c.need_vm(vmid, "VM.Config.Disk")
    if target and a.get("storage"):
        msg = "either set 'storage' or 'target-vmid', but not both"
        raise perr({"target-vmid": msg, "storage": msg})
    if a.get("storage"):
        raise die("moving a volume to another storage is not simulated")
    if not target:
        msg = "both 'storage' and 'target-vmid' missing, either needs to be set"
        raise perr({"target-vmid": msg, "storage": msg})
    if c.token.user != "root@pam":
        c.need_vm(target, "VM.Config.Disk")
    with s.lock:
        volid = reassign_check(s, node, vmid, target, key, tkey, a)
    c.need(f"/storage/{storage_of(volid)}", "Datastore.AllocateSpace")
    herr = next((f["hotplug_error"] for f in c.faults if f.get("hotplug_error")), None)

    def work(t, ferr):
        first, second = sorted({vmid, target})
        fl1 = s.take_flock(first)
        fl2 = s.take_flock(second) if second != first else None
        try:
            with s.lock:
                try:
                    reassign_check(s, node, vmid, target, key, tkey, a)
                except Exception as e:
                    raise TaskFail(getattr(e, "msg", None) or str(e))
                if ferr is not None:
                    raise TaskFail(ferr)
                src, dst = s.cts[vmid], s.cts[target]
                t.log(f"moving volume '{key}' from container '{vmid}' to '{target}'")
                d = parse_kv(src["conf"][key], "volume")
                d["volume"] = s.vol_rename(d["volume"], target)
                del src["conf"][key]
                t.log(f"removing volume '{key}' from container '{vmid}' config")
                if is_unused(tkey):
                    dst["conf"][tkey] = d["volume"]
                else:
                    d.setdefault("mp", "/" + re.sub(r"\W", "", key))
                    hotplug(s, t, target, tkey, d, herr)
                t.log(f"target container '{target}' updated with '{tkey}'")
                s.save()
        finally:
            if fl2:
                fl2.release()
            fl1.release()
    return c.start_task(node, "move_volume", f"{vmid}-{key}>{target}-{tkey}", work)
