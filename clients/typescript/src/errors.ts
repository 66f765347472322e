// Errors of sandboxd: one class per error code of docs/protocol.md ("Errors"), all
// subclasses of SandboxdError, plus the client's own (no reply in time, connection lost,
// daemon unreachable), whose code is null.

/** `data` of an error: sandboxd's own errors always carry `reason`; `-32602` names `param`. */
export type ErrorData = { reason?: string; param?: string; errno?: string; [key: string]: unknown };

/** An error from sandboxd or from the connection to it. */
export class SandboxdError extends Error {
  /** The JSON-RPC error code; null for the client's own errors. */
  readonly code: number | null;
  /** The daemon's `message` ("No such sandbox", ...), without the reason. */
  readonly rpcMessage: string;
  /** The error's data (an object; `{}` when the daemon sent none). */
  readonly data: ErrorData;

  constructor(message: string, code: number | null = null, data?: unknown) {
    const d: ErrorData =
      data && typeof data === "object" && !Array.isArray(data)
        ? (data as ErrorData)
        : data === undefined || data === null
          ? {}
          : { value: data };
    super(describe(message, code, d));
    this.name = new.target.name;
    this.code = code;
    this.rpcMessage = message;
    this.data = d;
  }

  /** data.reason, when there is one. */
  get reason(): string | undefined {
    return typeof this.data.reason === "string" ? this.data.reason : undefined;
  }
}

function describe(message: string, code: number | null, data: ErrorData): string {
  let text = message;
  if (code !== null) text += ` (${code})`;
  if (typeof data.reason === "string" && data.reason) text += `: ${data.reason}`;
  return text;
}

/** No reply came within the call's timeout; the request may still run in the daemon. */
export class TimeoutError extends SandboxdError {}
/** The connection closed while the call was in flight: it may or may not have taken effect.
 * The next call opens a new connection. */
export class ConnectionLost extends SandboxdError {}
/** The daemon's socket cannot be reached (not running, or no permission to use it). */
export class Unavailable extends SandboxdError {}

/** -32700: invalid JSON. */
export class ParseError extends SandboxdError {}
/** -32600: not a JSON-RPC 2.0 request, or a line over the daemon's size limit. */
export class InvalidRequest extends SandboxdError {}
/** -32601: no such method. */
export class MethodNotFound extends SandboxdError {}
/** -32602: data.param names the parameter, data.reason says why. */
export class InvalidParams extends SandboxdError {}
/** -32603. */
export class InternalError extends SandboxdError {}
/** -32001: no such sandbox, or not the caller's. */
export class NoSuchSandbox extends SandboxdError {}
/** -32002: the sandbox (or process) is not in a state that allows this; data.state. */
export class BadState extends SandboxdError {}
/** -32003: a quota (per uid, global, or background processes per sandbox). */
export class QuotaExceeded extends SandboxdError {}
/** -32004: Proxmox refused or failed; data.http_status, data.upid. */
export class ProxmoxError extends SandboxdError {}
/** -32005: the sandbox could not be reached over SSH. */
export class SSHError extends SandboxdError {}
/** -32006: a deadline of the daemon passed (file operations, process calls, waits). */
export class DeadlineExceeded extends SandboxdError {}
/** -32007: too many requests in flight, capacity exhausted. */
export class Busy extends SandboxdError {}
/** -32008. */
export class PermissionDenied extends SandboxdError {}
/** -32009: data.errno is "ENOENT", "EISDIR", ... */
export class FileError extends SandboxdError {}
/** -32010: an idempotency key reused with different parameters. */
export class IdempotencyMismatch extends SandboxdError {}
/** -32011: the daemon is stopping; retry after it restarts. */
export class ShuttingDown extends SandboxdError {}

/** The class of each error code. */
export const errorClasses: ReadonlyMap<number, typeof SandboxdError> = new Map<
  number,
  typeof SandboxdError
>([
  [-32700, ParseError],
  [-32600, InvalidRequest],
  [-32601, MethodNotFound],
  [-32602, InvalidParams],
  [-32603, InternalError],
  [-32001, NoSuchSandbox],
  [-32002, BadState],
  [-32003, QuotaExceeded],
  [-32004, ProxmoxError],
  [-32005, SSHError],
  [-32006, DeadlineExceeded],
  [-32007, Busy],
  [-32008, PermissionDenied],
  [-32009, FileError],
  [-32010, IdempotencyMismatch],
  [-32011, ShuttingDown],
]);

/** The error object of a reply as the class for its code. */
export function errorFromWire(err: unknown): SandboxdError {
  if (!err || typeof err !== "object") return new SandboxdError(`malformed error: ${String(err)}`);
  const e = err as { code?: unknown; message?: unknown; data?: unknown };
  const code = typeof e.code === "number" && Number.isInteger(e.code) ? e.code : null;
  const message = typeof e.message === "string" && e.message ? e.message : "error";
  const cls = (code !== null && errorClasses.get(code)) || SandboxdError;
  return new cls(message, code, e.data);
}
