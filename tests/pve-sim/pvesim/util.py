"""Names shared by every module, logging, running commands, process checks."""

import hashlib
import os
import subprocess
import sys
import time

PREFIX = "pvesim"                # namespaces pvesim-XXXX-*, nftables tables "pvesim"
RUN_DIR = "/run/pve-sim"         # instance pid files and the setup lock
# the executable entry point (tests/pve-sim/pve-sim): the simulated internet and LAN hosts
# run as "pve-sim --serve-host", and a live instance is recognised by "pve-sim" in its cmdline
SELF = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "pve-sim")

TRACE = bool(os.environ.get("PVESIM_TRACE"))


def log(*a):
    print("pve-sim:", *a, file=sys.stderr, flush=True)


def run(cmd, check=True, input=None):
    t0 = time.monotonic()
    r = subprocess.run(cmd, input=input, capture_output=True, text=True)
    if TRACE:
        log(f"{time.monotonic() - t0:.3f}s rc={r.returncode} {' '.join(cmd)}")
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def pid_alive(pid):
    """True when pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def sha1(s):
    return hashlib.sha1(s.encode()).hexdigest()


def instance_id(state_dir):
    """The default instance id: the first 4 hex digits of sha1(realpath(state dir))."""
    return hashlib.sha1(state_dir.encode()).hexdigest()[:4]
