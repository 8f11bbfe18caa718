// Mutation testing of chapter 3's safety code and chapter 9's memory store: `npm run mutate` (not part of `test`,
// `gate` or CI; see docs/security.md). Stryker copies the repository into .stryker-tmp/, switches one mutant on at a
// time and runs the tests that covered it (vitest.mutate.config.mjs); the report goes to reports/mutation/.
// Tests that need PowerShell find `pwsh` on PATH, as `npm test` does: without it they skip and mutants survive.

/**
 * The test files that exercise these modules in-process (child-process tests cannot see a mutant), read by
 * vitest.mutate.config.mjs. Left out: folder-swap-races (its races depend on timing, so a mutant it kills once
 * may survive the next run; confined-open and folder-handles play the same swaps deterministically) and
 * bounded-resources (child processes only).
 */
export const MUTATION_TESTS = [
  "permissions",
  "ch03-permissions",
  "hostile-properties",
  "hostile-corpus",
  "fault-injection",
  "filesystem",
  "hard-links",
  "path-properties",
  "glob-match",
  "ch02-files",
  "hostile-paths",
  "confined-open",
  "folder-handles",
].map((name) => `code/chapters/ch03/tests/${name}.test.ts`);

/** Chapter 9's: the store, its records' text bans and the lock helper, through the tests that call them in-process. */
export const MEMORY_MUTATION_TESTS = ["memory", "memory-hostile"].map(
  (name) => `code/chapters/ch09/tests/${name}.test.ts`,
);

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutate.config.mjs" },
  mutate: [
    "code/chapters/ch03/src/core/permissions.ts",
    "code/chapters/ch03/src/core/safe-path.ts",
    "code/chapters/ch03/src/adapters/confined-open.ts",
    "code/chapters/ch03/src/adapters/folder-handles.ts",
    "code/chapters/ch03/src/adapters/filesystem.ts",
    "code/chapters/ch09/src/features/memory.ts",
    "code/chapters/ch09/src/adapters/file-lock.ts",
  ],
  // Not `testFiles`: with it, Stryker 9.6.1 switches static mutants (module-level constants such as the path
  // rules' regular expressions) on only after their module has loaded, so they all survive (stryker-js #6144).
  // The vitest config's include limits the tests instead.
  coverageAnalysis: "perTest",
  concurrency: 2,
  // The sandbox needs only the root configuration and the ch03 and ch09 snapshots.
  ignorePatterns: [
    "/code/chapters/*",
    "!/code/chapters/ch03",
    "!/code/chapters/ch09",
    "/chapters",
    "/docs",
    "/scripts",
    "/.ci",
  ],
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/mutation.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  clearTextReporter: { allowColor: false, logTests: false },
  // Real file systems and processes: on a loaded machine a slow test is not a hanging mutant.
  timeoutMS: 20_000,
  dryRunTimeoutMinutes: 15,
  tempDirName: ".stryker-tmp",
  cleanTempDir: true,
};
