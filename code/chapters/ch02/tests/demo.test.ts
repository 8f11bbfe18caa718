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

const entry = fileURLToPath(new URL("../src/chapters/ch02.ts", import.meta.url));
/** Chapter 2's own walkthrough: what `npm run ch02 -- --demo` replays (prepareDemo(2) reads demo/ch02.json). */
const walkthrough = JSON.parse(readFileSync(new URL("../demo/ch02.json", import.meta.url), "utf8")) as {
  messages: { role: string; content: string | null }[];
};
/** The walkthrough's last assistant turn: the demo's final answer. */
const finalText = walkthrough.messages.at(-1)?.content ?? "";
/** Chapter 1's walkthrough, which this snapshot carries too, for `npm run ch01 -- --demo` on it. */
const chapterOneWalkthrough = JSON.parse(readFileSync(new URL("../demo/ch01.json", import.meta.url), "utf8")) as {
  messages: { role: string; content: string | null }[];
};
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const demoRoots: string[] = [];

// Chapter 2's walkthrough narrates only its last call; chapter 1's narrates both of its calls.
const SAY_OUTSIDE = "再试一次工作区外面。";
const CALLS = [
  '→ write_file {"path":"demo/note.txt","content":"alpha"}',
  '→ edit_file {"path":"demo/note.txt","old_text":"alpha","new_text":"gamma"}',
  '→ read_file {"path":"demo/note.txt"}',
  '→ glob {"pattern":"demo/*.txt"}',
  '→ read_file {"path":"../secret.txt"}',
] as const;
/** The demo's last line on stderr: where its temp folder is, and that it may go. */
const rootLine = (root: string): string => `演示工作区所在的临时文件夹：${root}（可以删除）。`;

// The waiting line a terminal gets: each spinner frame redraws it, and the next line clears it.
// eslint-disable-next-line no-control-regex -- the status line is made of exactly these escapes
const STATUS = /\r\x1b\[2K(?:(?:\x1b\[2m)?[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] [^\r\n\x1b]*(?:\x1b\[0m)?)?/g;

/** `npm run ch02 -- --demo` in this process with stderr on a terminal (stdin is none: nothing is asked here). */
async function demoOnTerminal(
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string; workspace: string }> {
  const stdout = new Sink();
  const stderr = new Sink();
  const cwd = mkdtempSync(join(tmpdir(), "ch02-demo-tty-"));
  demoRoots.push(cwd);
  const io = { env, cwd, stdin: new PassThrough(), stdinIsTTY: false, stdout, stderr, stderrIsTTY: true };
  const code = await runCli(["run", "--chapter", "2", "--demo"], io, "ch02");
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

/** What each of the four allowed calls returned, as its `✓ ok` row shows it: the first line of the result. */
const PREVIEWS = ["Wrote 5 UTF-8 bytes to demo/note.txt", "Edited demo/note.txt", "gamma", "demo/note.txt"];

/** Everything the demo prints on stderr without colour, from the workspace line to the temp-folder line. */
function plainStderr(workspace: string): string {
  return [
    `演示工作区: ${workspace}`,
    CALLS[0],
    `  ✓ ok  ${PREVIEWS[0]}`,
    CALLS[1],
    `  ✓ ok  ${PREVIEWS[1]}`,
    CALLS[2],
    `  ✓ ok  ${PREVIEWS[2]}`,
    CALLS[3],
    `  ✓ ok  ${PREVIEWS[3]}`,
    SAY_OUTSIDE,
    CALLS[4],
    "  ✗ path_escape",
    rootLine(dirname(workspace)),
    "",
  ].join("\n");
}

/**
 * `npm run chNN -- --demo` through `runCli` in this process (the argv that chapter's entry passes it), with no
 * key and no terminal: the same code and output as the program, without starting one.
 */
async function demoInProcess(
  chapter: number,
  entryName: string,
  args: readonly string[],
): Promise<{ status: number; stdout: string; stderr: string }> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));
  const cwd = mkdtempSync(join(tmpdir(), "ch02-demo-"));
  demoRoots.push(cwd);
  const argv = ["run", "--chapter", String(chapter), "--demo", ...args];
  const { code, stdout, stderr } = await runCliWithoutTerminal(argv, env, cwd, entryName);
  return { status: code, stdout, stderr };
}

describe("the chapter 2 demo without a terminal", () => {
  it("needs no key, walks the book's write → edit → read → glob, narrates and refuses ../secret.txt as path_escape, and names its temp folder last", () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));
    const transcriptFolder = mkdtempSync(join(tmpdir(), "ch02-demo-transcript-"));
    demoRoots.push(transcriptFolder);
    const transcript = join(transcriptFolder, "demo.json");
    const run = spawnSync(process.execPath, ["--import", tsx, entry, "--demo", "--transcript", transcript], {
      env,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 60_000,
    });
    const workspace = /演示工作区: (\S+)/.exec(run.stderr)?.[1] ?? "";
    // Only a folder the demo named is removed: never "." when the line is missing.
    if (workspace !== "") demoRoots.push(dirname(workspace));
    expect(workspace).toMatch(/agent-tutorial-demo-[^/]+\/workspace$/);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe(plainStderr(workspace));
    // Not a terminal: not one escape sequence, so a pipe or a file gets plain text.
    expect(run.stderr).not.toContain("\u001b");
    expect(finalText.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${finalText}\n`);
    // What the model was told, call by call: the book's four results, then the refusal.
    const recorded = JSON.parse(readFileSync(transcript, "utf8")) as {
      messages: { role: string; tool_call_id?: string; content: string | null }[];
    };
    expect(recorded.messages.filter((message) => message.role === "tool")).toEqual([
      { role: "tool", tool_call_id: "call_demo_1", content: "Wrote 5 UTF-8 bytes to demo/note.txt" },
      { role: "tool", tool_call_id: "call_demo_2", content: "Edited demo/note.txt" },
      { role: "tool", tool_call_id: "call_demo_3", content: "gamma" },
      { role: "tool", tool_call_id: "call_demo_4", content: "demo/note.txt" },
      {
        role: "tool",
        tool_call_id: "call_demo_5",
        content: "Error [path_escape]: Path escapes workspace: ../secret.txt",
      },
    ]);
    // The file is on disk, exactly; nothing was written next to the workspace.
    expect(readdirSync(workspace).sort()).toEqual(["README.md", "demo"]);
    expect(readdirSync(join(workspace, "demo"))).toEqual(["note.txt"]);
    expect(readFileSync(join(workspace, "demo", "note.txt"), "utf8")).toBe("gamma");
    expect(readdirSync(dirname(workspace))).toEqual(["workspace"]);
  });
});

describe("the chapter 2 demo's narration", () => {
  it("with --quiet says no narration and no progress, but still names its temp folder last", async () => {
    const run = await demoInProcess(2, "ch02", ["--quiet"]);
    const workspace = /演示工作区: (\S+)/.exec(run.stderr)?.[1] ?? "";
    if (workspace !== "") demoRoots.push(dirname(workspace));
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(run.stderr).toBe([`演示工作区: ${workspace}`, rootLine(dirname(workspace)), ""].join("\n"));
  });

  it("on a terminal is dimmed (ANSI 2), and the answer on stdout is unchanged", async () => {
    const run = await demoOnTerminal({});
    const { workspace } = run;
    const ok = "  \u001b[32m✓ ok\u001b[0m";
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`${finalText}\n`);
    expect(run.stderr).toBe(
      [
        `演示工作区: ${workspace}`,
        CALLS[0],
        `${ok}  ${PREVIEWS[0]}`,
        CALLS[1],
        `${ok}  ${PREVIEWS[1]}`,
        CALLS[2],
        `${ok}  ${PREVIEWS[2]}`,
        CALLS[3],
        `${ok}  ${PREVIEWS[3]}`,
        `\u001b[2m${SAY_OUTSIDE}\u001b[0m`,
        CALLS[4],
        "  \u001b[31m✗ path_escape\u001b[0m",
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
  it.each<[number, string]>([
    [1, "ch01.json"],
    [2, "ch02.json"],
  ])("prepareDemo(%i) replays its own demo/%s in a fresh workspace holding only README.md", async (chapter, name) => {
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
    expect(readdirSync(setup.workspace)).toEqual(["README.md"]);
    expect(setup.root).toBe(dirname(setup.workspace));
    expect(readdirSync(setup.root)).toEqual(["workspace"]);
  });
});

describe("the chapter 1 demo on this snapshot", () => {
  it("replays chapter 1's own walkthrough, narrated: two shell calls, each refused without a TTY, no file tool and no unknown_tool", async () => {
    const run = await demoInProcess(1, "ch01", []);
    const workspace = /演示工作区: (\S+)/.exec(run.stderr)?.[1] ?? "";
    // Only a folder the demo named is removed: never "." when the line is missing.
    if (workspace !== "") demoRoots.push(dirname(workspace));
    expect(workspace).toMatch(/agent-tutorial-demo-[^/]+\/workspace$/);
    expect(run.status).toBe(0);
    expect(run.stderr).toBe(
      [
        `演示工作区: ${workspace}`,
        "我先用 PowerShell 列出工作区里的文件。",
        '→ shell {"command":"Get-ChildItem -Force"}',
        "无交互输入，默认拒绝。",
        "  ✗ denied",
        "再读 README.md 的内容。",
        '→ shell {"command":"Get-Content README.md"}',
        "无交互输入，默认拒绝。",
        "  ✗ denied",
        rootLine(dirname(workspace)),
        "",
      ].join("\n"),
    );
    const chapterOneFinal = chapterOneWalkthrough.messages.at(-1)?.content ?? "";
    expect(chapterOneFinal.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${chapterOneFinal}\n`);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
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
        env: Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_"))),
        cwd: ownTmp,
        stdin,
        stdinIsTTY: false,
        stdout: new Sink(),
        stderr,
        stderrIsTTY: false,
      };
      await runCli(["run", "--chapter", "2", "--demo"], io, "ch02");
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
