"""Startup and shutdown: the command line, --cleanup, --serve-host, claiming the instance,
bringing up the state, network, firewall and listener, sim-info.json and the ready line,
and removing everything again on exit or SIGTERM/SIGINT/SIGHUP."""

import atexit
import json
import os
import signal
import threading
import traceback

from .config import load_config, parse_args
from . import rootfs
from .containers import host_key_path
from .core import Sim
from .hosts import serve_host
from .network import Net, all_instances, cleanup_instance, cleanup_stale, instance_owner_alive
from .server import Server, make_tls
from .util import RUN_DIR, instance_id


def chroot_safe(path):
    p = os.path.realpath(path)
    parts = []
    while True:
        parts.append(p)
        if p == "/":
            break
        p = os.path.dirname(p)
    for q in parts:
        st = os.stat(q)
        if st.st_uid != 0 or st.st_mode & 0o022:
            return q
    return None


def claim_instance(cfg, state_dir, inst):
    """Check that this instance can start here, clear what dead instances left, write the pid file."""
    if os.geteuid() != 0 and cfg["containers"]:
        raise SystemExit("pve-sim: containers need root (or pass --no-containers)")
    os.makedirs(RUN_DIR, mode=0o755, exist_ok=True)
    os.makedirs(state_dir, mode=0o755, exist_ok=True)
    if cfg["containers"]:
        bad = chroot_safe(state_dir)
        if bad:
            raise SystemExit(f"pve-sim: state dir component '{bad}' is not root-owned or is group/world-writable; "
                             "sshd ChrootDirectory refuses that (use e.g. /run/pve-sim-NAME or /var/lib/pve-sim)")
        if instance_owner_alive(inst):
            raise SystemExit(f"pve-sim: instance {inst} (state dir {state_dir}) is already running")
        cleanup_stale(inst)
    with open(os.path.join(RUN_DIR, inst + ".pid"), "w") as f:
        f.write(f"{os.getpid()} {state_dir}\n")


def on_exit(sim):
    """Tear the simulator down at exit and on SIGTERM/SIGINT/SIGHUP; returns the teardown."""
    done = threading.Event()

    def fin():
        if not done.is_set():
            done.set()
            try:
                sim.shutdown()
            except Exception:
                traceback.print_exc()
    atexit.register(fin)

    def on_signal(signum, frame):
        # a second signal during cleanup must not abort the cleanup
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    return fin


def bring_up(sim, cfg):
    """State, TLS, network, templates, firewall, and the containers that were running."""
    sim.load()
    sim.mount_roots()
    sim.prune_leases()
    ctx, fp, _ = make_tls(sim)
    sim.fingerprint = fp
    sim.net.setup()
    sim.init_defaults(sim.net)
    # the daemon's public key may have changed between runs: refresh templates
    if cfg.get("authorized_key"):
        key = open(cfg["authorized_key"]).read().strip() + "\n"
        for td in cfg["templates"]:
            ak = os.path.join(sim.ct_dir(int(td["vmid"])), "rootfs", "root", ".ssh", "authorized_keys")
            if os.path.exists(ak):
                with open(ak, "w") as f:
                    f.write(key)
    for td in cfg["templates"]:
        rc = os.path.join(sim.ct_dir(int(td["vmid"])), "rootfs", "etc", "resolv.conf")
        if os.path.exists(rc):
            with open(rc, "w") as f:
                f.write(f"nameserver {sim.net.inet_ip}\n")
    sim.applied_fw = sim.fw_snapshot()
    sim.restore()
    sim.apply_firewall()
    sim.firewall_start_cycle()
    return ctx, fp


def write_info(sim, cfg, url, fp):
    """STATE/sim-info.json (0600): everything a client needs."""
    t0 = int(cfg["templates"][0]["vmid"]) if cfg["templates"] else 0
    info = {
        "url": url, "fingerprint": fp, "instance": sim.inst, "state_dir": sim.state_dir, "pid": os.getpid(),
        "nodes": cfg["nodes"], "node": cfg["nodes"][0],
        "templates": {str(t["vmid"]): {"node": t.get("node") or cfg["nodes"][0],
                                       "os": sim.root_os(int(t["vmid"])),
                                       "host_key": sim.host_key_fp(int(t["vmid"])),
                                       "host_key_pub": open(host_key_path(sim.ct_dir(int(t["vmid"]))) +
                                                            ".pub").read().strip()}
                      for t in cfg["templates"]},
        "template": t0,
        "pools": sorted(sim.pools), "pool": cfg["pools"][0]["poolid"] if cfg["pools"] else "",
        "tokens": {t.id: t.secret for t in sim.tokens.values()},
        "bridge_subnet": str(sim.net.bridge), "gateway": sim.net.gw, "daemon_ip": sim.net.host_ip,
        "internet_ip": sim.net.inet_ip, "internet_subnet": str(sim.net.inet),
        "internet_names": sim.net.inet_names, "lan_ip": sim.net.lan_ip,
        "node_netns": sim.net.node_ns, "internet_netns": sim.net.inet_ns, "lan_netns": sim.net.lan_ns,
        "admin_url": url + "/admin", "containers": cfg["containers"],
    }
    with open(sim.path("sim-info.json.tmp"), "w") as f:
        json.dump(info, f, indent=1)
    os.chmod(sim.path("sim-info.json.tmp"), 0o600)
    os.replace(sim.path("sim-info.json.tmp"), sim.path("sim-info.json"))
    return info


def main(argv=None):
    args = parse_args(argv)
    if args.serve_host:
        names = dict(e.split("=", 1) for e in args.dns_names.split(",") if e)
        serve_host(args.serve_host, args.host_ip, args.dns_answer, names)
        return
    if args.build_template_image:
        rootfs.main_build(check_only=args.check_only)
        return

    cfg = load_config(args)
    state_dir = os.path.realpath(cfg["state_dir"])
    inst = cfg["instance"] or instance_id(state_dir)

    if args.cleanup:
        if args.all:
            for i in all_instances():
                cleanup_instance(i, kill_owner=True)
        else:
            cleanup_instance(inst, kill_owner=True)
            cleanup_stale(inst)
        return

    claim_instance(cfg, state_dir, inst)
    sim = Sim(cfg)
    sim.net = Net(sim)
    fin = on_exit(sim)
    ctx, fp = bring_up(sim, cfg)

    srv = Server((cfg["listen"], int(cfg["port"])), ctx, sim)
    port = srv.server_address[1]
    host = cfg["listen"]
    hurl = f"[{host}]" if ":" in host else host
    url = f"https://{hurl}:{port}"
    info = write_info(sim, cfg, url, fp)
    t0 = info["template"]
    hk = info["templates"][str(t0)]["host_key"] if t0 else ""
    print(f"pve-sim ready url={url} fingerprint={fp} node={cfg['nodes'][0]} template={t0} "
          f"host_key={hk} internet_ip={sim.net.inet_ip} lan_ip={sim.net.lan_ip} daemon_ip={sim.net.host_ip} "
          f"instance={sim.inst} info={sim.path('sim-info.json')}", flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        fin()
