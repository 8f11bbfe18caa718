// `npm run verify:experiments`: makes every experiment the chapter guides show and counts the tests it turns red.
// For each chapter guide with experiments (scripts/experiments/guide.ts), in a git worktree of HEAD with the
// repository's node_modules linked in, it applies each measurement's edits, runs the test files whose inputs hold
// an edited file (the rest are unedited and pass in the gate), and compares what failed with docs/experiments.json.
//   npm run verify:experiments                          # measure every chapter, compare with the record
//   npm run verify:experiments -- --only ch02 ch03      # only these chapters
//   npm run verify:experiments -- --write --only ch02   # measure and record (the chapter must be committed)
//   npm run verify:experiments -- --help                # this usage
// It takes minutes per chapter, so it is not part of npm test; verify:guides (in npm test) holds the guides to the
// record without running anything. Everything it makes is in one scratch folder (the worktree, vitest's reports and
// the tests' temp folders). Stopped by Ctrl-C, SIGTERM (what `timeout` sends) or SIGHUP, it stops its vitest and
// removes that folder and the worktree before it exits; experiments/janitor.mjs does the same if it is killed outright.
import { execFile, execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { constants, tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
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

export const USAGE = `Usage: npm run verify:experiments [-- --only chNN …] [-- --write]

Makes every experiment the chapter guides show in a scratch git worktree of HEAD, runs the tests it can turn red,
and compares the reds with docs/experiments.json. Minutes per chapter.
  --only chNN …   only these chapters (ch02 ch03 …)
  --write         measure and record in docs/experiments.json (the chapters must be committed)
  --help          this text
Ctrl-C, SIGTERM (timeout) and SIGHUP stop it and remove its worktree and temp folders.`;

/** What a stop must undo: the vitest that runs, the worktree, and the scratch folder that holds both. */
const scratch: {
  child: ChildProcess | undefined;
  root: string | undefined;
  tree: string | undefined;
  /** `git worktree add` while it runs: a stop waits for it, since git refuses to remove a worktree it is adding. */
  adding: Promise<unknown> | undefined;
} = { child: undefined, root: undefined, tree: undefined, adding: undefined };

/** Stops the running vitest and its workers: its own process group on POSIX, its process tree on Windows. */
function stopChild(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    if (process.platform === "win32") spawnSync("taskkill", ["/pid", String(child.pid), "/T", "/F"]);
    else process.kill(-child.pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

/** Removes what `scratch` holds; safe to call twice. */
function removeScratch(): void {
  if (scratch.child !== undefined) stopChild(scratch.child);
  scratch.child = undefined;
  const { root, tree } = scratch;
  scratch.root = undefined;
  scratch.tree = undefined;
  if (tree !== undefined) {
    try {
      git("worktree", "remove", "--force", "--force", tree);
    } catch {
      rmSync(tree, { recursive: true, force: true });
      try {
        git("worktree", "prune");
      } catch {
        // What is left is git's note of a folder that is gone; the next `git worktree prune` drops it.
      }
    }
  }
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
}

/**
 * Makes the scratch folder and the worktree in it, with the janitor watching: the run answers a signal itself, but
 * tsx kills it outright (SIGKILL) when it does not answer a relayed one within 60 ms, and `kill -9` gives it no
 * chance at all. The worktree is added asynchronously so that a signal is answered while git checks it out.
 */
async function makeScratch(): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), "agent-experiments-"));
  const tree = join(root, "tree");
  scratch.root = root;
  spawn(
    process.execPath,
    [fileURLToPath(new URL("./experiments/janitor.mjs", import.meta.url)), String(process.pid), repository, root, tree],
    { detached: true, stdio: "ignore", windowsHide: true },
  ).unref();
  scratch.tree = tree;
  scratch.adding = promisify(execFile)("git", ["worktree", "add", "--detach", tree, "HEAD"], { cwd: repository });
  await scratch.adding;
  scratch.adding = undefined;
  return tree;
}

let stopping = false;

function onSignal(signal: NodeJS.Signals): void {
  if (stopping) return;
  stopping = true;
  console.error(`\nverify:experiments: stopped by ${signal}; removing its worktree and temp folders`);
  if (scratch.child !== undefined) stopChild(scratch.child);
  void (scratch.adding ?? Promise.resolve())
    .catch(() => undefined)
    .then(() => {
      removeScratch();
      process.exit(128 + constants.signals[signal]);
    });
}

/** Runs vitest in its own process group (so a signal to this process can stop all of it); its exit status. */
function runVitest(args: readonly string[], cwd: string, env: NodeJS.ProcessEnv): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd,
      env,
      stdio: ["ignore", "ignore", "inherit"],
      detached: process.platform !== "win32",
    });
    scratch.child = child;
    if (scratch.root !== undefined && child.pid !== undefined)
      writeFileSync(join(scratch.root, "vitest.pid"), String(child.pid));
    child.on("error", reject);
    child.on("close", (status, signal) => {
      scratch.child = undefined;
      if (signal !== null) reject(new Error(`vitest was stopped by ${signal}`));
      else resolve(status);
    });
  });
}

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
async function runTests(
  tree: string,
  chapter: string,
  tests: readonly string[],
): Promise<
  (Omit<MeasurementRecord, "experiment" | "step" | "edits" | "inputs"> & { unexpected: string[] }) | { problem: string }
> {
  const folder = mkdtempSync(join(scratch.root ?? tmpdir(), "report-"));
  const reportFile = join(folder, "report.json");
  const started = Date.now();
  // The tests' own temp folders go inside this run's folder too, so a vitest stopped mid-run leaves none behind.
  const temp = join(folder, "tmp");
  mkdirSync(temp);
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: temp, TMP: temp, TEMP: temp };
  delete env.AGENT_TEST_PLAN;
  // A vitest stopped by a signal is no measurement: runVitest rejects, and the caller's finally removes the worktree.
  const status = await runVitest(
    [
      join(tree, "node_modules", "vitest", "vitest.mjs"),
      "run",
      "--project",
      chapter,
      "--reporter=json",
      `--outputFile.json=${reportFile}`,
      ...tests.map((file) => `code/chapters/${chapter}/${file}`),
    ],
    tree,
    env,
  );
  const seconds = Math.round((Date.now() - started) / 100) / 10;
  let report: Report;
  try {
    report = JSON.parse(readFileSync(reportFile, "utf8")) as Report;
  } catch {
    return { problem: `vitest wrote no report (exit ${status ?? "?"}); run the files by hand to see why` };
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
async function measureChapter(
  tree: string,
  chapter: string,
  measurements: readonly Measurement[],
): Promise<{ records: MeasurementRecord[]; problems: string[] }> {
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
      const outcome = await runTests(tree, chapter, tests);
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

/** The command line read, or what is wrong with it. */
export function parseArguments(
  argv: readonly string[],
): { help: true } | { help: false; write: boolean; only: string[] } | { problem: string } {
  if (argv.includes("--help") || argv.includes("-h")) return { help: true };
  const only: string[] = [];
  let write = false;
  let inOnly = false;
  for (const arg of argv) {
    if (arg === "--write") write = true;
    else if (arg === "--only") inOnly = true;
    else if (arg.startsWith("--only=")) only.push(...arg.slice("--only=".length).split(",").filter(Boolean));
    else if (!arg.startsWith("-") && inOnly) only.push(...arg.split(",").filter(Boolean));
    else return { problem: `unknown argument ${JSON.stringify(arg)}` };
  }
  if (inOnly && only.length === 0) return { problem: "--only names no chapter" };
  return { help: false, write, only };
}

async function main(argv: readonly string[]): Promise<number> {
  const parsed = parseArguments(argv);
  if ("problem" in parsed) {
    console.error(`${parsed.problem}\n\n${USAGE}`);
    return 2;
  }
  if (parsed.help) {
    console.log(USAGE);
    return 0;
  }
  const { write, only } = parsed;
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
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, onSignal);
  let disagree = 0;
  try {
    const tree = await makeScratch();
    symlinkSync(join(repository, "node_modules"), join(tree, "node_modules"), "junction");
    seedPropertyTests(tree);
    const counts = write ? countTests(repository) : undefined;
    for (const [chapter, measurements] of guides) {
      const measured = await measureChapter(tree, chapter, measurements);
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
    removeScratch();
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
  process.exitCode = await main(process.argv.slice(2));
}
