#!/usr/bin/env python3
"""Checks a JSON document and writes it, compacted, as a C byte array.

Usage: embed-json.py INPUT.json OUTPUT.h SYMBOL"""
import json
import sys

src, dst, sym = sys.argv[1:4]
with open(src, encoding="utf-8") as f:
    doc = json.load(f)
data = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
lines = []
for i in range(0, len(data), 16):
    lines.append("    " + ", ".join("0x%02x" % b for b in data[i:i + 16]) + ",")
with open(dst, "w", encoding="utf-8") as f:
    f.write("/* Generated from %s by embed-json.py: do not edit. */\n" % src.rsplit("/", 1)[-1])
    f.write("static const char %s[] = {\n%s\n    0x00};\n" % (sym, "\n".join(lines)))
    f.write("#define %s_LEN %du\n" % (sym.upper(), len(data)))
