#!/usr/bin/env python3
"""Background process output at speed: 50 MiB of random bytes written as fast as the container
can, on stdout and stderr at once, are recorded whole and in order in the container's segments
and read back by offset across a segment's end (checksums); a long-poll
wakes when a byte is recorded, also after a burst that left the relay mid-round."""

import hashlib
import time

from e2elib import Env, data_of

MIB = 1 << 20


def sha(c, sid, command):
    r = c.call("sandbox.exec", {"id": sid, "command": command + " | sha256sum"})
    assert r["exit_code"] == 0, r
    return data_of(r, "stdout").decode().split()[0]


def read_span(c, sid, proc, off, n):
    """n bytes from off (reads stop at a segment's end: several may be needed)."""
    out = b""
    while len(out) < n:
        r = c.call("process.read", {"id": sid, "process": proc, "offset": off, "length": n - len(out)})
        assert r["offset"] == off and r["available_from"] == 0 and r["size"] == 50 * MIB, r["offset"]
        d = data_of(r, "data")
        assert d and r["next_offset"] == off + len(d), r["next_offset"]
        out, off = out + d, r["next_offset"]
    return hashlib.sha256(out).hexdigest()


def main():
    # segments of 8 MiB: 50 MiB crosses six of them
    with Env(daemon_config={"sandbox": {"process_output_max_bytes": str(64 * MIB)}}) as env:
        c = env.client()
        sid = c.call("sandbox.create", {})["id"]
        r = c.call("sandbox.exec", {"id": sid, "command": "dd if=/dev/urandom of=/root/src bs=1048576 "
                                    "count=50 2>/dev/null && sha256sum /root/src && stat -c %s /root/src"})
        want, size = data_of(r, "stdout").decode().split()[0::2]
        assert r["exit_code"] == 0 and int(size) == 50 * MIB, r

        t0 = time.monotonic()
        p = c.call("process.start", {"id": sid, "command": "cat /root/src & cat /root/src >&2; wait; exit 3"})
        p = p["process"]
        while True:
            w = c.call("process.wait", {"id": sid, "process": p, "timeout_ms": 30000})
            if w["state"] != "running":
                break
        took = time.monotonic() - t0
        assert w["state"] == "exited" and w["exit_code"] == 3, w
        # every segment in order, each stream whole (the container hashes: reading 100 MiB back
        # through process.read would take most of this test's time)
        for stream in ("out", "err"):
            got = sha(c, sid, f"cd .sandboxd-proc/{p} && i=0; while [ -e {stream}.$i ]; do "
                      f"cat {stream}.$i; i=$((i+1)); done")
            assert got == want, stream
        # and read by offset across a segment's end (8 MiB)
        for off in (0, 8 * MIB - 4096, 50 * MIB - 65536):
            assert read_span(c, sid, p, off, 65536) == sha(
                c, sid, f"dd if=/root/src bs=4096 skip={off // 4096} count=16 2>/dev/null"), off
        print(f"  2 x 50 MiB recorded in {took:.2f} s", flush=True)

        # a long-poll waiting at the end wakes when the byte comes, not at wait_ms
        p = c.call("process.start", {"id": sid, "command": "sleep 1; printf x; sleep 60"})["process"]
        t0 = time.monotonic()
        r = c.call("process.read", {"id": sid, "process": p, "wait_ms": 20000})
        assert data_of(r, "data") == b"x" and time.monotonic() - t0 < 5, (r, time.monotonic() - t0)
        c.call("process.kill", {"id": sid, "process": p})

        # after a fast burst the relay copies in long rounds; a byte that comes while one waits
        # still wakes the long-poll
        p = c.call("process.start", {"id": sid, "command": "dd if=/dev/zero bs=65536 count=32 "
                                     "2>/dev/null; sleep 2; printf tail; sleep 60"})["process"]
        off = 0
        while off < 2 * MIB:
            r = c.call("process.read", {"id": sid, "process": p, "offset": off, "length": MIB,
                                        "wait_ms": 5000})
            off = r["next_offset"]
        t0 = time.monotonic()
        r = c.call("process.read", {"id": sid, "process": p, "offset": off, "wait_ms": 20000})
        assert data_of(r, "data") == b"tail" and time.monotonic() - t0 < 5, (r, time.monotonic() - t0)
        c.call("process.kill", {"id": sid, "process": p})
        c.call("sandbox.destroy", {"id": sid})
        c.close()
    print("ok")


if __name__ == "__main__":
    main()
