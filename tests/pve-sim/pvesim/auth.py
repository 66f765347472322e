"""API tokens: roles, ACL paths, and the PVEAPIToken Authorization header."""

import re
import secrets
import time
import urllib.parse

from .schema import ApiError

ROLES = {
    "Administrator": {"*"},
    "PVEVMAdmin": {"VM.Allocate", "VM.Clone", "VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory",
                   "VM.Config.Network", "VM.Config.Options", "VM.Config.HWType", "VM.Config.Cloudinit",
                   "VM.Config.CDROM", "VM.PowerMgmt", "VM.Audit", "VM.Console", "VM.Migrate",
                   "VM.Snapshot", "VM.Snapshot.Rollback", "VM.Backup", "VM.Monitor"},
    "PVEVMUser": {"VM.Audit", "VM.Console", "VM.PowerMgmt", "VM.Config.CDROM", "VM.Config.Cloudinit",
                  "VM.Backup"},
    "PVEAuditor": {"VM.Audit", "Sys.Audit", "Pool.Audit", "Datastore.Audit"},
    "PVETemplateUser": {"VM.Clone", "VM.Audit"},
    "PVEDatastoreUser": {"Datastore.AllocateSpace", "Datastore.Audit"},
    "PVEPoolAdmin": {"Pool.Allocate", "Pool.Audit"},
    "PVEPoolUser": {"Pool.Audit"},
}


class Token:
    def __init__(self, d):
        self.id = d["id"]
        m = re.fullmatch(r"(\S+@[A-Za-z][A-Za-z0-9\.\-_]+)!([A-Za-z][A-Za-z0-9\.\-_]+)", self.id)
        if not m:
            raise SystemExit(f"pve-sim: bad token id '{self.id}' (want USER@REALM!NAME)")
        self.user, self.name = m.group(1), m.group(2)
        self.secret = d.get("secret")
        # path -> (privileges, propagate). A value is a role or privilege name, a list of
        # them (propagated, as `pveum acl modify` grants by default), or
        # {"roles": [...], "propagate": 0|1}.
        self.acl = {}
        for path, privs in (d.get("acl") or {}).items():
            propagate = 1
            if isinstance(privs, dict):
                propagate = 1 if int(privs.get("propagate", 1)) else 0
                privs = privs.get("roles", [])
            if isinstance(privs, str):
                privs = [privs]
            s = set()
            for p in privs:
                s |= ROLES.get(p, {p})
            self.acl[path.rstrip("/") or "/"] = (s, propagate)

    def privs_on(self, path):
        """The privileges on path as pve-access-control's roles() computes them: walk from
        "/" down to path; at each level an ACL of this token applies if the level is path
        itself or the ACL propagates, and then replaces (not adds to) what was inherited."""
        path = path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        levels = ["/"] + ["/" + "/".join(parts[:i + 1]) for i in range(len(parts))]
        s = set()
        for level in levels:
            ent = self.acl.get(level)
            if ent and (level == path or ent[1]):
                s = set(ent[0])
        return s

    def has(self, path, priv):
        s = self.privs_on(path)
        return "*" in s or priv in s


def authenticate(sim, h):
    """The token named by Authorization header value h; ApiError 401 (after the delay) if none."""
    unified = sim.settings["auth_error_style"] == "unified"
    msg = None
    tok = None
    if not h:
        msg = "No ticket"
    else:
        m = re.search(r"(?:^|\s)PVEAPIToken(?:=| )([^;]*)", h)
        if not m:
            msg = "Authentication failed!" if unified else "No ticket"
        else:
            val = urllib.parse.unquote(m.group(1))
            mm = re.match(r"^(.*)=(.*)$", val, re.S)
            if not mm:
                msg = "no tokenid specified"
            else:
                tid, secret = mm.group(1), mm.group(2)
                tok = sim.tokens.get(tid)
                user = tid.split("!", 1)[0]
                if tok is None:
                    if not any(t.user == user for t in sim.tokens.values()):
                        msg = f"no such user ('{user}')"
                    else:
                        msg = f"no such token '{tid.split('!', 1)[1] if '!' in tid else tid}' for user '{user}'"
                elif not secrets.compare_digest(tok.secret, secret):
                    msg = "invalid token value!"
            if msg and unified:
                msg = "Authentication failed!"
    if msg:
        time.sleep(float(sim.settings["auth_failure_delay"]))
        raise ApiError(401, msg)
    return tok
