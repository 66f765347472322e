"""Helpers for the pve-sim tests: start an instance, call its API, log into containers."""

import hashlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.realpath(__file__))
SIM = os.path.join(HERE, "pve-sim")
ADMIN = "root@pam!admin"
DAEMON = "sandboxd@pve!sandboxd"


def unmount_overlays(path):
    """Unmount the overlay roots below path (never remove a folder through a mounted root)."""
    path = os.path.realpath(path).rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        mps = [l.split()[4] for l in f if l.split()[4].startswith(path)]
    for mp in sorted(mps, reverse=True):
        if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mp], capture_output=True)


class Resp:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    @property
    def data(self):
        return self.json["data"] if self.json else None

    def __repr__(self):
        return f"<{self.status} {self.reason} {self.body[:300]!r}>"


class Sim:
    """One simulator instance in its own state folder under /run."""

    def __init__(self, config=None, args=(), keep_state=False, state_dir=None):
        self.state_dir = state_dir or f"/run/pve-sim-test-{secrets.token_hex(3)}"
        self.keep_state = keep_state
        self.config = dict(config or {})
        self.args = list(args)
        self.proc = None
        self.keydir = tempfile.mkdtemp(prefix="pve-sim-key-")
        self.key = os.path.join(self.keydir, "id_ed25519")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.key], check=True)

    def start(self, timeout=30):
        os.makedirs(self.state_dir, mode=0o755, exist_ok=True)
        os.chmod(self.state_dir, 0o755)
        cfg = {"state_dir": self.state_dir, "auth_failure_delay": 0.2, "dhcp_delay": 0.3, "clone_time": 0.3,
               "start_time": 0.05, "stop_time": 0.05, "destroy_time": 0.05, "authorized_key": self.key + ".pub",
               "firewall_period": 0}  # every firewall change at once unless a test sets a cycle
        cfg.update(self.config)
        cfgfile = os.path.join(self.keydir, "sim.json")
        with open(cfgfile, "w") as f:
            json.dump(cfg, f)
        self.errlog = open(os.path.join(self.keydir, "sim.err"), "w+")
        self.proc = subprocess.Popen([sys.executable, SIM, "--config", cfgfile] + self.args,
                                     stdout=subprocess.PIPE, stderr=self.errlog, text=True)
        deadline = time.time() + timeout
        line = ""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line or self.proc.poll() is not None:
                break
        if not line.startswith("pve-sim ready "):
            self.errlog.seek(0)
            raise RuntimeError(f"pve-sim did not start: {line!r}\n{self.errlog.read()}")
        self.ready_line = line.strip()
        self.ready = dict(kv.split("=", 1) for kv in line.split()[2:])
        with open(os.path.join(self.state_dir, "sim-info.json")) as f:
            self.info = json.load(f)
        u = urllib.parse.urlsplit(self.info["url"])
        self.host, self.port = u.hostname, u.port
        self.known_hosts = os.path.join(self.keydir, "known_hosts")
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def destroy(self):
        self.stop()
        if not self.keep_state:
            unmount_overlays(self.state_dir)  # a simulator that had to be killed left its Debian roots
            shutil.rmtree(self.state_dir, ignore_errors=True)
        shutil.rmtree(self.keydir, ignore_errors=True)

    def stderr(self):
        self.errlog.seek(0)
        return self.errlog.read()

    # ---- HTTP
    def conn(self, timeout=30):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        c = http.client.HTTPSConnection(self.host, self.port, context=ctx, timeout=timeout)
        c.connect()
        der = c.sock.getpeercert(binary_form=True)
        fp = ":".join("%02X" % b for b in hashlib.sha256(der).digest())
        assert fp == self.info["fingerprint"], (fp, self.info["fingerprint"])
        return c

    def raw(self, method, path, body=None, headers=None, timeout=30):
        c = self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return Resp(r.status, r.reason, r.headers, r.read())
        finally:
            c.close()

    def auth(self, token=ADMIN, secret=None):
        secret = secret if secret is not None else self.info["tokens"][token]
        return {"Authorization": f"PVEAPIToken={token}={secret}"}

    def api(self, method, path, params=None, token=ADMIN, json_body=False, timeout=30, query=None):
        h = self.auth(token) if token else {}
        url = "/api2/json" + path
        body = None
        params = params or {}
        if method in ("GET", "DELETE"):
            if params:
                url += "?" + urllib.parse.urlencode(params)
        elif json_body:
            body = json.dumps(params)
            h["Content-Type"] = "application/json"
        elif params:
            body = urllib.parse.urlencode(params)
            h["Content-Type"] = "application/x-www-form-urlencoded"
        if query:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(query)
        return self.raw(method, url, body, h, timeout)

    def ok(self, method, path, params=None, **kw):
        r = self.api(method, path, params, **kw)
        assert r.status == 200, r
        return r.data

    def admin(self, method, path, obj=None):
        body = json.dumps(obj) if obj is not None else None
        r = self.raw(method, "/admin" + path, body, {"Content-Type": "application/json"})
        assert r.status == 200, r
        return r.json

    def node_down(self, node):
        """Take a node of the simulated cluster down (POST /admin/node/NAME/down)."""
        return self.admin("POST", f"/node/{node}/down")

    def node_up(self, node):
        return self.admin("POST", f"/node/{node}/up")

    def wait_task(self, upid, node=None, timeout=30):
        node = node or upid.split(":")[1]
        deadline = time.time() + timeout
        while time.time() < deadline:
            d = self.ok("GET", f"/nodes/{node}/tasks/{upid}/status")
            if d["status"] == "stopped":
                return d
            time.sleep(0.05)
        raise AssertionError(f"task {upid} still running")

    def clone(self, newid, src=9000, node="pve", json_body=False, **params):
        p = {"newid": newid}
        p.update(params)
        upid = self.ok("POST", f"/nodes/{node}/lxc/{src}/clone", p, json_body=json_body)
        st = self.wait_task(upid, node)
        assert st["exitstatus"] == "OK", st
        return upid

    def start_ct(self, vmid, node="pve", wait_ip=True):
        upid = self.ok("POST", f"/nodes/{node}/lxc/{vmid}/status/start")
        st = self.wait_task(upid, node)
        assert st["exitstatus"] == "OK", st
        if wait_ip:
            return self.wait_ip(vmid, node)

    def wait_ip(self, vmid, node="pve", timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            d = self.ok("GET", f"/nodes/{node}/lxc/{vmid}/interfaces")
            for e in d or []:
                if e["name"] == "eth0" and "inet" in e:
                    return e["inet"].split("/")[0]
            time.sleep(0.05)
        raise AssertionError(f"CT {vmid} got no IP")

    # ---- SSH
    def ssh(self, ip, cmd, timeout=30, template=None):
        template = str(template or self.info["template"])
        with open(self.known_hosts, "w") as f:
            f.write(f"{ip} {self.info['templates'][template]['host_key_pub']}\n")
        return subprocess.run(["ssh", "-i", self.key, "-o", f"UserKnownHostsFile={self.known_hosts}",
                               "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                               "-o", "LogLevel=ERROR", f"root@{ip}", cmd],
                              capture_output=True, text=True, timeout=timeout)


def leftovers(inst=None, state_dir=None, host_ips=()):
    """Namespaces, links and processes an instance (or any instance) left behind."""
    pat = f"pvesim-{inst}-" if inst else "pvesim-"
    out = []
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    out += [l.split()[0] for l in r.stdout.splitlines() if l.startswith(pat)]
    r = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True)
    lpat = re.compile(r"\d+: (pvs" + (inst or "[0-9a-f]{4}") + r")[@:]")
    out += [m.group(1) for m in lpat.finditer(r.stdout)]
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state_dir and state_dir + "/" in cmd and ("sshd" in cmd or "unshare" in cmd):
            out.append(f"pid {pid}: {cmd}")
        if inst and "--serve-host" in cmd and f"--instance {inst} " in cmd + " ":
            out.append(f"pid {pid}: {cmd}")
    return out


def run_tests(module_name):
    import unittest
    t0 = time.time()
    suite = unittest.defaultTestLoader.loadTestsFromName(module_name)
    class Timed(unittest.TextTestResult):
        def startTest(self, test):
            self._t0 = time.time()
            super().startTest(test)

        def stopTest(self, test):
            super().stopTest(test)
            self.stream.write(f"    ({time.time() - self._t0:.2f} s)\n")
    res = unittest.TextTestRunner(verbosity=2, stream=sys.stdout, resultclass=Timed).run(suite)
    n = res.testsRun
    bad = len(res.failures) + len(res.errors)
    print(f"{module_name}: {n - bad}/{n} passed in {time.time() - t0:.1f} s")
    sys.exit(0 if res.wasSuccessful() else 1)
