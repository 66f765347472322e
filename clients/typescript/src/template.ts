/** A volume (volume.create, volume.list): storage of a uid's that outlives sandboxes. */
export interface VolumeInfo {
  name: string;
  size_gb: number;
  owner_uid: number;
  /** the sandbox it is mounted in; null while the daemon keeps it */
  attached_to: string | null;
}

/** One volume of sandbox.create's `volumes`: the caller's volume mounted at `path`. */
export interface VolumeMount {
  name: string;
  path: string;
  readOnly?: boolean;
}

/** A template of template.list: configured (origin "config") or made from a sandbox. */
export interface TemplateInfo {
  name: string;
  node: string | null;
  vmid: number;
  /** its disk in GB; null until known (a configured template before its first clone) */
  disk_gb: number | null;
  copies?: { node: string; vmid: number }[];
  /** the copies the daemon made ([templates] NAME.replicas), once made */
  replicas?: { node: string; vmid: number }[];
  origin: "config" | { sandbox: string; uid: number; created_at: number };
  owner_uid: number | null;
  published: boolean;
  defaults: TemplateDefaults;
  used_by: { sandboxes: number; pool: number; pool_ready: number };
}

/** A template's defaults (template.create's `defaults`), each member only when set. */
export interface TemplateDefaults {
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
}
