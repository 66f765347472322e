#!/usr/bin/env python3
"""The man pages render with man(1) without warnings, and they document what
the programs have: sandboxctl(1) every command of the client, sandboxd(8) every
option and signal, and both every --option the programs' --help prints."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdtest as t  # noqa: E402

CTL_COMMANDS = ["status", "create", "list", "show", "exec", "put", "get", "internet", "renew",
                "destroy", "call"]
CTL_OPTIONS = ["--socket", "--json", "--internet", "--ttl", "--cores", "--memory", "--disk",
               "--hostname", "--label", "--timeout", "--env", "--cwd"]
DAEMON_OPTIONS = ["--config", "--socket", "--log-level", "--version", "--check-config"]
DAEMON_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"]
DAEMON_SECTIONS = ["OPTIONS", "SOCKET ACTIVATION", "SIGNALS", "FILES", "EXIT STATUS"]


def render(path):
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    env.pop("MANPAGER", None)
    env.pop("PAGER", None)
    p = t.run(["man", "--warnings", "-l", path], env=env, timeout=60)
    t.check(p.returncode == 0, f"man -l {path} exited {p.returncode}: {p.stderr}")
    t.check(not p.stderr.strip(), f"man -l {path} warns:\n{p.stderr}")
    t.check(len(p.stdout) > 500, f"man -l {path} printed almost nothing")
    # Plain text without overstrike (man does not format for a pipe, but be sure).
    return re.sub(r".\x08", "", p.stdout)


def help_options(binary):
    if not os.path.isfile(binary):
        t.check(False, f"{binary} is not built: cannot compare its --help with the man page")
        return []
    p = t.run([binary, "--help"], timeout=30)
    t.check(p.returncode == 0, f"{binary} --help exited {p.returncode}")
    return sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", p.stdout + p.stderr)))


def commands_section(text):
    m = re.search(r"(?ms)^COMMANDS$(.*?)^[A-Z][A-Z ]+$", text)
    return m.group(1) if m else ""


def main():
    t.need_program("man")
    pages = {}
    for name, sec in t.MAN_PAGES:
        path = t.need_file(t.built("docs", f"{name}.{sec}"), f"built man page {name}({sec})")
        text = render(path)
        pages[name] = text
        t.check(re.search(rf"(?m)^NAME\n\s+{re.escape(name)} - ", text),
                f"{name}({sec}) has a NAME line")

    ctl = pages["sandboxctl"]
    cmds = commands_section(ctl)
    for c in CTL_COMMANDS:
        t.check(re.search(rf"(?m)^\s+{c}\b", cmds), f"sandboxctl(1) does not document '{c}'")
    for o in CTL_OPTIONS:
        t.check(o in ctl, f"sandboxctl(1) does not document {o}")

    daemon = pages["sandboxd"]
    for o in DAEMON_OPTIONS:
        t.check(re.search(rf"(?m)^\s+(-\w, )?{o}\b", daemon), f"sandboxd(8) does not document {o}")
    for s in DAEMON_SIGNALS:
        t.check(s in daemon, f"sandboxd(8) does not document {s}")
    for s in DAEMON_SECTIONS:
        t.check(re.search(rf"(?m)^{s}$", daemon), f"sandboxd(8) has no {s} section")

    for o in help_options(t.built("daemon", "sandboxd")):
        t.check(o in daemon, f"sandboxd --help lists {o}, sandboxd(8) does not")
    for o in help_options(t.built("clients", "cli", "sandboxctl")):
        t.check(o in ctl, f"sandboxctl --help lists {o}, sandboxctl(1) does not")
    t.finish()


if __name__ == "__main__":
    main()
