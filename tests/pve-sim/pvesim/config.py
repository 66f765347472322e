"""Configuration: defaults, command-line flags and the JSON config file (flags win)."""

import argparse
import json
import re

from .schema import NODE_RE


def default_config():
    return {
        "listen": "127.0.0.1",
        "port": 0,
        "tls_cert": None,
        "tls_key": None,
        "state_dir": "/var/lib/pve-sim",
        "instance": None,
        "containers": True,
        "error_format": "new",           # "old": {"data":null[,"errors"]}; "new": adds "message"
        "auth_error_style": "unified",   # "unified": "Authentication failed!"; "legacy": detailed
        "auth_failure_delay": 3.0,
        "tokens": [
            {"id": "root@pam!admin", "secret": None, "acl": {"/": "Administrator"}},
            {"id": "sandboxd@pve!sandboxd", "secret": None,
             "acl": {"/pool/sandboxd": ["PVEVMAdmin", "Pool.Audit"],
                     "/vms/9000": "PVETemplateUser",
                     "/storage/local-lvm": "PVEDatastoreUser",
                     "/": {"roles": ["Sys.Audit"], "propagate": 0},
                     "/nodes": ["Sys.Audit"]}},
        ],
        "nodes": ["pve"],
        "node_count": None,              # N: nodes pve1..pveN, each with its own copy of the template
        "node_capacity": {},             # {"NODE": {"maxmem": bytes, "maxcpu": n}}; default 8 GiB / 2
        "node_down_delay": 0.5,
        "pvedaemon_workers": 3,          # container calls a node serves at once (pvedaemon.pm)
        "proxy_timeout": 30.0,           # pveproxy's proxy timeout: then 596, the call goes on          # seconds before a request to a node that is down gets its 595
        "storages": {
            "local-lvm": {"type": "lvmthin", "shared": 0},
            "local": {"type": "dir", "shared": 0},
        },
        "templates": [{"vmid": 9000, "node": "pve", "storage": "local-lvm",
                       "hostname": "sandbox-template", "memory": 512, "cores": 1,
                       "disk": "8G", "pool": None}],
        "template_os": "busybox",        # root file system of templates without their own "os": busybox|debian
        "pools": [{"poolid": "sandboxd", "comment": "sandboxd sandboxes"}],
        "bridge_subnet": None,
        "transit_subnet": None,
        "lan_subnet": None,
        "internet_subnet": "198.51.100.0/24",
        # True: the host routes internet_subnet through the node, as a node's uplink reaches
        # the internet (an egress proxy on the host connects there); needs a subnet no
        # other instance routes
        "internet_route": False,
        "daemon_address": None,
        "authorized_key": None,
        "dhcp_delay": 1.0,
        "firewall_period": 10.0,         # pve-firewall's cycle (10 s on a node); 0: every change at once
        "firewall_phase": None,
        "dhcp_pool_size": 0,             # leases from .10 of the bridge subnet: 0 = to its end; N = N addresses          # seconds to the first tick; None: random in [0, period)
        "clone_time": 0.5,
        "start_time": 0.2,
        "stop_time": 0.1,
        "destroy_time": 0.2,
        "snapshot_time": 0.2,            # a snapshot's, a rollback's and a snapshot delete's task
        "snapshot_unsupported": [],      # storages treated as lacking the snapshot feature (as dir)
        "flock_timeout": 10.0,
        "cluster_firewall": {"enable": 1},
        "security_groups": None,        # None: the default sandbox-internet group
        "faults": [],
        "ct_faults": {"no_ip": [], "no_sshd": [], "locks": {}},
        "ip_never": False,
        "sshd_tcp_forwarding": True,     # False: containers' sshd refuse every direct-tcpip channel
        "on_restart": "restore",         # "restore" | "stopped"
        "resources_lag": 0.0,            # /cluster/resources status refresh period (pvestatd: 10 s)
        "legacy_vmid_strings": False,    # /nodes/{n}/lxc gives vmid as a string (PVE < 8.2)
        "interfaces_endpoint": True,     # False: .../interfaces is 501 (PVE < 8.1)
        "interfaces_extra_ipv4": {},     # {"<vmid>"|"*": "a.b.c.d"}: .../interfaces reports it first
        "firewall_nftables": False,      # True: proxmox-firewall's ipfilter (no static ip= merge)
        "nextid_range": [100, 1000000],
        "version": {"version": "8.4.1", "release": "8.4", "repoid": "2a5fa54a8503f96d"},
        # per node: {"NODE": {"pve_manager": "8.0.4", "pve_container": "5.0.4"}}; a node not
        # listed runs `version` and pve-container 5.2.7
        "node_versions": {},
        "verbose": False,
    }


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Proxmox VE simulator with real SSH containers")
    ap.add_argument("--config", help="JSON config file")
    ap.add_argument("--listen")
    ap.add_argument("--port", type=int)
    ap.add_argument("--tls-cert", dest="tls_cert")
    ap.add_argument("--tls-key", dest="tls_key")
    ap.add_argument("--state-dir", dest="state_dir")
    ap.add_argument("--instance", help="4 hex digits naming this instance's namespaces")
    ap.add_argument("--error-format", dest="error_format", choices=["old", "new"])
    ap.add_argument("--auth-error-style", dest="auth_error_style", choices=["unified", "legacy"])
    ap.add_argument("--auth-failure-delay", dest="auth_failure_delay", type=float)
    ap.add_argument("--proxy-timeout", dest="proxy_timeout", type=float)
    ap.add_argument("--dhcp-delay", dest="dhcp_delay", type=float)
    ap.add_argument("--firewall-period", dest="firewall_period", type=float)
    ap.add_argument("--clone-time", dest="clone_time", type=float)
    ap.add_argument("--bridge-subnet", dest="bridge_subnet")
    ap.add_argument("--daemon-address", dest="daemon_address")
    ap.add_argument("--authorized-key", dest="authorized_key", help="public key file baked into templates")
    ap.add_argument("--on-restart", dest="on_restart", choices=["restore", "stopped"])
    ap.add_argument("--node", action="append")
    ap.add_argument("--node-count", dest="node_count", type=int,
                    help="nodes pve1..pveN, template 9000+i on node pve(i+1)")
    ap.add_argument("--template", action="append", type=int)
    ap.add_argument("--template-os", dest="template_os", choices=["busybox", "debian"],
                    help="templates' root file system: busybox (default) or a real Debian 12 (cached image)")
    ap.add_argument("--build-template-image", action="store_true",
                    help="build the cached Debian template image if missing, print its path and exit")
    ap.add_argument("--check-only", action="store_true",
                    help="with --build-template-image: only print the image's path; exit 1 when not built")
    ap.add_argument("--pool", action="append")
    ap.add_argument("--storage", action="append", help="NAME=TYPE[,shared] (lvmthin zfspool rbd btrfs dir nfs)")
    ap.add_argument("--token", action="append", help="ID=SECRET[:PATH=PRIV,..;PATH=..]")
    ap.add_argument("--no-containers", action="store_true", help="API only: no namespaces or sshd")
    ap.add_argument("--cleanup", action="store_true", help="remove what a (dead) simulator left behind and exit")
    ap.add_argument("--all", action="store_true", help="with --cleanup: every instance, live ones too")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--serve-host", help=argparse.SUPPRESS)
    ap.add_argument("--host-ip", help=argparse.SUPPRESS)
    ap.add_argument("--dns-answer", help=argparse.SUPPRESS)
    ap.add_argument("--dns-names", default="", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def parse_tokens(specs):
    """--token ID=SECRET[:PATH=PRIV,PRIV;PATH=...] (repeated) as config "tokens" entries."""
    toks = []
    for t in specs:
        idsec, _, acl = t.partition(":")
        tid, _, sec = idsec.rpartition("=")
        if not tid:
            tid, sec = sec, None
        a = {}
        for ent in filter(None, acl.split(";")):
            p, _, privs = ent.partition("=")
            a[p] = privs.split(",")
        toks.append({"id": tid, "secret": sec or None, "acl": a or {"/": "Administrator"}})
    return toks


MAX_NODES = 32
DEFAULT_CAPACITY = {"maxmem": 8 << 30, "maxcpu": 2}


def expand_node_count(cfg, templates_given, tokens_given):
    """node_count N: nodes pve1..pveN; unless templates are configured, template vmid 9000+i
    on node pve(i+1), each a copy of the first (same hostname, same host key) on its node's
    local, not shared, storage; unless tokens are configured, the sandboxd token may use
    every copy (PVETemplateUser on each)."""
    n = cfg["node_count"]
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_NODES:
        raise SystemExit(f"pve-sim: node_count must be 1..{MAX_NODES}")
    cfg["nodes"] = [f"pve{i}" for i in range(1, n + 1)]
    if not templates_given:
        base = dict(cfg["templates"][0])
        base0 = int(base["vmid"])
        cfg["templates"] = [dict(base, vmid=base0 + i, node=cfg["nodes"][i], storage="local-lvm",
                                 copy_of=base0 if i else None) for i in range(n)]
    if not tokens_given:
        for t in cfg["tokens"]:
            if t["id"] == "sandboxd@pve!sandboxd":
                for td in cfg["templates"]:
                    t["acl"].setdefault(f"/vms/{td['vmid']}", "PVETemplateUser")


def check_nodes(cfg):
    """Node names and node_capacity: every capacity names a node; maxmem/maxcpu positive."""
    if not cfg["nodes"] or len(cfg["nodes"]) > MAX_NODES or len(set(cfg["nodes"])) != len(cfg["nodes"]):
        raise SystemExit(f"pve-sim: nodes must be 1..{MAX_NODES} distinct names")
    for n in cfg["nodes"]:
        if not re.fullmatch(NODE_RE, n):
            raise SystemExit(f"pve-sim: '{n}' is not a valid node name")
    cap = cfg.get("node_capacity") or {}
    if not isinstance(cap, dict):
        raise SystemExit("pve-sim: node_capacity must be an object {NODE: {maxmem, maxcpu}}")
    for n, c in cap.items():
        if n not in cfg["nodes"]:
            raise SystemExit(f"pve-sim: node_capacity names '{n}', which is not a node")
        if not isinstance(c, dict) or set(c) - {"maxmem", "maxcpu"}:
            raise SystemExit(f"pve-sim: node_capacity of '{n}' takes maxmem and maxcpu only")
        for k, v in c.items():
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise SystemExit(f"pve-sim: node_capacity {n}.{k} must be a positive integer")
    if not 0 <= float(cfg["node_down_delay"]) <= 60:
        raise SystemExit("pve-sim: node_down_delay must be 0..60 s")


def load_config(args):
    cfg = default_config()
    user = {}
    if args.config:
        with open(args.config) as f:
            user = json.load(f)
        unknown = set(user) - set(cfg)
        if unknown:
            raise SystemExit(f"pve-sim: unknown config keys: {', '.join(sorted(unknown))}")
        cfg.update(user)
    for k in ("listen", "port", "tls_cert", "tls_key", "state_dir", "instance", "error_format",
              "auth_error_style", "auth_failure_delay", "dhcp_delay", "firewall_period", "bridge_subnet",
              "authorized_key", "on_restart", "daemon_address", "clone_time", "proxy_timeout",
              "template_os"):
        v = getattr(args, k, None)
        if v is not None:
            cfg[k] = v
    if args.node:
        cfg["nodes"] = args.node
    if args.node_count is not None:
        cfg["node_count"] = args.node_count
    if cfg["node_count"] is not None:
        if args.node or "nodes" in user:
            raise SystemExit("pve-sim: give either nodes or node_count, not both")
        expand_node_count(cfg, templates_given="templates" in user,
                          tokens_given="tokens" in user or bool(args.token))
    check_nodes(cfg)
    if args.template:
        node = cfg["nodes"][0]
        cfg["templates"] = [{"vmid": t, "node": node, "storage": "local-lvm", "hostname": "sandbox-template"}
                            for t in args.template]
    if args.storage:
        st = {}
        for spec in args.storage:
            name, _, rest = spec.partition("=")
            typ, _, sh = rest.partition(",")
            st[name] = {"type": typ or "dir", "shared": 1 if sh == "shared" else 0}
        cfg["storages"] = st
        for t in cfg["templates"]:
            if t.get("storage") not in st:
                t["storage"] = next(iter(st))
    if args.pool:
        cfg["pools"] = [{"poolid": p, "comment": ""} for p in args.pool]
    if args.token:
        cfg["tokens"] = parse_tokens(args.token)
    if args.no_containers:
        cfg["containers"] = False
    if args.verbose:
        cfg["verbose"] = True
    if not 0 <= float(cfg["firewall_period"]) <= 60:
        raise SystemExit("pve-sim: firewall_period must be 0..60 s")
    for t in [cfg] + list(cfg["templates"]):
        o = t.get("template_os" if t is cfg else "os")
        if o is not None and o not in ("busybox", "debian"):
            raise SystemExit(f"pve-sim: template os '{o}' must be busybox or debian")
    if cfg["error_format"] not in ("old", "new"):
        raise SystemExit("pve-sim: error_format must be 'old' or 'new'")
    return cfg
