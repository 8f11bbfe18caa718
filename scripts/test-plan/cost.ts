// What each chapter's step costs the gate, and what a next chapter that changes a given file would cost: both
// read off the test plan, rendered as the block in docs/snapshots.md that verify:guides checks against the
// tree (`npm run -s test:plan -- --write-docs` rewrites it after a change).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TestInputs, TestPlan } from "./plan.js";

export const COST_START = "<!-- test-plan-cost: made by npm run test:plan -- --write-docs -->";
export const COST_END = "<!-- /test-plan-cost -->";

/** Files whose change a next chapter is likely to make, from the loop's core to one new feature file. */
const SAMPLE_CHANGES: readonly string[] = [
  "src/core/loop.ts",
  "src/core/messages.ts",
  "src/core/tools.ts",
  "src/bootstrap.ts",
  "src/cli.ts",
  "src/core/permissions.ts",
  "src/adapters/filesystem.ts",
  "src/adapters/powershell.ts",
];

/** The test files of the newest chapter whose inputs include any of `paths`: what changing them would run. */
export function testsAffectedBy(plan: TestPlan, paths: readonly string[]): string[] {
  const newest = [...plan.inputs.keys()].at(-1);
  const tests = (newest === undefined ? undefined : plan.inputs.get(newest)) ?? new Map<string, TestInputs>();
  return [...tests]
    .filter(([, inputs]) => paths.some((path) => Object.hasOwn(inputs.files, path)))
    .map(([file]) => file)
    .sort();
}

/** The block: per chapter, files run and reused; per sample change, the files a next chapter would run. */
export function renderCost(plan: TestPlan): string {
  const chapters = [...plan.inputs.keys()];
  const rows = ["| 章 | 测试文件 | 运行 | 复用 |", "| --- | --- | --- | --- |"];
  for (const chapter of chapters) {
    const own = plan.entries.filter((entry) => entry.chapter === chapter);
    const ran = own.filter((entry) => entry.action === "run").length;
    rows.push(`| ${chapter} | ${own.length} | ${ran} | ${own.length - ran} |`);
  }
  const newest = chapters.at(-1) ?? "";
  const total = plan.inputs.get(newest)?.size ?? 0;
  const changes = [`| 下一章只改这个文件 | 要运行的测试文件（共 ${total} 个） |`, "| --- | --- |"];
  for (const path of SAMPLE_CHANGES) changes.push(`| \`${path}\` | ${testsAffectedBy(plan, [path]).length} |`);
  changes.push(`| 一个新文件，只有它自己的测试导入它 | 0（加上它自己的测试） |`);
  return [
    COST_START,
    "<!-- prettier-ignore-start -->",
    ...rows,
    "",
    ...changes,
    "<!-- prettier-ignore-end -->",
    COST_END,
  ].join("\n");
}

/** Where docs/snapshots.md's block disagrees with `plan`; empty when it agrees. */
export function costProblems(repo: string, plan: TestPlan): string[] {
  const doc = readFileSync(join(repo, "docs", "snapshots.md"), "utf8");
  const start = doc.indexOf(COST_START);
  const end = doc.indexOf(COST_END);
  if (start < 0 || end < start) return ["docs/snapshots.md: no test-plan-cost table"];
  if (doc.slice(start, end + COST_END.length) !== renderCost(plan)) {
    return ["docs/snapshots.md: the test-plan-cost table differs from the plan: npm run -s test:plan -- --write-docs"];
  }
  return [];
}

/** Rewrites docs/snapshots.md's block from `plan`. */
export function writeCost(repo: string, plan: TestPlan): void {
  const file = join(repo, "docs", "snapshots.md");
  const doc = readFileSync(file, "utf8");
  const start = doc.indexOf(COST_START);
  const end = doc.indexOf(COST_END);
  if (start < 0 || end < start) throw new Error("docs/snapshots.md has no test-plan-cost table to replace");
  writeFileSync(file, doc.slice(0, start) + renderCost(plan) + doc.slice(end + COST_END.length));
}
