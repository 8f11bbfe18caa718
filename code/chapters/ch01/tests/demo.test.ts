import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const entry = fileURLToPath(new URL("../src/chapters/ch01.ts", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const demoRoots: string[] = [];

afterEach(async () => {
  await Promise.all(demoRoots.splice(0).map((root) => rm(root, { recursive: true, force: true })));
});

describe("the chapter 1 demo without a terminal", () => {
  it("needs no key, refuses both shell calls for want of a TTY, and ends with exit 0", () => {
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
    expect(run.stderr.split("\n").filter((line) => line.startsWith("→ "))).toEqual([
      '→ shell {"command":"Get-ChildItem -Force"}',
      '→ shell {"command":"Get-Content README.md"}',
    ]);
    expect(run.stderr.match(/\(没有交互式终端, 无法询问, 已拒绝: shell\)/g)).toHaveLength(2);
    expect(run.stdout.startsWith("演示结束。")).toBe(true);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
  });
});
