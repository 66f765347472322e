#!/usr/bin/env python3
"""sandbox.set_internet under pipelining: changes of one sandbox run one at a time in order,
so every pipelined call succeeds and the last one sent is the rule left in place; a destroy
sent behind queued changes ends them cleanly."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

from e2elib import Env, RpcError, run  # noqa: E402


def codes_of(client, ids):
    """0 for each reply that succeeded, else its error code."""
    codes = []
    for i in ids:
        try:
            client.wait(i, timeout=120)
            codes.append(0)
        except RpcError as e:
            codes.append(e.code)
    return codes


def group_rules(env, vmid):
    rules = env.sim.ok("GET", f"/nodes/pve/lxc/{vmid}/firewall/rules")
    return [x for x in rules if x.get("type") == "group"]


def main():
    with Env() as env:
        c = env.client()
        sb = c.call("sandbox.create", {"ttl_s": 600})

        def pipelined_50():
            # Sent back to back on one connection: the connection's in-flight cap (32)
            # holds the rest back, so the sandbox's queue sees up to 32 at a time.
            ids = [c.send("sandbox.set_internet", {"id": sb["id"], "enabled": i % 2 == 0})
                   for i in range(50)]
            codes = codes_of(c, ids)
            assert codes == [0] * 50, codes
            # The 50th call (i = 49) asked for "off".
            got = c.call("sandbox.get", {"id": sb["id"]})
            assert got["internet"] is False, got
            assert group_rules(env, sb["vmid"]) == [], group_rules(env, sb["vmid"])

        def three_connections():
            conns = [env.client() for _ in range(3)]
            sent = []
            for k in range(20):
                for j, cc in enumerate(conns):
                    sent.append((cc, cc.send("sandbox.set_internet",
                                             {"id": sb["id"], "enabled": (k + j) % 2 == 1})))
            last = c.call("sandbox.set_internet", {"id": sb["id"], "enabled": True})
            bad = []
            for cc, i in sent:
                try:
                    cc.wait(i, timeout=120)
                except RpcError as e:
                    if e.code != -32007:  # the documented queue cap
                        bad.append(e.err)
            assert not bad, bad
            assert last["internet"] is True, last
            assert c.call("sandbox.get", {"id": sb["id"]})["internet"] is True
            assert len(group_rules(env, sb["vmid"])) == 1, group_rules(env, sb["vmid"])
            for cc in conns:
                cc.close()

        def destroy_behind_queue():
            sb2 = c.call("sandbox.create", {"ttl_s": 600})
            ids = [c.send("sandbox.set_internet", {"id": sb2["id"], "enabled": i % 2 == 0})
                   for i in range(10)]
            d = c.send("sandbox.destroy", {"id": sb2["id"]})
            codes = codes_of(c, ids)
            assert all(x in (0, -32002) for x in codes), codes
            assert c.wait(d, timeout=120)["state"] == "destroyed"
            e = c.error("sandbox.set_internet", {"id": sb2["id"], "enabled": True})
            assert e.code in (-32001, -32002), e.err
            assert c.call("daemon.status")["sandboxes"] is not None

        run([("50 pipelined changes", pipelined_50), ("three connections", three_connections),
             ("destroy behind queued changes", destroy_behind_queue)])


if __name__ == "__main__":
    main()
