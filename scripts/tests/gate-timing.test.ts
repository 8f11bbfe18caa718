import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { applyTiming, readmeSentence, renderTiming, timingProblems, type GateTiming } from "../gate-timing.js";

const repository = fileURLToPath(new URL("../../", import.meta.url));
const timing: GateTiming = {
  machine: "2 cores (test), 8 GiB, Node v20",
  baseline: {
    revision: "a".repeat(40),
    steps: [
      { step: "npm test", seconds: 500 },
      { step: "npm run lint", seconds: 100 },
    ],
    total: 600,
  },
  current: {
    revision: "b".repeat(40),
    steps: [
      { step: "npm test", seconds: 200 },
      { step: "npm run gate:offline", seconds: 70 },
    ],
    total: 270,
  },
};

let copy: string;
beforeEach(() => {
  copy = mkdtempSync(join(tmpdir(), "gate-timing-"));
  mkdirSync(join(copy, "docs"));
  cpSync(join(repository, "docs", "snapshots.md"), join(copy, "docs", "snapshots.md"));
  cpSync(join(repository, "README.md"), join(copy, "README.md"));
  writeFileSync(join(copy, "docs", "gate-timing.json"), JSON.stringify(timing));
});
afterEach(() => {
  rmSync(copy, { recursive: true, force: true });
});

describe("the measured gate times in the docs", () => {
  it("the checked-in docs say what docs/gate-timing.json measured", () => {
    expect(timingProblems(repository)).toEqual([]);
  });

  it("a table row per step, the share of npm test and of the whole gate", () => {
    const table = renderTiming(timing);
    expect(table).toContain("| `npm test` | 500.0 s | 200.0 s |");
    expect(table).toContain("| `npm run lint` | 100.0 s | — |");
    expect(table).toContain("| `npm run gate:offline` | — | 70.0 s |");
    expect(table).toContain("| `npm test` 占之前的 | | 40 % |");
    expect(table).toContain("| 合计 | 600.0 s | 270.0 s（之前的 45 %） |");
    expect(table).toContain("| 步骤 | 之前（`aaaaaaa`） | 现在（`bbbbbbb`） |");
    expect(readmeSentence(timing)).toBe("实测 200.0 秒");
  });

  it("after applyTiming the docs agree; a changed number in either is named", () => {
    expect(timingProblems(copy)).toHaveLength(2);
    applyTiming(copy, timing);
    expect(timingProblems(copy)).toEqual([]);
    const snapshots = join(copy, "docs", "snapshots.md");
    writeFileSync(snapshots, readFileSync(snapshots, "utf8").replace("200.0 s", "190.0 s"));
    const readme = join(copy, "README.md");
    writeFileSync(readme, readFileSync(readme, "utf8").replace("实测 200.0 秒", "实测 190.0 秒"));
    expect(timingProblems(copy)).toEqual([
      "docs/snapshots.md: the gate-timing table differs from docs/gate-timing.json",
      "README.md: does not say how long npm test took as measured (实测 200.0 秒)",
    ]);
  });
});
