import { spawn } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { SYSTEM_PROMPT } from "../src/bootstrap.js";
import { UNSHOWABLE_LINE, UNSHOWABLE_REASON } from "../src/cli/approval-question.js";
import { argumentsView, BOUNDS, CONTINUED } from "../src/cli/approval-view.js";
import { helpText, parseCliArgs } from "../src/cli/args.js";
import { PROMPT_FILE_LIMIT, readPromptFile } from "../src/cli/prompt-file.js";
import { Terminal } from "../src/cli/terminal.js";
import { isYes, runCli, TerminalApprovalProvider, TerminalAuditSink, type CliIO } from "../src/cli.js";
import { toolCall } from "../src/core/messages.js";
import { PermissionDecision, PermissionRequest } from "../src/core/permissions.js";
import type { ValidToolCall } from "../src/core/tools.js";
import { createChapterOneTools } from "../src/features/builtin-tools.js";
import { DEFAULT_PROACTIVE_THRESHOLD_BYTES } from "../src/features/compaction.js";
import { DEFAULT_SUBAGENT_MAX_TURNS, MAX_SUBAGENT_RUNS } from "../src/features/subagents.js";
import { apiError, completion, startLoopbackOpenAI, type LoopbackOpenAI } from "./support/loopback-openai.js";
import { FakeCommandRunner } from "./support/fakes.js";
import { powershell } from "./support/powershell.js";
import { FILE_TOOLS } from "./support/file-tools.js";
import { Sink } from "./support/sink.js";
import { SHELL_TOOL } from "./support/shell-tool.js";
import { aMomentLater, asked, PAGE_PROMPT_END, typeAnswers } from "./support/typist.js";
import { afterSettingsLine, runCliWithoutTerminal } from "./support/cli-run.js";

/** What `src/chapters/ch03.ts` puts in front of the reader's arguments. */
const RUN = ["run", "--chapter", "3"];
const LIST = { id: "call_1", name: "shell", arguments: '{"command":"Get-ChildItem"}' };
const DENIED = "Error [permission_denied]: No interactive approval input was available";
const DENIED_BY_USER = "Error [permission_denied]: User denied this tool call";
const FINAL = "I could not list the files: the call was not approved.";
const NO_TTY = "无交互输入，默认拒绝。";
/** Chapter 3 prints every final decision: a shell call refused for want of a TTY is the notice, then its audit line. */
const NO_TTY_DENIAL = `${NO_TTY}\n[Permission] shell: deny (terminal-approval) - No interactive approval input was available`;
const REASON = "Shell execution requires approval";
const askLines = (command: string): string =>
  [`工具调用需要批准: shell`, `原因: ${REASON}`, `参数: {"command":"${command}"}`, "允许本次调用? [y/N] "].join("\n");
/** The book's 配置错误 line for `names`, then where the run looked: `folder`, which has no `.env`. */
const missing = (names: string, folder: string): string =>
  `配置错误: Missing required settings: ${names}\n` +
  `  looked in the environment; there is no .env in ${folder} (npm reads .env from the folder it is started in: ` +
  "start it from the repository root)\n";
const ALL = "OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL";
/** The line after `Unknown argument: …`: a prompt split into several arguments is the usual cause. */
const STRAY =
  '\n  a prompt of several words or lines needs quotes (--prompt "…"), or put it in a file: --prompt-file <path>';

/** Chapter 2 offers chapter 1's shell, then the four file tools. */
const TOOLS = [SHELL_TOOL, ...FILE_TOOLS];

const lines = (text: string): string[] => text.split("\n").filter((line) => line !== "");

const folders: string[] = [];
const servers: LoopbackOpenAI[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

async function tempFolder(): Promise<string> {
  const folder = realpathSync(await mkdtemp(join(tmpdir(), "ch01-cli-")));
  folders.push(folder);
  return folder;
}

/** A loopback model that, in every run, asks for `call` once and then answers `final`. */
async function callThenAnswer(call = LIST, final = FINAL): Promise<LoopbackOpenAI> {
  const server = await startLoopbackOpenAI((body) =>
    (body as { messages: { role: string }[] }).messages.some((message) => message.role === "tool")
      ? { json: completion({ content: final }) }
      : { json: completion({ toolCalls: [call] }) },
  );
  servers.push(server);
  return server;
}

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

interface CliOptions {
  /** How the reader started us: `ch03` (the default) for the fixed entry, `null` for the unified one. */
  readonly entry?: string | null;
  readonly env?: CliIO["env"];
  readonly cwd?: string;
  /** What the person types once the approval question has appeared; then stdin ends. */
  readonly stdin?: string;
  readonly stdinIsTTY?: boolean;
}

/** `runCli(argv)` in this process, with its own streams, folder and environment (nothing from ours). */
async function runIn(argv: readonly string[], options: CliOptions = {}): Promise<Run> {
  const stdin = new PassThrough();
  const stdout = new Sink();
  const stderr = new Sink();
  if (options.stdin !== undefined) typeAnswers(stdin, stderr, [options.stdin]);
  const io: CliIO = {
    env: options.env ?? {},
    cwd: options.cwd ?? (await tempFolder()),
    stdin,
    stdinIsTTY: options.stdinIsTTY ?? false,
    stdout,
    stderr,
    stderrIsTTY: false,
  };
  const code = await runCli(argv, io, options.entry === null ? undefined : (options.entry ?? "ch03"));
  return { code, stdout: stdout.text, stderr: afterSettingsLine(stderr.text, argv, io.env) };
}

/** The chapter 3 entry with the reader's `args`, as `npm run ch03 -- …` runs it. */
const cli = (args: readonly string[], options: CliOptions = {}): Promise<Run> => runIn([...RUN, ...args], options);

/** The environment of a correctly configured run against `server`. */
const envFor = (server: LoopbackOpenAI): CliIO["env"] => ({
  OPENAI_API_KEY: "test-key",
  OPENAI_BASE_URL: server.baseURL,
  OPENAI_MODEL: "loopback-model",
});

const wireCall = { id: LIST.id, type: "function", function: { name: LIST.name, arguments: LIST.arguments } };

/** The second request of a `LIST` run whose call was refused, as the provider receives it. */
function deniedSecondRequest(model: string, prompt: string, refusal = DENIED): unknown {
  return {
    model,
    messages: [
      { role: "system", content: SYSTEM_PROMPT },
      { role: "user", content: prompt },
      { role: "assistant", content: null, tool_calls: [wireCall] },
      { role: "tool", tool_call_id: LIST.id, content: refusal },
    ],
    tools: TOOLS,
  };
}

describe("runCli arguments", () => {
  it("--help prints the entry's usage on stdout and exits 0 without contacting the model", async () => {
    const server = await callThenAnswer();
    const run = await cli(["--help"], { env: envFor(server) });
    expect(run).toStrictEqual({ code: 0, stdout: helpText("ch03"), stderr: "" });
    expect(run.stdout.split("\n")[0]).toBe("用法: npm run ch03 -- --prompt <text> [选项]");
    expect(server.requests).toHaveLength(0);
  });

  it("--help of the unified entry shows run --chapter", async () => {
    const run = await runIn(["--help"], { entry: null });
    expect(run.code).toBe(0);
    expect(run.stdout.split("\n")[0]).toBe(
      "用法: npm run agent-tutorial -- run --chapter <1|2|3|4|5|6|7|8|9> --prompt <text> [选项]",
    );
  });

  it("--help says --max-turns bounds the parent's model calls, and what else calls the model: each task child and each summary", () => {
    const help = helpText("ch03").split("\n");
    const at = help.findIndex((line) => line.startsWith("      --max-turns <n>"));
    expect(help.slice(at, at + 3)).toEqual([
      "      --max-turns <n>      主 Agent 最多调用模型几次 (默认: 20); 另外每个 task 子 Agent",
      `                           各自最多调用 ${DEFAULT_SUBAGENT_MAX_TURNS} 次, 每次运行最多 ${MAX_SUBAGENT_RUNS} 个子 Agent; 主 Agent 的历史`,
      `                           超过 ${DEFAULT_PROACTIVE_THRESHOLD_BYTES} 字节时, 每轮之前还多调用一次来生成摘要`,
    ]);
  });

  it("a fixed entry's --help offers no --chapter and names its demo script", () => {
    const help = helpText("ch03");
    expect(help).not.toContain("--chapter");
    expect(help.split("\n").filter((line) => line.startsWith("      --demo"))).toEqual([
      "      --demo               不需要密钥: 在临时工作区里回放本章的演示 (或 npm run demo:ch03)",
    ]);
  });

  it("--chapter takes the chapter's script name too: ch08, CH08 and 08 are chapter 8", () => {
    for (const spelling of ["ch08", "CH08", "08", "8"]) {
      expect(parseCliArgs(["run", "--chapter", spelling, "--demo"]).chapter).toBe(8);
    }
  });

  it.each<[string, string[], string]>([
    ["an unknown flag", [...RUN, "--prompt", "hi", "--bogus"], `运行失败: Unknown argument: --bogus${STRAY}`],
    ["a stray word", [...RUN, "--prompt", "hi", "stray"], `运行失败: Unknown argument: stray${STRAY}`],
    [
      "a word that names a property of every object",
      [...RUN, "--prompt", "hi", "constructor"],
      `运行失败: Unknown argument: constructor${STRAY}`,
    ],
    ["__proto__", [...RUN, "--prompt", "hi", "__proto__"], `运行失败: Unknown argument: __proto__${STRAY}`],
    ["no --chapter", ["run", "--prompt", "hi"], "运行失败: Both --chapter and --prompt are required"],
    [
      "no --prompt",
      [...RUN],
      '运行失败: --prompt is required\n  npm run ch03 -- --prompt "<task>" (or --prompt-file <path>); npm run demo:ch03 needs neither',
    ],
    [
      "--chapter typed to the fixed entry",
      [...RUN, "--chapter", "9", "--prompt", "hi"],
      "运行失败: npm run ch03 always runs its own chapter; --chapter is for the unified entry\n" +
        '  to choose the chapter, use npm run agent-tutorial -- run --chapter N --prompt "<task>"',
    ],
    [
      "--prompt and --prompt-file together",
      [...RUN, "--prompt", "hi", "--prompt-file", "task.txt"],
      "运行失败: --prompt and --prompt-file cannot be used together",
    ],
    [
      "--demo with a workspace and a task of the reader's",
      [...RUN, "--demo", "--workspace", "w", "--prompt", "hi"],
      "运行失败: --demo brings its own task and temporary workspace: leave out --workspace and --prompt\n" +
        "  the demo alone: npm run demo:ch03",
    ],
    [
      "--demo without --chapter",
      ["run", "--demo"],
      "运行失败: --chapter is required\n  --demo needs no --prompt, but the chapter to run: --chapter N (1 to 9)",
    ],
    ["no command at all", [], "运行失败: Expected command: run"],
    ["options without run", ["--chapter", "1", "--prompt", "hi"], "运行失败: Expected command: run"],
    ["another command", ["start", "--chapter", "1", "--prompt", "hi"], "运行失败: Expected command: run"],
    ["an option without its value", [...RUN, "--prompt"], "运行失败: Missing value for --prompt"],
    ["an option given twice", [...RUN, "-p", "a", "--prompt", "b"], "运行失败: Argument given twice: --prompt"],
    [
      "a chapter this snapshot does not have",
      ["run", "--chapter", "10", "--prompt", "hi"],
      "运行失败: Chapter 10 has not been migrated to this snapshot; it knows chapters 1, 2, 3, 4, 5, 6, 7, 8, 9",
    ],
    [
      "a chapter that is not a number",
      ["run", "--chapter", "one", "--prompt", "hi"],
      '运行失败: --chapter must be a chapter number from 1 to 9 (9 or ch09), not "one"',
    ],
  ])("%s is one 运行失败 line (and a hint) and exit 1, and the model is never contacted", async (_name, argv, line) => {
    const server = await callThenAnswer();
    expect(await runIn(argv, { env: envFor(server) })).toStrictEqual({ code: 1, stdout: "", stderr: `${line}\n` });
    expect(server.requests).toHaveLength(0);
  });

  it.each<[string, string[], string]>([
    ["no --prompt", ["run", "--chapter", "1"], "运行失败: Both --chapter and --prompt are required\n"],
    [
      "--chapter given twice",
      ["run", "--chapter", "1", "--chapter=1", "-p", "hi"],
      "运行失败: Argument given twice: --chapter\n",
    ],
  ])("the unified entry keeps the book's line for %s", async (_name, argv, stderr) => {
    expect(await runIn(argv, { entry: null })).toStrictEqual({ code: 1, stdout: "", stderr });
  });

  it.each(["abc", "0", "-1", "1.5", "1001", ""])("--max-turns=%j is one 运行失败 line and exit 1", async (value) => {
    const server = await callThenAnswer();
    const run = await cli(["--prompt", "hi", `--max-turns=${value}`], { env: envFor(server) });
    expect(run).toStrictEqual({
      code: 1,
      stdout: "",
      stderr: `运行失败: --max-turns must be a whole number from 1 to 1000, not "${value}"\n`,
    });
    expect(server.requests).toHaveLength(0);
  });

  it.each<[string, (cwd: string) => Promise<void>, (cwd: string) => string]>([
    [
      "does not exist says how to create it, as the reader typed it,",
      () => Promise.resolve(),
      (cwd) =>
        `运行失败: workspace ${join(cwd, "missing")} does not exist: create it first ` +
        "(New-Item -ItemType Directory 'missing')\n  in bash: mkdir -p 'missing'\n",
    ],
    [
      "is a file says it is not a folder,",
      (cwd) => writeFile(join(cwd, "missing"), "x"),
      (cwd) => `运行失败: workspace ${join(cwd, "missing")} is not a folder: --workspace names the folder to work in\n`,
    ],
  ])("a --workspace that %s never to pass --workspace, and exits 1 with no request", async (_name, prepare, says) => {
    const server = await callThenAnswer();
    const cwd = await tempFolder();
    await prepare(cwd);
    const run = await cli(["--prompt", "hi", "--workspace", "missing"], { env: envFor(server), cwd });
    expect(run).toStrictEqual({ code: 1, stdout: "", stderr: says(cwd) });
    expect(server.requests).toHaveLength(0);
  });
});

describe("runCli settings", () => {
  it("with no settings anywhere, names all three in one 配置错误 line and exits 2", async () => {
    const cwd = await tempFolder();
    expect(await cli(["--prompt", "hi"], { cwd })).toStrictEqual({ code: 2, stdout: "", stderr: missing(ALL, cwd) });
  });

  it.each(["OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"])(
    "a blank %s is named alone, exit 2, and nothing is sent",
    async (name) => {
      const server = await callThenAnswer();
      const cwd = await tempFolder();
      const run = await cli(["--prompt", "hi"], { env: { ...envFor(server), [name]: "  " }, cwd });
      expect(run).toStrictEqual({ code: 2, stdout: "", stderr: missing(name, cwd) });
      expect(server.requests).toHaveLength(0);
    },
  );

  it("a base URL ending in /chat/completions says so first, exit 2, and nothing is sent", async () => {
    const server = await callThenAnswer();
    const url = `${server.baseURL}/chat/completions`;
    const run = await cli(["--prompt", "hi"], { env: { ...envFor(server), OPENAI_BASE_URL: url } });
    expect(run).toStrictEqual({
      code: 2,
      stdout: "",
      stderr: `配置错误: OPENAI_BASE_URL="${url}" must not end in /chat/completions (the SDK adds it), e.g. https://api.openai.com/v1\n`,
    });
    expect(server.requests).toHaveLength(0);
  });

  it("an unusable base URL comes first, and the settings really missing follow on an indented line", async () => {
    const run = await cli(["--prompt", "hi"], { env: { OPENAI_BASE_URL: "ftp://x/v1\nforged", OPENAI_MODEL: "m" } });
    expect(run).toStrictEqual({
      code: 2,
      stdout: "",
      stderr:
        '配置错误: OPENAI_BASE_URL="ftp://x/v1\\nforged" must start with http:// or https://\n' +
        "  Missing required settings: OPENAI_API_KEY\n",
    });
  });

  it("reads .env from the folder npm was run from (INIT_CWD), not the current folder", async () => {
    const server = await callThenAnswer();
    const [initCwd, cwd] = [await tempFolder(), await tempFolder()];
    await writeFile(
      join(initCwd, ".env"),
      `OPENAI_BASE_URL=${server.baseURL}\nOPENAI_API_KEY=key-from-init-cwd\nOPENAI_MODEL=model-from-init-cwd\n`,
    );
    await writeFile(join(cwd, ".env"), "OPENAI_MODEL=model-from-cwd\n");
    const run = await cli(["--prompt", "List the files"], { env: { INIT_CWD: initCwd }, cwd });
    expect(run).toStrictEqual({
      code: 0,
      stdout: `${FINAL}\n`,
      stderr:
        `模型: model-from-init-cwd @ ${new URL(server.baseURL).host} (模型来自 ${join(initCwd, ".env")}, ` +
        `地址来自 ${join(initCwd, ".env")}, 密钥来自 ${join(initCwd, ".env")})\n` +
        `警告: ${join(initCwd, ".env")} 在工作区里, 模型可以用工具读到其中的密钥; 把 .env 放到工作区外, 或用 --workspace 指定别的文件夹。\n→ shell ${LIST.arguments}\n${NO_TTY_DENIAL}\n  ✗ denied\n`,
    });
    expect(server.requests[1]).toStrictEqual(deniedSecondRequest("model-from-init-cwd", "List the files"));
    expect(server.headers[0]?.authorization).toBe("Bearer key-from-init-cwd");
  });

  it("without INIT_CWD reads .env from the current folder", async () => {
    const server = await callThenAnswer();
    const cwd = await tempFolder();
    await writeFile(join(cwd, ".env"), `OPENAI_BASE_URL=${server.baseURL}\nOPENAI_API_KEY=k\nOPENAI_MODEL=from-cwd\n`);
    const run = await cli(["--prompt", "List the files"], { cwd });
    expect(run.code).toBe(0);
    expect(server.requests[1]).toStrictEqual(deniedSecondRequest("from-cwd", "List the files"));
  });

  it("reads a .env that Windows PowerShell 5.1 wrote as UTF-16LE", async () => {
    const server = await callThenAnswer();
    const cwd = await tempFolder();
    const text = `OPENAI_BASE_URL=${server.baseURL}\r\nOPENAI_API_KEY=k\r\nOPENAI_MODEL=模型-utf16\r\n`;
    await writeFile(join(cwd, ".env"), Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, "utf16le")]));
    const run = await cli(["--prompt", "List the files"], { env: { INIT_CWD: cwd } });
    expect(run.code).toBe(0);
    expect(server.requests[1]).toStrictEqual(deniedSecondRequest("模型-utf16", "List the files"));
  });

  it("a .env in neither UTF-8 nor UTF-16 is a 配置错误 with a hint, exit 2", async () => {
    const cwd = await tempFolder();
    await writeFile(join(cwd, ".env"), Buffer.from("OPENAI_MODEL=caf\xe9\n", "latin1"));
    expect(await cli(["--prompt", "hi"], { env: { INIT_CWD: cwd } })).toStrictEqual({
      code: 2,
      stdout: "",
      stderr:
        `配置错误: ${join(cwd, ".env")} is neither UTF-8 nor UTF-16 text\n` +
        "  save it as UTF-8: in PowerShell, Set-Content .env -Encoding utf8 -Value ..., or in Notepad choose UTF-8\n",
    });
  });

  it("a variable in the environment wins over the same one in .env, and --model wins over both", async () => {
    const server = await callThenAnswer();
    const cwd = await tempFolder();
    await writeFile(
      join(cwd, ".env"),
      `OPENAI_BASE_URL=http://127.0.0.1:1/v1\nOPENAI_API_KEY=file-key\nOPENAI_MODEL=file-model\n`,
    );
    const env = { INIT_CWD: cwd, OPENAI_BASE_URL: server.baseURL, OPENAI_MODEL: "env-model" };
    expect((await cli(["--prompt", "a"], { env })).code).toBe(0);
    expect((await cli(["--prompt", "b", "--model", "flag-model"], { env })).code).toBe(0);
    expect(server.requests.map((request) => (request as { model: string }).model)).toEqual([
      "env-model",
      "env-model",
      "flag-model",
      "flag-model",
    ]);
    expect(server.headers[0]?.authorization).toBe("Bearer file-key");
  });

  it("a real run starts with one line naming the model, the host and where each setting came from, never the key", async () => {
    const server = await callThenAnswer();
    const cwd = await tempFolder();
    await writeFile(join(cwd, ".env"), "OPENAI_API_KEY=file-key-secret\nOPENAI_MODEL=file-model\n");
    const env = { INIT_CWD: cwd, OPENAI_BASE_URL: "http://127.0.0.1:1/v1" };
    const workspace = await tempFolder();
    const argv = ["--prompt", "a", "--base-url", server.baseURL, "--workspace", workspace, "--quiet"];
    const run = await cli(argv, { env });
    expect(run.stderr.split("\n")[0]).toBe(
      `模型: file-model @ ${new URL(server.baseURL).host} (模型来自 ${join(cwd, ".env")}, 地址来自 --base-url, ` +
        `密钥来自 ${join(cwd, ".env")})`,
    );
    expect(run.stderr).not.toContain("file-key-secret");
  });

  it("--base-url wins over OPENAI_BASE_URL", async () => {
    const server = await callThenAnswer();
    const env = { ...envFor(server), OPENAI_BASE_URL: "http://127.0.0.1:1/v1" };
    const run = await cli(["--prompt", "List the files", "--base-url", server.baseURL], { env });
    expect(run.code).toBe(0);
    expect(server.requests).toHaveLength(2);
  });

  it("a configuration error writes no transcript", async () => {
    const cwd = await tempFolder();
    const run = await cli(["--prompt", "hi", "--transcript", "run.json"], { cwd });
    expect(run).toStrictEqual({ code: 2, stdout: "", stderr: missing(ALL, cwd) });
    expect(existsSync(join(cwd, "run.json"))).toBe(false);
  });
});

describe("runCli against a loopback model", () => {
  it("without a terminal refuses the call with 无交互输入，默认拒绝。 and tells the model permission_denied", async () => {
    const server = await callThenAnswer();
    const workspace = await tempFolder();
    const run = await cli(["--prompt", "List the files", "--workspace", workspace], { env: envFor(server) });
    expect(run).toStrictEqual({
      code: 0,
      stdout: `${FINAL}\n`,
      stderr: `→ shell {"command":"Get-ChildItem"}\n${NO_TTY_DENIAL}\n  ✗ denied\n`,
    });
    expect(server.requests).toStrictEqual([
      {
        model: "loopback-model",
        messages: [
          { role: "system", content: SYSTEM_PROMPT },
          { role: "user", content: "List the files" },
        ],
        tools: TOOLS,
      },
      deniedSecondRequest("loopback-model", "List the files"),
    ]);
  });

  it("on a terminal asks with the exact approval lines and sends an n back as permission_denied", async () => {
    const server = await callThenAnswer();
    const run = await cli(["--prompt", "List the files"], { env: envFor(server), stdin: "n\n", stdinIsTTY: true });
    expect(run).toStrictEqual({
      code: 0,
      stdout: `${FINAL}\n`,
      stderr: `→ shell {"command":"Get-ChildItem"}\n${askLines("Get-ChildItem")}[Permission] shell: deny (terminal-approval) - User denied this tool call\n  ✗ denied\n`,
    });
    expect(server.requests[1]).toStrictEqual(deniedSecondRequest("loopback-model", "List the files", DENIED_BY_USER));
  });

  it("--quiet prints only the answer and no progress, but keeps the audit, and the refusal still reaches the model", async () => {
    const server = await callThenAnswer();
    const run = await cli(["--prompt", "List the files", "--quiet"], { env: envFor(server) });
    expect(run).toStrictEqual({ code: 0, stdout: `${FINAL}\n`, stderr: `${NO_TTY_DENIAL}\n` });
    expect(server.requests[1]).toStrictEqual(deniedSecondRequest("loopback-model", "List the files"));
  });

  it.skipIf(powershell === undefined)(
    "on a terminal, a y runs the command in real PowerShell and Write-Output 42 reaches the model as 42",
    async () => {
      const call = { id: "call_abc123", name: "shell", arguments: '{"command":"Write-Output 42"}' };
      const server = await callThenAnswer(call, "命令执行成功，输出是 42。");
      const workspace = await tempFolder();
      const run = await cli(["--prompt", "运行 Write-Output 42，并告诉我结果", "--workspace", workspace], {
        env: envFor(server),
        stdin: "y\n",
        stdinIsTTY: true,
      });
      expect(run).toStrictEqual({
        code: 0,
        stdout: "命令执行成功，输出是 42。\n",
        stderr: `→ shell {"command":"Write-Output 42"}\n${askLines("Write-Output 42")}[Permission] shell: allow (terminal-approval) - User approved this tool call\n  ✓ ok  42\n`,
      });
      expect((server.requests[1] as { messages: unknown[] }).messages.at(-1)).toStrictEqual({
        role: "tool",
        tool_call_id: "call_abc123",
        content: "42",
      });
    },
  );

  it("writes --transcript relative to the folder npm was run from, in Chat Completions form", async () => {
    const server = await callThenAnswer();
    const [cwd, initCwd] = [await tempFolder(), await tempFolder()];
    const run = await cli(["--prompt", "List the files", "--workspace", cwd, "--transcript", "run.json"], {
      env: { ...envFor(server), INIT_CWD: initCwd },
      cwd,
    });
    expect(run.code).toBe(0);
    expect(existsSync(join(cwd, "run.json"))).toBe(false);
    const expected = {
      chapter: 3,
      messages: [
        { role: "user", content: "List the files" },
        { role: "assistant", content: null, tool_calls: [wireCall] },
        { role: "tool", tool_call_id: LIST.id, content: DENIED },
        { role: "assistant", content: FINAL },
      ],
    };
    expect(await readFile(join(initCwd, "run.json"), "utf8")).toBe(`${JSON.stringify(expected, null, 2)}\n`);
  });

  it("a transcript that cannot be written is one clear line and exit 1, after the answer", async () => {
    const server = await callThenAnswer();
    const cwd = await tempFolder();
    const path = join(cwd, "no-such-folder", "run.json");
    const run = await cli(["--prompt", "List the files", "--transcript", path], { env: envFor(server), cwd });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe(`${FINAL}\n`);
    expect(lines(run.stderr).at(-1)).toBe(
      `运行失败: cannot write the transcript to ${path}: ENOENT: no such file or directory, open '${path}'`,
    );
  });

  it("a run that fails still writes its transcript, paired up to the failure, and exits 1", async () => {
    const server = await startLoopbackOpenAI((_body, index) =>
      index === 0 ? { json: completion({ toolCalls: [LIST] }) } : { json: apiError("bad request"), status: 400 },
    );
    servers.push(server);
    const cwd = await tempFolder();
    const run = await cli(["--prompt", "List the files", "--transcript", "run.json"], { env: envFor(server), cwd });
    expect(run).toStrictEqual({
      code: 1,
      stdout: "",
      stderr: `→ shell ${LIST.arguments}\n${NO_TTY_DENIAL}\n  ✗ denied\n运行失败: The model provider answered HTTP 400: 400 bad request\n`,
    });
    expect(JSON.parse(await readFile(join(cwd, "run.json"), "utf8"))).toStrictEqual({
      chapter: 3,
      messages: [
        { role: "user", content: "List the files" },
        { role: "assistant", content: null, tool_calls: [wireCall] },
        { role: "tool", tool_call_id: LIST.id, content: DENIED },
      ],
    });
  });

  it("a provider's error text with a line break is still one 运行失败 line, not a forged record after it", async () => {
    const forged = "[Permission] shell: allow (terminal-approval) - User approved this tool call";
    const server = await startLoopbackOpenAI(() => ({ json: apiError(`down\n${forged}\r\n`), status: 400 }));
    servers.push(server);
    const run = await cli(["--prompt", "hi"], { env: envFor(server) });
    expect(run.code).toBe(1);
    // One line of ours: wide and holding what reads like a record, so cut into rows of our own.
    const rows = lines(run.stderr);
    for (const row of rows.slice(1)) expect(row.startsWith(CONTINUED)).toBe(true);
    expect(rows.map((row, index) => (index === 0 ? row : row.slice(CONTINUED.length))).join("")).toBe(
      `运行失败: The model provider answered HTTP 400: 400 down\\n${forged}\\u000d\\n`,
    );
  });

  it("a run that fails before any reply writes only the prompt", async () => {
    const server = await startLoopbackOpenAI(() => ({ json: apiError("down"), status: 503 }));
    servers.push(server);
    const cwd = await tempFolder();
    const run = await cli(["--prompt", "hi", "--transcript", "run.json"], { env: envFor(server), cwd });
    expect(run.code).toBe(1);
    expect(JSON.parse(await readFile(join(cwd, "run.json"), "utf8"))).toStrictEqual({
      chapter: 3,
      messages: [{ role: "user", content: "hi" }],
    });
  });
});

describe("runCli with chapter 3's policy over the file tools", () => {
  const WRITE = { id: "call_w", name: "write_file", arguments: '{"path":"notes/a.txt","content":"hi\\n"}' };
  /** What the write answers, as its `✓ ok` row shows it. */
  const WROTE = "Wrote 3 UTF-8 bytes to notes/a.txt";
  const ESCAPE = { id: "call_x", name: "write_file", arguments: '{"path":"../outside.txt","content":"leak"}' };
  const askWrite = [
    "工具调用需要批准: write_file",
    "原因: File writes require explicit approval from chapter 3 onward",
    `参数: ${WRITE.arguments}`,
    "允许本次调用? [y/N] ",
  ].join("\n");

  it("on a terminal, a write inside the workspace is asked with the file-write rule's reason, and a y writes it", async () => {
    const server = await callThenAnswer(WRITE, "Wrote it.");
    const workspace = await tempFolder();
    const run = await cli(["--prompt", "Write a note", "--workspace", workspace], {
      env: envFor(server),
      stdin: "y\n",
      stdinIsTTY: true,
    });
    expect(run).toStrictEqual({
      code: 0,
      stdout: "Wrote it.\n",
      stderr: `→ write_file ${WRITE.arguments}\n${askWrite}[Permission] write_file: allow (terminal-approval) - User approved this tool call\n  ✓ ok  ${WROTE}\n`,
    });
    expect(await readFile(join(workspace, "notes", "a.txt"), "utf8")).toBe("hi\n");
    expect((server.requests[1] as { messages: unknown[] }).messages.at(-1)).toStrictEqual({
      role: "tool",
      tool_call_id: "call_w",
      content: "Wrote 3 UTF-8 bytes to notes/a.txt",
    });
  });

  it("on a terminal, an n refuses the write: nothing is written and the model is told", async () => {
    const server = await callThenAnswer(WRITE, "Not written.");
    const workspace = await tempFolder();
    const run = await cli(["--prompt", "Write a note", "--workspace", workspace], {
      env: envFor(server),
      stdin: "n\n",
      stdinIsTTY: true,
    });
    expect(run).toStrictEqual({
      code: 0,
      stdout: "Not written.\n",
      stderr: `→ write_file ${WRITE.arguments}\n${askWrite}[Permission] write_file: deny (terminal-approval) - User denied this tool call\n  ✗ denied\n`,
    });
    expect(await readdir(workspace)).toEqual([]);
    expect((server.requests[1] as { messages: unknown[] }).messages.at(-1)).toStrictEqual({
      role: "tool",
      tool_call_id: "call_w",
      content: DENIED_BY_USER,
    });
  });

  it("a write outside the workspace is a hard deny even on a terminal: no question, the model is told, nothing written", async () => {
    const server = await callThenAnswer(ESCAPE, "I may not write there.");
    const root = await tempFolder();
    const workspace = join(root, "ws");
    await mkdir(workspace);
    const run = await cli(["--prompt", "Write outside", "--workspace", workspace], {
      env: envFor(server),
      stdin: "y\n",
      stdinIsTTY: true,
    });
    expect(run).toStrictEqual({
      code: 0,
      stdout: "I may not write there.\n",
      stderr: `→ write_file ${ESCAPE.arguments}\n[Permission] write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden\n  ✗ denied\n`,
    });
    expect((server.requests[1] as { messages: unknown[] }).messages.at(-1)).toStrictEqual({
      role: "tool",
      tool_call_id: "call_x",
      content: "Error [permission_denied]: Writing outside the workspace is forbidden",
    });
    expect(existsSync(join(root, "outside.txt"))).toBe(false);
    expect(await readdir(workspace)).toEqual([]);
  });

  it("run --chapter 1 in this snapshot is still chapter 1: the model is offered only shell, and nothing is audited", async () => {
    const server = await callThenAnswer();
    const run = await runIn(["run", "--chapter", "1", "--prompt", "List the files"], {
      entry: null,
      env: envFor(server),
    });
    expect(run).toStrictEqual({
      code: 0,
      stdout: `${FINAL}\n`,
      stderr: `→ shell ${LIST.arguments}\n${NO_TTY}\n  ✗ denied\n`,
    });
    expect(server.requests.map((request) => (request as { tools: unknown }).tools)).toStrictEqual([
      [SHELL_TOOL],
      [SHELL_TOOL],
    ]);
  });

  it("run --chapter 1 on a terminal asks the shell with Shell execution requires approval and prints no [Permission] line", async () => {
    const server = await callThenAnswer();
    const run = await runIn(["run", "--chapter", "1", "--prompt", "List the files"], {
      entry: null,
      env: envFor(server),
      stdin: "n\n",
      stdinIsTTY: true,
    });
    expect(run).toStrictEqual({
      code: 0,
      stdout: `${FINAL}\n`,
      stderr: `→ shell ${LIST.arguments}\n${askLines("Get-ChildItem")}  ✗ denied\n`,
    });
    expect((server.requests[1] as { messages: unknown[] }).messages.at(-1)).toStrictEqual({
      role: "tool",
      tool_call_id: LIST.id,
      content: DENIED_BY_USER,
    });
  });

  it("run --chapter 2 on a terminal writes without asking, asks only the shell, and prints no [Permission] line", async () => {
    const server = await startLoopbackOpenAI((body) =>
      (body as { messages: { role: string }[] }).messages.some((message) => message.role === "tool")
        ? { json: completion({ content: "Wrote, did not list." }) }
        : { json: completion({ toolCalls: [WRITE, LIST] }) },
    );
    servers.push(server);
    const workspace = await tempFolder();
    const run = await runIn(["run", "--chapter", "2", "--prompt", "Write, then list", "--workspace", workspace], {
      entry: null,
      env: envFor(server),
      stdin: "n\n",
      stdinIsTTY: true,
    });
    expect(run).toStrictEqual({
      code: 0,
      stdout: "Wrote, did not list.\n",
      stderr:
        `→ write_file ${WRITE.arguments}\n  ✓ ok  ${WROTE}\n` +
        `→ shell ${LIST.arguments}\n${askLines("Get-ChildItem")}  ✗ denied\n`,
    });
    expect(await readFile(join(workspace, "notes", "a.txt"), "utf8")).toBe("hi\n");
    expect((server.requests[1] as { messages: unknown[] }).messages.slice(-2)).toStrictEqual([
      { role: "tool", tool_call_id: "call_w", content: "Wrote 3 UTF-8 bytes to notes/a.txt" },
      { role: "tool", tool_call_id: LIST.id, content: DENIED_BY_USER },
    ]);
  });
});

describe("runCli --replay", () => {
  /** A recorded run: one shell call, its result, and the final answer. */
  const recording = (final: boolean): unknown => ({
    chapter: 1,
    messages: [
      { role: "user", content: "List the files" },
      { role: "assistant", content: null, tool_calls: [wireCall] },
      { role: "tool", tool_call_id: LIST.id, content: "README.md" },
      ...(final ? [{ role: "assistant", content: "Replayed answer." }] : []),
    ],
  });

  it("replays a recording without --prompt and without any setting", async () => {
    const cwd = await tempFolder();
    await writeFile(join(cwd, "replay.json"), JSON.stringify(recording(true)));
    expect(await cli(["--replay", "replay.json"], { cwd })).toStrictEqual({
      code: 0,
      stdout: "Replayed answer.\n",
      stderr: `→ shell ${LIST.arguments}\n${NO_TTY_DENIAL}\n  ✗ denied\n`,
    });
  });

  it("replays a transcript that --transcript wrote, and contacts no model", async () => {
    const server = await callThenAnswer();
    const cwd = await tempFolder();
    await cli(["--prompt", "List the files", "--transcript", "run.json"], { env: envFor(server), cwd });
    const replay = await cli(["--replay", "run.json"], { cwd });
    expect(replay).toStrictEqual({
      code: 0,
      stdout: `${FINAL}\n`,
      stderr: `→ shell ${LIST.arguments}\n${NO_TTY_DENIAL}\n  ✗ denied\n`,
    });
    expect(server.requests).toHaveLength(2);
  });

  it("shows what the model said beside its calls before they run, marked where it begins like a CLI line; --quiet does not", async () => {
    const cwd = await tempFolder();
    const said = "先列出文件。\n[Permission] shell: allow (user) - forged";
    const turns = {
      chapter: 1,
      messages: [
        { role: "user", content: "List the files" },
        { role: "assistant", content: said, tool_calls: [wireCall] },
        { role: "assistant", content: "Replayed answer." },
      ],
    };
    await writeFile(join(cwd, "replay.json"), JSON.stringify(turns));
    expect(await cli(["--replay", "replay.json"], { cwd })).toStrictEqual({
      code: 0,
      stdout: "Replayed answer.\n",
      stderr: `先列出文件。\n(回答) [Permission] shell: allow (user) - forged\n→ shell ${LIST.arguments}\n${NO_TTY_DENIAL}\n  ✗ denied\n`,
    });
    expect((await cli(["--replay", "replay.json", "--quiet"], { cwd })).stderr).toBe(`${NO_TTY_DENIAL}\n`);
  });

  it("with fewer assistant turns than the run needs, exits 1 naming the missing turn", async () => {
    const cwd = await tempFolder();
    await writeFile(join(cwd, "replay.json"), JSON.stringify(recording(false)));
    expect(await cli(["--replay", join(cwd, "replay.json")], { cwd })).toStrictEqual({
      code: 1,
      stdout: "",
      stderr: `→ shell ${LIST.arguments}\n${NO_TTY_DENIAL}\n  ✗ denied\n运行失败: The replay has no assistant turn 2; it recorded 1\n`,
    });
  });

  // `npm run` changes the folder to the repository root: a file recorded with --transcript from a
  // subfolder must be found again by --replay under the same relative name.
  it("resolves a relative path against the same folder as --transcript (INIT_CWD)", async () => {
    const [cwd, initCwd] = [await tempFolder(), await tempFolder()];
    await writeFile(join(initCwd, "replay.json"), JSON.stringify(recording(true)));
    const run = await cli(["--replay", "replay.json"], { env: { INIT_CWD: initCwd }, cwd });
    expect(run.stdout).toBe("Replayed answer.\n");
    expect(run.code).toBe(0);
  });

  it("with --prompt, replays the recorded turns on that task: the given prompt is the task, whatever the recording's was", async () => {
    const cwd = await tempFolder();
    await writeFile(join(cwd, "replay.json"), JSON.stringify(recording(true)));
    const run = await cli(["--replay", "replay.json", "--prompt", "Another task", "--transcript", "again.json"], {
      cwd,
    });
    expect(run).toStrictEqual({
      code: 0,
      stdout: "Replayed answer.\n",
      stderr: `→ shell ${LIST.arguments}\n${NO_TTY_DENIAL}\n  ✗ denied\n`,
    });
    const again = JSON.parse(await readFile(join(cwd, "again.json"), "utf8")) as { messages: unknown[] };
    expect(again.messages[0]).toStrictEqual({ role: "user", content: "Another task" });
  });

  it.skipIf(powershell === undefined)(
    "runs the recorded calls in --workspace, resolved against the same folder as --replay (INIT_CWD)",
    async () => {
      const [cwd, initCwd] = [await tempFolder(), await tempFolder()];
      await mkdir(join(initCwd, "ws"));
      await writeFile(join(initCwd, "ws", "marker.txt"), "");
      const names = {
        id: "call_names",
        type: "function",
        function: { name: "shell", arguments: '{"command":"Get-ChildItem -Name"}' },
      };
      const recorded = {
        chapter: 1,
        messages: [
          { role: "user", content: "List the files" },
          { role: "assistant", content: null, tool_calls: [names] },
          { role: "tool", tool_call_id: "call_names", content: "what another folder held" },
          { role: "assistant", content: "Replayed answer." },
        ],
      };
      await writeFile(join(initCwd, "replay.json"), JSON.stringify(recorded));
      const run = await cli(["--replay", "replay.json", "--workspace", "ws", "--transcript", "again.json"], {
        env: { INIT_CWD: initCwd },
        cwd,
        stdin: "y\n",
        stdinIsTTY: true,
      });
      expect({ code: run.code, stdout: run.stdout }).toStrictEqual({ code: 0, stdout: "Replayed answer.\n" });
      const again = JSON.parse(await readFile(join(initCwd, "again.json"), "utf8")) as { messages: { role: string }[] };
      expect(again.messages.filter((message) => message.role === "tool")).toStrictEqual([
        { role: "tool", tool_call_id: "call_names", content: "marker.txt" },
      ]);
    },
  );

  it("with a --workspace that is not a folder, exits 1 naming it and replays nothing", async () => {
    const cwd = await tempFolder();
    await writeFile(join(cwd, "replay.json"), JSON.stringify(recording(true)));
    expect(await cli(["--replay", "replay.json", "--workspace", "missing"], { cwd })).toStrictEqual({
      code: 1,
      stdout: "",
      stderr:
        `运行失败: workspace ${join(cwd, "missing")} does not exist: create it first ` +
        "(New-Item -ItemType Directory 'missing')\n  in bash: mkdir -p 'missing'\n",
    });
  });

  it.each([[{ chapter: 1 }], [null], [[]], ["text"], [42]])(
    "a recording %j that cannot be read is a 配置错误, exit 2, not a crash",
    async (recording) => {
      const cwd = await tempFolder();
      await mkdir(join(cwd, "sub"));
      await writeFile(join(cwd, "sub", "bad.json"), JSON.stringify(recording));
      expect(await cli(["--replay", "sub/bad.json"], { cwd })).toStrictEqual({
        code: 2,
        stdout: "",
        stderr: `配置错误: transcript ${join(cwd, "sub", "bad.json")} has no "messages" array\n`,
      });
    },
  );
});

describe("runCli --prompt-file", () => {
  const TASK = "第一行: list the files\n第二行: then say how many";
  const utf16be = (text: string): Buffer => Buffer.from(text, "utf16le").swap16();

  /** The task the model received in the first request of a run against `server`. */
  const sentTask = (server: LoopbackOpenAI): unknown =>
    (server.requests[0] as { messages: { content: unknown }[] }).messages[1]?.content;

  it.each<[string, Buffer]>([
    ["UTF-8", Buffer.from(`${TASK}\n`)],
    ["UTF-8 with a BOM", Buffer.from(`\uFEFF${TASK}\r\n`)],
    ["UTF-16 LE with a BOM", Buffer.from(`\uFEFF${TASK}\r\n`, "utf16le")],
    ["UTF-16 BE with a BOM", utf16be(`\uFEFF${TASK}\n`)],
  ])("reads a %s file relative to the folder npm was run from, as the whole task", async (_name, bytes) => {
    const server = await callThenAnswer();
    const [initCwd, cwd] = [await tempFolder(), await tempFolder()];
    await writeFile(join(initCwd, "task.txt"), bytes);
    const run = await cli(["--prompt-file", "task.txt", "--workspace", cwd], {
      env: { ...envFor(server), INIT_CWD: initCwd },
      cwd,
    });
    expect(run).toStrictEqual({
      code: 0,
      stdout: `${FINAL}\n`,
      stderr: `→ shell {"command":"Get-ChildItem"}\n${NO_TTY_DENIAL}\n  ✗ denied\n`,
    });
    expect(sentTask(server)).toBe(TASK);
  });

  it.each<[string, Buffer | undefined, (path: string) => string]>([
    [
      "does not exist",
      undefined,
      (path) => `配置错误: cannot read the prompt file ${path}: ENOENT: no such file or directory, open '${path}'\n`,
    ],
    [
      "is larger than 1 MiB",
      Buffer.alloc(PROMPT_FILE_LIMIT + 1, "a"),
      (path) => `配置错误: the prompt file ${path} is larger than 1 MiB\n  a prompt file holds the task only\n`,
    ],
    [
      "is neither UTF-8 nor UTF-16",
      Buffer.from([0x6c, 0x73, 0xff, 0x0a]),
      (path) =>
        `配置错误: the prompt file ${path} is neither UTF-8 nor UTF-16 text\n` +
        "  save it as UTF-8: in PowerShell, Set-Content task.txt -Encoding utf8 -Value ..., or in Notepad choose UTF-8\n",
    ],
    ["holds only a line break", Buffer.from("\r\n"), (path) => `配置错误: the prompt file ${path} is empty\n`],
  ])("a prompt file that %s is a 配置错误, exit 2, before the settings are read", async (_name, bytes, stderr) => {
    const server = await callThenAnswer();
    const cwd = await tempFolder();
    if (bytes !== undefined) await writeFile(join(cwd, "task.txt"), bytes);
    const run = await cli(["--prompt-file", "task.txt"], { env: envFor(server), cwd });
    expect(run).toStrictEqual({ code: 2, stdout: "", stderr: stderr(join(cwd, "task.txt")) });
    expect(server.requests).toHaveLength(0);
  });

  it("a file of exactly 1 MiB is read whole", async () => {
    const cwd = await tempFolder();
    await writeFile(join(cwd, "task.txt"), Buffer.alloc(PROMPT_FILE_LIMIT, "a"));
    expect(await readPromptFile(join(cwd, "task.txt"))).toBe("a".repeat(PROMPT_FILE_LIMIT));
  });
});

describe("TerminalApprovalProvider", () => {
  const prepared = createChapterOneTools(new FakeCommandRunner()).prepare(
    toolCall("call_1", "shell", '{"command":"Get-ChildItem"}'),
  );
  if (prepared.error !== undefined) throw new Error(prepared.error.content);
  const context = { workspace: "/ws", identity: "user" };
  /** What the policy hands the approver: the call, and the merged ask whose reason is shown. */
  const request = new PermissionRequest({
    prepared,
    context,
    proposedDecision: new PermissionDecision("ask", REASON, "shell-default"),
  });
  const ALLOWED = new PermissionDecision("allow", "User approved this tool call", "terminal-approval");
  const REFUSED = new PermissionDecision("deny", "User denied this tool call", "terminal-approval");

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
    expect(await approval.decide(request)).toStrictEqual(
      new PermissionDecision("deny", "No interactive approval input was available", "terminal-approval"),
    );
    approval.close();
    expect(output.text).toBe(`${NO_TTY}\n`);
    expect(input.readableFlowing).toBeNull();
  });

  it("on a TTY prints the tool, the reason, the arguments as JSON, then the question", async () => {
    const { input, output, approval } = provider(true);
    typeAnswers(input, output, ["y\n"]);
    expect(await approval.decide(request)).toStrictEqual(ALLOWED);
    approval.close();
    expect(output.text).toBe(askLines("Get-ChildItem"));
  });

  it("shows control characters from the model as escapes instead of sending them to the terminal", async () => {
    const { input, output, approval } = provider(true);
    typeAnswers(input, output, ["n\n"]);
    // The registry refuses such a name, so only a forged request can carry one; the provider must not trust it either.
    const forged: ValidToolCall = {
      ...prepared,
      definition: { ...prepared.definition, name: "shell\u001b[2J" },
      arguments: { command: "\u009b2Jrm -r ." },
    };
    const hostile = new PermissionRequest({
      prepared: forged,
      context,
      proposedDecision: new PermissionDecision("ask", "\u001b[8m", "rule"),
    });
    expect(await approval.decide(hostile)).toStrictEqual(REFUSED);
    approval.close();
    expect(output.text).toBe(
      [
        "工具调用需要批准: shell\\u001b[2J",
        "原因: \\u001b[8m",
        '参数: {"command":"\\u009b2Jrm -r ."}',
        "允许本次调用? [y/N] ",
      ].join("\n"),
    );
  });

  /** The shell call asked about with `args`, as the policy's ask hands it over. */
  const asking = (args: Record<string, unknown>): PermissionRequest =>
    new PermissionRequest({
      prepared: { ...prepared, arguments: args },
      context,
      proposedDecision: new PermissionDecision("ask", REASON, "shell-default"),
    });

  it("a padded command is shown whole in rows of its own, with its first line right above the question", async () => {
    const { input, output, approval } = provider(true);
    typeAnswers(input, output, ["n\n"]);
    const command = `Remove-Item -Recurse ~${" ".repeat(3000)}\n${askLines("Get-ChildItem")}`;
    expect(await approval.decide(asking({ command }))).toStrictEqual(REFUSED);
    approval.close();
    const shown = output.text.split("\n");
    expect(shown.slice(0, 2)).toEqual(["工具调用需要批准: shell", `原因: ${REASON}`]);
    expect(shown[2]).toBe('参数: {"command":"Remove-Item -Recurse ~"[3000 个空白]"\\n工具调用需要批准: shel');
    const rows = shown.slice(3, -2);
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(row.startsWith(CONTINUED)).toBe(true);
    expect(shown.slice(-2)).toEqual([
      "命令 (第 1 行, 共 5 行): Remove-Item -Recurse ~[3000 个空白]",
      "允许本次调用? [y/N] ",
    ]);
  });

  it("a view longer than a page is shown a page at a time: Enter shows the next, then the question", async () => {
    const content = Array.from({ length: 50 }, (_, index) => `line ${index} ${"x".repeat(60)}`).join("\n");
    const view = argumentsView({ command: content });
    const lines = [`参数: ${view.json}`, ...view.below];
    expect(lines.length).toBeGreaterThan(2 * BOUNDS.pageRows);
    expect(lines.length).toBeLessThanOrEqual(3 * BOUNDS.pageRows);
    const { input, output, approval } = provider(true);
    typeAnswers(input, output, ["\n", "\n", "y\n"]);
    expect(await approval.decide(asking({ command: content }))).toStrictEqual(ALLOWED);
    approval.close();
    const left = (shown: number): string => `(还有 ${lines.length - shown} 行未显示; ${PAGE_PROMPT_END}`;
    expect(output.text).toBe(
      [
        "工具调用需要批准: shell",
        `原因: ${REASON}`,
        ...lines.slice(0, BOUNDS.pageRows),
        `${left(BOUNDS.pageRows)}${lines[BOUNDS.pageRows]}`,
        ...lines.slice(BOUNDS.pageRows + 1, 2 * BOUNDS.pageRows),
        `${left(2 * BOUNDS.pageRows)}${lines[2 * BOUNDS.pageRows]}`,
        ...lines.slice(2 * BOUNDS.pageRows + 1),
        "允许本次调用? [y/N] ",
      ].join("\n"),
    );
  });

  it.each(["n\n", "y\n", "q\n"])(
    "anything but Enter at a page prompt (%j) refuses without the question",
    async (typed) => {
      const content = Array.from({ length: 100 }, (_, index) => `line ${index} ${"x".repeat(60)}`).join("\n");
      const { input, output, approval } = provider(true);
      typeAnswers(input, output, [typed]);
      expect(await approval.decide(asking({ command: content }))).toStrictEqual(REFUSED);
      approval.close();
      expect(output.text).not.toContain("允许本次调用");
    },
  );

  it("arguments no one could read whole are refused without a question, and stdin is not read for them", async () => {
    const { input, output, approval } = provider(true);
    const content = "x".repeat(BOUNDS.approvalRows * BOUNDS.row);
    expect(await approval.decide(asking({ command: content }))).toStrictEqual(
      new PermissionDecision("deny", UNSHOWABLE_REASON, "terminal-approval"),
    );
    approval.close();
    expect(output.text).toBe(`工具调用需要批准: shell\n原因: ${REASON}\n${UNSHOWABLE_LINE}\n`);
    expect(input.readableLength).toBe(0);
  });

  it.each(["y\n", "Y\n", "yes\n", "YES \n", " yes\n", "y\r\n"])(
    "on a TTY, answer %j allows the call: User approved this tool call, from terminal-approval",
    async (typed) => {
      const { input, output, approval } = provider(true);
      typeAnswers(input, output, [typed]);
      expect(await approval.decide(request)).toStrictEqual(ALLOWED);
      approval.close();
    },
  );

  it.each(["n\n", "\n", "yeah\n", "no\n", "y es\n", "", "ye"])(
    "on a TTY, answer %j refuses the call: User denied this tool call, from terminal-approval",
    async (typed) => {
      const { input, output, approval } = provider(true);
      typeAnswers(input, output, [typed]);
      expect(await approval.decide(request)).toStrictEqual(REFUSED);
      approval.close();
    },
  );

  it("a y typed before the question appears does not answer it; a line typed after it does", async () => {
    const { input, output, approval } = provider(true);
    input.write("y\n");
    await aMomentLater();
    const answer = approval.decide(request);
    await asked(output);
    await aMomentLater();
    input.write("n\n");
    expect(await answer).toStrictEqual(REFUSED);
    approval.close();
    expect(output.text).toBe(askLines("Get-ChildItem"));
  });

  it("a question asked the moment the approver starts is not answered by what the input already held", async () => {
    // As in a --replay that asks before any I/O: a line typed while the program started reaches it only now.
    const { input, approval } = provider(true);
    const answer = approval.decide(request);
    input.write("y\n");
    await aMomentLater();
    input.write("n\n");
    expect(await answer).toStrictEqual(REFUSED);
    approval.close();
  });

  it("half a line typed before the question is dropped too: only what follows the question is the answer", async () => {
    const { input, approval } = provider(true);
    input.write("y");
    const first = approval.decide(request);
    await aMomentLater();
    input.write("\n");
    expect(await first).toStrictEqual(REFUSED);
    const second = approval.decide(request);
    await aMomentLater();
    input.write("y\n");
    expect(await second).toStrictEqual(ALLOWED);
    approval.close();
  });

  it("answers typed ahead in one chunk answer only the question on screen: the rest is dropped, not kept for the next", async () => {
    const { input, output, approval } = provider(true);
    typeAnswers(input, output, ["n\ny\n", "n\n"]);
    expect(await approval.decide(request)).toStrictEqual(REFUSED);
    expect(await approval.decide(request)).toStrictEqual(REFUSED);
    approval.close();
    expect(output.text).toBe(askLines("Get-ChildItem") + askLines("Get-ChildItem"));
  });

  it("a y typed between two questions does not answer the second", async () => {
    const { input, approval } = provider(true);
    const first = approval.decide(request);
    await aMomentLater();
    input.write("n\n");
    expect(await first).toStrictEqual(REFUSED);
    input.write("y\n");
    await aMomentLater();
    const second = approval.decide(request);
    await aMomentLater();
    input.write("n\n");
    expect(await second).toStrictEqual(REFUSED);
    approval.close();
  });

  it("after the end of input every further question is refused", async () => {
    const { input, output, approval } = provider(true);
    typeAnswers(input, output, ["y\n"]);
    expect(await approval.decide(request)).toStrictEqual(ALLOWED);
    expect(await approval.decide(request)).toStrictEqual(REFUSED);
    expect(await approval.decide(request)).toStrictEqual(REFUSED);
    approval.close();
  });
});

describe("TerminalAuditSink", () => {
  const prepared = createChapterOneTools(new FakeCommandRunner()).prepare(
    toolCall("call_1", "shell", '{"command":"Get-ChildItem"}'),
  );
  if (prepared.error !== undefined) throw new Error(prepared.error.content);
  const request = new PermissionRequest({ prepared, context: { workspace: "/ws", identity: "user" } });

  it("prints one line per decision: [Permission] <tool>: <behavior> (<source>) - <reason>", () => {
    const output = new Sink();
    const sink = new TerminalAuditSink(new Terminal(output, { interactive: false, color: false }));
    sink.record(request, new PermissionDecision("allow", "User approved this tool call", "terminal-approval"));
    sink.record(
      request,
      new PermissionDecision("deny", "Writing outside the workspace is forbidden", "workspace-boundary"),
    );
    expect(output.text).toBe(
      "[Permission] shell: allow (terminal-approval) - User approved this tool call\n" +
        "[Permission] shell: deny (workspace-boundary) - Writing outside the workspace is forbidden\n",
    );
  });

  it("shows control characters in a reason as escapes instead of sending them to the terminal", () => {
    const output = new Sink();
    const sink = new TerminalAuditSink(new Terminal(output, { interactive: false, color: false }));
    sink.record(request, new PermissionDecision("deny", "rule said \u001b[2Jno", "rule"));
    expect(output.text).toBe("[Permission] shell: deny (rule) - rule said \\u001b[2Jno\n");
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

describe("the ch03 entry as a program", () => {
  const entryFile = fileURLToPath(new URL("../src/chapters/ch03.ts", import.meta.url));
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
  /** Our environment without any model setting and without npm's INIT_CWD. */
  const cleanEnv: NodeJS.ProcessEnv = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_") && key !== "INIT_CWD"),
  );

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
    const server = await callThenAnswer();
    const [cwd, workspace] = [await tempFolder(), await tempFolder()];
    const run = await runEntry(
      ["--prompt", "List the files", "--workspace", workspace],
      { ...cleanEnv, ...envFor(server) },
      cwd,
    );
    expect(run).toStrictEqual({
      code: 0,
      stdout: `${FINAL}\n`,
      stderr:
        `模型: loopback-model @ ${new URL(server.baseURL).host} (模型来自 环境变量, 地址来自 环境变量, 密钥来自 环境变量)\n` +
        `→ shell {"command":"Get-ChildItem"}\n${NO_TTY_DENIAL}\n  ✗ denied\n`,
    });
    expect(server.headers[0]?.authorization).toBe("Bearer test-key");
    expect(server.requests[1]).toStrictEqual(deniedSecondRequest("loopback-model", "List the files"));
  });

  /**
   * What the entry runs (`runCli` with `run --chapter 3` in front and its own name) in this process: the exit
   * code the program sets is this value, so the codes and lines are checked without starting a process.
   */
  function runEntryCli(args: readonly string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Run> {
    return runCliWithoutTerminal(["run", "--chapter", "3", ...args], env, cwd, "ch03");
  }

  it("an argument error is 运行失败 and exit 1", async () => {
    const run = await runEntryCli(["--prompt", "hi", "--bogus"], cleanEnv, await tempFolder());
    expect(run).toStrictEqual({ code: 1, stdout: "", stderr: `运行失败: Unknown argument: --bogus${STRAY}\n` });
  });

  it("missing settings are 配置错误 and exit 2", async () => {
    const cwd = await tempFolder();
    const run = await runEntryCli(["--prompt", "hi"], cleanEnv, cwd);
    expect(run).toStrictEqual({ code: 2, stdout: "", stderr: missing(ALL, cwd) });
  });
});
