import { chmodSync, constants, fchmodSync, fsyncSync, lstatSync, readlinkSync, type BigIntStats } from "node:fs";
import { open, rename, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { FileNotFoundError } from "../core/filesystem.js";
import { openConfined } from "./confined-open.js";
import { folderAccess, type Folder, type FolderAccess } from "./folder-handles.js";

/**
 * One folder directly in the workspace (chapter 9's `.memory`), opened without following a link and held open while
 * it is used: every file in it is reached through it (`/proc/self/fd/<fd>/<name>` on Linux), so a folder swapped for
 * a link after it was opened sends no byte elsewhere. Reads are bounded and refuse what `read_file` refuses (a link,
 * a FIFO, a file with a second name); new files are made with O_EXCL, never through a link.
 */
export interface HeldFolder {
  /** Its real path when it was opened. */
  readonly path: string;
  /** Whether this call made it. */
  readonly made: boolean;
  /** How `name` in it is reached: through the open folder on Linux, by its checked path elsewhere. */
  entry(name: string): string;
  /** Throws unless it is still the folder that was opened, at the same real path, inside the workspace. */
  confirm(): void;
  /** At most `limit` bytes of `name`; undefined when there is no such file. */
  read(name: string, limit: number): Promise<Buffer | undefined>;
  /** `name`, new (EEXIST when anything is there, a link included), holding `bytes`, synced, mode 0o600. */
  createNew(name: string, bytes: Buffer): Promise<void>;
  /** Replaces `to` by `from`, both names in this folder. */
  rename(from: string, to: string): Promise<void>;
  /** Removes `name`; true when it is gone afterwards. */
  remove(name: string): Promise<boolean>;
  /** Best effort: the folder's entries on disk, so a renamed name survives a crash. */
  sync(): void;
  /**
   * Best effort, for a write that failed: removes the folder if this call made it, it is still that very folder, and
   * it is empty (FolderAccess.removeMade, so nothing where folders are reached by name). Never anything in it.
   */
  removeMade(): void;
  close(): void;
}

/** What stood at the name instead of a folder inside the workspace. */
export type NoFolder = "missing" | "link" | "not-a-folder" | "outside";

const NO_FOLLOW = (constants as Partial<Record<string, number>>).O_NOFOLLOW ?? 0;
const WRITE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NO_FOLLOW;

/**
 * `name` in the workspace folder `workspace` (a real path), opened as a held folder; made first, mode 0o700, when
 * `create` is true and nothing is there. A link there (even to a folder inside) is "link", never followed.
 */
export function openHeldFolder(
  workspace: string,
  name: string,
  create: boolean,
  access: FolderAccess = folderAccess(),
): HeldFolder | NoFolder {
  const root = access.openWorkspace(workspace);
  try {
    let found = access.openSubfolder(root, name);
    let made = false;
    if (found === "missing" && create) {
      made = access.makeSubfolder(root, name);
      found = access.openSubfolder(root, name);
    }
    if (typeof found === "string") return found;
    if (!found.inside) {
      access.close(found);
      return "outside";
    }
    if (made) chmodQuietly(found);
    return held(access, found, name, made);
  } finally {
    access.close(root);
  }
}

function held(access: FolderAccess, folder: Folder, folderName: string, made: boolean): HeldFolder {
  const entry = (name: string): string =>
    folder.fd === undefined ? join(folder.path, name) : `/proc/self/fd/${folder.fd}/${name}`;
  const confirm = (): void => {
    access.confirm(folder);
    // Still inside is not enough: a renamed folder is not the one the names were checked for.
    if (folder.fd !== undefined && readlinkSync(`/proc/self/fd/${folder.fd}`) !== folder.path) {
      throw new Error("the folder was renamed");
    }
  };
  return {
    path: folder.path,
    made,
    entry,
    confirm,
    async read(name, limit) {
      confirm();
      let file: FileHandle;
      try {
        ({ handle: file } = await openConfined(folder.path, entry(name), name, "read"));
      } catch (error) {
        if (error instanceof FileNotFoundError) return undefined;
        throw error;
      }
      try {
        return await readAtMost(file, limit);
      } finally {
        await file.close();
      }
    },
    async createNew(name, bytes) {
      confirm();
      const path = entry(name);
      const file = await open(path, WRITE_NEW, 0o600);
      let opened: BigIntStats | undefined;
      try {
        try {
          opened = await file.stat({ bigint: true });
          // Reached by name (macOS, Windows): the folder must still be the one checked, and the file the one made.
          confirm();
          if (!sameFile(lstatSync(path, { bigint: true, throwIfNoEntry: false }), opened)) {
            throw new Error("the file was replaced while it was written");
          }
          await file.writeFile(bytes);
          await file.sync();
        } finally {
          await file.close();
        }
      } catch (error) {
        if (opened === undefined || sameFile(lstatSync(path, { bigint: true, throwIfNoEntry: false }), opened)) {
          await unlink(path).catch(() => undefined);
        }
        throw error;
      }
    },
    async rename(from, to) {
      confirm();
      await rename(entry(from), entry(to));
    },
    async remove(name) {
      try {
        await unlink(entry(name));
        return true;
      } catch (error) {
        return (error as NodeJS.ErrnoException).code === "ENOENT";
      }
    },
    sync() {
      if (folder.fd === undefined) return;
      try {
        fsyncSync(folder.fd);
      } catch {
        // Some file systems cannot sync a folder; each file was synced before its name was published.
      }
    },
    removeMade() {
      if (!made) return;
      try {
        const root = access.openWorkspace(folder.root);
        try {
          access.removeMade(root, folderName, folder);
        } finally {
          access.close(root);
        }
      } catch {
        // The workspace itself is gone or moved: nothing there is ours to remove.
      }
    },
    close: () => access.close(folder),
  };
}

/** Up to `limit` bytes from the start: a larger file (a sparse 10 GB one too) is never read whole. */
async function readAtMost(file: FileHandle, limit: number): Promise<Buffer> {
  const buffer = Buffer.alloc(limit);
  let filled = 0;
  while (filled < limit) {
    const { bytesRead } = await file.read(buffer, filled, limit - filled, filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return buffer.subarray(0, filled);
}

function chmodQuietly(folder: Folder): void {
  try {
    if (folder.fd === undefined) chmodSync(folder.path, 0o700);
    else fchmodSync(folder.fd, 0o700);
  } catch {
    // Windows has no such mode; the folder is still the user's own.
  }
}

function sameFile(a: BigIntStats | undefined, b: BigIntStats): boolean {
  return a !== undefined && a.dev === b.dev && a.ino === b.ino;
}
