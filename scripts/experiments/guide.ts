// The experiments a chapter guide (chapters/chNN.md) asks its reader to make, read from the guide itself, so the
// edit a reader copies and the edit `npm run verify:experiments` measures are the same text. In the guide's
// `## …动手实验…` section every `###` heading is one experiment; its ```diff blocks are its edits, and each
// `**变红：N 个**` in it is one measurement of every edit shown above it in that experiment (so a second step
// is written as a diff over the first). A diff block is a unified diff that `git apply` takes:
//
//     --- a/code/chapters/ch01/src/core/loop.ts
//     +++ b/code/chapters/ch01/src/core/loop.ts
//     @@ -92,1 +92,1 @@
//     -    const maxTurns = options.maxTurns ?? 20;
//     +    const maxTurns = options.maxTurns ?? 1;
//
// Here a hunk is found by its lines, not its numbers: its context and removed lines must occur exactly once in the
// file, so a guide whose code moved is caught even where git would apply it at an offset; claims.ts also runs
// `git apply` on the blocks and holds its result to this reading. A hunk without a header (a bare `@@`, or none)
// is read the same way but refused, since a reader's `git apply` refuses it. The paragraph of a measurement may
// also claim how the reds split up; those claims are read here too, and held to the record by claims.ts.

import { docLines, type DocLine } from "../doc-rules.js";

/** One hunk: the lines it expects (context and removed) and the lines it leaves (context and added). */
export interface Hunk {
  readonly before: readonly string[];
  readonly after: readonly string[];
}

/** The hunks of one file, by its repository-relative path, in the order they apply. */
export interface FileEdit {
  readonly path: string;
  readonly hunks: readonly Hunk[];
}

/** What a measurement's paragraph says about the reds, beside their number. */
export interface RedClaims {
  /** `x.test.ts` N, and `a.test.ts`、`b.test.ts` 各 N: reds per test file. */
  readonly perFile: ReadonlyMap<string, number>;
  /** 全在 / 都在 / 全部在 `x.test.ts`: every red is in this file. */
  readonly onlyIn: string | undefined;
  /** `x.test.ts` … 共 N 个: the file then holds N tests. */
  readonly fileTotals: ReadonlyMap<string, number>;
  /**
   * `describe` › `test` chains (a file may lead, a part ending in … is a prefix) the paragraph names as red; a
   * sentence saying a test proves (证明) something, or holds the same assertion (同样的断言), names a test that stays
   * green, and is left out.
   */
  readonly namedRed: readonly (readonly string[])[];
}

export interface Measurement {
  /** The experiment's heading, without the `### `. */
  readonly experiment: string;
  /** 1 for the experiment's first `变红`, 2 for its second, … */
  readonly step: number;
  /** The guide's line of the `变红` statement (1-based), for messages only. */
  readonly line: number;
  readonly red: number;
  /** Every edit shown above the statement in its experiment, in order. */
  readonly edits: readonly FileEdit[];
  readonly claims: RedClaims;
}

/** One diff block as the guide prints it: what `git apply` is given, in the order the experiment applies them. */
export interface Patch {
  readonly experiment: string;
  /** The guide's line of the block's opening fence (1-based), for messages only. */
  readonly line: number;
  /** The block's lines, ending in a newline, as a reader saves them to a file for `git apply`. */
  readonly text: string;
}

export interface GuideExperiments {
  readonly measurements: readonly Measurement[];
  /** Every diff block of the hands-on section, in order. */
  readonly patches: readonly Patch[];
  /** What in the guide cannot be read as an experiment (a diff block without a file, a bad line). */
  readonly problems: readonly string[];
}

const RED = /\*\*变红：(\d+) 个。?\*\*/;
const TEST_FILE = "`([\\w./-]+\\.test\\.ts)`";

/**
 * Reads a diff block's lines into edits; a problem for each line that is not part of one. `unheaded` names the file
 * of each hunk that opens with no `@@ -a,b +c,d @@` header (git apply refuses those; the guides must not print them).
 */
export function parseDiff(lines: readonly string[]): { edits: FileEdit[]; problems: string[]; unheaded: string[] } {
  const edits: { path: string; hunks: { before: string[]; after: string[] }[] }[] = [];
  const problems: string[] = [];
  const unheaded: string[] = [];
  let headed = false;
  let current: (typeof edits)[number] | undefined;
  for (let index = 0; index < lines.length; index += 1) {
    const line = lines[index] as string;
    const from = /^--- a\/(\S+)$/.exec(line);
    if (from !== null) {
      const to = /^\+\+\+ b\/(\S+)$/.exec(lines[index + 1] ?? "");
      if (to === null || to[1] !== from[1]) {
        problems.push(`"--- a/${from[1]}" is not followed by "+++ b/${from[1]}"`);
        return { edits, problems, unheaded };
      }
      current = { path: from[1] as string, hunks: [{ before: [], after: [] }] };
      edits.push(current);
      headed = false;
      index += 1;
      continue;
    }
    if (current === undefined) {
      problems.push(`a diff line before any "--- a/<path>": ${JSON.stringify(line)}`);
      return { edits, problems, unheaded };
    }
    // A bare `@@`, or a unified diff's header (`@@ -12,6 +12,9 @@ …`, which git apply takes), starts a hunk; the
    // header's numbers are not needed here, since a hunk is found by its lines.
    if (line === "@@" || /^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@/.test(line)) {
      const open = current.hunks.at(-1);
      if (open !== undefined && open.before.length + open.after.length > 0)
        current.hunks.push({ before: [], after: [] });
      headed = line !== "@@";
      continue;
    }
    const hunk = current.hunks.at(-1) as { before: string[]; after: string[] };
    if (hunk.before.length + hunk.after.length === 0 && !headed) unheaded.push(current.path);
    const mark = line.slice(0, 1);
    const text = line.slice(1);
    if (mark === "" || mark === " ") {
      hunk.before.push(text);
      hunk.after.push(text);
    } else if (mark === "-") hunk.before.push(text);
    else if (mark === "+") hunk.after.push(text);
    else {
      problems.push(`a diff line that is not context, "-" or "+": ${JSON.stringify(line)}`);
      return { edits, problems, unheaded };
    }
  }
  for (const edit of edits) {
    if (edit.hunks.some((hunk) => hunk.before.length === 0)) {
      problems.push(`a hunk of ${edit.path} has no context or removed line to find its place by`);
    }
  }
  return { edits, problems, unheaded };
}

/** The claims a measurement's paragraph makes about where its reds are. */
export function parseClaims(paragraph: string): RedClaims {
  const perFile = new Map<string, number>();
  const fileTotals = new Map<string, number>();
  // `a.test.ts`、`b.test.ts` 各 N: each of the listed files.
  for (const match of paragraph.matchAll(new RegExp(`((?:${TEST_FILE}、)+${TEST_FILE}) 各 (\\d+)`, "g"))) {
    for (const file of (match[1] as string).matchAll(new RegExp(TEST_FILE, "g"))) {
      perFile.set(file[1] as string, Number(match.at(-1)));
    }
  }
  for (const match of paragraph.matchAll(new RegExp(`${TEST_FILE} (\\d+)(?!\\d| 个测试)`, "g"))) {
    perFile.set(match[1] as string, Number(match[2]));
  }
  // The total belongs to the last file named before it in the sentence.
  for (const match of paragraph.matchAll(new RegExp(`${TEST_FILE}(?:(?!\\.test\\.ts\`)[^。；])*?共 (\\d+) 个`, "g"))) {
    fileTotals.set(match[1] as string, Number(match[2]));
  }
  const only = new RegExp(`(?:全在|都在|全部在) ${TEST_FILE}`).exec(paragraph);
  const namedRed = paragraph
    .split(/(?<=[。！])/)
    .filter((sentence) => !/证明|同样的断言/.test(sentence))
    .flatMap((sentence) => [...sentence.matchAll(/`[^`\n]+`(?: › `[^`\n]+`)+/g)])
    .map((chain) => [...chain[0].matchAll(/`([^`\n]+)`/g)].map((part) => part[1] as string));
  return { perFile, onlyIn: only?.[1], fileTotals, namedRed };
}

/** The experiments of one guide's hands-on section, read from its text. */
export function guideExperiments(guide: string): GuideExperiments {
  const lines = docLines(guide);
  const measurements: Measurement[] = [];
  const patches: Patch[] = [];
  const problems: string[] = [];
  let inSection = false;
  let experiment: string | undefined;
  let edits: FileEdit[] = [];
  let step = 0;
  for (let index = 0; index < lines.length; index += 1) {
    const { number, text, fence } = lines[index] as DocLine;
    if (fence !== undefined) {
      if (!inSection || fence !== "diff") continue;
      // A block's lines follow one another; its fences are not among them.
      let end = index;
      while ((lines[end + 1]?.number ?? 0) === (lines[end] as DocLine).number + 1 && lines[end + 1]?.fence === "diff") {
        end += 1;
      }
      const block = lines.slice(index, end + 1).map((line) => line.text);
      const parsed = parseDiff(block);
      const at = `line ${number - 1}`;
      for (const problem of parsed.problems) problems.push(`${at}: ${problem}`);
      for (const path of new Set(parsed.unheaded)) {
        problems.push(`${at}: a hunk of ${path} has no "@@ -a,b +c,d @@" header, so git apply cannot take it`);
      }
      if (experiment === undefined) problems.push(`${at}: a diff block outside any ### experiment`);
      else {
        edits = [...edits, ...parsed.edits];
        patches.push({ experiment, line: number - 1, text: `${block.join("\n")}\n` });
      }
      index = end;
      continue;
    }
    if (text.startsWith("## ")) {
      inSection = text.includes("动手实验");
      experiment = undefined;
      continue;
    }
    if (!inSection) continue;
    if (text.startsWith("### ")) {
      experiment = text.slice(4).trim();
      edits = [];
      step = 0;
      continue;
    }
    const red = RED.exec(text);
    if (red === null) continue;
    if (experiment === undefined) {
      problems.push(`line ${number}: 变红 outside any ### experiment`);
      continue;
    }
    if (edits.length === 0) {
      problems.push(`line ${number}: 变红 in "${experiment}" with no diff block above it: nothing to measure`);
      continue;
    }
    let end = index;
    while (lines[end + 1]?.fence === undefined && (lines[end + 1]?.text.trim() ?? "") !== "") end += 1;
    const paragraph = lines
      .slice(index, end + 1)
      .map((line) => line.text)
      .join("\n");
    step += 1;
    measurements.push({
      experiment,
      step,
      line: number,
      red: Number(red[1]),
      edits,
      claims: parseClaims(paragraph.slice(red.index)),
    });
  }
  return { measurements, patches, problems };
}
