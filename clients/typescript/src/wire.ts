// The wire's conventions: binary data as `name` (UTF-8 text) or `name_b64`, and parameter
// names (this client's options are camelCase; the protocol's names are snake_case).

import { Buffer } from "node:buffer";

/** Bytes or text (sent as UTF-8). */
export type Data = Uint8Array | string;

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const lossyUtf8 = new TextDecoder("utf-8");

/** Text of bytes, with U+FFFD for what is not UTF-8. */
export function decodeText(bytes: Uint8Array): string {
  return lossyUtf8.decode(bytes);
}

export function encodeText(text: string): Uint8Array {
  return Buffer.from(text, "utf8");
}

/** The JSON text of s grows by escapes (control characters are 6 bytes for 1). */
function jsonCost(s: string): number {
  return Buffer.byteLength(JSON.stringify(s), "utf8");
}

/** Puts data into params as `name` or `name_b64`, whichever spelling is shorter on the line. */
export function putData(params: Record<string, unknown>, name: string, data: Data): void {
  if (typeof data === "string") {
    params[name] = data;
    return;
  }
  let text: string | undefined;
  try {
    text = strictUtf8.decode(data);
  } catch {
    text = undefined;
  }
  const b64Len = Math.ceil(data.length / 3) * 4;
  if (text !== undefined && jsonCost(text) <= b64Len + 2) params[name] = text;
  else params[`${name}_b64`] = Buffer.from(data.buffer, data.byteOffset, data.length).toString("base64");
}

/** The bytes of `name` or `name_b64` in obj; undefined when neither is there. */
export function getData(obj: Record<string, unknown>, name: string): Uint8Array | undefined {
  const text = obj[name];
  if (typeof text === "string") return new Uint8Array(Buffer.from(text, "utf8"));
  const b64 = obj[`${name}_b64`];
  if (typeof b64 === "string") return new Uint8Array(Buffer.from(b64, "base64"));
  return undefined;
}

/** The text of `name`, or of `name_b64` decoded as UTF-8 (lossy); undefined when absent. */
export function getText(obj: Record<string, unknown>, name: string): string | undefined {
  const text = obj[name];
  if (typeof text === "string") return text;
  const bytes = getData(obj, name);
  return bytes === undefined ? undefined : decodeText(bytes);
}

/** "memoryMb" -> "memory_mb"; names already in snake_case are left alone. */
export function wireName(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Top-level keys renamed to the wire's names (values such as labels or env untouched);
 * undefined values are left out. */
export function wireParams(
  opts: object | undefined,
  skip: readonly string[] = [],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!opts) return out;
  for (const [k, v] of Object.entries(opts)) {
    if (v === undefined || skip.includes(k)) continue;
    out[wireName(k)] = v;
  }
  return out;
}

/** A file mode as the wire's octal string: 0o640 -> "0640". */
export function modeString(mode: number | string): string {
  return typeof mode === "string" ? mode : mode.toString(8).padStart(4, "0");
}
