#!/usr/bin/env python3
"""The daemon reaches the transport and the Proxmox client only through the engine.

No file of daemon/ includes a header of lib/ssh/ or lib/pve/, neither directly nor
through a header of the layers it may see (lib/base, proto, lib/config, lib/state,
lib/engine). The build enforces the direct case (the daemon's include directories
leave those folders out, daemon/meson.build); this is the second guard, and it also
catches an engine header that starts including the transport. Header names are
unique across the tree, so an include is resolved by its name. Reads files only.

  test_layers.py [SOURCE_ROOT]
"""

import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FORBIDDEN_DIRS = ["lib/ssh", "lib/pve"]
VISIBLE_DIRS = ["lib/base", "proto", "lib/config", "lib/state", "lib/engine", "daemon"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def headers_of(rel):
    d = os.path.join(ROOT, rel)
    return {f: os.path.join(rel, f) for f in sorted(os.listdir(d)) if f.endswith(".h")}


def includes(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        return [os.path.basename(n) for n in INCLUDE.findall(f.read())]


def main():
    forbidden = {}
    for d in FORBIDDEN_DIRS:
        forbidden.update(headers_of(d))
    visible = {}
    for d in VISIBLE_DIRS:
        visible.update(headers_of(d))
    daemon = sorted(os.path.join("daemon", f) for f in os.listdir(os.path.join(ROOT, "daemon"))
                    if f.endswith((".c", ".h")))
    problems = []
    for src in daemon:
        # Breadth-first through the headers src reaches, remembering the path to each.
        seen = {src: [src]}
        queue = [src]
        while queue:
            cur = queue.pop(0)
            for name in includes(cur):
                if name in forbidden:
                    problems.append(" -> ".join(seen[cur] + [forbidden[name]]))
                    continue
                nxt = visible.get(name)
                if nxt and nxt not in seen:
                    seen[nxt] = seen[cur] + [nxt]
                    queue.append(nxt)
    for p in problems:
        print(f"daemon/ reaches a transport or Proxmox header: {p}")
    if not daemon:
        print("no files found under daemon/")
        return 1
    print(f"{len(daemon)} files of daemon/ checked: "
          f"{'ok' if not problems else str(len(problems)) + ' problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
