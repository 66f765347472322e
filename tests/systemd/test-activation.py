#!/usr/bin/env python3
"""Socket activation end to end, the way sandboxd.socket and sandboxd.service
run the daemon: systemd-socket-activate listens, the first client connection
starts sandboxd with the socket (LISTEN_FDS, LISTEN_FDNAMES=sandboxd), the
daemon answers daemon.status, tells the notify socket READY=1 and pings
WATCHDOG=1, takes its secrets from $CREDENTIALS_DIRECTORY, survives SIGHUP
(RELOADING=1, READY=1, still serving) and exits 0 on SIGTERM (STOPPING=1).

Proxmox is configured at a loopback port nobody listens on: the daemon must
start and serve anyway.

With the argument "hardened", the same runs under the system call filter,
SystemCallErrorNumber=, NoNewPrivileges= and UMask= of the built
sandboxd.service (applied with libseccomp, since PID 1 here is not systemd):
the hardening must not break starting, serving, reloading or stopping. Leak
checking is off in that mode (LeakSanitizer needs ptrace, which the filter
denies); the plain mode checks leaks."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdtest as t  # noqa: E402

WATCHDOG_USEC = 400000
PASS_ENV = ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "MALLOC_PERTURB_", "LANG", "LC_ALL")


def project_version():
    with open(t.built("meson-info", "intro-projectinfo.json")) as f:
        return json.load(f)["version"]


def call(path, method, rid, timeout=15.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method}).encode() + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    if b"\n" not in buf:
        t.die(f"{method}: no complete response line (got {buf[:200]!r})")
    return json.loads(buf.split(b"\n", 1)[0])


class Notify:
    """A datagram socket standing in for systemd's $NOTIFY_SOCKET."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.path = path
        self.seen = []

    def wait_for(self, message, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(4096).decode(errors="replace")
            except socket.timeout:
                break
            lines = data.split("\n")
            self.seen.extend(lines)
            if message in lines:
                return True
        return False

    def drain(self, duration):
        self.wait_for("\0never\0", duration)

    def count(self, message):
        return self.seen.count(message)


def proc_comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def main(hardened):
    daemon = t.sandboxd_binary()
    activate = t.need_program("systemd-socket-activate")
    with t.tempdir("sandboxd-activation-") as tmp:
        creds = os.path.join(tmp, "credentials")
        os.makedirs(creds)
        with open(os.path.join(creds, "pve-token"), "w") as f:
            f.write("0b5c1f3e-7d2a-4c8e-9f61-3a2b1c0d9e8f\n")
        key, fingerprint = t.make_ssh_key(tmp)
        with open(os.path.join(creds, "ssh-key"), "w") as f:
            f.write(key)
        state = os.path.join(tmp, "state")
        os.makedirs(state, mode=0o700)
        conf = os.path.join(tmp, "sandboxd.conf")
        with open(conf, "w") as f:
            f.write(f"[server]\nstate_dir = {state}\n"
                    "[proxmox]\nurl = https://127.0.0.1:9\ntoken_id = sandboxd@pve!sandboxd\n"
                    "template = 9000\npool = sandboxd\n"
                    f"[ssh]\ntemplate_host_key = {fingerprint}\n")
        sock = os.path.join(tmp, "sandboxd.sock")
        notify = Notify(os.path.join(tmp, "notify"))

        env = {"CREDENTIALS_DIRECTORY": creds, "NOTIFY_SOCKET": notify.path,
               "WATCHDOG_USEC": str(WATCHDOG_USEC)}
        argv = [activate, "-l", sock, "--fdname=sandboxd"]
        for k, v in env.items():
            argv += ["-E", f"{k}={v}"]
        preexec = None
        if hardened:
            import seccomp
            service = open(t.built("systemd", "sandboxd.service")).read()
            preexec, allowed = seccomp.make_preexec(service)
            t.check("setrlimit" not in allowed and "setuid" not in allowed,
                    "the unit's filter allows setrlimit/setuid: it is not what this test expects")
            # The filter is really in force: a denied call fails with EPERM,
            # an allowed one works, and new files get the unit's umask.
            probe_file = os.path.join(tmp, "probe")
            probe = subprocess.run(["sh", "-c", 'touch "$1" && echo made; chown 0:0 "$1" 2>/dev/null '
                                    '&& echo chowned; umask', "sh", probe_file],
                                   stdout=subprocess.PIPE, text=True, preexec_fn=preexec)
            words = probe.stdout.split()
            t.check("made" in words and "chowned" not in words and "0077" in words,
                    f"the filter or umask is not applied (probe printed {probe.stdout!r})")
            argv += ["-E", "ASAN_OPTIONS=" + ":".join(
                [o for o in os.environ.get("ASAN_OPTIONS", "").split(":") if o and
                 not o.startswith("detect_leaks")] + ["detect_leaks=0"])]
        for k in PASS_ENV:
            if k in os.environ and not (hardened and k == "ASAN_OPTIONS"):
                argv += ["-E", k]
        argv += [daemon, "--config", conf, "--log-level", "debug"]
        log_path = os.path.join(tmp, "daemon.log")
        log = open(log_path, "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=preexec)
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(sock) and time.monotonic() < deadline:
                time.sleep(0.02)
            t.check(os.path.exists(sock), "systemd-socket-activate did not create the socket")
            time.sleep(0.2)
            t.check(proc_comm(p.pid).startswith("systemd-socket"),
                    f"sandboxd started before any client connected ({proc_comm(p.pid)})")
            t.check(p.poll() is None, "systemd-socket-activate exited early")

            # The first connection starts the daemon, which answers it.
            r = call(sock, "daemon.status", 1)
            t.check(proc_comm(p.pid) == "sandboxd",
                    f"the connection did not start sandboxd ({proc_comm(p.pid)})")
            res = r.get("result") or {}
            t.check(r.get("id") == 1 and "error" not in r, f"daemon.status failed: {r}")
            t.check(res.get("version") == project_version(),
                    f"daemon.status version {res.get('version')!r} is not {project_version()!r}")
            t.check("proxmox" in res, f"daemon.status has no proxmox field: {res}")

            t.check(notify.wait_for("READY=1", 10), f"no READY=1 on NOTIFY_SOCKET: {notify.seen}")
            notify.drain(2.0)
            pings = notify.count("WATCHDOG=1")
            t.check(pings >= 3, f"{pings} WATCHDOG=1 pings in ~2 s with WATCHDOG_USEC="
                    f"{WATCHDOG_USEC} (expected one every {WATCHDOG_USEC // 2000} ms)")

            # More connections go to the same daemon.
            for i in range(2, 6):
                r = call(sock, "daemon.status", i)
                t.check(r.get("id") == i and "result" in r, f"request {i}: {r}")

            # SIGHUP reloads and the daemon keeps serving.
            notify.seen.clear()
            os.kill(p.pid, signal.SIGHUP)
            t.check(notify.wait_for("READY=1", 10), f"no READY=1 after SIGHUP: {notify.seen}")
            t.check("RELOADING=1" in notify.seen, f"no RELOADING=1 on SIGHUP: {notify.seen}")
            r = call(sock, "daemon.status", 10)
            t.check("result" in r, f"daemon.status after SIGHUP: {r}")
            t.check(p.poll() is None, "sandboxd exited after SIGHUP")

            # SIGTERM stops it cleanly.
            notify.seen.clear()
            os.kill(p.pid, signal.SIGTERM)
            try:
                rc = p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                rc = None
            t.check(rc == 0, f"sandboxd exited {rc} after SIGTERM, expected 0")
            t.check("STOPPING=1" in notify.seen or notify.wait_for("STOPPING=1", 1),
                    f"no STOPPING=1 on SIGTERM: {notify.seen}")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()
            out = open(log_path).read()
            if t.failures:
                print("daemon output:\n" + out, file=sys.stderr)
            t.check("0b5c1f3e" not in out, "the token secret appears in the daemon's log")
    t.finish()


if __name__ == "__main__":
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1] != "hardened"):
        t.die("usage: test-activation.py [hardened]")
    main(len(sys.argv) == 2)
