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
        self.acl = {}
        for path, privs in (d.get("acl") or {}).items():
            if isinstance(privs, str):
                privs = [privs]
            s = set()
            for p in privs:
                s |= ROLES.get(p, {p})
            self.acl[path.rstrip("/") or "/"] = s

    def privs_on(self, path):
        s = set()
        for p, privs in self.acl.items():
            if p == "/" or path == p or path.startswith(p + "/"):
                s |= privs
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
