#!/usr/bin/env python3
"""docs/ARCHITECTURE.md names what exists: every source path it names (`lib/pve/pve.c`,
`daemon/`), every bare source file name in its folder table (`op-step.c`) and every
function it names (`op_step_done()`) is in the tree, and every layer folder of the
build (a meson.build under lib/) appears in it. So the map cannot keep a file that moved
or a function that was renamed."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdtest as t  # noqa: E402

CODE_DIRS = ("proto", "lib", "daemon", "clients")


def main():
    root = t.SOURCE_ROOT
    text = open(os.path.join(root, "docs", "ARCHITECTURE.md")).read()
    files, sources = set(), ""
    for d in CODE_DIRS:
        for base, _, names in os.walk(os.path.join(root, d)):
            for n in names:
                files.add(n)
                if n.endswith((".c", ".h")):
                    with open(os.path.join(base, n), encoding="utf-8", errors="replace") as f:
                        sources += f.read()
    for tok in re.findall(r"`([^`\s]+)`", text):
        tok = tok.rstrip(",.")
        if "/" in tok and not tok.startswith(("/", "-")) and "*" not in tok:
            path = tok.split(":")[0]
            t.check(os.path.exists(os.path.join(root, path)), f"names `{tok}`, which does not exist")
        elif re.fullmatch(r"[\w.-]+\.[ch]", tok):
            t.check(tok in files, f"names `{tok}`, which no folder holds")
        elif re.fullmatch(r"\w+\(\)", tok):
            name = tok[:-2]
            t.check(re.search(rf"\b{name}\b", sources), f"names `{tok}`, which the code does not define")
    for base, _, names in os.walk(os.path.join(root, "lib")):
        if "meson.build" in names and base != os.path.join(root, "lib"):
            rel = os.path.relpath(base, root) + "/"
            t.check(f"`{rel}`" in text, f"the layer `{rel}` is not in the map")
    t.finish()


if __name__ == "__main__":
    main()
