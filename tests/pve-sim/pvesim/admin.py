"""The /admin endpoint (same listener, no authentication): simulator state, faults,
settings, the generated ruleset, and per-container controls (kill or restart sshd, no IP,
no sshd, stale locks, a held config flock). README.md lists the requests."""

import json
import os
import re
import threading
import time
import urllib.parse

from .api_cluster import set_pvestatd
from .schema import ParamErr, parse_net


def admin(h, sim, method, url, body):
    path = url.path.rstrip("/")
    try:
        req = json.loads(body) if body else {}
    except ValueError:
        return h.send_json({"error": "bad JSON"}, 400, "Bad Request")
    q = dict(urllib.parse.parse_qsl(url.query))
    req.update({k: v for k, v in q.items() if k not in req})
    m = re.fullmatch(r"/admin/ct/(\d+)(?:/([\w-]+))?", path)
    if path == "/admin/state" and method == "GET":
        with sim.lock:
            cts = {}
            for vmid, ct in sim.cts.items():
                rt = sim.rt.get(vmid, {})
                cts[vmid] = {"node": ct["node"], "running": ct.get("running", False), "ip": rt.get("ip"),
                             "mac": rt.get("mac"), "pid": rt["proc"].pid if rt.get("proc") else None,
                             "lock": ct["conf"].get("lock"), "pool": ct.get("pool"),
                             "template": ct["conf"].get("template") == "1", "netns": sim.net.ct_ns(vmid),
                             "linked_from": ct.get("linked_from")}
            fw = sim.firewall_status()
            return h.send_json({"containers": cts, "nodes": sim.nodes_status(), "leases": dict(sim.leases),
                                "firewall": fw,
                                "settings": sim.settings, "faults": sim.faults,
                                "workers": sim.workers_status(),
                                "no_ip": sorted(sim.no_ip), "tasks": len(sim.tasks),
                                "pvestatd_stalled": sim.pvestatd_stalled,
                                "storages_offline": sorted(f"{n}/{st}" for n, st in sim.storages_offline)})
    if path == "/admin/faults":
        if method == "GET":
            return h.send_json(sim.faults)
        if method == "POST":
            return h.send_json(sim.add_fault(req))
        if method == "DELETE":
            with sim.lock:
                sim.faults.clear()
            return h.send_json({"ok": True})
    mf = re.fullmatch(r"/admin/faults/(\d+)", path)
    if mf and method == "DELETE":
        with sim.lock:
            sim.faults[:] = [f for f in sim.faults if f["id"] != int(mf.group(1))]
        return h.send_json({"ok": True})
    if path == "/admin/settings" and method in ("GET", "PUT", "POST"):
        if method != "GET":
            for k, v in req.items():
                if k not in sim.settings:
                    return h.send_json({"error": f"unknown setting '{k}'"}, 400, "Bad Request")
                if k == "firewall_period" and not 0 <= float(v) <= 60:
                    return h.send_json({"error": "firewall_period must be 0..60"}, 400, "Bad Request")
            for k, v in req.items():
                sim.settings[k] = v
                if k in ("firewall_period", "firewall_phase"):
                    sim.firewall_start_cycle()
        return h.send_json(sim.settings)
    if path == "/admin/workers" and method in ("GET", "POST"):
        return h.send_json(sim.workers_status(reset=method == "POST"))
    if path == "/admin/firewall" and method == "GET":
        with sim.lock:
            return h.send_raw(200, "OK", sim.build_nft().encode(), "text/plain")
    if path == "/admin/firewall/apply" and method == "POST":
        with sim.lock:
            sim.firewall_tick()
        return h.send_json({"ok": True})
    if m:
        return admin_ct(h, sim, method, path, int(m.group(1)), m.group(2), req)
    if path == "/admin/pvestatd" and method in ("GET", "POST", "PUT"):
        if method == "GET":
            return h.send_json(set_pvestatd(sim))
        return h.send_json(set_pvestatd(sim, stalled=req.get("stalled", True) in (True, 1, "1", "true")))
    if path == "/admin/pve-cluster/restart" and method == "POST":
        return h.send_json(set_pvestatd(sim, cluster_restart=True))
    ms = re.fullmatch(r"/admin/storage/([^/]+)/(offline|online)", path)
    if ms and method == "POST":
        name = urllib.parse.unquote(ms.group(1))
        node = req.get("node", sim.cfg["nodes"][0])
        if name not in sim.cfg["storages"] or node not in sim.cfg["nodes"]:
            return h.send_json({"error": f"no storage '{name}' on node '{node}'"}, 404, "Not Found")
        with sim.lock:
            (sim.storages_offline.add if ms.group(2) == "offline" else sim.storages_offline.discard)((node, name))
            return h.send_json({"storage": name, "node": node, "online": (node, name) not in sim.storages_offline})
    mn = re.fullmatch(r"/admin/node/([^/]+)/(down|up)", path)
    if mn and method == "POST":
        node = urllib.parse.unquote(mn.group(1))
        if node not in sim.cfg["nodes"]:
            return h.send_json({"error": f"no node '{node}'"}, 404, "Not Found")
        sim.set_node_online(node, mn.group(2) == "up")
        with sim.lock:
            return h.send_json({"node": node, "online": sim.node_online(node)})
    return h.send_json({"error": f"no admin endpoint {method} {path}"}, 404, "Not Found")


def admin_ct(h, sim, method, path, vmid, act, req):
    """/admin/ct/{vmid}[/act]."""
    with sim.lock:
        ct = sim.cts.get(vmid)
    if ct is None:
        return h.send_json({"error": f"no CT {vmid}"}, 404, "Not Found")
    if act == "kill-sshd" and method == "POST":
        with sim.lock:
            rt = sim.rt.get(vmid)
        if not rt:
            return h.send_json({"error": "not running"}, 409, "Conflict")
        sim.net.kill_proc(rt.get("proc"))
        return h.send_json({"ok": True})
    if act == "restart-sshd" and method == "POST":
        with sim.lock:
            rt = sim.rt.get(vmid)
        if not rt:
            return h.send_json({"error": "not running"}, 409, "Conflict")
        sim.net.kill_proc(rt.get("proc"))
        rt["proc"] = sim.net.start_sshd(vmid, os.path.join(sim.ct_dir(vmid), "rootfs"), sim.ct_dir(vmid))
        return h.send_json({"ok": True})
    if act == "hold-flock" and method == "POST":
        secs = float(req.get("seconds", 12))
        fl = sim.flock(vmid)
        if not fl.acquire(timeout=5):
            return h.send_json({"error": "flock busy"}, 409, "Conflict")

        def release():
            time.sleep(secs)
            fl.release()
        threading.Thread(target=release, daemon=True).start()
        return h.send_json({"ok": True, "seconds": secs})
    if act == "no-sshd" and method in ("POST", "PUT"):
        en = req.get("enable", True) in (True, 1, "1", "true")
        with sim.lock:
            (sim.no_sshd.add if en else sim.no_sshd.discard)(vmid)
        return h.send_json({"ok": True, "no_sshd": en})
    if act == "no-ip" and method in ("POST", "PUT"):
        en = req.get("enable", True) in (True, 1, "1", "true")
        with sim.lock:
            (sim.no_ip.add if en else sim.no_ip.discard)(vmid)
        return h.send_json({"ok": True, "no_ip": en})
    if act == "new-lease" and method == "POST":
        # the DHCP server hands the container another address at its next lease (as after an
        # expired lease taken by another client meanwhile)
        with sim.lock:
            mac = None
            try:
                mac = parse_net(ct["conf"]["net0"])["hwaddr"].upper()
            except (KeyError, ParamErr):
                pass
            old = sim.leases.get(mac)
            taken = set(sim.leases.values())
            new = None
            for a in sim.net.bridge.hosts():
                off = int(a) - int(sim.net.bridge.network_address)
                if off >= 10 and str(a) not in taken:
                    new = str(a)
                    break
            if not mac or not new:
                return h.send_json({"error": "no lease to move"}, 409, "Conflict")
            sim.leases[mac] = new
            sim.save()
        return h.send_json({"ok": True, "old": old, "ip": new})
    if act == "lock":
        with sim.lock:
            if method in ("POST", "PUT"):
                ct["conf"]["lock"] = req.get("lock", "backup")
            elif method == "DELETE":
                ct["conf"].pop("lock", None)
            sim.save()
        return h.send_json({"ok": True, "lock": ct["conf"].get("lock")})
    if act is None and method == "GET":
        with sim.lock:
            rt = sim.rt.get(vmid, {})
            return h.send_json({"ct": ct, "fw": sim.fw.get(vmid), "ip": rt.get("ip"),
                                "rootfs": os.path.join(sim.ct_dir(vmid), "rootfs"),
                                "netns": sim.net.ct_ns(vmid)})
    return h.send_json({"error": f"no admin endpoint {method} {path}"}, 404, "Not Found")
