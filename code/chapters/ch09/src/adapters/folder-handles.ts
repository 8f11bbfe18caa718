import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readlinkSync,
  realpathSync,
  rmdirSync,
  statSync,
  type BigIntStats,
  type Dirent,
} from "node:fs";
import { readdir } from "node:fs/promises";
import { join, sep } from "node:path";
import { isInside } from "../core/safe-path.js";

/**
 * A folder this call checked, opened or made is not where it was: moved out of the workspace, removed, or swapped
 * for a link. For the model the path escapes the workspace. The ELOOP code makes `platformError` say so, as it does
 * when O_NOFOLLOW meets a link.
 */
export class FolderMovedError extends Error {
  readonly code = "ELOOP";
}

/** A folder opened without following a link, and where it was found to be when it was opened. */
export interface Folder {
  readonly root: string;
  /** Its real path when it was opened. */
  readonly path: string;
  readonly dev: bigint;
  readonly ino: bigint;
  /** Whether that path is inside `root`: a folder found outside is never read or made into. */
  readonly inside: boolean;
  /** The open descriptor where folders are reached through /proc/self/fd; undefined where they are reached by name. */
  readonly fd: number | undefined;
}

/** `name` in a folder: a folder, nothing, a link (or junction), or something else (a file, a FIFO …). */
export type Subfolder = Folder | "missing" | "link" | "not-a-folder";

/**
 * Folders reached from the workspace folder one name at a time, never through a link. On Linux each one is an open
 * descriptor, and `/proc/self/fd/<fd>/<name>` names what is in it as `openat` would: the kernel starts from the open
 * folder, not from a path, so a folder renamed or swapped for a link after it was opened cannot send a read or a
 * mkdir elsewhere. Where there is no /proc (macOS, Windows) folders are reached by name and confirmed by device and
 * inode before and after each use: a swap that is undone between two of those checks is not seen.
 */
export interface FolderAccess {
  /** The workspace folder; FolderMovedError when `root` (a real path) no longer names a folder. */
  openWorkspace(root: string): Folder;
  /**
   * `name` in `parent`, opened without following a link. With `locate` false (a folder only to be listed) where it
   * is found is left to `list`, which confirms it after reading anyway: `inside` then says nothing yet.
   */
  openSubfolder(parent: Folder, name: string, locate?: boolean): Subfolder;
  /**
   * Its entries; FolderMovedError when it is no longer where it was opened, before or after reading. The folder
   * must not be closed before this has settled: its descriptor number could be someone else's by then.
   */
  list(folder: Folder): Promise<Dirent[]>;
  /** FolderMovedError when it was removed or left the workspace since it was opened. */
  confirm(folder: Folder): void;
  /** Makes `name` in `parent`: true when this call made it, false when something was already there. */
  makeSubfolder(parent: Folder, name: string): boolean;
  /** Removes `made` (named `name` in `parent`, made by this call) if it is still that very folder; else nothing. */
  removeMade(parent: Folder, name: string, made: Folder): void;
  close(folder: Folder): void;
}

const flag = (name: "O_DIRECTORY" | "O_NOFOLLOW"): number => (constants as Partial<Record<string, number>>)[name] ?? 0;
const OPEN_FOLDER = constants.O_RDONLY | flag("O_DIRECTORY") | flag("O_NOFOLLOW");
const code = (error: unknown): string | undefined => (error as NodeJS.ErrnoException).code;
const proc = (fd: number | undefined, name?: string): string =>
  name === undefined ? `/proc/self/fd/${String(fd)}` : `/proc/self/fd/${String(fd)}/${name}`;

function moved(path: string): FolderMovedError {
  return new FolderMovedError(`${path} is no longer the folder that was checked`);
}

/** Linux: folders as open descriptors, everything below them reached through /proc/self/fd. */
export const viaDescriptors: FolderAccess = {
  openWorkspace(root) {
    let fd: number;
    try {
      fd = openSync(root, OPEN_FOLDER);
    } catch (error) {
      throw ["ENOENT", "ENOTDIR", "ELOOP"].includes(code(error) ?? "") ? moved(root) : error;
    }
    const folder = located(root, fd);
    if (folder.path !== root) {
      closeSync(fd);
      throw moved(root);
    }
    return folder;
  },
  openSubfolder(parent, name, locate = true) {
    let fd: number;
    try {
      fd = openSync(proc(parent.fd, name), OPEN_FOLDER);
    } catch (error) {
      if (code(error) === "ENOENT") return "missing";
      if (code(error) === "ELOOP") return "link";
      // Linux answers ENOTDIR for a link under O_DIRECTORY | O_NOFOLLOW too: ask the entry itself (lstat).
      if (code(error) !== "ENOTDIR") throw error;
      return kindOf(proc(parent.fd, name));
    }
    if (!locate) return { root: parent.root, path: join(parent.path, name), dev: 0n, ino: 0n, inside: true, fd };
    return located(parent.root, fd);
  },
  async list(folder) {
    const entries = await readdir(proc(folder.fd), { withFileTypes: true });
    // Moved out since it was opened or while it was read: the names read may be outside names by now.
    confirmPlace(folder);
    return entries;
  },
  confirm: (folder) => confirmPlace(folder),
  makeSubfolder(parent, name) {
    try {
      mkdirSync(proc(parent.fd, name));
      return true;
    } catch (error) {
      if (code(error) === "EEXIST") return false;
      // The parent itself was removed after it was opened.
      if (code(error) === "ENOENT") throw moved(join(parent.path, name));
      throw error;
    }
  },
  removeMade(parent, name, made) {
    try {
      const now = lstatSync(proc(parent.fd, name), { bigint: true });
      if (now.isDirectory() && now.dev === made.dev && now.ino === made.ino) rmdirSync(proc(parent.fd, name));
    } catch {
      // Gone already, or no longer empty: it is not removed, and nothing else is.
    }
  },
  close(folder) {
    if (folder.fd !== undefined) closeSync(folder.fd);
  },
};

function located(root: string, fd: number): Folder {
  try {
    const path = readlinkSync(proc(fd));
    const info = fstatSync(fd, { bigint: true });
    // nlink 0: removed since it was opened (the kernel then shows the path with " (deleted)").
    const inside = info.isDirectory() && info.nlink > 0n && isInside(root, path, sep);
    return { root, path, dev: info.dev, ino: info.ino, inside, fd };
  } catch (error) {
    closeSync(fd);
    throw error;
  }
}

function confirmPlace(folder: Folder): void {
  const path = readlinkSync(proc(folder.fd));
  if (!isInside(folder.root, path, sep) || fstatSync(folder.fd as number).nlink === 0) throw moved(folder.path);
}

function kindOf(path: string): "missing" | "link" | "not-a-folder" {
  try {
    return lstatSync(path).isSymbolicLink() ? "link" : "not-a-folder";
  } catch {
    return "missing";
  }
}

/** Elsewhere: folders by name, each use checked against the device and inode the folder had when it was opened. */
export const byName: FolderAccess = {
  openWorkspace(root) {
    const info = identity(root);
    if (info === undefined || !info.isDirectory() || info.isSymbolicLink() || realOrNothing(root) !== root) {
      throw moved(root);
    }
    return { root, path: root, dev: info.dev, ino: info.ino, inside: true, fd: undefined };
  },
  openSubfolder(parent, name) {
    confirmSame(parent);
    const path = join(parent.path, name);
    const info = identity(path);
    if (info === undefined) return "missing";
    if (info.isSymbolicLink()) return "link";
    if (!info.isDirectory()) return "not-a-folder";
    // The real path follows every link on the way: a parent swapped since it was confirmed shows here.
    let real: string;
    let now: BigIntStats;
    try {
      real = realpathSync.native(path);
      now = statSync(real, { bigint: true });
    } catch (error) {
      if (code(error) === "ENOENT" || code(error) === "ENOTDIR") return "missing";
      throw error;
    }
    const same = now.dev === info.dev && now.ino === info.ino;
    return {
      root: parent.root,
      path: real,
      dev: info.dev,
      ino: info.ino,
      inside: same && isInside(parent.root, real, sep),
      fd: undefined,
    };
  },
  async list(folder) {
    confirmSame(folder);
    const entries = await readdir(folder.path, { withFileTypes: true });
    confirmSame(folder);
    return entries;
  },
  confirm: (folder) => confirmSame(folder),
  makeSubfolder(parent, name) {
    confirmSame(parent);
    let made = true;
    try {
      mkdirSync(join(parent.path, name));
    } catch (error) {
      if (code(error) === "ENOENT") throw moved(parent.path);
      if (code(error) !== "EEXIST") throw error;
      made = false;
    }
    // A swap between the check and the mkdir may have put the new folder elsewhere. Without a descriptor it cannot
    // be told apart from a folder of the same name that was there before, so it is reported, never removed.
    confirmSame(parent);
    return made;
  },
  removeMade() {
    // Only a name is held here, and a name may lead elsewhere by now: nothing is removed.
  },
  close() {
    // Nothing is held open.
  },
};

function identity(path: string): BigIntStats | undefined {
  try {
    return lstatSync(path, { bigint: true });
  } catch (error) {
    if (code(error) === "ENOENT" || code(error) === "ENOTDIR") return undefined;
    throw error;
  }
}

/** Still the same folder at the same real path, with no link on the way to it. */
function confirmSame(folder: Folder): void {
  const now = identity(folder.path);
  const same = now !== undefined && now.isDirectory() && now.dev === folder.dev && now.ino === folder.ino;
  if (!same || realOrNothing(folder.path) !== folder.path) throw moved(folder.path);
}

function realOrNothing(path: string): string | undefined {
  try {
    return realpathSync.native(path);
  } catch (error) {
    if (code(error) === "ENOENT" || code(error) === "ENOTDIR") return undefined;
    throw error;
  }
}

let chosen: FolderAccess | undefined;

/** Descriptors through /proc/self/fd where the kernel offers them (Linux), names elsewhere. */
export function folderAccess(): FolderAccess {
  chosen ??= descriptorsWork() ? viaDescriptors : byName;
  return chosen;
}

function descriptorsWork(): boolean {
  if (process.platform !== "linux") return false;
  let fd: number | undefined;
  try {
    fd = openSync("/", OPEN_FOLDER);
    const through = statSync(proc(fd, "."), { bigint: true });
    const opened = fstatSync(fd, { bigint: true });
    return readlinkSync(proc(fd)) === "/" && through.dev === opened.dev && through.ino === opened.ino;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
