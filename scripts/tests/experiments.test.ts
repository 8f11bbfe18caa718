import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { applyEdits } from "../experiments/apply.js";
import { chapterExperimentProblems, namesTest } from "../experiments/claims.js";
import { guideExperiments, parseClaims, parseDiff } from "../experiments/guide.js";
import {
  affectedTests,
  editsHash,
  inputsHash,
  type ChapterRecord,
  type MeasurementRecord,
} from "../experiments/record.js";
import { chapterInputs } from "../test-plan/plan.js";
import { snapshotFiles } from "../verify-snapshots.js";

const fence = "```";

describe("parseDiff", () => {
  it("reads files, hunks split by a bare @@, context on both sides, and an empty line as empty context", () => {
    const { edits, problems } = parseDiff([
      "--- a/code/chapters/ch09/src/a.ts",
      "+++ b/code/chapters/ch09/src/a.ts",
      " keep",
      "-old",
      "+new",
      "",
      "@@",
      "-gone",
      "--- a/code/chapters/ch09/src/b.ts",
      "+++ b/code/chapters/ch09/src/b.ts",
      "-x",
      "+y",
      "+z",
    ]);
    expect(problems).toEqual([]);
    expect(edits).toEqual([
      {
        path: "code/chapters/ch09/src/a.ts",
        hunks: [
          { before: ["keep", "old", ""], after: ["keep", "new", ""] },
          { before: ["gone"], after: [] },
        ],
      },
      { path: "code/chapters/ch09/src/b.ts", hunks: [{ before: ["x"], after: ["y", "z"] }] },
    ]);
  });

  it("reads a unified diff's @@ headers as hunk starts, as git apply does, the first one opening no empty hunk", () => {
    const { edits, problems } = parseDiff([
      "--- a/code/chapters/ch09/src/a.ts",
      "+++ b/code/chapters/ch09/src/a.ts",
      "@@ -1,2 +1,2 @@",
      " keep",
      "-old",
      "+new",
      "@@ -9 +9,2 @@ function later() {",
      " tail",
      "+added",
    ]);
    expect(problems).toEqual([]);
    expect(edits).toEqual([
      {
        path: "code/chapters/ch09/src/a.ts",
        hunks: [
          { before: ["keep", "old"], after: ["keep", "new"] },
          { before: ["tail"], after: ["tail", "added"] },
        ],
      },
    ]);
  });

  it("refuses a block with no file, a mismatched +++ line, a line of another kind, and a hunk with nothing to find", () => {
    expect(parseDiff(["-old", "+new"]).problems).toEqual(['a diff line before any "--- a/<path>": "-old"']);
    expect(parseDiff(["--- a/x.ts", "+++ b/y.ts"]).problems).toEqual(['"--- a/x.ts" is not followed by "+++ b/x.ts"']);
    expect(parseDiff(["--- a/x.ts", "+++ b/x.ts", "*old"]).problems).toEqual([
      'a diff line that is not context, "-" or "+": "*old"',
    ]);
    expect(parseDiff(["--- a/x.ts", "+++ b/x.ts", "+only added"]).problems).toEqual([
      "a hunk of x.ts has no context or removed line to find its place by",
    ]);
  });
});

describe("applyEdits", () => {
  const files: Record<string, string> = { "a.ts": "one\ntwo\nthree\ntwo\n", "b.ts": "alpha\n" };
  const read = (path: string): string | undefined => files[path];

  it("replaces the lines a hunk expects, hunk after hunk and file after file", () => {
    const applied = applyEdits(
      [
        {
          path: "a.ts",
          hunks: [
            { before: ["one", "two"], after: ["one", "2"] },
            { before: ["2", "three"], after: ["three"] },
          ],
        },
        { path: "b.ts", hunks: [{ before: ["alpha"], after: ["beta"] }] },
        { path: "a.ts", hunks: [{ before: ["three"], after: ["3"] }] },
      ],
      read,
    );
    expect(applied).toEqual({
      files: new Map([
        ["a.ts", "one\n3\ntwo\n"],
        ["b.ts", "beta\n"],
      ]),
    });
  });

  it("refuses lines found twice, lines not found, a partial line, and a missing file, naming the hunk", () => {
    expect(applyEdits([{ path: "a.ts", hunks: [{ before: ["two"], after: [] }] }], read)).toEqual({
      problem: 'hunk 1 of a.ts: the lines starting "two" are in the file 2 times',
    });
    expect(
      applyEdits(
        [
          {
            path: "a.ts",
            hunks: [
              { before: ["one"], after: [] },
              { before: ["four"], after: [] },
            ],
          },
        ],
        read,
      ),
    ).toEqual({
      problem: 'hunk 2 of a.ts: the lines starting "four" are not in the file',
    });
    expect(applyEdits([{ path: "a.ts", hunks: [{ before: ["thr"], after: [] }] }], read)).toEqual({
      problem: 'hunk 1 of a.ts: the lines starting "thr" are not in the file',
    });
    expect(applyEdits([{ path: "c.ts", hunks: [{ before: ["x"], after: [] }] }], read)).toEqual({
      problem: "c.ts does not exist",
    });
  });
});

describe("parseClaims", () => {
  it("reads per-file reds, a shared 各 count, where all of them are, and a file's new total", () => {
    const claims = parseClaims(
      "**变红：9 个**——`a.test.ts` 5（其中 `x` 3 条）、`b.test.ts`、`c.test.ts` 各 2，都在 `a.test.ts` 附近；`d.test.ts` 多了一个，共 34 个",
    );
    expect([...claims.perFile]).toEqual([
      ["b.test.ts", 2],
      ["c.test.ts", 2],
      ["a.test.ts", 5],
    ]);
    expect(claims.onlyIn).toBe("a.test.ts");
    expect([...claims.fileTotals]).toEqual([["d.test.ts", 34]]);
  });

  it("reads no red count out of a file's size, and gives a total to the last file named before it", () => {
    expect([...parseClaims("`todos.test.ts` 34 个测试全绿").perFile]).toEqual([]);
    expect([...parseClaims("`a.test.ts` 12、`b.test.ts` 2").perFile]).toEqual([
      ["a.test.ts", 12],
      ["b.test.ts", 2],
    ]);
    expect([...parseClaims("`a.test.ts` 3、`b.test.ts` 2，\n一共 共 5 个").fileTotals]).toEqual([["b.test.ts", 5]]);
  });

  it("takes the test chains a sentence names as red, but not those a sentence says prove or assert the same thing", () => {
    const claims = parseClaims(
      "**变红：2 个**：`rule 16` › `a run: …`，以及 `x.test.ts` › `rule 5` › `b`。规则本身由 `hooks.test.ts` › `rule 2` 证明。同样的断言在 `y.test.ts` › `c` 里。",
    );
    expect(claims.namedRed).toEqual([
      ["rule 16", "a run: …"],
      ["x.test.ts", "rule 5", "b"],
    ]);
  });
});

describe("namesTest", () => {
  const failed = "tests/x.test.ts › rule 16: the CLI prints › a read_file run: in order › exact";
  it("matches a file, whole titles, a prefix ending in …, and a rule's label, in order", () => {
    expect(namesTest(failed, ["x.test.ts", "rule 16: …", "a read_file run: …"])).toBe(true);
    expect(namesTest(failed, ["rule 16", "exact"])).toBe(true);
    expect(namesTest(failed, ["a read_file run: in order", "exact"])).toBe(true);
  });
  it("refuses another file, a title that is only a prefix without …, a label that is a prefix, and the wrong order", () => {
    expect(namesTest(failed, ["y.test.ts", "exact"])).toBe(false);
    expect(namesTest(failed, ["rule 16", "a read_file"])).toBe(false);
    expect(namesTest(failed, ["rule 1", "exact"])).toBe(false);
    expect(namesTest(failed, ["exact", "rule 16"])).toBe(false);
  });
});

const guide = (red: number, second: string): string =>
  [
    "# 第 9 章",
    "",
    "**变红：1 个** outside the hands-on section is prose, not a measurement.",
    "",
    "## 动手实验",
    "",
    "下面的个数由 `npm run verify:experiments` 量出（2026-12-02，提交 `abc1234`，那时第 9 章共 3 个测试）。",
    "",
    "### 实验一：改一个返回值",
    "",
    `${fence}diff`,
    "--- a/code/chapters/ch09/src/a.ts",
    "+++ b/code/chapters/ch09/src/a.ts",
    "@@ -1,1 +1,1 @@",
    "-export const answer = 42;",
    "+export const answer = 41;",
    fence,
    "",
    `**变红：${red} 个**，都在 \`a.test.ts\`。`,
    "",
    `${fence}diff`,
    "--- a/code/chapters/ch09/src/a.ts",
    "+++ b/code/chapters/ch09/src/a.ts",
    "@@ -1,1 +1,1 @@",
    `-export const answer = 41;`,
    `+export const answer = ${second};`,
    fence,
    "",
    "**变红：0 个。** `a.test.ts` 共 2 个。",
    "",
    "### 实验二：没有改动",
    "",
    "**变红：0 个**",
    "",
    "## 下一章",
  ].join("\n");

describe("guideExperiments", () => {
  it("measures each 变红 of an experiment with every diff above it, and refuses a 变红 with nothing to measure", () => {
    const { measurements, problems } = guideExperiments(guide(1, "42"));
    expect(problems).toEqual(['line 33: 变红 in "实验二：没有改动" with no diff block above it: nothing to measure']);
    expect(
      measurements.map((entry) => [entry.experiment, entry.step, entry.line, entry.red, entry.edits.length]),
    ).toEqual([
      ["实验一：改一个返回值", 1, 19, 1, 1],
      ["实验一：改一个返回值", 2, 29, 0, 2],
    ]);
    expect(measurements[0]?.claims.onlyIn).toBe("a.test.ts");
    expect(measurements[0]?.edits[0]?.hunks).toEqual([
      { before: ["export const answer = 42;"], after: ["export const answer = 41;"] },
    ]);
    expect([...(measurements[1]?.claims.fileTotals ?? [])]).toEqual([["a.test.ts", 2]]);
  });

  it("keeps a diff line that starts with a fence and goes on inside its block: only a bare fence closes it", () => {
    const markdown = [
      "## 动手实验",
      "### 实验一：改一个说明",
      `${fence}diff`,
      "--- a/code/chapters/ch09/README.md",
      "+++ b/code/chapters/ch09/README.md",
      "@@ -1,2 +1,2 @@",
      ` ${fence}ts`,
      "-old",
      "+new",
      fence,
      "**变红：0 个**",
    ].join("\n");
    const { measurements, problems } = guideExperiments(markdown);
    expect(problems).toEqual([]);
    expect(measurements[0]?.edits).toEqual([
      {
        path: "code/chapters/ch09/README.md",
        hunks: [{ before: [`${fence}ts`, "old"], after: [`${fence}ts`, "new"] }],
      },
    ]);
  });
});

describe("chapterExperimentProblems", () => {
  let repo: string;
  const write = (path: string, text: string): void => {
    mkdirSync(dirname(join(repo, path)), { recursive: true });
    writeFileSync(join(repo, path), text);
  };
  beforeEach(() => {
    repo = mkdtempSync(join(tmpdir(), "experiments-"));
    write("code/chapters/ch09/src/a.ts", "export const answer = 42;\n");
    write("code/chapters/ch09/src/b.ts", "export const other = 1;\n");
    write("code/chapters/ch09/tests/a.test.ts", 'import { answer } from "../src/a.js";\n');
    write("code/chapters/ch09/tests/b.test.ts", 'import { other } from "../src/b.js";\n');
  });
  afterEach(() => {
    rmSync(repo, { recursive: true, force: true });
  });

  /** The record a measurement of `guide(1, "42")` would make at this tree. */
  function record(overrides: Partial<MeasurementRecord> = {}): ChapterRecord {
    const { measurements } = guideExperiments(guide(1, "42"));
    const inputs = chapterInputs(snapshotFiles(join(repo, "code", "chapters", "ch09")));
    const tests = affectedTests(inputs, ["src/a.ts"]);
    expect(tests).toEqual(["tests/a.test.ts"]);
    const entry = (step: number, red: number): MeasurementRecord => ({
      experiment: "实验一：改一个返回值",
      step,
      edits: editsHash(measurements[step - 1]?.edits ?? []),
      inputs: inputsHash(inputs, tests),
      red,
      files: { "tests/a.test.ts": { tests: 2, red } },
      failed: red === 0 ? [] : ["tests/a.test.ts › answers 42"],
      broken: [],
      seconds: 1,
    });
    return {
      commit: "abc1234",
      date: "2026-12-02",
      tests: 3,
      measurements: [entry(1, 1), { ...entry(2, 0), ...overrides }],
    };
  }
  const check = (text: string, chapter?: ChapterRecord): ReturnType<typeof chapterExperimentProblems> =>
    chapterExperimentProblems(
      repo,
      "ch09",
      text.replace(/\n### 实验二[^]*?(?=\n## )/, ""),
      chapter,
      chapterInputs(snapshotFiles(join(repo, "code", "chapters", "ch09"))),
    );
  const problems = (text: string, chapter?: ChapterRecord): string[] => check(text, chapter).problems;

  it("accepts a guide whose edits apply and whose numbers are the record's", () => {
    expect(problems(guide(1, "42"), record())).toEqual([]);
  });

  it("names a count, a file total and a place of the reds that differ from the record", () => {
    const other = record({
      files: { "tests/a.test.ts": { tests: 3, red: 0 }, "tests/b.test.ts": { tests: 1, red: 1 } },
    });
    const changed = {
      ...other,
      measurements: [
        { ...(other.measurements[0] as MeasurementRecord), red: 2 },
        other.measurements[1] as MeasurementRecord,
      ],
    };
    expect(problems(guide(1, "42"), changed)).toEqual([
      'chapters/ch09.md:19: "实验一：改一个返回值" (变红 1): says 变红 1, the record has 2',
      'chapters/ch09.md:29: "实验一：改一个返回值" (变红 2): says a.test.ts 共 2 个, the record has 3',
    ]);
    const elsewhere = record();
    const moved = {
      ...elsewhere,
      measurements: [
        {
          ...(elsewhere.measurements[0] as MeasurementRecord),
          files: { "tests/a.test.ts": { tests: 2, red: 0 }, "tests/b.test.ts": { tests: 1, red: 1 } },
        },
        elsewhere.measurements[1] as MeasurementRecord,
      ],
    };
    expect(problems(guide(1, "42"), moved)).toEqual([
      'chapters/ch09.md:19: "实验一：改一个返回值" (变红 1): says every red is in a.test.ts, the record has reds in tests/b.test.ts',
    ]);
  });

  it("refuses a test the paragraph names as red that the record's failed tests do not hold", () => {
    const named = (title: string): string =>
      guide(1, "42").replace(
        "**变红：1 个**，都在 `a.test.ts`。",
        `**变红：1 个**，都在 \`a.test.ts\`：\`a.test.ts\` › \`${title}\`。`,
      );
    expect(problems(named("answers 42"), record())).toEqual([]);
    expect(problems(named("answers 43"), record())).toEqual([
      'chapters/ch09.md:19: "实验一：改一个返回值" (变红 1): names a.test.ts › answers 43 as red, the record\'s failed tests do not include it',
    ]);
  });

  it("refuses an edit that no longer applies, an edit changed since it was measured, and a measurement the record lacks", () => {
    write("code/chapters/ch09/src/a.ts", "export const answer = 43;\n");
    expect(problems(guide(1, "42"), record())).toContain(
      'chapters/ch09.md:19: "实验一：改一个返回值" (变红 1): its edit does not apply: hunk 1 of code/chapters/ch09/src/a.ts: the lines starting "export const answer = 42;" are not in the file',
    );
    write("code/chapters/ch09/src/a.ts", "export const answer = 42;\n");
    expect(problems(guide(1, "40"), record())).toEqual([
      'chapters/ch09.md:29: "实验一：改一个返回值" (变红 2): its edit changed since it was measured; measure it: npm run verify:experiments -- --write --only ch09',
    ]);
    const one = record();
    expect(problems(guide(1, "42"), { ...one, measurements: one.measurements.slice(0, 1) })).toEqual([
      'chapters/ch09.md:29: "实验一：改一个返回值" (变红 2) is not in docs/experiments.json; measure it: npm run verify:experiments -- --write --only ch09',
    ]);
    expect(problems(guide(1, "42"), undefined)).toHaveLength(2);
  });

  it("refuses a hunk without a @@ header, and a block git apply refuses, as a reader's git apply would", () => {
    const bare = guide(1, "42").replace("@@ -1,1 +1,1 @@\n-export const answer = 42;", "-export const answer = 42;");
    expect(problems(bare, record())).toEqual([
      'chapters/ch09.md: line 11: a hunk of code/chapters/ch09/src/a.ts has no "@@ -a,b +c,d @@" header, so git apply cannot take it',
    ]);
    const miscounted = guide(1, "42").replace(
      "@@ -1,1 +1,1 @@\n-export const answer = 42;",
      "@@ -1,2 +1,1 @@\n-export const answer = 42;",
    );
    expect(problems(miscounted, record())).toEqual([
      'chapters/ch09.md:11: "实验一：改一个返回值": git apply refuses diff block 1: error: corrupt patch at line 6',
    ]);
  });

  it("refuses a record entry the guide no longer shows, and a provenance sentence that names another commit, date or size", () => {
    const extra = record();
    const withExtra = {
      ...extra,
      measurements: [...extra.measurements, { ...(extra.measurements[0] as MeasurementRecord), step: 3 }],
    };
    expect(problems(guide(1, "42"), withExtra)).toEqual([
      'docs/experiments.json: ch09 has "实验一：改一个返回值" (变红 3), which chapters/ch09.md no longer shows',
    ]);
    expect(problems(guide(1, "42"), { ...record(), commit: "def5678", tests: 4 })).toEqual([
      "chapters/ch09.md: the paragraph naming npm run verify:experiments does not say 提交 `def5678` (the record's)",
      "chapters/ch09.md: the paragraph naming npm run verify:experiments does not say 共 4 个测试 (the record's)",
    ]);
  });

  it("notes, without failing, a measurement whose tests' inputs changed since; an edit elsewhere changes nothing", () => {
    const measured = record();
    write("code/chapters/ch09/src/b.ts", "export const other = 2;\n");
    expect(check(guide(1, "42"), measured)).toEqual({ problems: [], notes: [], measured: 2 });
    write("code/chapters/ch09/tests/a.test.ts", 'import { answer } from "../src/a.js";\n// one more\n');
    const result = check(guide(1, "42"), measured);
    expect(result.problems).toEqual([]);
    expect(result.notes).toEqual([
      'chapters/ch09.md: the tests behind "实验一：改一个返回值" (变红 1), "实验一：改一个返回值" (变红 2) changed since abc1234; the guide\'s numbers are of that commit (re-measure: npm run verify:experiments -- --write --only ch09)',
    ]);
  });
});
