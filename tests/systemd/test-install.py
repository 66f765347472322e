#!/usr/bin/env python3
"""`meson install --destdir` into a temporary folder installs every file a
host needs: sandboxd, sandboxctl, the example configuration (never over an
existing one), the OpenRPC document, the units, the sysusers.d and tmpfiles.d
snippets, the man pages and the C client library (header, static and shared library,
pkg-config file); the installed units point at the installed files."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdtest as t  # noqa: E402


def install(destdir):
    meson = t.need_program("meson")
    env = dict(os.environ)
    env.pop("DESTDIR", None)
    return t.run([meson, "install", "-C", t.need_build_root(), "--destdir", destdir,
                  "--no-rebuild", "--quiet"], check_rc=0, env=env, timeout=300)


def main():
    paths = t.install_paths()
    example = open(os.path.join(t.SOURCE_ROOT, "docs", "sandboxd.conf.example")).read()
    with t.tempdir("sandboxd-install-") as dest:
        install(dest)

        def at(key):
            return dest + paths[key]

        for key in ("sandboxd", "sandboxctl", "config", "openrpc", "service", "socket",
                    "sysusers", "tmpfiles", "man-sandboxd", "man-sandboxctl", "man-conf",
                    "client-header", "client-shared", "client-static", "client-pc"):
            t.check(os.path.isfile(at(key)), f"{key} is not installed at {paths[key]}")
        for key in ("sandboxd", "sandboxctl"):
            if os.path.isfile(at(key)):
                t.check(os.access(at(key), os.X_OK), f"{paths[key]} is not executable")
        if os.path.isfile(at("config")):
            t.check(open(at("config")).read() == example,
                    "the installed configuration is the example")
        if os.path.isfile(at("openrpc")):
            try:
                doc = json.load(open(at("openrpc")))
                t.check("openrpc" in doc and "methods" in doc,
                        "the installed OpenRPC document has 'openrpc' and 'methods'")
            except ValueError as e:
                t.check(False, f"the installed OpenRPC document is not JSON: {e}")

        if os.path.isfile(at("service")):
            svc = open(at("service")).read()
            t.check(not re.search(r"@[a-z_]+@", svc), "no @variable@ left in the installed unit")
            m = re.search(r"(?m)^ExecStart=(\S+)(.*)$", svc)
            t.check(m and m.group(1) == paths["sandboxd"],
                    f"ExecStart= runs the installed {paths['sandboxd']}")
            t.check(m and f"--config {paths['config']}" in m.group(2),
                    f"ExecStart= reads the installed configuration {paths['config']}")
            creds = dict(re.findall(r"(?m)^LoadCredential=([^:]+):(\S+)$", svc))
            sysconf = os.path.join(paths["sysconfdir"], "sandboxd")
            t.check(creds == {"pve-token": os.path.join(sysconf, "pve-token"),
                              "ssh-key": os.path.join(sysconf, "id_ed25519")},
                    f"LoadCredential= names pve-token and ssh-key in {sysconf}: {creds}")
        if os.path.isfile(at("tmpfiles")):
            tf = open(at("tmpfiles")).read()
            t.check(os.path.join(paths["sysconfdir"], "sandboxd") in tf,
                    "the tmpfiles snippet names the installed configuration folder")

        # A second install keeps a configuration the administrator changed.
        if os.path.isfile(at("config")):
            mine = "# edited by the administrator\n[server]\nmax_connections = 7\n"
            with open(at("config"), "w") as f:
                f.write(mine)
            install(dest)
            t.check(open(at("config")).read() == mine,
                    "meson install overwrote an existing sandboxd.conf")
            # ... and a dangling symlink in its place is left alone too.
            os.unlink(at("config"))
            os.symlink("/nonexistent/sandboxd.conf", at("config"))
            install(dest)
            t.check(os.path.islink(at("config")), "meson install replaced a symlinked sandboxd.conf")

        # List files installed elsewhere (informational: new installed files
        # belong in this test's list once they are part of what a host needs).
        roots = {os.path.dirname(p) for k, p in paths.items() if k != "sysconfdir"}
        o = t.build_options()
        docdir = os.path.normpath(os.path.join(o["prefix"], o["datadir"], "doc", "sandboxd"))
        roots.add(docdir)
        for dirpath, _, files in os.walk(dest):
            for name in files:
                rel = os.path.join(dirpath, name)[len(dest):]
                if os.path.dirname(rel) not in roots:
                    print(f"note: also installed: {rel}")
    t.finish()


if __name__ == "__main__":
    main()
