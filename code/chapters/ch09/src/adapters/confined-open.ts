import { closeSync, constants, fstatSync, openSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { open, readlink, unlink, type FileHandle } from "node:fs/promises";
import { sep } from "node:path";
import { FileNotFoundError, FileSystemOperationError, InvalidFilePathError } from "../core/filesystem.js";
import { escapes, isInside, shownPath } from "../core/safe-path.js";

// POSIX-only flags are 0 where they do not exist (Windows), where the checks below are the defence.
const flag = (name: "O_NOFOLLOW" | "O_NONBLOCK"): number => (constants as Partial<Record<string, number>>)[name] ?? 0;
// Never follow a final-component link; never block on a FIFO someone put in the file's place.
const SAFE = flag("O_NOFOLLOW") | flag("O_NONBLOCK");

export interface ConfinedFile {
  readonly handle: FileHandle;
  /** The file did not exist before this open. */
  readonly created: boolean;
}

/**
 * Opens `target`, a path already resolved inside `workspace`, and then proves that what was
 * opened is a regular file inside the workspace with no other name. The path check and the open are
 * two steps, and another process could swap a folder for a link, or the file for a hard link, in
 * between; checking the opened file closes that. `path` is the model's own spelling, for messages.
 */
export async function openConfined(
  workspace: string,
  target: string,
  path: string,
  mode: "read" | "write",
): Promise<ConfinedFile> {
  const { handle, created } = await openOrCreate(target, path, mode);
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw notAFile(path, info);
    const where = await openedPath(handle, target, info);
    // Moved outside between the check and the open, or reachable by another name as well, maybe outside:
    // for the model, that path escapes the workspace.
    if (where === undefined || !isInside(workspace, where, sep) || hasOtherNames(info)) {
      if (created && where !== undefined) await unlink(where).catch(() => undefined);
      throw escapes(path);
    }
    return { handle, created };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/**
 * `openConfined` for reading, for a caller that must not wait (chapter 7's synchronous Skill scan): the same open
 * flags and the same checks on the opened file. Returns the file descriptor; the caller closes it.
 */
export function openConfinedSync(workspace: string, target: string, path: string): number {
  let fd: number;
  try {
    fd = openSync(target, constants.O_RDONLY | SAFE);
  } catch (error) {
    throw platformError(error, path);
  }
  try {
    const info = fstatSync(fd);
    if (!info.isFile()) throw notAFile(path, info);
    let where: string | undefined;
    try {
      where = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      where = sameFileAt(target, info);
    }
    if (where === undefined || !isInside(workspace, where, sep) || hasOtherNames(info)) throw escapes(path);
    return fd;
  } catch (error) {
    closeSync(fd);
    throw error;
  }
}

/**
 * For a write, O_EXCL first: then the open itself says whether it created the file, so a file that
 * was already there (inside or, after a swap, outside) is never taken for ours and removed.
 */
async function openOrCreate(target: string, path: string, mode: "read" | "write"): Promise<ConfinedFile> {
  const attempt = (flags: number) =>
    open(target, flags | SAFE, 0o666).catch((error: unknown) => {
      throw platformError(error, path);
    });
  if (mode === "read") return { handle: await attempt(constants.O_RDONLY), created: false };
  try {
    return { handle: await attempt(constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL), created: true };
  } catch (error) {
    if (!(error instanceof FileExistsError)) throw error;
    return { handle: await attempt(constants.O_WRONLY), created: false };
  }
}

/** Where the open file really is: Linux says so in /proc; elsewhere the path must still lead to it. */
async function openedPath(
  handle: FileHandle,
  target: string,
  opened: { dev: number; ino: number },
): Promise<string | undefined> {
  const fromProc = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
  return fromProc ?? sameFileAt(target, opened);
}

/** Without /proc: the real path of `target` when it still leads to the opened file, else `undefined`. */
function sameFileAt(target: string, opened: { dev: number; ino: number }): string | undefined {
  try {
    const real = realpathSync.native(target);
    const now = statSync(real);
    return now.dev === opened.dev && now.ino === opened.ino ? real : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A regular file with more than one name (hard links): the other name may be outside the workspace, and
 * nothing tells where it is, so reading would send that file's bytes and writing would change them.
 */
export function hasOtherNames(info: { isFile(): boolean; nlink: number }): boolean {
  return info.isFile() && info.nlink > 1;
}

/** Internal: the O_EXCL attempt found a file; never reaches a tool result. */
class FileExistsError extends Error {}

function notAFile(path: string, info: { isDirectory(): boolean }): InvalidFilePathError {
  return new InvalidFilePathError(
    info.isDirectory() ? `Path is a directory: ${shownPath(path)}` : `Path is not a regular file: ${shownPath(path)}`,
  );
}

/** Platform errors become the domain's: the model gets a stable code, not an errno. Unknown ones stay as they are. */
export function platformError(error: unknown, path: string): Error {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ENOTDIR") return new FileNotFoundError(`File not found: ${shownPath(path)}`);
  if (code === "EISDIR") return new InvalidFilePathError(`Path is a directory: ${shownPath(path)}`);
  if (code === "ENXIO") return new InvalidFilePathError(`Path is not a regular file: ${shownPath(path)}`);
  // O_NOFOLLOW met a link in the last component after the check: it leads elsewhere, so it escapes.
  if (code === "ELOOP") return escapes(path);
  // Longer than this system opens (macOS allows 1,024 bytes, fewer than the path rules): no place the workspace can hold.
  if (code === "ENAMETOOLONG") return escapes(path);
  if (code === "EEXIST") return new FileExistsError(path);
  if (code === "EACCES" || code === "EPERM") return new FileSystemOperationError("the operating system refused access");
  if (code === "ENOSPC") return new FileSystemOperationError("the disk is full");
  if (code === "EROFS") return new FileSystemOperationError("the file system is read-only");
  return error instanceof Error ? error : new Error(String(error));
}
