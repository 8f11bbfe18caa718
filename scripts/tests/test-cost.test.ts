import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { costProblems, readDurations, recordDurations, renderCost, secondsOf, writeCost } from "../test-plan/cost.js";
import type { TestInputs, TestPlan } from "../test-plan/plan.js";

// The cost table's seconds, on a plan made by hand: two chapters, three test files, ch02 reusing one of ch01's.
const inputs = (files: Record<string, string>): TestInputs => ({ files, reads: [], ownChapter: false });
const plan: TestPlan = {
  entries: [
    { chapter: "ch01", file: "tests/a.test.ts", action: "run", why: "no earlier run of this file" },
    { chapter: "ch01", file: "tests/b.test.ts", action: "run", why: "no earlier run of this file" },
    { chapter: "ch02", file: "tests/a.test.ts", action: "reuse", reusedFrom: "ch01", why: "same 2 inputs as in ch01" },
    { chapter: "ch02", file: "tests/b.test.ts", action: "run", why: "inputs differ from ch01: src/core/loop.ts" },
    { chapter: "ch02", file: "tests/c.test.ts", action: "run", why: "no earlier run of this file" },
  ],
  inputs: new Map([
    ["ch01", new Map([["tests/a.test.ts", inputs({ "src/core/tools.ts": "1" })]])],
    [
      "ch02",
      new Map([
        ["tests/a.test.ts", inputs({ "src/core/tools.ts": "1" })],
        ["tests/b.test.ts", inputs({ "src/core/loop.ts": "2", "src/bootstrap.ts": "3" })],
        ["tests/c.test.ts", inputs({ "src/bootstrap.ts": "3" })],
      ]),
    ],
  ]),
};

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** A scratch repository with docs/snapshots.md holding an empty cost block. */
function scratchRepo(): string {
  const repo = mkdtempSync(join(tmpdir(), "test-cost-"));
  folders.push(repo);
  mkdirSync(join(repo, "docs"));
  writeFileSync(
    join(repo, "docs", "snapshots.md"),
    "before\n<!-- test-plan-cost: made by npm run test:plan -- --write-docs -->\n<!-- /test-plan-cost -->\nafter\n",
  );
  return repo;
}

describe("the cost table's seconds", () => {
  it("a file with no time in its chapter borrows the same file's time from the nearest chapter, the earlier one first on a tie", () => {
    const chapters = ["ch01", "ch02", "ch03"];
    const seconds = { "ch01/tests/a.test.ts": 1, "ch03/tests/a.test.ts": 3, "ch03/tests/b.test.ts": 7 };
    expect(secondsOf(seconds, chapters, "ch02", "tests/a.test.ts")).toBe(1);
    expect(secondsOf(seconds, chapters, "ch03", "tests/a.test.ts")).toBe(3);
    expect(secondsOf(seconds, chapters, "ch01", "tests/b.test.ts")).toBe(7);
    expect(secondsOf(seconds, chapters, "ch02", "tests/c.test.ts")).toBeUndefined();
  });

  it("each chapter's row sums the seconds of the files it runs, and each sample change the newest chapter's files it would run", () => {
    const seconds = { "ch01/tests/a.test.ts": 1.5, "ch01/tests/b.test.ts": 2, "ch02/tests/b.test.ts": 4 };
    const block = renderCost(plan, { machine: "2 cores (test)", seconds });
    expect(block).toContain("| ch01 | 2 | 2 | 3.5 | 0 |");
    // c.test.ts has no time anywhere: the row says so instead of counting it as nothing.
    expect(block).toContain("| ch02 | 3 | 2 | 4.0 + 1 个无记录 | 1 |");
    expect(block).toContain("| `src/core/loop.ts` | 1 | 4.0 |");
    expect(block).toContain("| `src/bootstrap.ts` | 2 | 4.0 + 1 个无记录 |");
    expect(block).toContain("| `src/core/tools.ts` | 1 | 1.5 |");
    expect(block).toContain("机器：2 cores (test)。");
  });

  it("npm test's recorded durations win over vitest's own cache, --write-docs writes them as seconds, and the check then agrees", () => {
    const repo = scratchRepo();
    const vitestCache = join(repo, "node_modules", ".vite", "vitest", "hash");
    mkdirSync(vitestCache, { recursive: true });
    writeFileSync(
      join(vitestCache, "results.json"),
      JSON.stringify({
        version: "4",
        results: [
          ["ch01:code/chapters/ch01/tests/a.test.ts", { duration: 1_000, failed: false }],
          ["ch02:code/chapters/ch02/tests/c.test.ts", { duration: 250, failed: false }],
          ["scripts:scripts/tests/x.test.ts", { duration: 9_000, failed: false }],
        ],
      }),
    );
    recordDurations(repo, new Map([["ch01/tests/a.test.ts", 2_000]]));
    recordDurations(repo, new Map([["ch02/tests/b.test.ts", 3_040]]));
    expect(Object.fromEntries(readDurations(repo))).toEqual({
      "ch01/tests/a.test.ts": 2_000,
      "ch02/tests/b.test.ts": 3_040,
      "ch02/tests/c.test.ts": 250,
    });

    expect(costProblems(repo, plan)).toEqual([
      "docs/snapshots.md: the test-plan-cost table differs from the plan: npm run -s test:plan -- --write-docs",
    ]);
    // ch01's b.test.ts borrows ch02's time; every run has one.
    expect(writeCost(repo, plan)).toEqual({ timed: 4, runs: 4 });
    const written = JSON.parse(readFileSync(join(repo, "docs", "test-seconds.json"), "utf8")) as {
      seconds: Record<string, number>;
    };
    expect(written.seconds).toEqual({
      "ch01/tests/a.test.ts": 2,
      "ch02/tests/b.test.ts": 3,
      "ch02/tests/c.test.ts": 0.3,
    });
    const doc = readFileSync(join(repo, "docs", "snapshots.md"), "utf8");
    expect(doc).toContain("| ch01 | 2 | 2 | 5.0 | 0 |");
    expect(doc).toContain("| ch02 | 3 | 2 | 3.3 | 1 |");
    expect(doc.startsWith("before\n") && doc.endsWith("after\n")).toBe(true);
    expect(costProblems(repo, plan)).toEqual([]);
  });
});
