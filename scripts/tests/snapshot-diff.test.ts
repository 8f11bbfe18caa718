import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { colorWanted, diffSnapshots, parseDiffArgs, USAGE, type DiffRequest } from "../snapshot-diff.js";

class Text extends Writable {
  text = "";
  override _write(chunk: unknown, _encoding: BufferEncoding, callback: () => void): void {
    this.text += String(chunk);
    callback();
  }
}

let chapters: string;

/** A snapshot folder of `files` (path → content) under the temporary chapters folder. */
function snapshot(name: string, files: Record<string, string>): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(chapters, name, path)), { recursive: true });
    writeFileSync(join(chapters, name, path), content);
  }
}

const base: Record<string, string> = {
  "package.json": '{ "name": "one" }\n',
  "tsconfig.json": "{}\n",
  "tsconfig.build.json": "{}\n",
  "src/a.ts": "export const a = 1;\n",
  "demo/ch01.json": "{}\n",
  "tests/a.test.ts": "// one\n",
  "tests/fixtures/big.json": '["one"]\n',
};

beforeEach(() => {
  chapters = mkdtempSync(join(tmpdir(), "snapshot-diff-"));
  snapshot("ch01", base);
  // ch02 changes one file of each part, fixtures included, and adds a demo.
  snapshot("ch02", {
    ...base,
    "package.json": '{ "name": "two" }\n',
    "src/a.ts": "export const a = 2;\n",
    "demo/ch02.json": "{}\n",
    "tests/a.test.ts": "// two\n",
    "tests/fixtures/big.json": '["two"]\n',
  });
  // ch03 differs from ch01 only in a fixture.
  snapshot("ch03", { ...base, "tests/fixtures/big.json": '["three"]\n' });
});
afterEach(() => {
  rmSync(chapters, { recursive: true, force: true });
});

async function diff(args: string[], color = false): Promise<{ code: number; stdout: string; stderr: string }> {
  const request = parseDiffArgs(args) as DiffRequest;
  const [stdout, stderr] = [new Text(), new Text()];
  const code = await diffSnapshots(chapters, request, { stdout, stderr, color });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** The new side of each file section, in output order. */
const files = (output: string): string[] =>
  [...output.matchAll(/^diff --git a\/\S+ b\/ch\d\d\/(\S+)$/gm)].map((match) => match[1] as string);

describe("npm run diff -- chNN chMM [parts] [--fixtures]", () => {
  it.each<[string[], unknown]>([
    [["ch01", "ch02"], { from: "ch01", to: "ch02", parts: ["package", "src", "demo", "tests"], fixtures: false }],
    [["ch01", "ch02", "src"], { from: "ch01", to: "ch02", parts: ["src"], fixtures: false }],
    [
      ["ch01", "ch02", "tests", "demo", "--fixtures"],
      { from: "ch01", to: "ch02", parts: ["demo", "tests"], fixtures: true },
    ],
    [
      ["ch01", "ch02", "--fixtures"],
      { from: "ch01", to: "ch02", parts: ["package", "src", "demo", "tests"], fixtures: true },
    ],
    [["ch01"], { error: "the first two arguments must be snapshots, chNN chMM" }],
    [["1", "2"], { error: "the first two arguments must be snapshots, chNN chMM" }],
    [["ch01", "ch02", "lib"], { error: "unknown part or flag: lib" }],
    [["ch01", "ch02", "constructor"], { error: "unknown part or flag: constructor" }],
    [["ch01", "ch02", "--color"], { error: "unknown part or flag: --color" }],
  ])("parses %j", (args, expected) => {
    expect(parseDiffArgs(args)).toEqual(expected);
  });

  it.each<[Record<string, string>, boolean, boolean]>([
    [{}, true, true],
    [{}, false, false],
    [{ NO_COLOR: "1" }, true, false],
    [{ NO_COLOR: "" }, true, true],
    [{ FORCE_COLOR: "1" }, false, true],
    [{ FORCE_COLOR: "0" }, true, false],
    [{ FORCE_COLOR: "false" }, true, false],
    [{ FORCE_COLOR: "1", NO_COLOR: "1" }, false, true],
  ])("colour with %j on a terminal (%s): %s", (env, isTTY, expected) => {
    expect(colorWanted(env, isTTY)).toBe(expected);
  });

  it("shows the package files, src/, demo/ and tests/ in that order, leaves tests/fixtures/ out and says so on stderr", async () => {
    const run = await diff(["ch01", "ch02"]);
    expect(run.code).toBe(0);
    expect(files(run.stdout)).toEqual(["package.json", "src/a.ts", "demo/ch02.json", "tests/a.test.ts"]);
    expect(run.stdout).not.toContain("fixtures");
    expect(run.stderr).toBe("(1 file under tests/fixtures/ left out; add --fixtures to see them)\n");
    expect(run.stdout).not.toContain("\u001b");
  });

  it("--fixtures shows tests/fixtures/ too, and no note", async () => {
    const run = await diff(["ch01", "ch02", "--fixtures"]);
    expect(files(run.stdout)).toEqual([
      "package.json",
      "src/a.ts",
      "demo/ch02.json",
      "tests/a.test.ts",
      "tests/fixtures/big.json",
    ]);
    expect(run.stderr).toBe("");
  });

  it("a part filter shows only those parts, in reading order whatever order they were given in", async () => {
    expect(files((await diff(["ch01", "ch02", "src"])).stdout)).toEqual(["src/a.ts"]);
    expect(files((await diff(["ch01", "ch02", "tests", "demo"])).stdout)).toEqual([
      "demo/ch02.json",
      "tests/a.test.ts",
    ]);
    expect(files((await diff(["ch01", "ch02", "package"])).stdout)).toEqual(["package.json"]);
  });

  it("with colour, git's own colours reach the output", async () => {
    const run = await diff(["ch01", "ch02", "src"], true);
    expect(run.stdout.startsWith("\u001b[1mdiff --git a/ch01/src/a.ts b/ch02/src/a.ts\u001b[m\n")).toBe(true);
  });

  it("says when two snapshots, or the parts asked for, are the same", async () => {
    expect(await diff(["ch01", "ch01"])).toEqual({ code: 0, stdout: "ch01 and ch01 are the same\n", stderr: "" });
    expect(await diff(["ch01", "ch03", "src", "demo"])).toEqual({
      code: 0,
      stdout: "ch01 and ch03 are the same in src, demo\n",
      stderr: "",
    });
  });

  it("says when the only difference is under tests/fixtures/, and shows it with --fixtures", async () => {
    expect(await diff(["ch01", "ch03"])).toEqual({
      code: 0,
      stdout: "ch01 and ch03 differ only under tests/fixtures/ (1 file); add --fixtures to see them\n",
      stderr: "",
    });
    expect(files((await diff(["ch01", "ch03", "--fixtures"])).stdout)).toEqual(["tests/fixtures/big.json"]);
  });

  it("a snapshot that does not exist is exit 2", async () => {
    expect(await diff(["ch01", "ch09"])).toEqual({ code: 2, stdout: "", stderr: "no snapshot code/chapters/ch09\n" });
  });
});

describe("scripts/snapshot-diff.ts as a program", () => {
  const script = fileURLToPath(new URL("../snapshot-diff.ts", import.meta.url));
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
  const run = (args: string[], env: Record<string, string> = {}) => {
    const { FORCE_COLOR: _force, NO_COLOR: _none, ...inherited } = process.env;
    return spawnSync(process.execPath, ["--import", tsx, script, ...args], {
      encoding: "utf8",
      env: { ...inherited, ...env },
      timeout: 60_000,
    });
  };

  it("prints the usage on stderr and exits 2 on bad input, and on stdout with exit 0 for --help", () => {
    const bad = run(["ch02", "ch03", "lib"]);
    expect({ status: bad.status, stdout: bad.stdout, stderr: bad.stderr }).toEqual({
      status: 2,
      stdout: "",
      stderr: `unknown part or flag: lib\n${USAGE}\n`,
    });
    const help = run(["--help"]);
    expect({ status: help.status, stdout: help.stdout }).toEqual({ status: 0, stdout: `${USAGE}\n` });
    expect(USAGE.split("\n")[0]).toBe("usage: npm run diff -- chNN chMM [package] [src] [demo] [tests] [--fixtures]");
  });

  it("into a pipe has no colour, unless FORCE_COLOR=1 asks for it (for | less -R)", () => {
    const plain = run(["ch02", "ch03", "demo"]);
    expect(plain.status).toBe(0);
    expect(plain.stdout.startsWith("diff --git a/ch03/demo/ch03.json b/ch03/demo/ch03.json\n")).toBe(true);
    expect(plain.stdout).not.toContain("\u001b");
    const forced = run(["ch02", "ch03", "demo"], { FORCE_COLOR: "1" });
    expect(forced.stdout.startsWith("\u001b[1mdiff --git a/ch03/demo/ch03.json b/ch03/demo/ch03.json\u001b[m\n")).toBe(
      true,
    );
  });
});
