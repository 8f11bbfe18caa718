import { describe, expect, it } from "vitest";
import { guideProblems } from "../verify-guides.js";

const counts = new Map([
  ["tests/a.test.ts", 3],
  ["tests/b.test.ts", 4],
]);

const guide = (total: number, a: number, pair: number): string =>
  [
    `书中 30 个测试，本仓库 ${total} 个: …`,
    "",
    "| 文件 | 个数 | 证明什么 |",
    "| --- | --- | --- |",
    `| \`a.test.ts\` (书) | ${a} | … |`,
    `| \`a.test.ts\`、\`b.test.ts\` | ${pair} | … |`,
    "| 其余 | 99 | no file named, not checked |",
    "",
    "| 文件 | 个数 | 变红的测试 |",
    "| --- | --- | --- |",
    "| `b.test.ts` | 1 | an experiment's red tests, not a count of the gate |",
  ].join("\n");

describe("verify:guides", () => {
  it("accepts a guide whose total and per-file counts equal the gate's", () => {
    expect(guideProblems("ch.md", guide(7, 3, 7), counts)).toEqual([]);
  });

  it("names every stated count that differs: the total, one file, a sum of files", () => {
    expect(guideProblems("ch.md", guide(8, 2, 6), counts)).toEqual([
      "ch.md: says 本仓库 8 个, the gate has 7",
      "ch.md:5: says 2 for a.test.ts, the gate has 3",
      "ch.md:6: says 6 for a.test.ts, b.test.ts, the gate has 7",
    ]);
  });

  it("refuses a row that names a test file the gate does not have", () => {
    const stale = "| 文件 | 个数 |\n| --- | --- |\n| `gone.test.ts` | 5 |";
    expect(guideProblems("ch.md", stale, counts)).toEqual([
      "ch.md:3: names gone.test.ts, which the gate does not have",
    ]);
  });
});
