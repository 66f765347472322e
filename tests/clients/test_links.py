#!/usr/bin/env python3
"""What sandboxctl and libsandboxd-client link: json-c (and libcrypto through proto/), never
libssh, libcurl or libuv (ldd); and the shared library exports its API (sandboxd_*) alone."""

import os
import subprocess
import sys

BUILD = os.environ.get("SANDBOXD_BUILD_ROOT", "build")
FORBIDDEN = ("libssh", "libcurl", "libuv")


def main():
    failed = []
    for rel in (("clients", "cli", "sandboxctl"), ("clients", "c", "libsandboxd-client.so")):
        path = os.path.join(BUILD, *rel)
        out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
        libs = [l.split()[0] for l in out.splitlines() if l.strip()]
        bad = [l for l in libs if l.startswith(FORBIDDEN)]
        print(f"{os.path.join(*rel)}: {' '.join(libs)}")
        if bad:
            failed.append(f"{os.path.join(*rel)} links {bad}")
        if "libjson-c" not in out:
            failed.append(f"{os.path.join(*rel)} does not link json-c")
    so = os.path.join(BUILD, "clients", "c", "libsandboxd-client.so")
    out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True,
                         check=True).stdout
    names = [l.split()[-1].split("@")[0] for l in out.splitlines() if l.split()[1:2] != ["A"]]
    other = [n for n in names if not n.startswith("sandboxd_")]
    if other:
        failed.append(f"libsandboxd-client.so exports more than sandboxd_*: {other[:10]}")
    if "sandboxd_call" not in names:
        failed.append("libsandboxd-client.so does not export sandboxd_call")
    for f in failed:
        print("FAIL " + f)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
