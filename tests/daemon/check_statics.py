#!/usr/bin/env python3
"""Fails when a daemon/*.c file keeps mutable module state outside struct daemon.

  check_statics.py DAEMON_DIR

Flags every variable defined at file scope (static or not) and every static
variable inside a function, unless the object itself is const (`static const int
x`, `static const char *const names[]`) or it is a signal flag (`static volatile
sig_atomic_t`). Declarations (`extern`), types, typedefs and functions are not
variables. The CLI and MCP sources (sandboxctl*) are other programs and are left
out, as are the files of ALLOWED below with the reason there.

Prints each offender as FILE:LINE: TEXT and exits 1 when there is one. Runs a
few cases through the same classifier first, so that a checker that stopped
seeing variables fails too. Standard library only.
"""

import os
import re
import sys

# Files whose state is still module-wide, and why.
ALLOWED = {
    # The descriptor pumps and transfer slots are to move into the engine, which
    # takes over their SSH sessions; until then they are one set per process.
    "methods-process-fd.c",
    "methods-transfer.c",
}


def strip(text):
    """Text without comments, string/char literals (kept as empty quotes) and
    preprocessor lines, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            out.append(q + q)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    lines = "".join(out).split("\n")
    kept, cont = [], False
    for line in lines:
        if cont or line.lstrip().startswith("#"):
            cont = line.endswith("\\")
            kept.append("")
        else:
            kept.append(line)
    return "\n".join(kept)


def flatten(decl):
    """The declaration with the contents of its braces and brackets removed."""
    out, depth = [], 0
    for c in decl:
        if c in "{[":
            if depth == 0:
                out.append(c)
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                out.append(c)
        elif depth == 0:
            out.append(c)
    return " ".join("".join(out).split())


def mutable_variable(stmt):
    """True when stmt (one statement, flattened) defines a variable whose object
    is not const."""
    s = flatten(stmt)
    head = s.split("=", 1)[0].strip()
    words = re.findall(r"\w+", head)
    if not words or words[0] in ("typedef", "extern", "return", "goto", "break", "continue"):
        return False
    if re.fullmatch(r"(static\s+)?(struct|union|enum)\s+\w*\s*(\{\s*\})?", head):
        return False  # a type, no declarator
    if "(" in head and not re.search(r"\(\s*\*", head):
        return False  # a function
    if "volatile" in words and "sig_atomic_t" in words:
        return False  # a signal flag
    decl = re.sub(r"\{\s*\}", "", head)
    if "*" in decl:
        return not re.search(r"\*\s*const\b[^*]*$", decl)
    return "const" not in words


def offenders(text):
    """(line, statement) of every mutable file-scope variable and every mutable
    static inside a function."""
    src = strip(text)
    found = []
    depth, start, in_func = 0, 0, False
    stmt_start = 0
    i = 0
    while i < len(src):
        c = src[i]
        if c == "{":
            if depth == 0:
                before = flatten(src[start:i]).strip()
                if before.endswith(")"):  # a function body
                    in_func = True
            depth += 1
            if in_func:
                stmt_start = i + 1
        elif c == "}":
            depth -= 1
            if in_func:
                stmt_start = i + 1
            if depth == 0 and in_func:
                in_func = False
                start = i + 1
        elif c == ";":
            if depth == 0:
                stmt = src[start:i]
                if stmt.strip() and mutable_variable(stmt):
                    found.append((src.count("\n", 0, start + len(stmt) - len(stmt.lstrip())) + 1,
                                  " ".join(stmt.split())))
                start = i + 1
            elif in_func:
                stmt = src[stmt_start:i]
                if re.match(r"\s*static\b", stmt) and mutable_variable(stmt):
                    found.append((src.count("\n", 0, stmt_start + len(stmt) - len(stmt.lstrip()))
                                  + 1, " ".join(stmt.split())))
                stmt_start = i + 1
        i += 1
    return found


SELF_TEST = [
    ("static int n;", 1),
    ("unsigned counter = 3;", 1),
    ("static struct x *list;", 1),
    ("static struct { int a; } slots[4];", 1),
    ("static char *names[] = {\"a\"};", 1),
    ("static const char *names[] = {\"a\"};", 1),
    ("static void (*hook)(int);", 1),
    ("void f(void) { static unsigned id = 1; (void)id; }", 1),
    ("static const int codes[] = {1, 2};", 0),
    ("static const char *const names[] = {\"a\"};", 0),
    ("const struct row table[] = {{\"a\", 1}, {}};", 0),
    ("static volatile sig_atomic_t seen;", 0),
    ("static int f(int a);", 0),
    ("struct s { int a; };", 0),
    ("typedef void (*cb_t)(int);", 0),
    ("extern const struct row table[];", 0),
    ("static void f(void) { int x = 0; static const int k = 1; (void)x; (void)k; }", 0),
    ("enum { A = 1 << 0, B };", 0),
    ("struct buf { char data[]; };", 0),
]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    bad = 0
    for text, want in SELF_TEST:
        got = len(offenders(text))
        if got != want:
            print(f"check_statics self-test: {text!r}: {got} offender(s), expected {want}")
            bad += 1
    folder = sys.argv[1]
    names = sorted(n for n in os.listdir(folder) if n.endswith(".c"))
    for name in names:
        if name.startswith("sandboxctl") or name in ALLOWED:
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line, stmt in offenders(f.read()):
                print(f"daemon/{name}:{line}: mutable module state: {stmt}")
                bad += 1
    if bad:
        print("Keep the daemon's state in struct daemon (daemon/daemon.h); only const "
              "objects and signal flags may be file-scope.")
        sys.exit(1)
    print(f"no mutable module state in {len(names)} files")


if __name__ == "__main__":
    main()
