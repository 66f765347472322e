#!/usr/bin/env python3
"""Benchmarks of issue 4 against pve-sim (root), one run, figures on stdout:

  exec      round trip of `true` through the socket, p50/p99 over N runs, beside the floor
            (one persistent libssh session, an exec channel per command: bench-sshfloor),
            the same sandbox's execs through the shell wrapper (the exec helper's file
            removed; only when the exec supervisor does not run), a fresh OpenSSH `ssh host true` per command and OpenSSH ControlMaster
            then the same exec figures from a daemon with [ssh] exec_supervisor = false
  flight    1,000 execs in flight over 50 sandboxes: throughput, p99, errors
  create    create -> ready latency with the simulator's delays at zero (p50), and 16
            parallel creates
  files     8 MiB file.write / file.read MB/s beside OpenSSH sftp to the same container
  rss       daemon RSS with 100 live sandboxes

Usage: bench_sandbox.py [--quick] [--only exec,flight,create,files,rss]
(create also measures the per-sandbox host key steps and, in a second simulator, the same
creates with [ssh] rekey = false as their baseline; --only create for the per-step figures)
(--quick: smaller counts, for a smoke run)."""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2elib import BUILD, Env, b64, data_of  # noqa: E402

ZERO = {"dhcp_delay": 0, "clone_time": 0, "start_time": 0, "stop_time": 0, "destroy_time": 0}


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def ms(v):
    return f"p50 {pct(v, 50) * 1000:.2f} ms  p99 {pct(v, 99) * 1000:.2f} ms  (n={len(v)})"


def ssh_base(env, sb):
    """OpenSSH options for sandbox sb, pinned to its own host key (the create replaced the
    template's)."""
    kh = os.path.join(env.dir, "known_hosts")
    pub = os.path.join(env.sim.state_dir, "ct", str(sb["vmid"]), "rootfs", "etc", "ssh",
                       "ssh_host_ed25519_key.pub")
    with open(kh, "w") as f:
        f.write(f"{sb['ip']} {open(pub).read().strip()}\n")
    return ["-i", env.sim.key, "-o", f"UserKnownHostsFile={kh}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]


def exec_lat(c, sid, n):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        c.call("sandbox.exec", {"id": sid, "command": "true"})
        lat.append(time.perf_counter() - t)
    return lat


def ssh_floor(env, sb, n):
    """p50 and p99 in seconds of `true` on one persistent libssh session (tests/bench/
    bench-sshfloor.c): an exec channel per command, nothing else."""
    out = subprocess.run([os.path.join(BUILD, "tests", "bench", "bench-sshfloor"), sb["ip"],
                          env.sim.key, str(n)], check=True, capture_output=True, text=True).stdout
    m = re.match(r"p50 ([0-9.]+) ms  p99 ([0-9.]+) ms", out)
    return float(m.group(1)) / 1000, float(m.group(2)) / 1000


def bench_exec(env, c, n, openssh=True):
    sb = c.call("sandbox.create", {})
    # The first exec puts the exec helper in place and starts the exec supervisor (in the
    # background): wait for them.
    for _ in range(200):
        r = c.call("sandbox.exec", {"id": sb["id"], "command": "ls /root/.sandboxd-nsexec-* "
                                    "/root/.sandboxd-serve-*/addr 2>/dev/null"})
        if r["stdout"].count("\n") >= 2:
            break
        time.sleep(0.05)
    # With the supervisor each exec bypasses the helper's file: no wrapper rounds then.
    serving = ".sandboxd-serve-" in r["stdout"]
    for _ in range(20):
        c.call("sandbox.exec", {"id": sb["id"], "command": "true"})
    # Rounds of each in turn, so a busy neighbour weighs on all alike. Between them the
    # helper's file is moved aside in the container's root: each exec's line then falls back
    # to the shell wrapper.
    tmp = os.path.join(env.sim.state_dir, "ct", str(sb["vmid"]), "rootfs", "root")
    helper = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.startswith(".sandboxd-nsexec-")][0]
    lat, wrap, floors, cpu = [], [], [], 0.0
    for _ in range(4):
        cpu0 = cpu_ms(env.proc.pid)
        lat += exec_lat(c, sb["id"], n // 4)
        cpu += cpu_ms(env.proc.pid) - cpu0
        floors.append(ssh_floor(env, sb, n // 4))
        if not serving:
            os.rename(helper, helper + ".off")
            wrap += exec_lat(c, sb["id"], n // 4)
            os.rename(helper + ".off", helper)
    cpu /= len(lat)
    floor50 = statistics.median(f[0] for f in floors)
    floor99 = max(f[1] for f in floors)
    print(f"exec sandboxd (socket, `true`):      {ms(lat)}; daemon CPU {cpu:.2f} ms per exec"
          f"{' (exec supervisor)' if serving else ' (exec helper)'}")
    print(f"exec floor (one libssh session):     p50 {floor50 * 1000:.2f} ms  p99 {floor99 * 1000:.2f} ms  "
          f"(n={n // 4 * 4}, median of 4 rounds' p50)")
    if wrap:
        print(f"exec sandboxd, shell wrapper:        {ms(wrap)}")
    print(f"  ratio exec/floor p50 {pct(lat, 50) / floor50:.2f}x (goal <= 1.3x)"
          + (f"; shell wrapper/floor {pct(wrap, 50) / floor50:.2f}x" if wrap else ""))
    if not openssh:
        c.call("sandbox.destroy", {"id": sb["id"]})
        return
    base = ssh_base(env, sb)
    fresh = []
    for _ in range(max(20, n // 20)):
        t = time.perf_counter()
        subprocess.run(["ssh"] + base + [f"root@{sb['ip']}", "true"], check=True)
        fresh.append(time.perf_counter() - t)
    print(f"exec OpenSSH fresh connection:       {ms(fresh)}")
    cm = os.path.join(env.dir, "cm.sock")
    mux = base + ["-o", f"ControlPath={cm}", "-o", "ControlMaster=auto", "-o", "ControlPersist=60"]
    subprocess.run(["ssh"] + mux + [f"root@{sb['ip']}", "true"], check=True)
    cmv = []
    for _ in range(max(50, n // 4)):
        t = time.perf_counter()
        subprocess.run(["ssh"] + mux + [f"root@{sb['ip']}", "true"], check=True)
        cmv.append(time.perf_counter() - t)
    subprocess.run(["ssh"] + mux + ["-O", "exit", f"root@{sb['ip']}"], capture_output=True)
    print(f"exec OpenSSH ControlMaster:          {ms(cmv)}")
    print(f"  ratio sandboxd/ControlMaster p50 {pct(lat, 50) / pct(cmv, 50):.2f}x (goal <= 1.5x); "
          f"fresh/sandboxd p50 {pct(fresh, 50) / pct(lat, 50):.1f}x (goal >= 40x)")
    c.call("sandbox.destroy", {"id": sb["id"]})


def create_many(c, n):
    reqs = [c.send("sandbox.create", {}) for _ in range(n)]
    out, errs = [], 0
    for i in reqs:
        try:
            out.append(c.wait(i, 1800))
        except Exception as e:  # noqa: BLE001
            errs += 1
            print(f"  create error: {e}")
    return out, errs


def destroy_all(c, sbs):
    reqs = [c.send("sandbox.destroy", {"id": s["id"]}) for s in sbs]
    for i in reqs:
        c.wait(i, 600)


def bench_flight(env, c, n_sb, n_exec):
    t0 = time.time()
    sbs, errs = create_many(c, n_sb)
    print(f"flight: {len(sbs)} sandboxes created in {time.time() - t0:.1f} s ({errs} errors)")
    for s in sbs:
        c.call("sandbox.exec", {"id": s["id"], "command": "true"})
    t0 = time.perf_counter()
    sent = {}
    for k in range(n_exec):
        s = sbs[k % len(sbs)]
        sent[c.send("sandbox.exec", {"id": s["id"], "command": f"echo {k}"})] = (k, time.perf_counter())
    lat, errors = [], 0
    for i, (k, ts) in sent.items():
        try:
            r = c.wait(i, 600)
            if r["stdout"] != f"{k}\n":
                errors += 1
        except Exception:  # noqa: BLE001
            errors += 1
        lat.append(time.perf_counter() - ts)
    dt = time.perf_counter() - t0
    print(f"flight: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"flight: {n_exec} execs in flight over {len(sbs)} sandboxes: {n_exec / dt:.0f} execs/s, "
          f"p99 {pct(lat, 99) * 1000:.0f} ms (completion incl. queueing), errors {errors}")
    return sbs


def cpu_ms(pid):
    """User + system CPU time of a process in ms."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


CREATE_LAT = []  # the sequential create latencies, for the rekey baseline
REKEY_STEPS = ("regenerating the SSH host key", "recording the SSH host key",
               "connecting over SSH with the new host key")


def rekey_cost(env, sbs, lat):
    """The per-sandbox host key steps' share of each create, from the daemon's per-step
    durations (debug log)."""
    ids = {sb["id"] for sb in sbs}
    per = {}
    for line in env.daemon_log().splitlines():
        m = re.search(r"(sb-[a-z0-9]+): create step '([^']+)' done in ([0-9]+) ms", line)
        if m and m.group(1) in ids and m.group(2) in REKEY_STEPS:
            per.setdefault(m.group(1), {})[m.group(2)] = int(m.group(3)) / 1000
    if not per:
        print("create: for the host key steps' share, run with --only create (debug log)")
        return
    tot = [sum(v.values()) for v in per.values()]
    print(f"create: of which the host key steps (regenerate, record, reconnect): {ms(tot)}; "
          f"{100 * pct(tot, 50) / pct(lat, 50):.0f}% of the p50 create")
    for step in REKEY_STEPS:
        print(f"        {step}: {ms([v.get(step, 0) for v in per.values()])}")


def bench_create(env, c, n_seq, n_par):
    env.sim.admin("PUT", "/settings", ZERO)
    lat = []
    sbs = []
    cpu0 = cpu_ms(env.proc.pid)
    for _ in range(n_seq):
        t = time.perf_counter()
        sbs.append(c.call("sandbox.create", {}))
        lat.append(time.perf_counter() - t)
    cpu = (cpu_ms(env.proc.pid) - cpu0) / n_seq
    print(f"create -> ready, simulator delays 0: {ms(lat)}; daemon CPU {cpu:.1f} ms per create "
          f"(its own work; the rest is waiting for the simulator's clone/start and sshd)")
    rekey_cost(env, sbs, lat)
    CREATE_LAT[:] = lat
    destroy_all(c, sbs)
    t = time.perf_counter()
    sbs, errs = create_many(c, n_par)
    print(f"create: {n_par} parallel creates: {time.perf_counter() - t:.2f} s total, {errs} errors")
    destroy_all(c, sbs)


def bench_files(env, c):
    sb = c.call("sandbox.create", {})
    data = os.urandom(8 << 20)
    enc = b64(data)
    c.call("file.write", {"id": sb["id"], "path": "/root/warm", "content": "x"})
    w, r = [], []
    for _ in range(3):
        t = time.perf_counter()
        c.call("file.write", {"id": sb["id"], "path": "/root/big", "content_b64": enc})
        w.append(time.perf_counter() - t)
        t = time.perf_counter()
        got = c.call("file.read", {"id": sb["id"], "path": "/root/big"})
        r.append(time.perf_counter() - t)
        assert data_of(got, "content") == data
    mb = len(data) / 1e6
    print(f"files sandboxd 8 MiB: write {mb / min(w):.1f} MB/s, read {mb / min(r):.1f} MB/s (best of 3)")
    base = ssh_base(env, sb)
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "big")
        with open(src, "wb") as f:
            f.write(data)
        sw, sr = [], []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run(["sftp", "-q", "-b", "-"] + base + [f"root@{sb['ip']}"],
                           input=f"put {src} /root/big2\n".encode(), check=True, capture_output=True)
            sw.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run(["sftp", "-q", "-b", "-"] + base + [f"root@{sb['ip']}"],
                           input=f"get /root/big2 {src}.back\n".encode(), check=True, capture_output=True)
            sr.append(time.perf_counter() - t)
    print(f"files OpenSSH sftp 8 MiB (connection included): write {mb / min(sw):.1f} MB/s, "
          f"read {mb / min(sr):.1f} MB/s (best of 3)")
    c.call("sandbox.destroy", {"id": sb["id"]})


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def bench_rss(env, c, n, have):
    sbs = list(have)
    more, errs = create_many(c, n - len(sbs))
    sbs += more
    for s in sbs:
        c.call("sandbox.exec", {"id": s["id"], "command": "true"})
    kib = rss_kib(env.proc.pid)
    print(f"rss: {len(sbs)} live sandboxes (SSH sessions up): daemon RSS {kib / 1024:.1f} MiB "
          f"(goal < 64 MiB), {errs} create errors")
    return sbs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="exec,flight,create,files,rss")
    a = ap.parse_args()
    only = set(a.only.split(","))
    q = a.quick
    # Per-step create durations are debug lines: only a create-only run logs them (debug
    # logging would weigh on the other figures).
    with Env(sim_config=ZERO, log_level="debug" if only == {"create"} else "info",
             daemon_config={"sandbox": {"max_per_uid": "128", "max_total": "128", "create_timeout_s": "900"}}) as env:
        c = env.client(timeout=1800)
        t0 = time.time()
        if "exec" in only:
            bench_exec(env, c, 100 if q else 1000)
        if "create" in only:
            bench_create(env, c, 3 if q else 10, 4 if q else 16)
        if "files" in only:
            bench_files(env, c)
        live = []
        if "flight" in only:
            live = bench_flight(env, c, 5 if q else 50, 100 if q else 1000)
        if "rss" in only:
            live = bench_rss(env, c, 10 if q else 100, live)
        destroy_all(c, live)
        print(f"bench done in {time.time() - t0:.0f} s")
    if "exec" in only:
        # The baseline in the same run: exec channels only (the exec helper, the shell wrapper).
        print("baseline: [ssh] exec_supervisor = false")
        with Env(sim_config=ZERO, log_level="info",
                 daemon_config={"ssh": {"exec_supervisor": "false"}}) as env:
            bench_exec(env, env.client(timeout=1800), 100 if q else 1000, openssh=False)
    if "create" in only:
        rekey_baseline(3 if q else 10, lat_with=CREATE_LAT)


def rekey_baseline(n, lat_with):
    """The same sequential creates with [ssh] rekey = false (every sandbox keeps the
    template's host key): the baseline the per-sandbox host key is measured against."""
    with Env(sim_config=ZERO, log_level="debug",  # as the create-only run above
             daemon_config={"ssh": {"rekey": "false"},
                            "sandbox": {"max_per_uid": "128", "max_total": "128",
                                        "create_timeout_s": "900"}}) as env:
        c = env.client(timeout=1800)
        lat, sbs = [], []
        for _ in range(n):
            t = time.perf_counter()
            sbs.append(c.call("sandbox.create", {}))
            lat.append(time.perf_counter() - t)
        destroy_all(c, sbs)
    print(f"create -> ready with rekey = false (baseline, same settings): {ms(lat)}")
    if lat_with:
        print(f"create: rekey costs {1000 * (pct(lat_with, 50) - pct(lat, 50)):.0f} ms at p50 "
              f"(ratio {pct(lat_with, 50) / pct(lat, 50):.2f} against the baseline)")


if __name__ == "__main__":
    main()
