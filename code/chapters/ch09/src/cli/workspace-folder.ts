import { realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigurationError } from "../config.js";
import { ArgumentError } from "./args.js";

/**
 * The folder that holds the chapter snapshots' repository: this file is `<root>/code/chapters/chNN/src/cli/…`
 * (or `dist/cli/…`). The book makes the folder npm ran from — usually this one — the default workspace, so it
 * stays allowed; what lies above it also holds everything else on the machine.
 */
const REPOSITORY_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../../../..");

/** Kernel file systems: their files are the agent's own process (`/proc/self/environ` holds the key) and devices. */
const KERNEL_FOLDERS = ["/proc", "/sys", "/dev"];

/**
 * `requested` (relative to `base`) as the workspace, when it is an existing folder a model may be given. Refused
 * as a configuration error: a file system or drive root, the home folder or a folder holding it, a kernel file
 * system, and a folder above the agent's own repository — on each, an unasked `read_file` reaches keys and other
 * projects. Compared by real path, so a link to `/` is refused like `/`.
 */
export function workspaceFolder(
  requested: string | undefined,
  base: string,
  guarded = { home: homedir(), repository: REPOSITORY_ROOT },
): string {
  const folder = resolve(base, requested ?? ".");
  let isFolder: boolean;
  try {
    isFolder = statSync(folder).isDirectory();
  } catch (error) {
    throw unusable(folder, requested ?? folder, (error as NodeJS.ErrnoException).code);
  }
  // The reader did pass --workspace (or ran npm in that folder): say what is wrong with it, not to pass one.
  if (!isFolder) {
    throw new ArgumentError(`workspace ${folder} is not a folder: --workspace names the folder to work in`);
  }
  const why = refusalReason(realpathSync.native(folder), guarded);
  if (why !== undefined) {
    throw new ConfigurationError(
      `workspace ${folder} is ${why}: the model's tools would reach everything in it`,
      "pass --workspace <a project folder>, for example a new folder made for the agent",
    );
  }
  return folder;
}

/** A workspace `stat` could not see: missing (say how to make it, as the reader typed it), or unreadable. */
function unusable(folder: string, typed: string, code: string | undefined): ArgumentError {
  if (code !== "ENOENT") return new ArgumentError(`workspace ${folder} cannot be opened (${code ?? "unknown error"})`);
  return new ArgumentError(
    `workspace ${folder} does not exist: create it first (New-Item -ItemType Directory ${quoted(typed, "''")})`,
    `in bash: mkdir -p ${quoted(typed, "'\\''")}`,
  );
}

/** `path` in single quotes, each quote inside written as `quote` (PowerShell doubles it, a POSIX shell ends and escapes). */
function quoted(path: string, quote: string): string {
  return `'${path.replaceAll("'", quote)}'`;
}

function refusalReason(real: string, guarded: { home: string; repository: string }): string | undefined {
  if (dirname(real) === real) return "a file system or drive root";
  if (KERNEL_FOLDERS.some((kernel) => isWithin(real, kernel))) return "a kernel file system";
  const home = realOrSelf(guarded.home);
  if (real === home) return "the home folder";
  if (isWithin(home, real)) return "a folder holding the home folder";
  const repository = realOrSelf(guarded.repository);
  if (repository !== real && isWithin(repository, real)) return "a folder holding the agent's own repository";
  return undefined;
}

/** Whether `path` is `folder` or inside it (both real, absolute paths). */
function isWithin(path: string, folder: string): boolean {
  const from = relative(folder, path);
  // On Windows a path on another drive comes back absolute.
  return !isAbsolute(from) && from.split(sep)[0] !== "..";
}

function realOrSelf(path: string): string {
  try {
    return realpathSync.native(path);
  } catch {
    return path;
  }
}
