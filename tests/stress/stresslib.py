"""What the stress tests that attack one daemon of e2elib's Env share: a small sanitizer
quarantine (so that resident memory shows what the daemon holds, as test_conn.py), the
daemon's descriptors and resident memory, and waiting for its descriptors to come back."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

os.environ["ASAN_OPTIONS"] = ":".join(filter(None, [
    os.environ.get("ASAN_OPTIONS"), "quarantine_size_mb=4",
    "allocator_release_to_os_interval_ms=500"]))
FD_SLACK = 8


def fds(env):
    return len(os.listdir(f"/proc/{env.proc.pid}/fd"))


def rss_kib(env):
    for line in open(f"/proc/{env.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fds_back(env, base, within_s=20, slack=FD_SLACK):
    """Waits up to within_s for the daemon's descriptors to be back to base (give or take
    slack), and fails if they are not."""
    deadline = time.time() + within_s
    while fds(env) > base + slack and time.time() < deadline:
        time.sleep(0.2)
    assert fds(env) <= base + slack, (fds(env), base)
