import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { chosenChapters } from "../compile.js";
import { chapterNames } from "../test-plan/plan.js";

const repository = fileURLToPath(new URL("../../", import.meta.url));
const { scripts } = JSON.parse(readFileSync(`${repository}package.json`, "utf8")) as {
  scripts: Record<string, string>;
};
const chapters = chapterNames(`${repository}code/chapters`);
const newest = chapters.at(-1) ?? "";

describe("the root package.json's chapter scripts", () => {
  it("every snapshot has its own entry, npm run chNN, and its own whole gate, npm run test:chNN", () => {
    expect(chapters.length).toBeGreaterThan(0);
    for (const chapter of chapters) {
      expect(scripts[chapter]).toBe(`tsx code/chapters/${chapter}/src/chapters/${chapter}.ts`);
      expect(scripts[`test:${chapter}`]).toBe(`vitest run --project ${chapter}`);
    }
  });

  it("npm run agent-tutorial and npm run demo are the newest snapshot's unified entry and demo", () => {
    expect(scripts["agent-tutorial"]).toBe(`tsx code/chapters/${newest}/src/chapters/agent-tutorial.ts`);
    expect(scripts.demo).toBe(`tsx code/chapters/${newest}/src/chapters/${newest}.ts --demo`);
  });

  it("every snapshot's demo has a script that needs no `--`, npm run demo:chNN (npm.ps1 drops `--` from piped runs)", () => {
    for (const chapter of chapters) {
      expect(scripts[`demo:${chapter}`]).toBe(`tsx code/chapters/${chapter}/src/chapters/${chapter}.ts --demo`);
    }
  });
});

describe("one snapshot's typecheck and lint: npm run typecheck -- ch05, npm run lint -- ch05", () => {
  it("a chapter named as chNN or by its number is chosen; none named means everything", () => {
    expect(chosenChapters(["ch05"], chapters)).toEqual(["ch05"]);
    expect(chosenChapters(["5", "--emit"], chapters)).toEqual(["ch05"]);
    expect(chosenChapters([], chapters)).toEqual([]);
  });

  it("an unknown chapter is refused with the chapters there are", () => {
    expect(chosenChapters(["ch99"], ["ch01", "ch02"])).toBe("no such chapter: ch99 (choose from ch01, ch02)");
  });
});
