import { WorkspacePathError } from "./filesystem.js";

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
const MAX_SHOWN_CHARS = 200;
const RESERVED = /^(con|prn|aux|nul|conin\$|conout\$|com[0-9¹²³]|lpt[0-9¹²³])(\.|$)/i;
// C0, DEL and C1: no file name needs them, and a terminal showing the name would obey them.
// eslint-disable-next-line no-control-regex -- control characters are exactly what this rejects
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const WINDOWS_ILLEGAL = /[<>:"|?*]/;

/**
 * Splits a model-supplied relative path into segments, applying every rule that needs no disk: no
 * absolute, drive or UNC forms, no `..` anywhere (even where it would land back inside), no control
 * or Windows-illegal characters, no device names, no segment ending in a dot or space. Same on every
 * platform, so a path that is refused on Windows is refused everywhere.
 */
export function workspaceSegments(relative: string): string[] {
  if (relative === "" || relative.length > MAX_PATH_CHARS || CONTROL.test(relative)) throw escapes(relative);
  if (/^[\\/]/.test(relative) || /^[A-Za-z]:/.test(relative)) throw escapes(relative);
  const segments: string[] = [];
  for (const segment of relative.split(/[\\/]+/)) {
    if (segment === "" || segment === ".") continue;
    const unusable =
      segment === ".." ||
      segment.length > MAX_SEGMENT_CHARS ||
      WINDOWS_ILLEGAL.test(segment) ||
      RESERVED.test(segment) ||
      /[. ]$/.test(segment);
    if (unusable) throw escapes(relative);
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
      throw escapes(relative);
    }
    if (!isInside(workspace, real, probe.separator)) throw escapes(relative);
    return join(real, segments.slice(depth));
  }
  // Not even the workspace folder is there: nothing can be inside it.
  throw escapes(relative);
}

export function isInside(root: string, candidate: string, separator: string): boolean {
  const base = root.endsWith(separator) ? root : root + separator;
  return candidate === root || candidate.startsWith(base);
}

/** A model-supplied path or pattern as messages quote it: cut short, so a huge one cannot flood the context. */
export function shownPath(text: string): string {
  if (text.length <= MAX_SHOWN_CHARS) return text;
  // Never cut a surrogate pair in half: the message stays well-formed Unicode.
  const high = text.charCodeAt(MAX_SHOWN_CHARS - 1);
  const cut = high >= 0xd800 && high <= 0xdbff ? MAX_SHOWN_CHARS - 1 : MAX_SHOWN_CHARS;
  return `${text.slice(0, cut)}…`;
}

/** Every rule of the workspace is one answer to the model: the path is not a place inside it. */
export function escapes(relative: string): WorkspacePathError {
  return new WorkspacePathError(`Path escapes workspace: ${shownPath(relative)}`);
}
