"""The HTTPS listener: TLS, one thread per connection, request parsing (query, form and
JSON bodies), the API call, response and error formats as pveproxy sends them, and the
/admin endpoint on the same listener."""

import hashlib
import http.server
import json
import os
import re
import socket
import socketserver
import ssl
import struct
import traceback
import urllib.parse

from . import api, api_cluster, api_lxc, api_nodes, api_tasks, api_firewall, api_snapshot, api_template, api_volume
from .admin import admin
from .auth import authenticate
from .faults import ResetConn, apply_request_faults
from .nodes import node_down_check
from .workers import ct_call_node
from .schema import ApiError
from .util import log, run

# importing the endpoint modules registers their routes (api.ROUTES)
ENDPOINTS = (api_cluster, api_lxc, api_nodes, api_tasks, api_firewall)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pve-api-daemon/3.0"
    sys_version = ""

    def version_string(self):
        return self.server_version
    timeout = 300

    def log_message(self, fmt, *args):
        if self.server.sim.cfg.get("verbose"):
            log("%s %s" % (self.address_string(), fmt % args))

    def handle(self):
        try:
            super().handle()
        except ResetConn:
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            self.close_connection = True
        except (ConnectionError, ssl.SSLError, socket.timeout, OSError):
            self.close_connection = True

    def finish(self):
        try:
            super().finish()
        except (OSError, ssl.SSLError):
            pass

    def send_raw(self, code, reason, body=b"", ctype="application/json;charset=UTF-8"):
        reason = (reason.split("\n", 1)[0] if reason else "")
        if "\r" in reason:
            code, reason = 400, "Bad Request"
        if not reason:
            reason = http.server.BaseHTTPRequestHandler.responses.get(code, ("",))[0]
        self.log_request(code)
        head = [f"HTTP/1.1 {code} {reason}", f"Server: {self.server_version}",
                f"Date: {self.date_time_string()}", "Cache-Control: max-age=0", "Pragma: no-cache",
                f"Expires: {self.date_time_string()}"]
        if body or code < 400 or code >= 500:
            head.append(f"Content-Type: {ctype}")
        head.append(f"Content-Length: {len(body)}")
        if self.close_connection:
            head.append("Connection: close")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1", "replace")
        if self.command != "HEAD":
            data += body
        # one write: headers and body in the same TLS record (no Nagle stall)
        self.wfile.write(data)
        self.wfile.flush()

    def send_json(self, obj, code=200, reason="OK"):
        self.send_raw(code, reason, json.dumps(obj).encode())

    def send_api_error(self, e):
        sim = self.server.sim
        if e.code == 401:
            self.send_raw(401, e.msg, b"")
            return
        if e.code >= 595:
            self.send_raw(e.code, e.msg, b"")
            return
        body = {"data": None}
        if e.errors:
            body["errors"] = e.errors
        if sim.settings["error_format"] == "new":
            body["message"] = e.msg if e.msg.endswith("\n") else e.msg + "\n"
        self.send_json(body, e.code, e.msg)

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_HEAD(self):
        self.dispatch("HEAD")

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > 16 << 20:
            raise ApiError(413, "Request Entity Too Large")
        return self.rfile.read(n) if n > 0 else b""


    def dispatch(self, method):
        sim = self.server.sim
        url = urllib.parse.urlsplit(self.path)
        try:
            if url.path.startswith("/admin"):
                body = self.read_body()
                return admin(self, sim, method, url, body)
            clen = int(self.headers.get("Content-Length") or 0)
            if method == "DELETE" and clen > 0:
                self.read_body()
                raise ApiError(501, "Unexpected content for method 'DELETE'")
            body = self.read_body()
            if not url.path.startswith("/api2/json/") and url.path != "/api2/json":
                raise ApiError(501, f"Method '{method} {url.path}' not implemented")
            rel = url.path[len("/api2/json"):] or "/"
            rel = re.sub(r"/+$", "", rel) or "/"
            token = authenticate(sim, self.headers.get("Authorization"))
            ctype = self.headers.get("Content-Type")

            def work():
                faults = apply_request_faults(sim, method, rel)
                node_down_check(sim, rel)
                params = request_params(method, url.query, ctype, body)
                return api.call(sim, token, faults, method, rel, params)
            node = ct_call_node(rel)
            if node is None or node not in sim.cfg["nodes"] or not sim.node_online(node):
                self.send_json(work())
            else:  # pveproxy hands it to the node's pvedaemon (workers.py)
                self.send_json(sim.proxied(node, work))
        except ResetConn:
            raise
        except ApiError as e:
            self.send_api_error(e)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception as e:
            traceback.print_exc()
            self.send_api_error(ApiError(500, f"internal error: {e}"))


def request_params(method, query, content_type, body):
    """The request's parameters: the query string, and for POST/PUT the body before it."""
    params = {}
    if method in ("GET", "DELETE", "HEAD"):
        for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
            params[k] = v
        return params
    ctype = (content_type or "").split(";")[0].strip().lower()
    if body:
        if ctype == "application/json":
            params.update(json_params(body))
        elif ctype in ("application/x-www-form-urlencoded", ""):
            for k, v in urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
                params[k] = v
        else:
            raise ApiError(506, f"Unsupported content type '{ctype}'")
    for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
        params[k] = v
    return params


def json_params(body):
    """A JSON object body as string parameters: booleans 1/0, numbers as text, null dropped."""
    try:
        jb = json.loads(body)
    except ValueError:
        raise ApiError(400, "malformed JSON body")
    if not isinstance(jb, dict):
        raise ApiError(400, "malformed JSON body")
    params = {}
    for k, v in jb.items():
        if isinstance(v, bool):
            v = 1 if v else 0
        elif isinstance(v, (int, float)):
            v = str(v)
        elif v is None:
            continue
        elif not isinstance(v, str):
            v = json.dumps(v)
        params[k] = v
    return params


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, ctx, sim):
        self.ctx = ctx
        self.sim = sim
        if ":" in addr[0]:
            self.address_family = socket.AF_INET6
        super().__init__(addr, Handler)

    def finish_request(self, request, client_address):
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            request.settimeout(30)
            tls = self.ctx.wrap_socket(request, server_side=True)
            tls.settimeout(300)
        except (OSError, ssl.SSLError):
            return
        try:
            Handler(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        pass


def make_tls(sim):
    cert, key = sim.cfg["tls_cert"], sim.cfg["tls_key"]
    if not cert:
        cert, key = sim.path("pve-ssl.pem"), sim.path("pve-ssl.key")
        if not (os.path.exists(cert) and os.path.exists(key)):
            host = sim.cfg["listen"]
            san = f"IP:{host}" if re.fullmatch(r"[\d.]+|.*:.*", host) else f"DNS:{host}"
            run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-days", "3650", "-subj", "/CN=pve-sim/O=pve-sim", "-addext",
                 f"subjectAltName={san},IP:127.0.0.1,DNS:localhost", "-keyout", key, "-out", cert])
            os.chmod(key, 0o600)
    der = ssl.PEM_cert_to_DER_cert(open(cert).read())
    fp = ":".join("%02X" % b for b in hashlib.sha256(der).digest())
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx, fp, cert
