import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { helpText } from "../src/cli/args.js";

const entry = fileURLToPath(new URL("../src/chapters/agent-tutorial.ts", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const folders: string[] = [];

afterEach(async () => {
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

/** The unified entry as a reader with no key runs it, from an empty folder (so no `.env` is found). */
function unified(args: readonly string[]) {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_") && key !== "INIT_CWD"),
  );
  const cwd = mkdtempSync(join(tmpdir(), "ch03-unified-"));
  folders.push(cwd);
  return spawnSync(process.execPath, ["--import", tsx, entry, ...args], {
    cwd,
    env,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 60_000,
  });
}

/** The demo's stderr with its temp workspace, announced on the first line, replaced by `<ws>`. */
function demoOutput(stderr: string): { workspace: string; lines: string[] } {
  const workspace = /^演示工作区: (\S+)\n/.exec(stderr)?.[1];
  if (workspace === undefined) throw new Error(`the demo did not say where its workspace is:\n${stderr}`);
  folders.push(dirname(workspace));
  return { workspace, lines: stderr.replaceAll(workspace, "<ws>").split("\n") };
}

const FINAL_ANSWER = /^演示结束。.*\n$/;
const GLOB = '→ glob {"pattern":"**/*.md"}';
const SHELL = '→ shell {"command":"Get-ChildItem -Force"}';
const WRITE_INSIDE = '→ write_file {"path":"chapter3-note.txt","content":"演示工作区里有一个 README.md。\\n"}';
const WRITE_OUTSIDE = '→ write_file {"path":"../outside.txt","content":"不应该出现\\n"}';
const NO_TTY = "无交互输入，默认拒绝。";
const NO_TTY_AUDIT = "No interactive approval input was available";

describe("npm run agent-tutorial -- run --chapter N", () => {
  it.each([
    [[], "Expected command: run"],
    [["walk", "--chapter", "3", "--prompt", "x"], "Expected command: run"],
    [["run", "--prompt", "x"], "Both --chapter and --prompt are required"],
    [["run", "--chapter", "3"], "Both --chapter and --prompt are required"],
    [["run", "--chapter", "3", "--prompt", "x", "--yolo"], "Unknown argument: --yolo"],
    [["run", "--chapter", "two", "--prompt", "x"], '--chapter must be a whole number from 1 to 99, not "two"'],
    [["run", "--chapter", "9", "--prompt", "x"], "No profile for chapter 9; this snapshot knows chapters 1, 2, 3"],
  ])("%j exits 1 with one 运行失败 line and never contacts a model", (args, message) => {
    const run = unified(args);
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
      status: 1,
      stdout: "",
      stderr: `运行失败: ${message}\n`,
    });
  });

  it("--help prints the unified usage on stdout and exits 0", () => {
    const run = unified(["--help"]);
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
      status: 0,
      stdout: helpText(undefined),
      stderr: "",
    });
    expect(run.stdout.split("\n")[0]).toBe("用法: npm run agent-tutorial -- run --chapter <n> --prompt <text> [选项]");
  });

  it("a run without the three settings exits 2 with one 配置错误 line naming all of them", () => {
    const run = unified(["run", "--chapter", "3", "--prompt", "x"]);
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
      status: 2,
      stdout: "",
      stderr: "配置错误: Missing required settings: OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL\n",
    });
  });

  it("runs chapter 1's profile on this snapshot: only the shell exists, and it is asked", () => {
    const run = unified(["run", "--chapter", "1", "--demo"]);
    const { workspace, lines } = demoOutput(run.stderr);
    expect(run.status).toBe(0);
    expect(lines).toEqual([
      "演示工作区: <ws>",
      GLOB,
      "  ✗ unknown_tool",
      SHELL,
      NO_TTY,
      "  ✗ denied",
      WRITE_INSIDE,
      "  ✗ unknown_tool",
      WRITE_OUTSIDE,
      "  ✗ unknown_tool",
      "",
    ]);
    expect(run.stdout).toMatch(FINAL_ANSWER);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });

  it("runs chapter 2's profile on this snapshot: writes are not asked, the outside write fails in the handler", () => {
    const run = unified(["run", "--chapter", "2", "--demo"]);
    const { workspace, lines } = demoOutput(run.stderr);
    expect(run.status).toBe(0);
    // No rules and no audit in chapter 2: no [Permission] lines; only the shell is asked.
    expect(lines).toEqual([
      "演示工作区: <ws>",
      GLOB,
      "  ✓ ok",
      SHELL,
      NO_TTY,
      "  ✗ denied",
      WRITE_INSIDE,
      "  ✓ ok",
      WRITE_OUTSIDE,
      "  ✗ path_escape",
      "",
    ]);
    expect(run.stdout).toMatch(FINAL_ANSWER);
    expect(readFileSync(join(workspace, "chapter3-note.txt"), "utf8")).toBe("演示工作区里有一个 README.md。\n");
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });

  it("runs chapter 3's profile with the full policy: every decision audited, the outside write a hard deny", () => {
    const run = unified(["run", "--chapter", "3", "--demo"]);
    const { workspace, lines } = demoOutput(run.stderr);
    expect(run.status).toBe(0);
    expect(lines).toEqual([
      "演示工作区: <ws>",
      GLOB,
      "[Permission] glob: allow (default) - No permission rule blocked the request",
      "  ✓ ok",
      SHELL,
      NO_TTY,
      `[Permission] shell: deny (terminal-approval) - ${NO_TTY_AUDIT}`,
      "  ✗ denied",
      WRITE_INSIDE,
      NO_TTY,
      `[Permission] write_file: deny (terminal-approval) - ${NO_TTY_AUDIT}`,
      "  ✗ denied",
      WRITE_OUTSIDE,
      "[Permission] write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden",
      "  ✗ denied",
      "",
    ]);
    expect(run.stdout).toMatch(FINAL_ANSWER);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });
});
