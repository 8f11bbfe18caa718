import { lstatSync, realpathSync } from "node:fs";
import { dirname, sep } from "node:path";
import {
  FileSystemOperationError,
  GLOB_RESULT_LIMIT,
  InvalidFilePathError,
  InvalidUtf8Error,
  TextNotFoundError,
  WorkspacePathError,
  type WorkspaceFileSystem,
} from "../core/filesystem.js";
import { escapes, hasUnusableCharacter, resolveInWorkspace, shownPath, type PathProbe } from "../core/safe-path.js";
import { hasOtherNames, openConfined, platformError } from "./confined-open.js";
import { FolderMovedError } from "./folder-handles.js";
import { walkGlob } from "./glob-walk.js";
import { makeRealFolders } from "./real-folders.js";

/** A file larger than this is refused, not read: the whole file is held in memory to decode it strictly. */
export const MAX_FILE_BYTES = 10 * 1024 * 1024;
/** Longer glob patterns are refused: matching time grows with the pattern, and no real one is this long. */
export const MAX_GLOB_PATTERN_CHARS = 1_000;
/** `globFiles` stops one past this, so the tool can say that more exist without holding them all. */
export const MAX_GLOB_RESULTS = GLOB_RESULT_LIMIT;

const nodeProbe: PathProbe = {
  separator: sep,
  realpath: (path) => realpathSync.native(path),
  exists(path) {
    try {
      lstatSync(path);
      return true;
    } catch {
      return false;
    }
  },
};

/**
 * The absolute path inside `workspace` that the model-supplied `relativePath` names, after two
 * checks: the text alone (no `..`, absolute path, device name …), then the disk (every link or
 * junction that exists on the way, the last component included, must stay inside). Throws
 * `WorkspacePathError` and never repairs a path.
 */
export async function safePath(workspace: string, relativePath: string): Promise<string> {
  return Promise.resolve().then(() => resolveInWorkspace(realpathSync.native(workspace), relativePath, nodeProbe));
}

// `..` as a whole component, also inside braces or extglobs: `{..,a}/x` would climb out too.
const CLIMBING = /(^|[\\/{,(|@!+*?])\.\.($|[\\/},)|])/;
const WILDCARD = /[*?[\]{}()!]/;

/** `WorkspaceFileSystem` on Node's `fs`. Every open is checked again after it happens (`openConfined`). */
export class NodeWorkspaceFileSystem implements WorkspaceFileSystem {
  /**
   * The policy's hard boundary: every rule of `safePath` that refuses a path says it is outside, and so
   * does a file that is there already under another name too (a hard link, maybe to outside).
   * Anything else is a failure to judge, and the policy fails closed on it.
   */
  async isPathWithinWorkspace(workspace: string, relativePath: string): Promise<boolean> {
    let target: string;
    try {
      target = await safePath(workspace, relativePath);
    } catch (error) {
      if (error instanceof WorkspacePathError) return false;
      throw error;
    }
    try {
      // safePath followed every link, the last component's too: this is the file a write would open.
      return !hasOtherNames(lstatSync(target));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // Nothing there yet, or a file where a folder is meant: no other name; the write itself says what is wrong.
      if (code === "ENOENT" || code === "ENOTDIR") return true;
      throw error;
    }
  }

  async readFile(workspace: string, relativePath: string, limit?: number): Promise<string> {
    if (limit !== undefined && (!Number.isInteger(limit) || limit <= 0)) {
      throw new RangeError("limit must be a positive integer");
    }
    const text = await this.#readText(workspace, relativePath, false);
    if (limit === undefined) return text;
    const lines = text.split("\n");
    // A final line break ends the last line; it does not start another.
    if (lines.at(-1) === "") lines.pop();
    if (lines.length <= limit) return text;
    return `${lines.slice(0, limit).join("\n")}\n... (${lines.length - limit} more lines)`;
  }

  async writeFile(workspace: string, relativePath: string, content: string): Promise<number> {
    const bytes = Buffer.from(content, "utf8");
    await this.#write(workspace, relativePath, bytes);
    return bytes.byteLength;
  }

  async editFile(workspace: string, relativePath: string, oldText: string, newText: string): Promise<void> {
    // The BOM stays part of the text, so a file is written back with the bytes it had.
    const current = await this.#readText(workspace, relativePath, true);
    const at = current.indexOf(oldText);
    if (at === -1) throw new TextNotFoundError(`Exact text not found in ${shownPath(relativePath)}`);
    // Slices, not String.replace: `$&` and friends in newText stay literal, and the rest is untouched.
    const updated = current.slice(0, at) + newText + current.slice(at + oldText.length);
    await this.#write(workspace, relativePath, Buffer.from(updated, "utf8"));
  }

  async globFiles(workspace: string, pattern: string): Promise<readonly string[]> {
    if (pattern.length > MAX_GLOB_PATTERN_CHARS) {
      throw new FileSystemOperationError(`the pattern is longer than ${MAX_GLOB_PATTERN_CHARS} characters`);
    }
    // The characters no path may hold (NUL, other controls, `|` …) are refused here too, before anything walks.
    const absolute = /^[\\/]/.test(pattern) || /^[A-Za-z]:/.test(pattern);
    if (absolute || CLIMBING.test(pattern) || hasUnusableCharacter(pattern)) throw escapes(pattern);
    const root = realpathSync.native(workspace);
    // The fixed folders before the first wildcard go through safePath: `escape/*.txt` cannot use a link out.
    // `.` and empty parts lead nowhere further; `.` alone names the workspace itself, which safePath refuses.
    const folders = pattern
      .split(/[\\/]/)
      .slice(0, -1)
      .filter((part) => part !== "" && part !== ".");
    const firstWildcard = folders.findIndex((part) => WILDCARD.test(part));
    const prefix = (firstWildcard === -1 ? folders : folders.slice(0, firstWildcard)).join("/");
    if (prefix !== "") {
      await safePath(root, prefix).catch((error: unknown) => {
        throw error instanceof WorkspacePathError ? escapes(pattern) : error;
      });
    }
    // Only *, **, ? and [...], matched in time linear in each name (glob-match.ts): braces and extglobs are
    // plain characters, with nothing to expand. `\` is a separator here as in every other tool (safePath).
    // The walk reads each folder through a handle confirmed inside the workspace and never enters a link.
    const paths = await walkGlob(root, pattern.replaceAll("\\", "/"), prefix, MAX_GLOB_RESULTS + 1).catch(
      (error: unknown) => {
        // A folder of the walk was swapped for a link, removed or moved out while it was read.
        throw error instanceof FolderMovedError ? escapes(pattern) : error;
      },
    );
    return paths.sort();
  }

  /** The whole file, decoded strictly; refused when it is over `MAX_FILE_BYTES`. */
  async #readText(workspace: string, relativePath: string, keepBom: boolean): Promise<string> {
    const root = realpathSync.native(workspace);
    const { handle } = await openConfined(root, await safePath(root, relativePath), relativePath, "read");
    let bytes: Buffer;
    try {
      const { size } = await handle.stat();
      if (size > MAX_FILE_BYTES) {
        throw new FileSystemOperationError(`the file is ${size} bytes; at most ${MAX_FILE_BYTES} are read`);
      }
      // To the end, but never more than one byte past the cap, whatever the size said: a file that grew
      // since is read whole while it fits, and one that grew past the cap is refused, not read on and on.
      let buffer = Buffer.alloc(Math.min(size, MAX_FILE_BYTES) + 1);
      let filled = 0;
      for (let read = -1; read !== 0; filled += read) {
        if (filled === buffer.length) {
          if (filled > MAX_FILE_BYTES) break;
          const larger = Buffer.alloc(Math.min(2 * filled, MAX_FILE_BYTES + 1));
          buffer.copy(larger, 0, 0, filled);
          buffer = larger;
        }
        ({ bytesRead: read } = await handle.read(buffer, filled, buffer.length - filled, filled));
      }
      if (filled > MAX_FILE_BYTES) {
        throw new FileSystemOperationError(`the file grew past ${MAX_FILE_BYTES} bytes while it was read`);
      }
      bytes = buffer.subarray(0, filled);
    } finally {
      await handle.close();
    }
    try {
      return new TextDecoder("utf-8", { fatal: true, ignoreBOM: keepBom }).decode(bytes);
    } catch {
      throw new InvalidUtf8Error(`File is not valid UTF-8: ${shownPath(relativePath)}`);
    }
  }

  async #write(workspace: string, relativePath: string, bytes: Buffer): Promise<void> {
    const root = realpathSync.native(workspace);
    const target = await safePath(root, relativePath);
    // `.` is refused by safePath, but a link to the workspace folder names it too: there is nothing to write to.
    if (target === root) throw new InvalidFilePathError(`Path is a directory: ${shownPath(relativePath)}`);
    try {
      // Level by level, refusing links: a folder swapped for a link since the check cannot take the new folders out.
      makeRealFolders(root, dirname(target));
    } catch (error) {
      // A level that is a file throws with no code (real-folders.ts); a level that is a link now, vanished or is
      // outside throws FolderMovedError (ELOOP, path_escape); any other code is the system's own failure.
      if ((error as NodeJS.ErrnoException).code !== undefined) throw platformError(error, relativePath);
      // A file where a folder was checked may mean the path leads elsewhere now: resolving again says where.
      await safePath(root, relativePath);
      throw new InvalidFilePathError(`A parent of the path is not a directory: ${shownPath(relativePath)}`);
    }
    // Resolve again now that the folders exist, then let the open prove where the file really is.
    const { handle } = await openConfined(root, await safePath(root, relativePath), relativePath, "write");
    try {
      await handle.truncate(0);
      await handle.writeFile(bytes);
    } catch (error) {
      throw platformError(error, relativePath);
    } finally {
      await handle.close();
    }
  }
}
