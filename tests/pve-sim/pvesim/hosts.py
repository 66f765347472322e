"""The simulated internet and LAN hosts: HTTP on 80 (GET /bytes/N: N zero bytes, at most
256 MiB, and PUT /sink: reads a body of up to 256 MiB and answers its size, for throughput
checks), one-line banners on 443 and 22 (on 443, a client whose first byte, within 0.3 s,
starts a TLS handshake gets HTTPS instead: a self-signed certificate, any request answered
"pve-sim NAME https"), and a
DNS server on 53. The resolver answers A queries for the names it serves (internet.test,
allowed.test, denied.test: each an address of the internet host, which serves them all)
with their addresses, names under .invalid with NXDOMAIN, and any other name with the
internet host. A page or banner fetched from an address other than the host's own names
that address's name ("pve-sim internet http allowed.test"). Runs as
"pve-sim --serve-host NAME" inside that host's namespace."""

import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time


BYTES_MAX = 256 << 20


def serve_host(name, ip, dns_answer, names=None):
    names = {k.lower(): v for k, v in (names or {}).items()}
    by_addr = {v: k for k, v in names.items()}

    def label(conn):
        """The name of the address the peer connected to, when it is not the host's own."""
        try:
            local = conn.getsockname()[0]
        except OSError:
            return ""
        return " " + by_addr[local] if local != ip and local in by_addr else ""

    def tcp_banner(port, payload_fn):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(64)

        def loop():
            while True:
                conn, _ = s.accept()
                threading.Thread(target=payload_fn, args=(conn,), daemon=True).start()
        threading.Thread(target=loop, daemon=True).start()

    def http(conn):
        try:
            conn.settimeout(5)
            req = conn.recv(4096)
            m = re.match(rb"GET /bytes/(\d{1,9}) ", req)
            if m and int(m.group(1)) <= BYTES_MAX:
                n = int(m.group(1))
                conn.settimeout(60)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             b"Content-Length: %d\r\n\r\n" % n)
                chunk = bytes(65536)
                while n > 0:
                    conn.sendall(chunk[:min(n, len(chunk))])
                    n -= min(n, len(chunk))
                conn.close()
                return
            m = re.match(rb"PUT /sink ", req)
            if m:
                sink(conn, req)
                return
            body = f"pve-sim {name} http{label(conn)}\n".encode()
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))
        except OSError:
            pass
        conn.close()

    def sink(conn, req):
        while b"\r\n\r\n" not in req and len(req) < 16384:
            chunk = conn.recv(4096)
            if not chunk:
                return
            req += chunk
        head, _, body = req.partition(b"\r\n\r\n")
        m = re.search(rb"(?i)\r\ncontent-length: *(\d{1,9})", head)
        n = int(m.group(1)) if m else 0
        if n > BYTES_MAX:
            conn.close()
            return
        if re.search(rb"(?i)\r\nexpect: *100-continue", head):
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        got = len(body)
        conn.settimeout(60)
        while got < n:
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += len(chunk)
        text = b"%d\n" % got
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(text), text))
        conn.close()

    def banner(text):
        def f(conn):
            try:
                conn.sendall(text.replace("\n", label(conn) + "\n", 1).encode() if text.endswith(" tls\n")
                             else text.encode())
                conn.settimeout(2)
                conn.recv(1024)
            except OSError:
                pass
            conn.close()
        return f

    def qname(q, i):
        """The question's name, lower case, and the offset of its end; None when malformed."""
        labels = []
        while i < len(q) and q[i] != 0:
            if q[i] > 63 or i + 1 + q[i] > len(q):
                return None, i
            labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace").lower())
            i += q[i] + 1
        return ".".join(labels), i

    def dns_answer_for(q):
        if len(q) < 12:
            return None
        tid = q[:2]
        qn, i = qname(q, 12)
        qend = i + 5
        if qn is None or qend > len(q):
            return tid + struct.pack("!HHHHH", 0x8181, 0, 0, 0, 0)  # FORMERR
        question = q[12:qend]
        qtype = struct.unpack("!H", q[i + 1:i + 3])[0]
        ans = b""
        an = 0
        rcode = 0
        if qn == "invalid" or qn.endswith(".invalid"):
            rcode = 3  # NXDOMAIN
        elif qtype == 1:
            ans = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(names.get(qn, dns_answer))
            an = 1
        hdr = tid + struct.pack("!HHHHH", 0x8180 | rcode, 1, an, 0, 0)
        return hdr + question + ans

    def udp_dns():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", 53))
        while True:
            q, addr = s.recvfrom(2048)
            a = dns_answer_for(q)
            if a:
                s.sendto(a, addr)

    def tcp_dns(conn):
        try:
            conn.settimeout(5)
            ln = struct.unpack("!H", conn.recv(2))[0]
            q = b""
            while len(q) < ln:
                chunk = conn.recv(ln - len(q))
                if not chunk:
                    break
                q += chunk
            a = dns_answer_for(q)
            if a:
                conn.sendall(struct.pack("!H", len(a)) + a)
        except (OSError, struct.error):
            pass
        conn.close()

    def tls_context():
        d = tempfile.mkdtemp(prefix="pve-sim-tls-")
        key, crt = os.path.join(d, "key.pem"), os.path.join(d, "crt.pem")
        try:
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                            f"/CN={name}.test", "-keyout", key, "-out", crt],
                           check=True, capture_output=True)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(crt, key)
            return ctx
        except (OSError, subprocess.CalledProcessError, ssl.SSLError):
            return None
        finally:
            shutil.rmtree(d, ignore_errors=True)  # the context holds them

    tls_ctx = tls_context()
    tls_banner = banner(f"pve-sim {name} tls\n")

    def https(conn):
        try:
            conn.settimeout(0.3)
            try:
                first = conn.recv(1, socket.MSG_PEEK)
            except socket.timeout:
                first = b""
            if first != b"\x16" or tls_ctx is None:
                conn.settimeout(None)
                tls_banner(conn)
                return
            conn.settimeout(5)
            lbl = label(conn)
            s = tls_ctx.wrap_socket(conn, server_side=True)
            req = b""
            while b"\r\n\r\n" not in req and len(req) < 16384:
                chunk = s.recv(4096)
                if not chunk:
                    break
                req += chunk
            body = f"pve-sim {name} https{lbl}\n".encode()
            s.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
            s.close()
        except (OSError, ssl.SSLError):
            pass
        conn.close()

    tcp_banner(80, http)
    tcp_banner(443, https)
    tcp_banner(22, banner(f"SSH-2.0-pve-sim-{name}\r\n"))
    tcp_banner(53, tcp_dns)
    threading.Thread(target=udp_dns, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    while True:
        time.sleep(3600)
