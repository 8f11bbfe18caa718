// The check behind the tracer: which of the paths a test touched are snapshot files outside its inputs.
import { statSync } from "node:fs";
import { join, relative, resolve, sep } from "node:path";
import { readCovers } from "./declarations.js";
import { chaptersRoot, isSnapshotPath } from "./fs-recorder.mjs";
import type { TestInputs } from "./plan.js";

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The snapshot paths among `touched` (absolute) that `inputs`, the inputs of `testFile` in `chapter`, do not
 * cover, as repository-relative paths, sorted. Another chapter's file is never covered; a folder is covered by
 * a read of everything below it; no inputs at all (a test file the plan does not know) cover nothing.
 */
export function undeclaredTouches(
  touched: Iterable<string>,
  chapter: string,
  testFile: string,
  inputs: TestInputs | undefined,
  root: string = chaptersRoot,
): string[] {
  const own = join(root, chapter);
  const problems = new Set<string>();
  for (const touchedPath of touched) {
    // vitest names modules with forward slashes on Windows too: compare in the platform's own form.
    const path = resolve(touchedPath);
    if (!isSnapshotPath(path, root)) continue;
    const inside = relative(own, path).split(sep).join("/");
    if (inside === testFile) continue;
    const covered =
      inputs !== undefined &&
      inside !== "" &&
      !inside.startsWith("../") &&
      (inputs.files[inside] !== undefined || readCovers(inputs.reads, inside, isFolder(path)));
    if (!covered)
      problems.add(
        relative(join(root, "..", ".."), path)
          .split(sep)
          .join("/"),
      );
  }
  return [...problems].sort();
}
