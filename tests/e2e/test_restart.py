#!/usr/bin/env python3
"""Right after a restart, while the first reconcile is still rebuilding the table of
sandboxes, a live sandbox is never reported missing: requests naming it, and lists, wait for
that reconcile instead of answering -32001 (Proxmox is made slow so the window is wide)."""

import threading
import time

from e2elib import Env, RpcError, b64, run
from test_recovery_util import launch


def main():
    with Env() as env:
        c = env.client()
        sb = c.call("sandbox.create", {"ttl_s": 600})
        c.call("file.write", {"id": sb["id"], "path": "/root/kept", "content_b64": b64(b"kept")})
        c.close()

        def restart_slow():
            assert env.stop_daemon() == 0
            # Same state folder and socket; every Proxmox GET answers 1.5 s late for a while: the first reconcile lasts
            # seconds after the daemon accepts connections.
            env.sim.admin("POST", "/faults", {"method": "GET", "path": "*", "latency": 1.5,
                                             "count": 6})
            launch(env)
            return env.client()

        def lookups_wait_for_first_reconcile():
            c2 = restart_slow()
            st = c2.call("daemon.status")
            assert st["reconcile"]["runs"] == 0, st["reconcile"]  # inside the window
            calls = {
                "get": ("sandbox.get", {"id": sb["id"]}),
                "list": ("sandbox.list", {}),
                "exec": ("sandbox.exec", {"id": sb["id"], "command": "cat /root/kept"}),
                "read": ("file.read", {"id": sb["id"], "path": "/root/kept"}),
                "renew": ("sandbox.renew", {"id": sb["id"], "ttl_s": 600}),
                "missing": ("sandbox.get", {"id": "sb-000000000000"}),
            }
            out = {}

            def one(name, method, params):
                try:
                    out[name] = c2.call(method, params, timeout=120)
                except RpcError as e:
                    out[name] = e

            threads = [threading.Thread(target=one, args=(n, m, p)) for n, (m, p) in calls.items()]
            t0 = time.time()
            for t in threads:
                t.start()
            for t in threads:
                t.join(150)
            waited = time.time() - t0
            for n in ("get", "list", "exec", "read", "renew"):
                assert not isinstance(out.get(n), RpcError), (n, out.get(n) and out[n].err)
            assert out["get"]["state"] == "ready", out["get"]
            assert sb["id"] in [x["id"] for x in out["list"]["sandboxes"]], out["list"]
            assert out["exec"]["stdout"] == "kept", out["exec"]
            assert isinstance(out["missing"], RpcError) and out["missing"].code == -32001, out
            assert c2.call("daemon.status")["reconcile"]["runs"] >= 1
            print(f"    answered after the first reconcile, {waited:.1f} s after the restart")
            env.sim.admin("DELETE", "/faults")
            c2.call("sandbox.destroy", {"id": sb["id"]})
            c2.close()

        run([("lookups wait for the first reconcile", lookups_wait_for_first_reconcile)])


if __name__ == "__main__":
    main()
