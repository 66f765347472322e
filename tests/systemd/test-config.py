#!/usr/bin/env python3
"""The configuration as documented is the configuration as parsed.

  test-config.py keys         the keys of the parser (config_known_keys(), via
                              print-config-keys), of the example configuration
                              and of sandboxd.conf(5) are the same set;
  test-config.py example      `sandboxd --config docs/sandboxd.conf.example
                              --check-config` accepts the example, and a copy
                              with every commented default switched on;
  test-config.py credentials  with token_secret_file and key_file unset the
                              secrets come from $CREDENTIALS_DIRECTORY
                              (pve-token, ssh-key); a missing one is an error
                              naming it; without the variable (outside the
                              service) the check passes and says the
                              credentials were not checked; the secrets never
                              appear in output;
  test-config.py errors       a bad key is an error naming file, line and key.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdtest as t  # noqa: E402

EXAMPLE = os.path.join(t.SOURCE_ROOT, "docs", "sandboxd.conf.example")
MAN_SRC = os.path.join(t.SOURCE_ROOT, "docs", "sandboxd.conf.5.scd")
TOKEN = "0b5c1f3e-7d2a-4c8e-9f61-3a2b1c0d9e8f"
KEY = None  # a real ed25519 key, made by main()
FINGERPRINT = None


def parser_keys():
    exe = t.need_file(t.built("tests", "systemd", "print-config-keys"), "print-config-keys")
    p = t.run([exe], check_rc=0)
    return [l for l in p.stdout.splitlines() if l]


def man_keys():
    keys, section = [], None
    for line in open(MAN_SRC):
        m = re.match(r"^# \[([a-z]+)\]\s*$", line)
        if m:
            section = m.group(1)
            continue
        if line.startswith("# "):
            section = None
            continue
        m = re.match(r"^\*([a-z_]+)\* = ", line)
        if m and section:
            keys.append(f"{section}.{m.group(1)}")
    return keys


def compare(name_a, a, name_b, b):
    for k in sorted(set(a) - set(b)):
        t.check(False, f"{k} is in {name_a} but not in {name_b}")
    for k in sorted(set(b) - set(a)):
        t.check(False, f"{k} is in {name_b} but not in {name_a}")


def test_keys():
    parser = parser_keys()
    t.check(len(parser) >= 30, f"the parser knows only {len(parser)} keys")
    example = t.ini_keys(open(EXAMPLE).read())
    man = man_keys()
    for name, keys in (("the example", example), ("sandboxd.conf(5)", man)):
        dups = sorted({k for k in keys if keys.count(k) > 1})
        t.check(not dups, f"{name} lists keys twice: {dups}")
    compare("the parser", parser, "docs/sandboxd.conf.example", example)
    compare("the parser", parser, "sandboxd.conf(5)", man)


def write(path, text, mode=0o600):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def credentials_dir(root, token=True, key=True):
    d = os.path.join(root, "credentials")
    os.makedirs(d, exist_ok=True)
    for name, on, text in (("pve-token", token, TOKEN + "\n"), ("ssh-key", key, KEY)):
        p = os.path.join(d, name)
        if on:
            write(p, text, 0o400)
        elif os.path.exists(p):
            os.unlink(p)
    return d


def check_config(conf, creds=None, extra=()):
    env = dict(os.environ)
    env.pop("CREDENTIALS_DIRECTORY", None)
    if creds:
        env["CREDENTIALS_DIRECTORY"] = creds
    return t.run([t.sandboxd_binary(), "--config", conf, "--check-config", *extra], env=env,
                 timeout=30)


def test_example():
    with t.tempdir("sandboxd-config-") as tmp:
        creds = credentials_dir(tmp)
        p = check_config(EXAMPLE, creds)
        t.check(p.returncode == 0,
                f"--check-config rejects the example (exit {p.returncode}): {p.stderr.strip()}")

        # Every commented default switched on must be accepted too (the secret
        # files pointed at temporary copies, the state folder at a temp dir).
        token_file = write(os.path.join(tmp, "pve-token"), TOKEN + "\n")
        key_file = write(os.path.join(tmp, "id_ed25519"), KEY)
        lines = []
        for line in open(EXAMPLE).read().splitlines():
            m = re.match(r"^;\s*([a-z_]+)\s*=\s*(.*)$", line)
            if m:
                key, value = m.group(1), m.group(2)
                value = {"token_secret_file": token_file, "key_file": key_file,
                         "template_host_key": FINGERPRINT,
                         "state_dir": os.path.join(tmp, "state")}.get(key, value)
                line = f"{key} = {value}"
            lines.append(line)
        full = write(os.path.join(tmp, "full.conf"), "\n".join(lines) + "\n", 0o644)
        t.check(len(t.ini_keys(open(full).read(), commented=False)) == len(parser_keys()),
                "the switched-on copy sets every key")
        p = check_config(full)
        t.check(p.returncode == 0, "--check-config rejects the example's documented defaults "
                f"(exit {p.returncode}): {p.stderr.strip()}")


def test_credentials():
    with t.tempdir("sandboxd-creds-") as tmp:
        conf = write(os.path.join(tmp, "sandboxd.conf"),
                     "[server]\nstate_dir = " + os.path.join(tmp, "state") + "\n"
                     "[proxmox]\nurl = https://127.0.0.1:9/\ntoken_id = sandboxd@pve!sandboxd\n"
                     "template = 9000\npool = sandboxd\n"
                     f"[ssh]\ntemplate_host_key = {FINGERPRINT}\n", 0o644)
        # Outside the service there is no credentials directory: --check-config
        # checks everything else and says that the credentials were not checked.
        cases = [
            ("no credentials directory", None, 0, "pve-token"),
            ("no pve-token", credentials_dir(tmp, token=False), 1, "pve-token"),
            ("no ssh-key", credentials_dir(tmp, key=False), 1, "ssh-key"),
            ("both credentials", credentials_dir(tmp), 0, None),
        ]
        for what, creds, rc, named in cases:
            if creds:
                creds = credentials_dir(tmp, token=(what != "no pve-token"),
                                        key=(what != "no ssh-key"))
            p = check_config(conf, creds, ("--log-level", "debug"))
            out = p.stdout + p.stderr
            t.check(p.returncode == rc, f"{what}: --check-config exited {p.returncode}, "
                    f"expected {rc}: {out.strip()}")
            if named:
                t.check(named in out, f"{what}: the error does not name '{named}': {out.strip()}")
            key_body = KEY.splitlines()[1]
            t.check(TOKEN not in out and key_body not in out,
                    f"{what}: a secret appears in the output")


def test_errors():
    with t.tempdir("sandboxd-badconf-") as tmp:
        conf = write(os.path.join(tmp, "bad.conf"),
                     "[server]\nmax_connections = 8\n\n[sandbox]\nmax_per_uidd = 3\n", 0o644)
        p = check_config(conf)
        t.check(p.returncode == 1, f"a bad key: --check-config exited {p.returncode}, expected 1")
        t.check(f"{conf}:5" in p.stderr and "max_per_uidd" in p.stderr,
                f"the error names neither file:line nor key: {p.stderr.strip()}")
        conf = write(os.path.join(tmp, "bad2.conf"), "[server]\nmax_connections = 0\n", 0o644)
        p = check_config(conf)
        t.check(p.returncode == 1 and f"{conf}:2" in p.stderr and "max_connections" in p.stderr,
                f"a bad value: exit {p.returncode}: {p.stderr.strip()}")
        # [preview]: listen needs a base_url of the documented form; the TLS files go together
        for i, (body, word) in enumerate([
                ("listen = 127.0.0.1:8090\n", "base_url"),
                ("listen = 127.0.0.1:8090\nbase_url = http://{id}.preview.example\n", "base_url"),
                ("listen = 127.0.0.1:8090\nbase_url = http://{port}-{id}.x/path\n", "base_url"),
                ("tls_certificate = /etc/cert.pem\n", "tls_key"),
                ("default_ttl_s = 90000\n", "max_ttl_s")]):
            conf = write(os.path.join(tmp, f"preview{i}.conf"), "[preview]\n" + body, 0o644)
            p = check_config(conf)
            t.check(p.returncode == 1 and word in p.stderr,
                    f"[preview] {body.strip()!r}: exit {p.returncode}: {p.stderr.strip()}")
        # [egress]: listen on an address the sandboxes can be told, not the wildcard
        for i, (body, word) in enumerate([("listen = 0.0.0.0:3128\n", "listen"),
                                          ("max_connections = 0\n", "max_connections")]):
            conf = write(os.path.join(tmp, f"egress{i}.conf"), "[egress]\n" + body, 0o644)
            p = check_config(conf)
            t.check(p.returncode == 1 and word in p.stderr,
                    f"[egress] {body.strip()!r}: exit {p.returncode}: {p.stderr.strip()}")


TESTS = {"keys": test_keys, "example": test_example, "credentials": test_credentials,
         "errors": test_errors}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in TESTS:
        t.die("usage: test-config.py " + "|".join(TESTS))
    with t.tempdir("sandboxd-key-") as keydir:
        KEY, FINGERPRINT = t.make_ssh_key(keydir)
    TESTS[sys.argv[1]]()
    t.finish()
