import { spawn } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { helpText } from "../src/cli/args.js";
import { Terminal } from "../src/cli/terminal.js";
import { isYes, TerminalApprovalProvider } from "../src/cli/terminal-approval.js";
import { runCli, type CliEntry, type CliIO } from "../src/cli.js";
import { validateToolPairing, type ChatMessage } from "../src/core/messages.js";
import { P01 } from "../src/core/profiles.js";
import { apiError, completion, startLoopbackOpenAI, type LoopbackOpenAI } from "./support/loopback-openai.js";
import { Sink } from "./support/sink.js";

const ENTRY: CliEntry = { name: "ch01", title: "第 1 章 (测试)", profile: P01 };
/** The tools this chapter offers the model, in order. */
const TOOL_NAMES = ["shell"];
const LIST = { id: "call_1", name: "shell", arguments: '{"command":"Get-ChildItem"}' };
const DENIED = "Error [permission_denied]: The user did not approve this tool call";
const FINAL = "I could not list the files: the call was not approved.";
const ASK_LINES = [
  "工具调用需要批准: shell",
  "原因: Shell execution requires approval",
  '参数: {"command":"Get-ChildItem"}',
  "允许本次调用? [y/N] ",
].join("\n");

/** A writable that keeps everything written to it as text, synchronously. */
const lines = (text: string): string[] => text.split("\n").filter((line) => line !== "");

const folders: string[] = [];
const servers: LoopbackOpenAI[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

async function tempFolder(): Promise<string> {
  const folder = realpathSync(await mkdtemp(join(tmpdir(), `${ENTRY.name}-cli-`)));
  folders.push(folder);
  return folder;
}

/** A loopback model that asks for `Get-ChildItem` once, then answers `FINAL`. */
async function listThenAnswer(): Promise<LoopbackOpenAI> {
  const server = await startLoopbackOpenAI((_body, index) =>
    index === 0 ? { json: completion({ toolCalls: [LIST] }) } : { json: completion({ content: FINAL }) },
  );
  servers.push(server);
  return server;
}

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

async function cli(
  argv: readonly string[],
  options: { env?: CliIO["env"]; cwd?: string; stdin?: string; stdinIsTTY?: boolean } = {},
): Promise<Run> {
  const stdin = new PassThrough();
  if (options.stdin !== undefined) stdin.end(options.stdin);
  const stdout = new Sink();
  const stderr = new Sink();
  const code = await runCli(
    argv,
    {
      env: options.env ?? {},
      cwd: options.cwd ?? (await tempFolder()),
      stdin,
      stdinIsTTY: options.stdinIsTTY ?? false,
      stdout,
      stderr,
      stderrIsTTY: false,
    },
    ENTRY,
  );
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** The environment of a correctly configured run against `server`. */
const envFor = (server: LoopbackOpenAI): CliIO["env"] => ({
  OPENAI_API_KEY: "test-key",
  OPENAI_BASE_URL: server.baseURL,
  OPENAI_MODEL: "loopback-model",
});

describe("runCli configuration errors", () => {
  it("--help prints the usage on stdout and exits 0 without contacting the model", async () => {
    const server = await listThenAnswer();
    const run = await cli(["--help"], { env: envFor(server) });
    expect(run).toEqual({ code: 0, stdout: helpText(ENTRY.name, ENTRY.title), stderr: "" });
    expect(run.stdout).toContain(`用法: npm run ${ENTRY.name} -- [选项]`);
    expect(server.requests).toHaveLength(0);
  });

  it("an unknown flag exits 2 with one line starting 配置错误: and never contacts the model", async () => {
    const server = await listThenAnswer();
    const run = await cli(["--prompt", "hi", "--bogus"], { env: envFor(server) });
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(lines(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^配置错误: Unknown option '--bogus'.*; see --help\n$/);
    expect(server.requests).toHaveLength(0);
  });

  it.each(["abc", "0", "-1", "1.5", "1001", ""])("--max-turns %j exits 2 with one line", async (value) => {
    const server = await listThenAnswer();
    const run = await cli(["--prompt", "hi", `--max-turns=${value}`], { env: envFor(server) });
    expect(run).toEqual({
      code: 2,
      stdout: "",
      stderr: `配置错误: --max-turns must be a whole number from 1 to 1000, not "${value}"\n`,
    });
    expect(server.requests).toHaveLength(0);
  });

  it.each([undefined, "", "   "])("OPENAI_API_KEY %j exits 2 with one line naming it, and no request", async (key) => {
    const server = await listThenAnswer();
    const env = { ...envFor(server), OPENAI_API_KEY: key };
    const run = await cli(["--prompt", "hi"], { env });
    expect(run).toEqual({
      code: 2,
      stdout: "",
      stderr:
        "配置错误: OPENAI_API_KEY is not set: put it in .env or the environment (see README, Providers), or try --demo without a key\n",
    });
    expect(server.requests).toHaveLength(0);
  });

  it("a missing --prompt exits 2 with one line", async () => {
    const server = await listThenAnswer();
    const run = await cli([], { env: envFor(server) });
    expect(run).toEqual({
      code: 2,
      stdout: "",
      stderr: "配置错误: --prompt is required (or use --demo); see --help\n",
    });
    expect(server.requests).toHaveLength(0);
  });

  it("an OPENAI_BASE_URL that is not a URL exits 2 with one line", async () => {
    const run = await cli(["--prompt", "hi"], { env: { OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: "not a url" } });
    expect(run).toEqual({ code: 2, stdout: "", stderr: '配置错误: OPENAI_BASE_URL is not a URL: "not a url"\n' });
  });

  it("a --workspace that does not exist exits 2 with one line and no request", async () => {
    const server = await listThenAnswer();
    const cwd = await tempFolder();
    const run = await cli(["--prompt", "hi", "--workspace", "missing"], { env: envFor(server), cwd });
    expect(run).toEqual({
      code: 2,
      stdout: "",
      stderr: `配置错误: workspace ${join(cwd, "missing")} is not an existing folder; pass --workspace <dir>\n`,
    });
    expect(server.requests).toHaveLength(0);
  });

  it("a --workspace that is a file exits 2", async () => {
    const server = await listThenAnswer();
    const cwd = await tempFolder();
    await writeFile(join(cwd, "file.txt"), "x");
    const run = await cli(["--prompt", "hi", "--workspace", "file.txt"], { env: envFor(server), cwd });
    expect(run.code).toBe(2);
    expect(lines(run.stderr)).toEqual([
      `配置错误: workspace ${join(cwd, "file.txt")} is not an existing folder; pass --workspace <dir>`,
    ]);
    expect(server.requests).toHaveLength(0);
  });

  it("a configuration error writes no transcript", async () => {
    const cwd = await tempFolder();
    const run = await cli(["--prompt", "hi", "--transcript", "run.json"], { cwd });
    expect(run.code).toBe(2);
    expect(existsSync(join(cwd, "run.json"))).toBe(false);
  });
});

describe("runCli against a loopback model", () => {
  it("on a terminal, asks with the exact approval lines and sends a refusal back as permission_denied", async () => {
    const server = await listThenAnswer();
    const workspace = await tempFolder();
    const run = await cli(["--prompt", "List the files", "--workspace", workspace], {
      env: envFor(server),
      stdin: "n\n",
      stdinIsTTY: true,
    });
    expect(run).toEqual({
      code: 0,
      stdout: `${FINAL}\n`,
      stderr: `→ shell {"command":"Get-ChildItem"}\n${ASK_LINES}  ✗ denied\n`,
    });
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1]).toMatchObject({
      model: "loopback-model",
      messages: [{ role: "system" }, { role: "user", content: "List the files" }, { role: "assistant" }, toolMessage()],
    });
  });

  it("writes --transcript relative to the folder npm was run from, with paired messages", async () => {
    const server = await listThenAnswer();
    const cwd = await tempFolder();
    const initCwd = await tempFolder();
    const run = await cli(["--prompt", "List the files", "--workspace", cwd, "--transcript", "run.json"], {
      env: { ...envFor(server), INIT_CWD: initCwd },
      cwd,
    });
    expect(run.code).toBe(0);
    expect(existsSync(join(cwd, "run.json"))).toBe(false);
    const transcript = await readTranscriptFile(join(initCwd, "run.json"));
    expect(transcript.chapter).toBe(ENTRY.profile.chapter);
    expect(() => validateToolPairing(transcript.messages)).not.toThrow();
    expect(transcript.messages.slice(1)).toEqual([
      { role: "user", content: "List the files" },
      { role: "assistant", content: null, tool_calls: [toolCall()] },
      toolMessage(),
      { role: "assistant", content: FINAL },
    ]);
  });

  it("a transcript that cannot be written is one clear line and exit 1, after the answer", async () => {
    const server = await listThenAnswer();
    const cwd = await tempFolder();
    const path = join(cwd, "no-such-folder", "run.json");
    const run = await cli(["--prompt", "List the files", "--workspace", cwd, "--transcript", path], {
      env: envFor(server),
      cwd,
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe(`${FINAL}\n`);
    expect(lines(run.stderr).at(-1)).toMatch(
      new RegExp(`^运行失败: cannot write the transcript to ${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: ENOENT`),
    );
  });

  it("a run that fails still writes its transcript, paired up to the failure, and exits 1", async () => {
    const server = await startLoopbackOpenAI((_body, index) =>
      index === 0 ? { json: completion({ toolCalls: [LIST] }) } : { json: apiError("bad request"), status: 400 },
    );
    servers.push(server);
    const cwd = await tempFolder();
    const run = await cli(["--prompt", "List the files", "--transcript", "run.json"], { env: envFor(server), cwd });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(lines(run.stderr).at(-1)).toBe("运行失败: The model provider answered HTTP 400: 400 bad request");
    const transcript = await readTranscriptFile(join(cwd, "run.json"));
    expect(() => validateToolPairing(transcript.messages)).not.toThrow();
    expect(transcript.messages.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool"]);
  });

  it("--replay with fewer assistant turns than the run needs exits 1 and needs no API key", async () => {
    const cwd = await tempFolder();
    const replay = join(cwd, "replay.json");
    await writeFile(replay, JSON.stringify({ chapter: 1, messages: recordedRun() }));
    const run = await cli(["--prompt", "List the files", "--replay", replay], { env: {}, cwd });
    expect(run).toEqual({
      code: 1,
      stdout: "",
      stderr: [
        '→ shell {"command":"Get-ChildItem"}',
        "(没有交互式终端, 无法询问, 已拒绝: shell)",
        "  ✗ denied",
        "运行失败: The replay has no assistant turn 2; it recorded 1",
        "",
      ].join("\n"),
    });
  });

  // `npm run` changes the folder to the repository root: a file recorded with --transcript from a
  // subfolder must be found again by --replay under the same relative name.
  it("--replay resolves a relative path against the same folder as --transcript", async () => {
    const cwd = await tempFolder();
    await writeFile(join(cwd, "replay.json"), JSON.stringify({ chapter: 1, messages: recordedRun() }));
    const run = await cli(["--prompt", "List the files", "--replay", "replay.json"], { env: {}, cwd });
    expect(lines(run.stderr).at(-1)).toBe("运行失败: The replay has no assistant turn 2; it recorded 1");
    expect(run.code).toBe(1);
  });
});

describe("TerminalApprovalProvider", () => {
  const request = {
    toolName: "shell",
    reason: "Shell execution requires approval",
    arguments: { command: "Get-ChildItem" },
  };

  function provider(isTTY: boolean): { input: PassThrough; output: Sink; approval: TerminalApprovalProvider } {
    const input = new PassThrough();
    const output = new Sink();
    const approval = new TerminalApprovalProvider(
      input,
      new Terminal(output, { interactive: false, color: false }),
      isTTY,
    );
    return { input, output, approval };
  }

  it("without a TTY on stdin refuses without asking and never reads stdin", async () => {
    const { input, output, approval } = provider(false);
    input.write("y\n");
    expect(await approval.approve(request)).toBe(false);
    approval.close();
    expect(output.text).toBe("(没有交互式终端, 无法询问, 已拒绝: shell)\n");
    expect(output.text).not.toContain("允许本次调用?");
    expect(input.readableFlowing).toBeNull();
  });

  it("on a TTY prints the tool, the reason, the arguments as JSON, then the question", async () => {
    const { input, output, approval } = provider(true);
    const answer = approval.approve(request);
    input.write("y\n");
    expect(await answer).toBe(true);
    approval.close();
    expect(output.text).toBe(ASK_LINES);
  });

  it.each(["y\n", "Y\n", "yes\n", "YES \n", " yes\n", "y\r\n"])(
    "on a TTY, answer %j allows the call",
    async (typed) => {
      const { input, approval } = provider(true);
      input.end(typed);
      expect(await approval.approve(request)).toBe(true);
      approval.close();
    },
  );

  it.each(["n\n", "\n", "yeah\n", "no\n", "y es\n", "", "ye"])(
    "on a TTY, answer %j refuses the call",
    async (typed) => {
      const { input, approval } = provider(true);
      input.end(typed);
      expect(await approval.approve(request)).toBe(false);
      approval.close();
    },
  );

  it("answers typed ahead in one chunk go to the questions in order", async () => {
    const { input, output, approval } = provider(true);
    input.write("y\nn\n");
    expect(await approval.approve(request)).toBe(true);
    expect(await approval.approve(request)).toBe(false);
    approval.close();
    expect(output.text).toBe(ASK_LINES + ASK_LINES);
  });

  it("after the end of input every further question is refused", async () => {
    const { input, approval } = provider(true);
    input.end("y\n");
    expect(await approval.approve(request)).toBe(true);
    expect(await approval.approve(request)).toBe(false);
    expect(await approval.approve(request)).toBe(false);
    approval.close();
  });
});

describe("isYes", () => {
  it.each(["y", "Y", "yes", "Yes", "YES", "  yes  ", "\ty\t"])("accepts %j", (answer) => {
    expect(isYes(answer)).toBe(true);
  });
  it.each(["", " ", "n", "no", "yeah", "yes!", "y y", "1", "true", "是"])("refuses %j", (answer) => {
    expect(isYes(answer)).toBe(false);
  });
});

describe(`the ${ENTRY.name} entry as a program`, () => {
  const entryFile = fileURLToPath(new URL(`../src/chapters/${ENTRY.name}.ts`, import.meta.url));
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

  function runEntry(args: readonly string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Run> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ["--import", tsx, entryFile, ...args], {
        cwd,
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
      const timer = setTimeout(() => child.kill(), 25_000);
      child.on("error", reject);
      child.on("close", (code) => {
        clearTimeout(timer);
        resolve({ code: code ?? -1, stdout, stderr });
      });
    });
  }

  it("without a terminal denies the shell call, tells the model, and prints only the answer on stdout", async () => {
    const server = await listThenAnswer();
    const cwd = await tempFolder();
    const workspace = await tempFolder();
    const env: NodeJS.ProcessEnv = Object.fromEntries(
      Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_") && key !== "INIT_CWD"),
    );
    const run = await runEntry(
      ["--prompt", "List the files", "--workspace", workspace],
      { ...env, ...envFor(server) },
      cwd,
    );

    expect(run).toEqual({
      code: 0,
      stdout: `${FINAL}\n`,
      stderr: [
        '→ shell {"command":"Get-ChildItem"}',
        "(没有交互式终端, 无法询问, 已拒绝: shell)",
        "  ✗ denied",
        "",
      ].join("\n"),
    });
    expect(server.requests).toHaveLength(2);
    expect(server.headers[0]?.authorization).toBe("Bearer test-key");
    expect(server.requests[1]).toEqual({
      model: "loopback-model",
      messages: [
        { role: "system", content: expect.stringContaining(workspace) as unknown },
        { role: "user", content: "List the files" },
        { role: "assistant", content: null, tool_calls: [toolCall()] },
        toolMessage(),
      ],
      tools: expect.any(Array) as unknown,
    });
    const offered = (server.requests[1] as { tools: { function: { name: string } }[] }).tools;
    expect(offered.map((tool) => tool.function.name)).toEqual(TOOL_NAMES);
  });
});

function toolCall(): unknown {
  return { id: LIST.id, type: "function", function: { name: LIST.name, arguments: LIST.arguments } };
}

function toolMessage(): ChatMessage {
  return { role: "tool", tool_call_id: LIST.id, content: DENIED };
}

/** A recorded run with one assistant turn: a shell call, and its answer. */
function recordedRun(): unknown[] {
  return [
    { role: "user", content: "List the files" },
    { role: "assistant", content: null, tool_calls: [toolCall()] },
    { role: "tool", tool_call_id: LIST.id, content: "README.md" },
  ];
}

async function readTranscriptFile(path: string): Promise<{ chapter: unknown; messages: ChatMessage[] }> {
  return JSON.parse(await readFile(path, "utf8")) as { chapter: unknown; messages: ChatMessage[] };
}
