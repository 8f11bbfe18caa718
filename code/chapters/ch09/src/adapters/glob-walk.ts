import { lstatSync } from "node:fs";
import { join } from "node:path";
import { folderAccess, FolderMovedError, type Folder, type FolderAccess } from "./folder-handles.js";
import { compileGlob, hasRest, isComplete, startStates, step, type Glob } from "./glob-match.js";

/** How many folders ahead of the one being matched are read at once. */
const READ_AHEAD = 8;

/**
 * The workspace-relative `/` paths of the regular files under `root` (a real path) that `pattern` (with `/`
 * separators) matches, at most `limit` of them, in sorted order: folders are walked in the order their paths sort,
 * so the first `limit` found are the first `limit` there are. `base` is the pattern's fixed folders, which the
 * caller has checked with safePath. Links are never followed, and every folder is read through a handle opened
 * inside the one before it and confirmed inside the workspace after reading, before any of its names is used
 * (folder-handles.ts). A few folders ahead are read at once, as the kernel can list them in parallel.
 * Throws FolderMovedError when a folder of `base` is no longer the plain folder it was a moment ago, or a folder
 * being read left the workspace. A folder reached by a wildcard that is gone or a link by the time it is opened is
 * not entered, as a link seen in the listing is not.
 */
export async function walkGlob(
  root: string,
  pattern: string,
  base: string,
  limit: number,
  access: FolderAccess = folderAccess(),
): Promise<string[]> {
  const glob = compileGlob(pattern);
  const fixed = base.split(/[\\/]/).filter((part) => part !== "" && part !== ".");
  if (glob.segments.length === 0) return [];
  if (fixed.some((name, index) => literalAt(glob, index) !== name)) {
    throw new Error(`${base} is not the fixed start of ${pattern}`);
  }
  // A linked folder named by the pattern is not listed through, wherever it leads (the check let it pass if inside).
  if (!isLinkFreeFolder(root, fixed)) return [];
  const walk = new Walk(glob, access, limit);
  const workspace = unlessRefused(() => access.openWorkspace(root));
  if (workspace === undefined) return [];
  const opened = [workspace];
  try {
    for (const name of fixed) {
      const next = unlessRefused(() => access.openSubfolder(opened.at(-1) as Folder, name));
      if (next === undefined) return [];
      if (typeof next !== "string") opened.push(next);
      if (typeof next === "string" || !next.inside) throw new FolderMovedError(`${base} changed after it was checked`);
    }
    const start = opened.at(-1) as Folder;
    await walk.folder(
      start,
      fixed.map((name) => `${name}/`).join(""),
      startStates(glob, fixed.length),
      walk.list(start),
    );
  } finally {
    for (const folder of opened) access.close(folder);
  }
  return walk.found;
}

function literalAt(glob: Glob, index: number): string | undefined {
  const segment = glob.segments[index];
  return segment?.kind === "name" ? segment.literal : undefined;
}

interface Entry {
  /** A folder's paths sort as `name/…`, so `a.txt` comes before `a/x`: the walk meets paths in sorted order. */
  readonly key: string;
  readonly name: string;
  readonly isFolder: boolean;
}

/** A folder opened ahead of its turn, and its entries being read. */
interface Ahead {
  readonly folder: Folder;
  readonly states: readonly number[];
  readonly entries: Promise<Entry[]>;
}

class Walk {
  readonly found: string[] = [];

  constructor(
    readonly glob: Glob,
    readonly access: FolderAccess,
    readonly limit: number,
  ) {}

  /** The sorted files and folders in `folder` (links and the rest are left out); [] if the system refuses. */
  list(folder: Folder): Promise<Entry[]> {
    const entries = this.access.list(folder).then(
      (dirents) => {
        const kept: Entry[] = [];
        for (const entry of dirents) {
          if (entry.isFile()) kept.push({ key: entry.name, name: entry.name, isFolder: false });
          else if (entry.isDirectory()) kept.push({ key: `${entry.name}/`, name: entry.name, isFolder: true });
        }
        return kept.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      },
      (error: unknown) => {
        if (isRefusal(error)) return [];
        throw error;
      },
    );
    // Awaited later, or only waited for when the walk stops early: never an unhandled rejection meanwhile.
    entries.catch(() => undefined);
    return entries;
  }

  async folder(folder: Folder, prefix: string, states: readonly number[], listed: Promise<Entry[]>): Promise<void> {
    const entries = await listed;
    const ahead = new Map<number, Ahead>();
    let next = 0;
    try {
      for (let index = 0; index < entries.length; index += 1) {
        if (this.found.length >= this.limit) return;
        for (; next < entries.length && ahead.size < READ_AHEAD; next += 1)
          this.#open(folder, states, entries, next, ahead);
        const entry = entries[index] as Entry;
        if (!entry.isFolder) {
          if (isComplete(this.glob, step(this.glob, states, entry.name))) this.found.push(prefix + entry.name);
          continue;
        }
        const child = ahead.get(index);
        if (child === undefined) continue;
        ahead.delete(index);
        try {
          await this.folder(child.folder, `${prefix}${entry.name}/`, child.states, child.entries);
        } finally {
          await child.entries.catch(() => undefined);
          this.access.close(child.folder);
        }
      }
    } finally {
      // Stopped early or failed: each folder read ahead is closed once its read has settled.
      for (const child of ahead.values()) {
        await child.entries.catch(() => undefined);
        this.access.close(child.folder);
      }
    }
  }

  /** Opens entry `index` of `folder` and starts reading it, if it is a folder the pattern may go on into. */
  #open(
    folder: Folder,
    parentStates: readonly number[],
    entries: readonly Entry[],
    index: number,
    ahead: Map<number, Ahead>,
  ): void {
    const entry = entries[index] as Entry;
    if (!entry.isFolder) return;
    const states = step(this.glob, parentStates, entry.name);
    if (!hasRest(this.glob, states)) return;
    // Where it is, is confirmed when it has been read, before any of its names is used.
    const child = unlessRefused(() => this.access.openSubfolder(folder, entry.name, false));
    if (child === undefined) return;
    if (typeof child === "string") {
      // Gone or a link since it was listed: not entered. Unless the folder being read went too.
      this.access.confirm(folder);
      return;
    }
    if (!child.inside) {
      this.access.close(child);
      throw new FolderMovedError(`${entry.name} is outside the workspace now`);
    }
    ahead.set(index, { folder: child, states, entries: this.list(child) });
  }
}

/** A folder the system will not open or read (EACCES, EPERM) is skipped, not an error for the whole glob. */
function isRefusal(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return !(error instanceof FolderMovedError) && (code === "EACCES" || code === "EPERM");
}

function unlessRefused<T>(work: () => T): T | undefined {
  try {
    return work();
  } catch (error) {
    if (!isRefusal(error)) throw error;
    return undefined;
  }
}

/**
 * Whether the workspace-relative folder `names` is reached without passing through any symlink or junction.
 * Each level is asked with lstat (junctions are links to it too), not by comparing real paths: on a
 * case-insensitive disk `Src/a.ts` names `src/a.ts`, and a spelling must not decide.
 */
function isLinkFreeFolder(root: string, names: readonly string[]): boolean {
  let path = root;
  for (const name of names) {
    path = join(path, name);
    try {
      const info = lstatSync(path);
      if (!info.isDirectory() || info.isSymbolicLink()) return false;
    } catch {
      return false;
    }
  }
  return true;
}
