// A background process of a sandbox (process.*): output by offset, stdin, wait, signals.

import type { CallOptions } from "./client.js";
import type { Sandbox } from "./sandbox.js";
import { type Data, decodeText, getData, putData } from "./wire.js";

/** What process.start, process.list and process.wait say of a process. */
export interface ProcessInfo {
  process: string;
  state?: string;
  command?: string;
  started_at?: string;
  stdin?: boolean;
  exit_code?: number | null;
  signal?: string | null;
  [key: string]: unknown;
}

export interface ReadOptions extends CallOptions {
  stream?: "stdout" | "stderr";
  offset?: number;
  /** Bytes at most (the daemon's default 65536, at most 1048576). */
  length?: number;
  /** Wait up to this many milliseconds for a byte past offset (at most 60000). */
  waitMs?: number;
}

/** process.read's result. */
export interface ReadResult {
  data: Uint8Array;
  /** data as text (lossy). */
  text: string;
  /** Where data starts (later than asked when older bytes were dropped). */
  offset: number;
  nextOffset: number;
  availableFrom: number;
  size: number;
  /** The process ended and nextOffset reached size. */
  eof: boolean;
  state: string;
  exitCode: number | null;
  signal: string | null;
}

/** process.wait's and process.kill's result. */
export interface ProcessStatus {
  state: string;
  exitCode: number | null;
  signal: string | null;
  /** process.kill: the signal sent, null when the process had already ended. */
  sent?: string | null;
}

function status(r: Record<string, unknown>): ProcessStatus {
  const s: ProcessStatus = {
    state: String(r.state),
    exitCode: typeof r.exit_code === "number" ? r.exit_code : null,
    signal: typeof r.signal === "string" ? r.signal : null,
  };
  if ("sent" in r) s.sent = typeof r.sent === "string" ? r.sent : null;
  return s;
}

export class Process {
  readonly sandbox: Sandbox;
  /** The process id ("pr-..."). */
  readonly id: string;
  /** What process.start returned. */
  readonly info: ProcessInfo;

  constructor(sandbox: Sandbox, id: string, info: ProcessInfo) {
    this.sandbox = sandbox;
    this.id = id;
    this.info = info;
  }

  private call(method: string, params: Record<string, unknown>, opts: CallOptions): Promise<Record<string, unknown>> {
    return this.sandbox.call(method, { process: this.id, ...params }, opts) as Promise<Record<string, unknown>>;
  }

  /** process.read: bytes of a stream from an offset. */
  async read(opts: ReadOptions = {}): Promise<ReadResult> {
    const params: Record<string, unknown> = {};
    if (opts.stream !== undefined) params.stream = opts.stream;
    if (opts.offset !== undefined) params.offset = opts.offset;
    if (opts.length !== undefined) params.length = opts.length;
    if (opts.waitMs !== undefined) params.wait_ms = opts.waitMs;
    const r = await this.call("process.read", params, { timeout: this.sandbox.waitFor(opts.timeout, opts.waitMs) });
    const data = getData(r, "data") ?? new Uint8Array();
    return {
      data,
      text: decodeText(data),
      offset: Number(r.offset),
      nextOffset: Number(r.next_offset),
      availableFrom: Number(r.available_from),
      size: Number(r.size),
      eof: r.eof === true,
      ...status(r),
    };
  }

  /** The stream's bytes from offset, piece by piece; with follow, until the process ended
   * and everything was read (long-polling waitMs at a time), else until what is there now. */
  async *output(opts: { stream?: "stdout" | "stderr"; offset?: number; follow?: boolean; waitMs?: number } = {}): AsyncGenerator<Uint8Array> {
    let offset = opts.offset ?? 0;
    for (;;) {
      const r = await this.read({
        stream: opts.stream,
        offset,
        waitMs: opts.follow ? (opts.waitMs ?? 10000) : undefined,
      });
      if (r.data.length > 0) yield r.data;
      offset = r.nextOffset;
      if (r.eof || (!opts.follow && r.data.length === 0)) return;
    }
  }

  /** process.write: feeds stdin; close ends it after the data. */
  async write(data?: Data, opts: CallOptions & { close?: boolean } = {}): Promise<{ written: number; closed: boolean }> {
    const params: Record<string, unknown> = {};
    if (data !== undefined) putData(params, "data", data);
    if (opts.close) params.close = true;
    const r = await this.call("process.write", params, opts);
    return { written: Number(r.written), closed: r.closed === true };
  }

  /** process.wait: until the process ended, or timeoutMs (then state "running"). */
  async wait(opts: CallOptions & { timeoutMs?: number } = {}): Promise<ProcessStatus> {
    const params: Record<string, unknown> = {};
    if (opts.timeoutMs !== undefined) params.timeout_ms = opts.timeoutMs;
    // The daemon's default wait is 30 s.
    const timeout = this.sandbox.waitFor(opts.timeout, opts.timeoutMs ?? 30000);
    return status(await this.call("process.wait", params, { timeout }));
  }

  /** process.resize: the terminal of a process started with pty takes cols x rows. */
  async resize(cols: number, rows: number, opts: CallOptions = {}): Promise<Record<string, unknown>> {
    return (await this.call("process.resize", { cols, rows }, opts)) as Record<string, unknown>;
  }

  /** process.kill: a signal ("SIGTERM", ...; default SIGKILL) to its process group. */
  async kill(signal?: string, opts: CallOptions = {}): Promise<ProcessStatus> {
    return status(await this.call("process.kill", signal === undefined ? {} : { signal }, opts));
  }
}
