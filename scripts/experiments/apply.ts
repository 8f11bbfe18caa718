// Applies an experiment's edits (guide.ts) to file texts: each hunk's expected lines must occur exactly once, as
// whole lines, in the text the previous hunks left; anything else is a guide that no longer matches the code.
import { readFileSync } from "node:fs";
import { join } from "node:path";
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
