// The client: one connection to sandboxd, opened on first use and again after it closed.

import { Connection, NotSent, type OutputParams } from "./connection.js";
import { Sandbox, type SandboxInfo } from "./sandbox.js";
import type { TemplateInfo, VolumeInfo, VolumeMount } from "./template.js";
import { wireParams } from "./wire.js";

export const DEFAULT_SOCKET = "/run/sandboxd.sock";

export interface ClientOptions {
  /** The daemon's socket; default $SANDBOXD_SOCKET, else /run/sandboxd.sock. */
  socket?: string;
  /** Milliseconds to wait for each reply unless a call says otherwise; default: no limit. */
  timeout?: number;
}

/** Options every call takes. */
export interface CallOptions {
  /** Milliseconds to wait for the reply (then TimeoutError; the request may still run in
   * the daemon). Default: the client's timeout. */
  timeout?: number;
}

/** sandbox.create's parameters (docs/protocol.md), camelCase. */
export interface CreateOptions extends CallOptions {
  hostname?: string;
  template?: string;
  cores?: number;
  memoryMb?: number;
  diskGb?: number;
  /** Bandwidth cap in Mbit/s, both directions; 0: none. */
  netRateMbps?: number;
  /** true: HTTP, HTTPS and DNS out; { allow: [...] }: only the allow-list's entries
   * (IPv4 CIDR[:PORT], e.g. "203.0.113.0/24:443", or domain names, e.g. "pypi.org"). */
  internet?: boolean | { allow: string[] };
  ttlS?: number;
  labels?: Record<string, string>;
  idempotencyKey?: string;
  /** Environment variables for every later exec and process of the sandbox. */
  env?: Record<string, string>;
  /** Admins (per the daemon's node_param): the node to create it on. */
  node?: string;
  /** The caller's volumes (at most 8), mounted before the sandbox first starts. */
  volumes?: VolumeMount[];
}

export interface ListOptions extends CallOptions {
  /** Admins: every owner's sandboxes. */
  all?: boolean;
  /** Only sandboxes with every one of these labels. */
  labels?: Record<string, string>;
}

export class Client {
  readonly socket: string;
  /** Default wait for a reply, in milliseconds (undefined: no limit). */
  timeout: number | undefined;
  private conn: Promise<Connection> | null = null;
  private doc: Record<string, unknown> | null = null;

  constructor(opts: ClientOptions = {}) {
    this.socket = opts.socket || process.env.SANDBOXD_SOCKET || DEFAULT_SOCKET;
    this.timeout = opts.timeout;
  }

  private connection(): Promise<Connection> {
    const current = this.conn;
    if (current !== null) {
      return current.then(
        (c) => (c.closed ? this.reconnect(current) : c),
        () => this.reconnect(current),
      );
    }
    return this.reconnect(null);
  }

  private reconnect(old: Promise<Connection> | null): Promise<Connection> {
    if (this.conn === old) this.conn = Connection.open(this.socket);
    return this.conn!;
  }

  /** @internal Starts a call; onOutput receives its exec.output notifications. */
  async start(
    method: string,
    params: Record<string, unknown> | undefined,
    timeout: number | undefined,
    onOutput?: (params: OutputParams) => void,
  ): Promise<unknown> {
    const t = timeout ?? this.timeout;
    const conn = await this.connection();
    try {
      return await conn.call(method, params, { timeout: t, onOutput });
    } catch (err) {
      // The connection closed before the whole request was sent: nothing ran; once more on
      // a new connection.
      if (err instanceof NotSent) {
        return (await this.connection()).call(method, params, { timeout: t, onOutput });
      }
      throw err;
    }
  }

  /** Calls any method with its wire parameters; returns its result or throws its error. */
  call(method: string, params?: Record<string, unknown>, opts: CallOptions = {}): Promise<unknown> {
    return this.start(method, params, opts.timeout);
  }

  /** Closes the connection (calls in flight fail with ConnectionLost). */
  async close(): Promise<void> {
    const conn = this.conn;
    this.conn = null;
    if (conn !== null) {
      try {
        (await conn).close();
      } catch {
        // it never opened
      }
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** daemon.status. */
  async status(opts: CallOptions = {}): Promise<Record<string, unknown>> {
    return (await this.call("daemon.status", undefined, opts)) as Record<string, unknown>;
  }

  /** The daemon's OpenRPC document (rpc.discover, fetched once). */
  async discover(): Promise<Record<string, unknown>> {
    if (this.doc === null) this.doc = (await this.call("rpc.discover")) as Record<string, unknown>;
    return this.doc;
  }

  /** Whether the daemon offers a method. */
  async offers(method: string): Promise<boolean> {
    const methods = ((await this.discover()).methods ?? []) as { name?: string }[];
    return methods.some((m) => m.name === method);
  }

  /** sandbox.create: returns once the sandbox is ready. */
  async create(opts: CreateOptions = {}): Promise<Sandbox> {
    const params = wireParams(opts, ["timeout", "volumes"]);
    if (opts.volumes)
      params.volumes = opts.volumes.map((v) => ({ name: v.name, path: v.path, read_only: !!v.readOnly }));
    const info = await this.call("sandbox.create", params, opts);
    return new Sandbox(this, info as SandboxInfo);
  }

  /** sandbox.get. */
  async get(id: string, opts: CallOptions = {}): Promise<Sandbox> {
    return new Sandbox(this, (await this.call("sandbox.get", { id }, opts)) as SandboxInfo);
  }

  /** sandbox.list: the caller's sandboxes. */
  async list(opts: ListOptions = {}): Promise<Sandbox[]> {
    const r = (await this.call("sandbox.list", wireParams(opts, ["timeout"]), opts)) as {
      sandboxes: SandboxInfo[];
    };
    return r.sandboxes.map((s) => new Sandbox(this, s));
  }

  /** template.list: the templates the caller may use (admins: all). */
  async templates(opts: CallOptions = {}): Promise<TemplateInfo[]> {
    return ((await this.call("template.list", {}, opts)) as { templates: TemplateInfo[] }).templates;
  }

  /** template.delete: refused (BadState) while sandboxes or warm pool members use it. */
  async deleteTemplate(name: string, opts: CallOptions = {}): Promise<void> {
    await this.call("template.delete", { name }, opts);
  }

  /** volume.create: an empty volume of sizeGb GiB owned by the caller. */
  async createVolume(name: string, sizeGb: number, opts: CallOptions = {}): Promise<VolumeInfo> {
    const r = (await this.call("volume.create", { name, size_gb: sizeGb }, opts)) as { volume: VolumeInfo };
    return r.volume;
  }

  /** volume.list: the caller's volumes (admins: all), by name. */
  async volumes(opts: CallOptions = {}): Promise<VolumeInfo[]> {
    return ((await this.call("volume.list", {}, opts)) as { volumes: VolumeInfo[] }).volumes;
  }

  /** volume.delete: the volume and its data; refused (BadState) while a sandbox has it. */
  async deleteVolume(name: string, opts: CallOptions = {}): Promise<void> {
    await this.call("volume.delete", { name }, opts);
  }

  /** template.publish (admins): every uid may use the template. */
  async publishTemplate(name: string, opts: CallOptions = {}): Promise<TemplateInfo> {
    return ((await this.call("template.publish", { name }, opts)) as { template: TemplateInfo }).template;
  }
}
