#!/usr/bin/env python3
"""Port forwards of a daemon that runs unprivileged (as the shipped unit runs it, User=): it
cannot give the socket to the caller, so the folder is 0711 and the socket 0666 under a
random name, and the peer check lets only the caller's uid (and root) through: another uid
that knows the path is connected and closed at once, before any byte reaches the sandbox."""

import os
import shutil
import subprocess
import sys
import time

import e2elib
from e2elib import Env, run

DAEMON_UID = 1000
CHILD_PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

GET = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
    s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
    out = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        out += d
    print("got" if out.endswith(b"page\n") else "closed")
except OSError as e:
    print("closed" if e.errno in (32, 104) else "errno %d" % e.errno)
"""


class UnprivilegedEnv(Env):
    """The daemon as DAEMON_UID: its folder, token and a copy of the SSH key given to it."""

    def start_daemon(self):
        orig = subprocess.Popen

        def popen(args, **kw):
            if args and args[0] == e2elib.SANDBOXD:
                key = os.path.join(self.dir, "ssh-key")
                shutil.copy(self.sim.key, key)
                os.chmod(key, 0o600)
                with open(self.config) as f:
                    text = f.read().replace(self.sim.key, key)
                with open(self.config, "w") as f:
                    f.write(text)
                for root, dirs, files in os.walk(self.dir):
                    for n in dirs + files:
                        os.chown(os.path.join(root, n), DAEMON_UID, DAEMON_UID)
                os.chown(self.dir, DAEMON_UID, DAEMON_UID)

                def drop():
                    os.setgroups([])
                    os.setgid(DAEMON_UID)
                    os.setuid(DAEMON_UID)
                kw["preexec_fn"] = drop
            return orig(args, **kw)
        subprocess.Popen = popen
        try:
            super().start_daemon()
        finally:
            subprocess.Popen = orig


def get_as(uid, path):
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    r = subprocess.run([CHILD_PY, "-c", GET, path], capture_output=True, text=True, timeout=60,
                       preexec_fn=drop if uid else None)
    return r.stdout.strip() or r.stderr[-300:]


def main():
    with UnprivilegedEnv(daemon_config={"server": {"admin_group": "root"}}) as env:
        c = env.client()
        sid = c.call("sandbox.create", {"ttl_s": 600})["id"]
        c.call("file.write", {"id": sid, "path": "/root/www/index.html", "content": "page\n"})
        c.call("process.start", {"id": sid, "command": "httpd -f -p 8080 -h /root/www"})
        fw = c.call("sandbox.forward", {"id": sid, "port": 8080})

        def modes_without_chown():
            assert os.stat(f"/proc/{env.proc.pid}").st_uid == DAEMON_UID
            st, dst = os.stat(fw["socket"]), os.stat(os.path.dirname(fw["socket"]))
            base = os.stat(os.path.dirname(os.path.dirname(fw["socket"])))
            assert (st.st_mode & 0o777, dst.st_mode & 0o777, base.st_mode & 0o777) == \
                (0o666, 0o711, 0o711), (oct(st.st_mode), oct(dst.st_mode), oct(base.st_mode))
            assert st.st_uid == DAEMON_UID

        def caller_gets_the_page():
            deadline = time.time() + 30
            while get_as(0, fw["socket"]) != "got":
                assert time.time() < deadline, get_as(0, fw["socket"])
                time.sleep(0.3)

        def another_uid_is_closed():
            for uid in (65534, 1001):
                assert get_as(uid, fw["socket"]) == "closed", uid
            assert get_as(0, fw["socket"]) == "got"

        def unforward_and_stop_remove_it():
            c.call("sandbox.unforward", {"id": sid, "forward": fw["forward"]})
            assert not os.path.exists(os.path.dirname(fw["socket"]))
            other = c.call("sandbox.forward", {"id": sid, "port": 8080})
            c.call("sandbox.destroy", {"id": sid})
            assert not os.path.exists(os.path.dirname(other["socket"]))

        run([("modes_without_chown", modes_without_chown),
             ("caller_gets_the_page", caller_gets_the_page),
             ("another_uid_is_closed", another_uid_is_closed),
             ("unforward_and_stop_remove_it", unforward_and_stop_remove_it)])


if __name__ == "__main__":
    main()
