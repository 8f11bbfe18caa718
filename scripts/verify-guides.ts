// The chapter guides state test counts; this checks each one against what vitest really collects, so a
// guide cannot go on claiming a number after the tests changed. Usage: `npm run verify:guides` (part of
// `npm test`). It checks two forms in chapters/chNN.md:
//   - the sentence "书中 X 个测试，本仓库 N 个": N must be the chapter's whole gate;
//   - in a table whose second column is headed 个数, a row whose first cell names test files (`a.test.ts`,
//     `b.test.ts`): its number must be those files' tests added up. Other tables (say, how many tests an
//     experiment turns red) are not counts of the gate and are left alone;
//   - such a table's rows add up to the guide's 本仓库 N: every file of the gate is in it, once.
// It also holds chapters/*.md, README.md and docs/*.md to the writing rules of doc-rules.ts: no line numbers,
// no `npm run` of a script the root package.json lacks, no pointers to SPEC or issues, and `npm run -s`
// wherever a command pipes or redirects npm's output; every name a guide's command makes in the repository root is
// git-ignored. And it holds each guide's hands-on experiments to the record
// `npm run verify:experiments -- --write` made (docs/experiments.json, see scripts/experiments/claims.ts).
import { execFileSync, spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createdNames, docProblems, newestDemoChapter } from "./doc-rules.js";
import { chapterExperimentProblems } from "./experiments/claims.js";
import { readRecord } from "./experiments/record.js";
import { timingProblems } from "./gate-timing.js";
import { costProblems } from "./test-plan/cost.js";
import { countKey, readCountCache, writeCountCache, type GateCounts } from "./test-plan/count-cache.js";
import { testPlan, type PlanEntry, type TestPlan } from "./test-plan/plan.js";

/** Tests per file of one chapter's gate, as `vitest list` names the files (`tests/x.test.ts`). */
export type TestCounts = ReadonlyMap<string, number>;

const TOTAL = /本仓库\s*(\d+)\s*个/g;
const ROW = /^\|([^|]*)\|\s*(\d+)\s*\|/;
const TEST_FILE = /`([\w./-]+\.test\.ts)`/g;

/** Every count in `guide` that disagrees with `counts`; empty when all agree. */
export function guideProblems(guideName: string, guide: string, counts: TestCounts): string[] {
  const total = [...counts.values()].reduce((sum, count) => sum + count, 0);
  const problems: string[] = [];
  for (const match of guide.matchAll(TOTAL)) {
    if (Number(match[1]) !== total) problems.push(`${guideName}: says 本仓库 ${match[1]} 个, the gate has ${total}`);
  }
  const stated = [...guide.matchAll(TOTAL)].map((match) => Number(match[1]))[0];
  let header: string | undefined;
  let headerLine = 0;
  let table: { line: number; sum: number; files: string[] } | undefined;
  const closeTable = (): void => {
    if (table === undefined || stated === undefined) return;
    const named = new Set(table.files);
    const twice = table.files.filter((file, at) => table?.files.indexOf(file) !== at);
    const unnamed = [...counts.keys()].map((file) => file.replace(/^tests\//, "")).filter((file) => !named.has(file));
    if (table.sum !== stated || twice.length > 0) {
      const why = [
        unnamed.length > 0 ? `the gate's files it does not name: ${unnamed.join(", ")}` : "",
        twice.length > 0 ? `named twice: ${[...new Set(twice)].join(", ")}` : "",
      ].filter(Boolean);
      problems.push(
        `${guideName}:${table.line}: the 个数 table's rows add up to ${table.sum}, the guide says 本仓库 ${stated} 个${why.length > 0 ? ` (${why.join("; ")})` : ""}`,
      );
    }
    table = undefined;
  };
  guide.split("\n").forEach((line, index) => {
    if (!line.startsWith("|")) {
      header = undefined;
      closeTable();
      return;
    }
    if (header === undefined) headerLine = index + 1;
    header ??= line;
    const row = ROW.exec(line);
    // A gate table has 个数 in its second column; an experiment's table of tests turned red (变红) is no count of the gate.
    if (row === null || !(header.split("|")[2] ?? "").includes("个数") || header.includes("变红")) return;
    const files = [...(row[1] as string).matchAll(TEST_FILE)].map((file) => file[1] as string);
    if (files.length === 0) return;
    table ??= { line: headerLine, sum: 0, files: [] };
    table.sum += Number(row[2]);
    table.files.push(...files);
    const missing = files.filter((file) => !counts.has(`tests/${file}`));
    if (missing.length > 0) {
      problems.push(`${guideName}:${index + 1}: names ${missing.join(", ")}, which the gate does not have`);
      return;
    }
    const sum = files.reduce((acc, file) => acc + (counts.get(`tests/${file}`) ?? 0), 0);
    if (Number(row[2]) !== sum) {
      problems.push(`${guideName}:${index + 1}: says ${row[2]} for ${files.join(", ")}, the gate has ${sum}`);
    }
  });
  closeTable();
  return problems;
}

/** Tests per file of each chapter's gate: chapter (`ch03`) → counts. */
export type { GateCounts };

/**
 * Each chapter's counts over the test plan (scripts/test-plan): a file the plan runs has its count from the
 * count cache when its inputs are unchanged since it was counted, else from one `vitest list` of the files
 * not cached; a file the plan reuses has the count of the run it reuses, since its inputs are the same bytes.
 */
export function countTests(repo: string, plan: TestPlan = testPlan(join(repo, "code", "chapters"))): GateCounts {
  const cache = readCountCache(repo);
  const ran = new Map<string, Map<string, number>>();
  const missing: PlanEntry[] = [];
  for (const entry of plan.entries.filter((row) => row.action === "run")) {
    const inputs = plan.inputs.get(entry.chapter)?.get(entry.file);
    const count = inputs === undefined ? undefined : cache.get(countKey(entry.file, inputs));
    if (count === undefined) missing.push(entry);
    else ran.set(entry.chapter, (ran.get(entry.chapter) ?? new Map<string, number>()).set(entry.file, count));
  }
  if (missing.length > 0) {
    const listed = listTests(
      repo,
      missing.map((entry) => join("code", "chapters", entry.chapter, entry.file)),
    );
    writeCountCache(repo, plan, listed);
    for (const [chapter, files] of listed) {
      for (const [file, count] of files)
        ran.set(chapter, (ran.get(chapter) ?? new Map<string, number>()).set(file, count));
    }
  }
  return withReused(ran, plan.entries);
}

/** `vitest list` of `files` (repository-relative), counted per chapter and file. */
function listTests(repo: string, files: readonly string[]): GateCounts {
  const output = execFileSync(process.execPath, [vitestBin(repo), "list", ...files], {
    cwd: repo,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, AGENT_TEST_PLAN: "reuse" },
  });
  const counts = new Map<string, Map<string, number>>();
  for (const line of output.split("\n")) {
    const match = /^\[(ch\d\d)\] (\S+\.test\.ts) > /.exec(line);
    if (match === null) continue;
    const [, chapter, file] = match as unknown as [string, string, string];
    const chapterCounts = counts.get(chapter) ?? new Map<string, number>();
    chapterCounts.set(file, (chapterCounts.get(file) ?? 0) + 1);
    counts.set(chapter, chapterCounts);
  }
  return counts;
}

/** `counts` of the files that ran, completed with the reused files' counts from the chapters that ran them. */
export function withReused(ran: GateCounts, entries: readonly PlanEntry[]): GateCounts {
  const counts = new Map<string, Map<string, number>>();
  for (const entry of entries) {
    const from = entry.action === "reuse" ? (entry.reusedFrom ?? "") : entry.chapter;
    const count = ran.get(from)?.get(entry.file);
    if (count === undefined) continue;
    const chapterCounts = counts.get(entry.chapter) ?? new Map<string, number>();
    chapterCounts.set(entry.file, count);
    counts.set(entry.chapter, chapterCounts);
  }
  return counts;
}

function vitestBin(repo: string): string {
  return join(repo, "node_modules", "vitest", "vitest.mjs");
}

/** The guides and docs the writing rules hold: chapters/*.md, README.md, docs/*.md, relative to `repo`. */
export function docFiles(repo: string): string[] {
  const markdown = (folder: string): string[] =>
    readdirSync(join(repo, folder))
      .filter((name) => name.endsWith(".md"))
      .sort()
      .map((name) => `${folder}/${name}`);
  return [...markdown("chapters"), "README.md", ...markdown("docs")];
}

/**
 * Each file or folder a command in `docs` (relative to `repo`) makes in the repository root that git would then
 * show: not ignored by the root .gitignore (`git check-ignore --no-index`) and not a folder the repository tracks
 * already (`--workspace code`). Empty when following the guides leaves `git status` clean.
 */
export function unignoredNames(repo: string, docs: readonly string[]): string[] {
  const git = (args: readonly string[], input?: string): string =>
    spawnSync("git", args, { cwd: repo, encoding: "utf8", input, maxBuffer: 64 * 1024 * 1024 }).stdout;
  // Each tracked file and each folder holding one: `code` is there already, `code/scratch` is the reader's.
  const tracked = new Set(
    git(["ls-files", "-z"])
      .split("\0")
      .flatMap((file) => file.split("/").map((_, at, parts) => parts.slice(0, at + 1).join("/"))),
  );
  const made = docs.flatMap((file) =>
    createdNames(readFileSync(join(repo, file), "utf8"))
      .filter((name) => !tracked.has(name.path))
      .map((name) => ({ file, ...name, asked: name.folder ? `${name.path}/` : name.path })),
  );
  if (made.length === 0) return [];
  // Exit code 1 (none ignored) is an answer too; stdout lists the ignored ones, as asked.
  const ignored = new Set(
    git(["check-ignore", "--no-index", "--stdin"], made.map((name) => name.asked).join("\n")).split("\n"),
  );
  return made
    .filter((name) => !ignored.has(name.asked))
    .map(
      (name) =>
        `${name.file}:${name.line}: makes ${name.asked} in the repository, which the root .gitignore does not ignore (git status would show it)`,
    );
}

/**
 * Every way the guides disagree with `counts`, with the writing rules or with the experiments' record; empty when
 * they agree. `plan` is the test plan of the same tree, made here when the caller has none.
 */
export function verifyGuides(
  repo: string,
  counts: GateCounts,
  plan: TestPlan = testPlan(join(repo, "code", "chapters")),
): { guides: string[]; docs: string[]; problems: string[]; notes: string[] } {
  const guides = readdirSync(join(repo, "chapters")).filter((name) => /^ch\d\d\.md$/.test(name));
  const problems = guides.flatMap((name) =>
    guideProblems(
      `chapters/${name}`,
      readFileSync(join(repo, "chapters", name), "utf8"),
      counts.get(name.slice(0, 4)) ?? new Map(),
    ),
  );
  const rootPackage = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as {
    scripts: Record<string, string>;
  };
  const scripts = new Set(Object.keys(rootPackage.scripts));
  const newestDemo = newestDemoChapter(rootPackage.scripts);
  const docs = docFiles(repo);
  const ruleProblems = docs.flatMap((file) =>
    docProblems(file, readFileSync(join(repo, file), "utf8"), scripts, newestDemo),
  );
  if (problems.length > 0) problems.unshift("Guides state counts the tests do not have:");
  if (ruleProblems.length > 0) problems.push("Guides and docs break the writing rules:", ...ruleProblems);
  const unignored = unignoredNames(repo, [...guides.map((name) => `chapters/${name}`), "README.md"]);
  if (unignored.length > 0)
    problems.push("Guides make names in the repository that git does not ignore:", ...unignored);
  const cost = costProblems(repo, plan);
  if (cost.length > 0) problems.push("Docs state test-plan costs the plan does not have:", ...cost);
  const timing = timingProblems(repo);
  if (timing.length > 0) problems.push("Docs state gate times that were not measured:", ...timing);
  const record = readRecord(repo);
  const experiments = guides.map((name) =>
    chapterExperimentProblems(
      repo,
      name.slice(0, 4),
      readFileSync(join(repo, "chapters", name), "utf8"),
      record[name.slice(0, 4)],
      plan.inputs.get(name.slice(0, 4)) ?? new Map(),
    ),
  );
  const experimentProblems = experiments.flatMap((chapter) => chapter.problems);
  if (experimentProblems.length > 0) {
    problems.push("Guides' experiments disagree with docs/experiments.json or the code:", ...experimentProblems);
  }
  return { guides, docs, problems, notes: experiments.flatMap((chapter) => chapter.notes) };
}

/** Prints what `verifyGuides` found; false when anything disagrees. */
export function reportGuides(repo: string, counts: GateCounts, plan?: TestPlan): boolean {
  const { guides, docs, problems, notes } = verifyGuides(repo, counts, plan);
  for (const note of notes) console.log(`Note: ${note}`);
  if (problems.length > 0) {
    console.error(problems.map((line) => (line.endsWith(":") ? line : `- ${line}`)).join("\n"));
    return false;
  }
  console.log(`Guides' test counts match the gates (${guides.join(", ")}).`);
  console.log(`Guides and docs keep the writing rules (${docs.length} files).`);
  console.log("Guides' experiments apply to the code and state the numbers docs/experiments.json records.");
  return true;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const repo = fileURLToPath(new URL("../", import.meta.url));
  const plan = testPlan(join(repo, "code", "chapters"));
  if (!reportGuides(repo, countTests(repo, plan), plan)) process.exit(1);
}
