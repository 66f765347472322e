#!/usr/bin/env python3
"""docs/sandbox-setup.md is consistent with itself and with the defaults: the
roles created with `pveum role add` grant exactly the privileges of the table
of API calls, every privilege is a real Proxmox VE privilege name, every ACL
path of the table gets an `pveum acl modify` for both the user and the token,
and the names the guide sets up are the configuration's defaults."""
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
    header = open(os.path.join(t.SOURCE_ROOT, "lib", "config.h")).read()
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
