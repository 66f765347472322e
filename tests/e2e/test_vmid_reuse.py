#!/usr/bin/env python3
"""A destroyed sandbox's vmid is not given to a new sandbox for two of Proxmox's firewall
cycles ([proxmox] firewall_period_s): pve-firewall keeps compiling a vmid's rules and its
ipfilter set from what it read last until a cycle runs without the old container, so a new
container under the same vmid could start under the old one's rules (its internet rule, its
address in ipfilter). The vmid range here holds one id, so the hold is seen deterministically:
a create right after a destroy finds no free id and is refused (-32007), and once the hold has passed
the same id is given again."""

import time

from e2elib import Env, run

PERIOD = 2  # seconds: the simulator's cycle and the daemon's firewall_period_s


def main():
    cfg = {"proxmox": {"vmid_range": "1000-1000", "firewall_period_s": str(PERIOD)}}
    with Env(sim_config={"firewall_period": PERIOD}, daemon_config=cfg) as env:
        c = env.client()

        def held_then_reused():
            a = c.call("sandbox.create", {})
            assert a["vmid"] == 1000, a
            c.call("sandbox.destroy", {"id": a["id"]})
            gone = time.monotonic()
            e = c.error("sandbox.create", {})
            assert e.code == -32007 and "vmid_range" in e.data.get("reason", ""), e.err
            assert time.monotonic() - gone < 2 * PERIOD, "the refusal came after the hold ended"
            assert 1000 not in env.containers(), env.containers()
            deadline = gone + 2 * PERIOD + 30
            while True:
                try:
                    b = c.call("sandbox.create", {})
                    break
                except Exception:
                    assert time.monotonic() < deadline, "the vmid stayed held"
                    time.sleep(0.5)
            assert time.monotonic() - gone >= 2 * PERIOD, "the vmid was given again within the hold"
            assert b["vmid"] == 1000, b
            out = c.call("sandbox.exec", {"id": b["id"], "command": "echo ok"})
            assert out["stdout"] == "ok\n", out
            c.call("sandbox.destroy", {"id": b["id"]})
            print(f"  refused at once: {e}", flush=True)

        run([("a destroyed sandbox's vmid is held for two firewall cycles", held_then_reused)])


if __name__ == "__main__":
    main()
