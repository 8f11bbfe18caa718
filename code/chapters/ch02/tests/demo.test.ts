import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const entry = fileURLToPath(new URL("../src/chapters/ch02.ts", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const demoRoots: string[] = [];

afterEach(async () => {
  await Promise.all(demoRoots.splice(0).map((root) => rm(root, { recursive: true, force: true })));
});

describe("the chapter 2 demo without a terminal", () => {
  it("needs no key, writes inside, refuses the outside write as path_escape and the shell for want of a TTY", () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));
    const run = spawnSync(process.execPath, ["--import", tsx, entry, "--demo"], {
      env,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 60_000,
    });
    const workspace = /演示工作区: (\S+)/.exec(run.stderr)?.[1] ?? "";
    demoRoots.push(dirname(workspace));
    expect(run.status).toBe(0);
    const steps = run.stderr.split("\n").filter((line) => /^(→ | {2}[✓✗])/.test(line));
    expect(steps.map((line) => line.replace(/^→ (\w+).*$/, "$1"))).toEqual([
      "glob",
      "  ✓ ok",
      "read_file",
      "  ✓ ok",
      "write_file",
      "  ✓ ok",
      "write_file",
      "  ✗ path_escape",
      "shell",
      "  ✗ denied",
    ]);
    expect(readFileSync(join(workspace, "notes", "summary.txt"), "utf8")).toBe("这是 agent-tutorial 的演示工作区。\n");
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });
});
