// The test plan: for each chapter snapshot, in order, which test files must run and which can reuse the result
// of an identical run made earlier in the same `npm test`. A test's inputs are its import closure, the closures
// of the processes it starts, the snapshot files it reads (declarations.ts), the chapter's tsconfig.json and, for each
// package those files import, the version its package.json declares (so a chapter that adds a dependency reruns only
// what imports it); two runs with byte-identical inputs at the same paths are one run.
import { createHash } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { snapshotFiles } from "../verify-snapshots.js";
import { importClosure, packageImports } from "./closure.js";
import { declarationFor, globPattern } from "./declarations.js";

export type PlanAction = "run" | "reuse";

/** One row of the plan, as `npm run -s test:plan -- --json` prints it. */
export interface PlanEntry {
  readonly chapter: string;
  readonly file: string;
  readonly action: PlanAction;
  readonly reusedFrom?: string;
  readonly why: string;
}

/** What one test file's result can depend on in one chapter. */
export interface TestInputs {
  /** Snapshot-relative path → sha256 of its bytes, or `absent` for a path an import names but no file holds. */
  readonly files: Readonly<Record<string, string>>;
  /** The declared read globs, kept so the tracer can accept a listed folder or a probed missing file. */
  readonly reads: readonly string[];
  /** The result depends on the chapter folder's name, so the test is never reused. */
  readonly ownChapter: boolean;
}

export interface TestPlan {
  readonly entries: readonly PlanEntry[];
  /** chapter → test file → its inputs there. */
  readonly inputs: ReadonlyMap<string, ReadonlyMap<string, TestInputs>>;
}

/** The dependency fields of a chapter's package.json: what decides which packages its code loads. */
const DEPENDENCY_FIELDS = ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"] as const;
const DEPENDENCIES_KEY = "package.json#dependencies";
const ABSENT = "absent";

export function chapterNames(chaptersDir: string): string[] {
  return readdirSync(chaptersDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && /^ch\d\d$/.test(entry.name))
    .map((entry) => entry.name)
    .sort();
}

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");

/** A hash of what in a package.json decides which packages its code loads (`absent` without one). */
export function dependencyFields(packageJson: string | undefined): string {
  if (packageJson === undefined) return ABSENT;
  const parsed = JSON.parse(packageJson) as Record<string, unknown>;
  return sha256(JSON.stringify(DEPENDENCY_FIELDS.map((field) => [field, parsed[field] ?? null])));
}

/** Each package a package.json declares, with where and at which version (what a test importing it depends on). */
function declaredPackages(packageJson: string | undefined): Map<string, string> {
  const declared = new Map<string, string>();
  if (packageJson === undefined) return declared;
  const parsed = JSON.parse(packageJson) as Record<string, unknown>;
  for (const field of DEPENDENCY_FIELDS) {
    const entries = parsed[field];
    if (typeof entries !== "object" || entries === null) continue;
    for (const [name, spec] of Object.entries(entries)) declared.set(name, JSON.stringify([field, spec]));
  }
  return declared;
}

/** The inputs of every test file of one snapshot, from its files (path → text). */
export function chapterInputs(files: ReadonlyMap<string, string>): Map<string, TestInputs> {
  const hashes = new Map<string, string>();
  const hashOf = (path: string): string => {
    let hash = hashes.get(path);
    if (hash === undefined) {
      const text = files.get(path);
      hash = text === undefined ? ABSENT : sha256(text);
      hashes.set(path, hash);
    }
    return hash;
  };
  const declared = declaredPackages(files.get("package.json"));
  const testFiles = [...files.keys()].filter((path) => /^tests\/.*\.test\.ts$/.test(path)).sort();
  const inputs = new Map<string, TestInputs>();
  for (const test of testFiles) {
    const declaration = declarationFor(test);
    const patterns = (declaration.reads ?? []).map(globPattern);
    const spawned = [...files.keys()].filter((path) =>
      (declaration.spawns ?? []).some((glob) => globPattern(glob).test(path)),
    );
    const paths = importClosure([test, ...spawned], files);
    for (const path of files.keys()) if (patterns.some((pattern) => pattern.test(path))) paths.add(path);
    // vitest looks for the file's stored snapshots whether it uses them or not.
    paths.add(test.replace(/^tests\/(.*\/)?([^/]+)$/, "tests/$1__snapshots__/$2.snap"));
    paths.add("tsconfig.json");
    const record: Record<string, string> = {};
    const packages = new Set<string>();
    for (const path of paths) for (const name of packageImports(files.get(path) ?? "")) packages.add(name);
    for (const name of [...packages].sort()) record[`${DEPENDENCIES_KEY}/${name}`] = declared.get(name) ?? "undeclared";
    for (const path of [...paths].sort()) record[path] = hashOf(path);
    inputs.set(test, { files: record, reads: declaration.reads ?? [], ownChapter: declaration.ownChapter === true });
  }
  return inputs;
}

/** The paths whose hashes differ between two input sets (a path in only one of them differs). */
export function differingInputs(a: TestInputs, b: TestInputs): string[] {
  const paths = new Set([...Object.keys(a.files), ...Object.keys(b.files)]);
  return [...paths].filter((path) => a.files[path] !== b.files[path]).sort();
}

function describeDifference(paths: readonly string[]): string {
  const shown = paths.slice(0, 3).join(", ");
  return paths.length > 3 ? `${shown} and ${paths.length - 3} more` : shown;
}

/** The plan for the snapshots under `chaptersDir`, chapters in order. */
export function testPlan(chaptersDir: string): TestPlan {
  const entries: PlanEntry[] = [];
  const inputs = new Map<string, Map<string, TestInputs>>();
  /** test file → the runs made of it so far, in chapter order. */
  const runs = new Map<string, { chapter: string; inputs: TestInputs }[]>();
  for (const chapter of chapterNames(chaptersDir)) {
    const chapterTests = chapterInputs(snapshotFiles(join(chaptersDir, chapter)));
    inputs.set(chapter, chapterTests);
    for (const [file, own] of chapterTests) {
      const earlier = runs.get(file) ?? [];
      const same = own.ownChapter ? undefined : earlier.find((run) => differingInputs(run.inputs, own).length === 0);
      if (same !== undefined) {
        const count = Object.keys(own.files).length;
        entries.push({
          chapter,
          file,
          action: "reuse",
          reusedFrom: same.chapter,
          why: `same ${count} inputs as in ${same.chapter}`,
        });
        continue;
      }
      let why: string;
      if (own.ownChapter) why = "depends on its own chapter folder";
      else if (earlier.length === 0) why = "no earlier run of this file";
      else {
        const last = earlier.at(-1) as { chapter: string; inputs: TestInputs };
        why = `inputs differ from ${last.chapter}: ${describeDifference(differingInputs(last.inputs, own))}`;
      }
      entries.push({ chapter, file, action: "run", why });
      runs.set(file, [...earlier, { chapter, inputs: own }]);
    }
  }
  return { entries, inputs };
}
