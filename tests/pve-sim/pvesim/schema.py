"""API errors, parameter schema validation, and Proxmox property strings (net0, rootfs, sizes)."""

import ipaddress
import random
import re


class ApiError(Exception):
    def __init__(self, code, msg, errors=None):
        super().__init__(msg)
        self.code = code
        self.msg = msg
        self.errors = errors


def perr(errors):
    return ApiError(400, "Parameter verification failed.", errors)


def die(msg):
    return ApiError(500, msg)


class ParamErr(Exception):
    pass


def P(t, **kw):
    kw["type"] = t
    return kw


DNS_RE = r"([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?"
NODE_RE = r"[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?"
TAG_RE = r"[a-z0-9_][a-z0-9_\-\+\.]*"
MAC_RE = r"[a-f0-9][02468ace](?::[a-f0-9]{2}){5}"
GROUP_RE = r"[A-Za-z][A-Za-z0-9\-\_]+"
POOL_RE = r"[A-Za-z0-9\.\-_]+(/[A-Za-z0-9\.\-_]+){0,2}"
STORAGE_RE = r"[a-z][a-z0-9\-\_\.]*[a-z0-9]"


def fmt_dns(v):
    if not re.fullmatch(DNS_RE, v):
        raise ParamErr("invalid format - value does not look like a valid DNS name\n")
    return v


def split_list(v):
    return [x for x in re.split(r"[;,\s\0]+", v) if x != ""]


def fmt_tags(v):
    tags = split_list(v)
    for t in tags:
        if not re.fullmatch(TAG_RE, t, re.I):
            raise ParamErr("invalid format - invalid characters in tag\n")
    return ";".join(sorted(set(t.lower() for t in tags)))


def check_value(v, spec):
    t = spec["type"]
    if t == "bool":
        if v in (0, 1) or v in ("0", "1"):
            return int(v)
        raise ParamErr(f"type check ('boolean') failed - got '{v}'")
    s = str(v)
    if t == "int":
        if not re.fullmatch(r"[+-]?\d+", s):
            raise ParamErr(f"type check ('integer') failed - got '{s}'")
        n = int(s)
        if "min" in spec and n < spec["min"]:
            raise ParamErr(f"value must have a minimum value of {spec['min']}")
        if "max" in spec and n > spec["max"]:
            raise ParamErr(f"value must have a maximum value of {spec['max']}")
        return n
    if t == "number":
        if not re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", s):
            raise ParamErr(f"type check ('number') failed - got '{s}'")
        n = float(s)
        if "min" in spec and n < spec["min"]:
            raise ParamErr(f"value must have a minimum value of {spec['min']}")
        if "max" in spec and n > spec["max"]:
            raise ParamErr(f"value must have a maximum value of {spec['max']}")
        return n
    if t == "enum":
        if s not in spec["enum"]:
            raise ParamErr(f"value '{s}' does not have a value in the enumeration '{', '.join(spec['enum'])}'")
        return s
    if t == "string":
        if "maxlen" in spec and len(s) > spec["maxlen"]:
            raise ParamErr(f"value may only be {spec['maxlen']} characters long")
        if "pattern" in spec and not re.fullmatch(spec["pattern"], s):
            raise ParamErr("value does not match the regex pattern")
        if "fmt" in spec:
            return spec["fmt"](s)
        return s
    raise AssertionError(t)


def validate(params, schema, required=(), patterns=()):
    errors = {}
    out = {}
    for k, v in params.items():
        spec = schema.get(k)
        if spec is None:
            for pat, s in patterns:
                if re.fullmatch(pat, k):
                    spec = s
                    break
        if spec is None:
            errors[k] = "property is not defined in schema and the schema does not allow additional properties"
            continue
        try:
            out[k] = check_value(v, spec)
        except ParamErr as e:
            errors[k] = str(e)
    for k in required:
        if k not in params:
            errors[k] = "property is missing and it is not optional"
    if errors:
        raise perr(errors)
    return out


# ---- property strings (net0, rootfs) and sizes

NET_SPEC = {
    "name": P("string", pattern=r"[-_.\w\d]+"),
    "bridge": P("string", pattern=r"[-_.\w\d]+"),
    "hwaddr": P("string", pattern=r"(?i)" + MAC_RE),
    "ip": P("string"),
    "gw": P("string"),
    "ip6": P("string"),
    "gw6": P("string"),
    "firewall": P("pbool"),
    "tag": P("int", min=1, max=4094),
    "trunks": P("string", pattern=r"\d+(?:;\d+)*"),
    "rate": P("number", min=0),
    "mtu": P("int", min=64, max=65535),
    "link_down": P("pbool"),
    "host-managed": P("pbool"),
    "type": P("enum", enum=["veth"]),
}


def parse_pbool(v):
    lv = str(v).lower()
    if lv in ("1", "on", "yes", "true"):
        return 1
    if lv in ("0", "off", "no", "false"):
        return 0
    raise ParamErr(f"type check ('boolean') failed - got '{v}'")


def random_mac():
    return "BC:24:11:%02X:%02X:%02X" % (random.randrange(256), random.randrange(256), random.randrange(256))


def parse_net(s, key="net0"):
    d = {}
    for part in s.split(","):
        if part == "":
            continue
        if "=" not in part:
            raise ParamErr(f"invalid format - format error\n{key}.name: property is missing and it is not optional\n"
                           if not d else "invalid format - format error\n")
        k, v = part.split("=", 1)
        spec = NET_SPEC.get(k)
        if spec is None:
            raise ParamErr(f"invalid format - format error\n{key}.{k}: property is not defined in schema and the schema does not allow additional properties\n")
        try:
            d[k] = parse_pbool(v) if spec["type"] == "pbool" else check_value(v, spec)
        except ParamErr as e:
            raise ParamErr(f"invalid format - format error\n{key}.{k}: {e}\n")
        if k == "ip" and v not in ("dhcp", "manual"):
            try:
                ipaddress.IPv4Interface(v)
                if "/" not in v:
                    raise ValueError
            except ValueError:
                raise ParamErr(f"invalid format - format error\n{key}.ip: invalid format - value does not look like a valid CIDR network\n")
    if "name" not in d:
        raise ParamErr(f"invalid format - format error\n{key}.name: property is missing and it is not optional\n")
    if "hwaddr" not in d:
        d["hwaddr"] = random_mac()
    return d


def print_net(d):
    keys = ["name"] + sorted(k for k in d if k != "name")
    out = []
    for k in keys:
        v = d[k]
        if isinstance(v, float) and v == int(v):
            v = int(v)
        out.append(f"{k}={v}")
    return ",".join(out)


def parse_kv(s, default_key=None):
    d = {}
    for part in s.split(","):
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
        else:
            k, v = default_key, part
        d[k] = v
    return d


UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(s):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)", s)
    if not m:
        return None
    return int(float(m.group(1)) * UNITS[m.group(2)])


def format_size(n):
    for u in ("T", "G", "M", "K"):
        if n % UNITS[u] == 0:
            return f"{n // UNITS[u]}{u}"
    return str(n)


def rootfs_parts(rootfs):
    d = parse_kv(rootfs, "volume")
    return d


def print_rootfs(d):
    keys = ["volume"] + sorted(k for k in d if k != "volume")
    return ",".join((d[k] if k == "volume" else f"{k}={d[k]}") for k in keys)


def int_path(v, name):
    """A path segment that must be an integer (a rule position)."""
    if not re.fullmatch(r"\d+", str(v)):
        raise perr({name: f"type check ('integer') failed - got '{v}'"})
    return int(v)
