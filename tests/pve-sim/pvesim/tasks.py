"""Worker tasks: UPIDs, log lines, exit status, the stored form, and the worker thread."""

import re
import threading
import time
import traceback

from .schema import ApiError

UPID_RE = re.compile(r"^UPID:([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?):([0-9A-Fa-f]{8}):([0-9A-Fa-f]{8,9}):"
                     r"([0-9A-Fa-f]{8}):([^:\s/]+):([^:\s/]*):([^:\s/]+):$")


class TaskFail(Exception):
    pass


class Task:
    def __init__(self, sim, node, ttype, tid, user):
        self.sim = sim
        self.node = node
        self.type = ttype
        self.id = str(tid)
        self.user = user
        with sim.lock:
            sim.task_pid += 1
            self.pid = sim.task_pid
        self.pstart = int((time.monotonic() - sim.boot_mono + 1000) * 100)
        self.starttime = int(time.time())
        self.upid = "UPID:%s:%08X:%08X:%08X:%s:%s:%s:" % (node, self.pid, self.pstart, self.starttime,
                                                         ttype, self.id, user)
        self.lines = []
        self.status = "running"
        self.exitstatus = None
        self.warnings = 0
        self.done = threading.Event()

    def log(self, line):
        self.lines.append(line)

    def warn(self, msg):
        self.lines.append("WARN: " + msg)
        self.warnings += 1

    def finish(self, err=None):
        if err is not None:
            err = err.strip().replace("\n", " ")
            self.lines.append("TASK ERROR: " + err)
            self.exitstatus = err
        elif self.warnings:
            self.lines.append(f"TASK WARNINGS: {self.warnings}")
            self.exitstatus = f"WARNINGS: {self.warnings}"
        else:
            self.lines.append("TASK OK")
            self.exitstatus = "OK"
        self.status = "stopped"
        self.sim.save_task(self)
        self.done.set()

    def to_json(self):
        return {"upid": self.upid, "node": self.node, "pid": self.pid, "pstart": self.pstart,
                "starttime": self.starttime, "type": self.type, "id": self.id, "user": self.user,
                "status": self.status, "exitstatus": self.exitstatus, "lines": self.lines}

    @classmethod
    def from_json(cls, sim, d):
        t = cls.__new__(cls)
        t.sim = sim
        for k in ("upid", "node", "pid", "pstart", "starttime", "type", "id", "user", "status",
                  "exitstatus", "lines"):
            setattr(t, k, d[k])
        t.warnings = 0
        t.done = threading.Event()
        if t.status == "running":
            # the worker died with the previous simulator process
            t.status = "stopped"
            t.exitstatus = "unexpected status"
        t.done.set()
        return t

    def status_json(self):
        d = {"upid": self.upid, "node": self.node, "pid": self.pid, "pstart": self.pstart,
             "starttime": self.starttime, "type": self.type, "id": self.id, "user": self.user,
             "status": self.status}
        if "!" in self.user:
            d["user"], d["tokenid"] = self.user.split("!", 1)
        if self.status == "stopped":
            d["exitstatus"] = self.exitstatus
        return d


def run_task(t, fn, err, warns):
    """Run fn(t, err) in a worker thread; t ends with its error, the simulated warnings or OK."""
    def body():
        try:
            fn(t, err)
            for i in range(warns):
                t.warn("simulated warning")
            t.finish()
        except (TaskFail, ApiError) as e:
            t.finish(str(e))
        except Exception as e:
            traceback.print_exc()
            t.finish(f"{e}")
    threading.Thread(target=body, daemon=True).start()
    return t.upid
