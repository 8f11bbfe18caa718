// What verify:guides checks of the guides' experiments without running one: every edit still applies to the
// snapshot as the guide shows it, every 变红 number and per-file claim is the record's (docs/experiments.json), and
// the guide names the commit, date and gate size the record was measured at. A record whose tests' inputs changed
// since is reported as a note, not a failure: the guide's numbers are true of the commit it names.
import type { TestInputs } from "../test-plan/plan.js";
import { applyEdits, fileReader, gitApply } from "./apply.js";
import { guideExperiments, type Measurement, type Patch } from "./guide.js";
import { affectedTests, editsHash, inputsHash, snapshotPaths, type ChapterRecord } from "./record.js";

const label = (measurement: Pick<Measurement, "experiment" | "step">): string =>
  `"${measurement.experiment}" (变红 ${measurement.step})`;

/**
 * The guide's problems with its own chapter's record; `notes` name measurements whose tests changed since. `inputs`
 * are the chapter's test inputs as the test plan has them (scripts/test-plan), which the caller has already made.
 */
export function chapterExperimentProblems(
  repo: string,
  chapter: string,
  guide: string,
  record: ChapterRecord | undefined,
  inputs: ReadonlyMap<string, TestInputs>,
): { problems: string[]; notes: string[]; measured: number } {
  const name = `chapters/${chapter}.md`;
  const { measurements, patches, problems: parseProblems } = guideExperiments(guide);
  const problems = parseProblems.map((problem) => `${name}: ${problem}`);
  problems.push(...gitApplyProblems(name, patches, measurements, fileReader(repo)));
  const notes: string[] = [];
  if (measurements.length === 0) {
    if (record !== undefined) problems.push(`${name}: shows no measured experiment, but the record has ${chapter}`);
    return { problems, notes, measured: 0 };
  }
  const read = fileReader(repo);
  const stale: string[] = [];
  for (const measurement of measurements) {
    const where = `${name}:${measurement.line}: ${label(measurement)}`;
    const { paths, outside } = snapshotPaths(chapter, measurement.edits);
    if (outside.length > 0) problems.push(`${where} edits ${outside.join(", ")}, outside code/chapters/${chapter}/`);
    const applied = applyEdits(measurement.edits, read);
    if ("problem" in applied) problems.push(`${where}: its edit does not apply: ${applied.problem}`);
    const measured = record?.measurements.find(
      (entry) => entry.experiment === measurement.experiment && entry.step === measurement.step,
    );
    if (measured === undefined) {
      problems.push(
        `${where} is not in docs/experiments.json; measure it: npm run verify:experiments -- --write --only ${chapter}`,
      );
      continue;
    }
    if (measured.edits !== editsHash(measurement.edits)) {
      problems.push(
        `${where}: its edit changed since it was measured; measure it: npm run verify:experiments -- --write --only ${chapter}`,
      );
      continue;
    }
    if (measured.red !== measurement.red)
      problems.push(`${where}: says 变红 ${measurement.red}, the record has ${measured.red}`);
    const redIn = (file: string): number | undefined => measured.files[`tests/${file}`]?.red;
    for (const [file, count] of measurement.claims.perFile) {
      if (redIn(file) !== count)
        problems.push(`${where}: says ${file} ${count}, the record has ${redIn(file) ?? "no run of it"}`);
    }
    for (const [file, count] of measurement.claims.fileTotals) {
      const tests = measured.files[`tests/${file}`]?.tests;
      if (tests !== count)
        problems.push(`${where}: says ${file} 共 ${count} 个, the record has ${tests ?? "no run of it"}`);
    }
    for (const chain of measurement.claims.namedRed) {
      if (!measured.failed.some((name) => namesTest(name, chain))) {
        problems.push(`${where}: names ${chain.join(" › ")} as red, the record's failed tests do not include it`);
      }
    }
    const { onlyIn } = measurement.claims;
    if (onlyIn !== undefined) {
      const others = Object.entries(measured.files).filter(
        ([file, outcome]) => outcome.red > 0 && file !== `tests/${onlyIn}`,
      );
      if (others.length > 0)
        problems.push(
          `${where}: says every red is in ${onlyIn}, the record has reds in ${others.map(([file]) => file).join(", ")}`,
        );
    }
    if (inputsHash(inputs, affectedTests(inputs, paths)) !== measured.inputs) stale.push(label(measurement));
  }
  if (record !== undefined) {
    for (const entry of record.measurements) {
      if (
        !measurements.some(
          (measurement) => measurement.experiment === entry.experiment && measurement.step === entry.step,
        )
      ) {
        problems.push(`docs/experiments.json: ${chapter} has ${label(entry)}, which ${name} no longer shows`);
      }
    }
    problems.push(...provenanceProblems(name, guide, record));
    if (stale.length > 0) {
      notes.push(
        `${name}: the tests behind ${stale.join(", ")} changed since ${record.commit}; the guide's numbers are of that commit (re-measure: npm run verify:experiments -- --write --only ${chapter})`,
      );
    }
  }
  return { problems, notes, measured: measurements.length };
}

/**
 * Each experiment's diff blocks as a reader applies them, `git apply` one after another: git must take every block,
 * and leave the files exactly as the guide's own reading (applyEdits) of the experiment's last measurement does.
 */
function gitApplyProblems(
  name: string,
  patches: readonly Patch[],
  measurements: readonly Measurement[],
  read: (path: string) => string | undefined,
): string[] {
  const problems: string[] = [];
  for (const experiment of [...new Set(patches.map((patch) => patch.experiment))]) {
    const own = patches.filter((patch) => patch.experiment === experiment);
    // A block with a hunk that has no header is already refused by name (guide.ts); git would only say it again.
    if (own.some((patch) => /^[-+ ]/m.test(patch.text) && !/^@@ -\d/m.test(patch.text))) continue;
    const where = `${name}:${own[0]?.line ?? 0}: "${experiment}"`;
    const applied = gitApply(
      own.map((patch) => patch.text),
      read,
    );
    if ("problem" in applied) {
      problems.push(`${where}: ${applied.problem}`);
      continue;
    }
    const last = measurements.filter((measurement) => measurement.experiment === experiment).at(-1);
    if (last === undefined) continue;
    const ours = applyEdits(last.edits, read);
    if ("problem" in ours) continue; // reported with the measurement
    for (const [path, text] of ours.files) {
      if (applied.files.get(path) !== text) {
        problems.push(`${where}: git apply changes ${path} elsewhere than its hunks' lines say; fix the @@ numbers`);
      }
    }
  }
  return problems;
}

/**
 * Whether a recorded failed test (`tests/x.test.ts › describe › test`) is the one a guide's chain names: a leading
 * test file must be its file, and the other parts must be among its titles in order, each whole, or as a prefix
 * when it ends in …, or as the label of a title `label: …` (`rule 16` for `rule 16: the CLI prints …`).
 */
export function namesTest(failed: string, chain: readonly string[]): boolean {
  const [file, ...titles] = failed.split(" › ");
  let parts = chain;
  if (parts[0]?.endsWith(".test.ts") === true) {
    if (file !== `tests/${parts[0]}`) return false;
    parts = parts.slice(1);
  }
  const fits = (part: string, title: string): boolean =>
    part.endsWith("…")
      ? title.startsWith(part.slice(0, -1).trimEnd())
      : title === part || title.startsWith(`${part}: `);
  let at = 0;
  for (const part of parts) {
    while (at < titles.length && !fits(part, titles[at] as string)) at += 1;
    if (at === titles.length) return false;
    at += 1;
  }
  return true;
}

/** The guide's sentence that says where its numbers come from must name the record's commit, date and gate size. */
function provenanceProblems(name: string, guide: string, record: ChapterRecord): string[] {
  const section = guide.split(/\n(?=## )/).find((part) => /^## .*动手实验/.test(part)) ?? "";
  const paragraph = section.split(/\n\s*\n/).find((part) => part.includes("npm run verify:experiments"));
  if (paragraph === undefined)
    return [`${name}: its hands-on section never says the numbers come from npm run verify:experiments`];
  const wanted = [`提交 \`${record.commit}\``, record.date, `共 ${record.tests} 个测试`];
  return wanted
    .filter((text) => !paragraph.includes(text))
    .map((text) => `${name}: the paragraph naming npm run verify:experiments does not say ${text} (the record's)`);
}
