"""The API's route table, the request context handlers get, and the call of a handler.

Endpoint modules (api_cluster, api_lxc, api_tasks, api_firewall) register handlers with
@route(METHOD, "/path/{param}"); a handler takes a Ctx and returns the "data" value or
raises ApiError."""

import re
import urllib.parse

from .schema import NODE_RE, P, ApiError, ParamErr, check_value, die, perr, validate
from .tasks import Task, run_task

ROUTES = []   # (method, compiled path pattern, handler), tried in order


def route(method, pattern):
    """Decorator: serve METHOD pattern ("/nodes/{node}/lxc/{vmid}", each {name} one segment)."""
    rx = re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern) + "$")

    def deco(fn):
        ROUTES.append((method, rx, fn))
        return fn
    return deco


class Ctx:
    """What a handler gets: the simulator, the caller's token, the request parameters, the path
    parameters (pp), the matched faults; permission checks, validation and task start."""

    def __init__(self, sim, token, params, path_params, faults, method, path):
        self.sim = sim
        self.token = token
        self.params = params
        self.pp = path_params
        self.faults = faults
        self.method = method
        self.path = path
        self.extra = {}

    def need(self, path, priv):
        if not self.token.has(path, priv):
            raise ApiError(403, f"Permission check failed ({path}, {priv})")

    def need_vm(self, vmid, priv):
        ct = self.sim.cts.get(vmid)
        if ct and ct.get("pool") and self.token.has(f"/pool/{ct['pool']}", priv):
            return
        self.need(f"/vms/{vmid}", priv)

    def can_vm(self, vmid, priv):
        try:
            self.need_vm(vmid, priv)
            return True
        except ApiError:
            return False

    def args(self, schema, required=(), patterns=()):
        return validate(self.params, schema, required, patterns)

    def node(self):
        n = self.pp["node"]
        if n not in self.sim.cfg["nodes"]:
            raise die(f"hostname lookup '{n}' failed - failed to get address info for: {n}: Name or service not known")
        return n

    def vmid(self):
        return self.pp["vmid"]

    def task_fault(self):
        err, warns = None, 0
        for f in self.faults:
            if f.get("task_error"):
                err = f["task_error"]
            if f.get("task_warnings"):
                warns += int(f["task_warnings"])
        return err, warns

    def start_task(self, node, ttype, tid, fn):
        sim = self.sim
        t = Task(sim, node, ttype, tid, self.token.id)
        err, warns = self.task_fault()
        with sim.lock:
            sim.tasks[t.upid] = t
        sim.save_task(t)
        return run_task(t, fn, err, warns)


def find_route(method, path):
    """The handler for METHOD path (URL-decoded, relative to /api2/json) and its path parameters."""
    for m, rx, fn in ROUTES:
        mm = rx.match(path)
        if mm and m == method:
            return fn, mm.groupdict()
    raise ApiError(501, f"Method '{method} {path}' not implemented")


def check_path_params(pp, params):
    """Path parameters: conflicts with body or query values, then type checks."""
    errors = {}
    for k, v in pp.items():
        if k in params:
            if str(params[k]) != v:
                errors[k] = "duplicate parameter (already defined in URI) with conflicting values!"
            del params[k]
    if errors:
        raise perr(errors)
    if "vmid" in pp:
        try:
            pp["vmid"] = check_value(pp["vmid"], P("int", min=100, max=999999999))
        except ParamErr as e:
            raise perr({"vmid": str(e)})
    if "node" in pp and not re.fullmatch(NODE_RE, pp["node"]):
        raise perr({"node": "invalid format - value does not look like a valid node name\n"})


def call(sim, token, faults, method, rel, params):
    """Run the handler for an authenticated request; rel is the path after /api2/json.
    Returns the response body: {"data": ...} plus what the handler put in ctx.extra."""
    relu = "/".join(urllib.parse.unquote(x) for x in rel.split("/"))
    fn, pp = find_route(method, relu)
    check_path_params(pp, params)
    ctx = Ctx(sim, token, params, pp, faults, method, relu)
    out = {"data": fn(ctx)}
    out.update(ctx.extra)
    return out
