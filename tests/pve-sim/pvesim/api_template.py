"""POST /nodes/{node}/lxc/{vmid}/template: a stopped container becomes a template, as
pve-container's `template` method does it (API2/LXC.pm): the checks run under the config
lock and answer 500 synchronously; the conversion (its volumes renamed base-*, `template: 1`
written) runs in a `vztemplate` worker whose UPID is not returned (the method returns null),
so a caller polls the status for `template: 1`. Needs VM.Allocate on /vms/{vmid}."""

import time

from .api import route
from .schema import die, print_rootfs, rootfs_parts
from .tasks import TaskFail


@route("POST", "/nodes/{node}/lxc/{vmid}/template")
def h_template(c):
    c.args({})
    node = c.node()
    vmid = c.vmid()
    s = c.sim
    c.need_vm(vmid, "VM.Allocate")
    fl = s.take_flock(vmid)
    try:
        with s.lock:
            ct = s.ct_on(node, vmid)
            s.check_lock(ct)
            if ct.get("snapshots"):
                raise die("unable to create template, because CT contains snapshots")
            if ct["conf"].get("template") == "1":
                raise die("you can't convert a template to a template")
            if ct.get("running"):
                raise die("you can't convert a CT to template if the CT is running")
    finally:
        fl.release()

    def work(t, ferr):
        time.sleep(float(s.settings.get("template_time", 0.05)))
        if ferr is not None:
            raise TaskFail(ferr)
        with s.lock:
            ct2 = s.cts.get(vmid)
            if ct2 is None or ct2["node"] != node:
                raise TaskFail(f"Configuration file 'nodes/{node}/lxc/{vmid}.conf' does not exist")
            rp = rootfs_parts(ct2["conf"]["rootfs"])
            store = rp["volume"].split(":", 1)[0]
            rp["volume"] = s.volname(store, vmid, rp["volume"], base=True)
            ct2["conf"]["rootfs"] = print_rootfs(rp)
            ct2["conf"]["template"] = "1"
            t.log(f"convert CT {vmid} to template ({rp['volume']})")
            s.save()
    c.start_task(node, "vztemplate", vmid, work)
    return None
