#!/usr/bin/env python3
"""The full agent session through the socket, on one sandbox: exec (output, env, cwd, stdin,
argv, streaming, truncation, timeout killing the process tree, as a user), files (binary, sizes, parents,
errors), the internet toggle with real reachability, sshd loss, destroy (waited for and not)."""

import json
import os
import socket
import time

from e2elib import Env, RpcError, b64, data_of, run

INET_HTTP = "pve-sim internet http"


def main():
    with Env() as env:
        c = env.client()
        sb = {}

        def create():
            t0 = time.time()
            r = c.call("sandbox.create", {"labels": {"task": "e2e"}, "memory_mb": 256})
            assert r["state"] == "ready", r
            assert r["id"].startswith("sb-") and r["ip"] and r["vmid"], r
            assert r["internet"] is False and r["memory_mb"] == 256 and r["labels"] == {"task": "e2e"}, r
            assert r["owner_uid"] == 0 and r["expires_at"] > r["created_at"], r
            sb.update(r)
            cts = env.containers()
            assert r["vmid"] in cts and cts[r["vmid"]]["running"], cts
            conf = env.sim.ok("GET", f"/nodes/pve/lxc/{r['vmid']}/config")
            assert "sandboxd:v1" in conf.get("description", ""), conf
            assert f"sandbox={r['id']}" in conf["description"], conf
            assert int(conf["memory"]) == 256, conf
            fw = env.sim.ok("GET", f"/nodes/pve/lxc/{r['vmid']}/firewall/options")
            assert int(fw.get("enable", 0)) == 1 and fw.get("policy_out") == "REJECT", fw
            got = c.call("sandbox.get", {"id": r["id"]})
            assert got["id"] == r["id"] and got["state"] == "ready", got
            lst = c.call("sandbox.list", {"labels": {"task": "e2e"}})["sandboxes"]
            assert [s["id"] for s in lst] == [r["id"]], lst
            assert c.call("sandbox.list", {"labels": {"task": "other"}})["sandboxes"] == []
            st = c.call("daemon.status")
            assert st["sandboxes"]["ready"] == 1 and st["proxmox"]["reachable"] in (True, None), st
            print(f"  create took {time.time() - t0:.2f} s")

        def exec_basic():
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo hello; echo oops >&2; exit 3"})
            assert r["stdout"] == "hello\n" and r["stderr"] == "oops\n", r
            assert r["exit_code"] == 3 and r["signal"] is None and r["timed_out"] is False, r
            r = c.call("sandbox.exec", {"id": sb["id"], "argv": ["printf", "%s|", "a b", "it's", "$HOME"]})
            assert r["stdout"] == "a b|it's|$HOME|", r
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "pwd; echo $FOO; cat",
                                        "cwd": "/tmp", "env": {"FOO": "b a r"}, "stdin": "in put"})
            assert r["stdout"] == "/tmp\nb a r\nin put", r
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "cat", "stdin_b64": b64(b"\xff\x00\x01")})
            assert data_of(r, "stdout") == b"\xff\x00\x01" and "stdout_b64" in r, r
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "kill -9 $$"})
            assert r["signal"] == "SIGKILL" and r["exit_code"] is None, r

        def exec_stream():
            i = c.send("sandbox.exec", {"id": sb["id"], "stream": True,
                                        "command": "echo one; sleep 0.3; echo two >&2; echo three"})
            r = c.wait(i)
            assert "stdout" not in r and r["exit_code"] == 0, r
            notes = [n["params"] for n in c.notes if n.get("method") == "exec.output"
                     and n["params"]["request_id"] == i]
            out = "".join(n["data"] for n in notes if n["stream"] == "stdout")
            err = "".join(n["data"] for n in notes if n["stream"] == "stderr")
            assert out == "one\nthree\n" and err == "two\n", notes

        def exec_truncated():
            r = c.call("sandbox.exec", {"id": sb["id"], "max_output_bytes": 1000,
                                        "command": "head -c 300000 /dev/zero | tr '\\0' a; "
                                                   "head -c 5000 /dev/zero | tr '\\0' b >&2"})
            assert r["stdout"] == "a" * 1000 and r["stdout_truncated"] is True, (len(r["stdout"]), r["stdout_truncated"])
            assert r["stderr"] == "b" * 1000 and r["stderr_truncated"] is True, r["stderr_truncated"]
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "head -c 2000000 /dev/zero | tr '\\0' c"})
            assert len(r["stdout"]) == 1 << 20 and r["stdout_truncated"] is True, len(r["stdout"])

        def exec_timeout_kills_tree():
            t0 = time.time()
            r = c.call("sandbox.exec", {"id": sb["id"], "timeout_ms": 1000,
                                        "command": "(sleep 4471 &); (setsid sleep 4472 &); sleep 4473 & "
                                                   "echo started; sleep 4474"})
            assert r["timed_out"] is True and r["stdout"] == "started\n", r
            assert time.time() - t0 < 10, time.time() - t0
            # killed with the exec's PID namespace; the kernel may take a moment on a loaded machine.
            # (pve-sim's `nsenter -m -t 1 ps` lists every process of the host: numbers no other
            # test uses)
            deadline = time.time() + 10
            while True:
                r = c.call("sandbox.exec", {"id": sb["id"], "command": "nsenter -m -t 1 ps -o args | grep '[s]leep 447[1-4]' || true"})
                if r["stdout"] == "" or time.time() > deadline:
                    break
                time.sleep(0.2)
            assert r["stdout"] == "", r

        def exec_as_user():
            # This busybox has no adduser: the users are written into /etc/passwd and /etc/group.
            r = c.call("sandbox.exec", {"id": sb["id"], "command":
                       "echo 'ann:x:1234:1234::/home/ann:/bin/sh' >>/etc/passwd && "
                       "printf 'ann:x:1234:\\ntools:x:2345:ann\\n' >>/etc/group && "
                       "mkdir -p /home/ann && chown 1234:1234 /home/ann"})
            assert r["exit_code"] == 0, r
            r = c.call("sandbox.exec", {"id": sb["id"], "user": "ann", "env": {"USER": "mine"},
                                        "command": "id -u; id -G; echo $HOME $LOGNAME $USER; pwd; echo hi >f"})
            assert r["stdout"] == "1234\n1234 2345\n/home/ann ann mine\n/home/ann\n" and r["exit_code"] == 0, r
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "stat -c '%u %g' /home/ann/f"})
            assert r["stdout"] == "1234 1234\n", r
            r = c.call("sandbox.exec", {"id": sb["id"], "user": "1234", "argv": ["id", "-un"], "stream": True})
            out = "".join(n["params"]["data"] for n in c.notes if n.get("method") == "exec.output")
            assert r["exit_code"] == 0 and out.endswith("ann\n"), (r, out)
            # A uid without a passwd entry: gid = uid, HOME=/, no USER.
            r = c.call("sandbox.exec", {"id": sb["id"], "user": 4321, "cwd": "/tmp",
                                        "command": "id -u; id -g; echo $HOME ${USER-none}; pwd; touch /root/x"})
            assert r["stdout"] == "4321\n4321\n/ none\n/tmp\n" and r["exit_code"] != 0, r
            for stream in (False, True):
                e = c.error("sandbox.exec", {"id": sb["id"], "user": "bob", "stream": stream,
                                             "command": "touch /tmp/ran"})
                assert e.code == -32602 and e.data.get("param") == "user", e.err
                assert "no such user" in e.err["message"] + str(e.data), e.err
            # With a passed descriptor (the file session's exec): the same error.
            rd, wr = os.pipe()
            i = next(c.ids)
            line = {"jsonrpc": "2.0", "id": i, "method": "sandbox.exec",
                    "params": {"id": sb["id"], "user": "bob", "command": "touch /tmp/ran", "stdout_fd": 0}}
            with c.lock:
                socket.send_fds(c.sock, [(json.dumps(line) + "\n").encode()], [wr])
            os.close(wr)
            try:
                c.wait(i)
                raise AssertionError("an unknown user ran")
            except RpcError as e:
                assert e.code == -32602 and e.data.get("param") == "user", e.err
            os.close(rd)
            for bad in ("-x", "a b", "x" * 33, 2 ** 31, "2147483648", -1, True):
                e = c.error("sandbox.exec", {"id": sb["id"], "user": bad, "command": "touch /tmp/ran"})
                assert e.code == -32602 and e.data.get("param") == "user", (bad, e.err)
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "[ -e /tmp/ran ] && echo ran || echo no"})
            assert r["stdout"] == "no\n", r
            # The timeout still kills the whole tree of a user's command.
            r = c.call("sandbox.exec", {"id": sb["id"], "timeout_ms": 1000, "user": "ann",
                                        "command": "(sleep 4481 &); (setsid sleep 4482 &); sleep 4483 & "
                                                   "echo started; sleep 4484"})
            assert r["timed_out"] is True and r["stdout"] == "started\n", r
            deadline = time.time() + 10
            while True:
                r = c.call("sandbox.exec", {"id": sb["id"], "command": "nsenter -m -t 1 ps -o args | grep '[s]leep 448[1-4]' || true"})
                if r["stdout"] == "" or time.time() > deadline:
                    break
                time.sleep(0.2)
            assert r["stdout"] == "", r

        def disconnect_kills_exec():
            # The daemon notices the client is gone when a write fails: a streaming exec's
            # next notification. The exec's whole process tree is then killed.
            c2 = env.client()
            c2.send("sandbox.exec", {"id": sb["id"], "stream": True, "timeout_ms": 120000,
                                     "command": "sleep 4476 & while true; do echo tick; sleep 0.2; done"})
            deadline = time.time() + 10
            while not c2.notes:
                assert time.time() < deadline, "no exec.output notification"
                time.sleep(0.05)
            c2.close()
            deadline = time.time() + 15
            while True:
                r = c.call("sandbox.exec", {"id": sb["id"], "command": "nsenter -m -t 1 ps -o args | grep '[s]leep 447[6]' || true"})
                if r["stdout"] == "":
                    break
                assert time.time() < deadline, r
                time.sleep(0.2)

        def files_binary():
            for data in (b"", b"\xfe", os.urandom(5 << 20)):
                p = f"/root/blob-{len(data)}"
                r = c.call("file.write", {"id": sb["id"], "path": p, "content_b64": b64(data), "mode": "0600"})
                assert r["bytes"] == len(data), r
                r = c.call("file.read", {"id": sb["id"], "path": p})
                assert data_of(r, "content") == data and r["size"] == len(data) and r["eof"] is True, \
                    (len(data), r.get("size"))
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "stat -c %a /root/blob-1"})
            assert r["stdout"] == "600\n", r
            r = c.call("file.write", {"id": sb["id"], "path": "/root/t.txt", "content": "héllo wörld"})
            r = c.call("file.read", {"id": sb["id"], "path": "/root/t.txt", "offset": 1, "length": 3})
            assert data_of(r, "content") == "héllo".encode()[1:4] and r["eof"] is False, r

        def files_parents_and_errors():
            e = c.error("file.write", {"id": sb["id"], "path": "/root/no/such/dir/f", "content": "x",
                                       "make_parents": False})
            assert e.code == -32009 and e.data.get("errno") == "ENOENT", e.err
            c.call("file.write", {"id": sb["id"], "path": "/root/no/such/dir/f", "content": "x"})
            r = c.call("file.read", {"id": sb["id"], "path": "/root/no/such/dir/f"})
            assert r["content"] == "x", r
            e = c.error("file.read", {"id": sb["id"], "path": "/root/missing"})
            assert e.code == -32009 and e.data.get("errno") == "ENOENT", e.err
            e = c.error("file.write", {"id": sb["id"], "path": "relative", "content": "x"})
            assert e.code == -32602, e.err

        def internet_toggle():
            ip = env.sim.info["internet_ip"]
            lan = env.sim.info["lan_ip"]
            fetch = {"id": sb["id"], "timeout_ms": 20000, "command": f"timeout 3 wget -q -O - http://{ip}/"}
            r = c.call("sandbox.exec", fetch)
            assert r["exit_code"] != 0 and INET_HTTP not in r["stdout"], r
            r = c.call("sandbox.set_internet", {"id": sb["id"], "enabled": True})
            assert r["internet"] is True, r
            r = c.call("sandbox.exec", fetch)
            assert r["exit_code"] == 0 and INET_HTTP in r["stdout"], r
            r = c.call("sandbox.exec", {"id": sb["id"], "timeout_ms": 20000,
                                        "command": f"timeout 3 wget -q -O - http://{lan}/"})
            assert r["exit_code"] != 0, r  # the LAN stays unreachable
            # Idempotent: a second "on" does not add a second rule.
            c.call("sandbox.set_internet", {"id": sb["id"], "enabled": True})
            rules = env.sim.ok("GET", f"/nodes/pve/lxc/{sb['vmid']}/firewall/rules")
            assert sum(1 for x in rules if x.get("type") == "group") == 1, rules
            r = c.call("sandbox.set_internet", {"id": sb["id"], "enabled": False})
            assert r["internet"] is False, r
            r = c.call("sandbox.exec", fetch)
            assert r["exit_code"] != 0 and INET_HTTP not in r["stdout"], r
            # The daemon's own SSH rule survived both changes.
            r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo still"})
            assert r["stdout"] == "still\n", r

        def sshd_killed():
            env.sim.admin("POST", f"/ct/{sb['vmid']}/kill-sshd")
            try:
                r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo back", "timeout_ms": 10000})
                assert r["stdout"] == "back\n", r
            except RpcError as e:
                assert e.code == -32005, e.err
            env.sim.admin("POST", f"/ct/{sb['vmid']}/restart-sshd")
            deadline = time.time() + 20
            while True:
                try:
                    r = c.call("sandbox.exec", {"id": sb["id"], "command": "echo back"})
                    assert r["stdout"] == "back\n", r
                    break
                except RpcError as e:
                    assert e.code == -32005, e.err
                    assert time.time() < deadline, "no reconnect after sshd came back"
                    time.sleep(0.5)
            r = c.call("file.read", {"id": sb["id"], "path": "/root/t.txt"})
            assert r["content"] == "héllo wörld", r

        def bad_params():
            e = c.error("sandbox.exec", {"id": sb["id"]})
            assert e.code == -32602, e.err
            e = c.error("sandbox.get", {"id": "sb-doesnotexist"})
            assert e.code == -32001, e.err
            e = c.error("sandbox.create", {"cores": "x"})
            assert e.code == -32602 and e.data.get("param") == "cores", e.err
            e = c.error("sandbox.create", {"ttl_s": 10 ** 7})
            assert e.code == -32602 and e.data.get("param") == "ttl_s", e.err

        def destroy():
            r = c.call("sandbox.destroy", {"id": sb["id"]})
            assert r == {"id": sb["id"], "state": "destroyed"}, r
            r = c.call("sandbox.destroy", {"id": sb["id"]})
            assert r == {"id": sb["id"], "state": "destroyed"}, r
            e = c.error("sandbox.get", {"id": sb["id"]})
            assert e.code == -32001, e.err
            e = c.error("sandbox.exec", {"id": sb["id"], "command": "true"})
            assert e.code == -32001, e.err
            env.wait_no_containers(5)
            assert c.call("sandbox.list")["sandboxes"] == []
            deadline = time.time() + 5
            while os.listdir(os.path.join(env.dir, "state", "sandboxes")) and time.time() < deadline:
                time.sleep(0.05)
            assert os.listdir(os.path.join(env.dir, "state", "sandboxes")) == []

        def destroy_no_wait():
            # wait false: the reply comes once the destroy has begun, and the destroy goes on
            # after the caller has gone.
            e = c.error("sandbox.destroy", {"id": "sb-doesnotexist", "wait": "no"})
            assert e.code == -32602 and e.data.get("param") == "wait", e.err
            r = c.call("sandbox.create", {})
            assert r["state"] == "ready" and r["vmid"] in env.containers(), r
            c2 = env.client()
            got = c2.call("sandbox.destroy", {"id": r["id"], "wait": False})
            c2.close()
            assert got == {"id": r["id"], "state": "destroying"}, got
            try:
                now = c.call("sandbox.get", {"id": r["id"]})
                assert now["state"] == "destroying", now
            except RpcError as err:
                assert err.code == -32001, err  # already gone
            env.wait_no_containers(30)
            deadline = time.time() + 10
            while c.call("sandbox.list")["sandboxes"] and time.time() < deadline:
                time.sleep(0.05)
            assert c.call("sandbox.list")["sandboxes"] == []
            got = c.call("sandbox.destroy", {"id": r["id"], "wait": False})
            assert got == {"id": r["id"], "state": "destroyed"}, got

        run([("create", create), ("exec", exec_basic), ("exec stream", exec_stream),
             ("exec truncated", exec_truncated), ("exec timeout kills the tree", exec_timeout_kills_tree),
             ("exec as a user", exec_as_user),
             ("client disconnect kills a streaming exec", disconnect_kills_exec),
             ("files binary 0 B / 1 B / 5 MiB", files_binary), ("files parents and errors", files_parents_and_errors),
             ("internet toggle", internet_toggle), ("sshd killed", sshd_killed), ("bad params", bad_params),
             ("destroy", destroy), ("destroy without waiting", destroy_no_wait)])


if __name__ == "__main__":
    main()
