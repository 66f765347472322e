#!/usr/bin/env python3
"""docs/protocol.md agrees with the OpenRPC document rpc.discover returns
(proto/sandboxd.openrpc.json): every method has a section, every parameter of a
method is named in its section, every error code a method can return is named
in its section, every error code and reserved method name is documented, and
the document names no method the daemon does not have."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdtest as t  # noqa: E402


def sections(text):
    """method name -> text of its '### name' section."""
    out = {}
    parts = re.split(r"(?m)^### (\S+)\s*$", text)
    for i in range(1, len(parts), 2):
        body = re.split(r"(?m)^## ", parts[i + 1])[0]
        out[parts[i]] = body
    return out


def main():
    doc = json.load(open(os.path.join(t.SOURCE_ROOT, "proto", "sandboxd.openrpc.json")))
    text = open(os.path.join(t.SOURCE_ROOT, "docs", "protocol.md")).read()
    secs = sections(text)
    errors = doc.get("components", {}).get("errors", {})

    methods = [m["name"] for m in doc["methods"]]
    t.check(len(methods) >= 2, "the OpenRPC document lists no methods")
    for m in doc["methods"]:
        name = m["name"]
        if not t.check(name in secs, f"protocol.md has no '### {name}' section"):
            continue
        body = secs[name]
        for p in m.get("params", []):
            t.check(f"`{p['name']}`" in body, f"{name}: parameter `{p['name']}` is not documented")
        for e in m.get("errors", []):
            ref = e.get("$ref", "")
            err = errors.get(ref.rsplit("/", 1)[-1], e)
            code = err.get("code")
            if code is not None:
                t.check(f"`{code}`" in body, f"{name}: error {code} is not documented in its section")
    for name in secs:
        t.check(name in methods, f"protocol.md documents '{name}', which rpc.discover does not list")

    for e in errors.values():
        t.check(re.search(rf"(?m)^\| {e['code']} \| ", text),
                f"error {e['code']} ({e.get('message')}) has no row in protocol.md")
    for name in doc.get("x-reserved-methods", []):
        t.check(f"`{name}`" in text, f"reserved method `{name}` is not documented")
    t.finish()


if __name__ == "__main__":
    main()
