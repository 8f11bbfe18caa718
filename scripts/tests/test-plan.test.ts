import { spawnSync } from "node:child_process";
import { appendFileSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importClosure } from "../test-plan/closure.js";
import { testsAffectedBy } from "../test-plan/cost.js";
import { declarationFor, globPattern, readCovers } from "../test-plan/declarations.js";
import {
  chapterInputs,
  chapterNames,
  differingInputs,
  testPlan,
  type PlanEntry,
  type TestPlan,
} from "../test-plan/plan.js";
import { undeclaredTouches } from "../test-plan/undeclared.js";
import { snapshotFiles } from "../verify-snapshots.js";

const realChapters = fileURLToPath(new URL("../../code/chapters/", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const childTrace = pathToFileURL(fileURLToPath(new URL("../test-plan/child-trace.mjs", import.meta.url))).href;

// The soundness checks change a scratch copy, never the checkout, and compare plans made before and after. The
// copy gets one more chapter, a byte-identical copy of the newest one: a chapter that changes nothing, so every
// one of its test files is reused until a change reaches it.
let copy: string;
let added: string;
let before: TestPlan;
beforeAll(() => {
  copy = mkdtempSync(join(tmpdir(), "test-plan-"));
  const outsidePackages = (source: string): boolean => !/[\\/](node_modules|dist)([\\/]|$)/.test(source);
  cpSync(realChapters, copy, { recursive: true, filter: outsidePackages });
  const newest = chapterNames(copy).at(-1) ?? "";
  added = `ch${String(Number(newest.slice(2)) + 1).padStart(2, "0")}`;
  cpSync(join(copy, newest), join(copy, added), { recursive: true });
  before = testPlan(copy);
});
afterAll(() => {
  rmSync(copy, { recursive: true, force: true });
});

/**
 * The snapshot files one test file can load, found independently of closure.ts: TypeScript's own parser and
 * NodeNext module resolution from the test and from each entry it declares it starts.
 */
function loadedByTypeScript(chapterDir: string, test: string): Set<string> {
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    allowJs: true,
    resolveJsonModule: true,
  };
  const spawned = readdirSync(chapterDir, { recursive: true })
    .map((path) => String(path).split(sep).join("/"))
    .filter((path) => (declarationFor(test).spawns ?? []).some((glob) => globPattern(glob).test(path)));
  const seen = new Set<string>();
  const queue = [test, ...spawned].map((path) => join(chapterDir, path));
  for (let file = queue.pop(); file !== undefined; file = queue.pop()) {
    const inside = relative(chapterDir, file).split(sep).join("/");
    if (seen.has(inside) || inside.startsWith("..") || inside.includes("node_modules/")) continue;
    seen.add(inside);
    for (const imported of ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles) {
      const resolved = ts.resolveModuleName(imported.fileName, file, options, ts.sys).resolvedModule;
      if (resolved !== undefined) queue.push(resolved.resolvedFileName);
    }
  }
  return seen;
}

/** The test files of `chapter` that load `path` (by TypeScript's resolution) or declare that they read it. */
function testsUsing(chapter: string, path: string): string[] {
  const chapterDir = join(copy, chapter);
  return [...snapshotFiles(chapterDir).keys()]
    .filter((file) => /^tests\/.*\.test\.ts$/.test(file))
    .filter(
      (test) =>
        loadedByTypeScript(chapterDir, test).has(path) || readCovers(declarationFor(test).reads ?? [], path, false),
    )
    .sort();
}

const entryOf = (plan: TestPlan, chapter: string, file: string): PlanEntry | undefined =>
  plan.entries.find((entry) => entry.chapter === chapter && entry.file === file);

/**
 * Changes one byte of `path` in each of `carrying` (the chapters that carry the change), plans again, and checks
 * the plan's soundness for it: in each carrying chapter every test that loads or reads the file runs, or reuses a
 * run made in a chapter that carries the same bytes; every other entry is as it was. Undone afterwards.
 */
function changeOneByte(path: string, carrying: readonly string[]): { after: TestPlan; using: Map<string, string[]> } {
  const originals = carrying.map((chapter) => [chapter, readFileSync(join(copy, chapter, path))] as const);
  for (const [chapter] of originals) appendFileSync(join(copy, chapter, path), " ");
  try {
    const after = testPlan(copy);
    const using = new Map(carrying.map((chapter) => [chapter, testsUsing(chapter, path)]));
    for (const chapter of chapterNames(copy)) {
      const affected = using.get(chapter) ?? [];
      for (const entry of after.entries.filter((row) => row.chapter === chapter)) {
        if (!affected.includes(entry.file)) {
          expect(entry).toEqual(entryOf(before, chapter, entry.file));
          continue;
        }
        if (entry.action === "run") continue;
        expect(carrying, `${chapter} ${entry.file} reuses ${entry.reusedFrom ?? "?"}`).toContain(entry.reusedFrom);
      }
    }
    return { after, using };
  } finally {
    for (const [chapter, bytes] of originals) writeFileSync(join(copy, chapter, path), bytes);
  }
}

/**
 * The same change made only in the added chapter, where every test was reused before: exactly the tests that
 * load or read the file run now, and they are the ones `mustRun` names at least.
 */
function changeInAddedChapter(path: string, mustRun: readonly string[]): void {
  const { after, using } = changeOneByte(path, [added]);
  const affected = using.get(added) ?? [];
  expect(affected).toEqual(expect.arrayContaining([...mustRun]));
  const ran = after.entries
    .filter((entry) => entry.chapter === added && entry.action === "run")
    .map((entry) => entry.file);
  expect(ran.sort()).toEqual(affected);
  // What `npm run test:plan -- --changed <path>` says a next chapter changing it would run, before it is changed.
  expect(testsAffectedBy(before, [path])).toEqual(affected);
}

describe("the test plan", () => {
  it("a package's declared version is an input only of the tests whose closure imports it", () => {
    const files = (yaml: string): Map<string, string> =>
      new Map([
        ["package.json", JSON.stringify({ dependencies: { yaml, zod: "4.6.7" } })],
        ["src/schema.ts", 'import { z } from "zod";\nexport const s = z.string();\n'],
        ["src/skills.ts", 'import { parse } from "yaml";\nexport const p = parse;\n'],
        ["tests/schema.test.ts", 'import { s } from "../src/schema.js";\n'],
        ["tests/skills.test.ts", 'import { p } from "../src/skills.js";\nimport { it } from "vitest";\n'],
      ]);
    const [before, after] = [files("2.9.0"), files("2.9.1")].map(chapterInputs);
    const keys = (test: string): string[] =>
      Object.keys(before?.get(test)?.files ?? {}).filter((key) => key.startsWith("package.json#"));
    expect(keys("tests/schema.test.ts")).toEqual(["package.json#dependencies/zod"]);
    expect(keys("tests/skills.test.ts")).toEqual([
      "package.json#dependencies/vitest",
      "package.json#dependencies/yaml",
    ]);
    const differ = (test: string): string[] => {
      const [a, b] = [before?.get(test), after?.get(test)];
      return a === undefined || b === undefined ? ["missing"] : differingInputs(a, b);
    };
    // A new yaml reruns what imports yaml, and nothing else.
    expect(differ("tests/schema.test.ts")).toEqual([]);
    expect(differ("tests/skills.test.ts")).toEqual(["package.json#dependencies/yaml"]);
  });

  it("runs every test file of the first chapter, and reuses only what an earlier chapter ran with the same inputs", () => {
    const first = chapterNames(realChapters)[0];
    expect(before.entries.filter((entry) => entry.chapter === first).every((entry) => entry.action === "run")).toBe(
      true,
    );
    for (const entry of before.entries.filter((row) => row.action === "reuse")) {
      const source = entryOf(before, entry.reusedFrom ?? "", entry.file);
      expect(source?.action).toBe("run");
      const [mine, theirs] = [entry.chapter, entry.reusedFrom ?? ""].map((chapter) =>
        before.inputs.get(chapter)?.get(entry.file),
      );
      expect(mine?.files).toEqual(theirs?.files);
    }
  });

  it("names, for each run after the first chapter's, the inputs that differ from the last run of the file", () => {
    const second = entryOf(before, "ch02", "tests/demo.test.ts");
    expect(second?.action).toBe("run");
    expect(second?.why).toMatch(/^inputs differ from ch01: .*demo\/ch02\.json/);
  });

  it("a chapter that changes nothing runs nothing: each of its test files reuses an earlier run", () => {
    const rows = before.entries.filter((entry) => entry.chapter === added);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.filter((entry) => entry.action === "run")).toEqual([]);
  });

  it("(a) a source file carried byte-identical from ch01 on, changed from ch03 on: every test that loads it runs, or reuses a run with the change", () => {
    for (const chapter of chapterNames(copy)) {
      expect(readFileSync(join(copy, chapter, "src/adapters/powershell.ts"))).toEqual(
        readFileSync(join(copy, "ch01", "src/adapters/powershell.ts")),
      );
    }
    const { after, using } = changeOneByte("src/adapters/powershell.ts", chapterNames(copy).slice(2));
    expect(using.get("ch03")).toEqual(
      expect.arrayContaining(["tests/shell-tool.test.ts", "tests/process-lifetime.test.ts"]),
    );
    for (const file of using.get("ch03") ?? []) expect(entryOf(after, "ch03", file)?.action).toBe("run");
    changeInAddedChapter("src/adapters/powershell.ts", ["tests/shell-tool.test.ts", "tests/process-lifetime.test.ts"]);
  });

  it("(b) a fixture changed: the tests that read it run", () => {
    changeOneByte("tests/fixtures/hostile-paths.json", chapterNames(copy).slice(2));
    changeInAddedChapter("tests/fixtures/hostile-paths.json", ["tests/hostile-paths.test.ts"]);
  });

  it("(c) a demo file changed: every test that replays it runs", () => {
    changeOneByte("demo/ch01.json", chapterNames(copy).slice(1));
    changeInAddedChapter("demo/ch01.json", [
      "tests/agent-tutorial.test.ts",
      "tests/ch04-hooks.test.ts",
      "tests/demo.test.ts",
    ]);
  });

  it("(d) a file only a started CLI loads, changed: the test that starts it runs", () => {
    const child = "tests/support/cli-child.ts";
    // No import reaches it: only the process the test starts loads it.
    const test = "tests/process-lifetime.test.ts";
    expect(importClosure([test], snapshotFiles(join(copy, "ch01"))).has(child)).toBe(false);
    changeOneByte(child, chapterNames(copy).slice(1));
    changeInAddedChapter(child, [test]);
  });

  it("prints the plan as JSON rows of chapter, file, action, reusedFrom and why", () => {
    const run = spawnSync(
      process.execPath,
      ["--import", tsx, fileURLToPath(new URL("../test-plan/main.ts", import.meta.url)), "--json"],
      {
        encoding: "utf8",
      },
    );
    expect(run.status).toBe(0);
    const rows = JSON.parse(run.stdout) as PlanEntry[];
    expect(rows).toEqual(testPlan(realChapters).entries);
    for (const row of rows) {
      expect(Object.keys(row)).toEqual(
        row.action === "reuse"
          ? ["chapter", "file", "action", "reusedFrom", "why"]
          : ["chapter", "file", "action", "why"],
      );
    }
  });
});

describe("the tracer", () => {
  const inputs = { files: { "src/core/loop.ts": "x" }, reads: ["demo/**"], ownChapter: false };
  const at = (chapter: string, path: string): string => join(realChapters, chapter, path);

  it("accepts the test file itself, its inputs, a declared read and a folder read whole", () => {
    const touched = [
      at("ch02", "tests/a.test.ts"),
      at("ch02", "src/core/loop.ts"),
      at("ch02", "demo/ch09.json"),
      at("ch02", "demo"),
    ];
    expect(undeclaredTouches(touched, "ch02", "tests/a.test.ts", inputs)).toEqual([]);
  });

  it("names every undeclared snapshot file, another chapter's files and the chapter folder itself; paths outside the snapshots and their packages are not its business", () => {
    const touched = [
      at("ch02", "src/core/tools.ts"),
      at("ch01", "src/core/loop.ts"),
      at("ch02", "src"),
      join(realChapters, "ch02"),
      at("ch02", "node_modules/x/index.js"),
      join(tmpdir(), "elsewhere.txt"),
    ];
    expect(undeclaredTouches(touched, "ch02", "tests/a.test.ts", inputs)).toEqual([
      "code/chapters/ch01/src/core/loop.ts",
      "code/chapters/ch02",
      "code/chapters/ch02/src",
      "code/chapters/ch02/src/core/tools.ts",
    ]);
  });

  it("a started Node process reports the snapshot modules it loads and the snapshot files it opens, an ESM named import of node:fs included", () => {
    const traceDir = mkdtempSync(join(tmpdir(), "test-plan-trace-"));
    try {
      const script = join(traceDir, "reader.mjs");
      writeFileSync(
        script,
        'import { readFileSync } from "node:fs";\nreadFileSync(process.argv[2]);\nawait import(process.argv[3]);\n',
      );
      const module = pathToFileURL(at("ch01", "src/core/messages.ts")).href;
      const run = spawnSync(process.execPath, ["--import", tsx, script, at("ch01", "package.json"), module], {
        encoding: "utf8",
        env: { ...process.env, AGENT_TEST_TRACE_DIR: traceDir, NODE_OPTIONS: `--import=${childTrace}` },
      });
      expect(run.stderr).toBe("");
      expect(run.status).toBe(0);
      const traced = readdirSync(traceDir)
        .filter((name) => name.endsWith(".txt"))
        .flatMap((name) => readFileSync(join(traceDir, name), "utf8").split("\n"))
        .filter((line) => line !== "")
        .map((line) => relative(realChapters, line).split(sep).join("/"));
      expect(traced).toEqual(expect.arrayContaining(["ch01/package.json", "ch01/src/core/messages.ts"]));
      expect(traced.every((path) => path.startsWith("ch01/"))).toBe(true);
    } finally {
      rmSync(traceDir, { recursive: true, force: true });
    }
  });

  it("covers what the declarations name: a glob of one folder level, any depth, and a folder read whole", () => {
    expect(globPattern("demo/*.json").test("demo/ch01.json")).toBe(true);
    expect(globPattern("demo/*.json").test("demo/x/ch01.json")).toBe(false);
    expect(globPattern("src/**").test("src/core/loop.ts")).toBe(true);
    expect(readCovers(["src/**"], "src/core", true)).toBe(true);
    expect(readCovers(["src/*.ts"], "src", true)).toBe(false);
    expect(readCovers(["demo/*.json"], "demo/ch01.json", false)).toBe(true);
  });
});
