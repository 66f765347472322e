// Results of sandbox.exec, and its streaming form (stream: true, exec.output notifications).

import { Buffer } from "node:buffer";

import { SandboxdError } from "./errors.js";
import { decodeText, getData } from "./wire.js";

/** A piece of a streaming exec's output, as it arrived. */
export interface OutputChunk {
  stream: "stdout" | "stderr";
  data: Uint8Array;
  /** data as text (U+FFFD for bytes that are not UTF-8). */
  readonly text: string;
}

export function makeChunk(stream: string, data: Uint8Array): OutputChunk {
  return {
    stream: stream === "stderr" ? "stderr" : "stdout",
    data,
    get text() {
      return decodeText(data);
    },
  };
}

/** What sandbox.exec returned. */
export class ExecResult {
  /** null when a signal ended the command, or it timed out. */
  readonly exitCode: number | null;
  /** "SIGKILL", ... when a signal ended it. */
  readonly signal: string | null;
  readonly timedOut: boolean;
  /** Whether the command was started in the sandbox. */
  readonly started: boolean;
  readonly stdoutBytes: Uint8Array;
  readonly stderrBytes: Uint8Array;
  readonly stdoutTruncated: boolean;
  readonly stderrTruncated: boolean;
  readonly durationMs: number;
  /** The result as the daemon sent it. */
  readonly raw: Record<string, unknown>;

  constructor(raw: Record<string, unknown>, stdout?: Uint8Array, stderr?: Uint8Array) {
    this.raw = raw;
    this.exitCode = typeof raw.exit_code === "number" ? raw.exit_code : null;
    this.signal = typeof raw.signal === "string" ? raw.signal : null;
    this.timedOut = raw.timed_out === true;
    this.started = raw.started !== false;
    this.stdoutBytes = stdout ?? getData(raw, "stdout") ?? new Uint8Array();
    this.stderrBytes = stderr ?? getData(raw, "stderr") ?? new Uint8Array();
    this.stdoutTruncated = raw.stdout_truncated === true;
    this.stderrTruncated = raw.stderr_truncated === true;
    this.durationMs = typeof raw.duration_ms === "number" ? raw.duration_ms : 0;
  }

  get stdout(): string {
    return decodeText(this.stdoutBytes);
  }

  get stderr(): string {
    return decodeText(this.stderrBytes);
  }

  /** True when the command exited 0 within its timeout. */
  get ok(): boolean {
    return this.exitCode === 0 && !this.timedOut;
  }
}

/** Collects a streaming exec's output and hands it to an iterator and/or a callback. */
export class OutputCollector {
  private readonly out: Record<"stdout" | "stderr", Uint8Array[]> = { stdout: [], stderr: [] };
  private readonly queue: (OutputChunk | null)[] = [];
  private waiter: (() => void) | null = null;
  private readonly keepQueue: boolean;
  private readonly callback?: (chunk: OutputChunk) => void;

  constructor(keepQueue: boolean, callback?: (chunk: OutputChunk) => void) {
    this.keepQueue = keepQueue;
    this.callback = callback;
  }

  add(params: Record<string, unknown>): void {
    const chunk = makeChunk(String(params.stream ?? "stdout"), getData(params, "data") ?? new Uint8Array());
    this.out[chunk.stream].push(chunk.data);
    if (this.callback) this.callback(chunk);
    if (this.keepQueue) this.push(chunk);
  }

  end(): void {
    if (this.keepQueue) this.push(null);
  }

  result(raw: Record<string, unknown>): ExecResult {
    return new ExecResult(raw, Buffer.concat(this.out.stdout), Buffer.concat(this.out.stderr));
  }

  private push(item: OutputChunk | null): void {
    this.queue.push(item);
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  /** The next chunk, or null at the end. */
  async next(): Promise<OutputChunk | null> {
    while (this.queue.length === 0) await new Promise<void>((resolve) => (this.waiter = resolve));
    const item = this.queue.shift()!;
    if (item === null) this.queue.unshift(null); // the end stays the end
    return item;
  }
}

/**
 * A command running with its output streamed: `for await (const chunk of stream)` gives
 * OutputChunk values as they arrive, and `await stream.result` (or `stream.wait()`) the
 * ExecResult, holding the whole output. The iterator throws the call's error, if any.
 */
export class ExecStream implements AsyncIterable<OutputChunk> {
  /** Settles when the command ended (with the whole output) or the call failed. */
  readonly result: Promise<ExecResult>;
  private readonly collector: OutputCollector;

  /** @internal */
  constructor(collector: OutputCollector, reply: Promise<unknown>) {
    this.collector = collector;
    this.result = reply.then(
      (raw) => {
        collector.end();
        return collector.result((raw ?? {}) as Record<string, unknown>);
      },
      (err: SandboxdError) => {
        collector.end();
        throw err;
      },
    );
    this.result.catch(() => undefined); // reported through the iterator, wait() or result
  }

  async *[Symbol.asyncIterator](): AsyncIterator<OutputChunk> {
    for (;;) {
      const chunk = await this.collector.next();
      if (chunk === null) break;
      yield chunk;
    }
    await this.result; // throws the call's error
  }

  /** Waits for the end (the output is in the result). */
  wait(): Promise<ExecResult> {
    return this.result;
  }
}
