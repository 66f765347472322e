// The client against a running sandboxd (SANDBOXD_SOCKET): tests/clients/test_typescript.py
// starts the Proxmox VE simulator and the daemon, builds this package and runs these.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import { after, before, test } from "node:test";

import {
  BadState,
  Client,
  ConnectionLost,
  ExecResult,
  FileError,
  InvalidParams,
  InvalidRequest,
  NoSuchSandbox,
  type OutputChunk,
  Sandbox,
  SandboxdError,
  TimeoutError,
  Unavailable,
} from "sandboxd";

const socket = process.env.SANDBOXD_SOCKET;
assert.ok(socket, "SANDBOXD_SOCKET must name the daemon's socket");

const client = new Client();
let sb: Sandbox;

function sha256(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

async function rejects<T extends SandboxdError>(
  p: Promise<unknown>,
  cls: abstract new (...args: never[]) => T,
): Promise<T> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof cls, `expected ${cls.name}, got ${String(err)}`);
    assert.ok(err instanceof SandboxdError);
    return err;
  }
  assert.fail(`expected ${cls.name}, the call succeeded`);
}

before(async () => {
  assert.equal(client.socket, socket);
  sb = await client.create({ labels: { suite: "ts" }, memoryMb: 256, ttlS: 600 });
});

after(async () => {
  await sb?.destroy();
  await client.close();
});

test("status, create, get, list", async () => {
  const st = await client.status();
  assert.equal(typeof st.version, "string");
  assert.ok(await client.offers("sandbox.exec"));
  assert.match(sb.id, /^sb-/);
  assert.equal(sb.state, "ready");
  assert.equal(sb.info.memory_mb, 256);
  assert.deepEqual(sb.labels, { suite: "ts" });
  assert.equal((await client.get(sb.id)).id, sb.id);
  assert.deepEqual(
    (await client.list({ labels: { suite: "ts" } })).map((s) => s.id),
    [sb.id],
  );
  assert.equal((await sb.get()).state, "ready");
});

test("exec: output, exit code, signal, argv, stdin, cwd, env", async () => {
  let r = await sb.exec("echo out; echo err >&2; exit 3");
  assert.ok(r instanceof ExecResult);
  assert.equal(r.exitCode, 3);
  assert.equal(r.stdout, "out\n");
  assert.equal(r.stderr, "err\n");
  assert.equal(r.ok, false);
  assert.equal(r.timedOut, false);
  r = await sb.exec("kill -TERM $$");
  assert.equal(r.exitCode, null);
  assert.equal(r.signal, "SIGTERM");
  r = await sb.exec(["cat"], { stdin: new Uint8Array([0xff, 0x00, 0x41]), cwd: "/tmp" });
  assert.deepEqual([...r.stdoutBytes], [0xff, 0x00, 0x41]);
  r = await sb.exec("pwd; echo \"$A\"", { cwd: "/tmp", env: { A: "a b" } });
  assert.equal(r.stdout, "/tmp\na b\n");
  assert.ok(r.ok);
  r = await sb.exec("sleep 5", { timeoutMs: 300 });
  assert.equal(r.timedOut, true);
  assert.equal(r.exitCode, null);
});

test("streaming exec: an async iterator and a callback", async () => {
  const stream = sb.execStream("echo one; sleep 0.3; echo two >&2; echo three");
  const chunks: OutputChunk[] = [];
  const times: number[] = [];
  for await (const c of stream) {
    chunks.push(c);
    times.push(Date.now());
  }
  const out = chunks.filter((c) => c.stream === "stdout").map((c) => c.text).join("");
  assert.equal(out, "one\nthree\n");
  assert.ok(times[times.length - 1]! - times[0]! >= 200, "the chunks came as the command ran");
  const r = await stream.result;
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "one\nthree\n");
  assert.equal(r.stderr, "two\n");

  const seen: string[] = [];
  const r2 = await sb.exec("for i in 1 2 3; do echo $i; sleep 0.1; done; exit 4", {
    onOutput: (c) => seen.push(c.text),
  });
  assert.equal(seen.join(""), "1\n2\n3\n");
  assert.ok(seen.length >= 2, `output in pieces: ${JSON.stringify(seen)}`);
  assert.equal(r2.exitCode, 4);
  assert.equal(r2.stdout, "1\n2\n3\n");

  // A failing streaming call throws from the iterator and from result.
  const bad = sb.execStream("true", { timeoutMs: -1 });
  await rejects(
    (async () => {
      for await (const _ of bad) void _;
    })(),
    InvalidParams,
  );
  await rejects(bad.result, InvalidParams);
});

test("concurrent calls on one client", async () => {
  const streams = [0, 1, 2].map((n) => sb.execStream(`for i in 1 2 3; do echo ${n}-$i; sleep 0.1; done`));
  const t0 = Date.now();
  const results = await Promise.all([
    ...streams.map((s) => s.wait()),
    ...[0, 1, 2, 3].map((n) => sb.exec(`sleep 0.5; echo ${n}`)),
    client.status(),
  ]);
  for (const n of [0, 1, 2]) {
    assert.equal((results[n] as ExecResult).stdout, `${n}-1\n${n}-2\n${n}-3\n`);
  }
  assert.deepEqual(
    results.slice(3, 7).map((r) => (r as ExecResult).stdout),
    ["0\n", "1\n", "2\n", "3\n"],
  );
  assert.ok(Date.now() - t0 < 1900, "the four 0.5 s commands ran at once");
});

test("per-call timeout: the wait ends, the client goes on", async () => {
  await rejects(sb.exec("sleep 2", { timeout: 300 }), TimeoutError);
  await rejects(sb.execStream("echo x; sleep 2", { timeout: 300 }).wait(), TimeoutError);
  assert.equal((await sb.exec("echo after", { timeout: 30000 })).stdout, "after\n");

  // A client's default timeout: a call asking for a longer command or wait waits for it.
  const short = new Client({ socket, timeout: 500 });
  try {
    const s2 = await short.get(sb.id);
    await rejects(s2.exec("sleep 1.5"), TimeoutError);
    assert.equal((await s2.exec("sleep 1.5; echo slow", { timeoutMs: 5000 })).stdout, "slow\n");
    const p = await s2.startProcess("sleep 1.5; echo late");
    assert.equal((await p.wait({ timeoutMs: 5000 })).state, "exited");
  } finally {
    await short.close();
  }
});

test("files: a 5 MiB binary round trip, text, chunks, offsets", async () => {
  const big = new Uint8Array(randomBytes(5 << 20));
  assert.equal(await sb.writeFile("/root/big.bin", big, { mode: 0o640 }), big.length);
  const r = await sb.exec("sha256sum < /root/big.bin; stat -c '%s %a' /root/big.bin");
  assert.equal(r.stdout, `${sha256(big)}  -\n${big.length} 640\n`);
  const back = await sb.readFile("/root/big.bin");
  assert.equal(back.length, big.length);
  assert.equal(sha256(back), sha256(big));

  // In pieces: 1 MiB requests each way.
  assert.equal(await sb.writeFile("/root/big2.bin", big, { chunkSize: 1 << 20 }), big.length);
  assert.equal((await sb.exec("sha256sum < /root/big2.bin")).stdout, `${sha256(big)}  -\n`);
  const back2 = await sb.readFile("/root/big2.bin", { chunkSize: 1 << 20 });
  assert.equal(sha256(back2), sha256(big));
  const part = await sb.readFile("/root/big.bin", { offset: 1000, length: 3 << 20, chunkSize: 1 << 20 });
  assert.equal(sha256(part), sha256(big.subarray(1000, 1000 + (3 << 20))));

  assert.equal(await sb.writeFile("/root/a/b.txt", "héllo\n"), 7);
  assert.equal(await sb.readText("/root/a/b.txt"), "héllo\n");
  assert.equal(await sb.writeFile("/root/a/b.txt", "HÉ", { offset: 0 }), 3);
  assert.equal(await sb.writeFile("/root/a/b.txt", "!\n", { append: true }), 2);
  assert.equal(await sb.readText("/root/a/b.txt"), "HÉllo\n!\n");
  assert.equal(await sb.writeFile("/root/empty", ""), 0);
  assert.equal((await sb.readFile("/root/empty")).length, 0);
  const ctl = new Uint8Array(4096).fill(1); // all control characters: sent as base64
  await sb.writeFile("/root/ctl", ctl);
  assert.deepEqual(await sb.readFile("/root/ctl"), ctl);

  // A piece too large for the daemon's request line (16 MiB): the daemon answers -32600 and
  // closes the connection; nothing is written, and the next call opens a new connection.
  const huge = new Uint8Array(randomBytes(13 << 20));
  const tooBig = await rejects(sb.writeFile("/root/huge", huge, { chunkSize: 13 << 20 }), SandboxdError);
  assert.ok(
    tooBig instanceof InvalidRequest || tooBig instanceof ConnectionLost,
    `InvalidRequest or ConnectionLost, got ${String(tooBig)}`,
  );
  console.log(`# a line over the cap: ${tooBig.name}`);
  assert.equal((await rejects(sb.stat("/root/huge"), FileError)).data.errno, "ENOENT");

  const e = await rejects(sb.readFile("/no/such/file"), FileError);
  assert.equal(e.code, -32009);
  assert.equal(e.data.errno, "ENOENT");
});

test("file system: mkdir, rename, list, stat, remove", async () => {
  assert.equal(await sb.mkdir("/root/fs/x", { parents: true }), true);
  assert.equal(await sb.mkdir("/root/fs/x", { parents: true }), false);
  assert.equal(await sb.mkdir("/root/fs/m", { mode: 0o700 }), true);
  await sb.writeFile("/root/fs/x/c", "1234567");
  await sb.rename("/root/fs/x/c", "/root/fs/x/d");
  const entries = await sb.list("/root/fs/x");
  assert.deepEqual(entries.map((e) => [e.name, e.type, e.size]), [["d", "file", 7]]);
  assert.equal((await sb.stat("/root/fs/m")).mode, "0700");
  await sb.exec("ln -s x/d /root/fs/link");
  const link = await sb.stat("/root/fs/link");
  assert.equal(link.type, "symlink");
  assert.equal(link.target, "x/d");
  assert.equal((await sb.stat("/root/fs/link", { follow: true })).type, "file");
  const listed = await sb.listDir("/root/fs", { limit: 1 });
  assert.equal(listed.truncated, true);
  await rejects(sb.list("/root/fs", { limit: 1 }), FileError);
  assert.equal((await rejects(sb.remove("/root/fs"), FileError)).data.errno, "ENOTEMPTY");
  assert.equal(await sb.remove("/root/fs", { recursive: true }), 5);
  assert.equal((await rejects(sb.stat("/root/fs"), FileError)).data.errno, "ENOENT");
  assert.equal((await rejects(sb.rename("/root/nothing", "/root/x"), FileError)).data.errno, "ENOENT");
});

test("a background process: write, read, wait, kill", async () => {
  const p = await sb.startProcess("cat; echo done >&2; exit 5", { stdin: true });
  assert.match(p.id, /^pr-/);
  assert.equal(p.info.state, "running");
  await p.write("fed\n");
  const first = await p.read({ waitMs: 10000 });
  assert.equal(first.text, "fed\n");
  assert.equal(first.eof, false);
  assert.equal(first.state, "running");
  assert.equal((await p.write(new Uint8Array([0xff, 0x0a]), { close: true })).closed, true);
  const w = await p.wait({ timeoutMs: 10000 });
  assert.deepEqual(w, { state: "exited", exitCode: 5, signal: null });
  const rest = await p.read({ offset: first.nextOffset });
  assert.deepEqual([...rest.data], [0xff, 0x0a]);
  assert.equal(rest.eof, true);
  assert.equal((await p.read({ stream: "stderr" })).text, "done\n");
  const all: Uint8Array[] = [];
  for await (const b of p.output({ follow: true })) all.push(b);
  assert.equal(Buffer.concat(all).length, 6);
  await rejects(p.write("late"), BadState);

  const sleeper = await sb.startProcess(["sleep", "100"]);
  assert.equal((await sleeper.wait({ timeoutMs: 0 })).state, "running");
  const k = await sleeper.kill();
  assert.equal(k.sent, "SIGKILL");
  assert.equal(k.state, "exited");
  assert.equal(k.signal, "SIGKILL");
  const listed = (await sb.processes()).map((x) => x.process);
  assert.ok(listed.includes(p.id) && listed.includes(sleeper.id));
  assert.equal((await sb.process(sleeper.id).wait()).signal, "SIGKILL");
  const e = await rejects(sb.process("pr-0000000000000000").wait(), InvalidParams);
  assert.equal(e.data.param, "process");
});

test("a terminal resized while its program waits", async () => {
  const p = await sb.startProcess("read -r x; stty size", { stdin: true, pty: { cols: 80, rows: 24 } });
  await p.resize(100, 30);
  await p.write("go\n");
  assert.equal((await p.wait({ timeoutMs: 10000 })).state, "exited");
  const all: Uint8Array[] = [];
  for await (const b of p.output()) all.push(b);
  assert.match(Buffer.concat(all).toString(), /30 100/);
});

test("snapshot, rollback restores the file, delete", async () => {
  await sb.writeFile("/root/snap.txt", "before");
  const snap = await sb.snapshot("ts1");
  assert.equal(snap.name, "ts1");
  await sb.writeFile("/root/snap.txt", "after");
  assert.deepEqual((await sb.snapshots()).map((x) => x.name), ["ts1"]);
  assert.equal((await sb.rollback("ts1")).info.state, "ready");
  assert.equal(await sb.readText("/root/snap.txt"), "before");
  await sb.deleteSnapshot("ts1");
  assert.deepEqual(await sb.snapshots(), []);
  const kids = await sb.fork({ count: 1 });
  assert.equal(kids.length, 1);
  for (const kid of kids) {
    assert.notEqual(kid.id, sb.id);
    assert.equal(await kid.readText("/root/snap.txt"), "before");
    await kid.destroy();
  }
});

test("volumes: create with one, detach, attach read-only elsewhere, delete", async () => {
  const v = await client.createVolume("ts-vol", 1);
  assert.deepEqual(v, { name: "ts-vol", size_gb: 1, owner_uid: v.owner_uid, attached_to: null });
  await rejects(client.createVolume("ts-vol", 1), InvalidParams);
  const a = await client.create({ memoryMb: 256, ttlS: 600, volumes: [{ name: "ts-vol", path: "/mnt/ts" }] });
  await a.writeFile("/mnt/ts/f", "from ts");
  assert.deepEqual((await client.volumes()).map((x) => x.attached_to), [a.id]);
  await rejects(client.deleteVolume("ts-vol"), BadState);
  assert.equal((await a.detach("ts-vol")).info.state, "ready");
  await rejects(a.detach("ts-vol"), InvalidParams);
  assert.equal((await sb.attach("ts-vol", "/data", { readOnly: true })).info.state, "ready");
  await rejects(a.attach("ts-vol", "/mnt/ts"), InvalidParams);
  assert.equal(await sb.readText("/data/f"), "from ts");
  await a.destroy();
  assert.equal((await sb.detach("ts-vol")).info.state, "ready");
  assert.deepEqual((await client.volumes()).map((x) => x.attached_to), [null]);
  await client.deleteVolume("ts-vol");
  assert.deepEqual(await client.volumes(), []);
});

test("a sandbox becomes a template; a clone of it has its file; delete after", async () => {
  const src = await client.create({ memoryMb: 256, ttlS: 600 });
  await src.writeFile("/root/tmpl.txt", "baked");
  const t = await src.makeTemplate("ts-tmpl");
  assert.equal(t.name, "ts-tmpl");
  assert.deepEqual(t.origin, { sandbox: src.id, uid: t.owner_uid, created_at: (t.origin as { created_at: number }).created_at });
  const s = await client.create({ template: "ts-tmpl", memoryMb: 256, ttlS: 600 });
  try {
    assert.equal(await s.readText("/root/tmpl.txt"), "baked");
    const list = await client.templates();
    assert.equal(list.find((x) => x.name === "ts-tmpl")?.used_by.sandboxes, 1);
    await rejects(client.deleteTemplate("ts-tmpl"), BadState);
  } finally {
    await s.destroy();
  }
  await client.deleteTemplate("ts-tmpl");
  assert.ok(!(await client.templates()).some((x) => x.name === "ts-tmpl"));
});

test("a port forward serves a page from the sandbox", async () => {
  await sb.writeFile("/root/www/index.html", "hello through the forward\n", { makeParents: true });
  const httpd = await sb.startProcess(["httpd", "-f", "-p", "8080", "-h", "/root/www"]);
  await using fwd = await sb.forward(8080);
  assert.ok(fwd.socket && !fwd.address, JSON.stringify(fwd));
  assert.ok((await sb.forwards()).some((f) => f.forward === fwd.forward));
  let body = "";
  for (let i = 0; i < 50 && !body.includes("hello"); i++) {
    body = await new Promise<string>((resolve) => {
      const req = http.get({ socketPath: fwd.socket, path: "/index.html" }, (res) => {
        let b = "";
        res.on("data", (d) => (b += d));
        res.on("end", () => resolve(b));
      });
      req.on("error", () => setTimeout(() => resolve(""), 100));
    });
  }
  assert.equal(body, "hello through the forward\n");
  await fwd.close();
  assert.ok(!(await sb.forwards()).some((f) => f.forward === fwd.forward));
  await httpd.kill();
});

test("a preview URL serves a page from the sandbox", async () => {
  await sb.writeFile("/root/www/index.html", "hello through the preview\n", { makeParents: true });
  const httpd = await sb.startProcess(["httpd", "-f", "-p", "8081", "-h", "/root/www"]);
  await using pv = await sb.preview(8081, { ttlS: 300 });
  const u = new URL(pv.url);
  assert.ok(pv.port === 8081 && pv.expiresAt > Date.now() / 1000, JSON.stringify(pv));
  assert.ok((await sb.previews()).some((p) => p.preview === pv.preview));
  const token = u.searchParams.get("sandboxd_preview") ?? "";
  const get = (cookie: string) =>
    new Promise<[number, string]>((resolve) => {
      const req = http.get(
        { host: "127.0.0.1", port: Number(u.port), path: "/index.html",
          headers: { Host: u.host, Cookie: cookie } },
        (res) => {
          let b = "";
          res.on("data", (d) => (b += d));
          res.on("end", () => resolve([res.statusCode ?? 0, b]));
        },
      );
      req.on("error", () => setTimeout(() => resolve([0, ""]), 100));
    });
  let got: [number, string] = [0, ""];
  for (let i = 0; i < 50 && got[0] !== 200; i++) got = await get(`sandboxd_preview=${token}`);
  assert.deepEqual(got, [200, "hello through the preview\n"]);
  assert.equal((await get("sandboxd_preview=nope"))[0], 403);
  await pv.close();
  assert.equal((await get(`sandboxd_preview=${token}`))[0], 403);
  await httpd.kill();
});

test("internet and renew", async () => {
  assert.equal((await sb.setInternet(true)).internet, true);
  assert.equal(sb.internet, true);
  assert.equal(typeof sb.info.effective_by, "string");
  assert.equal((await sb.setInternet(false)).internet, false);
  const before = sb.expiresAt.getTime();
  await new Promise((r) => setTimeout(r, 1100));
  await sb.renew(1200);
  assert.ok(sb.expiresAt.getTime() > before);
});

test("errors: one class per code, with code, message and data", async () => {
  const e = await rejects(client.get("sb-nosuchthing"), NoSuchSandbox);
  assert.equal(e.code, -32001);
  assert.equal(e.name, "NoSuchSandbox");
  assert.equal(e.rpcMessage, "No such sandbox");
  assert.ok(e.message.startsWith("No such sandbox (-32001)"), e.message);
  assert.equal(typeof e.data.reason, "string");
  const p = await rejects(sb.renew(-5), InvalidParams);
  assert.equal(p.code, -32602);
  assert.equal(p.data.param, "ttl_s");
  const c = await rejects(client.create({ cores: 100000 }), InvalidParams);
  assert.equal(c.data.param, "cores");
  await rejects(new Client({ socket: "/nonexistent/sandboxd.sock" }).status(), Unavailable);
});

test("env at create: passed through", async () => {
  const doc = await client.discover();
  const methods = doc.methods as { name: string; params: { name: string }[] }[];
  const create = methods.find((m) => m.name === "sandbox.create")!;
  if (create.params.some((x) => x.name === "env")) {
    const s = await client.create({ env: { GREETING: "hi there" }, memoryMb: 256 });
    try {
      assert.equal((await s.exec("echo \"$GREETING\"")).stdout, "hi there\n");
    } finally {
      await s.destroy();
    }
  } else {
    // A daemon without it names the parameter: the client sent it.
    const e = await rejects(client.create({ env: { GREETING: "hi" } }), InvalidParams);
    assert.equal(e.data.param, "env");
  }
});

test("a new connection after the daemon closed an idle one", async () => {
  const idle = Number(process.env.SANDBOXD_TEST_IDLE_MS ?? "0");
  if (idle > 0) await new Promise((r) => setTimeout(r, idle + 700));
  const [a, b] = await Promise.all([sb.exec("echo again"), client.status()]);
  assert.equal(a.stdout, "again\n");
  assert.equal(typeof b.version, "string");
});

test("Symbol.asyncDispose destroys the sandbox and closes the client", async () => {
  let id = "";
  {
    await using c = new Client({ socket });
    {
      await using s = await c.create({ memoryMb: 256, labels: { suite: "ts-dispose" } });
      id = s.id;
      assert.equal((await s.exec("echo in")).stdout, "in\n");
    }
    try {
      const info = (await c.get(id)).info;
      assert.ok(["destroying", "destroyed"].includes(info.state), info.state);
    } catch (err) {
      assert.ok(err instanceof NoSuchSandbox, String(err));
    }
    assert.deepEqual(await c.list({ labels: { suite: "ts-dispose" } }).then((l) => l.filter((s) => s.state === "ready")), []);
  }
});
