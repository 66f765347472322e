#!/usr/bin/env python3
"""clients/typescript against pve-sim + sandboxd: `npm ci` (skipped when node_modules matches
package-lock.json), `npm run build` (dist/index.js and its declarations), then `node --test` on
the compiled files of clients/typescript/test/ with SANDBOXD_SOCKET set (and the daemon closing
idle connections after 2 s, so that reconnects happen), and examples/quickstart.ts, leaving no
container behind. A failing install or build fails the test; so does a missing node or npm
(tools/bootstrap installs them)."""

import glob
import json
import os
import shutil
import subprocess
import sys

from clientlib import SRC, Env, enable_test_hooks, run

TS_DIR = os.path.join(SRC, "clients", "typescript")


def node_env(socket=None):
    e = dict(os.environ)
    if socket:
        e["SANDBOXD_SOCKET"] = socket
    # The sanitizer settings are for the C programs, not for node.
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        e.pop(k, None)
    e["npm_config_update_notifier"] = "false"
    e["npm_config_fund"] = "false"
    e["npm_config_audit"] = "false"
    return e


def sh(args, env, timeout=600):
    p = subprocess.run(args, cwd=TS_DIR, env=env, capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"{' '.join(args)} exited {p.returncode}:\n{out}"
    return out


def installed_current():
    """npm keeps node_modules/.package-lock.json in step with what it installed."""
    lock = os.path.join(TS_DIR, "package-lock.json")
    hidden = os.path.join(TS_DIR, "node_modules", ".package-lock.json")
    tsc = os.path.join(TS_DIR, "node_modules", "typescript", "bin", "tsc")
    return (os.path.exists(hidden) and os.path.exists(tsc)
            and os.path.getmtime(hidden) >= os.path.getmtime(lock))


def main():
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        print("FAIL node or npm is not installed (tools/bootstrap installs nodejs and npm)")
        sys.exit(1)
    e = node_env()
    enable_test_hooks()  # the daemon closes idle connections after 2 s (SANDBOXD_TEST_IDLE_MS)

    def build():
        with open(os.path.join(TS_DIR, "package.json")) as f:
            pkg = json.load(f)
        assert not pkg.get("dependencies"), "the package must have no runtime dependencies"
        print("  node " + sh([node, "--version"], e).strip())
        if installed_current():
            print("  node_modules is current: npm ci skipped")
        else:
            sh([npm, "ci", "--no-audit", "--no-fund"], e)
        for d in ("dist", "dist-test"):
            shutil.rmtree(os.path.join(TS_DIR, d), ignore_errors=True)
        sh([npm, "run", "build"], e)
        for f in ("index.js", "index.d.ts", "sandbox.d.ts"):
            assert os.path.exists(os.path.join(TS_DIR, "dist", f)), f"npm run build left no dist/{f}"
        sh([npm, "run", "build:test"], e)
        # The package loads as ESM and has no runtime dependencies.
        out = sh([node, "--input-type=module", "-e",
                  "import * as s from 'sandboxd'; console.log(typeof s.Client, "
                  "typeof s.NoSuchSandbox, new s.NoSuchSandbox('x', -32001) instanceof "
                  "s.SandboxdError)"], e)
        assert out.strip() == "function function true", out

    with Env(daemon_config={"proxmox": {"firewall_period_s": "1"},
                            "network": {"probe_address": None}}) as env:
        def node_test():
            files = sorted(glob.glob(os.path.join(TS_DIR, "dist-test", "test", "*.test.js")))
            assert files, "no compiled test files in dist-test/"
            p = subprocess.run([node, "--test", *files], cwd=TS_DIR, env=node_env(env.socket),
                               capture_output=True, text=True, timeout=500)
            out = p.stdout + p.stderr
            print("\n".join("  " + l for l in out.splitlines()
                            if l.startswith(("ok ", "not ok ", "# ")) or "Error" in l))
            assert p.returncode == 0, out
            assert "# fail 0" in out and "# skipped 0" in out and "# pass 0" not in out, out
            env.wait_no_containers(timeout=30)

        def example():
            p = subprocess.run([node, os.path.join("dist-test", "examples", "quickstart.js")],
                               cwd=TS_DIR, env=node_env(env.socket), capture_output=True,
                               text=True, timeout=120)
            print("\n".join("  | " + l for l in (p.stdout + p.stderr).splitlines()))
            assert p.returncode == 0, p.stdout + p.stderr
            assert "sandbox sb-" in p.stdout and "exit 3: Linux" in p.stdout, p.stdout
            assert "counting: 1 2 3" in p.stdout, p.stdout
            assert "read 14 bytes: <h1>Hello</h1>" in p.stdout, p.stdout
            env.wait_no_containers(timeout=30)  # `await using` destroyed it

        run([("npm ci and npm run build", build), ("node --test against sandboxd", node_test),
             ("examples/quickstart built and run", example)])


if __name__ == "__main__":
    main()
