// sandboxd: a client of sandboxd's JSON-RPC 2.0 protocol on its Unix socket
// (docs/protocol.md, docs/clients-typescript.md). No runtime dependencies.

export { Client, DEFAULT_SOCKET } from "./client.js";
export type { CallOptions, ClientOptions, CreateOptions, ListOptions } from "./client.js";
export { ForkIncompleteError, Forward, Preview, Sandbox } from "./sandbox.js";
export type { ForwardInfo, PreviewInfo, SnapshotInfo } from "./sandbox.js";
export type { TemplateDefaults, TemplateInfo, VolumeInfo, VolumeMount } from "./template.js";
export type {
  ExecOptions,
  FileEntry,
  ReadFileOptions,
  SandboxInfo,
  StartProcessOptions,
  WriteFileOptions,
} from "./sandbox.js";
export { ExecResult, ExecStream } from "./exec.js";
export type { OutputChunk } from "./exec.js";
export { Process } from "./process.js";
export type { ProcessInfo, ProcessStatus, ReadOptions, ReadResult } from "./process.js";
export * from "./errors.js";
export type { Data } from "./wire.js";
