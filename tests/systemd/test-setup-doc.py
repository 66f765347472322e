#!/usr/bin/env python3
"""docs/sandbox-setup.md is consistent with itself, the code and the defaults: the
table of API calls lists exactly the Proxmox calls the daemon makes, the roles
created with `pveum role add` grant exactly the privileges of that table, every
privilege is a real Proxmox VE privilege name, every ACL path of the table gets
an `pveum acl modify` for both the user and the token, and the names the guide
sets up are the configuration's defaults."""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdtest as t  # noqa: E402

PVE_PRIVILEGES = {
    "VM.Allocate", "VM.Audit", "VM.Backup", "VM.Clone", "VM.Config.CDROM", "VM.Config.CPU",
    "VM.Config.Cloudinit", "VM.Config.Disk", "VM.Config.HWType", "VM.Config.Memory",
    "VM.Config.Network", "VM.Config.Options", "VM.Console", "VM.Migrate", "VM.Monitor",
    "VM.PowerMgmt", "VM.Snapshot", "VM.Snapshot.Rollback", "VM.GuestAgent.Audit",
    "Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.AllocateTemplate",
    "Datastore.Audit", "Pool.Allocate", "Pool.Audit", "SDN.Allocate", "SDN.Audit", "SDN.Use",
    "Sys.Audit", "Sys.Console", "Sys.Incoming", "Sys.Modify", "Sys.PowerMgmt", "Sys.Syslog",
    "Sys.AccessNetwork", "Permissions.Modify", "Group.Allocate", "User.Modify",
    "Realm.Allocate", "Realm.AllocateUser", "Mapping.Audit", "Mapping.Modify", "Mapping.Use",
}
# Never needed by the daemon: granting any of these would be a mistake.
FORBIDDEN = {"Sys.Modify", "Permissions.Modify", "Pool.Allocate", "Datastore.Allocate",
             "User.Modify", "SDN.Allocate", "VM.Console", "VM.Monitor", "Sys.Console"}


def pve_calls(root):
    """The Proxmox calls the daemon makes: {(METHOD, PATH)} of every endpoint of
    lib/pve/pve-endpoint.c that a live function of the Proxmox client references. A function
    of lib/pve/*.c is live when code outside the client (lib/, daemon/) names it, or a live
    function of the client does."""
    src = open(os.path.join(root, "lib", "pve", "pve-endpoint.c")).read()
    macros = dict(re.findall(r'#define (CT|TASK) "([^"]*)"', src))
    eps = {}
    for m in re.finditer(r'\[(PVE_EP_\w+)\]\s*=\s*\{"[^"]*",\s*"(\w+)",\s*((?:(?:CT|TASK)\s*)?(?:"[^"]*")?)', src):
        name, method, path = m.group(1), m.group(2), m.group(3)
        p = ""
        for tok in re.findall(r'CT|TASK|"[^"]*"', path):
            p += macros[tok] if tok in macros else tok.strip('"')
        if p != "{path}":
            eps[name] = (method, p)
    funcs, scope = {}, []
    for f in glob.glob(os.path.join(root, "lib", "pve", "pve*.c")):
        if f.endswith("pve-endpoint.c"):
            continue
        text = open(f).read()
        for m in re.finditer(r'^DEFINE_\w+_CALL\((\w+),\s*(PVE_EP_\w+)\)', text, re.M):
            funcs[m.group(1)] = m.group(2)
        # Function definitions start at column 0 and end at the first "}" line.
        rest, cur, body = [], None, []
        for line in text.splitlines():
            if cur is None:
                m = re.match(r"(?:static )?[a-z][\w ]*?\**\b(\w+)\(", line)
                if m and not line.rstrip().endswith(";") and not line.startswith("DEFINE_"):
                    cur, body = m.group(1), []
                elif not line.startswith("DEFINE_"):
                    rest.append(line)
            elif line == "}":
                funcs[cur], cur = "\n".join(body), None
            else:
                body.append(line)
        # File-scope tables (a call's ops) name the functions they hold.
        scope.append("\n".join(rest))
    outside = ""
    for f in glob.glob(os.path.join(root, "lib", "*", "*.c")) + glob.glob(os.path.join(root, "daemon", "*.c")):
        if not os.path.basename(f).startswith("pve"):
            outside += open(f).read()
    outside += "".join(scope)
    words = {fn: set(re.findall(r"\w+", body)) for fn, body in funcs.items()}
    live = set(funcs) & set(re.findall(r"\w+", outside))
    while True:
        more = set().union(*(words[g] for g in live)) & set(funcs) - live
        if not more:
            break
        live |= more
    used = set()
    for fn in live:
        for ep in re.findall(r'PVE_EP_\w+', funcs[fn]):
            if ep in eps:
                used.add(eps[ep])
    return used, set(eps.values())


def main():
    text = open(os.path.join(t.SOURCE_ROOT, "docs", "sandbox-setup.md")).read()

    # The privilege table: | call | privilege | on | why |
    table_privs, table_paths = set(), set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not line.startswith("|"):
            continue
        for p in re.findall(r"`([A-Z][A-Za-z]+(?:\.[A-Za-z]+)+)`", cells[1]):
            table_privs.add(p)
            m = re.search(r"`(/[^`]*)`", cells[2])
            if m:
                table_paths.add(m.group(1))
    t.check(len(table_privs) >= 8, f"found only {sorted(table_privs)} in the privilege table")

    # The table's calls are exactly the ones the daemon makes.
    table_calls = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and line.startswith("|"):
            m = re.match(r"`(GET|PUT|POST|DELETE) (/[^`]*)`", cells[0])
            if m:
                table_calls.add((m.group(1), m.group(2)))
    made, _ = pve_calls(t.SOURCE_ROOT)
    for c in sorted(made - table_calls):
        t.check(False, f"the daemon calls {' '.join(c)}, which the privilege table does not list")
    for c in sorted(table_calls - made):
        t.check(False, f"the privilege table lists {' '.join(c)}, which the daemon never calls")

    role_privs = {}
    for m in re.finditer(r'pveum role add (\S+) --privs "([^"]+)"', text):
        role_privs[m.group(1)] = set(m.group(2).split())
    granted = set().union(*role_privs.values()) if role_privs else set()
    for p in sorted(granted | table_privs):
        t.check(p in PVE_PRIVILEGES, f"'{p}' is not a Proxmox VE privilege")
        t.check(p not in FORBIDDEN, f"the guide grants '{p}', which the daemon must not have")
    for p in sorted(table_privs - granted):
        t.check(False, f"{p} is in the table but no role grants it")
    for p in sorted(granted - table_privs):
        t.check(False, f"a role grants {p}, which no API call in the table needs")

    acl = {}
    for m in re.finditer(r"pveum acl modify (\S+)\s+(.*)", text):
        acl[m.group(1)] = m.group(2)
    for path in sorted(table_paths):
        cmd = acl.get(path)
        if not t.check(cmd is not None, f"no 'pveum acl modify {path}'"):
            continue
        t.check("--users" in cmd and "--tokens" in cmd,
                f"{path}: a privilege-separated token needs the ACL on both user and token")
        role = re.search(r"--roles (\S+)", cmd)
        t.check(role and role.group(1) in role_privs, f"{path}: unknown role in '{cmd}'")
    t.check("--privsep 1" in text, "the token is not created privilege-separated")

    # The names set up here are sandboxd.conf's defaults.
    header = open(os.path.join(t.SOURCE_ROOT, "lib", "config", "config.h")).read()
    defaults = dict(re.findall(r'#define (CONFIG_DEFAULT_\w+) "([^"]*)"', header))
    group = defaults.get("CONFIG_DEFAULT_INTERNET_GROUP", "")
    t.check(group and f"--group {group}" in text,
            f"the guide does not create the default security group '{group}'")
    t.check(2 <= len(group) <= 18, "Proxmox security group names have 2 to 18 characters")
    t.check("firewall=1" in text and "lxc.cgroup2.pids.max" in text and "--unprivileged 1" in text,
            "the template section lost firewall=1, the PID limit or --unprivileged 1")
    t.finish()


if __name__ == "__main__":
    main()
