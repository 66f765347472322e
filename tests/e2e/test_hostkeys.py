#!/usr/bin/env python3
"""Per-sandbox SSH host keys: every clone starts with the template's host key, and the create
regenerates it before the sandbox is ready. Two sandboxes present different keys, neither
the template's; the key each presents is the one pinned in its registry record and its
marker; a container that presents the template's key (or another sandbox's) afterwards is
refused with -32005; the pin survives a restart and a lost state folder."""

import base64
import hashlib
import os
import shutil
import subprocess
import time

import e2elib
from e2elib import Env, RpcError
from test_recovery_util import (FAST_RECONCILE, description, kill9, launch, marker_fields, records,
                                run_tests, wait_reconciled)


def scan(ip):
    """The ed25519 public key (base64) the sshd at ip presents."""
    for _ in range(50):
        r = subprocess.run(["ssh-keyscan", "-T", "5", "-t", "ed25519", ip], capture_output=True, text=True,
                           timeout=30)
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "ssh-ed25519":
                return parts[2]
        time.sleep(0.1)
    raise AssertionError(f"no ed25519 host key from {ip}: {r.stderr}")


def pin_of(b64key):
    return "SHA256:" + base64.b64encode(hashlib.sha256(base64.b64decode(b64key)).digest()).decode().rstrip("=")


def hex_of(pin):
    return base64.b64decode(pin[len("SHA256:"):] + "=").hex()


def ct_key_path(env, vmid):
    return os.path.join(env.sim.state_dir, "ct", str(vmid), "rootfs", "etc", "ssh", "ssh_host_ed25519_key")


def main():
    with Env(daemon_config=FAST_RECONCILE) as env:
        tmpl = str(env.sim.info.get("template", 9000))
        tmpl_pub = env.sim.info["templates"][tmpl]["host_key_pub"].split()[1]
        c = env.client()
        sbs = [c.call("sandbox.create", {"ttl_s": 600}) for _ in range(2)]
        tests = []

        def different_keys():
            keys = [scan(sb["ip"]) for sb in sbs]
            assert keys[0] != keys[1], "two sandboxes present the same host key"
            for k in keys:
                assert k != tmpl_pub, "a sandbox still presents the template's host key"
            recs = records(env)
            for sb, k in zip(sbs, keys):
                assert recs[sb["id"]].get("host_key") == pin_of(k), (recs[sb["id"]], pin_of(k))
                m = marker_fields(description(env, sb["vmid"]))
                assert m.get("hostkey") == hex_of(pin_of(k)), m
                r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo ok"})
                assert r["stdout"] == "ok\n", r
            # No template key file is left inside the container.
            r = c.call("sandbox.exec", {"id": sbs[0]["id"], "command": "ls /etc/ssh"})
            assert r["stdout"].split() == ["ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"], r

        def refused(sb):
            try:
                r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo reached"})
            except RpcError as ex:
                assert ex.code == -32005, ex.err
                assert "host key" in (ex.err.get("message", "") + str(ex.data)), ex.err
                return
            raise AssertionError(f"a container presenting a foreign host key was used: {r}")

        def present(vmid, src_vmid):
            """Makes container vmid's sshd present the host key of container src_vmid."""
            for suffix in ("", ".pub"):
                shutil.copy2(ct_key_path(env, src_vmid) + suffix, ct_key_path(env, vmid) + suffix)
            env.sim.admin("POST", f"/ct/{vmid}/restart-sshd")

        def template_key_refused():
            present(sbs[0]["vmid"], int(tmpl))
            assert scan(sbs[0]["ip"]) == tmpl_pub
            refused(sbs[0])
            # the other sandbox is unaffected
            assert c.call("sandbox.exec", {"id": sbs[1]["id"], "command": "echo ok"})["stdout"] == "ok\n"

        def other_sandbox_key_refused():
            present(sbs[0]["vmid"], sbs[1]["vmid"])
            refused(sbs[0])

        def pin_survives_restart():
            assert env.stop_daemon() == 0
            launch(env)
            nonlocal c
            c = env.client()
            assert c.call("sandbox.exec", {"id": sbs[1]["id"], "command": "echo ok"})["stdout"] == "ok\n"
            refused(sbs[0])

        def pin_survives_lost_state():
            nonlocal c
            c.close()
            kill9(env)
            shutil.rmtree(os.path.join(env.dir, "state", "sandboxes"))
            os.unlink(os.path.join(env.dir, "state", "reconciled"))
            launch(env)
            wait_reconciled(env)
            c = env.client()
            recs = records(env)
            assert recs[sbs[1]["id"]].get("host_key") == pin_of(scan(sbs[1]["ip"])), recs
            assert c.call("sandbox.exec", {"id": sbs[1]["id"], "command": "echo ok"})["stdout"] == "ok\n"
            refused(sbs[0])

        tests += [("two sandboxes present different keys, pinned in registry and marker", different_keys),
                  ("the template's key after rekey is refused (-32005)", template_key_refused),
                  ("another sandbox's key is refused (-32005)", other_sandbox_key_refused),
                  ("the pin survives a restart", pin_survives_restart),
                  ("the pin survives a lost state folder (marker)", pin_survives_lost_state)]
        run_tests(env, tests)
        for sb in sbs:
            c.call("sandbox.destroy", {"id": sb["id"]})
        c.close()


if __name__ == "__main__":
    main()
