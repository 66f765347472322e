#!/usr/bin/env python3
"""docs/protocol.md agrees with the OpenRPC document rpc.discover returns
(proto/sandboxd.openrpc.json): every method has a section, every parameter of a
method is named in its section, every error code a method can return is named
in its section, every error code and reserved method name is documented, and
the document names no method the daemon does not have; and every limit of
proto/api-limits.h that names a row of the Limits table (doc: "ROW") has that
row, showing the limit's value."""
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


def limit_values():
    """(name, value, row) for each #define of proto/api-limits.h whose comment (on its
    line or the comment just above) names a Limits row."""
    src = open(os.path.join(t.SOURCE_ROOT, "proto", "api-limits.h")).read()
    exprs, out = {}, []
    comment = ""
    for line in src.splitlines():
        m = re.match(r"#define (\w+) (.+?)(?:\s*/\*(.*)\*/)?\s*$", line)
        if m:
            name, expr, tail = m.group(1), m.group(2), m.group(3) or ""
            exprs[name] = expr
            row = re.search(r'doc: "(.+?)"', tail + " " + comment)
            if row:
                out.append((name, row.group(1)))
            comment = ""
        elif line.startswith("/*"):
            comment = line
        elif comment and line.startswith(" *"):
            comment += " " + line
        else:
            comment = ""

    def value(name):
        e = exprs[name]
        e = re.sub(r"INT64_C\((\w+)\)|UINT64_C\((\w+)\)", lambda m: m.group(1) or m.group(2), e)
        e = re.sub(r"\((?:unsigned|uint64_t|int64_t)\)", "", e)
        e = re.sub(r"\b(\d+)u\b", r"\1", e)
        e = re.sub(r"\b[A-Z_][A-Z0-9_]+\b", lambda m: str(value(m.group(0))), e)
        return int(eval(e.replace("/", "//"), {}))

    return [(name, value(name), row) for name, row in out]


def check_limits(text):
    table = text.split("\n## Limits\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 2:
            rows[cells[0]] = "|".join(cells[1:])
    limits = limit_values()
    t.check(len(limits) >= 30, f"only {len(limits)} limits name a row of the Limits table")
    for name, v, row in limits:
        if not t.check(row in rows, f"{name}: the Limits table has no row '{row}'"):
            continue
        shown = [str(v), f"{{0,{v - 1}}}"]  # the number, or a pattern's repeat count
        for unit, size in (("KiB", 1024), ("MiB", 1024 * 1024)):
            if v % size == 0:
                shown.append(f"{v // size} {unit}")
        t.check(any(re.search(rf"(?<![\d,]){re.escape(x)}(?![\d])", rows[row]) for x in shown),
                f"{name} = {v}: row '{row}' does not show it ({rows[row]})")


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
    check_limits(text)
    t.finish()


if __name__ == "__main__":
    main()
