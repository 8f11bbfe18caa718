import { lstatSync, realpathSync } from "node:fs";
import { dirname, join, sep } from "node:path";
import fg from "fast-glob";
import { resolveInWorkspace, type PathProbe } from "../core/safe-path.js";
import {
  FileTooLargeError,
  MAX_GLOB_PATTERN_CHARS,
  NotAFileError,
  WorkspacePathError,
  type GlobResult,
  type ReadPage,
  type WorkspaceFileSystem,
} from "../core/workspace-fs.js";
import type { WorkspaceWriteBoundary } from "../core/permissions.js";
import { openConfined } from "./confined-open.js";
import { readLinePage } from "./line-reader.js";
import { makeRealFolders } from "./real-folders.js";

const nodeProbe: PathProbe = {
  separator: sep === "\\" ? "\\" : "/",
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

/** SPEC §8 on this machine's disk: the absolute path inside `workspace` that `relative` names. */
export function safePath(workspace: string, relative: string): string {
  return resolveInWorkspace(workspace, relative, nodeProbe);
}

// `..` as a whole component, also inside braces or extglobs: `{..,a}/x` would climb out too.
const CLIMBING = /(^|[\\/{,(|@!+*?])\.\.($|[\\/},)|])/;

/** `WorkspaceFileSystem` on Node's `fs`, confined to one workspace folder (a real path). */
export class NodeWorkspaceFileSystem implements WorkspaceFileSystem, WorkspaceWriteBoundary {
  constructor(readonly workspace: string) {}

  resolve(relative: string): string {
    return safePath(this.workspace, relative);
  }

  /** The policy's hard boundary: `false` for a path that leaves the workspace; throws for one it cannot judge. */
  isInsideWorkspace(relative: string): boolean {
    try {
      this.resolve(relative);
      return true;
    } catch (error) {
      if (error instanceof WorkspacePathError && error.problem === "escape") return false;
      throw error;
    }
  }

  async readText(path: string, page: { offset: number; limit: number }): Promise<ReadPage> {
    const { handle } = await openConfined(this.workspace, this.resolve(path), path, "read");
    try {
      return await readLinePage(handle, page.offset, page.limit);
    } finally {
      await handle.close();
    }
  }

  async readWhole(path: string, maxBytes: number): Promise<string> {
    const { handle } = await openConfined(this.workspace, this.resolve(path), path, "read");
    try {
      const { size } = await handle.stat();
      if (size > maxBytes) throw new FileTooLargeError(`${path} is ${size} bytes; the limit is ${maxBytes}`);
      return await handle.readFile("utf8");
    } finally {
      await handle.close();
    }
  }

  async writeText(path: string, content: string): Promise<{ readonly created: boolean }> {
    const target = this.resolve(path);
    try {
      // Level by level, refusing links: a folder swapped for a link since the check cannot take the new folders out.
      makeRealFolders(this.workspace, dirname(target));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== undefined && code !== "EEXIST" && code !== "ENOTDIR") throw error;
      // A link where a folder was checked means the path now leads elsewhere: resolving again says where.
      this.resolve(path);
      throw new NotAFileError(`a parent folder of ${path} is a file or a link`);
    }
    // Resolve again now that the folders exist, then let the open prove where the file really is.
    const { handle, created } = await openConfined(this.workspace, this.resolve(path), path, "write");
    try {
      await handle.truncate(0);
      await handle.writeFile(content, "utf8");
    } finally {
      await handle.close();
    }
    return { created };
  }

  async glob(pattern: string, limit: number): Promise<GlobResult> {
    if (pattern.length > MAX_GLOB_PATTERN_CHARS) {
      throw new WorkspacePathError("invalid", `glob patterns are limited to ${MAX_GLOB_PATTERN_CHARS} characters`);
    }
    if (/^[\\/]/.test(pattern) || /^[A-Za-z]:/.test(pattern) || CLIMBING.test(pattern)) {
      throw new WorkspacePathError(
        "escape",
        `glob patterns must stay inside the workspace: ${JSON.stringify(pattern)}`,
      );
    }
    // Only *, **, ? and [...] (SPEC §6): brace and extglob expansion can blow up, and braces could climb out.
    const stream = fg.stream(pattern, {
      cwd: this.workspace,
      followSymbolicLinks: false,
      onlyFiles: true,
      suppressErrors: true,
      braceExpansion: false,
      extglob: false,
    });
    const paths: string[] = [];
    const linkFree = new Map<string, boolean>();
    let capped = false;
    for await (const entry of stream) {
      const path = String(entry);
      // Defence in depth: the pattern check above should make these impossible.
      if (path.startsWith("/") || path.split("/").includes("..")) continue;
      // fast-glob only stops `**` at links; a pattern that names a linked folder (`link/*`) still enters it.
      if (!this.isLinkFreeFolder(dirname(path), linkFree)) continue;
      if (paths.length === limit) {
        capped = true;
        break;
      }
      paths.push(path);
    }
    return { paths: paths.sort(), capped };
  }

  /** Whether a workspace-relative folder is reached without passing through any symlink or junction. */
  private isLinkFreeFolder(folder: string, cache: Map<string, boolean>): boolean {
    if (folder === ".") return true;
    let answer = cache.get(folder);
    if (answer === undefined) {
      const lexical = join(this.workspace, folder);
      try {
        answer = realpathSync.native(lexical) === lexical;
      } catch {
        answer = false;
      }
      cache.set(folder, answer);
    }
    return answer;
  }
}
