"""The Debian 12 template image and overlay root file systems.

The image is a real Debian bookworm userland built from Debian's packages with mmdebstrap,
once per machine, into CACHE_DIR/debian-KEY/rootfs (KEY: a hash of the package list and the
build recipe). It is built into a temporary folder and renamed into place when complete, under
a lock, so a partial build never looks valid and concurrent simulators wait for one build
instead of making two. Nothing ever writes into it afterwards: it is the read-only lowest layer
of every container made from it.

A container on that image has no copy of it: its ct/<vmid>/rootfs is an overlayfs mount with
the image (and, for a clone, ct/<vmid>/base: a copy of its source's upper layer, a few files
for a template) as lower layers and its own ct/<vmid>/upper for what it writes. A write in one
container never shows in another or in the template. The layers are recorded in ct/<vmid>/layers.json; the simulator mounts every
such root at start and unmounts it at exit, and a destroy unmounts before removing.
"""

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

from .util import log, run

CACHE_DIR = os.environ.get("PVESIM_CACHE_DIR") or "/var/cache/sandboxd-sim"
SUITE = "bookworm"
MIRROR = os.environ.get("PVESIM_DEBIAN_MIRROR") or "http://deb.debian.org/debian"

# what an agent expects of a Debian template, plus what the simulator needs inside:
# ssh-keygen (openssh-client) to regenerate the host key, script(1) (bsdutils, essential)
# for processes with a terminal, iproute2 for `ip` inside
PACKAGES = ["bash", "coreutils", "util-linux", "procps", "python3", "python3-venv", "python3-pytest", "git",
            "curl", "ca-certificates", "jq", "less", "xz-utils", "unzip", "openssh-client", "iproute2",
            "bsdutils", "wget", "file", "patch", "diffutils", "findutils", "grep", "sed", "gzip", "tar"]
DPKG_OPTS = ["path-exclude=/usr/share/man/*", "path-exclude=/usr/share/info/*",
             "path-exclude=/usr/share/doc/*", "path-include=/usr/share/doc/*/copyright",
             "path-exclude=/usr/share/locale/*", "path-include=/usr/share/locale/locale.alias"]
RECIPE = 1  # bump when the build below changes in a way the arguments do not show
BUILD_TIMEOUT = 900


def mmdebstrap_args(target):
    return (["mmdebstrap", "--mode=root", "--variant=apt", "--include=" + ",".join(PACKAGES),
             "--aptopt=Acquire::Languages \"none\"", "--dpkgopt=force-unsafe-io"]
            + [f"--dpkgopt={o}" for o in DPKG_OPTS] + [SUITE, target, MIRROR])


def image_key():
    recipe = {"packages": sorted(PACKAGES), "dpkg": DPKG_OPTS, "suite": SUITE, "recipe": RECIPE,
              "args": mmdebstrap_args("TARGET")[:-1]}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def image_dir():
    return os.path.join(CACHE_DIR, "debian-" + image_key())


def image_root():
    """The cached image's root, or None when it has not been built."""
    r = os.path.join(image_dir(), "rootfs")
    return r if os.path.isdir(r) and os.path.exists(os.path.join(image_dir(), "complete")) else None


def finish_image(root):
    """What the simulator needs of the image beyond the packages."""
    for sub, mode in (("root/.ssh", 0o700), ("etc/ssh", 0o755), ("dev/pts", 0o755), ("run", 0o755)):
        os.makedirs(os.path.join(root, sub), mode=mode, exist_ok=True)
        os.chmod(os.path.join(root, sub), mode)
    for name, maj, mi in (("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8), ("urandom", 1, 9),
                          ("tty", 5, 0), ("ptmx", 5, 2)):
        p = os.path.join(root, "dev", name)
        if os.path.islink(p) or not os.path.exists(p):
            if os.path.lexists(p):
                os.unlink(p)
            os.mknod(p, 0o666 | 0o020000, os.makedev(maj, mi))
        os.chmod(p, 0o666)
    for f in ("etc/hostname", "etc/resolv.conf", "etc/machine-id"):
        p = os.path.join(root, f)
        if os.path.lexists(p):
            os.unlink(p)
    open(os.path.join(root, "etc", "machine-id"), "w").close()
    shutil.rmtree(os.path.join(root, "var", "cache", "apt", "archives"), ignore_errors=True)
    os.makedirs(os.path.join(root, "var", "cache", "apt", "archives", "partial"), exist_ok=True)


def build_image(quiet=False):
    """The image's root, built first if the cache lacks it (waiting for a build another
    process is making). Raises RuntimeError when the build fails."""
    r = image_root()
    if r:
        return r
    os.makedirs(CACHE_DIR, mode=0o755, exist_ok=True)
    final = image_dir()
    with open(final + ".lock", "w") as lk:
        t0 = time.monotonic()
        try:
            fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another process building the Debian template image {final}")
            fcntl.flock(lk, fcntl.LOCK_EX)
        r = image_root()
        if r:
            return r
        if shutil.which("mmdebstrap") is None:
            raise RuntimeError("the Debian template needs mmdebstrap (run tools/bootstrap as root)")
        for old in os.listdir(CACHE_DIR):  # leftovers of builds that died (we hold the lock)
            if old.startswith(".build-" + os.path.basename(final)):
                shutil.rmtree(os.path.join(CACHE_DIR, old), ignore_errors=True)
        if os.path.exists(final):
            shutil.rmtree(final)
        tmp = os.path.join(CACHE_DIR, f".build-{os.path.basename(final)}-{os.getpid()}")
        os.makedirs(tmp, mode=0o755)
        root = os.path.join(tmp, "rootfs")
        if not quiet:
            log(f"building the Debian 12 template image with mmdebstrap into {final} (once per machine)")
        logpath = os.path.join(tmp, "mmdebstrap.log")
        with open(logpath, "w") as lf:
            try:
                p = subprocess.run(mmdebstrap_args(root), stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                   timeout=BUILD_TIMEOUT)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        if rc != 0:
            tail = open(logpath).read()[-2000:]
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"mmdebstrap failed ({rc}):\n{tail}")
        finish_image(root)
        with open(os.path.join(tmp, "complete"), "w") as f:
            json.dump({"packages": PACKAGES, "suite": SUITE, "mirror": MIRROR, "recipe": RECIPE,
                       "built": int(time.time()), "seconds": round(time.monotonic() - t0, 1)}, f)
        os.rename(tmp, final)
        if not quiet:
            log(f"Debian template image built in {time.monotonic() - t0:.0f} s")
        return os.path.join(final, "rootfs")


# ---- overlay roots


def layers_path(ctdir):
    return os.path.join(ctdir, "layers.json")


def read_layers(ctdir):
    """The lower layers (top first) of an overlay container, or None for a plain root."""
    try:
        with open(layers_path(ctdir)) as f:
            return json.load(f)["lower"]
    except (OSError, ValueError, KeyError):
        return None


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def mount_root(ctdir):
    """Mount ctdir/rootfs from its layers (a no-op when mounted or not an overlay root)."""
    lower = read_layers(ctdir)
    root = os.path.join(ctdir, "rootfs")
    if lower is None or is_mounted(root):
        return
    for l in lower:
        if not os.path.isdir(l):
            raise RuntimeError(f"{ctdir}: lower layer {l} is missing (cache removed?)")
    for sub in ("upper", "work", "rootfs"):
        os.makedirs(os.path.join(ctdir, sub), mode=0o755, exist_ok=True)
    opts = f"lowerdir={':'.join(lower)},upperdir={ctdir}/upper,workdir={ctdir}/work"
    run(["mount", "-t", "overlay", "overlay", "-o", opts, root])


def unmount_root(ctdir):
    root = os.path.join(ctdir, "rootfs")
    if not os.path.isdir(root) or not is_mounted(root):
        return
    if run(["umount", root], check=False).returncode != 0:
        run(["umount", "-l", root], check=False)


def new_overlay(ctdir, lower):
    """A new overlay container in ctdir (removed first) over the layers `lower`, mounted."""
    remove_ct_dir(ctdir)
    os.makedirs(ctdir, mode=0o755)
    with open(layers_path(ctdir), "w") as f:
        json.dump({"lower": lower}, f)
    mount_root(ctdir)


def clone_overlay(src, dst):
    """dst's root from src's: src's upper layer (what it changed over the image: for a
    template its host key, hostname, keys; for a container its files) is copied into dst/base,
    a lower layer of dst over src's lower layers, so later writes on either side stay apart and
    the template can go while its clones live. Returns False when src is no overlay root."""
    lower = read_layers(src)
    if lower is None:
        return False
    remove_ct_dir(dst)
    os.makedirs(dst, mode=0o755)
    own = os.path.join(dst, "base")
    run(["cp", "-a", os.path.join(src, "upper"), own])
    with open(layers_path(dst), "w") as f:
        json.dump({"lower": [own] + lower}, f)
    mount_root(dst)
    return True


def clone_overlay_snapshot(src, dst, name):
    """clone_overlay() from src's snapshot `name` (its upper layer as it was then) instead of
    src's live upper layer. Returns False when src is no overlay root."""
    lower = read_layers(src)
    if lower is None:
        return False
    remove_ct_dir(dst)
    os.makedirs(dst, mode=0o755)
    own = os.path.join(dst, "base")
    run(["cp", "-a", "--reflink=auto", snap_dir(src, name), own])
    with open(layers_path(dst), "w") as f:
        json.dump({"lower": [own] + lower}, f)
    mount_root(dst)
    return True


def snap_dir(ctdir, name):
    return os.path.join(ctdir, "snap", name)


def take_snapshot(ctdir, name):
    """A snapshot of the container's disk: for an overlay root a copy of its upper layer (what
    it changed over its lower layers, which never change), for a plain root a copy of it."""
    dst = snap_dir(ctdir, name)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(os.path.dirname(dst), mode=0o700, exist_ok=True)
    src = os.path.join(ctdir, "upper" if read_layers(ctdir) is not None else "rootfs")
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    run(["cp", "-a", "--reflink=auto", src, tmp])
    os.rename(tmp, dst)


def rollback_snapshot(ctdir, name):
    """The disk back to snapshot `name` (the container is stopped)."""
    src = snap_dir(ctdir, name)
    overlay = read_layers(ctdir) is not None
    if overlay:
        unmount_root(ctdir)
    target = os.path.join(ctdir, "upper" if overlay else "rootfs")
    shutil.rmtree(target, ignore_errors=True)
    run(["cp", "-a", "--reflink=auto", src, target])
    if overlay:
        shutil.rmtree(os.path.join(ctdir, "work"), ignore_errors=True)
        mount_root(ctdir)


def delete_snapshot(ctdir, name):
    shutil.rmtree(snap_dir(ctdir, name), ignore_errors=True)


def snapshot_bytes(ctdir, name):
    total = 0
    for d, _, files in os.walk(snap_dir(ctdir, name)):
        for f in files:
            try:
                st = os.lstat(os.path.join(d, f))
                total += st.st_blocks * 512
            except OSError:
                pass
    return total


def remove_ct_dir(ctdir):
    """Remove a container folder, never through a mounted root."""
    if os.path.isdir(ctdir):
        unmount_root(ctdir)
        if is_mounted(os.path.join(ctdir, "rootfs")):
            log(f"{ctdir}/rootfs is still mounted: not removed")
            return
        shutil.rmtree(ctdir, ignore_errors=True)


def free_root(ctdir):
    """A destroy's volume free: the root and its layers go, the folder stays."""
    unmount_root(ctdir)
    for sub in ("rootfs", "upper", "work", "base", "snap"):
        p = os.path.join(ctdir, sub)
        if not is_mounted(p):
            shutil.rmtree(p, ignore_errors=True)
    try:
        os.unlink(layers_path(ctdir))
    except OSError:
        pass


def unmount_all_under(path):
    """Unmount every overlay root below path (a dead simulator's state folder)."""
    path = os.path.realpath(path).rstrip("/") + "/"
    mps = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                if parts[4].startswith(path) and " - overlay " in line:
                    mps.append(parts[4])
    except OSError:
        return
    for mp in sorted(mps, reverse=True):
        if run(["umount", mp], check=False).returncode != 0:
            run(["umount", "-l", mp], check=False)


def main_build(check_only=False):
    """pve-sim --build-template-image: build the cache (if missing) and print its root;
    with --check-only: print it if built, else exit 1."""
    if check_only:
        r = image_root()
        if r is None:
            sys.exit(1)
        print(r)
        return
    try:
        print(build_image())
    except RuntimeError as e:
        print(f"pve-sim: {e}", file=sys.stderr)
        sys.exit(1)
