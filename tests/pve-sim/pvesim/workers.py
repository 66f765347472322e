"""pvedaemon's workers and pveproxy's proxy timeout. Every container call
(/nodes/NODE/lxc...) is a `protected` method that pveproxy hands to the node's pvedaemon,
which serves `pvedaemon_workers` (3) requests at once; the rest wait for a worker. pveproxy
gives up after `proxy_timeout` (30 s) with a 596 while the call still runs to its end."""

import re
import threading
import traceback

from .faults import ResetConn
from .schema import ApiError

CT_CALL = re.compile(r"^/nodes/([^/]+)/lxc(?:/|$)")


class WorkersMixin:
    """Sim methods: the per-node worker count (busy, waiting, peak of busy, peak of busy plus
    waiting: the calls the clients had in flight at once)."""

    def workers_setup(self):
        self.wk_cond = threading.Condition()
        self.wk = {}  # node -> {"busy", "waiting", "peak", "served", "timeouts"}

    def _wk(self, node):
        return self.wk.setdefault(node, {"busy": 0, "waiting": 0, "peak": 0, "inflight_peak": 0,
                                         "served": 0, "timeouts": 0})

    def worker_acquire(self, node):
        with self.wk_cond:
            w = self._wk(node)
            w["waiting"] += 1
            w["inflight_peak"] = max(w["inflight_peak"], w["busy"] + w["waiting"])
            while w["busy"] >= max(1, int(self.settings["pvedaemon_workers"])):
                self.wk_cond.wait()
            w["waiting"] -= 1
            w["busy"] += 1
            w["peak"] = max(w["peak"], w["busy"])

    def worker_release(self, node):
        with self.wk_cond:
            w = self._wk(node)
            w["busy"] -= 1
            w["served"] += 1
            self.wk_cond.notify_all()

    def workers_status(self, reset=False):
        with self.wk_cond:
            out = {n: dict(w) for n, w in self.wk.items()}
            if reset:
                for w in self.wk.values():
                    w["peak"] = w["busy"]
                    w["inflight_peak"] = w["busy"] + w["waiting"]
                    w["served"] = 0
                    w["timeouts"] = 0
            return out

    def proxied(self, node, fn):
        """Runs fn (the call) on one of node's workers; returns its result, or raises a 596
        when proxy_timeout passes first (the call goes on in the background)."""
        box = {}
        done = threading.Event()

        def run():
            self.worker_acquire(node)
            try:
                box["out"] = fn()
            except (ApiError, ResetConn) as e:
                box["exc"] = e
            except Exception as e:  # noqa: BLE001 - reported as pveproxy would
                traceback.print_exc()
                box["exc"] = ApiError(500, f"internal error: {e}")
            finally:
                self.worker_release(node)
                done.set()

        threading.Thread(target=run, daemon=True).start()
        if not done.wait(float(self.settings["proxy_timeout"])):
            with self.wk_cond:
                self._wk(node)["timeouts"] += 1
            raise ApiError(596, "Connection timed out")
        if "exc" in box:
            raise box["exc"]
        return box["out"]


def ct_call_node(rel):
    """The node of a container call (a path under /nodes/NODE/lxc), else None."""
    m = CT_CALL.match(rel)
    return m.group(1) if m else None
