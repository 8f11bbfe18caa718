import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { helpText, parseCliArgs } from "../src/cli/args.js";
import { runCliWithoutTerminal } from "./support/cli-run.js";

const entry = fileURLToPath(new URL("../src/chapters/agent-tutorial.ts", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const folders: string[] = [];

afterEach(async () => {
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

/** A reader's environment with no key, and a fresh empty folder to run from (so no `.env` is found). */
function keylessReader(): { env: NodeJS.ProcessEnv; cwd: string } {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_") && key !== "INIT_CWD"),
  );
  const cwd = mkdtempSync(join(tmpdir(), "ch03-unified-"));
  folders.push(cwd);
  return { env, cwd };
}

/** The unified entry as a program, as a reader with no key starts it: for what needs the process itself. */
function unifiedProgram(args: readonly string[]) {
  return spawnSync(process.execPath, ["--import", tsx, entry, ...args], {
    ...keylessReader(),
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 60_000,
  });
}

/**
 * The unified entry's CLI (`runCli` with the argv the entry passes it) in this process, with the I/O a reader
 * with no key has when no terminal is attached: the same code and output as the program, without a process.
 */
async function unified(
  args: readonly string[],
): Promise<{ status: number; stdout: string; stderr: string; cwd: string }> {
  const { env, cwd } = keylessReader();
  const { code, stdout, stderr } = await runCliWithoutTerminal(args, env, cwd);
  return { status: code, stdout, stderr, cwd };
}

/**
 * The demo's stderr with its temp workspace, announced on the first line, replaced by `<ws>`, and the temp
 * folder around it, named on the last line, by `<root>`.
 */
function demoOutput(stderr: string): { workspace: string; lines: string[] } {
  const workspace = /^演示工作区: (\S+)\n/.exec(stderr)?.[1];
  if (workspace === undefined) throw new Error(`the demo did not say where its workspace is:\n${stderr}`);
  folders.push(dirname(workspace));
  return {
    workspace,
    lines: stderr.replaceAll(workspace, "<ws>").replaceAll(dirname(workspace), "<root>").split("\n"),
  };
}

/** The demo's last line on stderr: where its temp folder is, and that it may go. */
const ROOT_LINE = "演示工作区所在的临时文件夹：<root>（可以删除）。";

interface Walkthrough {
  messages: {
    role: string;
    content: string | null;
    tool_calls?: { function: { name: string; arguments: string } }[];
  }[];
}

/**
 * Chapter `chapter`'s own walkthrough in this snapshot: its `→` lines, in order, the narration of each turn
 * that asks for tools (`null` where it has none), and its closing text.
 */
function walkthrough(chapter: number): { calls: string[]; narration: (string | null)[]; finalText: string } {
  const name = `ch${String(chapter).padStart(2, "0")}.json`;
  const { messages } = JSON.parse(readFileSync(new URL(`../demo/${name}`, import.meta.url), "utf8")) as Walkthrough;
  return {
    calls: messages.flatMap((message) =>
      (message.tool_calls ?? []).map((call) => `→ ${call.function.name} ${call.function.arguments}`),
    ),
    narration: messages
      .filter((message) => message.role === "assistant" && (message.tool_calls ?? []).length > 0)
      .map((message) => message.content),
    finalText: messages.at(-1)?.content ?? "",
  };
}

/** The book's 配置错误 line naming all three settings, then where the run looked: `folder`, which has no `.env`. */
const missingAll = (folder: string): string =>
  "配置错误: Missing required settings: OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL\n" +
  `  looked in the environment; there is no .env in ${folder} (npm reads .env from the folder it is started in: ` +
  "start it from the repository root)\n";
const NO_TTY = "无交互输入，默认拒绝。";
const NO_TTY_AUDIT = "No interactive approval input was available";

describe("npm run agent-tutorial -- run --chapter N", () => {
  it.each([
    [[], "Expected command: run"],
    [["walk", "--chapter", "3", "--prompt", "x"], "Expected command: run"],
    [["run", "--prompt", "x"], "Both --chapter and --prompt are required"],
    [["run", "--chapter", "3"], "Both --chapter and --prompt are required"],
    [
      ["run", "--chapter", "3", "--prompt", "x", "--yolo"],
      'Unknown argument: --yolo\n  a prompt of several words or lines needs quotes (--prompt "…"), or put it in a file: --prompt-file <path>',
    ],
    [
      ["run", "--chapter", "two", "--prompt", "x"],
      '--chapter must be a chapter number from 1 to 9 (9 or ch09), not "two"',
    ],
    [
      ["run", "--chapter", "10", "--prompt", "x"],
      "Chapter 10 has not been migrated to this snapshot; it knows chapters 1, 2, 3, 4, 5, 6, 7, 8, 9",
    ],
  ])("%j exits 1 with one 运行失败 line and never contacts a model", async (args, message) => {
    const run = await unified(args);
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
      status: 1,
      stdout: "",
      stderr: `运行失败: ${message}\n`,
    });
  });

  it("the entry starts as a program: --help prints the unified usage on stdout and exits 0", () => {
    const run = unifiedProgram(["--help"]);
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
      status: 0,
      stdout: helpText(undefined),
      stderr: "",
    });
    expect(run.stdout.split("\n")[0]).toBe(
      "用法: npm run agent-tutorial -- run --chapter <1|2|3|4|5|6|7|8|9> --prompt <text> [选项]",
    );
  });

  it("--help lists every option the parser accepts, and the parser accepts every option it lists", () => {
    // The parser's own tables, read from its source: an option added there and not to the help fails here.
    const source = readFileSync(new URL("../src/cli/args.ts", import.meta.url), "utf8");
    const tables = /const VALUE_OPTIONS = \{([^}]*)\}[\s\S]*?const FLAGS = \{([^}]*)\}/.exec(source);
    if (tables === null) throw new Error("args.ts no longer has its VALUE_OPTIONS and FLAGS tables");
    const names = (table: string): string[] =>
      [...table.matchAll(/"(-{1,2}[a-z][a-z-]*)":/g)].map((m) => m[1] as string);
    const [values, flags] = [names(tables[1] as string), names(tables[2] as string)];
    expect(values).toEqual([
      "--chapter",
      "--prompt",
      "-p",
      "--prompt-file",
      "--workspace",
      "-w",
      "--model",
      "--base-url",
      "--max-turns",
      "--transcript",
      "--replay",
    ]);
    expect(flags).toEqual(["--help", "-h", "--demo", "--quiet", "-q"]);
    // Each one really is accepted (a value option with a value, a flag alone), and a made-up one is not.
    // --demo brings its own task and workspace, so it runs only with the others; a task's option is the only one.
    for (const option of values) {
      const value = option === "--chapter" || option === "--max-turns" ? "3" : "v";
      const bringsTask = ["--prompt", "-p", "--prompt-file", "--replay"].includes(option);
      const others = option === "--workspace" || option === "-w" ? ["-p", "x"] : bringsTask ? [] : ["--demo"];
      const argv = option === "--chapter" ? ["run", "--demo"] : ["run", "--chapter", "3", ...others];
      expect(() => parseCliArgs([...argv, option, value])).not.toThrow();
    }
    for (const flag of flags) expect(() => parseCliArgs(["run", "--chapter", "3", "--demo", flag])).not.toThrow();
    expect(() => parseCliArgs(["run", "--chapter", "3", "-p", "x", "--verbose"])).toThrow(
      "Unknown argument: --verbose",
    );
    // The help's option lines: `  -p, --prompt <text>   …` or `      --demo   …`.
    const listed = [...helpText(undefined).matchAll(/^ {2}(?:(-[a-z]), )? *(--[a-z][a-z-]*)/gm)].flatMap((m) =>
      [m[1], m[2]].filter((name): name is string => name !== undefined),
    );
    expect([...listed].sort()).toEqual([...values, ...flags].sort());
  });

  it("the usage line, followed literally with real values, is accepted: with no settings it is a 配置错误 (exit 2), with --demo it runs", async () => {
    const usage = helpText(undefined).split("\n")[0] ?? "";
    const prefix = "用法: npm run agent-tutorial -- ";
    expect(usage.startsWith(prefix)).toBe(true);
    const args = usage
      .slice(prefix.length)
      .replace("<1|2|3|4|5|6|7|8|9>", "1")
      .replace("<text>", "x")
      .split(" ")
      .filter((word) => word !== "[选项]");
    expect(args).toEqual(["run", "--chapter", "1", "--prompt", "x"]);
    const run = await unified(args);
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
      status: 2,
      stdout: "",
      stderr: missingAll(run.cwd),
    });
    // [选项] stands for the options below it: one of them, --demo, needs no settings.
    const demo = await unified([...args.slice(0, 3), "--demo"]);
    demoOutput(demo.stderr);
    expect(demo.status).toBe(0);
    expect(demo.stdout).toBe(`${walkthrough(1).finalText}\n`);
  });

  it("a run without the three settings exits 2 with the book's 配置错误 line naming all of them, then where it looked", async () => {
    const run = await unified(["run", "--chapter", "3", "--prompt", "x"]);
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
      status: 2,
      stdout: "",
      stderr: missingAll(run.cwd),
    });
  });

  it("run --chapter 1 --demo replays chapter 1's own walkthrough, narrated: two shell calls, each asked and refused without a TTY, no unknown_tool", async () => {
    const { calls, narration, finalText } = walkthrough(1);
    expect(calls).toEqual([
      '→ shell {"command":"Get-ChildItem -Force"}',
      '→ shell {"command":"Get-Content README.md"}',
    ]);
    expect(narration).toEqual(["我先用 PowerShell 列出工作区里的文件。", "再读 README.md 的内容。"]);
    const run = await unified(["run", "--chapter", "1", "--demo"]);
    const { workspace, lines } = demoOutput(run.stderr);
    expect(run.status).toBe(0);
    // Chapter 1 keeps only the shell's confirmation: no [Permission] lines.
    expect(lines).toEqual([
      "演示工作区: <ws>",
      narration[0],
      calls[0],
      NO_TTY,
      "  ✗ denied",
      narration[1],
      calls[1],
      NO_TTY,
      "  ✗ denied",
      ROOT_LINE,
      "",
    ]);
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });

  it("run --chapter 2 --demo replays chapter 2's own walkthrough: write, edit, read, glob, then ../secret.txt narrated and refused as path_escape", async () => {
    const { calls, narration, finalText } = walkthrough(2);
    expect(calls).toEqual([
      '→ write_file {"path":"demo/note.txt","content":"alpha"}',
      '→ edit_file {"path":"demo/note.txt","old_text":"alpha","new_text":"gamma"}',
      '→ read_file {"path":"demo/note.txt"}',
      '→ glob {"pattern":"demo/*.txt"}',
      '→ read_file {"path":"../secret.txt"}',
    ]);
    expect(narration).toEqual([null, null, null, null, "再试一次工作区外面。"]);
    const run = await unified(["run", "--chapter", "2", "--demo"]);
    const { workspace, lines } = demoOutput(run.stderr);
    expect(run.status).toBe(0);
    // No rules and no audit in chapter 2: no [Permission] lines, and the file tools are not asked.
    expect(lines).toEqual([
      "演示工作区: <ws>",
      calls[0],
      "  ✓ ok  Wrote 5 UTF-8 bytes to demo/note.txt",
      calls[1],
      "  ✓ ok  Edited demo/note.txt",
      calls[2],
      "  ✓ ok  gamma",
      calls[3],
      "  ✓ ok  demo/note.txt",
      narration[4],
      calls[4],
      "  ✗ path_escape",
      ROOT_LINE,
      "",
    ]);
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(readFileSync(join(workspace, "demo", "note.txt"), "utf8")).toBe("gamma");
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });

  it("run --chapter 3 --demo replays chapter 3's own walkthrough, the book's calls A, B and C, each narrated, every decision audited", async () => {
    const { calls, narration, finalText } = walkthrough(3);
    expect(calls).toEqual([
      '→ glob {"pattern":"chapters/ch03/src/**/*.ts"}',
      '→ write_file {"path":"chapter3-note.txt","content":"第 3 章：权限策略。\\n"}',
      '→ write_file {"path":"../outside.txt","content":"x"}',
    ]);
    expect(narration).toEqual([
      "调用 A: 先用 glob 列出第 3 章的源码 (read, 没有规则反对, 默认放行)。",
      "调用 B: 把摘要写进工作区里的 chapter3-note.txt (write, 命中 confirm-file-write, 要你批准)。",
      "调用 C: 再试着写到工作区外面的 ../outside.txt。",
    ]);
    const run = await unified(["run", "--chapter", "3", "--demo"]);
    const { workspace, lines } = demoOutput(run.stderr);
    expect(run.status).toBe(0);
    expect(lines).toEqual([
      "演示工作区: <ws>",
      narration[0],
      calls[0],
      "[Permission] glob: allow (default) - No permission rule blocked the request",
      "  ✓ ok  chapters/ch03/src/adapters/bounded-fetch.ts …",
      narration[1],
      calls[1],
      NO_TTY,
      `[Permission] write_file: deny (terminal-approval) - ${NO_TTY_AUDIT}`,
      "  ✗ denied",
      narration[2],
      calls[2],
      "[Permission] write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden",
      "  ✗ denied",
      ROOT_LINE,
      "",
    ]);
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(readdirSync(workspace).sort()).toEqual(["README.md", "chapters"]);
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });

  it("run --chapter 5 --demo replays chapter 5's own walkthrough: todo_write allowed by default and never asked, the invalid update refused before any hook, the reminder narrated once before call 6", async () => {
    const { calls, narration, finalText } = walkthrough(5);
    expect(calls.map((call) => call.split(" ")[1])).toEqual([
      "todo_write",
      "todo_write",
      "write_file",
      "read_file",
      "glob",
      "todo_write",
    ]);
    const run = await unified(["run", "--chapter", "5", "--demo"]);
    const { workspace, lines } = demoOutput(run.stderr);
    expect(run.status).toBe(0);
    const allowed = (tool: string, preview: string): string[] => [
      `[Hook] PreToolUse: ${tool}`,
      `[Permission] ${tool}: allow (default) - No permission rule blocked the request`,
      `[Hook] PostToolUse: ${tool} -> ok`,
      `  ✓ ok  ${preview}`,
    ];
    // Chapter 4's demo hooks are chapter 4's: here only the logging hooks run, so every allow is the policy's own.
    expect(lines).toEqual([
      "演示工作区: <ws>",
      "[Hook] UserPromptSubmit",
      narration[0],
      // A progress line wider than 79 columns goes on in rows of our own, so no row starts with the model's text.
      '→ todo_write {"todos":[{"content":"  读取 README.md  ","status":"in_progress"}',
      '    | ,{"content":"写下运行步骤","status":"pending"},{"content":"总结验证步骤",',
      '    | "status":"pending"}]}',
      // todo_write answers the model with the snapshot as JSON, non-ASCII escaped; its preview shows the text.
      ...allowed("todo_write", '{"todos":[{"content":"读取 REA[省略 104 个字符]nding"}]}'),
      narration[1],
      calls[1],
      "  ✗ invalid_arguments",
      narration[2],
      calls[2],
      "[Hook] PreToolUse: write_file",
      NO_TTY,
      `[Permission] write_file: deny (terminal-approval) - ${NO_TTY_AUDIT}`,
      "  ✗ denied",
      narration[3],
      calls[3],
      ...allowed("read_file", "# 演示工作区 …"),
      narration[4],
      calls[4],
      ...allowed("glob", "README.md"),
      "（这次请求末尾多了一条临时 system 提醒：Keep the TODO list current. Call todo_write with the complete task snapshot when the plan changes. 它只在这一次请求里，不进历史，也不进 transcript。）",
      narration[5],
      '→ todo_write {"todos":[{"content":"读取 README.md","status":"completed"},{"con',
      '    | tent":"写下运行步骤","status":"completed"},{"content":"总结验证步骤","sta',
      '    | tus":"completed"}]}',
      ...allowed("todo_write", '{"todos":[{"content":"读取 REA[省略 106 个字符]leted"}]}'),
      "[Hook] Stop",
      ROOT_LINE,
      "",
    ]);
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });
  it("run --chapter 9 --demo replays chapter 9's own walkthrough: the selected memories said before the first call, extraction and consolidation after the answer", async () => {
    const { calls, narration, finalText } = walkthrough(9);
    const run = await unified(["run", "--chapter", "9", "--demo", "--quiet"]);
    const { workspace, lines } = demoOutput(run.stderr);
    expect(run.status).toBe(0);
    expect(calls).toEqual(['→ read_file {"path":"README.md"}']);
    expect(narration).toHaveLength(1);
    const id = /[0-9a-f]{32}/g;
    expect(lines.map((line) => line.replace(id, "<id>"))).toEqual([
      "演示工作区: <ws>",
      "[Hook] UserPromptSubmit",
      "[Memory] selected 2 of 9: powershell-only-examples, answer-in-chinese",
      "[Hook] PreToolUse: read_file",
      "[Permission] read_file: allow (default) - No permission rule blocked the request",
      "[Hook] PostToolUse: read_file -> ok",
      "[Hook] Stop",
      "[Memory] extracted 1: windows-examples",
      "[Memory] consolidated tabs-old, tabs-new into tabs",
      "[Memory] saved .memory/windows-examples-<id>.md (project): Project examples target Windows",
      "[Memory] saved .memory/tabs-<id>.md (user): Indentation preference",
      "[Memory] removed .memory/tabs-old-<id>.md",
      "[Memory] removed .memory/tabs-new-<id>.md",
      ROOT_LINE,
      "",
    ]);
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    // The store is the workspace's own, beside README.md; nothing else was made.
    expect(readdirSync(workspace).sort()).toEqual([".memory", "README.md"]);
  });
});
