#!/usr/bin/env python3
"""Agent-like tasks against pve-sim's Debian 12 template (root), one run, figures on stdout.

An agent task, N of them in parallel (default 8), each on its own connection:

  create    sandbox.create from a warm pool of the Debian template
  upload    a generated Python project (200 files: a package `calc` of 100 modules and 97
            pytest files, a conftest.py, a pyproject.toml and a README) to /root/proj
  test      `python3 -m pytest -q` in it: some tests fail by design (a rounding bug)
  patch     one file rewritten (the bug fixed)
  retest    pytest again: everything passes
  destroy   sandbox.destroy

through the daemon with the Python client (clients/python): `Client.create`,
`Sandbox.upload_dir` (one tar stream through a passed descriptor into a tar in the sandbox,
retried after 50 ms while the daemon answers Busy; --upload stdin: one tar as the exec's
stdin; --upload files: one `file.write` per file), `Sandbox.exec`, `Sandbox.write_file`,
`Sandbox.destroy`. Beside it, the same steps as a script without a daemon runs them: plain
OpenSSH with a fresh connection per step (`scp -r` of the project, `ssh HOST 'cd ... &&
python3 -m pytest -q'`, `scp` of the patched file, `ssh` pytest again) on containers of the
same template in the same simulator, taken from the warm pool just before (their create and
destroy are not counted: OpenSSH cannot make a container, so the baseline's tasks are its
four steps only). The pool refills during both sides' tasks. With --rounds R each side runs
R times, in turns. Also printed: the host CPU per task of the daemon, of the bench's child
processes (ssh, scp, tar) and of pve-sim's own process.

Printed for each side: tasks per minute (tasks done / wall time from the first task's start
to the last one's end), p50 and p99 task time, the p50 of every step; then the ratios, over
whole tasks (the daemon's create and destroy counted, the baseline's not) and over the four
common steps alone. Every task checks its results (the first run fails the expected tests,
the second passes them all); a task that does not is an error and stops the bench.

Bounded: --n 1..32 in parallel, --tasks 1..128 per side, --rounds 1..8, --max-time: no task
of a side starts after it (seconds from the side's start).

Usage: SANDBOXD_BUILD_ROOT=BUILD tests/bench/bench_agent.py [--n 8] [--tasks 16] [--rounds 1]
           [--upload tar|stdin|files] [--max-time 900] [--only ssh,daemon]
           [--destroy wait|nowait]"""

import argparse
import functools
import io
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import e2elib  # noqa: E402
from e2elib import Env  # noqa: E402

sys.path.insert(0, os.path.join(e2elib.SRC, "clients", "python"))

import sandboxd  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001 (figures appear as they come)

# pve-sim's own default delays (tests/pve-sim/README.md), as bench_tti.py's "default" row.
DELAYS = {"clone_time": 0.5, "start_time": 0.2, "dhcp_delay": 1.0, "stop_time": 0.1,
          "destroy_time": 0.2, "auth_failure_delay": 0.1}
REMOTE = "/root/proj"
STEPS = ("create", "upload", "test", "patch", "retest", "destroy")
COMMON = ("upload", "test", "patch", "retest")
MODULES = 98  # calc/mod_NNN.py; with calc/__init__.py and calc/rounding.py: 100 files
BUGGY = 5  # mod_000..mod_004 round through calc.rounding, whose bug fails their tests
UPLOADS = {"tar": "one tar stream through a descriptor (upload_dir)",
           "stdin": "one tar as sandbox.exec's stdin", "files": "file.write per file"}
PYTEST = f"cd {REMOTE} && python3 -m pytest -q -p no:cacheprovider"
EXEC_TIMEOUT_MS = 600000
WARM_MAX = 64  # the pool's size: --tasks, at most this
BUSY_RETRY_S = 300

ROUNDING_BAD = '''"""Rounding helpers shared by the calc modules."""


def round_half_up(x, digits=0):
    """Rounds x to digits decimals, halves away from zero."""
    return round(x, digits)  # BUG: round() rounds halves to even
'''

ROUNDING_GOOD = '''"""Rounding helpers shared by the calc modules."""

from decimal import ROUND_HALF_UP, Decimal


def round_half_up(x, digits=0):
    """Rounds x to digits decimals, halves away from zero."""
    q = Decimal(1).scaleb(-digits)
    return float(Decimal(repr(x)).quantize(q, rounding=ROUND_HALF_UP))
'''

MODULE = '''"""calc.mod_{i:03d}: a small piece of the calc package."""

from calc.rounding import round_half_up

FACTOR = {f}


def scale(values):
    """Every value times FACTOR."""
    return [v * FACTOR for v in values]


def total(values):
    """The sum of the scaled values."""
    return sum(scale(values))


def mean(values):
    """The mean of the values; 0 for none."""
    return sum(values) / len(values) if values else 0


def bucket(x, width={w}):
    """The bucket of x for buckets of width."""
    return int(x // width)


def price(x):
    """x with the module's markup, to the cent."""
    return {price_expr}
'''

TEST = '''from calc import mod_{i:03d} as m


def test_scale():
    assert m.scale([1, 2, 3]) == [{f}, {f2}, {f3}]


def test_total():
    assert m.total([1, 2]) == {f3}


def test_mean():
    assert m.mean([2, 4, 6]) == 4
    assert m.mean([]) == 0


def test_bucket():
    assert m.bucket({w} * 3 + 1) == 3


def test_price():
    assert m.price({px}) == {want}
'''

TEST_ROUNDING = '''from calc.rounding import round_half_up


def test_halves_up():
    assert round_half_up(0.5) == 1
    assert round_half_up(2.5) == 3


def test_digits():
    assert round_half_up(1.005, 2) == 1.01
    assert round_half_up(1.25, 1) == 1.3
'''

CONFTEST = '''import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
'''

PYPROJECT = '''[project]
name = "calc"
version = "0.1.0"
requires-python = ">=3.9"

[tool.pytest.ini_options]
testpaths = ["tests"]
'''


def make_project(root):
    """Writes the project into root (200 files); returns (files, the failing tests' count)."""
    os.makedirs(os.path.join(root, "calc"))
    os.makedirs(os.path.join(root, "tests"))
    files = {"README.md": "# calc\n\nA generated project for sandboxd's agent benchmark.\n",
             "pyproject.toml": PYPROJECT, "calc/__init__.py": '"""calc."""\n',
             "calc/rounding.py": ROUNDING_BAD, "tests/conftest.py": CONFTEST,
             "tests/test_rounding.py": TEST_ROUNDING}
    for i in range(MODULES):
        f, w = i % 7 + 2, i % 5 + 3
        if i < BUGGY:  # round() gives 2.5 -> 2.0 (even); half up gives 3.0
            price_expr, px, want = "round_half_up(x * 1.0)", "2.5", "3.0"
        else:
            price_expr, px, want = "round(x * 1.25, 2)", "4", "5.0"
        files[f"calc/mod_{i:03d}.py"] = MODULE.format(i=i, f=f, w=w, price_expr=price_expr)
        if i < MODULES - 2:
            files[f"tests/test_mod_{i:03d}.py"] = TEST.format(i=i, f=f, f2=2 * f, f3=3 * f, w=w,
                                                              px=px, want=want)
    for rel, text in files.items():
        with open(os.path.join(root, rel), "w") as fh:
            fh.write(text)
    return sorted(files), BUGGY + 2


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")


def summary(out):
    """pytest -q's last line: (failed, passed)."""
    last = out.strip().splitlines()[-1] if out.strip() else ""
    f = re.search(r"(\d+) failed", last)
    p = re.search(r"(\d+) passed", last)
    return (int(f.group(1)) if f else 0, int(p.group(1)) if p else 0), last


class Expect:
    def __init__(self, nfail, ntests):
        self.nfail, self.ntests = nfail, ntests

    def check(self, code, out, fixed):
        (failed, passed), last = summary(out)
        want = (0, self.ntests) if fixed else (self.nfail, self.ntests - self.nfail)
        if (failed, passed) != want or code != (0 if fixed else 1):
            raise RuntimeError(f"pytest exit {code}, '{last}'; expected {want} (failed, passed)")


# ---- one task through the daemon

def upload_dir(sb, proj, retries):
    """Sandbox.upload_dir, again after a pause while the daemon answers Busy (-32007: at
    most 4 transfers through descriptors run per user id), as an agent's retry would; for
    BUSY_RETRY_S at most."""
    give_up = time.monotonic() + BUSY_RETRY_S
    while True:
        try:
            return sb.upload_dir(proj, REMOTE)
        except sandboxd.Busy:
            if time.monotonic() > give_up:
                raise
            retries.append(1)
            time.sleep(0.05)


def tar_of(proj):
    """The project as one tar in memory (what `tar -C proj -cf - .` gives)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        t.add(proj, arcname=".")
    return buf.getvalue()


def daemon_task(client, proj, files, patched, expect, upload, retries, wait):
    t = {}
    t0 = time.perf_counter()
    sb = client.create(ttl_s=3600)
    t["create"] = time.perf_counter()
    try:
        if upload == "tar":
            upload_dir(sb, proj, retries)
        elif upload == "stdin":
            r = sb.exec(f"mkdir -p {REMOTE} && exec tar -C {REMOTE} -xf -", stdin=tar_of(proj),
                        timeout_ms=EXEC_TIMEOUT_MS)
            if not r.ok:
                raise RuntimeError(f"tar in the sandbox: {r.exit_code} {r.stderr}")
        else:
            for rel in files:
                with open(os.path.join(proj, rel), "rb") as fh:
                    sb.write_file(f"{REMOTE}/{rel}", fh.read())
        t["upload"] = time.perf_counter()
        r = sb.exec(PYTEST, timeout_ms=EXEC_TIMEOUT_MS)
        t["test"] = time.perf_counter()
        expect.check(r.exit_code, r.stdout, False)
        sb.write_file(f"{REMOTE}/calc/rounding.py", patched)
        t["patch"] = time.perf_counter()
        r = sb.exec(PYTEST, timeout_ms=EXEC_TIMEOUT_MS)
        t["retest"] = time.perf_counter()
        expect.check(r.exit_code, r.stdout, True)
    finally:
        sb.destroy(wait=wait)
    t["destroy"] = time.perf_counter()
    return steps_of(t0, t)


def steps_of(t0, marks):
    out, prev = {}, t0
    for s in STEPS:
        if s in marks:
            out[s] = marks[s] - prev
            prev = marks[s]
    out["task"] = prev - t0
    return out


# ---- the same steps over plain OpenSSH, a fresh connection per step

def ssh_task(opts, ip, proj, patched_file, expect):
    host = f"root@{ip}"
    t = {}
    t0 = time.perf_counter()
    run(["scp", "-q", "-r"] + opts + [proj, f"{host}:{REMOTE}"])
    t["upload"] = time.perf_counter()
    r = run(["ssh"] + opts + [host, PYTEST], check=False)
    t["test"] = time.perf_counter()
    expect.check(r.returncode, r.stdout, False)
    run(["scp", "-q"] + opts + [patched_file, f"{host}:{REMOTE}/calc/rounding.py"])
    t["patch"] = time.perf_counter()
    r = run(["ssh"] + opts + [host, PYTEST], check=False)
    t["retest"] = time.perf_counter()
    expect.check(r.returncode, r.stdout, True)
    return steps_of(t0, t)


def run(argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=EXEC_TIMEOUT_MS / 1000)
    if check and r.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({r.returncode}): {r.stderr.strip()}")
    return r


# ---- the parallel driver

def parallel(n, jobs, deadline, fn):
    """Runs fn(job) for the jobs on n threads, none started after deadline; returns (the
    step times of each task done, wall seconds). The first error stops the bench."""
    lock = threading.Lock()
    queue, done, errors = list(jobs), [], []

    def worker():
        while True:
            with lock:
                if not queue or errors or time.monotonic() > deadline:
                    return
                job = queue.pop(0)
            try:
                r = fn(job)
            except Exception as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(e)
                return
            with lock:
                done.append(r)

    ts = [threading.Thread(target=worker) for _ in range(n)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"a task failed: {errors[0]}") from errors[0]
    return done, wall


def cpu_s(pid=None):
    """CPU seconds (user + system): of process pid, or of this process's children waited for
    (ssh, scp, tar)."""
    if pid is None:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def show(label, done, wall, steps):
    task = [d["task"] for d in done]
    print(f"{label}: {len(done)} tasks in {wall:.1f} s: {len(done) / wall * 60:.1f} tasks/min; "
          f"task p50 {pct(task, 50):.2f} s, p99 {pct(task, 99):.2f} s")
    print(f"  (load average {os.getloadavg()[0]:.1f} at the end)")
    print("  step p50: " + ", ".join(f"{s} {pct([d[s] for d in done], 50) * 1000:.0f} ms"
                                     for s in steps))


def common(done):
    return [sum(d[s] for s in COMMON) for d in done]


def machine():
    with open("/proc/meminfo") as f:
        mem = next(int(l.split()[1]) // 1024 for l in f if l.startswith("MemTotal:"))
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    return f"{os.cpu_count()} CPUs ({cpu}), {mem} MiB RAM, Linux {platform.release()}"


def build_type():
    try:
        with open(os.path.join(e2elib.BUILD, "meson-info", "intro-buildoptions.json")) as f:
            opts = {o["name"]: o["value"] for o in json.load(f)}
    except OSError:
        return "unknown build"
    san = opts.get("b_sanitize", "none")
    return f"{opts.get('buildtype')}, sanitizers {san if san not in ('', []) else 'none'}"


def wait_pool(env, n, timeout=900):
    c = env.client()
    try:
        t0 = time.time()
        while True:
            p = c.call("daemon.status")["pool"]["default"]
            if p["ready"] >= n:
                return p
            if time.time() - t0 > timeout:
                raise RuntimeError(f"the warm pool never reached {n}: {p}")
            time.sleep(0.2)
    finally:
        c.close()


def wait_destroyed(c, timeout=600):
    """Seconds until none of the caller's sandboxes is being destroyed (a destroy that was not
    waited for ends before the other side's round starts)."""
    t0 = time.monotonic()
    while any(s["state"] == "destroying" for s in c.call("sandbox.list")["sandboxes"]):
        if time.monotonic() - t0 > timeout:
            raise RuntimeError("destroys still running")
        time.sleep(0.1)
    return time.monotonic() - t0


def image():
    r = subprocess.run([sys.executable, e2elib.simlib.SIM, "--build-template-image"],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"the Debian template image: {r.stderr.strip()}")


def ssh_phase(env, a, proj, patched_file, expect):
    """Makes the containers (untimed: from the warm pool, through the daemon), then times the
    OpenSSH tasks while the pool refills, as it does during the daemon's tasks."""
    wait_pool(env, min(WARM_MAX, a.tasks))
    client = sandboxd.Client(env.socket, timeout=900)
    sbs = [client.create(ttl_s=3600) for _ in range(a.tasks)]
    kh = os.path.join(env.dir, "known_hosts")
    with open(kh, "w") as f:
        for sb in sbs:
            pub = sb.read_file("/etc/ssh/ssh_host_ed25519_key.pub").decode().strip()
            f.write(f"{sb.ip} {pub}\n")
    opts = ["-F", "/dev/null", "-i", env.sim.key, "-o", f"UserKnownHostsFile={kh}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
            "-o", "ControlMaster=no"]
    try:
        return parallel(a.n, [sb.ip for sb in sbs], time.monotonic() + a.max_time,
                        lambda ip: ssh_task(opts, ip, proj, patched_file, expect))
    finally:
        for sb in sbs:
            sb.destroy()
        client.close()


def daemon_phase(env, a, proj, files, patched, expect):
    clients = [sandboxd.Client(env.socket, timeout=900) for _ in range(a.n)]
    slot = threading.local()
    it = iter(clients)
    lock = threading.Lock()
    retries = []

    def task(_):
        if not hasattr(slot, "c"):
            with lock:
                slot.c = next(it)
        return daemon_task(slot.c, proj, files, patched, expect, a.upload, retries,
                           a.destroy == "wait")

    wait_pool(env, min(WARM_MAX, a.tasks))
    c = env.client()
    h0 = c.call("daemon.status")["pool"]["default"]["hits"]
    try:
        done, wall = parallel(a.n, range(a.tasks), time.monotonic() + a.max_time, task)
        hits = c.call("daemon.status")["pool"]["default"]["hits"] - h0
        gone = wait_destroyed(c)
    finally:
        c.close()
        for cl in clients:
            cl.close()
    if retries:
        print(f"  (upload_dir answered Busy {len(retries)} times and was retried after 50 ms)")
    if a.destroy == "nowait":
        print(f"  (destroys not waited for: the last one ended {gone:.1f} s after the last task)")
    return done, wall, hits


def compare(env, a, only, work):
    """--rounds rounds of each side, in turns (ssh first in odd rounds): {side: (the step
    times of every task done, the wall seconds of all rounds)}."""
    proj, files, patched_file, expect = work
    res = {side: ([], 0.0) for side in only}
    for r in range(a.rounds):
        for side in (("ssh", "daemon") if r % 2 == 0 else ("daemon", "ssh")):
            if side not in only:
                continue
            cpu0 = cpu_s(env.proc.pid), cpu_s(), cpu_s(env.sim.proc.pid)
            if side == "ssh":
                done, wall = ssh_phase(env, a, proj, patched_file, expect)
                show(f"round {r + 1}, ssh/scp, a connection per step", done, wall, COMMON)
            else:
                done, wall, hits = daemon_phase(env, a, proj, files, ROUNDING_GOOD.encode(),
                                                expect)
                show(f"round {r + 1}, sandboxd ({hits} of {len(done)} creates from the warm pool)",
                     done, wall, STEPS)
            n = max(1, len(done)) / 1000
            daemon, kids, sim = (cpu_s(env.proc.pid) - cpu0[0], cpu_s() - cpu0[1],
                                 cpu_s(env.sim.proc.pid) - cpu0[2])
            print(f"  host CPU per task: sandboxd {daemon / n:.0f} ms (its pool's refills "
                  f"included), the bench's child processes (ssh, scp, tar) {kids / n:.0f} ms, "
                  f"pve-sim's own process (the simulated Proxmox API and tasks) {sim / n:.0f} ms")
            res[side] = (res[side][0] + done, res[side][1] + wall)
    if a.rounds > 1:
        for side, (done, wall) in res.items():
            show(f"all rounds, {side}", done, wall, COMMON if side == "ssh" else STEPS)
    return res


def ratios(res):
    (dd, dw), (sd, sw) = res["daemon"], res["ssh"]
    dt, st = [d["task"] for d in dd], [d["task"] for d in sd]
    print(f"throughput sandboxd / ssh: {len(dd) / dw / (len(sd) / sw):.2f}x "
          f"(whole tasks; the daemon's create and destroy counted, ssh's not)")
    print(f"task p50 ssh / sandboxd: {pct(st, 50) / pct(dt, 50):.2f}x, p99 "
          f"{pct(st, 99) / pct(dt, 99):.2f}x; the four common steps alone: p50 "
          f"{pct(common(sd), 50) / pct(common(dd), 50):.2f}x")
    d_out = [sum(d[s] for s in ("create", "upload", "patch", "destroy")) for d in dd]
    s_out = [d["upload"] + d["patch"] for d in sd]
    print(f"outside the two pytest runs, task p50: sandboxd {pct(d_out, 50):.2f} s (create, "
          f"upload, patch, destroy), ssh {pct(s_out, 50):.2f} s (upload, patch)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8, help="tasks in parallel (1..32, default 8)")
    ap.add_argument("--tasks", type=int, default=16, help="tasks per side (1..128, default 16)")
    ap.add_argument("--upload", choices=["tar", "stdin", "files"], default="tar",
                    help="the daemon's upload: one tar stream through a descriptor (upload_dir), "
                         "one tar as an exec's stdin, or file.write per file")
    ap.add_argument("--max-time", type=float, default=900, help="seconds per side (default 900)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of each side, in turns (1..8, default 1)")
    ap.add_argument("--only", default="ssh,daemon", help="ssh,daemon")
    ap.add_argument("--destroy", choices=["wait", "nowait"], default="wait",
                    help="the daemon's destroy: answered once the container is gone (default), "
                         "or as soon as it has begun (wait: false, as an agent that moves on)")
    a = ap.parse_args()
    only = set(a.only.split(","))
    if (not 1 <= a.n <= 32 or not 1 <= a.tasks <= 128 or not 1 <= a.max_time <= 7200
            or not 1 <= a.rounds <= 8 or not only or not only <= {"ssh", "daemon"}):
        ap.error("--n 1..32, --tasks 1..128, --max-time 1..7200, --rounds 1..8, --only ssh,daemon")
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}")
    print(f"sandboxd: {e2elib.SANDBOXD} ({build_type()}); template: pve-sim Debian 12")
    t_all = time.time()
    image()
    tmp = tempfile.mkdtemp(prefix="bench-agent-", dir="/var/tmp")
    try:
        proj = os.path.join(tmp, "proj")
        files, nfail = make_project(proj)
        ntests = 5 * (MODULES - 2) + 2
        expect = Expect(nfail, ntests)
        patched_file = os.path.join(tmp, "rounding.py")
        with open(patched_file, "w") as f:
            f.write(ROUNDING_GOOD)
        size = sum(os.path.getsize(os.path.join(proj, r)) for r in files)
        print(f"project: {len(files)} files, {size / 1024:.0f} KiB, {ntests} tests of which "
              f"{nfail} fail before the patch; {a.n} tasks in parallel, {a.tasks} per side; "
              f"daemon upload: {UPLOADS[a.upload]}; destroy: {a.destroy}")
        warm = min(WARM_MAX, a.tasks)
        sim = dict(DELAYS, template_os="debian", bridge_subnet="10.221.0.0/20",
                   node_capacity={"pve": {"maxmem": 1 << 40, "maxcpu": 1024}})
        daemon = {"sandbox": {"max_per_uid": "256", "max_total": "256", "create_timeout_s": "600"},
                  "pool": {"warm": str(warm), "max_filling": "4"}}
        with Env(sim_config=sim, daemon_config=daemon, log_level="info") as env:
            wait_pool(env, warm)
            print(f"warm pool of {warm} filled after {time.time() - t_all:.0f} s")
            res = compare(env, a, only, (proj, files, patched_file, expect))
            if len(only) == 2:
                ratios(res)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"bench done in {time.time() - t_all:.0f} s")


if __name__ == "__main__":
    main()
