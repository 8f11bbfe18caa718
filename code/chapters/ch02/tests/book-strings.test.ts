// Every string of the book's chapter 1 table (shared/BOOK.md), asserted where the reader meets it:
// in what the model is sent, what the terminal prints, or what a call throws. Change one, and this fails.
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import * as openaiChat from "../src/adapters/openai-chat.js";
import * as powershellAdapter from "../src/adapters/powershell.js";
import * as bootstrap from "../src/bootstrap.js";
import { buildAgent, SYSTEM_PROMPT } from "../src/bootstrap.js";
import * as cliModule from "../src/cli.js";
import { runCli, type CliIO } from "../src/cli.js";
import * as config from "../src/config.js";
import type { CommandResult } from "../src/core/commands.js";
import * as loop from "../src/core/loop.js";
import type { ToolAuthorizer } from "../src/core/loop.js";
import * as messagesModule from "../src/core/messages.js";
import { assistantMessage, toolCall, toolMessage, userMessage, validateToolPairing } from "../src/core/messages.js";
import type { ModelRequest } from "../src/core/model.js";
import * as profiles from "../src/core/profiles.js";
import { P01 } from "../src/core/profiles.js";
import * as tools from "../src/core/tools.js";
import * as builtinTools from "../src/features/builtin-tools.js";
import { commandResult, CountingAuthorizer, FakeCommandRunner, unstartableRunner } from "./support/fakes.js";
import { completion, startLoopbackOpenAI, type LoopbackOpenAI, type LoopbackReply } from "./support/loopback-openai.js";
import { call, ScriptedModel, textTurn, toolTurn } from "./support/scripted-model.js";
import { afterSettingsLine } from "./support/cli-run.js";
import { Sink } from "./support/sink.js";
import { SHELL_TOOL } from "./support/shell-tool.js";
import { typeAnswers } from "./support/typist.js";

const folders: string[] = [];
const servers: LoopbackOpenAI[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

async function tempFolder(): Promise<string> {
  const folder = await realpath(await mkdtemp(join(tmpdir(), "ch01-book-")));
  folders.push(folder);
  return folder;
}

/** The requests a chapter 1 agent sends for one shell call of `command`, answered by `runner` and `authorizer`. */
async function requestsForOneCall(
  runner: FakeCommandRunner,
  authorizer?: ToolAuthorizer,
  command = "Write-Output 42",
): Promise<ModelRequest[]> {
  const model = new ScriptedModel([toolTurn(call("call_1", "shell", { command })), textTurn("done")]);
  await buildAgent(P01, {
    model,
    workspace: await tempFolder(),
    commandRunner: runner,
    ...(authorizer === undefined ? {} : { authorizer }),
  }).run("go");
  return model.requests;
}

/** The tool message the model reads after one shell call whose runner answers `result`. */
async function toolMessageFor(runner: FakeCommandRunner, authorizer?: ToolAuthorizer): Promise<unknown> {
  return (await requestsForOneCall(runner, authorizer))[1]?.messages.at(-1);
}

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** `runCli(argv)` with a loopback model answering `replies` in order; no terminal unless `stdin` is typed. */
async function cliRun(argv: readonly string[], replies: readonly LoopbackReply[] = [], stdin?: string): Promise<Run> {
  const server = await startLoopbackOpenAI((_body, index) => replies[index] ?? { json: completion({ content: "?" }) });
  servers.push(server);
  const input = new PassThrough();
  const [stdout, stderr] = [new Sink(), new Sink()];
  // Typed once the question is on screen, as a person would: typed ahead, it would be dropped.
  if (stdin !== undefined) typeAnswers(input, stderr, [stdin]);
  const env: CliIO["env"] =
    replies.length === 0 ? {} : { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "k", OPENAI_MODEL: "m" };
  const cwd = await tempFolder();
  const io: CliIO = { env, cwd, stdin: input, stdinIsTTY: stdin !== undefined, stdout, stderr, stderrIsTTY: false };
  const code = await runCli(argv, io, "ch01");
  return { code, stdout: stdout.text, stderr: afterSettingsLine(stderr.text, argv, env) };
}

const RUN = ["run", "--chapter", "1", "--prompt", "go"];
const SHELL_CALL = { id: "call_1", name: "shell", arguments: '{"command":"Write-Output 42"}' };

describe("the book's chapter 1 strings", () => {
  it("the file map: each file the book names holds the names the book gives it", () => {
    const exported = (module: object): string[] => Object.keys(module);
    expect(exported(loop)).toEqual(
      expect.arrayContaining(["AgentRunner", "AgentRunError", "AgentLimitError", "IncompleteModelReplyError"]),
    );
    expect(exported(tools)).toEqual(
      expect.arrayContaining(["toolSuccess", "toolError", "isToolResult", "ToolRegistry"]),
    );
    expect(exported(messagesModule)).toEqual(
      expect.arrayContaining([
        "systemMessage",
        "userMessage",
        "assistantMessage",
        "toolMessage",
        "toolCall",
        "validateToolPairing",
        "MessageContractError",
      ]),
    );
    expect(exported(profiles)).toEqual(expect.arrayContaining(["P01", "profileForChapter"]));
    expect(exported(builtinTools)).toEqual(expect.arrayContaining(["createShellTool", "createChapterOneTools"]));
    expect(exported(openaiChat)).toEqual(expect.arrayContaining(["OpenAIChatModel", "toOpenAIMessage"]));
    expect(exported(powershellAdapter)).toEqual(expect.arrayContaining(["PowerShellRunner"]));
    expect(exported(bootstrap)).toEqual(expect.arrayContaining(["SYSTEM_PROMPT", "buildAgent"]));
    expect(exported(config)).toEqual(expect.arrayContaining(["loadSettings", "readDotEnv", "ConfigurationError"]));
    expect(exported(cliModule)).toEqual(expect.arrayContaining(["runCli", "TerminalAuthorizer"]));
  });

  it("system prompt: the exact SYSTEM_PROMPT is first in every request and never in the history", async () => {
    expect(SYSTEM_PROMPT).toBe(
      "You are a coding agent. Use tools when needed, inspect their results, and answer accurately.",
    );
    const requests = await requestsForOneCall(new FakeCommandRunner(commandResult({ output: "42" })));
    expect(requests.map((request) => request.messages[0])).toStrictEqual([
      {
        role: "system",
        content: "You are a coding agent. Use tools when needed, inspect their results, and answer accurately.",
      },
      {
        role: "system",
        content: "You are a coding agent. Use tools when needed, inspect their results, and answer accurately.",
      },
    ]);
    expect(requests[1]?.messages.slice(1).map((message) => message.role)).toEqual(["user", "assistant", "tool"]);
  });

  it("shell tool: the model is offered the book's description and schema", async () => {
    const requests = await requestsForOneCall(new FakeCommandRunner());
    expect(requests[0]?.tools).toStrictEqual([SHELL_TOOL]);
  });

  it("messages: internal fields toolCalls and toolCallId", () => {
    expect(assistantMessage(null, [toolCall("call_1", "shell", "{}")])).toStrictEqual({
      role: "assistant",
      content: null,
      toolCalls: [{ id: "call_1", name: "shell", arguments: "{}" }],
    });
    expect(toolMessage("42", "call_1")).toStrictEqual({ role: "tool", content: "42", toolCallId: "call_1" });
  });

  it.each<[string, CommandResult | "unstartable", string]>([
    ["the output of Write-Output 42", commandResult({ output: "42" }), "42"],
    ["no output", commandResult({ output: "" }), "(no output)"],
    ["truncated output", commandResult({ output: "head", truncated: true }), "head\n[output truncated]"],
    [
      "a timeout (no prefix)",
      commandResult({ output: "partial", exitCode: null, timedOut: true }),
      "Error [shell_timeout]: partial",
    ],
    [
      "exit code 7",
      commandResult({ output: "boom", exitCode: 7 }),
      "Error [shell_failed]: PowerShell exited with code 7\nboom",
    ],
    [
      "a process that cannot start",
      "unstartable",
      "Error [shell_start_failed]: PowerShell process could not be started",
    ],
  ])("shell results: %s reaches the model as the book's text", async (_name, result, content) => {
    const runner = result === "unstartable" ? unstartableRunner() : new FakeCommandRunner(result);
    expect(await toolMessageFor(runner)).toStrictEqual({ role: "tool", content, toolCallId: "call_1" });
  });

  it("approval: the authorizer is given the book's reason, and the terminal prints it after 原因:", async () => {
    const authorizer = new CountingAuthorizer(true);
    await requestsForOneCall(new FakeCommandRunner(), authorizer);
    expect(authorizer.requests.map((request) => request.reason)).toEqual([
      "PowerShell command execution requires explicit approval.",
    ]);
    const run = await cliRun(RUN, [{ json: completion({ toolCalls: [SHELL_CALL] }) }], "n\n");
    expect(run.stderr).toBe(
      '→ shell {"command":"Write-Output 42"}\n' +
        "工具调用需要批准: shell\n" +
        "原因: PowerShell command execution requires explicit approval.\n" +
        '参数: {"command":"Write-Output 42"}\n' +
        "允许本次调用? [y/N] " +
        "  ✗ denied\n",
    );
  });

  it("approval: a refusal and a broken approver reach the model as permission_denied results", async () => {
    expect(await toolMessageFor(new FakeCommandRunner(), new CountingAuthorizer(false))).toStrictEqual(
      toolMessage("Error [permission_denied]: The user did not approve this tool call", "call_1"),
    );
    const broken: ToolAuthorizer = { authorize: () => Promise.reject(new Error("x")) };
    expect(await toolMessageFor(new FakeCommandRunner(), broken)).toStrictEqual(
      toolMessage("Error [permission_denied]: Tool approval failed closed", "call_1"),
    );
  });

  it("approval: with no terminal the terminal shows 无交互输入，默认拒绝。", async () => {
    const run = await cliRun(RUN, [{ json: completion({ toolCalls: [SHELL_CALL] }) }]);
    expect(run.stderr).toBe('→ shell {"command":"Write-Output 42"}\n无交互输入，默认拒绝。\n  ✗ denied\n');
  });

  it("pairing: the three MessageContractError messages", () => {
    const ask = assistantMessage(null, [toolCall("call_1", "shell", "{}"), toolCall("call_2", "shell", "{}")]);
    expect(() => validateToolPairing([userMessage("u"), ask, toolMessage("42", "call_1")])).toThrow(
      'missing tool results for ids: ["call_2"]',
    );
    expect(() => validateToolPairing([userMessage("u"), ask, toolMessage("42", "call_9")])).toThrow(
      "unexpected tool result id: call_9",
    );
    expect(() => validateToolPairing([userMessage("u"), toolMessage("42", "call_1")])).toThrow(
      "orphan tool result id: call_1",
    );
  });

  it.each<[string, string[], LoopbackReply[], string]>([
    [
      "the turn limit",
      [...RUN, "--max-turns", "1"],
      [{ json: completion({ toolCalls: [SHELL_CALL] }) }],
      '→ shell {"command":"Write-Output 42"}\n无交互输入，默认拒绝。\n  ✗ denied\n运行失败: Agent exceeded maxTurns=1',
    ],
    [
      "finish_reason length",
      RUN,
      [{ json: completion({ content: "half", finishReason: "length" }) }],
      "运行失败: Model output reached the token limit",
    ],
    [
      "finish_reason content_filter",
      RUN,
      [{ json: completion({ finishReason: "content_filter" }) }],
      "运行失败: Model response was blocked by the content filter",
    ],
    [
      "a reply with neither text nor tool calls",
      RUN,
      [{ json: completion({ content: null }) }],
      "运行失败: Model stopped without final text or tool calls",
    ],
    [
      "an unknown finish_reason",
      RUN,
      [{ json: completion({ content: "x", finishReason: "eos" }) }],
      "运行失败: Unsupported finish_reason: eos",
    ],
  ])("run errors: %s ends the run with the book's line and exit 1", async (_name, argv, replies, stderr) => {
    expect(await cliRun(argv, replies)).toStrictEqual({ code: 1, stdout: "", stderr: `${stderr}\n` });
  });

  it("run errors: maxTurns must be a positive integer", async () => {
    const workspace = await tempFolder();
    expect(() => buildAgent(P01, { model: new ScriptedModel([]), workspace, maxTurns: 0 })).toThrow(
      new RangeError("maxTurns must be a positive integer"),
    );
  });

  it("settings: all three missing is the book's 配置错误 line, exit 2", async () => {
    const run = await cliRun(RUN);
    // The book's line, then one line of ours: where the run looked for the settings.
    const [book, ours, ...rest] = run.stderr.split("\n");
    expect({ code: run.code, stdout: run.stdout, book, rest }).toStrictEqual({
      code: 2,
      stdout: "",
      book: "配置错误: Missing required settings: OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL",
      rest: [""],
    });
    expect(ours).toMatch(/^ {2}looked in the environment/);
  });

  // The book's line comes first; a line of ours may follow it (how to pass a prompt of several words).
  it.each<[string[], string]>([
    [["run", "--chapter", "1", "--prompt", "go", "--bogus"], "运行失败: Unknown argument: --bogus"],
    [["run", "--prompt", "go"], "运行失败: Both --chapter and --prompt are required"],
    [["--chapter", "1", "--prompt", "go"], "运行失败: Expected command: run"],
  ])("CLI: the book's argument error for %j is the first line, exit 1", async (argv, line) => {
    const run = await cliRun(argv);
    expect({ ...run, stderr: run.stderr.split("\n")[0] }).toStrictEqual({ code: 1, stdout: "", stderr: line });
  });
});
