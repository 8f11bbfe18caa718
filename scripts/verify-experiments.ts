// `npm run verify:experiments`: makes every experiment the chapter guides show and counts the tests it turns red.
// For each chapter guide with experiments (scripts/experiments/guide.ts), in a git worktree of HEAD with the
// repository's node_modules linked in, it applies each measurement's edits, runs the test files whose inputs hold
// an edited file (the rest are unedited and pass in the gate), and compares what failed with docs/experiments.json.
//   npm run verify:experiments                          # measure every chapter, compare with the record
//   npm run verify:experiments -- --only ch02 ch03      # only these chapters
//   npm run verify:experiments -- --write --only ch02   # measure and record (the chapter must be committed)
// It takes minutes per chapter, so it is not part of npm test; verify:guides (in npm test) holds the guides to the
// record without running anything.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { applyEdits, fileReader } from "./experiments/apply.js";
import { guideExperiments, type Measurement } from "./experiments/guide.js";
import {
  affectedTests,
  editsHash,
  inputsHash,
  readRecord,
  snapshotPaths,
  writeRecord,
  type ChapterRecord,
  type FileOutcome,
  type MeasurementRecord,
} from "./experiments/record.js";
import { chapterInputs, chapterNames } from "./test-plan/plan.js";
import { countTests } from "./verify-guides.js";
import { snapshotFiles } from "./verify-snapshots.js";

const repository = fileURLToPath(new URL("../", import.meta.url));

interface Report {
  readonly testResults: readonly {
    readonly name: string;
    readonly status: string;
    readonly message?: string;
    readonly assertionResults: readonly {
      readonly ancestorTitles: readonly string[];
      readonly title: string;
      readonly status: string;
    }[];
  }[];
}

const git = (...args: string[]): string => execFileSync("git", args, { cwd: repository, encoding: "utf8" }).trim();

/**
 * Property tests (fast-check) draw new random cases on every run, so a measurement that turns one of them red could
 * count one more or one fewer the next time. In the scratch worktree only, every chapter project gets a setup file
 * that fixes fast-check's seed, so the same edit at the same commit always counts the same reds.
 */
function seedPropertyTests(tree: string): void {
  const setup = join(tree, "experiment-seed.ts");
  writeFileSync(setup, 'import * as fc from "fast-check";\n\nfc.configureGlobal({ seed: 20261202 });\n');
  const config = join(tree, "vitest.config.ts");
  const text = readFileSync(config, "utf8");
  const seeded = text.replace("setupFiles: [traceSetup],", `setupFiles: [traceSetup, ${JSON.stringify(setup)}],`);
  if (seeded === text)
    throw new Error("vitest.config.ts no longer sets setupFiles: [traceSetup]; update seedPropertyTests");
  writeFileSync(config, seeded);
}

/** Runs `tests` (snapshot-relative) of `chapter` in `tree`; their outcomes and the failed tests' names. */
function runTests(
  tree: string,
  chapter: string,
  tests: readonly string[],
):
  | (Omit<MeasurementRecord, "experiment" | "step" | "edits" | "inputs"> & { unexpected: string[] })
  | { problem: string } {
  const folder = mkdtempSync(join(tmpdir(), "agent-experiment-report-"));
  const reportFile = join(folder, "report.json");
  const started = Date.now();
  const env = { ...process.env };
  delete env.AGENT_TEST_PLAN;
  const run = spawnSync(
    process.execPath,
    [
      join(tree, "node_modules", "vitest", "vitest.mjs"),
      "run",
      "--project",
      chapter,
      "--reporter=json",
      `--outputFile.json=${reportFile}`,
      ...tests.map((file) => `code/chapters/${chapter}/${file}`),
    ],
    { cwd: tree, stdio: ["ignore", "ignore", "inherit"], env },
  );
  const seconds = Math.round((Date.now() - started) / 100) / 10;
  // Ctrl-C reaches vitest and this process alike; a run cut short is no measurement, so stop here (the caller's
  // finally removes the worktree).
  if (run.signal !== null) throw new Error(`vitest was stopped by ${run.signal}`);
  let report: Report;
  try {
    report = JSON.parse(readFileSync(reportFile, "utf8")) as Report;
  } catch {
    return { problem: `vitest wrote no report (exit ${run.status ?? "?"}); run the files by hand to see why` };
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
  const files: Record<string, FileOutcome> = {};
  const failed: string[] = [];
  const broken: string[] = [];
  const chapterDir = join(tree, "code", "chapters", chapter);
  for (const result of report.testResults) {
    const file = relative(chapterDir, result.name).split(sep).join("/");
    const red = result.assertionResults.filter((test) => test.status === "failed");
    files[file] = { tests: result.assertionResults.length, red: red.length };
    for (const test of red) failed.push([file, ...test.ancestorTitles, test.title].join(" › "));
    if (result.status === "failed" && red.length === 0)
      broken.push(`${file}: ${(result.message ?? "failed").split(tree).join(".").split("\n")[0] ?? ""}`);
  }
  // A file vitest did not report, or one it ran beside those asked for, would make the count another run's.
  const unexpected = [
    ...tests.filter((file) => files[file] === undefined).map((file) => `${file} not reported`),
    ...Object.keys(files)
      .filter((file) => !tests.includes(file))
      .map((file) => `${file} ran unasked`),
  ];
  return { red: failed.length, files, failed, broken, seconds, unexpected };
}

/** Measures one chapter's experiments in `tree`; the records, or the problems that stop them. */
function measureChapter(
  tree: string,
  chapter: string,
  measurements: readonly Measurement[],
): { records: MeasurementRecord[]; problems: string[] } {
  const inputs = chapterInputs(snapshotFiles(join(tree, "code", "chapters", chapter)));
  const records: MeasurementRecord[] = [];
  const problems: string[] = [];
  const read = fileReader(tree);
  for (const measurement of measurements) {
    const name = `${chapter} "${measurement.experiment}" (变红 ${measurement.step})`;
    const { paths, outside } = snapshotPaths(chapter, measurement.edits);
    const applied = applyEdits(measurement.edits, read);
    if (outside.length > 0 || "problem" in applied) {
      problems.push(
        `${name}: ${"problem" in applied ? applied.problem : `edits outside the chapter: ${outside.join(", ")}`}`,
      );
      continue;
    }
    const tests = affectedTests(inputs, paths);
    const originals = new Map([...applied.files.keys()].map((path) => [path, read(path) as string]));
    try {
      for (const [path, text] of applied.files) writeFileSync(join(tree, path), text);
      process.stdout.write(`${name}: running ${tests.length} test files … `);
      const outcome = runTests(tree, chapter, tests);
      if ("problem" in outcome) {
        console.log("no result");
        problems.push(`${name}: ${outcome.problem}`);
        continue;
      }
      const broken = outcome.broken.length === 0 ? "" : `, ${outcome.broken.length} files failed as a whole`;
      console.log(`${outcome.red} red${broken} (${outcome.seconds} s)`);
      if (outcome.unexpected.length > 0) problems.push(`${name}: ${outcome.unexpected.join(", ")}`);
      const { unexpected: _unexpected, ...kept } = outcome;
      records.push({
        experiment: measurement.experiment,
        step: measurement.step,
        edits: editsHash(measurement.edits),
        inputs: inputsHash(inputs, tests),
        ...kept,
      });
    } finally {
      for (const [path, text] of originals) writeFileSync(join(tree, path), text);
    }
  }
  return { records, problems };
}

/** How a new measurement differs from the recorded one, in the terms a guide states. */
function differences(before: MeasurementRecord | undefined, after: MeasurementRecord): string[] {
  if (before === undefined) return ["not in the record"];
  if (before.edits !== after.edits) return ["the edit changed since it was recorded"];
  const lines: string[] = [];
  if (before.red !== after.red) lines.push(`red ${after.red}, recorded ${before.red}`);
  const gone = before.failed.filter((test) => !after.failed.includes(test));
  const added = after.failed.filter((test) => !before.failed.includes(test));
  lines.push(...added.map((test) => `red now: ${test}`), ...gone.map((test) => `no longer red: ${test}`));
  if (JSON.stringify(before.broken) !== JSON.stringify(after.broken)) {
    lines.push(
      `files failed as a whole: ${after.broken.join("; ") || "none"}, recorded ${before.broken.join("; ") || "none"}`,
    );
  }
  const files = new Set([...Object.keys(before.files), ...Object.keys(after.files)]);
  for (const file of [...files].sort()) {
    const was = before.files[file];
    const now = after.files[file];
    if (was?.red !== now?.red || was?.tests !== now?.tests) {
      lines.push(
        `${file}: ${now?.red ?? "-"} of ${now?.tests ?? "-"} red, recorded ${was?.red ?? "-"} of ${was?.tests ?? "-"}`,
      );
    }
  }
  return lines;
}

function main(argv: readonly string[]): number {
  const write = argv.includes("--write");
  const only = argv.includes("--only")
    ? argv.slice(argv.indexOf("--only") + 1).filter((arg) => !arg.startsWith("--"))
    : [];
  const chaptersDir = join(repository, "code", "chapters");
  const known = chapterNames(chaptersDir);
  const chapters = known.filter((chapter) => only.length === 0 || only.includes(chapter));
  const guides = new Map<string, readonly Measurement[]>();
  const problems = only
    .filter((chapter) => !known.includes(chapter))
    .map((chapter) => `--only ${chapter}: no such chapter (${known.join(", ")})`);
  for (const chapter of chapters) {
    let guide: string;
    try {
      guide = readFileSync(join(repository, "chapters", `${chapter}.md`), "utf8");
    } catch {
      continue;
    }
    const parsed = guideExperiments(guide);
    problems.push(...parsed.problems.map((problem) => `chapters/${chapter}.md: ${problem}`));
    if (parsed.measurements.length > 0) guides.set(chapter, parsed.measurements);
  }
  if (write) {
    const dirty = git(
      "status",
      "--porcelain",
      "--",
      ...[...guides.keys()].map((chapter) => `code/chapters/${chapter}`),
      "vitest.config.ts",
      "scripts/test-plan",
    );
    if (dirty !== "") problems.push(`--write measures HEAD; commit these first:\n${dirty}`);
  }
  if (problems.length > 0) {
    console.error(problems.join("\n"));
    return 1;
  }
  const commit = git("rev-parse", "--short", "HEAD");
  // Read before the worktree exists: a record that does not parse must not leave one behind.
  const record = { ...readRecord(repository) } as Record<string, ChapterRecord>;
  const tree = mkdtempSync(join(tmpdir(), "agent-experiments-"));
  rmSync(tree, { recursive: true });
  git("worktree", "add", "--detach", tree, "HEAD");
  let disagree = 0;
  try {
    symlinkSync(join(repository, "node_modules"), join(tree, "node_modules"), "junction");
    seedPropertyTests(tree);
    const counts = write ? countTests(repository) : undefined;
    for (const [chapter, measurements] of guides) {
      const measured = measureChapter(tree, chapter, measurements);
      problems.push(...measured.problems);
      const recorded = record[chapter];
      for (const entry of measured.records) {
        const before = recorded?.measurements.find(
          (old) => old.experiment === entry.experiment && old.step === entry.step,
        );
        const lines = differences(before, entry);
        if (lines.length === 0) continue;
        disagree += 1;
        console.log(`${chapter} "${entry.experiment}" (变红 ${entry.step}) differs from the record:`);
        for (const line of lines) console.log(`  ${line}`);
      }
      if (write && measured.problems.length === 0) {
        const tests = [...(counts?.get(chapter)?.values() ?? [])].reduce((sum, count) => sum + count, 0);
        record[chapter] = {
          commit,
          date: new Date().toISOString().slice(0, 10),
          tests,
          measurements: measured.records,
        };
        writeRecord(repository, record);
      }
    }
  } finally {
    git("worktree", "remove", "--force", tree);
  }
  if (problems.length > 0) {
    console.error(problems.join("\n"));
    return 1;
  }
  if (write) {
    console.log(
      `Recorded ${[...guides.keys()].join(", ")} at ${commit} in docs/experiments.json; now make the guides say it (npm run verify:guides).`,
    );
    return 0;
  }
  console.log(
    disagree === 0
      ? "Every experiment turns as many tests red as the record says."
      : `${disagree} measurements differ from the record.`,
  );
  return disagree === 0 ? 0 : 1;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = main(process.argv.slice(2));
}
