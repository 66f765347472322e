#!/usr/bin/env python3
"""Audit records under journald: with stderr being "the journal" ($JOURNAL_STREAM names
it), an audit record is one native journal entry (sd_journal_sendv) with MESSAGE,
PRIORITY, SYSLOG_IDENTIFIER and the SANDBOXD_* fields, and not a logfmt line on stderr.

No journald runs in the test environment, so the test stands one in: in a private mount
namespace (meson runs this script under `unshare -m`) a tmpfs hides /run/systemd and a
datagram socket at /run/systemd/journal/socket receives what the daemon sends, which the
test decodes with the journal's native protocol. Usage: test_journal.py SANDBOXD"""

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77


def parse_native(data):
    """The journal native protocol: KEY=value lines, or KEY\\n<le64 size><bytes>\\n."""
    fields = {}
    i = 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            (n,) = struct.unpack("<Q", data[nl + 1:nl + 9])
            v = data[nl + 9:nl + 9 + n]
            assert data[nl + 9 + n:nl + 10 + n] == b"\n"
            i = nl + 10 + n
        fields.setdefault(k.decode(), []).append(v.decode())
    return fields


def main():
    sandboxd = sys.argv[1]
    if os.geteuid() != 0:
        print("needs root (a private mount namespace)")
        sys.exit(SKIP)
    # unshare -m gave us our own mount table: hide the host's /run/systemd.
    os.makedirs("/run/systemd", exist_ok=True)
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/run/systemd"], check=True)
    os.makedirs("/run/systemd/journal")
    journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    journal.bind("/run/systemd/journal/socket")
    journal.settimeout(20)

    d = tempfile.mkdtemp(prefix="sandboxd-journal-")
    sock = os.path.join(d, "sandboxd.sock")
    conf = os.path.join(d, "sandboxd.conf")
    with open(conf, "w") as f:
        f.write(f"[server]\nsocket = {sock}\nsocket_mode = 0600\nsocket_group =\n"
                "max_request_bytes = 65536\n")
    err_path = os.path.join(d, "stderr")
    err = open(err_path, "w")
    st = os.fstat(err.fileno())
    env = dict(os.environ)
    env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
    env.pop("NOTIFY_SOCKET", None)
    env.pop("LISTEN_FDS", None)
    proc = subprocess.Popen([sandboxd, "--config", conf, "--log-level", "info"], stdout=err,
                            stderr=err, env=env)
    try:
        deadline = time.time() + 20
        while not os.path.exists(sock):
            assert proc.poll() is None and time.time() < deadline, open(err_path).read()
            time.sleep(0.05)
        time.sleep(0.1)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(sock)
        try:
            c.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{"x":"' +
                      b"a" * 70000 + b'"}}\n')
        except (BrokenPipeError, ConnectionResetError):
            pass
        c.close()
        entry = None
        while entry is None:
            fields = parse_native(journal.recv(1 << 20))
            if fields.get("SANDBOXD_EVENT") == ["limit.hit"]:
                entry = fields
        for k in ("MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "SANDBOXD_EVENT", "SANDBOXD_CALLER_UID",
                  "SANDBOXD_REASON"):
            assert len(entry.get(k, [])) == 1, (k, entry)
        assert entry["PRIORITY"] == ["5"], entry  # notice
        assert entry["SYSLOG_IDENTIFIER"] == ["sandboxd"], entry
        assert entry["SANDBOXD_CALLER_UID"] == [str(os.getuid())], entry
        assert entry["SANDBOXD_REASON"] == ["request_bytes"], entry
        assert "request_bytes" in entry["MESSAGE"][0], entry
        # fields that are not known are left out, never sent empty
        for k in ("SANDBOXD_SANDBOX", "SANDBOXD_VMID", "SANDBOXD_NODE", "SANDBOXD_OWNER_UID"):
            assert k not in entry, (k, entry)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
        text = open(err_path).read()
        assert rc == 0, text
        assert "[audit ]" not in text, text  # the record went to the journal only
        assert "<6>[main  ] sandboxd" in text, text  # ordinary lines keep their <N> prefixes
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(d, ignore_errors=True)
    print("ok: the audit record arrived as a native journal entry with its fields")


if __name__ == "__main__":
    main()
