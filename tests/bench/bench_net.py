#!/usr/bin/env python3
"""Benchmark of the network limits against pve-sim (root), one run, figures on stdout, from
inside one Debian sandbox:

  fail fast   with internet off, N name lookups (python getaddrinfo, glibc's resolver) and
              N TCP connects to the simulated internet, each refused by the sandbox's
              firewall (policy_out REJECT): p50/p99/max in milliseconds
  caps        for each bandwidth cap (net_rate_mbps, set live with sandbox.resize), a
              download from and an upload to the simulated internet sized to take about
              SECONDS at the cap: the measured Mbit/s and its ratio to the cap (0: uncapped)

A cap counts whole frames and allows a 1 MiB burst, so the payload rate sits a few percent
under the cap for long transfers and above it for short ones.

Usage: SANDBOXD_BUILD_ROOT=BUILD tests/bench/bench_net.py [--lookups N] [--caps 8,32,128,0]
                                                          [--seconds S]
   or: meson test -C BUILD --benchmark --suite net-bench --verbose"""

import argparse
import functools
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from e2elib import Env, simlib  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001

LATENCY = r"""
import json, socket, sys, time
inet, n = sys.argv[1], int(sys.argv[2])
def ms(fn):
    t0 = time.monotonic()
    try:
        fn()
    except OSError:
        pass
    return (time.monotonic() - t0) * 1000
def pct(xs):
    xs = sorted(xs)
    return [round(xs[len(xs) // 2], 2), round(xs[min(len(xs) - 1, len(xs) * 99 // 100)], 2), round(xs[-1], 2)]
out = {"lookup": pct([ms(lambda: socket.getaddrinfo("example.org", 80)) for _ in range(n)]),
       "connect": pct([ms(lambda: socket.create_connection((inet, 80), timeout=5).close()) for _ in range(n)])}
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--caps", default="8,32,128,512,0")
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    r = subprocess.run([sys.executable, simlib.SIM, "--build-template-image"], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    with Env(sim_config={"template_os": "debian", "firewall_period": 0}) as env:
        c = env.client()
        inet = env.sim.info["internet_ip"]
        sb = c.call("sandbox.create", {})

        def exec_(cmd, timeout_ms=120000):
            r = c.call("sandbox.exec", {"id": sb["id"], "command": cmd, "timeout_ms": timeout_ms})
            assert r["exit_code"] == 0, r
            return r["stdout"]

        m = json.loads(c.call("sandbox.exec", {"id": sb["id"], "timeout_ms": 120000,
                                               "argv": ["python3", "-c", LATENCY, inet, str(a.lookups)]})["stdout"])
        print(f"internet off, {a.lookups} each (ms p50 / p99 / max):")
        print(f"  lookup refused   {m['lookup'][0]:>8} {m['lookup'][1]:>8} {m['lookup'][2]:>8}")
        print(f"  connect refused  {m['connect'][0]:>8} {m['connect'][1]:>8} {m['connect'][2]:>8}")
        c.call("sandbox.set_internet", {"id": sb["id"], "enabled": True, "wait": True})
        print(f"{'cap Mbit/s':>10} {'MiB':>6} {'down Mbit/s':>12} {'ratio':>6} {'up Mbit/s':>10} {'ratio':>6}")
        for cap in [int(x) for x in a.caps.split(",")]:
            c.call("sandbox.resize", {"id": sb["id"], "net_rate_mbps": cap})
            mib = max(4, int(cap * a.seconds / 8.388608)) if cap else 128
            down = exec_(f"curl -sS -o /dev/null -w '%{{size_download}} %{{time_total}}' "
                         f"http://{inet}/bytes/{mib << 20}").split()
            up = exec_(f"head -c {mib << 20} /dev/zero > /tmp/up && curl -sS -o /dev/null -T /tmp/up "
                       f"-w '%{{size_upload}} %{{time_total}}' http://{inet}/sink; rm -f /tmp/up").split()
            d = int(down[0]) * 8 / float(down[1]) / 1e6
            u = int(up[0]) * 8 / float(up[1]) / 1e6
            ratio = (lambda x: f"{x / cap:.2f}" if cap else "-")
            print(f"{cap or 'none':>10} {mib:>6} {d:>12.1f} {ratio(d):>6} {u:>10.1f} {ratio(u):>6}")
        c.call("sandbox.destroy", {"id": sb["id"]})


if __name__ == "__main__":
    main()
