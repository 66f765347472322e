"""Helpers shared by the tests of the systemd suite (standard library only)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE_ROOT = os.environ.get("SANDBOXD_SOURCE_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_ROOT = os.environ.get("SANDBOXD_BUILD_ROOT", "")

failures = []


def check(cond, msg):
    """Records a failed expectation (the test goes on and reports all of them)."""
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def die(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("ok")
    sys.exit(0)


def need_build_root():
    if not BUILD_ROOT or not os.path.isdir(BUILD_ROOT):
        die("SANDBOXD_BUILD_ROOT is not set (run through meson test)")
    return BUILD_ROOT


def need_program(name):
    path = shutil.which(name)
    if not path:
        die(f"'{name}' is not installed (tools/bootstrap installs it)")
    return path


def need_file(path, what):
    if not os.path.exists(path):
        die(f"{what} is missing: {path}")
    return path


def run(argv, check_rc=None, env=None, timeout=120, **kw):
    """Runs argv, returns CompletedProcess with text stdout/stderr."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env, timeout=timeout, **kw)
    if check_rc is not None and p.returncode != check_rc:
        die(f"{' '.join(argv)} exited {p.returncode}, expected {check_rc}\n"
            f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def tempdir(prefix):
    return tempfile.TemporaryDirectory(prefix=prefix)


def build_options():
    """The build's meson options as a dict name -> value."""
    path = os.path.join(need_build_root(), "meson-info", "intro-buildoptions.json")
    with open(path) as f:
        return {o["name"]: o["value"] for o in json.load(f)}


def pkgconfig_var(module, var):
    """A pkg-config variable, or '' when pkg-config or the module is missing."""
    if not shutil.which("pkg-config"):
        return ""
    p = subprocess.run(["pkg-config", "--variable=" + var, module], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    return p.stdout.strip() if p.returncode == 0 else ""


def install_paths():
    """Where `meson install` puts each file, computed independently of the
    build files (same rules as systemd/meson.build and docs/meson.build)."""
    o = build_options()
    prefix = o["prefix"]

    def j(*parts):
        return os.path.normpath(os.path.join(prefix, *parts))

    unitdir = o.get("systemd_unitdir") or pkgconfig_var("systemd", "systemdsystemunitdir") \
        or j("lib", "systemd", "system")
    sysusersdir = pkgconfig_var("systemd", "sysusersdir") or j("lib", "sysusers.d")
    tmpfilesdir = pkgconfig_var("systemd", "tmpfilesdir") or j("lib", "tmpfiles.d")
    sysconf = j(o["sysconfdir"])
    return {
        "sandboxd": j(o["sbindir"], "sandboxd"),
        "sandboxctl": j(o["bindir"], "sandboxctl"),
        "config": os.path.join(sysconf, "sandboxd", "sandboxd.conf"),
        "openrpc": j(o["datadir"], "sandboxd", "sandboxd.openrpc.json"),
        "service": os.path.join(unitdir, "sandboxd.service"),
        "socket": os.path.join(unitdir, "sandboxd.socket"),
        "sysusers": os.path.join(sysusersdir, "sandboxd.conf"),
        "tmpfiles": os.path.join(tmpfilesdir, "sandboxd.conf"),
        "man-sandboxd": j(o["mandir"], "man8", "sandboxd.8"),
        "man-sandboxctl": j(o["mandir"], "man1", "sandboxctl.1"),
        "man-conf": j(o["mandir"], "man5", "sandboxd.conf.5"),
        "client-header": j(o["includedir"], "sandboxd-client.h"),
        "client-shared": j(o["libdir"], "libsandboxd-client.so"),
        "client-static": j(o["libdir"], "libsandboxd-client.a"),
        "client-pc": j(o["libdir"], "pkgconfig", "sandboxd-client.pc"),
        "sysconfdir": sysconf,
    }


def built(*parts):
    return os.path.join(need_build_root(), *parts)


def sandboxd_binary():
    return need_file(built("daemon", "sandboxd"), "the sandboxd binary (daemon/main.c built)")


MAN_PAGES = [("sandboxd", "8"), ("sandboxctl", "1"), ("sandboxd.conf", "5")]


def man_tree(root):
    """Builds root/manN/page.N symlinks to the built man pages (a MANPATH)."""
    for name, sec in MAN_PAGES:
        src = need_file(built("docs", f"{name}.{sec}"), f"built man page {name}({sec})")
        d = os.path.join(root, "man" + sec)
        os.makedirs(d, exist_ok=True)
        os.symlink(src, os.path.join(d, f"{name}.{sec}"))
    return root


def ini_keys(text, commented=True):
    """section.key names in an INI text; with commented=True also keys of
    commented-out ';key = value' lines (the example lists defaults that way)."""
    keys = []
    section = None
    for line in text.splitlines():
        s = line.strip()
        m = re.fullmatch(r"\[([A-Za-z0-9_]+)\]", s)
        if m:
            section = m.group(1)
            continue
        if commented and s.startswith(";"):
            s = s[1:].strip()
        m = re.fullmatch(r"([a-z_][a-z0-9_]*)\s*=.*", s)
        if m and section:
            keys.append(f"{section}.{m.group(1)}")
    return keys


def make_ssh_key(directory):
    """A fresh ed25519 key pair in directory: returns (private key text, the
    SHA256:... fingerprint of its public key)."""
    keygen = need_program("ssh-keygen")
    path = os.path.join(directory, "test_ed25519")
    run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "sandboxd-test", "-f", path], check_rc=0)
    fp = run([keygen, "-l", "-E", "sha256", "-f", path + ".pub"], check_rc=0).stdout.split()[1]
    with open(path) as f:
        key = f.read()
    os.unlink(path)
    os.unlink(path + ".pub")
    return key, fp
