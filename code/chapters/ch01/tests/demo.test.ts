import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { PassThrough } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { narrated, prepareDemo } from "../src/cli/demo.js";
import { runCli } from "../src/cli.js";
import { assistantMessage, toolCall, type AssistantMessage } from "../src/core/messages.js";
import type { ModelClient } from "../src/core/model.js";
import { Sink } from "./support/sink.js";
import { runCliWithoutTerminal } from "./support/cli-run.js";

const entry = fileURLToPath(new URL("../src/chapters/ch01.ts", import.meta.url));
/** Chapter 1's own walkthrough: what `npm run ch01 -- --demo` replays (prepareDemo(1) reads demo/ch01.json). */
const walkthrough = JSON.parse(readFileSync(new URL("../demo/ch01.json", import.meta.url), "utf8")) as {
  messages: { role: string; content: string | null }[];
};
/** The walkthrough's last assistant turn: the demo's final answer. */
const finalText = walkthrough.messages.at(-1)?.content ?? "";
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const demoRoots: string[] = [];

// The walkthrough's narration, said before each of its two calls.
const SAY_LIST = "我先用 PowerShell 列出工作区里的文件。";
const SAY_READ = "再读 README.md 的内容。";
const CALL_LIST = '→ shell {"command":"Get-ChildItem -Force"}';
const CALL_READ = '→ shell {"command":"Get-Content README.md"}';
const NO_TTY = "无交互输入，默认拒绝。";
/** The demo's last line on stderr: where its temp folder is, and that it may go. */
const rootLine = (root: string): string => `演示工作区所在的临时文件夹：${root}（可以删除）。`;

interface DemoRun {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** The workspace the first line announced. */
  readonly workspace: string;
}

/** The environment of a reader with no key at all. */
const keyless = (): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));

/** A finished demo, with the workspace its first line named; its temp folder is removed after the test. */
function announced(run: Omit<DemoRun, "workspace">): DemoRun {
  const workspace = /演示工作区: (\S+)/.exec(run.stderr)?.[1] ?? "";
  // Only a folder the demo named is removed: never "." when the line is missing.
  if (workspace !== "") demoRoots.push(dirname(workspace));
  return { ...run, workspace };
}

/** The keyless demo as a child process without a terminal: for what needs the entry's process. */
function demoProgram(args: readonly string[] = []): DemoRun {
  const run = spawnSync(process.execPath, ["--import", tsx, entry, "--demo", ...args], {
    env: keyless(),
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 60_000,
  });
  return announced({ status: run.status, stdout: run.stdout, stderr: run.stderr });
}

/** The same demo through `runCli` in this process (the argv the ch01 entry passes it), without a terminal. */
async function demoRun(args: readonly string[] = []): Promise<DemoRun> {
  const cwd = mkdtempSync(join(tmpdir(), "ch01-demo-"));
  demoRoots.push(cwd);
  const run = await runCliWithoutTerminal(["run", "--chapter", "1", "--demo", ...args], keyless(), cwd, "ch01");
  return announced({ status: run.code, stdout: run.stdout, stderr: run.stderr });
}

// The waiting line a terminal gets: each spinner frame redraws it, and the next line clears it.
// eslint-disable-next-line no-control-regex -- the status line is made of exactly these escapes
const STATUS = /\r\x1b\[2K(?:(?:\x1b\[2m)?[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] [^\r\n\x1b]*(?:\x1b\[0m)?)?/g;

/** `npm run ch01 -- --demo` in this process with stderr on a terminal (stdin is none: every call is refused). */
async function demoOnTerminal(
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string; workspace: string }> {
  const stdout = new Sink();
  const stderr = new Sink();
  const cwd = mkdtempSync(join(tmpdir(), "ch01-demo-tty-"));
  demoRoots.push(cwd);
  const io = { env, cwd, stdin: new PassThrough(), stdinIsTTY: false, stdout, stderr, stderrIsTTY: true };
  const code = await runCli(["run", "--chapter", "1", "--demo"], io, "ch01");
  const workspace = /演示工作区: (\S+)/.exec(stderr.text)?.[1] ?? "";
  if (workspace !== "") demoRoots.push(dirname(workspace));
  return { code, stdout: stdout.text, stderr: stderr.text.replace(STATUS, ""), workspace };
}

afterEach(async () => {
  await Promise.all(demoRoots.splice(0).map((root) => rm(root, { recursive: true, force: true })));
});

/**
 * Each test's demos make their temporary folders in a folder of the test's own (os.tmpdir() reads these variables,
 * and a demo started as a program inherits them), removed after the test whether it passed or failed: a failing
 * test leaves no agent-tutorial-demo-* folder behind.
 */
const TMP_VARIABLES = ["TMPDIR", "TMP", "TEMP"] as const;
const machineTmp = tmpdir();
const savedTmp = TMP_VARIABLES.map((name) => process.env[name]);
let ownTmp = "";
beforeEach(() => {
  ownTmp = mkdtempSync(join(machineTmp, "demo-test-"));
  for (const name of TMP_VARIABLES) process.env[name] = ownTmp;
});
afterEach(async () => {
  TMP_VARIABLES.forEach((name, index) => {
    const saved = savedTmp[index];
    if (saved === undefined) Reflect.deleteProperty(process.env, name);
    else process.env[name] = saved;
  });
  await rm(ownTmp, { recursive: true, force: true });
});

/** Everything the demo prints on stderr without colour, from the workspace line to the temp-folder line. */
function plainStderr(workspace: string): string {
  return [
    `演示工作区: ${workspace}`,
    SAY_LIST,
    CALL_LIST,
    NO_TTY,
    "  ✗ denied",
    SAY_READ,
    CALL_READ,
    NO_TTY,
    "  ✗ denied",
    rootLine(dirname(workspace)),
    "",
  ].join("\n");
}

describe("the chapter 1 demo without a terminal", () => {
  it("needs no key, narrates each step in plain text, refuses both shell calls for want of a TTY with 无交互输入，默认拒绝。, names its temp folder last, and ends with exit 0", () => {
    const run = demoProgram();
    const { workspace } = run;
    expect(workspace).toMatch(/agent-tutorial-demo-[^/]+\/workspace$/);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe(plainStderr(workspace));
    // Not a terminal: not one escape sequence, so a pipe or a file gets plain text.
    expect(run.stderr).not.toContain("\u001b");
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
  });
});

describe("the chapter 1 demo's narration", () => {
  it("with --quiet says no narration and no progress, but still names its temp folder last", async () => {
    const run = await demoRun(["--quiet"]);
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(run.stderr).toBe(
      [`演示工作区: ${run.workspace}`, NO_TTY, NO_TTY, rootLine(dirname(run.workspace)), ""].join("\n"),
    );
  });

  it("on a terminal is dimmed (ANSI 2), and the answer on stdout is unchanged", async () => {
    const run = await demoOnTerminal({});
    const { workspace } = run;
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(run.stderr).toBe(
      [
        `演示工作区: ${workspace}`,
        `\u001b[2m${SAY_LIST}\u001b[0m`,
        CALL_LIST,
        NO_TTY,
        "  \u001b[33m✗ denied\u001b[0m",
        `\u001b[2m${SAY_READ}\u001b[0m`,
        CALL_READ,
        NO_TTY,
        "  \u001b[33m✗ denied\u001b[0m",
        rootLine(dirname(workspace)),
        "",
      ].join("\n"),
    );
  });

  it("on a terminal with NO_COLOR is plain text", async () => {
    const run = await demoOnTerminal({ NO_COLOR: "1" });
    const { workspace } = run;
    expect(run.code).toBe(0);
    expect(run.stderr).toBe(plainStderr(workspace));
  });

  it("narrated(model, say) says the text of each turn that asks for tools before handing the turn on, and never the closing answer", async () => {
    const turns = [
      assistantMessage("step one", [toolCall("call_1", "shell", "{}")]),
      assistantMessage(null, [toolCall("call_2", "shell", "{}")]),
      assistantMessage("  ", [toolCall("call_3", "shell", "{}")]),
      assistantMessage("the answer", []),
    ];
    let next = 0;
    const model: ModelClient = {
      complete: () => Promise.resolve({ message: turns[next++] as AssistantMessage, finishReason: "stop" }),
    };
    const events: string[] = [];
    const narrating = narrated(model, (text) => events.push(`said ${text}`));
    for (const turn of turns) {
      const reply = await narrating.complete({ messages: [], tools: [] });
      expect(reply.message).toBe(turn);
      events.push(`returned ${String(reply.message.content)}`);
    }
    expect(events).toEqual([
      "said step one",
      "returned step one",
      "returned null",
      "returned   ",
      "returned the answer",
    ]);
  });
});

describe("prepareDemo(chapter)", () => {
  it("prepareDemo(1) replays demo/ch01.json in a fresh workspace holding only README.md", async () => {
    const file = JSON.parse(readFileSync(new URL("../demo/ch01.json", import.meta.url), "utf8")) as {
      chapter: number;
      messages: { role: string; content: string | null }[];
    };
    const setup = await prepareDemo(1);
    demoRoots.push(dirname(setup.workspace));
    expect(file.chapter).toBe(1);
    expect(setup.transcript.chapter).toBe(1);
    expect(setup.prompt).toBe(file.messages.find((message) => message.role === "user")?.content);
    expect(setup.transcript.messages.map((message) => [message.role, message.content])).toEqual(
      file.messages.map((message) => [message.role, message.content]),
    );
    expect(readdirSync(setup.workspace)).toEqual(["README.md"]);
    expect(setup.root).toBe(dirname(setup.workspace));
    expect(readdirSync(setup.root)).toEqual(["workspace"]);
  });
});

describe("an interrupted demo", () => {
  it("Ctrl-C says where the demo's temporary folder is before the process ends, and the folder lies in this test's own", async () => {
    const exit = vi.spyOn(process, "exit").mockImplementation((() => undefined) as never);
    const before = new Set(process.listeners("SIGINT"));
    const stderr = new Sink();
    // Ctrl-C as the first call's row appears: the run's handler is in place from before the first request.
    let interrupted = false;
    stderr.on("text", () => {
      const handler = process.listeners("SIGINT").find((listener) => !before.has(listener));
      if (interrupted || handler === undefined || !stderr.text.includes("\n→ ")) return;
      interrupted = true;
      handler("SIGINT");
    });
    let exits: unknown[][];
    try {
      const stdin = new PassThrough();
      stdin.end();
      const io = {
        env: keyless(),
        cwd: ownTmp,
        stdin,
        stdinIsTTY: false,
        stdout: new Sink(),
        stderr,
        stderrIsTTY: false,
      };
      await runCli(["run", "--chapter", "1", "--demo"], io, "ch01");
    } finally {
      exits = [...exit.mock.calls];
      exit.mockRestore();
    }
    expect(exits).toEqual([[130]]);
    const workspace = /演示工作区: (\S+)/.exec(stderr.text)?.[1] ?? "";
    expect(dirname(dirname(workspace))).toBe(ownTmp);
    const lines = stderr.text.split("\n");
    const at = lines.indexOf("已中断，正在停止本次运行启动的所有命令。");
    expect(at).toBeGreaterThan(0);
    expect(lines[at + 1]).toBe(`演示工作区所在的临时文件夹：${dirname(workspace)}（可以删除）。`);
  });
});
