"""Applies, in a child process before it execs, the system call filter that
sandboxd.service asks systemd for (SystemCallFilter= allow list minus deny
list, SystemCallErrorNumber=EPERM), NoNewPrivileges= (implied by loading the
filter) and UMask=, so the daemon can be run under them without systemd as
PID 1. Uses libseccomp through ctypes (standard library only)."""
import ctypes
import ctypes.util
import errno
import os
import re
import subprocess

SCMP_ACT_ALLOW = 0x7FFF0000


def SCMP_ACT_ERRNO(e):
    return 0x00050000 | (e & 0x0000FFFF)


def expand(group, seen=None):
    """The system call names of a systemd @group, nested groups included."""
    seen = set() if seen is None else seen
    if group in seen:
        return set()
    seen.add(group)
    out = subprocess.run(["systemd-analyze", "syscall-filter", group], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, check=True).stdout
    names = set()
    for line in out.splitlines()[1:]:
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("@"):
            names |= expand(s, seen)
        else:
            names.add(s)
    return names


def unit_filter(service_text):
    """(allowed names, errno) from the SystemCallFilter= lines of a unit."""
    allow, deny = set(), set()
    err = errno.EPERM
    for line in service_text.splitlines():
        m = re.match(r"^SystemCallFilter=(~?)(.*)$", line)
        if m:
            names = set()
            for item in m.group(2).split():
                names |= expand(item) if item.startswith("@") else {item}
            (deny if m.group(1) else allow).update(names)
        m = re.match(r"^SystemCallErrorNumber=(\w+)$", line)
        if m:
            err = getattr(errno, m.group(1))
    return allow - deny, err


def umask_of(service_text):
    m = re.search(r"(?m)^UMask=([0-7]+)$", service_text)
    return int(m.group(1), 8) if m else 0o022


def make_preexec(service_text):
    """A preexec_fn for subprocess.Popen applying the unit's filter and umask."""
    allowed, err = unit_filter(service_text)
    umask = umask_of(service_text)
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    numbers = []
    for name in sorted(allowed):
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr >= 0:
            numbers.append(nr)

    def preexec():
        os.umask(umask)
        ctx = lib.seccomp_init(SCMP_ACT_ERRNO(err))
        if not ctx:
            os._exit(120)
        for nr in numbers:
            if lib.seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) < 0:
                os._exit(121)
        if lib.seccomp_load(ctx) < 0:
            os._exit(122)

    return preexec, allowed
