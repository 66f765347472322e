#!/usr/bin/env python3
"""clients/typescript against pve-sim + sandboxd. The package is copied into the build folder
(build/clients-typescript, so that the source tree gets no node_modules or dist written by
root), then: `npm ci` (skipped when node_modules was installed from the same package-lock.json),
`npm run build` (dist/index.js and its declarations), `node --test` on the compiled files of
test/ with SANDBOXD_SOCKET set (and the daemon closing idle connections after 2 s, so that
reconnects happen), and examples/quickstart.ts; no container is left behind. A failing install
or build fails the test; so does a missing node or npm (tools/bootstrap installs them)."""

import filecmp
import glob
import json
import os
import shutil
import subprocess
import sys

import clientlib
from clientlib import BUILD, SRC, Env, enable_test_hooks, run, tool_env

TS_SRC = os.path.join(SRC, "clients", "typescript")
TS_DIR = os.path.join(BUILD, "clients-typescript")
INSTALLED_LOCK = os.path.join(TS_DIR, "node_modules", ".sandboxd-installed-lock.json")


def node_env(socket=None):
    e = tool_env({"npm_config_update_notifier": "false", "npm_config_fund": "false",
                  "npm_config_audit": "false"})
    if socket:
        e["SANDBOXD_SOCKET"] = socket
    return e


def sh(args, env, timeout=600):
    return clientlib.sh(args, TS_DIR, env, timeout)


def copy_package():
    """The package's sources into TS_DIR; node_modules there is kept between runs."""
    os.makedirs(TS_DIR, exist_ok=True)
    for d in ("src", "test", "examples", "dist", "dist-test"):
        shutil.rmtree(os.path.join(TS_DIR, d), ignore_errors=True)
    for d in ("src", "test", "examples"):
        shutil.copytree(os.path.join(TS_SRC, d), os.path.join(TS_DIR, d))
    for f in ("package.json", "package-lock.json", "tsconfig.json", "tsconfig.test.json"):
        shutil.copy2(os.path.join(TS_SRC, f), os.path.join(TS_DIR, f))


def installed_current():
    lock = os.path.join(TS_DIR, "package-lock.json")
    tsc = os.path.join(TS_DIR, "node_modules", "typescript", "bin", "tsc")
    return (os.path.exists(INSTALLED_LOCK) and os.path.exists(tsc)
            and filecmp.cmp(INSTALLED_LOCK, lock, shallow=False))


def main():
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        print("FAIL node or npm is not installed (tools/bootstrap installs nodejs and npm)")
        sys.exit(1)
    e = node_env()
    enable_test_hooks()  # the daemon closes idle connections after 2 s (SANDBOXD_TEST_IDLE_MS)

    def build():
        with open(os.path.join(TS_SRC, "package.json")) as f:
            pkg = json.load(f)
        assert not pkg.get("dependencies"), "the package must have no runtime dependencies"
        print("  node " + subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip())
        copy_package()
        if installed_current():
            print("  node_modules is current: npm ci skipped")
        else:
            sh([npm, "ci", "--no-audit", "--no-fund"], e)
            shutil.copy2(os.path.join(TS_DIR, "package-lock.json"), INSTALLED_LOCK)
        sh([npm, "run", "build"], e)
        for f in ("index.js", "index.d.ts", "sandbox.d.ts"):
            assert os.path.exists(os.path.join(TS_DIR, "dist", f)), f"npm run build left no dist/{f}"
        sh([npm, "run", "build:test"], e)
        # The package loads as ESM, by its name.
        out = sh([node, "--input-type=module", "-e",
                  "import * as s from 'sandboxd'; console.log(typeof s.Client, "
                  "typeof s.NoSuchSandbox, new s.NoSuchSandbox('x', -32001) instanceof "
                  "s.SandboxdError)"], e)
        assert out.strip() == "function function true", out

    port = clientlib.free_port()
    with Env(daemon_config={"proxmox": {"firewall_period_s": "1"},
                            "network": {"probe_address": None},
                            "preview": {"listen": f"127.0.0.1:{port}",
                                        "base_url": f"http://{{port}}-{{id}}.preview.test:{port}"}
                            }) as env:
        def node_test():
            files = sorted(glob.glob(os.path.join(TS_DIR, "dist-test", "test", "*.test.js")))
            assert files, "no compiled test files in dist-test/test/"
            p = subprocess.run([node, "--test", *files], cwd=TS_DIR, env=node_env(env.socket),
                               capture_output=True, text=True, timeout=500)
            out = p.stdout + p.stderr
            print("\n".join("  " + l for l in out.splitlines()
                            if l.startswith(("ok ", "not ok ", "# ")) or "Error" in l))
            assert p.returncode == 0, out
            assert "# fail 0" in out and "# skipped 0" in out and "# pass 0" not in out, out
            # the volume holder the volumes test made stays: removed, so nothing is left
            for vm in list(env.containers()):
                if env.sim.ok("GET", f"/nodes/pve/lxc/{vm}/config").get("hostname") == "sandboxd-volumes":
                    env.sim.wait_task(env.sim.ok("DELETE", f"/nodes/pve/lxc/{vm}"))
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
