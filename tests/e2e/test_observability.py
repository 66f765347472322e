#!/usr/bin/env python3
"""Observability: the audit trail (each record once, with its fields, read back through
the daemon's log stream: tests run outside journald), `sandboxctl metrics` in the
Prometheus text format (checked by a strict parser written here) with counters that move
as a create, an exec and a destroy happen, daemon.subscribe delivering every transition
of a create and a destroy in order and nothing of another uid's sandboxes, and the
slow-subscriber policy (test hook test.events floods synthetic events)."""

import json
import math
import os
import re
import socket
import subprocess
import sys
import time

from e2elib import BUILD, Client, Env, RpcError, run
from test_recovery_util import kill9, launch  # sets SANDBOXD_TEST_HOOKS=1

SANDBOXCTL = os.path.join(BUILD, "clients", "cli", "sandboxctl")
CHILD_PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
NOBODY = 65534
CREATE_STEPS = ["pending", "cloning", "configuring", "starting", "waiting_ip", "connecting", "ready"]

# ---- the audit stream: "LEVEL: [audit ] key=value ..." (logfmt) ----

AUDIT_RE = re.compile(r"^(\w+): \[audit \] (.*)$")
KV_RE = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def logfmt(s):
    out = {}
    pos = 0
    for m in KV_RE.finditer(s):
        assert s[pos:m.start()].strip() == "", f"junk in audit line: {s!r}"
        pos = m.end()
        k, v = m.group(1), m.group(2)
        if v.startswith('"'):
            v = re.sub(r'\\(.)', r'\1', v[1:-1])
        assert k not in out, f"duplicate field {k}: {s!r}"
        out[k] = v
    assert s[pos:].strip() == "", f"junk in audit line: {s!r}"
    return out


def audit_records(env):
    recs = []
    for line in env.daemon_log().splitlines():
        m = AUDIT_RE.match(line)
        if m:
            r = logfmt(m.group(2))
            r["level"] = m.group(1)
            recs.append(r)
    return recs


def records_for(env, sid):
    return [r for r in audit_records(env) if r.get("sandbox") == sid]


def wait_record(env, pred, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = [r for r in audit_records(env) if pred(r)]
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no audit record: {what}")


def one(recs, event):
    found = [r for r in recs if r["event"] == event]
    assert len(found) == 1, f"{event}: {len(found)} records in {recs}"
    return found[0]


# ---- a strict Prometheus text-format (0.0.4) parser ----

NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_value(s):
    if s in ("+Inf", "Inf"):
        return math.inf
    if s == "-Inf":
        return -math.inf
    if s == "NaN":
        return math.nan
    assert re.fullmatch(r"[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)", s), f"bad value {s!r}"
    return float(s)


def parse_labels(s, i):
    """s[i] == '{'; returns (labels, index after '}')."""
    labels = {}
    i += 1
    while True:
        if s[i] == "}":
            return labels, i + 1
        m = LABEL_RE.match(s, i)
        assert m, f"bad label name at {s[i:]!r}"
        name = m.group(0)
        i = m.end()
        assert s[i:i + 2] == '="', f"expected =\" at {s[i:]!r}"
        i += 2
        val = []
        while s[i] != '"':
            if s[i] == "\\":
                nxt = s[i + 1]
                assert nxt in '\\"n', f"bad escape \\{nxt}"
                val.append("\n" if nxt == "n" else nxt)
                i += 2
            else:
                assert s[i] != "\n"
                val.append(s[i])
                i += 1
        i += 1
        assert name not in labels, f"duplicate label {name}"
        labels[name] = "".join(val)
        if s[i] == ",":
            i += 1
        else:
            assert s[i] == "}", f"expected , or }} at {s[i:]!r}"


def parse_prom(text):
    """Returns {family: {"type", "help", "samples": [(name, labels, value)]}}."""
    fams = {}
    seen = set()
    assert text.endswith("\n"), "exposition must end with a newline"
    for line in text.split("\n")[:-1]:
        if not line.strip():
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            assert len(parts) >= 3 and NAME_RE.fullmatch(parts[2]), f"bad line {line!r}"
            f = fams.setdefault(parts[2], {"type": None, "help": None, "samples": []})
            if parts[1] == "TYPE":
                assert f["type"] is None and not f["samples"], f"TYPE late or twice: {line!r}"
                assert len(parts) == 4 and parts[3] in TYPES, f"bad type: {line!r}"
                f["type"] = parts[3]
            else:
                assert f["help"] is None, f"HELP twice: {line!r}"
                f["help"] = parts[3] if len(parts) == 4 else ""
            continue
        if line.startswith("#"):
            continue
        m = NAME_RE.match(line)
        assert m, f"bad sample {line!r}"
        name, i = m.group(0), m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = parse_labels(line, i)
        rest = line[i:].split(" ")
        assert rest[0] == "" and len(rest) in (2, 3), f"bad sample {line!r}"
        value = parse_value(rest[1])
        if len(rest) == 3:
            assert re.fullmatch(r"-?\d+", rest[2]), f"bad timestamp {line!r}"
        fam = name
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[:-len(suffix)]
            if name.endswith(suffix) and base in fams and fams[base]["type"] == "histogram":
                fam = base
        assert fam in fams and fams[fam]["type"], f"sample before its TYPE: {line!r}"
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen, f"duplicate sample {line!r}"
        seen.add(key)
        fams[fam]["samples"].append((name, labels, value))
    for fname, f in fams.items():
        if f["type"] == "counter":
            assert fname.endswith("_total"), f"counter {fname} does not end in _total"
            assert all(v >= 0 for _, _, v in f["samples"]), fname
        if f["type"] == "histogram":
            check_histogram(fname, f["samples"])
    return fams


def check_histogram(fname, samples):
    groups = {}
    for name, labels, v in samples:
        rest = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
        g = groups.setdefault(rest, {"buckets": [], "sum": None, "count": None})
        if name == fname + "_bucket":
            g["buckets"].append((parse_value(labels["le"]), v))
        elif name == fname + "_sum":
            g["sum"] = v
        elif name == fname + "_count":
            g["count"] = v
        else:
            raise AssertionError(f"{name} in histogram {fname}")
    for rest, g in groups.items():
        les = [le for le, _ in g["buckets"]]
        assert les == sorted(les) and les[-1] == math.inf, f"{fname}{rest}: le {les}"
        counts = [c for _, c in g["buckets"]]
        assert counts == sorted(counts), f"{fname}{rest}: buckets not cumulative {counts}"
        assert g["count"] == counts[-1] and g["sum"] is not None, f"{fname}{rest}"


def value(fams, name, **labels):
    """A sample's value (0 when absent: a series appears on first use)."""
    fam = name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[:-len(suffix)] in fams:
            fam = name[:-len(suffix)]
    for n, l, v in fams.get(fam, {"samples": []})["samples"]:
        if n == name and l == labels:
            return v
    return 0


def total(fams, name):
    return sum(v for n, _, v in fams[name]["samples"] if n == name)


def ctl(env, *args, user=None, check=True):
    p = subprocess.run([SANDBOXCTL, "--socket", env.socket, *args], capture_output=True, text=True,
                       timeout=120, user=user)
    if check:
        assert p.returncode == 0, f"sandboxctl {args}: {p.returncode} {p.stderr}"
    return p


def metrics(env):
    return parse_prom(ctl(env, "metrics").stdout)


# ---- the subscriber of another uid ----

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from e2elib import Client, RpcError
c = Client(sys.argv[2], timeout=120)
out = {}
try:
    c.call("daemon.metrics")
    out["metrics"] = "succeeded"
except RpcError as e:
    out["metrics"] = e.code
sub = Client(sys.argv[2], timeout=120)
sub.send("daemon.subscribe")
while True:
    with sub.cv:
        if any(n.get("method") == "daemon.subscribed" for n in sub.notes):
            break
        sub.cv.wait(5)
print("subscribed", flush=True)
sys.stdin.readline()
sb = c.call("sandbox.create", {})
c.call("sandbox.destroy", {"id": sb["id"]})
out["own"] = sb["id"]
import time
deadline = time.time() + 30
while time.time() < deadline:
    with sub.cv:
        if any(n.get("params", {}).get("state") == "destroyed" for n in sub.notes):
            break
        sub.cv.wait(1)
with sub.cv:
    out["notes"] = list(sub.notes)
print(json.dumps(out), flush=True)
"""


def events_of(notes, sid):
    return [n["params"] for n in notes if n.get("method") == "sandbox.event" and n["params"]["id"] == sid]


def check_sequence(evs, sid):
    """Every transition of one create and one destroy, in order, each once."""
    steps = [e["step"] for e in evs]
    assert steps == CREATE_STEPS + ["destroying", "gone"], f"{sid}: steps {steps}"
    assert evs[0]["old_state"] is None and evs[0]["old_step"] is None, evs[0]
    for prev, cur in zip(evs, evs[1:]):
        assert cur["old_step"] == prev["step"] and cur["old_state"] == prev["state"], (prev, cur)
        assert cur["seq"] > prev["seq"], (prev, cur)
    states = [e["state"] for e in evs]
    assert states == ["creating"] * 6 + ["ready", "destroying", "destroyed"], states
    assert evs[-1]["reason"] == "caller" and evs[-2]["reason"] == "caller", evs[-2:]
    for e in evs:
        assert e["node"] == "pve" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", e["at"]), e
    assert evs[-1]["vmid"] and evs[0]["vmid"] is None, (evs[0], evs[-1])


def main():
    cfg = {"sandbox": {"max_per_uid": "3"}, "server": {"max_request_bytes": "1048576"}}
    with Env(daemon_config=cfg, log_level="info") as env:
        c = env.client()
        state = {}

        def create_exec_destroy():
            m0 = metrics(env)
            sb = c.call("sandbox.create", {})
            sid = sb["id"]
            # an exec in flight shows in the gauge
            i = c.send("sandbox.exec", {"id": sid, "command": "sleep 2; echo done"})
            deadline = time.time() + 30
            while value(metrics(env), "sandboxd_requests_in_flight", method="sandbox.exec") != 1:
                assert time.time() < deadline, "the exec never showed in flight"
                time.sleep(0.05)
            m1 = metrics(env)
            assert c.wait(i)["stdout"] == "done\n"
            assert value(m1, "sandboxd_sandboxes", state="ready", node="pve") == 1, m1["sandboxd_sandboxes"]
            c.call("sandbox.destroy", {"id": sid})
            m2 = metrics(env)

            def delta(name, **l):
                return value(m2, name, **l) - value(m0, name, **l)
            assert delta("sandboxd_creates_total", outcome="ready") == 1
            assert delta("sandboxd_create_seconds_count") == 1
            for step in CREATE_STEPS[:-1]:
                assert delta("sandboxd_create_step_seconds_count", step=step) == 1, step
            assert delta("sandboxd_request_seconds_count", method="sandbox.exec") == 1
            assert delta("sandboxd_requests_total", method="sandbox.exec", code="0") == 1
            assert delta("sandboxd_requests_total", method="sandbox.create", code="0") == 1
            assert delta("sandboxd_destroys_total", reason="caller") == 1
            assert delta("sandboxd_audit_events_total", event="sandbox.ready") == 1
            assert value(m2, "sandboxd_requests_in_flight", method="sandbox.exec") == 0
            assert value(m2, "sandboxd_sandboxes", state="ready", node="pve") == 0
            assert total(m2, "sandboxd_proxmox_requests_total") > total(m0, "sandboxd_proxmox_requests_total")
            assert value(m2, "sandboxd_proxmox_requests_total", endpoint="clone", status="200") >= 1, \
                m2["sandboxd_proxmox_requests_total"]
            for fam in ("sandboxd_pool_hits_total", "sandboxd_pool_misses_total", "sandboxd_subscribers",
                        "sandboxd_ssh_reconnects_total", "sandboxd_limits_hit_total"):
                assert m2[fam]["type"], fam
            # the audit trail of that sandbox: each record once, with its fields
            recs = records_for(env, sid)
            assert [r["event"] for r in recs] == ["sandbox.create_requested", "sandbox.ready",
                                                 "sandbox.destroying", "sandbox.destroyed"], recs
            req = one(recs, "sandbox.create_requested")
            assert req["caller_uid"] == "0" and req["owner_uid"] == "0" and req["node"] == "pve", req
            assert req["level"] == "info" and "vmid" not in req, req
            rdy = one(recs, "sandbox.ready")
            assert rdy["vmid"] == str(sb["vmid"]) and rdy["node"] == "pve" and rdy["caller_uid"] == "0", rdy
            assert sid in rdy["message"], rdy
            for ev in ("sandbox.destroying", "sandbox.destroyed"):
                r = one(recs, ev)
                assert r["reason"] == "caller" and r["caller_uid"] == "0", r
                assert r["vmid"] == str(sb["vmid"]) and r["owner_uid"] == "0", r

        def non_admin_metrics():
            p = ctl(env, "metrics", user=NOBODY, check=False)
            assert p.returncode == 2 and "-32008" in p.stderr, (p.returncode, p.stderr)

        def failed_create_rolled_back():
            env.sim.admin("POST", "/faults", {"method": "POST", "path": "/nodes/*/lxc/*/status/start",
                                              "task_error": "startup for container failed"})
            try:
                e = c.error("sandbox.create", {})
            finally:
                env.sim.admin("DELETE", "/faults")
            assert e.code == -32004, e.err
            recs = wait_record(env, lambda r: r["event"] == "sandbox.destroyed" and r.get("reason") == "rollback",
                               "destroyed after a failed create")
            sid = recs[-1]["sandbox"]
            recs = records_for(env, sid)
            assert [r["event"] for r in recs] == ["sandbox.create_requested", "sandbox.create_failed",
                                                 "sandbox.destroying", "sandbox.destroyed"], recs
            f = one(recs, "sandbox.create_failed")
            assert f["level"] == "warning" and "startup for container failed" in f["reason"], f
            assert f["vmid"] and f["owner_uid"] == "0", f
            assert one(recs, "sandbox.destroyed")["reason"] == "rollback"
            assert value(metrics(env), "sandboxd_creates_total", outcome="failed") == 1

        def lease_expiry():
            sb = c.call("sandbox.create", {"ttl_s": 2})
            wait_record(env, lambda r: r["event"] == "sandbox.destroyed" and r.get("sandbox") == sb["id"],
                        "lease expiry")
            recs = records_for(env, sb["id"])
            d = one(recs, "sandbox.destroyed")
            assert d["reason"] == "lease_expired" and "caller_uid" not in d and d["owner_uid"] == "0", d

        def ssh_lost_and_restored():
            sb = c.call("sandbox.create", {})
            state["sb"] = sb
            m0 = metrics(env)
            c.call("sandbox.exec", {"id": sb["id"], "command": "true"})
            env.sim.admin("POST", f"/ct/{sb['vmid']}/kill-sshd")
            try:
                c.call("sandbox.exec", {"id": sb["id"], "command": "true", "timeout_ms": 10000})
            except RpcError as e:
                assert e.code == -32005, e.err
            env.sim.admin("POST", f"/ct/{sb['vmid']}/restart-sshd")
            deadline = time.time() + 30
            while True:
                try:
                    c.call("sandbox.exec", {"id": sb["id"], "command": "true"})
                    break
                except RpcError as e:
                    assert e.code == -32005 and time.time() < deadline, e.err
                    time.sleep(0.2)
            # The audit records and the counters are written at the same moments but read
            # here one after the other: read both until they agree, and stay the same.
            deadline = time.time() + 15
            prev = None
            while True:
                m1 = metrics(env)
                recs = records_for(env, sb["id"])
                lost = [r for r in recs if r["event"] == "ssh.session_lost"]
                back = [r for r in recs if r["event"] == "ssh.session_restored"]
                m2 = metrics(env)
                cur = (len(lost), len(back), value(m1, "sandboxd_ssh_sessions_lost_total"),
                       value(m1, "sandboxd_ssh_reconnects_total"))
                same = all(value(m1, n) == value(m2, n) for n in
                           ("sandboxd_ssh_sessions_lost_total", "sandboxd_ssh_reconnects_total"))
                agree = (len(lost) == cur[2] - value(m0, "sandboxd_ssh_sessions_lost_total") and
                         len(back) == cur[3] - value(m0, "sandboxd_ssh_reconnects_total"))
                if (same and agree and cur == prev) or time.time() > deadline:
                    break
                prev = cur
                time.sleep(0.2)
            assert lost and back, recs
            assert len(lost) == value(m1, "sandboxd_ssh_sessions_lost_total") - \
                value(m0, "sandboxd_ssh_sessions_lost_total"), lost
            assert len(back) == value(m1, "sandboxd_ssh_reconnects_total") - \
                value(m0, "sandboxd_ssh_reconnects_total"), back
            for r in lost + back:
                assert r["vmid"] == str(sb["vmid"]) and r["node"] == "pve" and r["owner_uid"] == "0", r
            assert all(r["level"] == "warning" for r in lost) and all(r["level"] == "notice" for r in back)

        def limits():
            before = [r for r in audit_records(env) if r["event"] == "limit.hit"]
            assert not before, before
            made = [c.call("sandbox.create", {})["id"] for _ in range(2)]  # + state["sb"] = 3
            e = c.error("sandbox.create", {})
            assert e.code == -32003, e.err
            for sid in made:
                c.call("sandbox.destroy", {"id": sid})
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(env.socket)
            try:  # the daemon answers -32600 and closes once the line is over the limit
                s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{"x":"' +
                          b"a" * 1100000 + b'"}}\n')
            except (BrokenPipeError, ConnectionResetError):
                pass
            s.close()
            recs = wait_record(env, lambda r: r["event"] == "limit.hit" and r["reason"] == "request_bytes",
                               "oversized request")
            hits = [r for r in audit_records(env) if r["event"] == "limit.hit"]
            assert [r["reason"] for r in hits] == ["quota", "request_bytes"], hits
            assert all(r["caller_uid"] == "0" and r["level"] == "notice" for r in hits), hits
            assert "max_per_uid" in hits[0]["message"], hits[0]
            m = metrics(env)
            assert value(m, "sandboxd_limits_hit_total", limit="quota") == 1
            assert value(m, "sandboxd_limits_hit_total", limit="request_bytes") == 1

        def subscribe_filtered_and_ordered():
            child = subprocess.Popen([CHILD_PY, "-c", CHILD, os.path.dirname(os.path.abspath(__file__)),
                                      env.socket], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, user=NOBODY)
            try:
                assert child.stdout.readline().strip() == "subscribed"
                admin = env.client()
                admin.send("daemon.subscribe")
                cli = subprocess.Popen([SANDBOXCTL, "--socket", env.socket, "--json", "events"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                assert cli.stderr.readline().strip() == "sandboxctl: subscribed (every sandbox)"
                deadline = time.time() + 30
                while not any(n.get("method") == "daemon.subscribed" for n in admin.notes):
                    assert time.time() < deadline
                    time.sleep(0.05)
                sb = c.call("sandbox.create", {})
                c.call("sandbox.destroy", {"id": sb["id"]})
                child.stdin.write("go\n")
                child.stdin.flush()
                out = json.loads(child.stdout.readline())
                assert child.wait(60) == 0
                assert out["metrics"] == -32008, out
                own = out["own"]
                mine = [n for n in out["notes"] if n.get("method") == "sandbox.event"]
                assert mine and all(n["params"]["id"] == own for n in mine), \
                    f"another uid's events reached uid {NOBODY}: {mine}"
                check_sequence(events_of(out["notes"], own), own)
                assert all(n["params"]["owner_uid"] == NOBODY for n in mine)
                deadline = time.time() + 30
                while len(events_of(admin.notes, own)) < 9:
                    assert time.time() < deadline, admin.notes
                    time.sleep(0.05)
                check_sequence(events_of(admin.notes, sb["id"]), sb["id"])
                check_sequence(events_of(admin.notes, own), own)
                admin.close()
                cli.terminate()
                lines = cli.stdout.read().splitlines()
                cli.wait(30)
                evs = [json.loads(x) for x in lines]
                check_sequence([e for e in evs if e["id"] == sb["id"]], sb["id"])
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()

        def slow_subscriber():
            b = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            b.connect(env.socket)
            b.sendall(b'[{"jsonrpc":"2.0","id":1,"method":"daemon.subscribe"},'
                      b'{"jsonrpc":"2.0","id":2,"method":"daemon.status"}]\n')
            f = b.makefile("rb")
            batch = json.loads(f.readline())
            b.close()
            assert [x["id"] for x in batch] == [1, 2] and batch[0]["error"]["code"] == -32600, batch
            assert "result" in batch[1], batch
            slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            slow.connect(env.socket)
            slow.sendall(b'{"jsonrpc":"2.0","id":7,"method":"daemon.subscribe"}\n')
            fast = env.client()
            fast.send("daemon.subscribe")
            deadline = time.time() + 30
            while not any(n.get("method") == "daemon.subscribed" for n in fast.notes):
                assert time.time() < deadline
                time.sleep(0.05)
            time.sleep(0.2)  # the slow subscription is registered (same loop, earlier line)
            n_batches, per = 40, 500
            deadline = time.time() + 120
            for b in range(n_batches):
                assert c.call("test.events", {"count": per, "uid": 0}) == per
                # the fast subscriber reads everything before the next batch
                while True:
                    with fast.cv:
                        got = [n["params"]["seq"] for n in fast.notes if n.get("method") == "sandbox.event"]
                        ended = bool(fast.replies)
                    assert not ended, fast.replies
                    if len(got) >= (b + 1) * per:
                        break
                    assert time.time() < deadline, f"fast subscriber got {len(got)}"
                    time.sleep(0.02)
            # ... every event, in order, without gaps
            assert len(got) == n_batches * per and got == list(range(got[0], got[0] + len(got))), len(got)
            # the slow one was ended with -32007 after what it could take
            buf = b""
            slow.settimeout(60)
            while True:
                chunk = slow.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
                if b'"id":7' in buf and buf.endswith(b"\n"):
                    break
            slow.close()
            msgs = [json.loads(x) for x in buf.splitlines() if x.strip()]
            end = [m for m in msgs if m.get("id") == 7]
            assert len(end) == 1 and end[0]["error"]["code"] == -32007, end
            n_slow = sum(1 for m in msgs if m.get("method") == "sandbox.event")
            assert 0 < n_slow < n_batches * per, n_slow
            m = metrics(env)
            assert value(m, "sandboxd_subscribers_dropped_total") == 1
            assert value(m, "sandboxd_subscribers") == 1  # the fast one
            fast.close()
            print(f"    slow subscriber: {n_slow} events delivered, then ended", flush=True)

        def reconcile_reattach_and_orphan():
            sb = state["sb"]
            orphan = c.call("sandbox.create", {})
            kill9(env)
            # the orphan's record is lost: its marked container is no one's any more
            os.unlink(os.path.join(env.dir, "state", "sandboxes", orphan["id"] + ".json"))
            launch(env)
            recs = wait_record(env, lambda r: r["event"] == "reconcile.reattach" and r.get("sandbox") == sb["id"],
                               "re-attach after a restart")
            assert len(recs) == 1 and recs[0]["vmid"] == str(sb["vmid"]) and recs[0]["level"] == "info", recs
            recs = wait_record(env, lambda r: r["event"] == "reconcile.destroy" and r.get("sandbox") == orphan["id"],
                               "orphan destroyed")
            assert len(recs) == 1 and recs[0]["reason"] == "orphan" and recs[0]["vmid"] == str(orphan["vmid"]), recs
            assert recs[0]["level"] == "notice" and "caller_uid" not in recs[0], recs
            assert not [r for r in records_for(env, orphan["id"]) if r["event"] == "reconcile.reattach"]
            c2 = env.client()
            c2.call("sandbox.destroy", {"id": sb["id"]})
            d = one(records_for(env, sb["id"]), "sandbox.destroyed")
            assert d["reason"] == "caller", d
            c2.close()

        run([("create, exec, destroy: audit records and metrics", create_exec_destroy),
             ("daemon.metrics is admin-only", non_admin_metrics),
             ("failed create: audit records and rollback", failed_create_rolled_back),
             ("lease expiry audited", lease_expiry),
             ("SSH session lost and re-established audited", ssh_lost_and_restored),
             ("limits audited and counted", limits),
             ("daemon.subscribe: order and uid filter, sandboxctl events", subscribe_filtered_and_ordered),
             ("slow subscriber is ended, others unaffected", slow_subscriber),
             ("reconcile re-attach and orphan destroy audited", reconcile_reattach_and_orphan)])


if __name__ == "__main__":
    main()
