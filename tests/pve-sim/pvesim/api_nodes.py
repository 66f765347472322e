"""Per-node read endpoints: /nodes/{node} (index), /nodes/{node}/status, /nodes/{node}/version.
A client probes a node with them (they are proxied to that node, so a node that is down
answers 595 like any other /nodes/{node}/... request)."""

from .api import route


@route("GET", "/nodes/{node}")
def h_node_index(c):
    c.args({})
    c.node()
    return [{"name": x} for x in ("apt", "capabilities", "ceph", "certificates", "config", "disks", "dns",
                                  "firewall", "hardware", "hosts", "journal", "lxc", "netstat", "network",
                                  "qemu", "replication", "rrd", "rrddata", "scan", "services", "sdn",
                                  "status", "storage", "subscription", "syslog", "tasks", "termproxy",
                                  "time", "version", "vncshell", "vzdump", "wakeonlan")]


@route("GET", "/nodes/{node}/status")
def h_node_status(c):
    c.args({})
    node = c.node()
    c.need(f"/nodes/{node}", "Sys.Audit")
    s = c.sim
    with s.lock:
        cap = s.node_capacity(node)
        load = s.node_load(node)
    total = cap["maxmem"]
    used = min(total, load["mem"])
    la = "%.2f" % (load["cpu"] * cap["maxcpu"])
    return {"uptime": load["uptime"], "cpu": load["cpu"], "wait": 0, "idle": 0, "loadavg": [la, la, la],
            "memory": {"total": total, "used": used, "free": total - used},
            "swap": {"total": 0, "used": 0, "free": 0},
            "rootfs": {"total": 100 << 30, "used": 1 << 30, "free": 99 << 30, "avail": 99 << 30},
            "cpuinfo": {"cpus": cap["maxcpu"], "cores": cap["maxcpu"], "sockets": 1, "model": "pve-sim vCPU",
                        "mhz": "2000.000", "hvm": "1", "user_hz": 100, "flags": ""},
            "ksm": {"shared": 0}, "kversion": "Linux 6.8.12-4-pve #1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4",
            "current-kernel": {"sysname": "Linux", "release": "6.8.12-4-pve", "machine": "x86_64",
                               "version": "#1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4"},
            "boot-info": {"mode": "efi", "secureboot": 0},
            "pveversion": f"pve-manager/{s.node_version(node)[0]['version']}/{s.cfg['version']['repoid']}"}


@route("GET", "/nodes/{node}/version")
def h_node_version(c):
    c.args({})
    return c.sim.node_version(c.node())[0]
