// Test counts keyed by a test file's inputs: a file whose inputs are the same bytes collects the same tests,
// so a count measured once (by npm test, or by verify:guides' own listing) serves verify:guides until one of
// its inputs changes. Kept with the installed packages, where a fresh clone has none.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { TestInputs, TestPlan } from "./plan.js";

/** chapter → test file → number of tests. */
export type GateCounts = ReadonlyMap<string, ReadonlyMap<string, number>>;

const cacheFile = (repo: string): string => join(repo, "node_modules", ".cache", "agent-tutorial", "test-counts.json");

/** The key of one test file's count: its path and every input's hash. */
export function countKey(file: string, inputs: TestInputs): string {
  return createHash("sha256")
    .update(JSON.stringify([file, inputs.files]))
    .digest("hex");
}

export function readCountCache(repo: string): Map<string, number> {
  try {
    return new Map(Object.entries(JSON.parse(readFileSync(cacheFile(repo), "utf8")) as Record<string, number>));
  } catch {
    return new Map();
  }
}

/** Adds the counts of the files `counts` has for each chapter of `plan` to the cache. */
export function writeCountCache(repo: string, plan: TestPlan, counts: GateCounts): void {
  const cache = readCountCache(repo);
  for (const [chapter, files] of counts) {
    for (const [file, count] of files) {
      const inputs = plan.inputs.get(chapter)?.get(file);
      if (inputs !== undefined) cache.set(countKey(file, inputs), count);
    }
  }
  mkdirSync(dirname(cacheFile(repo)), { recursive: true });
  writeFileSync(cacheFile(repo), JSON.stringify(Object.fromEntries(cache)));
}
