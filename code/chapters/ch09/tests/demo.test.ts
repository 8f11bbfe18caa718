import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
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

const entry = fileURLToPath(new URL("../src/chapters/ch03.ts", import.meta.url));
/** Chapter 3's own walkthrough: what `npm run ch03 -- --demo` replays. */
const walkthrough = JSON.parse(readFileSync(new URL("../demo/ch03.json", import.meta.url), "utf8")) as {
  messages: { role: string; content: string | null }[];
};
/** The walkthrough's last assistant turn: the demo's final answer. */
const finalText = walkthrough.messages.at(-1)?.content ?? "";
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const demoRoots: string[] = [];

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

/** The environment of a reader with no key at all. */
function keyless(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));
}

/** The temp workspace the demo announced on its first line; its parent is removed after the test. */
function announcedWorkspace(output: string): string {
  const workspace = /演示工作区: (\S+)/.exec(output)?.[1];
  // Only a folder the demo named is removed: never "." when the line is missing.
  if (workspace === undefined) throw new Error(`the demo did not say where its workspace is:\n${output}`);
  demoRoots.push(dirname(workspace));
  return workspace;
}

/** The snapshot's own `.ts` sources, as the demo workspace holds them under `chapters/ch03/src/`, sorted. */
function seededSources(): string[] {
  const src = fileURLToPath(new URL("../src/", import.meta.url));
  return (readdirSync(src, { recursive: true }) as string[])
    .filter((file) => file.endsWith(".ts"))
    .map((file) => `chapters/ch03/src/${file.replace(/\\/g, "/")}`)
    .sort();
}

// The book's calls A, B and C, as the progress lines show them.
const CALL_A = '→ glob {"pattern":"chapters/ch03/src/**/*.ts"}';
const CALL_B = '→ write_file {"path":"chapter3-note.txt","content":"第 3 章：权限策略。\\n"}';
const CALL_C = '→ write_file {"path":"../outside.txt","content":"x"}';
const NOTE_CONTENT = "第 3 章：权限策略。\n";

const NO_TTY = "无交互输入，默认拒绝。";
const GLOB_ALLOWED = "[Permission] glob: allow (default) - No permission rule blocked the request";
const WRITE_NO_TTY = "[Permission] write_file: deny (terminal-approval) - No interactive approval input was available";
const WRITE_APPROVED = "[Permission] write_file: allow (terminal-approval) - User approved this tool call";
const WRITE_REFUSED = "[Permission] write_file: deny (terminal-approval) - User denied this tool call";
const HARD_DENY = "[Permission] write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden";
const QUESTION = "允许本次调用? [y/N]";
// The walkthrough's narration, said before each call.
const SAY_A = "调用 A: 先用 glob 列出第 3 章的源码 (read, 没有规则反对, 默认放行)。";
const SAY_B = "调用 B: 把摘要写进工作区里的 chapter3-note.txt (write, 命中 confirm-file-write, 要你批准)。";
const SAY_C = "调用 C: 再试着写到工作区外面的 ../outside.txt。";
/** The demo's last line on stderr: where its temp folder is, and that it may go. */
const rootLine = (root: string): string => `演示工作区所在的临时文件夹：${root}（可以删除）。`;

// The waiting line a terminal gets: each spinner frame redraws it, and the next line clears it.
// eslint-disable-next-line no-control-regex -- the status line is made of exactly these escapes
const STATUS = /\r\x1b\[2K(?:(?:\x1b\[2m)?[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] [^\r\n\x1b]*(?:\x1b\[0m)?)?/g;

/** `npm run ch03 -- --demo` in this process with stderr on a terminal (stdin is none: call B is refused). */
async function demoOnTerminal(
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string; workspace: string }> {
  const stdout = new Sink();
  const stderr = new Sink();
  const cwd = mkdtempSync(join(tmpdir(), "ch03-demo-tty-"));
  demoRoots.push(cwd);
  const io = { env, cwd, stdin: new PassThrough(), stdinIsTTY: false, stdout, stderr, stderrIsTTY: true };
  const code = await runCli(["run", "--chapter", "3", "--demo"], io, "ch03");
  const workspace = announcedWorkspace(stderr.text);
  return { code, stdout: stdout.text, stderr: stderr.text.replace(STATUS, ""), workspace };
}

/** `npm run ch03 -- --demo` as a program, with no key and no terminal: for what needs the entry's process. */
function demoProgram(args: readonly string[]) {
  return spawnSync(process.execPath, ["--import", tsx, entry, "--demo", ...args], {
    env: keyless(),
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 60_000,
  });
}

/**
 * The same demo through `runCli` in this process (the argv the ch03 entry passes it), with no key and no
 * terminal: the same code and output as the program, without starting one.
 */
async function demo(args: readonly string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const cwd = mkdtempSync(join(tmpdir(), "ch03-demo-"));
  demoRoots.push(cwd);
  const argv = ["run", "--chapter", "3", "--demo", ...args];
  const { code, stdout, stderr } = await runCliWithoutTerminal(argv, keyless(), cwd, "ch03");
  return { status: code, stdout, stderr };
}

/** Call A's row: the first of the paths glob found, sorted, and that more follow. */
const GLOB_PREVIEW = "chapters/ch03/src/adapters/bounded-fetch.ts …";

/** Everything the demo prints on stderr without colour, from the workspace line to the temp-folder line. */
function plainStderr(workspace: string): string {
  return [
    `演示工作区: ${workspace}`,
    SAY_A,
    CALL_A,
    GLOB_ALLOWED,
    `  ✓ ok  ${GLOB_PREVIEW}`,
    SAY_B,
    CALL_B,
    NO_TTY,
    WRITE_NO_TTY,
    "  ✗ denied",
    SAY_C,
    CALL_C,
    HARD_DENY,
    "  ✗ denied",
    rootLine(dirname(workspace)),
    "",
  ].join("\n");
}

describe("the chapter 3 demo without a terminal", () => {
  it("replays the book's calls A, B and C, each narrated: the glob allowed, the inside write denied for want of a TTY, the outside write hard-denied without a question; the temp folder named last", () => {
    const run = demoProgram([]);
    const workspace = announcedWorkspace(run.stderr);
    expect(workspace).toMatch(/agent-tutorial-demo-[^/]+\/workspace$/);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe(plainStderr(workspace));
    // Not a terminal: not one escape sequence, so a pipe or a file gets plain text.
    expect(run.stderr).not.toContain("\u001b");
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    // Nothing was written: not chapter3-note.txt (refused), not ../outside.txt beside the workspace (the hard deny).
    expect(readdirSync(workspace).sort()).toEqual(["README.md", "chapters"]);
    expect(existsSync(join(workspace, "chapter3-note.txt"))).toBe(false);
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
    expect(existsSync(join(dirname(workspace), "outside.txt"))).toBe(false);
  });

  it("the closing text says only what the run showed: no shell call, A allow (default), C denied by workspace-boundary before any question, no file written", async () => {
    const run = await demo([]);
    const workspace = announcedWorkspace(run.stderr);
    expect(run.status).toBe(0);
    const calls = run.stderr.split("\n").filter((line) => line.startsWith("→ "));
    expect(calls).toEqual([CALL_A, CALL_B, CALL_C]);
    // No shell call was made, so the closing text names none.
    expect(finalText).not.toMatch(/shell|PowerShell/i);
    // "调用 A (glob) 是 allow (default)": the glob's audit line says exactly that.
    expect(finalText).toContain("调用 A (glob) 是 allow (default)");
    expect(run.stderr).toContain(`${CALL_A}\n${GLOB_ALLOWED}\n`);
    // "没有终端都是 deny, 文件不会出现": B was denied for want of a TTY, and chapter3-note.txt is absent.
    expect(finalText).toContain("没有终端都是 deny, 文件不会出现");
    expect(run.stderr).toContain(`${CALL_B}\n${NO_TTY}\n${WRITE_NO_TTY}\n`);
    expect(existsSync(join(workspace, "chapter3-note.txt"))).toBe(false);
    // "调用 C 在询问之前就被 workspace-boundary 拒绝 …, 没有弹出审批, 也没有创建 ../outside.txt".
    expect(finalText).toContain("调用 C 在询问之前就被 workspace-boundary 拒绝");
    expect(finalText).toContain("没有弹出审批, 也没有创建 ../outside.txt");
    expect(run.stderr).toContain(`${CALL_C}\n${HARD_DENY}\n  ✗ denied\n`);
    expect(existsSync(join(dirname(workspace), "outside.txt"))).toBe(false);
  });

  it("tells the model, call by call: A's glob lists the snapshot's own sources, B the missing TTY, C the hard deny", async () => {
    const transcriptFolder = mkdtempSync(join(tmpdir(), "ch03-demo-transcript-"));
    demoRoots.push(transcriptFolder);
    const transcript = join(transcriptFolder, "demo.json");
    const run = await demo(["--transcript", transcript]);
    announcedWorkspace(run.stderr);
    expect(run.status).toBe(0);
    const recorded = JSON.parse(readFileSync(transcript, "utf8")) as {
      messages: { role: string; tool_call_id?: string; content: string | null }[];
    };
    const sources = seededSources();
    expect(sources).toContain("chapters/ch03/src/core/permissions.ts");
    expect(recorded.messages.filter((message) => message.role === "tool")).toEqual([
      { role: "tool", tool_call_id: "call_demo_1", content: sources.join("\n") },
      {
        role: "tool",
        tool_call_id: "call_demo_2",
        content: "Error [permission_denied]: No interactive approval input was available",
      },
      {
        role: "tool",
        tool_call_id: "call_demo_3",
        content: "Error [permission_denied]: Writing outside the workspace is forbidden",
      },
    ]);
  });

  it("with --quiet prints only the answer on stdout and no progress or narration lines, but keeps the audit and names the temp folder last", async () => {
    const run = await demo(["--quiet"]);
    const workspace = announcedWorkspace(run.stderr);
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(run.stderr).toBe(
      [
        `演示工作区: ${workspace}`,
        GLOB_ALLOWED,
        NO_TTY,
        WRITE_NO_TTY,
        HARD_DENY,
        rootLine(dirname(workspace)),
        "",
      ].join("\n"),
    );
  });
});

describe("the chapter 3 demo's narration", () => {
  it("on a terminal is dimmed (ANSI 2); the [Permission] lines, their order and the answer on stdout are unchanged", async () => {
    const run = await demoOnTerminal({});
    const { workspace } = run;
    const denied = "  \u001b[33m✗ denied\u001b[0m";
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(run.stderr).toBe(
      [
        `演示工作区: ${workspace}`,
        `\u001b[2m${SAY_A}\u001b[0m`,
        CALL_A,
        GLOB_ALLOWED,
        `  \u001b[32m✓ ok\u001b[0m  ${GLOB_PREVIEW}`,
        `\u001b[2m${SAY_B}\u001b[0m`,
        CALL_B,
        NO_TTY,
        WRITE_NO_TTY,
        denied,
        `\u001b[2m${SAY_C}\u001b[0m`,
        CALL_C,
        HARD_DENY,
        denied,
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

describe("prepareDemo(chapter) in this snapshot", () => {
  it.each<[number, string, string[]]>([
    [1, "ch01.json", ["README.md"]],
    [2, "ch02.json", ["README.md"]],
    [3, "ch03.json", ["README.md", "chapters"]],
    [4, "ch04.json", ["README.md"]],
    [5, "ch05.json", ["README.md"]],
    [6, "ch06.json", ["README.md"]],
    [7, "ch07.json", ["README.md", "skills"]],
  ])("prepareDemo(%i) replays its own demo/%s in a fresh workspace holding %j", async (chapter, name, contents) => {
    const file = JSON.parse(readFileSync(new URL(`../demo/${name}`, import.meta.url), "utf8")) as {
      chapter: number;
      messages: { role: string; content: string | null }[];
    };
    const setup = await prepareDemo(chapter);
    demoRoots.push(dirname(setup.workspace));
    expect(file.chapter).toBe(chapter);
    expect(setup.transcript.chapter).toBe(chapter);
    expect(setup.prompt).toBe(file.messages.find((message) => message.role === "user")?.content);
    expect(setup.transcript.messages.map((message) => [message.role, message.content])).toEqual(
      file.messages.map((message) => [message.role, message.content]),
    );
    expect(readdirSync(setup.workspace).sort()).toEqual(contents);
    expect(setup.root).toBe(dirname(setup.workspace));
    expect(readdirSync(setup.root)).toEqual(["workspace"]);
  });

  it("only chapter 3's workspace holds a copy of this snapshot's src/ under chapters/ch03/src/, for call A's glob", async () => {
    const setup = await prepareDemo(3);
    demoRoots.push(dirname(setup.workspace));
    const copied = join(setup.workspace, "chapters", "ch03", "src");
    const original = fileURLToPath(new URL("../src/", import.meta.url));
    expect(readFileSync(join(copied, "core", "permissions.ts"), "utf8")).toBe(
      readFileSync(join(original, "core", "permissions.ts"), "utf8"),
    );
    expect(seededSources()).toEqual(
      (readdirSync(copied, { recursive: true }) as string[])
        .filter((file) => file.endsWith(".ts"))
        .map((file) => `chapters/ch03/src/${file.replace(/\\/g, "/")}`)
        .sort(),
    );
  });
});

// The walkthrough has no shell call, so answering y runs no PowerShell: only `script` is needed.
const hasScript = spawnSync("script", ["--version"], { encoding: "utf8" }).status === 0;
const ptyOk = hasScript && process.platform === "linux";

/**
 * Runs the demo under a real pseudo-terminal (util-linux `script`) and types each answer when
 * the question appears, as a reader would.
 */
function demoUnderTerminal(answers: readonly string[]): Promise<{ code: number | null; output: string }> {
  const command = [process.execPath, "--import", tsx, entry, "--demo"].map((part) => `'${part}'`).join(" ");
  return new Promise((resolve, reject) => {
    const child = spawn("script", ["-qec", command, "/dev/null"], { env: keyless(), stdio: ["pipe", "pipe", "pipe"] });
    let output = "";
    let asked = 0;
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
      const questions = output.split(QUESTION).length - 1;
      while (asked < questions) {
        child.stdin.write(`${answers[asked] ?? "n"}\n`);
        asked += 1;
      }
    });
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe.skipIf(!ptyOk)("the chapter 3 demo on a terminal", () => {
  it("answering y to call B writes chapter3-note.txt exactly once with the walkthrough's content, and C is still hard-denied without a question", async () => {
    const { code, output } = await demoUnderTerminal(["y"]);
    expect(code).toBe(0);
    const workspace = announcedWorkspace(output);
    expect(output.split(QUESTION).length - 1).toBe(1);
    expect(output).toContain("工具调用需要批准: write_file");
    expect(output).toContain("原因: File writes require explicit approval from chapter 3 onward");
    expect(output.split(WRITE_APPROVED).length - 1).toBe(1);
    expect(output).toContain(HARD_DENY);
    expect(output).not.toContain(NO_TTY);
    expect(readFileSync(join(workspace, "chapter3-note.txt"), "utf8")).toBe(NOTE_CONTENT);
    expect(readdirSync(workspace).sort()).toEqual(["README.md", "chapter3-note.txt", "chapters"]);
    expect(existsSync(join(dirname(workspace), "outside.txt"))).toBe(false);
  });

  it("pressing Enter at call B refuses it with User denied this tool call, and nothing is written", async () => {
    const { code, output } = await demoUnderTerminal([""]);
    expect(code).toBe(0);
    const workspace = announcedWorkspace(output);
    expect(output.split(QUESTION).length - 1).toBe(1);
    expect(output).toContain(WRITE_REFUSED);
    expect(output).not.toContain(WRITE_APPROVED);
    expect(output).toContain(HARD_DENY);
    expect(readdirSync(workspace).sort()).toEqual(["README.md", "chapters"]);
    expect(existsSync(join(dirname(workspace), "outside.txt"))).toBe(false);
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
      await runCli(["run", "--chapter", "3", "--demo"], io, "ch03");
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
