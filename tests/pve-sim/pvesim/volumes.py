"""Mount point volumes: `mpN: STORAGE:vm-VMID-disk-K,mp=/path,size=NG[,ro=1]` and
`unusedN: STORAGE:vm-VMID-disk-K` in a container's config (pve-container LXC/Config.pm).

A volume is a real folder, state/storage/<storage>/<volume name>, named as the storage type
names it (`vm-VMID-disk-K` on LVM-thin, `subvol-VMID-disk-K` on ZFS, `VMID/vm-VMID-disk-K.raw`
on a directory storage: '/' becomes '_' in the folder's name); K is the first index free on
that storage for that VMID. At a container's start every `mpN` is bind-mounted at its path
inside the container's own mount namespace (read-only with ro=1); a mount point added to a
running container is hot-plugged the same way (pve-container mountpoint_hotplug). Removing
`mpN` from a stopped container keeps the volume as `unusedN`; from a running one the removal
is pending until the next start (mount points cannot be hot-unplugged). Deleting `unusedN`
frees the volume; a destroy frees every volume of the config. `size=` is recorded, not
enforced (a folder has no size)."""

import os
import re
import shutil
import shlex
import subprocess

from .schema import ParamErr, die, format_size, parse_kv, perr
from .util import log, run

NEW_DISK_RE = re.compile(r"(?:([^/:\s]+):)?(\d+(?:\.\d+)?)")
OWNER_RE = re.compile(r"(?:vm|subvol|base|basevol)-(\d+)-disk-\d+")
MAX_KEYS = 256  # mp0..mp255, unused0..unused255 (MAX_MOUNT_POINTS, MAX_UNUSED_DISKS)


def is_mp(k):
    return re.fullmatch(r"mp\d+", k) is not None and int(k[2:]) < MAX_KEYS


def is_unused(k):
    return re.fullmatch(r"unused\d+", k) is not None and int(k[6:]) < MAX_KEYS


def storage_of(volid):
    return volid.split(":", 1)[0]


def owner_of(volid):
    m = OWNER_RE.search(volid.split(":", 1)[-1])
    return int(m.group(1)) if m else None


def parse_mp(value, key="mp0"):
    """An mpN value as a dict (volume, mp, size, ro, ...); ParamErr when it is malformed."""
    d = parse_kv(value, "volume")
    if not d.get("volume"):
        raise ParamErr("invalid format - format error\nvolume: property is missing\n")
    if is_mp(key):
        mp = d.get("mp")
        if not mp:
            raise ParamErr("invalid format - format error\nmp: property is missing\n")
        if not mp.startswith("/") or re.search(r"(^|/)\.\.?(/|$)", mp):
            raise ParamErr(f"mount point '{mp}' contains illegal character sequences\n")
        if d.get("ro") not in (None, "0", "1"):
            raise ParamErr("invalid format - format error\nro: type check ('boolean') failed\n")
    return d


class VolumesMixin:
    """Sim methods for mount point volumes (self.cts holds the configs)."""

    def vol_path(self, volid):
        store, _, name = volid.partition(":")
        return self.path("storage", store, name.replace("/", "_"))

    def vol_exists(self, volid):
        return os.path.isdir(self.vol_path(volid))

    def vol_name(self, store, vmid, k):
        typ = self.cfg["storages"].get(store, {"type": "dir"}).get("type", "dir")
        if typ == "dir":
            return f"{store}:{vmid}/vm-{vmid}-disk-{k}.raw"
        if typ == "zfspool":
            return f"{store}:subvol-{vmid}-disk-{k}"
        return f"{store}:vm-{vmid}-disk-{k}"

    def vols_in_use(self):
        """Every volume id a config (or a snapshot's) names (the caller holds self.lock)."""
        used = set()
        for ct in self.cts.values():
            confs = [ct["conf"]] + [sn["conf"] for sn in (ct.get("snapshots") or {}).values()]
            for conf in confs:
                for k, v in conf.items():
                    if k == "rootfs" or is_mp(k) or is_unused(k):
                        used.add(parse_kv(v, "volume").get("volume", ""))
        return used

    def vol_alloc_name(self, store, vmid, also=()):
        """The first free volume name for vmid on store, none of `also` (the caller holds
        self.lock)."""
        used = self.vols_in_use() | set(also)
        k = 0
        while True:
            v = self.vol_name(store, vmid, k)
            if v not in used and not self.vol_exists(v):
                return v
            k += 1

    def vol_alloc(self, store, vmid, size):
        if store not in self.cfg["storages"]:
            raise die(f"storage '{store}' does not exist")
        v = self.vol_alloc_name(store, vmid)
        os.makedirs(self.vol_path(v), mode=0o755)
        with open(self.vol_path(v) + ".size", "w") as f:
            f.write(f"{size}\n")
        log(f"allocated volume {v} ({format_size(size)})")
        return v

    def vol_size(self, volid):
        """The volume's size as allocated or resized (volume_size_info), or None."""
        try:
            with open(self.vol_path(volid) + ".size") as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def vol_free(self, volid):
        shutil.rmtree(self.vol_path(volid), ignore_errors=True)
        try:
            os.unlink(self.vol_path(volid) + ".size")
        except OSError:
            pass

    def vol_rename(self, volid, vmid):
        """rename_volume: the volume under a name of vmid's on the same storage (a move)."""
        v = self.vol_alloc_name(storage_of(volid), vmid)
        os.makedirs(os.path.dirname(self.vol_path(v)), exist_ok=True)
        os.rename(self.vol_path(volid), self.vol_path(v))
        if os.path.exists(self.vol_path(volid) + ".size"):
            os.rename(self.vol_path(volid) + ".size", self.vol_path(v) + ".size")
        return v

    def vol_copy(self, volid, vmid, also=()):
        """A full copy of the volume under a new name of vmid's (a clone's mount point)."""
        v = self.vol_alloc_name(storage_of(volid), vmid, also)
        os.makedirs(os.path.dirname(self.vol_path(v)), exist_ok=True)
        run(["cp", "-a", "--reflink=auto", self.vol_path(volid), self.vol_path(v)])
        if os.path.exists(self.vol_path(volid) + ".size"):
            shutil.copy(self.vol_path(volid) + ".size", self.vol_path(v) + ".size")
        return v

    def add_unused(self, conf, volid):
        for i in range(MAX_KEYS):
            if f"unused{i}" not in conf:
                conf[f"unused{i}"] = volid
                return
        raise die("To many unused volume - please delete them first.")

    def ct_mounts(self, vmid):
        """(host folder, path, read-only) of every mount point of the CT, in key order."""
        ct = self.cts.get(vmid) or {}
        out = []
        for k in sorted((k for k in ct.get("conf", {}) if is_mp(k)), key=lambda k: int(k[2:])):
            d = parse_kv(ct["conf"][k], "volume")
            out.append((self.vol_path(d["volume"]), d.get("mp", "/"), d.get("ro") == "1"))
        return out

    def apply_pending_mps(self, ct):
        """At start: pending mount point changes (removals, changed values) take effect."""
        pend = ct.pop("pending_mp", None) or {}
        for k, v in sorted(pend.items()):
            old = ct["conf"].pop(k, None)
            if old is not None:
                self.add_unused(ct["conf"], parse_kv(old, "volume")["volume"])
            if v is not None:
                ct["conf"][k] = v

    def free_ct_volumes(self, ct, vmid, unreferenced):
        """A destroy's part for mount points: every mpN and unusedN volume of the config is
        freed; with destroy-unreferenced-disks also any other volume named for vmid."""
        vols = [parse_kv(v, "volume").get("volume", "") for k, v in ct["conf"].items() if is_mp(k) or is_unused(k)]
        for v in vols:
            if v and owner_of(v) == vmid:
                self.vol_free(v)
        if not unreferenced:
            return
        for store in self.cfg["storages"]:
            d = self.path("storage", store)
            for name in os.listdir(d) if os.path.isdir(d) else []:
                m = OWNER_RE.search(name)
                if m and int(m.group(1)) == vmid and not name.endswith(".size"):
                    self.vol_free(f"{store}:{name}")

    def clone_mps(self, conf, newid):
        """A clone's config: each mount point volume copied for the new CT, unused ones dropped."""
        taken = {parse_kv(conf.get("rootfs", ""), "volume").get("volume")}
        for k in sorted(conf):
            if is_unused(k):
                del conf[k]
            elif is_mp(k):
                d = parse_kv(conf[k], "volume")
                d["volume"] = self.vol_copy(d["volume"], newid, taken)
                taken.add(d["volume"])
                conf[k] = print_mp(d)

    def hotplug_mount(self, vmid, volid, path, ro):
        """Bind-mount a volume into a running CT's mount namespace (mountpoint_hotplug)."""
        rt = self.rt.get(vmid) or {}
        proc = rt.get("proc")
        if proc is None:
            return
        script = mount_script(os.path.join(self.ct_dir(vmid), "rootfs"), [(self.vol_path(volid), path, ro)])
        r = subprocess.run(["nsenter", "-t", str(proc.pid), "-m", "--", "/bin/sh", "-c", script],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise die(f"unable to hotplug mount point: {r.stderr.strip()}")


def print_mp(d):
    keys = ["volume", "mp"] + sorted(k for k in d if k not in ("volume", "mp"))
    return ",".join((d[k] if k == "volume" else f"{k}={d[k]}") for k in keys if k in d)


def mount_script(rootdir, mounts):
    """Shell commands that bind-mount each (folder, path, ro) below rootdir ('' for none)."""
    cmds = []
    for src, path, ro in mounts:
        dst = shlex.quote(rootdir.rstrip("/") + path)
        cmds.append(f"mkdir -p {dst} && mount --bind {shlex.quote(src)} {dst}")
        if ro:
            cmds.append(f"mount -o remount,bind,ro {dst}")
    return " && ".join(cmds)



def check_mp_args(c, a, dels):
    """Before the config lock: each mpN value parsed ({key: dict}), the privileges of a
    new disk's allocation checked; a 400 with every malformed key."""
    errors, parsed = {}, {}
    for k, v in a.items():
        if is_unused(k):
            errors[k] = "unable to modify read-only option"
        elif is_mp(k):
            try:
                d = parse_mp(v, k)
            except ParamErr as e:
                errors[k] = str(e)
                continue
            m = NEW_DISK_RE.fullmatch(d["volume"])
            if m and not m.group(1):
                errors[k] = "invalid format - missing storage for new volume\n"
                continue
            if m:
                c.need(f"/storage/{m.group(1)}", "Datastore.AllocateSpace")
            parsed[k] = d
    for k in dels:
        if k.startswith("mp") and not is_mp(k) or k.startswith("unused") and not is_unused(k):
            errors["delete"] = f"invalid format - invalid configuration ID '{k}'\n"
    if errors:
        raise perr(errors)
    return parsed


def apply_mp_config(s, vmid, ct, parsed, dels):
    """Under the config lock: removals and new or changed mount points, as update_pct_config
    and vmconfig_hotplug_pending do them (a running CT takes new mount points at once, keeps
    removed or changed ones until its next start)."""
    conf = ct["conf"]
    running = ct.get("running")
    for k in dels:
        if is_mp(k) and k in conf:
            if running:
                ct.setdefault("pending_mp", {})[k] = None
            else:
                s.add_unused(conf, parse_kv(conf.pop(k), "volume")["volume"])
        elif is_unused(k) and k in conf:
            v = conf.pop(k)
            if v not in s.vols_in_use():
                s.vol_free(v)
    for k, d in sorted(parsed.items()):
        m = NEW_DISK_RE.fullmatch(d["volume"])
        if m:
            size = int(float(m.group(2)) * (1 << 30))
            if size <= 0:
                raise die(f"invalid size '{m.group(2)}' for {k}")
            d["volume"] = s.vol_alloc(m.group(1), vmid, size)
            d["size"] = format_size(size)
        elif not s.vol_exists(d["volume"]):
            raise die(f"unable to parse volume ID '{d['volume']}'" if ":" not in d["volume"]
                      else f"volume '{d['volume']}' does not exist")
        elif s.vol_size(d["volume"]) is not None:  # rescan_volume
            d["size"] = format_size(s.vol_size(d["volume"]))
        value = print_mp(d)
        if running and k in conf:
            ct.setdefault("pending_mp", {})[k] = value
            continue
        for uk in [uk for uk in conf if is_unused(uk) and conf[uk] == d["volume"]]:
            del conf[uk]  # an unused volume put back as a mount point
        conf[k] = value
        if running:
            s.hotplug_mount(vmid, d["volume"], d["mp"], d.get("ro") == "1")
