"""Fault injection: the fault list (config "faults", POST /admin/faults), matching a request
against it, and the per-request effects (latency, TCP reset, hang, error status). Task
effects (task_error, task_warnings) are applied by the request context when it starts a
task."""

import fnmatch
import random
import time

from .schema import ApiError


class ResetConn(Exception):
    """The connection is to be reset (RST, no response)."""


class FaultsMixin:
    """Sim methods: the fault list."""

    def add_fault(self, f):
        f = dict(f)
        with self.lock:
            self.fault_seq += 1
            f["id"] = self.fault_seq
            f.setdefault("method", "*")
            f.setdefault("path", "*")
            f.setdefault("probability", 1.0)
            self.faults.append(f)
        return f

    def match_faults(self, method, path):
        out = []
        with self.lock:
            for f in list(self.faults):
                if f["method"] not in ("*", method):
                    continue
                if not fnmatch.fnmatchcase(path, f["path"]):
                    continue
                if random.random() >= float(f["probability"]):
                    continue
                if "count" in f:
                    if f["count"] <= 0:
                        continue
                    f["count"] -= 1
                    if f["count"] <= 0:
                        self.faults.remove(f)
                out.append(f)
        return out


def apply_request_faults(sim, method, path):
    """Match the faults for one API request and apply their request effects: latency first,
    then reset, hang or an error status. Returns the matched faults (for task effects)."""
    faults = sim.match_faults(method, path)
    for f in faults:
        if f.get("latency"):
            time.sleep(float(f["latency"]))
    for f in faults:
        if f.get("reset"):
            raise ResetConn()
        if f.get("hang"):
            end = time.time() + float(f.get("hang_seconds", 3600))
            while time.time() < end and not sim.closed:
                time.sleep(0.1)
            raise ResetConn()
        if f.get("status"):
            code = int(f["status"])
            msg = f.get("message") or {500: "simulated failure", 595: "No route to host",
                                       596: "Connection timed out"}.get(code, "simulated failure")
            raise ApiError(code, msg)
    return faults
