// Every string of the book's chapter 1 table (shared/BOOK.md), asserted where the reader meets it:
// in what the model is sent, what the terminal prints, or what a call throws. Change one, and this fails.
// In this snapshot chapters 1 and 2 run with a shell-only permission policy, so their approval strings are the
// policy's. Then every string of the chapter 3 table, the same way.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import * as openaiChat from "../src/adapters/openai-chat.js";
import * as powershellAdapter from "../src/adapters/powershell.js";
import * as bootstrap from "../src/bootstrap.js";
import { buildAgent, SYSTEM_PROMPT } from "../src/bootstrap.js";
import * as cliModule from "../src/cli.js";
import { runCli, TerminalApprovalProvider, TerminalAuditSink, type CliIO } from "../src/cli.js";
import { Terminal } from "../src/cli/terminal.js";
import * as config from "../src/config.js";
import type { CommandResult } from "../src/core/commands.js";
import type { WorkspaceFileSystem } from "../src/core/filesystem.js";
import * as loop from "../src/core/loop.js";
import { AgentRunner } from "../src/core/loop.js";
import * as messagesModule from "../src/core/messages.js";
import { assistantMessage, toolCall, toolMessage, userMessage, validateToolPairing } from "../src/core/messages.js";
import type { ToolCall } from "../src/core/messages.js";
import type { ModelRequest } from "../src/core/model.js";
import * as permissions from "../src/core/permissions.js";
import {
  PermissionDecision,
  PermissionPolicy,
  PermissionRequest,
  PermissionRule,
  strongestDecision,
  type ApprovalProvider,
  type AuditSink,
} from "../src/core/permissions.js";
import * as profiles from "../src/core/profiles.js";
import { P01, P03 } from "../src/core/profiles.js";
import * as tools from "../src/core/tools.js";
import * as builtinTools from "../src/features/builtin-tools.js";
import { createChapterTwoTools } from "../src/features/builtin-tools.js";
import {
  commandResult,
  CountingApproval,
  FakeBoundary,
  FakeCommandRunner,
  FakeFileSystem,
  unstartableRunner,
} from "./support/fakes.js";
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

/** The requests a chapter 1 agent sends for one shell call of `command`, answered by `runner` and `approval`. */
async function requestsForOneCall(
  runner: FakeCommandRunner,
  approval?: ApprovalProvider,
  command = "Write-Output 42",
): Promise<ModelRequest[]> {
  const model = new ScriptedModel([toolTurn(call("call_1", "shell", { command })), textTurn("done")]);
  await buildAgent(P01, {
    model,
    workspace: await tempFolder(),
    commandRunner: runner,
    ...(approval === undefined ? {} : { approvalProvider: approval }),
  }).run("go");
  return model.requests;
}

/** The tool message the model reads after one shell call whose runner answers `result`. */
async function toolMessageFor(runner: FakeCommandRunner, approval?: ApprovalProvider): Promise<unknown> {
  return (await requestsForOneCall(runner, approval))[1]?.messages.at(-1);
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
    expect(exported(cliModule)).toEqual(expect.arrayContaining(["runCli", "TerminalApprovalProvider", "isYes"]));
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

  // The book's chapter 1 prints `原因: PowerShell command execution requires explicit approval.` and
  // `Tool approval failed closed`: that is the ch01 snapshot. Here chapter 1 runs on chapter 3's code with a
  // shell-only policy (book chapter 3: P01/P02 keep the shell ask), so the reason and the failure are the policy's.
  it("approval in this snapshot: chapter 1's shell is asked with the policy's reason Shell execution requires approval, printed after 原因:, with no [Permission] line", async () => {
    const approval = new CountingApproval(true);
    await requestsForOneCall(new FakeCommandRunner(), approval);
    expect(approval.requests.map((request) => request.reason)).toEqual(["Shell execution requires approval"]);
    const run = await cliRun(RUN, [{ json: completion({ toolCalls: [SHELL_CALL] }) }], "n\n");
    expect(run.stderr).toBe(
      '→ shell {"command":"Write-Output 42"}\n' +
        "工具调用需要批准: shell\n" +
        "原因: Shell execution requires approval\n" +
        '参数: {"command":"Write-Output 42"}\n' +
        "允许本次调用? [y/N] " +
        "  ✗ denied\n",
    );
  });

  it("approval in this snapshot: a refusal and a throwing approver reach the model as permission_denied results paired with the call", async () => {
    expect(await toolMessageFor(new FakeCommandRunner(), new CountingApproval(false))).toStrictEqual(
      toolMessage("Error [permission_denied]: The user did not approve this tool call", "call_1"),
    );
    const broken: ApprovalProvider = { decide: () => Promise.reject(new Error("x")) };
    expect(await toolMessageFor(new FakeCommandRunner(), broken)).toStrictEqual(
      toolMessage("Error [permission_denied]: Approval provider failed; request denied", "call_1"),
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

// ---------------------------------------------------------------------------------------------------------------
// Chapter 3 (P03): each row of the book's chapter 3 table, proven where the reader meets it: the tool message the
// model is sent, the line the terminal prints, or the declaration a reader greps for.

const ASK_WRITE = "File writes require explicit approval from chapter 3 onward";
const NOTE = { id: "call_w", name: "write_file", arguments: '{"path":"notes.txt","content":"hi\\n"}' };
const NOTE_WRITTEN = "Wrote 3 UTF-8 bytes to notes.txt";
const denied = (reason: string): string => `Error [permission_denied]: ${reason}`;

/** The source text of `src/<path>`, for what has no runtime form (interfaces) but a reader greps for. */
const sourceText = (path: string): string => readFileSync(new URL(`../src/${path}`, import.meta.url), "utf8");

/** Every final decision, as the terminal's audit line would show it after `[Permission] `. */
class RecordingAudit implements AuditSink {
  readonly lines: string[] = [];
  record(request: PermissionRequest, decision: PermissionDecision): void {
    this.lines.push(`${request.toolName}: ${decision.behavior} (${decision.source}) - ${decision.reason}`);
  }
}

interface ChapterThreeRun {
  /** The tool message the model is sent after the one call. */
  readonly toolMessage: unknown;
  readonly history: readonly unknown[];
  readonly audit: RecordingAudit;
  readonly workspace: string;
}

/** One chapter 3 agent from the composition root, asked for one `call` and then answering `done`. */
async function chapterThree(
  modelCall: ToolCall,
  approval: ApprovalProvider,
  deps: { fileSystem?: WorkspaceFileSystem; workspace?: string; beforeRun?: () => Promise<void> } = {},
): Promise<ChapterThreeRun> {
  const model = new ScriptedModel([toolTurn(modelCall), textTurn("done")]);
  const audit = new RecordingAudit();
  const workspace = deps.workspace ?? (await tempFolder());
  const agent = buildAgent(P03, {
    model,
    workspace,
    commandRunner: new FakeCommandRunner(commandResult({ output: "42" })),
    approvalProvider: approval,
    auditSink: audit,
    ...(deps.fileSystem === undefined ? {} : { fileSystem: deps.fileSystem }),
  });
  await deps.beforeRun?.();
  const result = await agent.run("go");
  return { toolMessage: model.requests[1]?.messages.at(-1), history: result.history, audit, workspace };
}

/** A chapter 3 agent's runner built by hand around `policy`, with the chapter 2 tools on `fileSystem`. */
async function runnerWith(
  policy: PermissionPolicy,
  modelCall: ToolCall,
  fileSystem: WorkspaceFileSystem = new FakeFileSystem(),
  commandRunner = new FakeCommandRunner(commandResult({ output: "42" })),
): Promise<{ toolMessage: unknown; workspace: string }> {
  const model = new ScriptedModel([toolTurn(modelCall), textTurn("done")]);
  const workspace = await tempFolder();
  await new AgentRunner({
    model,
    tools: createChapterTwoTools(commandRunner, fileSystem),
    systemPrompt: SYSTEM_PROMPT,
    workspace,
    permissionPolicy: policy,
  }).run("go");
  return { toolMessage: model.requests[1]?.messages.at(-1), workspace };
}

/** An approver that writes down what it is asked and answers `answer` (or throws it when it is an Error). */
function approver(answer: unknown): ApprovalProvider & { readonly received: PermissionRequest[] } {
  const received: PermissionRequest[] = [];
  return {
    received,
    decide(request) {
      received.push(request);
      return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer as PermissionDecision);
    },
  };
}

/** The write file rule the book's P03 asks with, as a rule of the test's own (bootstrap keeps its own private). */
const askOnWrite = new PermissionRule({
  name: "confirm-file-write",
  behavior: "ask",
  reason: ASK_WRITE,
  matches: (request) => request.toolName === "write_file",
});

describe("the book's chapter 3 strings", () => {
  it("the file map: PermissionPolicy and its types are in core/permissions.ts, the terminal classes in cli.ts, ch01–ch03 entries exist", () => {
    expect(Object.keys(permissions)).toEqual(
      expect.arrayContaining([
        "PermissionPolicy",
        "strongestDecision",
        "PermissionDecision",
        "PermissionRequest",
        "PermissionRule",
        "PERMISSION_BEHAVIORS",
      ]),
    );
    expect(Object.keys(cliModule)).toEqual(
      expect.arrayContaining(["TerminalApprovalProvider", "TerminalAuditSink", "isYes", "runCli"]),
    );
    // One declaration each, in the file the book names: a reader who greps finds it there and nowhere else.
    const src = fileURLToPath(new URL("../src/", import.meta.url));
    const files = (readdirSync(src, { recursive: true }) as string[]).filter((file) => file.endsWith(".ts"));
    const declaring = (pattern: RegExp): string[] =>
      files
        .filter((file) => pattern.test(readFileSync(join(src, file), "utf8")))
        .map((file) => file.replace(/\\/g, "/"));
    expect(declaring(/^export class PermissionPolicy\b/m)).toEqual(["core/permissions.ts"]);
    expect(declaring(/^export function strongestDecision\(/m)).toEqual(["core/permissions.ts"]);
    expect(declaring(/^export interface ApprovalProvider\b/m)).toEqual(["core/permissions.ts"]);
    expect(declaring(/^export class TerminalApprovalProvider\b/m)).toEqual(["cli.ts"]);
    expect(declaring(/^export class TerminalAuditSink\b/m)).toEqual(["cli.ts"]);
    expect(declaring(/^export interface WorkspaceWriteBoundary\b/m)).toEqual(["core/filesystem.ts"]);
    for (const chapter of ["ch01", "ch02", "ch03"]) {
      expect(existsSync(join(src, "chapters", `${chapter}.ts`)), `src/chapters/${chapter}.ts`).toBe(true);
    }
  });

  it("approver: interface ApprovalProvider { decide(request: PermissionRequest): Promise<PermissionDecision> }, given the merged ask as request.proposedDecision", async () => {
    expect(sourceText("core/permissions.ts")).toContain(
      "export interface ApprovalProvider {\n  decide(request: PermissionRequest): Promise<PermissionDecision>;\n}",
    );
    // An object with only `decide` is an approver: the policy calls it, and its allow lets the write run.
    const only = approver(new PermissionDecision("allow", "Yes from the test", "test"));
    const run = await chapterThree(call(NOTE.id, NOTE.name, NOTE.arguments), only);
    expect(only.received.map((request) => [request.toolName, request.prepared.arguments])).toStrictEqual([
      ["write_file", { path: "notes.txt", content: "hi\n" }],
    ]);
    expect(only.received[0]?.proposedDecision).toStrictEqual(
      new PermissionDecision("ask", ASK_WRITE, "confirm-file-write"),
    );
    expect(run.toolMessage).toStrictEqual(toolMessage(NOTE_WRITTEN, NOTE.id));
    expect(await readFile(join(run.workspace, "notes.txt"), "utf8")).toBe("hi\n");
    expect(run.audit.lines).toEqual(["write_file: allow (test) - Yes from the test"]);
  });

  it("policy: new PermissionPolicy({ rules, approval, audit, writeBoundary }) asks the boundary, the rules, the approver and the audit", async () => {
    const approval = new CountingApproval(true);
    const audit = new RecordingAudit();
    const writeBoundary = new FakeBoundary(true);
    const fileSystem = new FakeFileSystem();
    const policy = new PermissionPolicy({ rules: [askOnWrite], approval, audit, writeBoundary });
    const { toolMessage: sent, workspace } = await runnerWith(
      policy,
      call(NOTE.id, NOTE.name, NOTE.arguments),
      fileSystem,
    );
    expect(writeBoundary.calls).toEqual([[workspace, "notes.txt"]]);
    expect(approval.requests).toEqual([
      { toolName: "write_file", reason: ASK_WRITE, arguments: { path: "notes.txt", content: "hi\n" } },
    ]);
    expect(audit.lines).toEqual(["write_file: allow (user) - Approved in the test"]);
    expect(sent).toStrictEqual(toolMessage(NOTE_WRITTEN, NOTE.id));
    expect(fileSystem.files.get("notes.txt")).toBe("hi\n");
  });

  it("policy: the composition root passes the injected file system as writeBoundary, so its false turns an in-workspace write into a permission_denied", async () => {
    /** A file system that says every path is outside, and writes down each question. */
    class NothingInside extends FakeFileSystem {
      override isPathWithinWorkspace(workspace: string, relativePath: string): Promise<boolean> {
        this.boundaryCalls.push([workspace, relativePath]);
        return Promise.resolve(false);
      }
    }
    const fileSystem = new NothingInside();
    const approval = new CountingApproval(true);
    const run = await chapterThree(call(NOTE.id, NOTE.name, NOTE.arguments), approval, { fileSystem });
    expect(fileSystem.boundaryCalls).toEqual([[run.workspace, "notes.txt"]]);
    expect(run.toolMessage).toStrictEqual(
      toolMessage("Error [permission_denied]: Writing outside the workspace is forbidden", NOTE.id),
    );
    expect(run.audit.lines).toEqual([
      "write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden",
    ]);
    expect(approval.requests).toEqual([]);
    expect(fileSystem.calls).toEqual([]);
  });

  it.each(["NUL.txt", "a|b.txt", "file:stream", "trailing."])(
    "boundary: %j, a WorkspacePathError of the real file system, is outside: Writing outside the workspace is forbidden, and nobody is asked",
    async (path) => {
      const approval = new CountingApproval(true);
      const run = await chapterThree(call("call_p", "write_file", { path, content: "x" }), approval);
      expect(run.toolMessage).toStrictEqual(
        toolMessage(denied("Writing outside the workspace is forbidden"), "call_p"),
      );
      expect(run.audit.lines).toEqual([
        "write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden",
      ]);
      expect(approval.requests).toEqual([]);
      expect(readdirSync(run.workspace)).toEqual([]);
    },
  );

  it("boundary: only an unexpected throw (here the workspace vanished under the real file system) is Write path could not be resolved safely", async () => {
    const root = await tempFolder();
    const workspace = join(root, "ws");
    await mkdir(workspace);
    const approval = new CountingApproval(true);
    const run = await chapterThree(call(NOTE.id, NOTE.name, NOTE.arguments), approval, {
      workspace,
      beforeRun: () => rm(workspace, { recursive: true }),
    });
    expect(run.toolMessage).toStrictEqual(toolMessage(denied("Write path could not be resolved safely"), NOTE.id));
    expect(run.audit.lines).toEqual([
      "write_file: deny (workspace-boundary) - Write path could not be resolved safely",
    ]);
    expect(approval.requests).toEqual([]);
    expect(readdirSync(root)).toEqual([]);
  });

  it("boundary: WorkspaceWriteBoundary.isPathWithinWorkspace(workspace, relativePath): Promise<boolean> is declared with the file-system port", () => {
    expect(sourceText("core/filesystem.ts")).toContain(
      "export interface WorkspaceWriteBoundary {\n  isPathWithinWorkspace(workspace: string, relativePath: string): Promise<boolean>;\n}",
    );
    expect(sourceText("core/filesystem.ts")).toContain(
      "export interface WorkspaceFileSystem extends WorkspaceWriteBoundary {",
    );
  });

  it("merge: strongestDecision(decisions) picks deny over ask over allow, the first of the strongest, else a passthrough", () => {
    const allow = new PermissionDecision("allow", "a", "r1");
    const ask = new PermissionDecision("ask", "b", "r2");
    const deny = new PermissionDecision("deny", "c", "r3");
    const laterDeny = new PermissionDecision("deny", "d", "r4");
    const passthrough = new PermissionDecision("passthrough", "e", "r5");
    expect(strongestDecision([allow, ask, deny, laterDeny])).toBe(deny);
    expect(strongestDecision([allow, ask, passthrough])).toBe(ask);
    expect(strongestDecision([passthrough, allow])).toBe(allow);
    expect(strongestDecision([])).toStrictEqual(
      new PermissionDecision("passthrough", "No permission participant made a decision", "default"),
    );
  });

  it("decision: decision.isAllowed is true only for allow, and the loop runs the handler by it, not by the behaviour", async () => {
    expect(
      permissions.PERMISSION_BEHAVIORS.map((behavior) => new PermissionDecision(behavior, "r", "s").isAllowed),
    ).toEqual([true, false, false, false]);
    /** A decision whose isAllowed says the opposite of its behaviour: only a loop that reads isAllowed obeys it. */
    class Contrary extends PermissionDecision {
      override get isAllowed(): boolean {
        return !super.isAllowed;
      }
    }
    /** A policy that answers one fixed decision. */
    class Fixed extends PermissionPolicy {
      constructor(private readonly answer: PermissionDecision) {
        super();
      }
      override decide(): Promise<PermissionDecision> {
        return Promise.resolve(this.answer);
      }
    }
    const shell = call("call_s", "shell", { command: "Write-Output 42" });
    const runsAnyway = new FakeCommandRunner(commandResult({ output: "42" }));
    const ran = await runnerWith(new Fixed(new Contrary("deny", "no", "test")), shell, undefined, runsAnyway);
    expect(runsAnyway.calls).toHaveLength(1);
    expect(ran.toolMessage).toStrictEqual(toolMessage("42", "call_s"));
    const neverRuns = new FakeCommandRunner(commandResult({ output: "42" }));
    const held = await runnerWith(new Fixed(new Contrary("allow", "yes", "test")), shell, undefined, neverRuns);
    expect(neverRuns.calls).toEqual([]);
    expect(held.toolMessage).toStrictEqual(
      toolMessage("Error [permission_evaluation_error]: Permission evaluation failed", "call_s"),
    );
  });

  it("loop: each result goes back as toolMessage(result.content, call.id), in the history and in the next request", async () => {
    const run = await chapterThree(
      call(NOTE.id, NOTE.name, NOTE.arguments),
      approver(new PermissionDecision("allow", "ok", "test")),
    );
    expect(run.toolMessage).toStrictEqual({ role: "tool", content: NOTE_WRITTEN, toolCallId: NOTE.id });
    expect(run.history.filter((message) => (message as { role: string }).role === "tool")).toStrictEqual([
      toolMessage(NOTE_WRITTEN, NOTE.id),
    ]);
    const refused = await chapterThree(
      call("call_r", "write_file", { path: "../outside.txt", content: "x" }),
      approver(new PermissionDecision("allow", "ok", "test")),
    );
    expect(refused.toolMessage).toStrictEqual({
      role: "tool",
      content: "Error [permission_denied]: Writing outside the workspace is forbidden",
      toolCallId: "call_r",
    });
  });

  it.each<[string, string, string, string]>([
    ["y", "allow (terminal-approval) - User approved this tool call", "y\n", NOTE_WRITTEN],
    [
      "an empty Enter",
      "deny (terminal-approval) - User denied this tool call",
      "\n",
      denied("User denied this tool call"),
    ],
    ["n", "deny (terminal-approval) - User denied this tool call", "n\n", denied("User denied this tool call")],
    [
      "the end of input",
      "deny (terminal-approval) - User denied this tool call",
      "",
      denied("User denied this tool call"),
    ],
  ])(
    "terminal approval: answering %s on a terminal prints [Permission] write_file: %s, and the model is told",
    async (_name, audit, typed, content) => {
      const workspace = await tempFolder();
      const run = await cliRun(
        ["run", "--chapter", "3", "--prompt", "go", "--workspace", workspace],
        [{ json: completion({ toolCalls: [NOTE] }) }, { json: completion({ content: "done" }) }],
        typed,
      );
      expect(run).toStrictEqual({
        code: 0,
        stdout: "done\n",
        stderr:
          `→ write_file ${NOTE.arguments}\n` +
          "工具调用需要批准: write_file\n" +
          `原因: ${ASK_WRITE}\n` +
          `参数: ${NOTE.arguments}\n` +
          "允许本次调用? [y/N] " +
          `[Permission] write_file: ${audit}\n` +
          (content === NOTE_WRITTEN ? `  ✓ ok  ${NOTE_WRITTEN}\n` : "  ✗ denied\n"),
      });
      const second = servers.at(-1)?.requests[1] as { messages: unknown[] } | undefined;
      expect(second?.messages.at(-1)).toStrictEqual({ role: "tool", tool_call_id: NOTE.id, content });
      expect(readdirSync(workspace)).toEqual(content === NOTE_WRITTEN ? ["notes.txt"] : []);
    },
  );

  it("terminal approval: TerminalApprovalProvider.decide answers allow or deny from terminal-approval, and TerminalAuditSink prints the book's line", async () => {
    const prepared = createChapterTwoTools(new FakeCommandRunner(), new FakeFileSystem()).prepare(
      toolCall(NOTE.id, NOTE.name, NOTE.arguments),
    );
    if (prepared.error !== undefined) throw new Error(prepared.error.content);
    const request = new PermissionRequest({
      prepared,
      context: { workspace: "/ws", identity: "user" },
      proposedDecision: new PermissionDecision("ask", ASK_WRITE, "confirm-file-write"),
    });
    const input = new PassThrough();
    const output = new Sink();
    const terminal = new Terminal(output, { interactive: false, color: false });
    const provider = new TerminalApprovalProvider(input, terminal, true);
    typeAnswers(input, output, ["y\n", "\n"]);
    const allowed = await provider.decide(request);
    const refused = await provider.decide(request);
    provider.close();
    expect(allowed).toStrictEqual(new PermissionDecision("allow", "User approved this tool call", "terminal-approval"));
    expect(refused).toStrictEqual(new PermissionDecision("deny", "User denied this tool call", "terminal-approval"));
    const sink = new TerminalAuditSink(terminal);
    output.text = "";
    sink.record(request, allowed);
    sink.record(request, refused);
    expect(output.text).toBe(
      "[Permission] write_file: allow (terminal-approval) - User approved this tool call\n" +
        "[Permission] write_file: deny (terminal-approval) - User denied this tool call\n",
    );
  });

  it.each<[string, string, () => ApprovalProvider | undefined]>([
    ["there is no approver", `Approval was not explicitly granted: ${ASK_WRITE}`, () => undefined],
    [
      "the approver answers ask",
      `Approval was not explicitly granted: ${ASK_WRITE}`,
      () => approver(new PermissionDecision("ask", "Not sure", "test")),
    ],
    [
      "the approver answers passthrough",
      `Approval was not explicitly granted: ${ASK_WRITE}`,
      () => approver(new PermissionDecision("passthrough", "No opinion", "test")),
    ],
    ["the approver throws", "Approval provider failed; request denied", () => approver(new Error("approver crashed"))],
    [
      "the approver returns a look-alike object",
      "Approval provider returned an invalid decision",
      () => approver({ behavior: "allow", reason: "Looks approved", source: "fake", isAllowed: true }),
    ],
    [
      "the approver returns an unbuilt PermissionDecision",
      "Approval provider returned an invalid decision",
      () => approver(Object.create(PermissionDecision.prototype)),
    ],
  ])("policy fails closed when %s: the model gets %j from source approval", async (_name, reason, make) => {
    const approval = make();
    const audit = new RecordingAudit();
    const fileSystem = new FakeFileSystem();
    const policy = new PermissionPolicy({
      rules: [askOnWrite],
      audit,
      writeBoundary: fileSystem,
      ...(approval === undefined ? {} : { approval }),
    });
    const { toolMessage: sent } = await runnerWith(policy, call(NOTE.id, NOTE.name, NOTE.arguments), fileSystem);
    expect(sent).toStrictEqual(toolMessage(denied(reason), NOTE.id));
    expect(audit.lines).toEqual([`write_file: deny (approval) - ${reason}`]);
    expect(fileSystem.files.size).toBe(0);
  });

  it("policy fails closed in the composition root too: an approver that answers ask leaves the shell's reason in the denial", async () => {
    const run = await chapterThree(
      call("call_s", "shell", { command: "Write-Output 42" }),
      approver(new PermissionDecision("ask", "Not sure", "test")),
    );
    expect(run.toolMessage).toStrictEqual(
      toolMessage(denied("Approval was not explicitly granted: Shell execution requires approval"), "call_s"),
    );
    expect(run.audit.lines).toEqual([
      "shell: deny (approval) - Approval was not explicitly granted: Shell execution requires approval",
    ]);
  });
});
