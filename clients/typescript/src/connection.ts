// One connection to sandboxd: newline-delimited JSON-RPC 2.0 on a Unix socket. Requests
// get increasing integer ids and their replies (in any order) are matched by id, so any
// number of calls run concurrently on it; exec.output notifications go to their exec's
// listener by request_id.

import { Buffer } from "node:buffer";
import * as net from "node:net";

import { ConnectionLost, SandboxdError, TimeoutError, Unavailable, errorFromWire } from "./errors.js";

/** A streaming exec's notification params. */
export type OutputParams = Record<string, unknown>;

/** The connection closed before the whole request line was written: the daemon ran nothing. */
export class NotSent extends ConnectionLost {}

interface Pending {
  resolve: (result: unknown) => void;
  reject: (err: SandboxdError) => void;
  onOutput?: (params: OutputParams) => void;
  timer?: ReturnType<typeof setTimeout>;
  /** The whole request line went into the socket. */
  sent: boolean;
}

export interface StartOptions {
  /** Milliseconds to wait for the reply; undefined or 0: as long as it takes. */
  timeout?: number;
  /** Receives the call's exec.output notifications. */
  onOutput?: (params: OutputParams) => void;
}

export class Connection {
  private readonly socket: net.Socket;
  private readonly calls = new Map<number, Pending>();
  private nextId = 1;
  private parts: Buffer[] = [];
  private closeError: unknown = null; // an error the daemon sent with id null before closing
  closed = false;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", (err: Error) => this.finish(`connection to sandboxd failed: ${err.message}`));
    socket.on("close", () => this.finish("sandboxd closed the connection"));
    socket.unref(); // an idle connection does not keep the process alive
  }

  static open(path: string): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection({ path });
      const fail = (err: NodeJS.ErrnoException) => {
        socket.destroy();
        reject(new Unavailable(`cannot connect to sandboxd at ${path}: ${err.code ?? err.message}`));
      };
      socket.once("error", fail);
      socket.once("connect", () => {
        socket.off("error", fail);
        resolve(new Connection(socket));
      });
    });
  }

  /** Sends one request; the promise settles with its result or its error. */
  call(method: string, params: Record<string, unknown> | undefined, opts: StartOptions = {}): Promise<unknown> {
    if (this.closed) return Promise.reject(new NotSent("connection closed"));
    const id = this.nextId++;
    const req: Record<string, unknown> = { jsonrpc: "2.0", id, method };
    if (params !== undefined) req.params = params;
    const line = JSON.stringify(req) + "\n";
    return new Promise((resolve, reject) => {
      const p: Pending = { resolve, reject, onOutput: opts.onOutput, sent: false };
      if (opts.timeout !== undefined && opts.timeout > 0) {
        p.timer = setTimeout(() => {
          if (this.calls.get(id) !== p) return;
          this.drop(id);
          reject(new TimeoutError(`no reply from sandboxd to ${method} within ${opts.timeout} ms (the request may still run there)`));
        }, opts.timeout);
      }
      this.calls.set(id, p);
      this.socket.ref();
      this.socket.write(line, (err) => {
        if (!err) p.sent = true;
      });
    });
  }

  /** Closes the socket: the calls in flight fail with ConnectionLost. */
  close(): void {
    this.finish("the client closed the connection");
  }

  private drop(id: number): Pending | undefined {
    const p = this.calls.get(id);
    if (p === undefined) return undefined;
    this.calls.delete(id);
    if (p.timer !== undefined) clearTimeout(p.timer);
    if (this.calls.size === 0 && !this.closed) this.socket.unref();
    return p;
  }

  private onData(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      if (nl < 0) break;
      this.parts.push(chunk.subarray(start, nl));
      const line = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts);
      this.parts = [];
      start = nl + 1;
      if (line.length === 0) continue;
      let msg: unknown;
      try {
        msg = JSON.parse(line.toString("utf8"));
      } catch (err) {
        this.socket.destroy();
        this.finish(`sandboxd sent a line that is not JSON: ${(err as Error).message}`);
        return;
      }
      this.dispatch(msg);
    }
    if (start < chunk.length) this.parts.push(chunk.subarray(start));
  }

  private dispatch(msg: unknown): void {
    if (!msg || typeof msg !== "object" || Array.isArray(msg)) return;
    const m = msg as Record<string, unknown>;
    if (typeof m.method === "string") {
      if (m.method !== "exec.output") return;
      const params = (m.params ?? {}) as OutputParams;
      const rid = params.request_id;
      if (typeof rid === "number") this.calls.get(rid)?.onOutput?.(params);
      return;
    }
    const id = m.id;
    if (typeof id !== "number") {
      // Not tied to a request (a line over the daemon's limit, a connection past a cap):
      // the daemon closes the connection next, and the calls in flight get this error.
      if (id === null && "error" in m) this.closeError = m.error;
      return;
    }
    const p = this.drop(id);
    if (p === undefined) return;
    if ("error" in m) p.reject(errorFromWire(m.error));
    else p.resolve(m.result);
  }

  private finish(why: string): void {
    if (this.closed) return;
    this.closed = true;
    const calls = [...this.calls.keys()];
    for (const id of calls) {
      const p = this.drop(id);
      if (p === undefined) continue;
      // The daemon never runs a line it did not receive whole: a call whose line was not
      // all written (the daemon closed an idle connection meanwhile) is sent again.
      if (this.closeError !== null) p.reject(errorFromWire(this.closeError));
      else if (!p.sent) p.reject(new NotSent(why));
      else p.reject(new ConnectionLost(why));
    }
    this.socket.destroy();
  }
}
