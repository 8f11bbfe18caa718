import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const entry = fileURLToPath(new URL("../src/chapters/agent-tutorial.ts", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const demoRoots: string[] = [];

afterEach(async () => {
  await Promise.all(demoRoots.splice(0).map((root) => rm(root, { recursive: true, force: true })));
});

function unified(args: readonly string[]) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));
  return spawnSync(process.execPath, ["--import", tsx, entry, ...args], {
    env,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 60_000,
  });
}

describe("npm run agent-tutorial -- run --chapter N", () => {
  it.each([
    [
      ["run", "--chapter", "9", "--prompt", "x"],
      "配置错误: No profile for chapter 9; this snapshot knows chapters 1, 2, 3\n",
    ],
    [
      ["run", "--prompt", "x"],
      "配置错误: 用法: npm run agent-tutorial -- run --chapter <1|2|3> [选项]; 选项见 --help\n",
    ],
    [
      ["walk", "--chapter", "3"],
      "配置错误: 用法: npm run agent-tutorial -- run --chapter <1|2|3> [选项]; 选项见 --help\n",
    ],
    [
      ["run", "--chapter", "two"],
      "配置错误: 用法: npm run agent-tutorial -- run --chapter <1|2|3> [选项]; 选项见 --help\n",
    ],
  ])("%j exits 2 with one line and never contacts a model", (args, stderr) => {
    const run = unified(args);
    expect(run.status).toBe(2);
    expect(run.stderr).toBe(stderr);
    expect(run.stdout).toBe("");
  });

  it("runs chapter 2's profile on this snapshot: writes are not asked, the outside write fails in the handler", () => {
    const run = unified(["run", "--chapter", "2", "--demo"]);
    const workspace = /演示工作区: (\S+)/.exec(run.stderr)?.[1] ?? "";
    demoRoots.push(dirname(workspace));
    expect(run.status).toBe(0);
    // No policy with rules or audit in chapter 2: no [Permission] lines, and the inside write just happens.
    expect(run.stderr).not.toContain("[Permission]");
    expect(run.stderr).toContain("  ✗ path_escape");
    expect(readFileSync(join(workspace, "chapter3-note.txt"), "utf8")).toBe("演示工作区里有一个 README.md。\n");
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });

  it("runs chapter 3's profile with the full policy", () => {
    const run = unified(["run", "--chapter", "3", "--demo"]);
    demoRoots.push(dirname(/演示工作区: (\S+)/.exec(run.stderr)?.[1] ?? ""));
    expect(run.status).toBe(0);
    expect(run.stderr).toContain(
      "[Permission] write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden",
    );
  });
});
