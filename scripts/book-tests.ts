// `npm run test:chNN:book`: the book's own test run. The book's reader runs its chapter's tests and sees its counts in
// seconds; this repository's gate (`npm run test:chNN`) also runs every hardening and adversarial test carried from
// earlier chapters, minutes of them. This runs only the test files the book names for the chapter and the chapters
// before it (BOOK.md and each chapter's contract name them), from the chapter's own snapshot, and says how many
// passed. The whole gate is still `npm run test:chNN`, and every chapter's `npm test`.
// The form has no `--` on purpose: Windows PowerShell's npm.ps1 drops `--` from piped runs (README, "Windows").
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The test files the book adds in each chapter (snapshot-relative); a chapter's book run is its own and all before. */
export const BOOK_TESTS: Readonly<Record<string, readonly string[]>> = {
  ch01: [
    "tests/ch01-loop.test.ts",
    "tests/shell-tool.test.ts",
    "tests/messages.test.ts",
    "tests/profiles.test.ts",
    "tests/openai-chat.test.ts",
    "tests/config.test.ts",
  ],
  ch02: ["tests/ch02-files.test.ts", "tests/filesystem.test.ts"],
  ch03: ["tests/permissions.test.ts", "tests/ch03-permissions.test.ts"],
  ch04: ["tests/hooks.test.ts", "tests/ch04-hooks.test.ts"],
  ch05: ["tests/todos.test.ts", "tests/ch05-todos.test.ts"],
  ch06: ["tests/subagents.test.ts", "tests/ch06-subagents.test.ts"],
  ch07: ["tests/skills.test.ts", "tests/ch07-skills.test.ts"],
  // The chapter 8 article gives the number of files (21) but no new names; these three are this repository's.
  ch08: ["tests/compaction.test.ts", "tests/loop-processors.test.ts", "tests/ch08-compaction.test.ts"],
  // The chapter 9 article names three: these two and loop-processors.test.ts, already chapter 8's here.
  ch09: ["tests/memory.test.ts", "tests/ch09-memory.test.ts"],
};

/** The book's test files for `chapter`: its own and every earlier chapter's, in the book's order. */
export function bookTests(chapter: string): string[] {
  const chapters = Object.keys(BOOK_TESTS).sort();
  if (!chapters.includes(chapter)) throw new Error(`no book test list for ${chapter} (${chapters.join(", ")})`);
  return chapters.filter((name) => name <= chapter).flatMap((name) => BOOK_TESTS[name] ?? []);
}

const USAGE = `Usage: npm run test:chNN:book   (for example npm run test:ch05:book)

Runs only the test files the book names for chapter NN and the chapters before it, from chapter NN's snapshot,
and says how many passed. The whole chapter gate is npm run test:chNN; every chapter: npm test.`;

interface Report {
  readonly numPassedTests: number;
  readonly numFailedTests: number;
  readonly numPendingTests: number;
  readonly numTodoTests: number;
  readonly testResults: readonly { readonly status: string }[];
}

function main(argv: readonly string[]): number {
  const chapter = argv.find((arg) => !arg.startsWith("-"));
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(USAGE);
    return 0;
  }
  if (chapter === undefined || BOOK_TESTS[chapter] === undefined) {
    console.error(`${chapter === undefined ? "no chapter given" : `unknown chapter ${chapter}`}\n\n${USAGE}`);
    return 2;
  }
  const repository = fileURLToPath(new URL("../", import.meta.url));
  const files = bookTests(chapter).map((file) => join("code", "chapters", chapter, file));
  const missing = files.filter((file) => !existsSync(join(repository, file)));
  if (missing.length > 0) {
    console.error(`the book's test files are missing from ${chapter}: ${missing.join(", ")}`);
    return 1;
  }
  const folder = mkdtempSync(join(tmpdir(), "agent-book-tests-"));
  const reportFile = join(folder, "report.json");
  const started = Date.now();
  try {
    const run = spawnSync(
      process.execPath,
      [
        join(repository, "node_modules", "vitest", "vitest.mjs"),
        "run",
        "--project",
        chapter,
        "--reporter=default",
        "--reporter=json",
        `--outputFile.json=${reportFile}`,
        ...files,
      ],
      { cwd: repository, stdio: "inherit" },
    );
    let report: Report;
    try {
      report = JSON.parse(readFileSync(reportFile, "utf8")) as Report;
    } catch {
      console.error(`vitest wrote no report (exit ${run.status ?? run.signal ?? "?"})`);
      return 1;
    }
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const passedFiles = report.testResults.filter((result) => result.status === "passed").length;
    const skipped = report.numPendingTests + report.numTodoTests;
    const ok = run.status === 0 && passedFiles === files.length && report.testResults.length === files.length;
    console.log(
      ok
        ? `The book's ${files.length} test files of ${chapter} pass: ${report.numPassedTests} tests${skipped > 0 ? `, ${skipped} skipped` : ""} (${seconds} s). The whole gate: npm run test:${chapter}.`
        : `The book's ${files.length} test files of ${chapter}: ${passedFiles} passed, ${report.numFailedTests} tests failed (${seconds} s).`,
    );
    return ok ? 0 : 1;
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = main(process.argv.slice(2));
}
