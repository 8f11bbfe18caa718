// Applies an experiment's edits (guide.ts) to file texts: each hunk's expected lines must occur exactly once, as
// whole lines, in the text the previous hunks left; anything else is a guide that no longer matches the code.
// `gitApply` gives the same blocks to `git apply`, as a reader would, on a scratch copy of the files they touch.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { FileEdit, Hunk } from "./guide.js";

/** Reads a file below `root` by its repository-relative path; `undefined` when there is none to read. */
export function fileReader(root: string): (path: string) => string | undefined {
  return (path) => {
    try {
      return readFileSync(join(root, path), "utf8");
    } catch {
      return undefined;
    }
  };
}

/** Where `hunk` applies in `text`, or why it does not: it must match whole lines, exactly once. */
function place(text: string, hunk: Hunk): { at: number; length: number } | string {
  const lines = text.split("\n");
  const width = hunk.before.length;
  const found: number[] = [];
  for (let start = 0; start + width <= lines.length; start += 1) {
    if (hunk.before.every((line, offset) => lines[start + offset] === line)) found.push(start);
  }
  if (found.length !== 1) {
    const first = JSON.stringify(hunk.before.find((line) => line.trim() !== "") ?? hunk.before[0]);
    return found.length === 0
      ? `the lines starting ${first} are not in the file`
      : `the lines starting ${first} are in the file ${found.length} times`;
  }
  const at = found[0] as number;
  return { at, length: width };
}

/** The texts after `edits`, by path, or the first reason they do not apply. `read` gives a file's current text. */
export function applyEdits(
  edits: readonly FileEdit[],
  read: (path: string) => string | undefined,
): { files: Map<string, string> } | { problem: string } {
  const files = new Map<string, string>();
  for (const edit of edits) {
    let text: string | undefined = files.get(edit.path) ?? read(edit.path);
    if (text === undefined) return { problem: `${edit.path} does not exist` };
    for (const [index, hunk] of edit.hunks.entries()) {
      const where = place(text, hunk);
      if (typeof where === "string") return { problem: `hunk ${index + 1} of ${edit.path}: ${where}` };
      const lines: string[] = text.split("\n");
      lines.splice(where.at, where.length, ...hunk.after);
      text = lines.join("\n");
    }
    files.set(edit.path, text);
  }
  return { files };
}

/** The `--- a/<path>` files a patch touches. */
function patchedPaths(patch: string): string[] {
  return [...patch.matchAll(/^--- a\/(\S+)$/gm)].map((match) => match[1] as string);
}

/**
 * The texts after `git apply` of `patches`, one after another, on a scratch copy of the files they touch (read by
 * `read`), by path; or git's first complaint. The copy is outside any repository, so git applies it as a plain patch.
 */
export function gitApply(
  patches: readonly string[],
  read: (path: string) => string | undefined,
): { files: Map<string, string> } | { problem: string } {
  const paths = [...new Set(patches.flatMap(patchedPaths))];
  const folder = mkdtempSync(join(tmpdir(), "agent-git-apply-"));
  try {
    for (const path of paths) {
      const text = read(path);
      if (text === undefined) return { problem: `${path} does not exist` };
      mkdirSync(dirname(join(folder, path)), { recursive: true });
      writeFileSync(join(folder, path), text);
    }
    for (const [index, patch] of patches.entries()) {
      const run = spawnSync("git", ["apply", "--whitespace=nowarn", "-"], {
        cwd: folder,
        input: patch,
        encoding: "utf8",
        env: { ...process.env, GIT_CEILING_DIRECTORIES: dirname(folder) },
      });
      if (run.status !== 0) {
        const said = (run.stderr || run.error?.message || `exit ${run.status ?? "?"}`).trim().split("\n")[0] ?? "";
        return { problem: `git apply refuses diff block ${index + 1}: ${said.split(folder).join(".")}` };
      }
    }
    return { files: new Map(paths.map((path) => [path, readFileSync(join(folder, path), "utf8")])) };
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}
