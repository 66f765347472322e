"""Per-container resource limits as Proxmox applies them: cgroup v1 cpuset and memory
controllers (when the host has them mounted and writable; otherwise nothing is enforced
and the configuration alone records the sizes). A container's processes see `cores` CPUs
(nproc, sched_getaffinity) and a memory limit of `memory` MiB; a config PUT on a running
container changes both live, as on a real node.

Which CPUs: as pve-container's update_lxc_config() (PVE/LXC.pm) does at each start, `cores`
of the host's CPUs drawn at random, so that containers of one core spread over the host
rather than all sharing its first CPU. A live change keeps the CPUs while their count is
right."""

import os
import random

ROOTS = {"cpuset": "/sys/fs/cgroup/cpuset", "memory": "/sys/fs/cgroup/memory"}
TOP = "pve-sim"


def available():
    return all(os.access(os.path.join(r, "cgroup.procs"), os.W_OK) for r in ROOTS.values())


def path(kind, name):
    return os.path.join(ROOTS[kind], TOP, name)


def _read(p):
    with open(p) as f:
        return f.read().strip()


def _write(p, v):
    try:
        with open(p, "w") as f:
            f.write(str(v))
        return True
    except OSError:
        return False


def _cpus(spec):
    """The CPUs of a cpuset list ("0-3,6"), in order."""
    cpus = []
    for part in spec.split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        cpus.extend(range(int(a), int(b or a) + 1))
    return cpus


def setup(name, cores, memory_mb):
    """Makes the container's groups; returns the cgroup.procs files a new process joins, or []."""
    if not available():
        return []
    try:
        for kind, root in ROOTS.items():
            top = os.path.join(root, TOP)
            os.makedirs(top, exist_ok=True)
            os.makedirs(path(kind, name), exist_ok=True)
            if kind == "cpuset":
                for f in ("cpuset.cpus", "cpuset.mems"):
                    for d in (top, path(kind, name)):
                        if not _read(os.path.join(d, f)):
                            _write(os.path.join(d, f), _read(os.path.join(root, f)))
    except OSError:
        return []
    apply(name, cores, memory_mb)
    return [os.path.join(path(k, name), "cgroup.procs") for k in ROOTS]


def apply(name, cores, memory_mb):
    """The sizes of a running container, now (a shrink below current use may be refused)."""
    if not available() or not os.path.isdir(path("cpuset", name)):
        return
    mine = os.path.join(path("cpuset", name), "cpuset.cpus")
    try:
        host = _cpus(_read(os.path.join(ROOTS["cpuset"], "cpuset.cpus")))
        now = _cpus(_read(mine))
    except (OSError, ValueError):
        return
    n = max(1, min(int(cores), len(host)))
    if len(now) != n or not set(now) <= set(host):
        _write(mine, ",".join(str(c) for c in sorted(random.sample(host, n))))
    _write(os.path.join(path("memory", name), "memory.limit_in_bytes"), int(memory_mb) << 20)


def join(procs_files):
    """preexec_fn: the calling (child) process joins the container's groups."""
    for p in procs_files:
        _write(p, os.getpid())


def remove(name):
    for kind in ROOTS:
        try:
            os.rmdir(path(kind, name))
        except OSError:
            pass


def remove_prefix(prefix):
    """Every group of an instance (its containers' names start with prefix), once their
    processes are gone."""
    for kind in ROOTS:
        top = os.path.join(ROOTS[kind], TOP)
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for n in names:
            if n.startswith(prefix):
                try:
                    os.rmdir(os.path.join(top, n))
                except OSError:
                    pass
        try:
            os.rmdir(top)  # only when no other instance has groups there
        except OSError:
            pass
