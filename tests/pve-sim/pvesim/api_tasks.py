"""Task endpoints: /nodes/{node}/tasks (list), .../tasks/{upid}/status and .../log."""

from .api import route
from .schema import P, perr
from .tasks import UPID_RE


def upid_task(c, check_exists=True):
    upid = c.pp["upid"]
    m = UPID_RE.match(upid)
    if not m:
        raise perr({"upid": "unable to parse worker upid"})
    t = c.sim.tasks.get(upid)
    if t is not None and (t.node != c.pp["node"] or m.group(1) != c.pp["node"]):
        t = None
    return t


@route("GET", "/nodes/{node}/tasks/{upid}/status")
def h_task_status(c):
    c.args({})
    c.node()
    t = upid_task(c)
    if t is None:
        raise perr({"upid": "no such task"})
    return t.status_json()


@route("GET", "/nodes/{node}/tasks/{upid}/log")
def h_task_log(c):
    a = c.args({"start": P("int", min=0), "limit": P("int", min=0), "download": P("bool")})
    c.node()
    if a.get("download") and ("start" in a or "limit" in a):
        raise perr({"download": "cannot be used with start or limit"})
    t = upid_task(c)
    if t is None:
        c.extra["total"] = 1
        return [{"n": 1, "t": "unable to open file - No such file or directory"}]
    lines = list(t.lines)
    c.extra["total"] = len(lines)
    if not lines:
        return [{"n": 1, "t": "no content"}]
    start = a.get("start", 0)
    limit = a.get("limit", 50)
    sel = lines[start:] if limit == 0 or a.get("download") else lines[start:start + limit]
    return [{"n": start + i + 1, "t": l} for i, l in enumerate(sel)]


@route("GET", "/nodes/{node}/tasks")
def h_tasks(c):
    a = c.args({"vmid": P("int", min=100), "limit": P("int", min=0), "start": P("int", min=0),
                "source": P("enum", enum=["archive", "active", "all"]), "typefilter": P("string"),
                "errors": P("bool"), "userfilter": P("string"), "statusfilter": P("string"),
                "since": P("int"), "until": P("int")})
    node = c.node()
    out = []
    for t in sorted(c.sim.tasks.values(), key=lambda t: -t.starttime):
        if t.node != node:
            continue
        if "vmid" in a and t.id != str(a["vmid"]):
            continue
        if a.get("source") == "active" and t.status != "running":
            continue
        d = t.status_json()
        if t.status == "stopped":
            d["status"] = t.exitstatus
            d["endtime"] = t.starttime
        out.append(d)
    return out[a.get("start", 0):a.get("start", 0) + (a.get("limit") or 50)]
