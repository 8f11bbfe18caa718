import { constants, lstatSync, realpathSync } from "node:fs";
import { lstat, mkdir, open, readFile, stat } from "node:fs/promises";
import { dirname, join, sep } from "node:path";
import fg from "fast-glob";
import { resolveInWorkspace, type PathProbe } from "../core/safe-path.js";
import {
  FileNotFoundError,
  FileTooLargeError,
  NotAFileError,
  WorkspacePathError,
  type GlobResult,
  type ReadPage,
  type WorkspaceFileSystem,
} from "../core/workspace-fs.js";
import { readLinePage } from "./line-reader.js";

const nodeProbe: PathProbe = {
  separator: sep === "\\" ? "\\" : "/",
  kind(path) {
    try {
      return lstatSync(path).isSymbolicLink() ? "link" : "other";
    } catch {
      return "missing";
    }
  },
  realpath: (path) => realpathSync.native(path),
};

/** SPEC §8 on this machine's disk: the absolute path inside `workspace` that `relative` names. */
export function safePath(workspace: string, relative: string): string {
  return resolveInWorkspace(workspace, relative, nodeProbe);
}

// `..` as a whole component, also inside braces or extglobs: `{..,a}/x` would climb out too.
const CLIMBING = /(^|[\\/{,(|@!+*?])\.\.($|[\\/},)|])/;
// O_NOFOLLOW is POSIX-only; on Windows the re-check before the open is the defence.
const NO_FOLLOW = (constants as { O_NOFOLLOW?: number }).O_NOFOLLOW ?? 0;

/** `WorkspaceFileSystem` on Node's `fs`, confined to one workspace folder (a real path). */
export class NodeWorkspaceFileSystem implements WorkspaceFileSystem {
  constructor(readonly workspace: string) {}

  resolve(relative: string): string {
    return safePath(this.workspace, relative);
  }

  async readText(path: string, page: { offset: number; limit: number }): Promise<ReadPage> {
    const file = await this.existingFile(path);
    return readLinePage(file, page.offset, page.limit);
  }

  async readWhole(path: string, maxBytes: number): Promise<string> {
    const file = await this.existingFile(path);
    const { size } = await stat(file);
    if (size > maxBytes) throw new FileTooLargeError(`${path} is ${size} bytes; the limit is ${maxBytes}`);
    return readFile(file, "utf8");
  }

  async writeText(path: string, content: string): Promise<{ readonly created: boolean }> {
    const target = this.resolve(path);
    await mkdir(dirname(target), { recursive: true }).catch((error: unknown) => {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EEXIST" || code === "ENOTDIR") throw new NotAFileError(`a parent folder of ${path} is a file`);
      throw error;
    });
    // Resolve again now that the folders exist: a link swapped in since the first check is caught here,
    // and O_NOFOLLOW refuses a final component that became a link in the last instant.
    if (this.resolve(path) !== target) throw new WorkspacePathError("escape", `${path} changed while it was written`);
    const created = !(await exists(target));
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | NO_FOLLOW;
    const handle = await open(target, flags, 0o666).catch((error: unknown) => {
      throw domainError(error, path);
    });
    try {
      await handle.writeFile(content, "utf8");
    } finally {
      await handle.close();
    }
    return { created };
  }

  async glob(pattern: string, limit: number): Promise<GlobResult> {
    if (/^[\\/]/.test(pattern) || /^[A-Za-z]:/.test(pattern) || CLIMBING.test(pattern)) {
      throw new WorkspacePathError(
        "escape",
        `glob patterns must stay inside the workspace: ${JSON.stringify(pattern)}`,
      );
    }
    const stream = fg.stream(pattern, {
      cwd: this.workspace,
      followSymbolicLinks: false,
      onlyFiles: true,
      suppressErrors: true,
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

  private async existingFile(path: string): Promise<string> {
    const file = this.resolve(path);
    const info = await stat(file).catch((error: unknown) => {
      throw domainError(error, path);
    });
    if (!info.isFile()) throw new NotAFileError(`${path} is not a file`);
    return file;
  }
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

/** Platform errors become the domain's: the model gets a stable code, not an errno. */
function domainError(error: unknown, path: string): Error {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ENOTDIR") return new FileNotFoundError(`${path} does not exist`);
  if (code === "EISDIR") return new NotAFileError(`${path} is a folder, not a file`);
  if (code === "ELOOP") return new WorkspacePathError("escape", `${path} is a link; it will not be followed`);
  return error instanceof Error ? error : new Error(String(error));
}
