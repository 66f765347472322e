// One sandbox: commands, files, background processes, its lease and network.

import { Buffer } from "node:buffer";

import type { CallOptions, Client } from "./client.js";
import { FileError, InvalidParams, NoSuchSandbox, SandboxdError } from "./errors.js";
import { ExecResult, ExecStream, OutputCollector, type OutputChunk } from "./exec.js";
import { Process, type ProcessInfo } from "./process.js";
import type { TemplateDefaults, TemplateInfo } from "./template.js";
import { type Data, decodeText, encodeText, getData, getText, modeString, putData, wireParams } from "./wire.js";

/** The sandbox object of docs/protocol.md, as the daemon sent it. */
export interface SandboxInfo {
  id: string;
  vmid: number | null;
  node: string;
  hostname: string;
  ip: string | null;
  state: string;
  internet: boolean;
  /** With internet: the allow-list in force; null: none. */
  internet_allow?: string[] | null;
  cores: number;
  memory_mb: number;
  disk_gb: number;
  /** Bandwidth cap in Mbit/s; 0: none. */
  net_rate_mbps?: number;
  owner_uid: number;
  labels: Record<string, string>;
  created_at: string;
  expires_at: string;
  template?: string;
  effective_by?: string;
  [key: string]: unknown;
}

/** sandbox.exec's parameters. */
export interface ExecOptions extends CallOptions {
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** Absolute working folder (default: the user's home). */
  cwd?: string;
  /** Run as this user of the container: a name or a uid (default: root). */
  user?: string | number;
  /** The command's standard input. */
  stdin?: Data;
  /** Kill the command after this many milliseconds (the daemon's default: 60000). */
  timeoutMs?: number;
  /** Output kept per stream (the daemon's default: 1048576). */
  maxOutputBytes?: number;
  /** Streams the output (stream: true) and calls this with each chunk as it arrives. */
  onOutput?: (chunk: OutputChunk) => void;
}

export interface WriteFileOptions extends CallOptions {
  /** File mode, 0o644 or "0644" (the daemon's default). */
  mode?: number | string;
  /** Make missing parent folders (the daemon's default: true). */
  makeParents?: boolean;
  /** Write in place at this byte offset (not atomic). */
  offset?: number;
  /** Write in place at the end of the file (not atomic). */
  append?: boolean;
  /** Bytes per file.write request (default 8 MiB: well within the default 16 MiB request
   * line even as base64). Lower it for a daemon with a smaller max_request_bytes. */
  chunkSize?: number;
}

export interface ReadFileOptions extends CallOptions {
  offset?: number;
  /** Bytes to read at most (default: to the end of the file). */
  length?: number;
  /** Bytes per file.read request (default and maximum 8388608). */
  chunkSize?: number;
}

/** An entry of file.list, or file.stat's result. */
export interface FileEntry {
  /** The name (decoded lossily when it is not UTF-8: see nameBytes). */
  name: string;
  /** The name's bytes, when it is not valid UTF-8. */
  nameBytes?: Uint8Array;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  /** Permission bits, four octal digits ("0644"). */
  mode: string;
  /** Modification time, seconds since the Unix epoch. */
  mtime: number;
  /** A symbolic link's target (file.stat). */
  target?: string;
}

export interface StartProcessOptions extends CallOptions {
  env?: Record<string, string>;
  cwd?: string;
  /** Run as this user of the container: a name or a uid (default: root). */
  user?: string | number;
  /** Give the process a stdin pipe that write() feeds (default: /dev/null). */
  stdin?: boolean;
  /** Run it on a pseudo-terminal of this size. */
  pty?: { cols: number; rows: number };
}

const CHUNK_WRITE = 8 << 20;
const CHUNK_READ_MAX = 8388608;

function entry(raw: Record<string, unknown>): FileEntry {
  const e = { ...raw } as Record<string, unknown>;
  if (typeof raw.name !== "string") {
    const bytes = getData(raw, "name");
    if (bytes !== undefined) {
      e.nameBytes = bytes;
      e.name = decodeText(bytes);
    }
    delete e.name_b64;
  }
  if (typeof raw.target !== "string" && raw.target_b64 !== undefined) {
    e.target = getText(raw, "target");
    delete e.target_b64;
  }
  return e as unknown as FileEntry;
}

export class Sandbox {
  readonly client: Client;
  /** The last sandbox object received. */
  info: SandboxInfo;

  constructor(client: Client, info: SandboxInfo) {
    this.client = client;
    this.info = { ...info };
  }

  get id(): string {
    return this.info.id;
  }
  get ip(): string | null {
    return this.info.ip ?? null;
  }
  get state(): string {
    return this.info.state;
  }
  get internet(): boolean {
    return this.info.internet;
  }
  get labels(): Record<string, string> {
    return this.info.labels ?? {};
  }
  get expiresAt(): Date {
    return new Date(this.info.expires_at);
  }

  /** @internal */
  call(method: string, params: Record<string, unknown>, opts: CallOptions = {}): Promise<unknown> {
    return this.client.start(method, { id: this.id, ...params }, opts.timeout);
  }

  private async update(method: string, params: Record<string, unknown>, opts: CallOptions): Promise<this> {
    this.info = (await this.call(method, params, opts)) as SandboxInfo;
    return this;
  }

  /** sandbox.get: refreshes info. */
  get(opts: CallOptions = {}): Promise<this> {
    return this.update("sandbox.get", {}, opts);
  }

  /** sandbox.set_internet; with wait, returns once a probe from inside confirms it; allow
   * (with enabled): only the allow-list's entries (IPv4 CIDR[:PORT] or domain names). */
  setInternet(
    enabled: boolean,
    opts: CallOptions & { wait?: boolean; waitTimeoutS?: number; allow?: string[] } = {},
  ): Promise<this> {
    return this.update("sandbox.set_internet", { enabled, ...wireParams(opts, ["timeout"]) }, opts);
  }

  /** sandbox.renew: the lease ends ttlS seconds from now. */
  renew(ttlS: number, opts: CallOptions = {}): Promise<this> {
    return this.update("sandbox.renew", { ttl_s: ttlS }, opts);
  }

  /** sandbox.resize (netRateMbps: the bandwidth cap in Mbit/s, 0: none). */
  resize(
    size: CallOptions & { cores?: number; memoryMb?: number; diskGb?: number; netRateMbps?: number },
  ): Promise<this> {
    return this.update("sandbox.resize", wireParams(size, ["timeout"]), size);
  }

  /** sandbox.destroy (idempotent); `wait: false` returns once the destroy has begun. */
  async destroy(opts: CallOptions & { wait?: boolean } = {}): Promise<void> {
    const r = (await this.call("sandbox.destroy", opts.wait === false ? { wait: false } : {}, opts)) as {
      state?: string;
    };
    this.info = { ...this.info, state: r?.state ?? "destroyed" };
  }

  /** Destroys the sandbox: `await using sb = await client.create()`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }

  // ---- commands

  private execParams(command: string | readonly string[], opts: ExecOptions): Record<string, unknown> {
    const params = wireParams(opts, ["timeout", "stdin", "onOutput"]);
    if (typeof command === "string") params.command = command;
    else params.argv = [...command];
    if (opts.stdin !== undefined) putData(params, "stdin", opts.stdin);
    return params;
  }

  /** Runs a command (a string for /bin/sh -c, or an argv array) and waits for it. With
   * onOutput the output is streamed to it as well. */
  async exec(command: string | readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const params = this.execParams(command, opts);
    if (opts.onOutput === undefined) {
      const timeout = this.waitFor(opts.timeout, opts.timeoutMs);
      return new ExecResult((await this.call("sandbox.exec", params, { timeout })) as Record<string, unknown>);
    }
    return this.streamExec(command, opts, false).result;
  }

  /** Runs a command with its output streamed: iterate the ExecStream for chunks, then read
   * its result. */
  execStream(command: string | readonly string[], opts: ExecOptions = {}): ExecStream {
    return this.streamExec(command, opts, true);
  }

  private streamExec(command: string | readonly string[], opts: ExecOptions, iterate: boolean): ExecStream {
    const params = this.execParams(command, opts);
    params.stream = true;
    const collector = new OutputCollector(iterate, opts.onOutput);
    const timeout = this.waitFor(opts.timeout, opts.timeoutMs);
    const reply = this.client.start("sandbox.exec", { id: this.id, ...params }, timeout, (p) => collector.add(p));
    return new ExecStream(collector, reply);
  }

  /** @internal The wait for a call that asks the daemon to take up to `ms`: the call's own
   * timeout, else the client's, made long enough for `ms` (and 30 s more). */
  waitFor(timeout: number | undefined, ms: number | undefined): number | undefined {
    if (timeout !== undefined) return timeout;
    const dflt = this.client.timeout;
    if (dflt === undefined || ms === undefined || !(ms > 0)) return dflt;
    return Math.max(dflt, ms + 30000);
  }

  // ---- files

  /** Writes a file: replaced atomically when it fits in one request (chunkSize), else
   * written in pieces (the first replaces the file, the others go in place at their
   * offsets: readers may then see it half written). Returns the bytes written. */
  async writeFile(path: string, data: Data, opts: WriteFileOptions = {}): Promise<number> {
    const bytes = typeof data === "string" ? encodeText(data) : data;
    const chunk = opts.chunkSize ?? CHUNK_WRITE;
    if (!(Number.isInteger(chunk) && chunk > 0)) throw new RangeError("chunkSize must be a positive integer");
    const base = wireParams(opts, ["timeout", "chunkSize", "mode"]);
    if (opts.mode !== undefined) base.mode = modeString(opts.mode);
    let written = 0;
    do {
      const piece = bytes.subarray(written, written + chunk);
      const params: Record<string, unknown> = { path, ...base };
      if (written > 0) {
        delete params.make_parents;
        if (!opts.append) params.offset = (opts.offset ?? 0) + written;
      }
      putData(params, "content", piece);
      const r = (await this.call("file.write", params, opts)) as { bytes: number };
      written += r.bytes;
      if (r.bytes !== piece.length) break;
    } while (written < bytes.length);
    return written;
  }

  /** Reads a file (or length bytes from offset), in file.read requests of chunkSize. */
  async readFile(path: string, opts: ReadFileOptions = {}): Promise<Uint8Array> {
    const chunk = Math.min(opts.chunkSize ?? CHUNK_READ_MAX, CHUNK_READ_MAX);
    if (!(Number.isInteger(chunk) && chunk > 0)) throw new RangeError("chunkSize must be a positive integer");
    const offset = opts.offset ?? 0;
    const parts: Uint8Array[] = [];
    let got = 0;
    for (;;) {
      const want = opts.length === undefined ? chunk : Math.min(chunk, opts.length - got);
      if (want <= 0 && opts.length !== undefined) break;
      const r = (await this.call("file.read", { path, offset: offset + got, length: want }, opts)) as Record<
        string,
        unknown
      >;
      const piece = getData(r, "content") ?? new Uint8Array();
      parts.push(piece);
      got += piece.length;
      if (r.eof === true || piece.length === 0) break;
    }
    return parts.length === 1 ? parts[0]! : new Uint8Array(Buffer.concat(parts));
  }

  /** readFile, as UTF-8 text. */
  async readText(path: string, opts: ReadFileOptions = {}): Promise<string> {
    return decodeText(await this.readFile(path, opts));
  }

  /** file.list: the folder's entries and whether there were more than limit. */
  async listDir(
    path: string,
    opts: CallOptions & { limit?: number } = {},
  ): Promise<{ entries: FileEntry[]; truncated: boolean }> {
    const r = (await this.call("file.list", { path, ...wireParams(opts, ["timeout"]) }, opts)) as {
      entries: Record<string, unknown>[];
      truncated: boolean;
    };
    return { entries: r.entries.map(entry), truncated: r.truncated === true };
  }

  /** file.list: the folder's entries; FileError (E2BIG) when it holds more than limit. */
  async list(path: string, opts: CallOptions & { limit?: number } = {}): Promise<FileEntry[]> {
    const r = await this.listDir(path, opts);
    if (r.truncated) {
      throw new FileError("File error", -32009, {
        reason: `${path} holds more than ${r.entries.length} entries`,
        errno: "E2BIG",
      });
    }
    return r.entries;
  }

  /** file.stat; with follow, what a symbolic link points to. */
  async stat(path: string, opts: CallOptions & { follow?: boolean } = {}): Promise<FileEntry> {
    return entry((await this.call("file.stat", { path, ...wireParams(opts, ["timeout"]) }, opts)) as Record<
      string,
      unknown
    >);
  }

  /** file.remove; returns the entries removed. */
  async remove(path: string, opts: CallOptions & { recursive?: boolean } = {}): Promise<number> {
    const r = await this.call("file.remove", { path, ...wireParams(opts, ["timeout"]) }, opts);
    return (r as { removed: number }).removed;
  }

  /** file.mkdir; returns false only with parents when the folder existed. */
  async mkdir(path: string, opts: CallOptions & { parents?: boolean; mode?: number | string } = {}): Promise<boolean> {
    const params: Record<string, unknown> = { path, ...wireParams(opts, ["timeout", "mode"]) };
    if (opts.mode !== undefined) params.mode = modeString(opts.mode);
    return ((await this.call("file.mkdir", params, opts)) as { created: boolean }).created;
  }

  /** file.rename. */
  async rename(from: string, to: string, opts: CallOptions = {}): Promise<void> {
    await this.call("file.rename", { from, to }, opts);
  }

  // ---- background processes

  /** process.start: a command running in the background. */
  async startProcess(command: string | readonly string[], opts: StartProcessOptions = {}): Promise<Process> {
    const params = wireParams(opts, ["timeout"]);
    if (typeof command === "string") params.command = command;
    else params.argv = [...command];
    const r = (await this.call("process.start", params, opts)) as ProcessInfo;
    return new Process(this, r.process, r);
  }

  /** A process of this sandbox by its id. */
  process(id: string): Process {
    return new Process(this, id, { process: id });
  }

  /** process.list. */
  async processes(opts: CallOptions = {}): Promise<ProcessInfo[]> {
    return ((await this.call("process.list", {}, opts)) as { processes: ProcessInfo[] }).processes;
  }

  /**
   * sandbox.forward: the daemon relays each connection to `socket` (a Unix socket only this
   * uid may use) or, with `listen: "127.0.0.1:0"`, to `address` (loopback TCP, which any local
   * user can reach) to 127.0.0.1:port in the sandbox.
   */
  async forward(port: number, opts: CallOptions & { listen?: string } = {}): Promise<Forward> {
    const params: Record<string, unknown> = { port };
    if (opts.listen !== undefined) params.listen = opts.listen;
    return new Forward(this, (await this.call("sandbox.forward", params, opts)) as ForwardInfo);
  }

  /** sandbox.forwards. */
  async forwards(opts: CallOptions = {}): Promise<Record<string, unknown>[]> {
    return ((await this.call("sandbox.forwards", {}, opts)) as { forwards: Record<string, unknown>[] }).forwards;
  }

  /**
   * sandbox.preview: a signed URL (`url`) to 127.0.0.1:port in the sandbox through the
   * daemon's preview listener, valid until `expiresAt` (Unix seconds; `ttlS`, default the
   * daemon's), `close()` or the sandbox's end. Whoever holds the URL reaches the port.
   */
  async preview(port: number, opts: CallOptions & { ttlS?: number } = {}): Promise<Preview> {
    const params: Record<string, unknown> = { port };
    if (opts.ttlS !== undefined) params.ttl_s = opts.ttlS;
    return new Preview(this, (await this.call("sandbox.preview", params, opts)) as PreviewInfo);
  }

  /** sandbox.previews. */
  async previews(opts: CallOptions = {}): Promise<Record<string, unknown>[]> {
    return ((await this.call("sandbox.previews", {}, opts)) as { previews: Record<string, unknown>[] }).previews;
  }

  /** sandbox.snapshot: a snapshot of the disk (name: a letter, then letters, digits, _ or -; 2..40). */
  async snapshot(name: string, opts: CallOptions = {}): Promise<SnapshotInfo> {
    return ((await this.call("sandbox.snapshot", { name }, opts)) as { snapshot: SnapshotInfo }).snapshot;
  }

  /** sandbox.snapshots: oldest first. */
  async snapshots(opts: CallOptions = {}): Promise<SnapshotInfo[]> {
    return ((await this.call("sandbox.snapshots", {}, opts)) as { snapshots: SnapshotInfo[] }).snapshots;
  }

  /** sandbox.rollback: the disk back to a snapshot; the sandbox restarts and is ready again. */
  rollback(name: string, opts: CallOptions = {}): Promise<this> {
    return this.update("sandbox.rollback", { name }, opts);
  }

  /** sandbox.snapshot_delete. */
  async deleteSnapshot(name: string, opts: CallOptions = {}): Promise<void> {
    await this.call("sandbox.snapshot_delete", { name }, opts);
  }

  /**
   * sandbox.fork: `count` (1..32, default 1) new sandboxes with this one's disk as of
   * `snapshot` (or of now); this one keeps running. Each child has its own host key, address
   * and lease (`ttl_s`, default this one's lease length) and this one's labels. Throws
   * ForkIncompleteError (its `sandboxes`: the children made) when some children failed.
   */
  async fork(opts: CallOptions & { count?: number; snapshot?: string; ttl_s?: number } = {}): Promise<Sandbox[]> {
    const params: Record<string, unknown> = {};
    if (opts.count !== undefined) params.count = opts.count;
    if (opts.snapshot !== undefined) params.snapshot = opts.snapshot;
    if (opts.ttl_s !== undefined) params.ttl_s = opts.ttl_s;
    const r = (await this.call("sandbox.fork", params, opts)) as {
      sandboxes: SandboxInfo[];
      failed?: number;
      reason?: string;
    };
    const children = r.sandboxes.map((s) => new Sandbox(this.client, s));
    if (r.failed) throw new ForkIncompleteError(children, r.failed, r.reason ?? "");
    return children;
  }

  /** template.create: the sandbox becomes template `name` (it stops and ends). `defaults`:
   * the env, cwd and user every exec and process of its sandboxes gets unless the call gives
   * its own. */
  async makeTemplate(
    name: string,
    opts: CallOptions = {},
    defaults?: TemplateDefaults,
  ): Promise<TemplateInfo> {
    const params: Record<string, unknown> = { name };
    if (defaults && Object.keys(defaults).length > 0) params.defaults = defaults;
    return ((await this.call("template.create", params, opts)) as { template: TemplateInfo }).template;
  }

  /** sandbox.pause: the container stops, its disk is kept; `info.state` "paused". */
  pause(opts: CallOptions = {}): Promise<this> {
    return this.update("sandbox.pause", {}, opts);
  }

  /** sandbox.resume: started again, `info.state` "ready" (same disk, host key, address). */
  resume(opts: CallOptions = {}): Promise<this> {
    return this.update("sandbox.resume", {}, opts);
  }

  /** sandbox.attach: the caller's volume mounted at `path` while the sandbox runs (a mount that
   * could not be hot-plugged restarts the sandbox: its processes end). */
  attach(volume: string, path: string, opts: CallOptions & { readOnly?: boolean } = {}): Promise<this> {
    return this.update("sandbox.attach", { volume, path, read_only: !!opts.readOnly }, opts);
  }

  /** sandbox.detach: the volume back to the daemon; the sandbox restarts (its processes,
   * sessions and forwards end) and is ready again. */
  detach(volume: string, opts: CallOptions = {}): Promise<this> {
    return this.update("sandbox.detach", { volume }, opts);
  }
}

/** sandbox.fork made some children and some failed (rolled back): `sandboxes` are those made. */
export class ForkIncompleteError extends SandboxdError {
  readonly sandboxes: Sandbox[];
  readonly failed: number;

  constructor(sandboxes: Sandbox[], failed: number, reason: string) {
    super("some fork children failed", null, { reason, failed });
    this.sandboxes = sandboxes;
    this.failed = failed;
  }
}

/** One snapshot of a sandbox's disk (sandbox.snapshot, sandbox.snapshots). */
export interface SnapshotInfo {
  name: string;
  created_at: number;
  description?: string;
}

/** What sandbox.forward returned. */
export interface ForwardInfo {
  forward: string;
  port: number;
  socket?: string;
  address?: string;
}

/** A port forward (Sandbox.forward); `close()` (or `await using`) ends it. */
export class Forward {
  readonly forward: string;
  readonly port: number;
  readonly socket?: string;
  readonly address?: string;

  constructor(
    readonly sandbox: Sandbox,
    info: ForwardInfo,
  ) {
    this.forward = info.forward;
    this.port = info.port;
    this.socket = info.socket;
    this.address = info.address;
  }

  /** sandbox.unforward; a forward already gone (the sandbox destroyed) is fine. */
  async close(opts: CallOptions = {}): Promise<void> {
    try {
      await this.sandbox.call("sandbox.unforward", { forward: this.forward }, opts);
    } catch (e) {
      if (!(e instanceof InvalidParams || e instanceof NoSuchSandbox)) throw e;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** What sandbox.preview returned. */
export interface PreviewInfo {
  preview: string;
  port: number;
  url: string;
  expires_at: number;
}

/** A preview URL (Sandbox.preview); `close()` (or `await using`) revokes it. */
export class Preview {
  readonly preview: string;
  readonly port: number;
  readonly url: string;
  readonly expiresAt: number;

  constructor(
    readonly sandbox: Sandbox,
    info: PreviewInfo,
  ) {
    this.preview = info.preview;
    this.port = info.port;
    this.url = info.url;
    this.expiresAt = info.expires_at;
  }

  /** sandbox.unpreview; a preview already gone (expired, the sandbox destroyed) is fine. */
  async close(opts: CallOptions = {}): Promise<void> {
    try {
      await this.sandbox.call("sandbox.unpreview", { preview: this.preview }, opts);
    } catch (e) {
      if (!(e instanceof InvalidParams || e instanceof NoSuchSandbox)) throw e;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
