import { WorkspacePathError } from "./workspace-fs.js";

/** What `resolveInWorkspace` needs to know about the disk; the Node adapter answers with real calls. */
export interface PathProbe {
  readonly separator: "/" | "\\";
  /** Real path with every link followed; throws when nothing real is there (missing, or a broken link). */
  realpath(path: string): string;
  /** Whether anything is at `path` itself, a link counting even when its target is missing. */
  exists(path: string): boolean;
}

const MAX_PATH_CHARS = 4096;
const MAX_SEGMENT_CHARS = 255;
const RESERVED = /^(con|prn|aux|nul|conin\$|conout\$|com[0-9¹²³]|lpt[0-9¹²³])(\.|$)/i;
// C0, DEL and C1: no file name needs them, and a terminal showing the name would obey them.
// eslint-disable-next-line no-control-regex -- control characters are exactly what this rejects
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const WINDOWS_ILLEGAL = /[<>:"|?*]/;

/**
 * Splits a model-supplied relative path into normalised segments, applying every rule that needs
 * no disk: no absolute, drive or UNC forms, no control or Windows-illegal characters, no device
 * names, no segment ending in a dot or space, and no `..` above the workspace. Same on every platform.
 */
export function workspaceSegments(relative: string): string[] {
  if (relative.length > MAX_PATH_CHARS) throw invalid(`path is longer than ${MAX_PATH_CHARS} characters`);
  if (CONTROL.test(relative)) throw invalid("path contains a control character");
  if (/^[\\/]/.test(relative) || /^[A-Za-z]:/.test(relative)) {
    throw new WorkspacePathError("escape", `absolute paths are not allowed: ${JSON.stringify(relative)}`);
  }
  const segments: string[] = [];
  for (const segment of relative.split(/[\\/]+/)) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (segments.pop() === undefined) {
        throw new WorkspacePathError("escape", `path leaves the workspace: ${JSON.stringify(relative)}`);
      }
      continue;
    }
    if (segment.length > MAX_SEGMENT_CHARS)
      throw invalid(`a path segment is longer than ${MAX_SEGMENT_CHARS} characters`);
    if (WINDOWS_ILLEGAL.test(segment))
      throw invalid(`path contains a character not allowed on Windows: ${JSON.stringify(segment)}`);
    if (RESERVED.test(segment)) throw invalid(`path uses a reserved device name: ${JSON.stringify(segment)}`);
    if (/[. ]$/.test(segment)) throw invalid(`a path segment ends in a dot or a space: ${JSON.stringify(segment)}`);
    segments.push(segment);
  }
  return segments;
}

/**
 * The absolute path inside `workspace` (itself a real path) that `relative` names, after following
 * every link that exists on the way, the last component included; throws `WorkspacePathError`.
 * Components that do not exist yet are appended to the real path of the deepest one that does.
 */
export function resolveInWorkspace(workspace: string, relative: string, probe: PathProbe): string {
  const segments = workspaceSegments(relative);
  const join = (base: string, parts: readonly string[]): string =>
    parts.length === 0
      ? base
      : `${base.endsWith(probe.separator) ? base : base + probe.separator}${parts.join(probe.separator)}`;
  for (let depth = segments.length; depth >= 0; depth -= 1) {
    const existing = join(workspace, segments.slice(0, depth));
    let real: string;
    try {
      real = probe.realpath(existing);
    } catch {
      // Only asked when realpath fails, so a path that exists costs one call: nothing there means look one level up.
      if (!probe.exists(existing)) continue;
      // A link whose target is missing: writing through it would create the target, wherever it is.
      throw new WorkspacePathError("escape", `path goes through a broken link: ${JSON.stringify(relative)}`);
    }
    if (!isInside(workspace, real, probe.separator)) {
      throw new WorkspacePathError("escape", `path resolves outside the workspace: ${JSON.stringify(relative)}`);
    }
    return join(real, segments.slice(depth));
  }
  throw new WorkspacePathError("escape", "the workspace folder itself does not exist");
}

export function isInside(root: string, candidate: string, separator: string): boolean {
  const base = root.endsWith(separator) ? root : root + separator;
  return candidate === root || candidate.startsWith(base);
}

function invalid(message: string): WorkspacePathError {
  return new WorkspacePathError("invalid", message);
}
