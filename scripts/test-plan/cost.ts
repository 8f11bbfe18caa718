// What each chapter's step costs the gate, and what a next chapter that changes a given file would cost: both
// read off the test plan, in files and in seconds, rendered as the block in docs/snapshots.md that verify:guides
// checks against the tree (`npm run -s test:plan -- --write-docs` rewrites it after a change). The seconds are
// each file's own time as vitest reported it in `npm test` (recorded in the durations cache), kept in
// docs/test-seconds.json so the check reads the same numbers on every machine.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { dirname, join } from "node:path";
import type { PlanEntry, TestInputs, TestPlan } from "./plan.js";

export const COST_START = "<!-- test-plan-cost: made by npm run test:plan -- --write-docs -->";
export const COST_END = "<!-- /test-plan-cost -->";

/** What docs/test-seconds.json holds: where the times were taken, and each run file's seconds by `chNN/tests/…`. */
export interface TestSeconds {
  readonly machine: string;
  readonly seconds: Readonly<Record<string, number>>;
}

const SECONDS_FILE = join("docs", "test-seconds.json");
const durationsCache = (repo: string): string =>
  join(repo, "node_modules", ".cache", "agent-tutorial", "test-durations.json");

export function readTestSeconds(repo: string): TestSeconds {
  try {
    return JSON.parse(readFileSync(join(repo, SECONDS_FILE), "utf8")) as TestSeconds;
  } catch {
    return { machine: "", seconds: {} };
  }
}

/** Adds each file's milliseconds from one `npm test` (`chNN/tests/…` → ms) to the durations cache. */
export function recordDurations(repo: string, durations: ReadonlyMap<string, number>): void {
  const cache = readDurations(repo);
  for (const [key, ms] of durations) cache.set(key, ms);
  mkdirSync(dirname(durationsCache(repo)), { recursive: true });
  writeFileSync(durationsCache(repo), JSON.stringify(Object.fromEntries(cache)));
}

/**
 * Each test file's last measured milliseconds by `chNN/tests/…`: the durations cache npm test keeps, and for
 * what it lacks, the per-file durations vitest keeps in its own results cache (any earlier vitest run).
 */
export function readDurations(repo: string): Map<string, number> {
  const durations = new Map<string, number>();
  const vitestCache = join(repo, "node_modules", ".vite", "vitest");
  let folders: string[] = [];
  try {
    folders = readdirSync(vitestCache);
  } catch {
    // No vitest run here yet.
  }
  for (const folder of folders) {
    try {
      const { results } = JSON.parse(readFileSync(join(vitestCache, folder, "results.json"), "utf8")) as {
        results: [string, { duration?: number }][];
      };
      for (const [key, result] of results) {
        const match = /^(ch\d\d):code\/chapters\/\1\/(tests\/.+)$/.exec(key);
        if (match !== null && typeof result.duration === "number")
          durations.set(`${match[1]}/${match[2]}`, result.duration);
      }
    } catch {
      // A results file of another shape: skip it.
    }
  }
  try {
    const cache = JSON.parse(readFileSync(durationsCache(repo), "utf8")) as Record<string, number>;
    for (const [key, ms] of Object.entries(cache)) durations.set(key, ms);
  } catch {
    // No npm test run here yet.
  }
  return durations;
}

/**
 * The seconds of one file's run in `chapter`: its own time there, else the same file's time in the nearest
 * chapter that has one (the same test, carried or changed a little), else undefined.
 */
export function secondsOf(
  seconds: Readonly<Record<string, number>>,
  chapters: readonly string[],
  chapter: string,
  file: string,
): number | undefined {
  const at = chapters.indexOf(chapter);
  const nearest = chapters
    .map((name, index) => ({ name, distance: Math.abs(index - at) + (index > at ? 0.5 : 0) }))
    .sort((a, b) => a.distance - b.distance);
  for (const { name } of nearest) {
    const value = seconds[`${name}/${file}`];
    if (value !== undefined) return value;
  }
  return undefined;
}

/** The seconds of a set of runs, and how many of them have no time recorded anywhere. */
function total(
  times: Readonly<Record<string, number>>,
  chapters: readonly string[],
  runs: readonly Pick<PlanEntry, "chapter" | "file">[],
): string {
  const values = runs.map((run) => secondsOf(times, chapters, run.chapter, run.file));
  const sum = values.reduce<number>((acc, value) => acc + (value ?? 0), 0);
  const missing = values.filter((value) => value === undefined).length;
  return `${sum.toFixed(1)}${missing === 0 ? "" : ` + ${missing} 个无记录`}`;
}

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

/** The block: per chapter, files run and reused and the seconds run; per sample change, the files and seconds. */
export function renderCost(plan: TestPlan, times: TestSeconds = { machine: "", seconds: {} }): string {
  const chapters = [...plan.inputs.keys()];
  const rows = ["| 章 | 测试文件 | 运行 | 运行的秒数 | 复用 |", "| --- | --- | --- | --- | --- |"];
  for (const chapter of chapters) {
    const own = plan.entries.filter((entry) => entry.chapter === chapter);
    const ran = own.filter((entry) => entry.action === "run");
    const seconds = total(times.seconds, chapters, ran);
    rows.push(`| ${chapter} | ${own.length} | ${ran.length} | ${seconds} | ${own.length - ran.length} |`);
  }
  const newest = chapters.at(-1) ?? "";
  const count = plan.inputs.get(newest)?.size ?? 0;
  const changes = [`| 下一章只改这个文件 | 要运行的测试文件（共 ${count} 个） | 秒数 |`, "| --- | --- | --- |"];
  for (const path of SAMPLE_CHANGES) {
    const affected = testsAffectedBy(plan, [path]);
    const seconds = total(
      times.seconds,
      chapters,
      affected.map((file) => ({ chapter: newest, file })),
    );
    changes.push(`| \`${path}\` | ${affected.length} | ${seconds} |`);
  }
  changes.push(`| 一个新文件，只有它自己的测试导入它 | 0（加上它自己的测试） | 0 |`);
  const machine = times.machine === "" ? "（还没有记录）" : times.machine;
  return [
    COST_START,
    "<!-- prettier-ignore-start -->",
    ...rows,
    "",
    ...changes,
    "",
    "秒数是这些测试文件各自的时间之和：vitest 报告的每个文件的时间，`npm test` 跑过的文件记下它在那次运行里的时间，" +
      "其余的取 vitest 上一次运行它的时间；文件并行运行，所以不等于整体的耗时。一个文件在这一章没有时间，就借同一个文件在最近一章的。" +
      `数字记在 [\`test-seconds.json\`](test-seconds.json) 里，机器：${machine}。`,
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
  if (doc.slice(start, end + COST_END.length) !== renderCost(plan, readTestSeconds(repo))) {
    return ["docs/snapshots.md: the test-plan-cost table differs from the plan: npm run -s test:plan -- --write-docs"];
  }
  return [];
}

/**
 * Rewrites docs/test-seconds.json from the measured durations and docs/snapshots.md's block from `plan` and
 * those seconds. Returns how many of the plan's runs have a time (their own or a borrowed one).
 */
export function writeCost(repo: string, plan: TestPlan): { timed: number; runs: number } {
  const durations = readDurations(repo);
  const runs = plan.entries.filter((entry) => entry.action === "run");
  // Every file's time where one was measured, run or reused there: a run with no time of its own borrows the
  // same file's time in the nearest chapter.
  const seconds: Record<string, number> = {};
  for (const entry of plan.entries) {
    const ms = durations.get(`${entry.chapter}/${entry.file}`);
    if (ms !== undefined) seconds[`${entry.chapter}/${entry.file}`] = Math.round(ms / 100) / 10;
  }
  const cpu = cpus();
  const machine = `${cpu.length} cores (${cpu[0]?.model.trim() ?? "?"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
  const times: TestSeconds = {
    machine,
    seconds: Object.fromEntries(Object.entries(seconds).sort(([a], [b]) => a.localeCompare(b))),
  };
  writeFileSync(join(repo, SECONDS_FILE), `${JSON.stringify(times, null, 2)}\n`);
  const file = join(repo, "docs", "snapshots.md");
  const doc = readFileSync(file, "utf8");
  const start = doc.indexOf(COST_START);
  const end = doc.indexOf(COST_END);
  if (start < 0 || end < start) throw new Error("docs/snapshots.md has no test-plan-cost table to replace");
  writeFileSync(file, doc.slice(0, start) + renderCost(plan, times) + doc.slice(end + COST_END.length));
  const chapters = [...plan.inputs.keys()];
  const timed = runs.filter((run) => secondsOf(seconds, chapters, run.chapter, run.file) !== undefined).length;
  return { timed, runs: runs.length };
}
