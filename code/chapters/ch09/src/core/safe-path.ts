import { isWindowsReservedComponent, WorkspacePathError } from "./filesystem.js";

/** What `resolveInWorkspace` needs to know about the disk; the Node adapter answers with real calls. */
export interface PathProbe {
  readonly separator: "/" | "\\";
  /** Real path with every link followed; throws when nothing real is there (missing, or a broken link). */
  realpath(path: string): string;
  /** Whether anything is at `path` itself, a link counting even when its target is missing. */
  exists(path: string): boolean;
}

/**
 * Names and paths are measured in UTF-8 bytes, as the disk counts them, not in UTF-16 units: 200 CJK
 * characters are 600 bytes. A name takes at most 255 (NAME_MAX on Linux; Windows counts 255 UTF-16
 * units, which 255 bytes never exceed). A whole path, the workspace's own part included, at most
 * 4,095: Linux's PATH_MAX of 4,096 counts the closing NUL.
 */
export const MAX_SEGMENT_BYTES = 255;
export const MAX_PATH_BYTES = 4095;
const MAX_SHOWN_CHARS = 200;
// An 8.3 short name (`PROGRA~1`, `GIT~1`, `GENERA~1.TXT`): on Windows a second spelling of another entry, which
// would get past every rule that looks at names.
const SHORT_NAME = /^(?=[^.]{3,8}(?:\.|$))[^.~]+~[0-9]+(?:\.[^.]{0,3})?$/;
// C0, DEL and C1: no file name needs them, and a terminal showing the name would obey them.
// eslint-disable-next-line no-control-regex -- control characters are exactly what this rejects
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const WINDOWS_ILLEGAL = /[<>:"|?*]/;

/**
 * Splits a model-supplied relative path into segments, applying every rule that needs no disk: no
 * absolute, drive or UNC forms, no `..` anywhere (even where it would land back inside), no control
 * or Windows-illegal characters, no device names, no 8.3 short names, no segment ending in a dot or space, no name or
 * path longer in bytes than a disk takes, and not the workspace folder itself (`.`, `./`): it is no
 * place inside the workspace. Same on every platform, so a path refused on Windows is refused everywhere.
 */
export function workspaceSegments(relative: string): string[] {
  // UTF-16 units are never more than UTF-8 bytes: a long text is refused before it is measured.
  const tooLong = relative.length > MAX_PATH_BYTES || utf8Bytes(relative) > MAX_PATH_BYTES;
  if (tooLong || CONTROL.test(relative)) throw escapes(relative);
  if (/^[\\/]/.test(relative) || /^[A-Za-z]:/.test(relative)) throw escapes(relative);
  const segments: string[] = [];
  for (const segment of relative.split(/[\\/]+/)) {
    if (segment === "" || segment === ".") continue;
    const unusable =
      segment === ".." ||
      utf8Bytes(segment) > MAX_SEGMENT_BYTES ||
      WINDOWS_ILLEGAL.test(segment) ||
      isWindowsReservedComponent(segment) ||
      SHORT_NAME.test(segment) ||
      /[. ]$/.test(segment);
    if (unusable) throw escapes(relative);
    segments.push(segment);
  }
  // Nothing at all, or only separators and dots: the workspace folder itself, no place inside it.
  if (segments.length === 0) throw escapes(relative);
  return segments;
}

/**
 * Whether a glob pattern holds a character no path may: a control character, or a Windows-illegal one
 * that is no wildcard (`*` and `?` are). Such a pattern could only match a name the other tools refuse.
 */
export function hasUnusableCharacter(pattern: string): boolean {
  return CONTROL.test(pattern) || /[<>:"|]/.test(pattern);
}

/** The bytes `text` takes as UTF-8, as Node writes it to the disk (a lone surrogate as U+FFFD, 3 bytes). */
function utf8Bytes(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    const pairs = unit >= 0xd800 && unit <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
    if (pairs) i += 1;
    bytes += unit < 0x80 ? 1 : unit < 0x800 ? 2 : pairs ? 4 : 3;
  }
  return bytes;
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
    const resolved = join(real, segments.slice(depth));
    // The text fitted, but below this workspace (or past a link) the whole path is too long to open.
    if (utf8Bytes(resolved) > MAX_PATH_BYTES) throw escapes(relative);
    return resolved;
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
