import { closeSync, lstatSync, opendirSync, readSync, realpathSync, statSync } from "node:fs";
import { realpath } from "node:fs/promises";
import { join, sep } from "node:path";
import { isAlias, isMap, isScalar, isSeq, parseDocument } from "yaml";
import { z } from "zod";
import { openConfined, openConfinedSync } from "../adapters/confined-open.js";
import {
  FileNotFoundError,
  InvalidFilePathError,
  isWindowsReservedComponent,
  WorkspacePathError,
} from "../core/filesystem.js";
import { hasHiddenCharacters } from "../core/hidden-characters.js";
import { isInside, shownPath } from "../core/safe-path.js";
import { toolError, toolSuccess, type ToolContext, type ToolDefinition, type ToolResult } from "../core/tools.js";

// The one feature that reads files itself: the book's `SkillRegistry.scan(workspace)` takes no adapter, so its
// opens reuse the hardening `read_file` has (no final link, no FIFO hang, the opened file confirmed where it is).

export const LOAD_SKILL_TOOL_NAME = "load_skill";
export const MAX_SKILL_NAME_LENGTH = 64;
export const DEFAULT_MAX_CATALOG_ENTRIES = 100;
export const DEFAULT_MAX_CATALOG_BYTES = 8_000;
/** Where a Skill's metadata must end: a manifest whose second `---` is further in is refused, not read on. */
export const MAX_FRONTMATTER_BYTES = 65_536;
/**
 * Frontmatter bytes one scan parses, all Skills together: 1,000 ordinary Skills take a few hundred KiB, while
 * 1,000 manifests of 64 KiB of dense YAML would hold the start for many minutes.
 */
export const MAX_SCAN_FRONTMATTER_BYTES = 1024 * 1024;
/** Entries of `skills/` looked at; more is refused, so a folder of millions cannot make the start slow or large. */
export const MAX_SKILL_DIRECTORIES = 1_000;
/** One description must not take the catalog's whole budget and hide every Skill after it. */
export const MAX_SKILL_DESCRIPTION_CHARS = 1_024;
/** A whole manifest read at load: the same cap as `read_file`'s. */
export const MAX_SKILL_FILE_BYTES = 10 * 1024 * 1024;
/** How deep a frontmatter's lists and mappings may nest: far more than metadata needs, far less than a stack. */
export const MAX_FRONTMATTER_DEPTH = 64;

const SKILLS_DIRECTORY = "skills";
const MANIFEST = "SKILL.md";
const CHUNK_BYTES = 4_096;
const SKILL_NAME_REGEXP = /^[a-z0-9]+(?:-[a-z0-9]+)*$/u;
// A description goes into the system prompt as one visible line: no control characters (NEL among them), no lone
// surrogates (ill-formed text in every request), and no hidden characters (line or paragraph separators, bidi
// overrides, zero-width, tag characters and variation selectors, which hide text from a reader but not the model).
const CONTROL_OR_SURROGATE = /[\p{Cc}\p{Cs}]/u;

const loadSkillInputSchema = z
  .object({
    name: z
      .string()
      .min(1)
      .max(MAX_SKILL_NAME_LENGTH)
      .regex(SKILL_NAME_REGEXP)
      .refine((name) => !isWindowsReservedComponent(name), "name must not be a Windows device name")
      .describe("The exact Skill name from the available catalog."),
  })
  .strict();

export type LoadSkillInput = Readonly<z.output<typeof loadSkillInputSchema>>;

/** What enters the system prompt for one Skill. */
export interface SkillCatalogEntry {
  readonly name: string;
  readonly description: string;
}

export interface SkillScanOptions {
  readonly maxCatalogEntries?: number;
  readonly maxCatalogBytes?: number;
  /** Relative to the workspace, without `..` or device names; `skills` when omitted. */
  readonly skillsDirectory?: string;
}

/** Every way the workspace's Skills can be unusable; the CLI reports any of them as a configuration error. */
export class SkillError extends Error {
  override readonly name: string = "SkillError";
}

/** A SKILL.md that is not what the contract asks: frontmatter, YAML, name, description or encoding. */
export class SkillManifestError extends SkillError {
  override readonly name = "SkillManifestError";
}

/** Two folders declare the same name: which body a load would get must not depend on the directory order. */
export class DuplicateSkillError extends SkillError {
  override readonly name = "DuplicateSkillError";
}

/** A Skills root, folder or manifest that leads outside where it must stay, or is no ordinary file or folder. */
export class SkillPathError extends SkillError {
  override readonly name = "SkillPathError";
}

/** What the scan keeps of one Skill: never its body. */
interface RegisteredSkill {
  readonly name: string;
  readonly description: string;
  /** The folder's own name under the Skills root. */
  readonly folder: string;
  /** Where that folder really was at the scan: a load goes to the same place or nowhere. */
  readonly directory: string;
}

/**
 * The workspace's Skills, scanned once: a sorted, bounded catalog for the system prompt, and `load_skill`, which
 * rereads and rechecks a registered Skill's manifest on every call and returns only its body.
 */
export class SkillRegistry {
  readonly toolDefinition: ToolDefinition<LoadSkillInput>;
  /** Every registered name, sorted. */
  readonly names: readonly string[];
  /** The entries the catalog holds: a prefix of the sorted Skills, within both limits. */
  readonly catalogEntries: readonly SkillCatalogEntry[];
  readonly #workspace: string;
  readonly #skillsDirectory: string;
  /** The Skills root as a path under the workspace, not resolved: a load resolves it again. */
  readonly #rootPath: string;
  readonly #skills: ReadonlyMap<string, RegisteredSkill>;

  private constructor(
    workspace: string,
    root: { readonly skillsDirectory: string; readonly rootPath: string },
    skills: readonly RegisteredSkill[],
    limits: { readonly entries: number; readonly bytes: number },
  ) {
    this.#workspace = workspace;
    this.#skillsDirectory = root.skillsDirectory;
    this.#rootPath = root.rootPath;
    this.#skills = new Map(skills.map((skill) => [skill.name, skill]));
    this.names = Object.freeze(skills.map((skill) => skill.name));
    this.catalogEntries = boundedCatalog(skills, limits.entries, limits.bytes);
    this.toolDefinition = Object.freeze({
      name: LOAD_SKILL_TOOL_NAME,
      description: "Load the full instructions for one Skill listed in the workspace catalog.",
      inputSchema: loadSkillInputSchema,
      effect: "read",
      handler: (input: LoadSkillInput, context: ToolContext) => this.#handleLoad(input, context),
    });
    Object.freeze(this);
  }

  /**
   * Reads `<workspace>/skills/*\/SKILL.md` up to each frontmatter's end, now and synchronously: the catalog is a
   * snapshot of this moment. An absent Skills folder is an empty catalog; anything unsafe or malformed throws.
   */
  static scan(workspace: string, options: SkillScanOptions = {}): SkillRegistry {
    const entries = positiveInteger("maxCatalogEntries", options.maxCatalogEntries ?? DEFAULT_MAX_CATALOG_ENTRIES);
    const bytes = positiveInteger("maxCatalogBytes", options.maxCatalogBytes ?? DEFAULT_MAX_CATALOG_BYTES);
    const skillsDirectory = options.skillsDirectory ?? SKILLS_DIRECTORY;
    const realWorkspace = realpathSync.native(workspace);
    const rootPath = skillRootPath(realWorkspace, skillsDirectory);
    const root = resolveSkillRoot(realWorkspace, rootPath, skillsDirectory);
    const skills = root === undefined ? [] : scanRoot(root, skillsDirectory);
    return new SkillRegistry(realWorkspace, { skillsDirectory, rootPath }, skills, { entries, bytes });
  }

  /** `- **name**: description` per catalog entry, joined by line breaks; "" when there is none. */
  renderCatalog(): string {
    return this.catalogEntries.map(catalogLine).join("\n");
  }

  /**
   * The body of a registered Skill, byte for byte, after rechecking every level of its path and the whole manifest
   * as it is on disk now.
   */
  async loadSkill(name: string): Promise<string> {
    const skill = this.#skills.get(name);
    if (skill === undefined) throw new SkillNotFoundError(`Skill is not registered: ${shownPath(name)}`);
    const source = manifestSource(this.#skillsDirectory, skill.folder);
    const directory = await this.#checkedRealDirectoryAsync(skill);
    const text = await readWholeManifest(directory, source);
    const document = parseSkillDocument(text, source);
    if (document.name !== name || document.name !== skill.folder) {
      throw new SkillManifestError(`Skill name must match its directory: ${shownPath(skill.folder)}`);
    }
    return document.body;
  }

  /**
   * The Skill's folder, resolved again through the workspace and the Skills root as they are now: it must be the
   * very folder the scan resolved, so a root or folder relinked since (outside, to the workspace itself, or to
   * another Skill's folder) is refused, not followed.
   */
  async #checkedRealDirectoryAsync({ folder, directory: scanned }: RegisteredSkill): Promise<string> {
    const directory = await realpath(join(this.#rootPath, folder)).catch(() => undefined);
    if (directory !== scanned) {
      throw new SkillPathError(
        `Registered Skill path is no longer safe: ${shownPath(`${this.#skillsDirectory}/${folder}`)}`,
      );
    }
    return directory;
  }

  async #handleLoad(input: LoadSkillInput, context: ToolContext): Promise<ToolResult> {
    // The registry answers for the workspace it scanned, and for no other: checked before the name.
    let current: string;
    try {
      current = await realpath(context.workspace);
    } catch {
      return toolError("skill_workspace_error", "Current workspace could not be resolved");
    }
    if (current !== this.#workspace) {
      return toolError("skill_workspace_mismatch", "Skill registry belongs to a different workspace");
    }
    if (!this.#skills.has(input.name)) return toolError("skill_not_found", "Requested Skill is not registered");
    try {
      return toolSuccess(await this.loadSkill(input.name));
    } catch (error) {
      // The texts the model reads name no path: where the host keeps its files is not the model's business.
      if (error instanceof SkillPathError)
        return toolError("skill_path_escape", "Registered Skill path is no longer safe");
      if (error instanceof SkillManifestError)
        return toolError("invalid_skill", "Registered Skill manifest is invalid");
      throw error;
    }
  }
}

/** Internal: `loadSkill` of a name the scan did not register (the tool says `skill_not_found` before). */
class SkillNotFoundError extends SkillError {
  override readonly name = "SkillNotFoundError";
}

/** A manifest as messages name it: relative to the workspace, each part cut short. */
function manifestSource(skillsDirectory: string, folder: string): string {
  return `${shownPath(skillsDirectory)}/${shownPath(folder)}/${MANIFEST}`;
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer`);
  return value;
}

function catalogLine(entry: SkillCatalogEntry): string {
  return `- **${entry.name}**: ${entry.description}`;
}

/**
 * The sorted entries that fit: at most `maxEntries`, and at most `maxBytes` UTF-8 bytes with the line breaks
 * between them. Whole entries only, and the first that does not fit ends the catalog: no later, shorter one
 * jumps the queue, so the catalog is always a prefix of the sorted list.
 */
function boundedCatalog(
  skills: readonly RegisteredSkill[],
  maxEntries: number,
  maxBytes: number,
): readonly SkillCatalogEntry[] {
  const encoder = new TextEncoder();
  const kept: SkillCatalogEntry[] = [];
  let usedBytes = 0;
  for (const { name, description } of skills) {
    if (kept.length >= maxEntries) break;
    const entry = Object.freeze({ name, description });
    const separatorBytes = kept.length === 0 ? 0 : 1;
    const entryBytes = encoder.encode(catalogLine(entry)).byteLength;
    if (usedBytes + separatorBytes + entryBytes > maxBytes) break;
    usedBytes += separatorBytes + entryBytes;
    kept.push(entry);
  }
  return Object.freeze(kept);
}

/** The Skills root under the workspace, unresolved: only a plain relative path of ordinary names is accepted. */
function skillRootPath(workspace: string, skillsDirectory: string): string {
  const components = skillsDirectory.split(/[\\/]/u);
  const unsafe =
    skillsDirectory === "" ||
    /^[\\/]|^[A-Za-z]:/u.test(skillsDirectory) ||
    components.some((part) => part === "" || part === "." || part === ".." || isWindowsReservedComponent(part));
  if (unsafe) throw new SkillPathError(`Skills directory must be a plain relative path: ${shownPath(skillsDirectory)}`);
  return join(workspace, ...components);
}

/** The real path of the Skills root at `path`, or `undefined` when nothing is there; it must be a folder inside. */
function resolveSkillRoot(workspace: string, path: string, skillsDirectory: string): string | undefined {
  try {
    lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new SkillPathError(`Skills directory cannot be read: ${shownPath(skillsDirectory)}`);
  }
  const escape = new SkillPathError(`Skills directory escapes workspace: ${shownPath(skillsDirectory)}`);
  let root: string;
  try {
    root = realpathSync.native(path);
  } catch {
    // A dangling link or a loop: it leads nowhere the workspace holds.
    throw escape;
  }
  if (root === workspace || !isInside(workspace, root, sep)) throw escape;
  let isDirectory: boolean;
  try {
    isDirectory = statSync(root).isDirectory();
  } catch {
    // Removed between the resolution and this look: as if it had never been there, an empty catalog.
    return undefined;
  }
  if (!isDirectory) throw new SkillPathError(`Skills directory is not a directory: ${shownPath(skillsDirectory)}`);
  return root;
}

/** Every Skill of the root, sorted by name; duplicates are found before any folder name is compared. */
function scanRoot(root: string, skillsDirectory: string): RegisteredSkill[] {
  const found: RegisteredSkill[] = [];
  let frontmatterBytes = 0;
  for (const folder of firstLevelEntries(root, skillsDirectory)) {
    const directory = skillDirectory(root, folder);
    if (directory === undefined) continue;
    const source = manifestSource(skillsDirectory, folder);
    const frontmatter = readFrontmatter(directory, folder, source);
    if (frontmatter === undefined) continue;
    frontmatterBytes += Buffer.byteLength(frontmatter, "utf8");
    if (frontmatterBytes > MAX_SCAN_FRONTMATTER_BYTES) {
      throw new SkillManifestError(
        `Skill frontmatter totals more than ${MAX_SCAN_FRONTMATTER_BYTES} bytes in ${shownPath(skillsDirectory)}`,
      );
    }
    const { name, description } = parseFrontmatter(frontmatter, source);
    found.push({ name, description, folder, directory });
  }
  const seen = new Set<string>();
  for (const skill of found) {
    if (seen.has(skill.name)) throw new DuplicateSkillError(`Duplicate Skill name: ${skill.name}`);
    seen.add(skill.name);
  }
  for (const skill of found) {
    if (skill.name !== skill.folder) {
      throw new SkillManifestError(`Skill name must match its directory: ${shownPath(skill.folder)}`);
    }
  }
  // By UTF-16 code unit, never the locale: the same folders give the same catalog on every machine.
  return found.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The root's entry names, sorted, read one at a time and refused past `MAX_SKILL_DIRECTORIES`. */
function firstLevelEntries(root: string, skillsDirectory: string): string[] {
  const names: string[] = [];
  let dir;
  try {
    dir = opendirSync(root);
  } catch {
    // Gone or no longer a folder since it was resolved: what the scan needs is not there to read.
    throw new SkillPathError(`Skills directory cannot be read: ${shownPath(skillsDirectory)}`);
  }
  try {
    for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
      if (names.length === MAX_SKILL_DIRECTORIES) {
        throw new SkillPathError(`Skills directory holds more than ${MAX_SKILL_DIRECTORIES} entries`);
      }
      names.push(entry.name);
    }
  } finally {
    dir.closeSync();
  }
  return names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * The real path of `root/folder` when it is a Skill folder; `undefined` for anything else at the first level (a
 * plain file, a FIFO). A link is followed only when it stays inside the root and leads to a folder.
 */
function skillDirectory(root: string, folder: string): string | undefined {
  const path = join(root, folder);
  let info;
  try {
    info = lstatSync(path);
  } catch {
    // Gone since the folder was listed: there is nothing to register.
    return undefined;
  }
  if (!info.isDirectory() && !info.isSymbolicLink()) return undefined;
  const escape = new SkillPathError(`Skill directory escapes Skills root: ${shownPath(folder)}`);
  let real: string;
  try {
    real = realpathSync.native(path);
  } catch {
    throw escape;
  }
  if (real === root || !isInside(root, real, sep)) throw escape;
  let isDirectory: boolean;
  try {
    isDirectory = statSync(real).isDirectory();
  } catch {
    // Removed between the resolution and this look: there is nothing to register, as when it was gone before.
    return undefined;
  }
  if (!isDirectory) throw new SkillPathError(`Skill directory is not a directory: ${shownPath(folder)}`);
  return real;
}

/**
 * The manifest's frontmatter as text, or `undefined` when the folder has no SKILL.md. Reads 4 KiB at a time and
 * stops at the closing `---`: the body is never read here, let alone decoded.
 */
function readFrontmatter(directory: string, folder: string, source: string): string | undefined {
  const path = join(directory, MANIFEST);
  let target: string;
  try {
    lstatSync(path);
    target = realpathSync.native(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      // A link named SKILL.md that leads nowhere is no missing manifest: it points somewhere else.
      if (isLink(path)) throw new SkillPathError(`Skill manifest escapes its directory: ${shownPath(folder)}`);
      return undefined;
    }
    throw new SkillPathError(`Skill manifest escapes its directory: ${shownPath(folder)}`);
  }
  if (!isInside(directory, target, sep) || target === directory) {
    throw new SkillPathError(`Skill manifest escapes its directory: ${shownPath(folder)}`);
  }
  const fd = openInside(directory, target, folder, source);
  try {
    const bytes = Buffer.alloc(MAX_FRONTMATTER_BYTES + CHUNK_BYTES);
    let filled = 0;
    let end: number | undefined;
    const progress = { bomAllowed: true, lineStart: 0 };
    while (end === undefined) {
      const read = readSync(fd, bytes, filled, Math.min(CHUNK_BYTES, bytes.length - filled), null);
      const atEnd = read === 0;
      filled += read;
      end = frontmatterEnd(bytes.subarray(0, filled), atEnd, source, progress);
      if ((end ?? filled) > MAX_FRONTMATTER_BYTES) throw frontmatterTooLarge(source);
    }
    return decodeUtf8(bytes.subarray(0, end), source);
  } finally {
    closeSync(fd);
  }
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Opens `target` as `read_file` opens a file (no final link, no wait on a FIFO, the opened file confirmed an
 * ordinary file inside `directory` with no second name), as a Skill error.
 */
function openInside(directory: string, target: string, folder: string, source: string): number {
  try {
    return openConfinedSync(directory, target, source);
  } catch (error) {
    if (error instanceof InvalidFilePathError)
      throw new SkillPathError(`Skill manifest is not a regular file: ${source}`);
    // Gone, a final link swapped in, outside the folder, or a hard link: it no longer leads where it was checked.
    if (error instanceof WorkspacePathError || error instanceof FileNotFoundError) {
      throw new SkillPathError(`Skill manifest escapes its directory: ${shownPath(folder)}`);
    }
    throw new SkillPathError(`Skill manifest cannot be read: ${source}`);
  }
}

/**
 * Where the frontmatter text ends in `bytes` (the start of the closing `---` line, after the opening line), or
 * `undefined` when more must be read. Throws when the first line is no `---` or the file ended without a second.
 */
function frontmatterEnd(
  bytes: Buffer,
  atEnd: boolean,
  source: string,
  progress: { bomAllowed: boolean; lineStart: number },
): number | undefined {
  // Called again as each chunk arrives: lines already looked at are not looked at again.
  if (progress.lineStart > 0) return closingLine(bytes, atEnd, source, progress);
  const start = progress.bomAllowed && bytes.subarray(0, 3).equals(UTF8_BOM) ? 3 : 0;
  const firstBreak = bytes.indexOf(0x0a, start);
  if (firstBreak === -1) {
    // No line break yet: only `---` or `---\r` may still become the opening line.
    if (!atEnd && bytes.length - start <= 4) return undefined;
    if (atEnd && isFrontmatterSeparator(bytes.subarray(start).toString("latin1"))) {
      throw new SkillManifestError(`Skill manifest has no closing frontmatter delimiter: ${source}`);
    }
    throw new SkillManifestError(`Skill manifest must begin with YAML frontmatter: ${source}`);
  }
  if (!isFrontmatterSeparator(bytes.subarray(start, firstBreak).toString("latin1"))) {
    throw new SkillManifestError(`Skill manifest must begin with YAML frontmatter: ${source}`);
  }
  progress.lineStart = firstBreak + 1;
  return closingLine(bytes, atEnd, source, progress);
}

/** From `progress.lineStart` on: where the closing `---` line starts, or `undefined` (and where to go on) for now. */
function closingLine(
  bytes: Buffer,
  atEnd: boolean,
  source: string,
  progress: { lineStart: number },
): number | undefined {
  let lineStart = progress.lineStart;
  for (;;) {
    const lineBreak = bytes.indexOf(0x0a, lineStart);
    if (lineBreak === -1) {
      // The last line so far: a closing `---` with no line break after it counts only at the end of the file.
      progress.lineStart = lineStart;
      if (!atEnd) return undefined;
      if (isFrontmatterSeparator(bytes.subarray(lineStart).toString("latin1"))) return lineStart;
      throw new SkillManifestError(`Skill manifest has no closing frontmatter delimiter: ${source}`);
    }
    if (isFrontmatterSeparator(bytes.subarray(lineStart, lineBreak).toString("latin1"))) return lineStart;
    lineStart = lineBreak + 1;
  }
}

const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

function frontmatterTooLarge(source: string): SkillManifestError {
  return new SkillManifestError(`Skill frontmatter is larger than ${MAX_FRONTMATTER_BYTES} bytes: ${source}`);
}

/** `---` alone on its line, with or without the `\r` of a CRLF file; `--- ` with a trailing space is not one. */
function isFrontmatterSeparator(line: string): boolean {
  return line === "---" || line === "---\r";
}

function decodeUtf8(bytes: Uint8Array, source: string): string {
  try {
    // A BOM before the first `---` is dropped here, as any UTF-8 reader does.
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new SkillManifestError(`Skill manifest is not valid UTF-8: ${source}`);
  }
}

/** The whole manifest as it is now, through the same confined open `read_file` uses, never past the size cap. */
async function readWholeManifest(directory: string, source: string): Promise<string> {
  const escape = (): SkillPathError =>
    new SkillPathError(`Registered Skill path is no longer safe: ${shownPath(source)}`);
  const path = join(directory, MANIFEST);
  const target = await realpath(path).catch(() => undefined);
  if (target === undefined || !isInside(directory, target, sep) || target === directory) throw escape();
  let handle;
  try {
    ({ handle } = await openConfined(directory, target, source, "read"));
  } catch (error) {
    // Gone, swapped for a link, or no ordinary file since the scan: the registered path is no longer safe. Anything
    // else (a permission error, a failing disk) is no fault of the manifest and goes on as the tool's own failure.
    const moved =
      error instanceof WorkspacePathError ||
      error instanceof FileNotFoundError ||
      error instanceof InvalidFilePathError;
    if (moved) throw escape();
    throw error;
  }
  try {
    const { size } = await handle.stat();
    if (size > MAX_SKILL_FILE_BYTES) {
      throw new SkillManifestError(`Skill manifest is larger than ${MAX_SKILL_FILE_BYTES} bytes: ${source}`);
    }
    // Sized by what the file says, grown while it grows, and never more than one byte past the cap: a file that
    // grew since is refused, and a small manifest costs a small buffer.
    let buffer = Buffer.alloc(Math.min(size, MAX_SKILL_FILE_BYTES) + 1);
    let filled = 0;
    for (let read = -1; read !== 0; filled += read) {
      if (filled === buffer.length) {
        if (filled > MAX_SKILL_FILE_BYTES) break;
        const larger = Buffer.alloc(Math.min(2 * filled, MAX_SKILL_FILE_BYTES + 1));
        buffer.copy(larger, 0, 0, filled);
        buffer = larger;
      }
      ({ bytesRead: read } = await handle.read(buffer, filled, buffer.length - filled, null));
    }
    if (filled > MAX_SKILL_FILE_BYTES) {
      throw new SkillManifestError(`Skill manifest grew past ${MAX_SKILL_FILE_BYTES} bytes: ${source}`);
    }
    return decodeUtf8(buffer.subarray(0, filled), source);
  } finally {
    await handle.close();
  }
}

/** A whole manifest: its frontmatter checked as the scan checks it, and the body, every byte after the closing line. */
function parseSkillDocument(text: string, source: string): { name: string; description: string; body: string } {
  const bytes = Buffer.from(text, "utf8");
  // The decoder already dropped the one BOM a manifest may start with: a second one is no frontmatter, as at scan.
  const end = frontmatterEnd(bytes, true, source, { bomAllowed: false, lineStart: 0 });
  if (end === undefined) throw new SkillManifestError(`Skill manifest has no closing frontmatter delimiter: ${source}`);
  // The scan's bound holds at load too: a manifest rewritten since must not pass with more metadata than a scan takes.
  if (end > MAX_FRONTMATTER_BYTES) throw frontmatterTooLarge(source);
  const frontmatter = bytes.subarray(0, end).toString("utf8");
  const closingBreak = bytes.indexOf(0x0a, end);
  const body = closingBreak === -1 ? "" : bytes.subarray(closingBreak + 1).toString("utf8");
  return { ...parseFrontmatter(frontmatter, source), body };
}

/**
 * Why the parsed frontmatter is not plain data, found in one pass over its nodes that turns none of them into
 * text: an alias as a key, a key that is itself a list or mapping (yaml would stringify it, and a nested key again
 * for every level above it: 28 levels of `? ` cost a gigabyte), one key twice in a mapping, or nesting past the bound.
 */
function frontmatterShapeError(
  document: ReturnType<typeof parseDocument>,
  source: string,
  invalid: () => SkillManifestError,
): SkillManifestError | undefined {
  const pending: { readonly node: unknown; readonly depth: number }[] = [{ node: document.contents, depth: 0 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { node, depth } = next;
    // An alias anywhere else is left to toJS, which refuses any (maxAliasCount: 0) before resolving it.
    if (!isMap(node) && !isSeq(node)) continue;
    if (depth === MAX_FRONTMATTER_DEPTH) {
      return new SkillManifestError(`Skill frontmatter nests deeper than ${MAX_FRONTMATTER_DEPTH} levels: ${source}`);
    }
    if (isSeq(node)) {
      for (const item of node.items) pending.push({ node: item, depth: depth + 1 });
      continue;
    }
    const seen = new Set<string>();
    for (const { key, value } of node.items) {
      if (isAlias(key)) return invalid();
      if (!isScalar(key)) return new SkillManifestError(`Skill frontmatter has a key that is not a scalar: ${source}`);
      const text = String(key.value);
      if (seen.has(text)) return invalid();
      seen.add(text);
      pending.push({ node: value, depth: depth + 1 });
    }
  }
  return undefined;
}

/**
 * `name` and `description` from the frontmatter text (the opening line included). The YAML is plain data: no
 * aliases, tags, merge keys, duplicate keys or second documents; any other key is ignored and grants nothing.
 */
function parseFrontmatter(frontmatter: string, source: string): { name: string; description: string } {
  const yamlText = frontmatter.replace(/^\uFEFF?---\r?\n/u, "");
  const invalid = (): SkillManifestError => new SkillManifestError(`Skill frontmatter is not valid YAML: ${source}`);
  let data: unknown;
  let shapeError: SkillManifestError | undefined;
  try {
    const document = parseDocument(yamlText, {
      version: "1.2",
      schema: "core",
      merge: false,
      // yaml's own duplicate-key check compares every key with every earlier one; frontmatterShapeError is linear.
      uniqueKeys: false,
      logLevel: "error",
      prettyErrors: false,
    });
    if (document.errors.length > 0 || document.warnings.length > 0) throw invalid();
    // Checked before anything is turned into JavaScript, let alone text.
    shapeError = frontmatterShapeError(document, source, invalid);
    if (shapeError === undefined) data = document.toJS({ maxAliasCount: 0 });
  } catch {
    throw invalid();
  }
  if (shapeError !== undefined) throw shapeError;
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    throw new SkillManifestError(`Skill frontmatter must be a mapping: ${source}`);
  }
  const fields = data as Record<string, unknown>;
  const name = Object.hasOwn(fields, "name") ? fields.name : undefined;
  const rawDescription = Object.hasOwn(fields, "description") ? fields.description : undefined;
  if (typeof name !== "string" || typeof rawDescription !== "string") {
    throw new SkillManifestError(`Skill frontmatter requires string name and description: ${source}`);
  }
  const description = rawDescription.trim();
  if (description === "" || CONTROL_OR_SURROGATE.test(description) || hasHiddenCharacters(description)) {
    throw new SkillManifestError(`Skill description must be one non-empty line: ${source}`);
  }
  // Counted in code points, as the 1,024-character limit is stated: a pair of surrogates is one character.
  if (Array.from(description).length > MAX_SKILL_DESCRIPTION_CHARS) {
    throw new SkillManifestError(
      `Skill description is longer than ${MAX_SKILL_DESCRIPTION_CHARS} characters: ${source}`,
    );
  }
  const validName =
    name.length <= MAX_SKILL_NAME_LENGTH && SKILL_NAME_REGEXP.test(name) && !isWindowsReservedComponent(name);
  if (!validName) throw new SkillManifestError(`Skill frontmatter contains an invalid name: ${source}`);
  return { name, description };
}
