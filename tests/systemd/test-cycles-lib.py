#!/usr/bin/env python3
"""No include or call cycle between the files of lib/ (tools/cycles lib), except the one
between lib/config.c and lib/config-templates.c, which is tolerated until it is gone (the
test passes with it and without it). Any other cycle fails, with tools/cycles' report."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOLERATED = {"lib/config.c", "lib/config-templates.c"}


def components(report):
    """The files of each cycle tools/cycles printed (a knot of more than two files lists
    all of them on its 'the same knot holds' line)."""
    out = []
    for line in report.splitlines():
        s = line.strip()
        for head in ("call cycle: ", "include cycle: "):
            if s.startswith(head):
                out.append((s, set(s[len(head):].split(" -> "))))
        if s.startswith("the same knot holds ") and out:
            out[-1] = (out[-1][0], set(s.split(": ", 1)[1].split(", ")))
    return out


def main():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "cycles"), "lib"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode not in (0, 1) or p.stderr:
        sys.stdout.write(p.stdout + p.stderr)
        print(f"FAIL: tools/cycles lib exited {p.returncode}")
        return 1
    found = components(p.stdout)
    if p.returncode == 0:
        if found or "no cycles" not in p.stdout:
            sys.stdout.write(p.stdout)
            print("FAIL: tools/cycles lib exited 0 but its report is not 'no cycles'")
            return 1
        print("ok   lib/: no cycles")
        return 0
    if not found:
        sys.stdout.write(p.stdout)
        print("FAIL: tools/cycles lib found a cycle this test cannot read")
        return 1
    bad = [line for line, files in found if not files <= TOLERATED]
    if bad:
        sys.stdout.write(p.stdout)
        print("FAIL: cycles in lib/ besides lib/config.c <-> lib/config-templates.c:")
        for line in bad:
            print("  " + line)
        return 1
    print("ok   lib/: no cycles but lib/config.c <-> lib/config-templates.c (tolerated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
