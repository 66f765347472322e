"""The simulator object. Sim holds the whole simulated cluster (configs, firewall, pools,
leases, tasks, faults, settings) behind one lock; its methods come from one mixin per role:

  StateMixin       state.py       loading and saving the state folder
  ContainersMixin  containers.py  root filesystems, config helpers, status, runtime
  DhcpMixin        network.py     leases and the delayed address
  FirewallMixin    firewall.py    firewall snapshots, the pve-firewall cycle, nftables ruleset
  FaultsMixin      faults.py      the fault list
  NodesMixin       nodes.py       per-node capacity and load, nodes taken down and brought up
  WorkersMixin     workers.py     pvedaemon's workers per node and pveproxy's proxy timeout
  VolumesMixin     volumes.py     mount point volumes: names, folders, bind mounts

sim.net (network.Net) is attached at startup."""

import os
import random
import re
import threading
import time

from .containers import ContainersMixin
from .faults import FaultsMixin
from .firewall import FirewallMixin
from .network import DhcpMixin, cleanup_instance
from .nodes import NodesMixin
from .state import StateMixin
from .util import instance_id
from .volumes import VolumesMixin
from .workers import WorkersMixin


class Sim(StateMixin, ContainersMixin, DhcpMixin, FirewallMixin, FaultsMixin, NodesMixin,
          WorkersMixin, VolumesMixin):
    def __init__(self, cfg):
        self.cfg = cfg
        self.lock = threading.RLock()
        self.boot_mono = time.monotonic()
        self.state_dir = os.path.realpath(cfg["state_dir"])
        self.inst = cfg["instance"] or instance_id(self.state_dir)
        if not re.fullmatch(r"[0-9a-f]{4}", self.inst):
            raise SystemExit("pve-sim: instance must be 4 lower-case hex digits")
        self.task_pid = random.randrange(0x10000, 0x200000)
        self.tasks = {}
        self.rt = {}             # vmid -> runtime (process, ip, timers)
        self.flocks = {}
        self.faults = []
        self.fault_seq = 0
        ctf = cfg.get("ct_faults") or {}
        self.no_ip = set(int(x) for x in ctf.get("no_ip", []))
        self.no_sshd = set(int(x) for x in ctf.get("no_sshd", []))
        self.settings = {k: cfg[k] for k in ("dhcp_delay", "firewall_period", "firewall_phase", "dhcp_pool_size", "auth_failure_delay", "error_format",
                                            "auth_error_style", "clone_time", "start_time", "stop_time",
                                            "destroy_time", "snapshot_time", "snapshot_unsupported", "flock_timeout", "ip_never", "resources_lag",
                                            "legacy_vmid_strings", "interfaces_endpoint", "node_down_delay",
                                            "interfaces_extra_ipv4", "firewall_nftables",
                                            "pvedaemon_workers", "proxy_timeout")}
        self.workers_setup()
        self.rrd = {}
        self.rrd_nodes = {}
        self.rrd_time = 0.0
        self.pvestatd_stalled = False  # POST /admin/pvestatd; not kept over a restart
        self.storages_offline = set()  # (node, storage): POST /admin/storage/NAME/offline
        self.nodes_down = set()  # nodes taken down (POST /admin/node/NAME/down); not kept over a restart
        self.applied_fw = None
        self.fw_cycle_gen = 0
        self.fw_next_tick = None
        self.fw_last_tick = None
        self.fw_ticks = 0
        self.fw_wake = threading.Event()  # never set: the cycle thread's interruptible sleep
        self.closed = False
        for f in cfg.get("faults") or []:
            self.add_fault(f)

    def shutdown(self):
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.fw_cycle_gen += 1
            rts = list(self.rt.items())
        for vmid, rt in rts:
            if rt.get("timer"):
                rt["timer"].cancel()
            self.net.kill_proc(rt.get("proc"))
        self.net.teardown()
        self.unmount_roots()
        cleanup_instance(self.inst)
