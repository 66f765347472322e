"""Templates built from a file, for the Python client (`Client.build_template`): the same
Dockerfile subset and the same steps as `sandboxctl template build` (docs/protocol.md,
"Building a template from a file"): FROM (a template), RUN (shell and exec forms), COPY
(from the context folder), ENV, WORKDIR, USER; `\\` continuations and comments. The file is
checked, and its COPY sources looked up in the context, before anything is created; a
failing step (or an exception, KeyboardInterrupt included) destroys the build sandbox."""

import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import sandboxd

KINDS = ("FROM", "RUN", "COPY", "ENV", "WORKDIR", "USER")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}$")
_TEMPLATE = re.compile(r"[a-z0-9-]{1,32}$")
_USER = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,31}$")
BUILD_TTL_S = 600


class BuildFileError(sandboxd.Error):
    """A build file refused before anything was made: `line` (0: the file as a whole)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


class BuildStepError(sandboxd.Error):
    """A step failed (the build sandbox was destroyed): `step` (1-based), `line`."""

    def __init__(self, step: int, steps: int, line: int, message: str) -> None:
        super().__init__(f"step {step}/{steps} (line {line}) failed: {message}")
        self.step, self.line = step, line


@dataclass
class Step:
    kind: str
    line: int
    text: str
    arg: str = ""
    words: List[str] = field(default_factory=list)
    exec_form: bool = False


def source_ok(src: str) -> bool:
    return bool(src) and not src.startswith("/") and ".." not in src.split("/")


def _json_words(rest: str) -> Optional[List[str]]:
    if not rest.startswith("["):
        return None
    try:
        v = json.loads(rest)
    except ValueError:
        return None
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return v
    return None


def _env_pairs(rest: str, line: int) -> List[str]:
    m = re.match(r"([^\s=]+)(\s+)(.*)$", rest)
    if "=" not in rest.split()[0]:
        if not m or not _ENV_NAME.match(m.group(1)) or not m.group(3):
            raise BuildFileError(line, "ENV needs NAME=VALUE or NAME VALUE")
        return [m.group(1), m.group(3)]
    out: List[str] = []
    i = 0
    while i < len(rest):
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", rest[i:])
        if not m:
            raise BuildFileError(line, f'ENV: "{rest[i:].split()[0][:64]}" is not NAME=VALUE')
        i += m.end()
        val = ""
        while i < len(rest) and rest[i] not in " \t":
            c = rest[i]
            if c in "\"'":
                j = i + 1
                while j < len(rest) and rest[j] != c:
                    if c == '"' and rest[j] == "\\" and j + 1 < len(rest) and rest[j + 1] in '"\\':
                        j += 1
                    val += rest[j]
                    j += 1
                if j >= len(rest):
                    raise BuildFileError(line, "ENV: an unterminated quote")
                i = j + 1
            elif c == "\\" and i + 1 < len(rest):
                val += rest[i + 1]
                i += 2
            else:
                val += c
                i += 1
        out += [m.group(1), val]
        while i < len(rest) and rest[i] in " \t":
            i += 1
    return out


def _step(kind: str, rest: str, line: int) -> Step:
    s = Step(kind, line, f"{kind} {rest}")
    if kind == "FROM":
        w = rest.split()
        if len(w) > 1 and w[1].upper() == "AS":
            raise BuildFileError(line, "FROM ... AS: multi-stage builds are not supported")
        if len(w) != 1 or not _TEMPLATE.match(w[0]):
            raise BuildFileError(line, "FROM needs one template name ([a-z0-9-], 1..32)")
        s.arg = w[0]
    elif kind == "RUN":
        w = _json_words(rest)
        s.exec_form, s.words, s.arg = w is not None, w or [], rest
    elif kind == "COPY":
        w = _json_words(rest) if rest.startswith("[") else rest.split()
        if w is None:
            raise BuildFileError(line, "COPY: not a JSON array of strings")
        if w and w[0].startswith("--"):
            raise BuildFileError(line, f"COPY {w[0]}: flags are not supported")
        if len(w) < 2:
            raise BuildFileError(line, "COPY needs a source and a destination")
        for src in w[:-1]:
            if not source_ok(src):
                raise BuildFileError(line, f'COPY source "{src[:128]}" is outside the context '
                                           "(absolute, or with '..')")
        s.words = w
    elif kind == "ENV":
        s.words = _env_pairs(rest, line)
    elif kind == "USER":
        if ":" in rest:
            raise BuildFileError(line, "USER user:group is not supported")
        if not _USER.match(rest):
            raise BuildFileError(line, "USER needs one user name or uid")
        s.arg = rest
    else:
        s.arg = rest
    return s


def parse(text: str) -> List[Step]:
    """The steps of a build file (steps[0] the FROM); BuildFileError names the line."""
    steps: List[Step] = []
    cur, start = "", 0

    def instruction(ins: str, line: int) -> None:
        ins = ins.strip(" \t")
        kw, _, rest = ins.partition(" ") if " " in ins.split("\t")[0] else ins.partition("\t")
        kind, rest = kw.upper(), rest.strip(" \t")
        if kind not in KINDS:
            raise BuildFileError(line, f'unknown instruction "{kw[:32]}" (supported: '
                                       "FROM, RUN, COPY, ENV, WORKDIR, USER)")
        if not steps and kind != "FROM":
            raise BuildFileError(line, "the file must start with FROM <template>")
        if steps and kind == "FROM":
            raise BuildFileError(line, "a second FROM: multi-stage builds are not supported")
        if not rest:
            raise BuildFileError(line, f"{kind} needs arguments")
        steps.append(_step(kind, rest, line))

    for n, raw in enumerate(text.split("\n"), 1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line.strip(" \t") or line.lstrip(" \t").startswith("#"):
            continue
        if not cur:
            start = n
        line = line.rstrip(" \t")
        if line.endswith("\\"):
            cur += line[:-1]
            continue
        instruction(cur + line, start)
        cur = ""
    if cur:
        instruction(cur, start)
    if not steps:
        raise BuildFileError(0, "no FROM: the file must start with FROM <template>")
    return steps


def _resolve(base: Optional[str], p: str) -> str:
    if p.startswith("/"):
        return p
    return ("" if not base or base == "/" else base) + "/" + p


def _check_sources(steps: List[Step], context: str) -> None:
    for s in steps:
        for src in s.words[:-1] if s.kind == "COPY" else []:
            real = os.path.realpath(os.path.join(context, src))
            if real != context and not real.startswith(context.rstrip("/") + "/"):
                raise BuildFileError(s.line, f'COPY source "{src}" is outside the context '
                                             f"(a symbolic link leading to {real})")
            if not os.path.exists(real):
                raise BuildFileError(s.line, f'COPY source "{src}": no such file in the context')


class _Build:
    def __init__(self, client: Any, steps: List[Step], context: str,
                 out: Callable[[str, bytes], None]) -> None:
        self.client, self.steps, self.context, self.out = client, steps, context, out
        self.sb: Any = None
        self.env: Dict[str, str] = {}
        self.cwd: Optional[str] = None
        self.user: Optional[str] = None

    def state(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {}
        if self.env:
            d["env"] = dict(self.env)
        if self.cwd:
            d["cwd"] = self.cwd
        if self.user:
            d["user"] = self.user
        return d

    def fail(self, i: int, message: str) -> None:
        raise BuildStepError(i + 1, len(self.steps), self.steps[i].line, message)

    def remote(self, i: int, argv: List[str], **kw: Any) -> None:
        r = self.sb.exec(argv, timeout_ms=sandboxd._TREE_TIMEOUT_MS, user="0", **kw)
        if not r.ok:
            self.fail(i, f"the command in the sandbox failed: {r.stderr.strip()}")

    def run(self, i: int, s: Step) -> None:
        argv = s.words if s.exec_form else ["/bin/sh", "-c", s.arg]
        stream = self.sb.exec_stream(argv, timeout_ms=sandboxd._TREE_TIMEOUT_MS, **self.state())
        for chunk in stream:
            self.out(chunk.stream, chunk.data)
        r = stream.result
        if r.timed_out:
            self.fail(i, "timed out")
        if r.exit_code != 0:
            self.fail(i, f"exit status {r.exit_code}" if r.exit_code is not None
                      else f"killed by {r.signal}")

    def copy(self, i: int, s: Step) -> None:
        d = s.words[-1]
        dest = _resolve(self.cwd, d)
        to_dir = len(s.words) > 2 or d.endswith("/")
        for src in s.words[:-1]:
            real = os.path.realpath(os.path.join(self.context, src))
            if os.path.isdir(real):
                self.sb._tree(["tar", "--owner=0", "--group=0", "--numeric-owner", "-C", real,
                               "-cf", "-", "."], 'mkdir -p "$1" && exec tar -C "$1" -xpf -',
                              dest, True, None)
                continue
            target = dest.rstrip("/") + "/" + os.path.basename(src) if to_dir else dest
            if not to_dir:
                try:
                    if self.sb.stat(dest, follow=True).get("type") == "directory":
                        target = dest.rstrip("/") + "/" + os.path.basename(src)
                except sandboxd.Error:
                    pass
            with open(real, "rb") as f:
                self.sb.write_file(target, f, mode=os.stat(real).st_mode & 0o7777,
                                   make_parents=True)

    def step(self, i: int, s: Step) -> None:
        if s.kind == "RUN":
            self.run(i, s)
        elif s.kind == "COPY":
            self.copy(i, s)
        elif s.kind == "ENV":
            for k in range(0, len(s.words), 2):
                self.env[s.words[k]] = s.words[k + 1]
        elif s.kind == "WORKDIR":
            self.cwd = _resolve(self.cwd, s.arg)
            self.remote(i, ["sh", "-c", '[ -d "$1" ] && exit 0; mkdir -p "$1" && '
                            '{ [ -z "$2" ] || chown "$2" "$1"; }', "sh", self.cwd,
                            self.user or ""])
        elif s.kind == "USER":
            try:
                self.sb.exec(["true"], user=s.arg)
            except sandboxd.InvalidParams as e:
                self.fail(i, e.reason or "no such user in the sandbox")
            self.user = s.arg


def build_template(client: Any, name: str, dockerfile_text: str, context_dir: str = ".",
                   internet: bool = False,
                   out: Optional[Callable[[str, bytes], None]] = None) -> Dict[str, Any]:
    """See Client.build_template."""
    steps = parse(dockerfile_text)
    context = os.path.realpath(context_dir)
    _check_sources(steps, context)
    known = {t["name"]: t for t in client.templates()}
    if name in known:
        raise BuildFileError(0, f"a template named {name} exists")
    if out is None:
        def out(stream: str, data: bytes) -> None:
            f = sys.stdout if stream == "stdout" else sys.stderr
            f.buffer.write(data)
            f.flush()
    b = _Build(client, steps, context, out)
    base = (known.get(steps[0].arg) or {}).get("defaults") or {}  # inherited, as a base image's
    b.env, b.cwd, b.user = dict(base.get("env") or {}), base.get("cwd"), base.get("user")
    try:
        for i, s in enumerate(steps):
            out("stdout", f"Step {i + 1}/{len(steps)}: {s.text}\n".encode())
            if i == 0:
                b.sb = client.create(template=s.arg, ttl_s=BUILD_TTL_S, internet=internet)
                continue
            b.sb.renew(BUILD_TTL_S)
            b.step(i, s)
        t = client.make_template(b.sb.id, name, defaults=b.state())
        b.sb = None
        return t
    finally:
        if b.sb is not None:
            try:
                b.sb.destroy()
            except sandboxd.Error:
                pass
