// `npm test` runs the chapter gates through this file: each chapter runs only the test files whose inputs differ
// from every run already made in the same invocation, and reuses the others' results, saying so per chapter.
// `npm run -s test:plan -- --json` prints the plan without running anything; `npm run test:chNN` still runs one
// whole chapter gate.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { reportGuides, withReused } from "../verify-guides.js";
import { recordDurations, testsAffectedBy, writeCost } from "./cost.js";
import { writeCountCache } from "./count-cache.js";
import { testPlan, type PlanEntry, type TestPlan } from "./plan.js";

const repository = fileURLToPath(new URL("../../", import.meta.url));
const chaptersDir = join(repository, "code", "chapters");

/** The parts of vitest's JSON report read here. */
interface Report {
  readonly numPassedTests: number;
  readonly numFailedTests: number;
  readonly numPendingTests: number;
  readonly numTodoTests: number;
  readonly testResults: readonly {
    readonly name: string;
    readonly status: string;
    readonly startTime: number;
    readonly endTime: number;
    readonly assertionResults: readonly unknown[];
  }[];
}

interface FileRun {
  readonly passed: boolean;
  readonly tests: number;
  readonly ms: number;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
const plural = (count: number, word: string): string => `${count} ${word}${count === 1 ? "" : "s"}`;

/** Each run file's outcome, by `chapter/tests/…`, from the report's absolute file names. */
function fileRuns(report: Report): Map<string, FileRun> {
  const runs = new Map<string, FileRun>();
  for (const result of report.testResults) {
    const key = relative(chaptersDir, result.name).split(sep).join("/");
    runs.set(key, {
      passed: result.status === "passed",
      tests: result.assertionResults.length,
      ms: result.endTime - result.startTime,
    });
  }
  return runs;
}

/** One line per chapter: files run and their time, files reused and whose run they reuse. */
export function chapterSummary(entries: readonly PlanEntry[], runs: ReadonlyMap<string, FileRun>): string[] {
  const chapters = [...new Set(entries.map((entry) => entry.chapter))];
  return chapters.map((chapter) => {
    const own = entries.filter((entry) => entry.chapter === chapter);
    const ran = own.filter((entry) => entry.action === "run").map((entry) => runs.get(`${chapter}/${entry.file}`));
    const reused = own.filter((entry) => entry.action === "reuse");
    const sources = [...new Set(reused.map((entry) => entry.reusedFrom))]
      .map((source) => `${reused.filter((entry) => entry.reusedFrom === source).length} from ${source ?? "?"}`)
      .join(", ");
    const failedReuse = reused.filter((entry) => runs.get(`${entry.reusedFrom ?? ""}/${entry.file}`)?.passed === false);
    const ranTests = ran.reduce((sum, run) => sum + (run?.tests ?? 0), 0);
    const ranMs = ran.reduce((sum, run) => sum + (run?.ms ?? 0), 0);
    const reusedTests = reused.reduce(
      (sum, entry) => sum + (runs.get(`${entry.reusedFrom ?? ""}/${entry.file}`)?.tests ?? 0),
      0,
    );
    let line = `${chapter}: ran ${plural(ran.length, "file")} (${plural(ranTests, "test")}, ${seconds(ranMs)})`;
    line +=
      reused.length === 0
        ? ", reused none"
        : `, reused ${plural(reused.length, "file")} (${plural(reusedTests, "test")}; ${sources})`;
    if (failedReuse.length > 0) line += `; ${plural(failedReuse.length, "reused file")} failed where it ran`;
    return line;
  });
}

function runPlanned(plan: TestPlan): number {
  const { entries } = plan;
  const started = Date.now();
  const folder = mkdtempSync(join(tmpdir(), "agent-test-plan-"));
  const reportFile = join(folder, "report.json");
  const vitest = join(repository, "node_modules", "vitest", "vitest.mjs");
  const run = spawnSync(
    process.execPath,
    [vitest, "run", "--reporter=default", "--reporter=json", `--outputFile.json=${reportFile}`],
    { cwd: repository, stdio: "inherit", env: { ...process.env, AGENT_TEST_PLAN: "reuse" } },
  );
  let report: Report;
  try {
    report = JSON.parse(readFileSync(reportFile, "utf8")) as Report;
  } catch {
    console.error(`vitest wrote no report (exit ${run.status ?? run.signal ?? "?"})`);
    return 1;
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
  const runs = fileRuns(report);
  console.log("\nTest plan (each chapter runs what differs from a run already made here, reuses the rest):");
  for (const line of chapterSummary(entries, runs)) console.log(`  ${line}`);
  const scripts = report.testResults.filter((result) => relative(chaptersDir, result.name).startsWith(".."));
  console.log(`  scripts: ran ${plural(scripts.length, "file")}`);
  console.log(`  all in ${seconds(Date.now() - started)}`);
  // The guides' test counts, from this run: a reused file has the count of the run it reuses.
  const ranCounts = new Map<string, Map<string, number>>();
  for (const [key, run] of runs) {
    const [chapter, ...file] = key.split("/");
    if (chapter === undefined || !/^ch\d\d$/.test(chapter)) continue;
    ranCounts.set(chapter, (ranCounts.get(chapter) ?? new Map<string, number>()).set(file.join("/"), run.tests));
  }
  writeCountCache(repository, plan, ranCounts);
  // Each file's own time, for the seconds in docs/snapshots.md's cost table (npm run -s test:plan -- --write-docs).
  recordDurations(repository, new Map([...runs].map(([key, run]) => [key, run.ms])));
  const guidesAgree = reportGuides(repository, withReused(ranCounts, plan.entries), plan);
  const skipped = report.numPendingTests + report.numTodoTests;
  console.log(`tests: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${skipped} skipped`);
  return run.status === 0 && guidesAgree ? 0 : 1;
}

const USAGE = `Usage: npm run test:plan [-- --json | --run | --changed <file> … | --write-docs]

With no option, prints each chapter's test files and whether npm test runs each one or reuses an earlier run.
  --json                the same plan as JSON
  --run                 run the plan (what npm test does)
  --changed <file> …    the newest chapter's test files a next chapter changing these files would run
  --write-docs          rewrite the test-plan-cost table in docs/snapshots.md
  --help                this text`;

function main(argv: readonly string[]): number {
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(USAGE);
    return 0;
  }
  const unknown =
    argv[0] === "--changed" ? [] : argv.filter((arg) => !["--json", "--run", "--write-docs"].includes(arg));
  if (unknown.length > 0) {
    console.error(`unknown argument ${JSON.stringify(unknown[0])}\n\n${USAGE}`);
    return 2;
  }
  const plan = testPlan(chaptersDir);
  const { entries } = plan;
  if (argv[0] === "--changed") {
    // What a next chapter that changes these files (snapshot-relative) would run of the newest one's tests.
    const affected = testsAffectedBy(plan, argv.slice(1));
    for (const file of affected) console.log(file);
    console.log(`${plural(affected.length, "test file")} would run, besides the new chapter's own`);
    return 0;
  }
  if (argv.includes("--write-docs")) {
    const { timed, runs } = writeCost(repository, plan);
    console.log(
      `Wrote the test-plan-cost table in docs/snapshots.md and its seconds in docs/test-seconds.json ` +
        `(${timed} of the ${runs} runs the plan makes have a recorded time; npm test records them all); review the diff.`,
    );
    return 0;
  }
  if (argv.includes("--json")) {
    console.log(JSON.stringify(entries, null, 2));
    return 0;
  }
  if (argv.includes("--run")) return runPlanned(plan);
  for (const entry of entries) {
    const action = entry.action === "reuse" ? `reuse ${entry.reusedFrom ?? ""}` : "run";
    console.log(`${entry.chapter} ${entry.file}: ${action} (${entry.why})`);
  }
  return 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = main(process.argv.slice(2));
}
