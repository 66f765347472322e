#!/usr/bin/env python3
"""Checks the systemd units as built.

  test-units.py verify    systemd-analyze verify passes for sandboxd.socket and
                          sandboxd.service (ExecStart pointed at the built
                          daemon, Documentation= pages found in a MANPATH of the
                          built man pages), and verify really reports problems
                          in this environment (a broken copy must fail);
  test-units.py exposure  systemd-analyze security --offline=yes gives an
                          overall exposure <= 2.0;
  test-units.py comments  every directive of the service sits in a paragraph
                          that starts with a comment saying why;
  test-units.py snippets  the sysusers.d and tmpfiles.d snippets apply to an
                          empty root (systemd-sysusers/-tmpfiles --root).
"""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdtest as t  # noqa: E402

MAX_EXPOSURE = 2.0


def built_service_text():
    return open(t.need_file(t.built("systemd", "sandboxd.service"), "built sandboxd.service")).read()


def socket_text():
    return open(os.path.join(t.SOURCE_ROOT, "systemd", "sandboxd.socket")).read()


def verify(paths, env):
    p = t.run(["systemd-analyze", "verify", "--man=yes", *paths], env=env)
    # Unknown keys, bad values and missing binaries are warnings on stderr;
    # some keep the exit status at 0, so any output counts as a failure.
    noise = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
    return p.returncode, noise


def test_verify():
    t.need_program("systemd-analyze")
    t.need_program("man")
    daemon = t.sandboxd_binary()
    with t.tempdir("sandboxd-verify-") as tmp:
        units = os.path.join(tmp, "units")
        os.makedirs(units)
        service = built_service_text()
        service, n = re.subn(r"(?m)^ExecStart=\S+/sandboxd\b", "ExecStart=" + daemon, service)
        t.check(n == 1, "the built service has exactly one ExecStart= running .../sandboxd")
        t.check(not re.search(r"@[a-z_]+@", service),
                "no unsubstituted @variable@ left in the built service")
        with open(os.path.join(units, "sandboxd.service"), "w") as f:
            f.write(service)
        with open(os.path.join(units, "sandboxd.socket"), "w") as f:
            f.write(socket_text())

        env = dict(os.environ)
        env["MANPATH"] = t.man_tree(os.path.join(tmp, "man"))
        env["SYSTEMD_LOG_LEVEL"] = "notice"
        paths = [os.path.join(units, "sandboxd.socket"), os.path.join(units, "sandboxd.service")]
        rc, noise = verify(paths, env)
        t.check(rc == 0 and not noise,
                f"systemd-analyze verify: exit {rc}, output:\n" + "\n".join(noise))

        # The same check must catch mistakes here (no systemd as PID 1 is needed
        # for verify, but prove it): an unknown directive, a missing binary, and
        # a Documentation= page that does not exist.
        broken = {
            "unknown directive": service.replace("[Service]\n", "[Service]\nProtectEverything=yes\n"),
            "missing binary": service.replace("ExecStart=" + daemon, "ExecStart=/nonexistent/sandboxd"),
            "missing man page": service.replace("man:sandboxd(8)", "man:sandboxd-nonexistent(8)"),
        }
        for what, text in broken.items():
            path = os.path.join(units, "broken.service")
            with open(path, "w") as f:
                f.write(text)
            rc, noise = verify([path], env)
            t.check(rc != 0 or noise, f"systemd-analyze verify does not notice a {what}")


def exposure_of(path):
    p = t.run(["systemd-analyze", "security", "--offline=yes", "--no-pager", path])
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", p.stdout + p.stderr)
    if not m:
        t.die(f"no exposure level in the output of systemd-analyze security:\n{p.stdout}{p.stderr}")
    return float(m.group(1)), p


def test_exposure():
    t.need_program("systemd-analyze")
    with t.tempdir("sandboxd-security-") as tmp:
        path = os.path.join(tmp, "sandboxd.service")
        with open(path, "w") as f:
            f.write(built_service_text())
        level, p = exposure_of(path)
        print(f"sandboxd.service overall exposure: {level}")
        if not t.check(level <= MAX_EXPOSURE, f"exposure {level} > {MAX_EXPOSURE}"):
            print(p.stdout)
        # The measurement must react to the unit: without hardening it is high.
        bare = "[Service]\nExecStart=/bin/true\n"
        with open(path, "w") as f:
            f.write(bare)
        level_bare, _ = exposure_of(path)
        t.check(level_bare > 5.0, f"an unhardened unit scores {level_bare}, the test cannot tell")


SELF_EXPLAINING = ("Description=", "Documentation=", "WantedBy=", "Also=")


def test_comments():
    """Each directive must follow a comment in its paragraph (blank-line
    separated), except the self-explaining ones."""
    for name, text in (("sandboxd.service", built_service_text()),
                       ("sandboxd.socket", socket_text())):
        commented = False
        for line in text.splitlines():
            s = line.strip()
            if not s or s.startswith("["):
                commented = False
            elif s.startswith("#"):
                commented = True
            elif not commented and not s.startswith(SELF_EXPLAINING):
                t.check(False, f"{name}: directive without a comment saying why: {s}")


def test_snippets():
    sysusers = t.need_program("systemd-sysusers")
    tmpfiles = t.need_program("systemd-tmpfiles")
    su = os.path.join(t.SOURCE_ROOT, "systemd", "sandboxd.sysusers")
    tf = t.need_file(t.built("systemd", "sandboxd.tmpfiles"), "built tmpfiles snippet")
    with t.tempdir("sandboxd-sysusers-") as root:
        os.makedirs(os.path.join(root, "etc"))
        t.run([sysusers, "--root=" + root, su], check_rc=0)
        passwd = open(os.path.join(root, "etc", "passwd")).read()
        group = open(os.path.join(root, "etc", "group")).read()
        user = [l.split(":") for l in passwd.splitlines() if l.startswith("sandboxd:")]
        t.check(len(user) == 1, "sysusers creates the sandboxd user")
        if user:
            t.check(user[0][2] != "0" and user[0][6].endswith("nologin"),
                    f"the sandboxd user is unprivileged and cannot log in: {user[0]}")
        groups = {l.split(":")[0]: l.split(":")[2] for l in group.splitlines()}
        t.check("sandboxd" in groups, "sysusers creates the sandboxd group")
        t.check("sandboxd-admin" in groups, "sysusers creates the sandboxd-admin group")
        if user and "sandboxd" in groups:
            t.check(user[0][3] == groups["sandboxd"], "sandboxd's primary group is sandboxd")

        # tmpfiles resolves users in the root's passwd (created just above).
        t.run([tmpfiles, "--root=" + root, "--create", tf], check_rc=0)
        conf = t.build_options()
        etc = os.path.normpath(os.path.join(conf["prefix"], conf["sysconfdir"], "sandboxd"))
        st = os.stat(root + etc)
        t.check(oct(st.st_mode & 0o7777) == "0o755", f"{etc} is 0755: {oct(st.st_mode)}")
        st = os.stat(os.path.join(root, "var", "lib", "sandboxd"))
        t.check(oct(st.st_mode & 0o7777) == "0o700", "/var/lib/sandboxd is 0700")
        if user:
            t.check(str(st.st_uid) == user[0][2], "/var/lib/sandboxd belongs to sandboxd")


TESTS = {"verify": test_verify, "exposure": test_exposure, "comments": test_comments,
         "snippets": test_snippets}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in TESTS:
        t.die("usage: test-units.py " + "|".join(TESTS))
    TESTS[sys.argv[1]]()
    t.finish()
