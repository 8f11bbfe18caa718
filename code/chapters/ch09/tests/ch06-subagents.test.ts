import { readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, test } from "vitest";
import { buildAgent } from "../src/bootstrap.js";
import { type CliIO } from "../src/cli.js";
import { HookRegistry } from "../src/core/hooks.js";
import type { AgentRunner } from "../src/core/loop.js";
import { assistantMessage, validateToolPairing } from "../src/core/messages.js";
import type { ModelReply } from "../src/core/model.js";
import {
  PermissionDecision,
  type ApprovalProvider,
  type AuditSink,
  type PermissionRequest,
} from "../src/core/permissions.js";
import { P05, P06, profileForChapter } from "../src/core/profiles.js";
import { DEFAULT_SUBAGENT_SYSTEM_PROMPT } from "../src/features/subagents.js";
import { runCliWithoutTerminal, type CliRun } from "./support/cli-run.js";
import { FakeCommandRunner } from "./support/fakes.js";
import { apiError, completion, type LoopbackOpenAI, type LoopbackReply } from "./support/loopback-openai.js";
import { call, ScriptedModel, textTurn, toolTurn } from "./support/scripted-model.js";
import {
  announcedWorkspace,
  keylessEnv,
  loopbackEnv,
  runProfileInProcess,
  scriptedProvider,
  wireCall,
  wireText,
} from "./support/profile-run.js";

// The chapter 6 gate: `task` through the real composition root (buildAgent(P06)), loop, registry, policy, hooks and
// a temporary disk, with one scripted model that parent and child share in call order, as the book's tests do; then
// the CLI (runProfile(P06) in this process, a loopback provider or a replay) and the demo. The first describe holds
// the book's two tests as it writes them; the rest prove CH06's rules one by one.

const PARENT_TOOLS = ["shell", "read_file", "write_file", "edit_file", "glob", "todo_write", "task"];
const CHILD_TOOLS = PARENT_TOOLS.slice(0, 6);
const ASK_WRITE = "File writes require explicit approval from chapter 3 onward";
const TASK_DESCRIPTION = "Launch an isolated subagent and return only its final conclusion.";
const TASK_PARAMETERS =
  '{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"description":{"description":"A self-contained task for the subagent to complete.","type":"string","minLength":1}},"required":["description"],"additionalProperties":false}';
const CHILD_FAILED = "Error [subagent_execution_error]: Subagent execution failed";

/** The book's approver: it keeps every `PermissionRequest` it is given and answers `allow` (or `deny`). */
class RecordingApproval implements ApprovalProvider {
  readonly requests: PermissionRequest[] = [];
  constructor(private readonly allow = true) {}
  decide(request: PermissionRequest): Promise<PermissionDecision> {
    this.requests.push(request);
    return Promise.resolve(
      this.allow
        ? new PermissionDecision("allow", "Approved in the test", "user")
        : new PermissionDecision("deny", "Refused in the test", "user"),
    );
  }
}

/** The book's audit: `{ tool, decision }` per final decision, with the request it was about. */
class RecordingAudit implements AuditSink {
  readonly records: { tool: string; decision: PermissionDecision; request: PermissionRequest }[] = [];
  record(request: PermissionRequest, decision: PermissionDecision): void {
    this.records.push({ tool: request.toolName, decision, request });
  }
}

let root: string;
let workspace: string;
let shell: FakeCommandRunner;

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch06-subagents-")));
  workspace = join(root, "workspace");
  await mkdir(workspace);
  await writeFile(join(workspace, "README.md"), "# Demo\n", "utf8");
  shell = new FakeCommandRunner();
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

interface Session {
  readonly agent: AgentRunner;
  readonly model: ScriptedModel;
  readonly approval: RecordingApproval;
  readonly audit: RecordingAudit;
}

/** The chapter 6 agent as buildAgent builds it, on the test's disk and shell, with one model for parent and child. */
function p06(replies: readonly ModelReply[], approval = new RecordingApproval()): Session {
  const model = new ScriptedModel(replies);
  const audit = new RecordingAudit();
  const agent = buildAgent(P06, {
    model,
    workspace,
    commandRunner: shell,
    approvalProvider: approval,
    auditSink: audit,
  });
  return { agent, model, approval, audit };
}

const toolNames = (model: ScriptedModel, index: number): string[] | undefined =>
  model.requests[index]?.tools.map((tool) => tool.function.name);

describe("the book's two tests", () => {
  test("P06 isolates child trajectory while preserving an approved file side effect", async () => {
    const parentCall = call("parent-task", "task", { description: " write child.txt with evidence " });
    const model = new ScriptedModel([
      toolTurn(parentCall),
      toolTurn(call("child-write", "write_file", { path: "child.txt", content: "child evidence" })),
      textTurn("child conclusion"),
      textTurn("parent final"),
    ]);
    const approval = new RecordingApproval();
    const audit = new RecordingAudit();
    const agent = buildAgent(P06, {
      model,
      workspace,
      commandRunner: shell,
      approvalProvider: approval,
      auditSink: audit,
    });
    const result = await agent.run("delegate the write");

    expect(await readFile(join(workspace, "child.txt"), "utf8")).toBe("child evidence");
    expect(model.requests[0]?.tools.map((t) => t.function.name)).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
      "todo_write",
      "task",
    ]);
    expect(model.requests[1]?.tools.map((t) => t.function.name)).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
      "todo_write",
    ]);
    expect(model.requests[1]?.messages).toEqual([
      { role: "system", content: DEFAULT_SUBAGENT_SYSTEM_PROMPT },
      { role: "user", content: "write child.txt with evidence" },
    ]);
    expect(result.history).toEqual([
      { role: "user", content: "delegate the write" },
      assistantMessage(null, [parentCall]),
      { role: "tool", content: "child conclusion", toolCallId: "parent-task" },
      assistantMessage("parent final"),
    ]);
    expect(approval.requests.map((r) => r.prepared.call.name)).toEqual(["write_file"]);
    expect(audit.records.map((r) => [r.tool, r.decision.behavior])).toEqual([
      ["task", "allow"],
      ["write_file", "allow"],
    ]);
    validateToolPairing(result.history);
    model.assertExhausted();
  });

  test("child cannot turn approval into a workspace escape", async () => {
    const outside = join(root, "outside.txt");
    await writeFile(outside, "sentinel", "utf8");
    const model = new ScriptedModel([
      toolTurn(call("parent-task", "task", { description: "write ../outside.txt" })),
      toolTurn(call("outside-write", "write_file", { path: "../outside.txt", content: "escaped" })),
      textTurn("child could not write there"),
      textTurn("parent final"),
    ]);
    const approval = new RecordingApproval(true);
    const audit = new RecordingAudit();
    const agent = buildAgent(P06, {
      model,
      workspace,
      commandRunner: shell,
      approvalProvider: approval,
      auditSink: audit,
    });
    const result = await agent.run("delegate the escape");

    expect(await readFile(outside, "utf8")).toBe("sentinel");
    expect(approval.requests).toEqual([]);
    expect(audit.records.map((r) => [r.tool, r.decision.behavior])).toEqual([
      ["task", "allow"],
      ["write_file", "deny"],
    ]);
    expect(model.requests[2]?.messages.at(-1)).toEqual({
      role: "tool",
      content: "Error [permission_denied]: Writing outside the workspace is forbidden",
      toolCallId: "outside-write",
    });
    validateToolPairing(result.history);
    model.assertExhausted();
  });
});

describe("rule 1: the tool faces", () => {
  it("the parent is offered chapter 5's six tools and task in every request, the child the six only", async () => {
    const { agent, model } = p06([
      toolTurn(call("read-1", "read_file", { path: "README.md" })),
      toolTurn(call("task-1", "task", { description: "read README.md" })),
      toolTurn(call("child-read", "read_file", { path: "README.md" })),
      textTurn("child done"),
      textTurn("parent done"),
    ]);
    await agent.run("go");
    expect(model.requests.map((_request, index) => toolNames(model, index))).toEqual([
      PARENT_TOOLS,
      PARENT_TOOLS,
      CHILD_TOOLS,
      CHILD_TOOLS,
      PARENT_TOOLS,
    ]);
    model.assertExhausted();
  });

  it("task's description and JSON Schema are exact, and no tool in any request carries its effect", async () => {
    const { agent, model } = p06([
      toolTurn(call("task-1", "task", { description: "answer" })),
      textTurn("child done"),
      textTurn("parent done"),
    ]);
    await agent.run("go");
    const task = model.requests[0]?.tools.find((tool) => tool.function.name === "task");
    expect(task?.function.description).toBe(TASK_DESCRIPTION);
    expect(JSON.stringify(task?.function.parameters)).toBe(TASK_PARAMETERS);
    for (const request of model.requests) {
      for (const tool of request.tools) {
        expect(Object.keys(tool)).toEqual(["type", "function"]);
        expect(Object.keys(tool.function)).toEqual(["name", "description", "parameters"]);
      }
    }
  });

  it("buildAgent(P05) on this snapshot offers no task", async () => {
    const model = new ScriptedModel([textTurn("done")]);
    const agent = buildAgent(P05, {
      model,
      workspace,
      commandRunner: shell,
      approvalProvider: new RecordingApproval(),
      auditSink: new RecordingAudit(),
    });
    await agent.run("go");
    expect(toolNames(model, 0)).toEqual(CHILD_TOOLS);
  });
});

// ——— The CLI: runProfile(P06) in this process, a loopback provider for the real openai SDK, replays, the demo. ———

const provider = scriptedProvider;
const envFor = loopbackEnv;
const keyless = keylessEnv;

/**
 * `npm run ch06 -- …` in this process (the entry's runProfile(P06, argv)), in the workspace. With `answers`, stdin
 * is a terminal on which each answer is typed once its question has appeared; without, there is no terminal.
 */
const ch06 = (argv: readonly string[], env: CliIO["env"], answers?: readonly string[]): Promise<CliRun> =>
  runProfileInProcess(P06, argv, env, workspace, answers);

/** `npm run agent-tutorial -- …` in this process, with no terminal, in the workspace. */
const unified = (argv: readonly string[], env: CliIO["env"]): Promise<CliRun> =>
  runCliWithoutTerminal(argv, env, workspace);

const isHookOrAudit = (line: string): boolean => /^\[(Hook|Permission)\]/.test(line);
const hookOrAudit = (text: string): string[] => text.split("\n").filter(isHookOrAudit);

interface WireTranscript {
  readonly chapter: number;
  readonly messages: { role: string; content: string | null; tool_calls?: unknown[]; tool_call_id?: string }[];
  readonly replies?: {
    agent: string;
    role: string;
    content: string | null;
    tool_calls?: { function: { name: string } }[];
  }[];
}
const readWire = async (path: string): Promise<WireTranscript> =>
  JSON.parse(await readFile(path, "utf8")) as WireTranscript;

/** A reply as the transcript writes it: the assistant message in Chat Completions form. */
const wireTurn = (content: string | null, calls: { id: string; name: string; args: unknown }[] = []): unknown => ({
  role: "assistant",
  content,
  ...(calls.length === 0
    ? {}
    : {
        tool_calls: calls.map(({ id, name, args }) => ({
          id,
          type: "function",
          function: { name, arguments: JSON.stringify(args) },
        })),
      }),
});

describe("rule 4: a clean parent history", () => {
  it("--transcript's messages are the parent's four: none of the child's calls or results", async () => {
    const server = await provider([
      wireCall("parent-task", "task", { description: " read README.md " }),
      wireCall("child-read", "read_file", { path: "README.md" }),
      wireText("README.md says # Demo"),
      wireText("parent final"),
    ]);
    const transcript = join(root, "run.json");
    const run = await ch06(["--prompt", "delegate the read", "--transcript", transcript, "--quiet"], envFor(server));
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("parent final\n");
    expect(server.requests).toHaveLength(4);
    // On the wire, through the real SDK: the child's first request is its own prompt and the trimmed task only,
    // and the parent's next request carries the child's conclusion but none of its calls.
    const wire = server.requests as { messages: { role: string; content: unknown }[] }[];
    expect(wire[1]?.messages).toEqual([
      { role: "system", content: DEFAULT_SUBAGENT_SYSTEM_PROMPT },
      { role: "user", content: "read README.md" },
    ]);
    expect(wire[3]?.messages.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(JSON.stringify(wire[3]?.messages)).not.toContain("child-read");
    const recorded = await readWire(transcript);
    expect(recorded.messages).toEqual([
      { role: "user", content: "delegate the read" },
      wireTurn(null, [{ id: "parent-task", name: "task", args: { description: " read README.md " } }]),
      { role: "tool", tool_call_id: "parent-task", content: "README.md says # Demo" },
      wireTurn("parent final"),
    ]);
    expect(JSON.stringify(recorded.messages)).not.toContain("child-read");
  });
});

describe("rule 14: a child's write asks like the parent's", () => {
  it("a child write_file inside the workspace reaches the same approver once, with chapter 3's reason", async () => {
    const { agent, model, approval, audit } = p06([
      toolTurn(call("task-1", "task", { description: "write a.txt" })),
      toolTurn(call("child-write", "write_file", { path: "a.txt", content: "A" })),
      textTurn("wrote a.txt"),
      textTurn("done"),
    ]);
    const result = await agent.run("go");
    expect(approval.requests.map((r) => [r.toolName, r.proposedDecision?.reason, r.prepared.arguments])).toEqual([
      ["write_file", ASK_WRITE, { path: "a.txt", content: "A" }],
    ]);
    expect(approval.requests[0]?.context).toEqual({ workspace, identity: "user" });
    expect(audit.records.map((r) => [r.tool, r.decision])).toEqual([
      ["task", new PermissionDecision("allow", "No permission rule blocked the request", "default")],
      ["write_file", new PermissionDecision("allow", "Approved in the test", "user")],
    ]);
    expect(await readFile(join(workspace, "a.txt"), "utf8")).toBe("A");
    validateToolPairing(result.history);
    model.assertExhausted();
  });

  it("a parent's write and a child's write give approval requests and audit records that differ only in the call", async () => {
    const { agent, model, approval, audit } = p06([
      toolTurn(call("parent-write", "write_file", { path: "same.txt", content: "S" })),
      toolTurn(call("task-1", "task", { description: "write same.txt" })),
      toolTurn(call("child-write", "write_file", { path: "same.txt", content: "S" })),
      textTurn("wrote same.txt"),
      textTurn("done"),
    ]);
    await agent.run("go");
    const [parent, child] = approval.requests;
    const face = (request: PermissionRequest | undefined): unknown => ({
      toolName: request?.toolName,
      context: request?.context,
      recommendations: request?.recommendations,
      proposedDecision: request?.proposedDecision,
      arguments: request?.prepared.arguments,
      // Each registry has its own handler functions: what the definition says is the same.
      definition: {
        name: request?.prepared.definition.name,
        description: request?.prepared.definition.description,
        effect: request?.prepared.definition.effect,
        parameters: request?.prepared.definition.parameters,
      },
    });
    expect(approval.requests).toHaveLength(2);
    expect(face(child)).toEqual(face(parent));
    expect(child?.context).toEqual({ workspace, identity: "user" });
    const writes = audit.records.filter((r) => r.tool === "write_file");
    expect(writes.map((r) => r.decision)).toEqual([
      new PermissionDecision("allow", "Approved in the test", "user"),
      new PermissionDecision("allow", "Approved in the test", "user"),
    ]);
    expect(face(writes[1]?.request)).toEqual(face(writes[0]?.request));
    expect(writes[1]?.request.context).toStrictEqual(writes[0]?.request.context);
    expect(model.requests[2]?.messages).toEqual([
      { role: "system", content: DEFAULT_SUBAGENT_SYSTEM_PROMPT },
      { role: "user", content: "write same.txt" },
    ]);
  });
});

const BOOK_STEP_2 = [
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: task",
  "[Permission] task: allow (default) - No permission rule blocked the request",
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: read_file",
  "[Permission] read_file: allow (default) - No permission rule blocked the request",
  "[Hook] PostToolUse: read_file -> ok",
  "[Hook] PreToolUse: glob",
  "[Permission] glob: allow (default) - No permission rule blocked the request",
  "[Hook] PostToolUse: glob -> ok",
  "[Hook] Stop",
  "[Hook] PostToolUse: task -> ok",
  "[Hook] Stop",
];

const STEP_2_SCRIPT = (): LoopbackReply[] => [
  wireCall("parent-task", "task", { description: "检查本项目使用的测试框架" }),
  wireCall("child-read", "read_file", { path: "README.md" }),
  wireCall("child-glob", "glob", { pattern: "*.md" }),
  wireText("只有 README.md，没有测试框架的文件证据。"),
  wireText("没有找到测试框架。"),
];
const STEP_2_PROMPT = "调用 task 独立检查本项目使用的测试框架，只返回有文件证据的结论";

describe("rule 15: the book's step 2 on stderr", () => {
  it("with --quiet, the book's 13 lines are the whole of stderr", async () => {
    const server = await provider(STEP_2_SCRIPT());
    const run = await ch06(["--prompt", STEP_2_PROMPT, "--quiet"], envFor(server));
    expect(run).toEqual({ code: 0, stdout: "没有找到测试框架。\n", stderr: `${BOOK_STEP_2.join("\n")}\n` });
    expect(server.requests).toHaveLength(5);
  });

  it("without --quiet, the same 13 lines in order, and only the child's progress rows start with 子 Agent", async () => {
    const server = await provider(STEP_2_SCRIPT());
    const run = await ch06(["--prompt", STEP_2_PROMPT], envFor(server));
    expect(run.code).toBe(0);
    expect(hookOrAudit(run.stderr)).toEqual(BOOK_STEP_2);
    // Each progress row comes right before the hook lines of the call it announces, the result right after them.
    expect(run.stderr.split("\n")).toEqual([
      BOOK_STEP_2[0],
      '→ task {"description":"检查本项目使用的测试框架"}',
      ...BOOK_STEP_2.slice(1, 4),
      '子 Agent → read_file {"path":"README.md"}',
      ...BOOK_STEP_2.slice(4, 7),
      "子 Agent   ✓ ok  # Demo",
      '子 Agent → glob {"pattern":"*.md"}',
      ...BOOK_STEP_2.slice(7, 10),
      "子 Agent   ✓ ok  README.md",
      ...BOOK_STEP_2.slice(10, 12),
      "  ✓ ok  只有 README.md，没有测试框架的文件证据。",
      BOOK_STEP_2[12],
      "",
    ]);
    const progress = run.stderr.split("\n").filter((line) => line !== "" && !isHookOrAudit(line));
    expect(progress.filter((line) => line.startsWith("子 Agent "))).toHaveLength(4);
    expect(progress.filter((line) => !line.startsWith("子 Agent "))).toEqual([
      '→ task {"description":"检查本项目使用的测试框架"}',
      "  ✓ ok  只有 README.md，没有测试框架的文件证据。",
    ]);
  });
});

describe("C16: a child that fails is said on stderr, never to the model", () => {
  const failingChild = (): LoopbackReply[] => [
    wireCall("parent-task", "task", { description: "read README.md" }),
    { json: apiError("child provider broke at /secret/path"), status: 400 },
    wireText("the child failed"),
  ];

  // The person reads the provider's words; the model only the stable code.
  const FAILURE_LINE =
    "子 Agent 运行失败: The model provider answered HTTP 400: 400 child provider broke at /secret/path";
  const hookLines = (failure: string, progress: boolean): string[] => [
    "[Hook] UserPromptSubmit",
    ...(progress ? ['→ task {"description":"read README.md"}'] : []),
    "[Hook] PreToolUse: task",
    "[Permission] task: allow (default) - No permission rule blocked the request",
    "[Hook] UserPromptSubmit",
    failure,
    "[Hook] PostToolUse: task -> error",
    ...(progress ? ["  ✗ subagent_execution_error"] : []),
    "[Hook] Stop",
    "",
  ];

  it.each([[[]], [["--quiet"]]])(
    "%j: one 子 Agent 运行失败 line, the model reads only subagent_execution_error, exit 0",
    async (extra) => {
      const server = await provider(failingChild());
      const run = await ch06(["--prompt", "delegate", ...extra], envFor(server));
      expect(run.code).toBe(0);
      expect(run.stdout).toBe("the child failed\n");
      expect(run.stderr.split("\n")).toEqual(hookLines(FAILURE_LINE, extra.length === 0));
      expect(run.stderr.split("\n").filter((line) => line.startsWith("子 Agent 运行失败: "))).toHaveLength(1);
      expect(server.requests).toHaveLength(3);
      const parentNext = (server.requests[2] as { messages: unknown[] }).messages;
      expect(parentNext.at(-1)).toEqual({ role: "tool", tool_call_id: "parent-task", content: CHILD_FAILED });
      expect(JSON.stringify(parentNext)).not.toContain("/secret/path");
    },
  );
});

describe("rule 18: the profile and the composition root", () => {
  it("P06 is P05 plus subagent, frozen, and profileForChapter(6) is P06", () => {
    expect(Object.isFrozen(P06)).toBe(true);
    expect(P06.chapter).toBe(6);
    expect([...P06.capabilities]).toEqual([...P05.capabilities, "subagent"]);
    expect([...P06.capabilities]).toEqual([
      "loop",
      "powershell",
      "tool_registry",
      "files",
      "policy",
      "hooks",
      "todo",
      "subagent",
    ]);
    expect(P05.capabilities.has("subagent")).toBe(false);
    expect(profileForChapter(6)).toBe(P06);
  });

  it("buildAgent(P06) without an approver throws chapter 3's message, not the subagent one, and asks no model", () => {
    const model = new ScriptedModel([]);
    expect(() => buildAgent(P06, { model, workspace, commandRunner: shell, auditSink: new RecordingAudit() })).toThrow(
      new Error("approvalProvider is required for chapter 3 or later"),
    );
    expect(() =>
      buildAgent(P06, {
        model,
        workspace,
        commandRunner: shell,
        auditSink: new RecordingAudit(),
        hooks: new HookRegistry(),
      }),
    ).toThrow(new Error("approvalProvider is required for chapter 3 or later"));
    expect(model.requests).toEqual([]);
  });
});

describe("rule 20: the entries", () => {
  it("src/chapters/ch06.ts runs runProfile(P06, …), whose help names npm run ch06", async () => {
    const source = readFileSync(new URL("../src/chapters/ch06.ts", import.meta.url), "utf8");
    expect(source).toContain("process.exitCode = await runProfile(P06, process.argv.slice(2));");
    const help = await ch06(["--help"], {});
    expect(help.code).toBe(0);
    expect(help.stdout.split("\n")[0]).toBe("用法: npm run ch06 -- --prompt <text> [选项]");
  });

  it("the unified entry knows chapters 1 to 9: --chapter 10 exits 1 and names them", async () => {
    expect(await unified(["run", "--chapter", "10", "--prompt", "x"], {})).toEqual({
      code: 1,
      stdout: "",
      stderr:
        "运行失败: Chapter 10 has not been migrated to this snapshot; it knows chapters 1, 2, 3, 4, 5, 6, 7, 8, 9\n",
    });
    const help = await unified(["--help"], {});
    expect(help.stdout.split("\n")[0]).toBe(
      "用法: npm run agent-tutorial -- run --chapter <1|2|3|4|5|6|7|8|9> --prompt <text> [选项]",
    );
  });

  it("--chapter 5 on this snapshot offers no task, --chapter 6 does", async () => {
    const [five, six] = [await provider([]), await provider([])];
    expect((await unified(["run", "--chapter", "5", "--prompt", "x"], envFor(five))).code).toBe(0);
    expect((await unified(["run", "--chapter", "6", "--prompt", "x"], envFor(six))).code).toBe(0);
    const offered = (server: LoopbackOpenAI): string[] =>
      (server.requests[0] as { tools: { function: { name: string } }[] }).tools.map((tool) => tool.function.name);
    expect(offered(five)).toEqual(CHILD_TOOLS);
    expect(offered(six)).toEqual(PARENT_TOOLS);
  });
});

describe("rule 21: --transcript records every reply when a child ran, and --replay reproduces the run", () => {
  const WRITE_ARGS = { path: "child.txt", content: "child evidence" };
  const script = (): LoopbackReply[] => [
    wireCall("parent-task", "task", { description: "write child.txt" }),
    wireCall("child-write", "write_file", WRITE_ARGS),
    wireText("child.txt written"),
    wireText("parent final"),
  ];

  it("a loopback run that used task writes replies, parent and child in call order; its replay gives the same history and file", async () => {
    const server = await provider(script());
    const first = join(root, "first.json");
    const live = await ch06(["--prompt", "delegate the write", "--transcript", first, "--quiet"], envFor(server), [
      "y\n",
    ]);
    expect(live.code).toBe(0);
    // The book's step 3: task is not asked, the child's write is, in chapter 3's box with no child marker.
    expect(live.stderr).toBe(
      [
        "[Hook] UserPromptSubmit",
        "[Hook] PreToolUse: task",
        "[Permission] task: allow (default) - No permission rule blocked the request",
        "[Hook] UserPromptSubmit",
        "[Hook] PreToolUse: write_file",
        "工具调用需要批准: write_file",
        `原因: ${ASK_WRITE}`,
        `参数: ${JSON.stringify(WRITE_ARGS)}`,
        "允许本次调用? [y/N] [Permission] write_file: allow (terminal-approval) - User approved this tool call",
        "[Hook] PostToolUse: write_file -> ok",
        "[Hook] Stop",
        "[Hook] PostToolUse: task -> ok",
        "[Hook] Stop",
        "",
      ].join("\n"),
    );
    expect(server.requests).toHaveLength(4);
    expect(await readFile(join(workspace, "child.txt"), "utf8")).toBe("child evidence");
    const recorded = await readWire(first);
    // Whose request each reply answered is written down, never inferred when the file is read back.
    expect(recorded.replies).toEqual([
      {
        agent: "parent",
        ...(wireTurn(null, [{ id: "parent-task", name: "task", args: { description: "write child.txt" } }]) as object),
      },
      {
        agent: "subagent",
        ...(wireTurn(null, [{ id: "child-write", name: "write_file", args: WRITE_ARGS }]) as object),
      },
      { agent: "subagent", ...(wireTurn("child.txt written") as object) },
      { agent: "parent", ...(wireTurn("parent final") as object) },
    ]);
    expect(recorded.messages.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);

    await rm(join(workspace, "child.txt"));
    const second = join(root, "second.json");
    const replay = await ch06(["--replay", first, "--transcript", second, "--quiet"], keyless(), ["y\n"]);
    expect(replay.code).toBe(0);
    expect(replay.stdout).toBe(live.stdout);
    expect(replay.stderr).toBe(live.stderr);
    expect(await readFile(join(workspace, "child.txt"), "utf8")).toBe("child evidence");
    const replayed = await readWire(second);
    expect(replayed.messages).toEqual(recorded.messages);
    expect(replayed.replies).toEqual(recorded.replies);
    expect(server.requests).toHaveLength(4);
  });

  it("a run without task writes no replies key", async () => {
    const server = await provider([wireCall("read-1", "read_file", { path: "README.md" }), wireText("done")]);
    const transcript = join(root, "plain.json");
    expect((await ch06(["--prompt", "read", "--transcript", transcript, "--quiet"], envFor(server))).code).toBe(0);
    expect(Object.keys(await readWire(transcript))).toEqual(["chapter", "messages"]);
  });

  it("replies that miss a parent turn are a configuration error, exit 2, and nothing runs", async () => {
    const server = await provider(script());
    const first = join(root, "first.json");
    await ch06(["--prompt", "delegate the write", "--transcript", first, "--quiet"], envFor(server), ["y\n"]);
    await rm(join(workspace, "child.txt"));
    const recorded = await readWire(first);
    const broken = join(root, "broken.json");
    await writeFile(broken, JSON.stringify({ ...recorded, replies: recorded.replies?.slice(0, 3) }), "utf8");
    expect(await ch06(["--replay", broken, "--quiet"], keyless())).toEqual({
      code: 2,
      stdout: "",
      stderr: `配置错误: transcript ${broken} "replies" must hold every assistant turn of "messages", in order\n`,
    });
    expect(readdirSync(workspace)).toEqual(["README.md"]);
  });

  const secretReply = {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "x1", type: "function", function: { name: "read_file", arguments: '{"path":"secret.txt"}' } }],
  };
  const hello = { role: "assistant", content: "hello" };

  it("a parent reply that is not a turn of messages is a configuration error: nothing the history hides answers the run", async () => {
    await writeFile(join(workspace, "secret.txt"), "TOP SECRET", "utf8");
    const forged = join(root, "forged.json");
    const replies = [
      { agent: "parent", ...secretReply },
      { agent: "parent", ...hello },
    ];
    await writeFile(
      forged,
      JSON.stringify({ chapter: 6, messages: [{ role: "user", content: "Say hello" }, hello], replies }),
    );
    expect(await ch06(["--replay", forged, "--quiet"], keyless())).toEqual({
      code: 2,
      stdout: "",
      stderr: `配置错误: transcript ${forged} "replies" must hold every assistant turn of "messages", in order\n`,
    });
  });

  it("a subagent reply answers only a subagent's request: with no task in the history it never runs", async () => {
    await writeFile(join(workspace, "secret.txt"), "TOP SECRET", "utf8");
    const forged = join(root, "forged.json");
    const replies = [
      { agent: "subagent", ...secretReply },
      { agent: "parent", ...hello },
    ];
    await writeFile(
      forged,
      JSON.stringify({ chapter: 6, messages: [{ role: "user", content: "Say hello" }, hello], replies }),
    );
    const second = join(root, "second.json");
    const run = await ch06(["--replay", forged, "--transcript", second], keyless());
    expect(run).toEqual({ code: 0, stdout: "hello\n", stderr: "[Hook] UserPromptSubmit\n[Hook] Stop\n" });
    expect(JSON.stringify(await readWire(second))).not.toContain("TOP SECRET");
  });

  it("a recording with task but no replies gives the child no parent turn: the child fails, the parent goes on", async () => {
    const transcript = join(root, "no-replies.json");
    const messages = [
      { role: "user", content: "delegate" },
      wireTurn(null, [{ id: "t1", name: "task", args: { description: "read README.md" } }]),
      { role: "tool", tool_call_id: "t1", content: "ignored" },
      wireTurn("parent final"),
    ];
    await writeFile(transcript, JSON.stringify({ chapter: 6, messages }));
    const second = join(root, "second.json");
    const run = await ch06(["--replay", transcript, "--transcript", second, "--quiet"], keyless());
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("parent final\n");
    expect(run.stderr).toContain("子 Agent 运行失败: The replay has no subagent reply 1; it recorded 0\n");
    expect((await readWire(second)).messages[2]).toEqual({
      role: "tool",
      tool_call_id: "t1",
      content: "Error [subagent_execution_error]: Subagent execution failed",
    });
  });

  it('a provider that says "stop" beside tool calls is recorded so that the file replays', async () => {
    const server = await provider([
      {
        json: completion({
          toolCalls: [{ id: "parent-task", name: "task", arguments: '{"description":"say hi"}' }],
          finishReason: "stop",
        }),
      },
      wireText("hi from the child"),
      wireText("parent final"),
    ]);
    const first = join(root, "first.json");
    expect((await ch06(["--prompt", "delegate", "--transcript", first, "--quiet"], envFor(server))).code).toBe(0);
    const recorded = await readWire(first);
    expect(JSON.stringify(recorded.replies)).not.toContain("finish_reason");
    const second = join(root, "second.json");
    const replay = await ch06(["--replay", first, "--transcript", second, "--quiet"], keyless());
    expect(replay.code).toBe(0);
    expect((await readWire(second)).messages).toEqual(recorded.messages);
  });
});

// ——— Rule 23: `npm run demo`, chapter 6's no-key walkthrough. ———

const DEMO_LINES = [
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: task",
  "[Permission] task: allow (default) - No permission rule blocked the request",
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: read_file",
  "[Permission] read_file: allow (default) - No permission rule blocked the request",
  "[Hook] PostToolUse: read_file -> ok",
  "[Hook] PreToolUse: write_file",
  "无交互输入，默认拒绝。",
  "[Permission] write_file: deny (terminal-approval) - No interactive approval input was available",
  "[Hook] PreToolUse: write_file",
  "[Permission] write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden",
  "[Hook] Stop",
  "[Hook] PostToolUse: task -> ok",
  "[Hook] PreToolUse: read_file",
  "[Permission] read_file: allow (default) - No permission rule blocked the request",
  "[Hook] PostToolUse: read_file -> error",
  "[Hook] Stop",
];

describe("rule 23: the chapter 6 demo", () => {
  it.each([[[]], [["--quiet"]]])(
    "with no terminal (%j): the 18 lines in order, stdout begins 演示结束。, only README.md on disk",
    async (extra) => {
      const run = await ch06(["--demo", ...extra], keyless());
      const demoWorkspace = announcedWorkspace(run.stderr);
      expect(run.code).toBe(0);
      const lines = run.stderr.split("\n").filter((line) => isHookOrAudit(line) || line === "无交互输入，默认拒绝。");
      expect(lines).toEqual(DEMO_LINES);
      expect(run.stdout.startsWith("演示结束。")).toBe(true);
      expect(readdirSync(demoWorkspace)).toEqual(["README.md"]);
      expect(readdirSync(dirname(demoWorkspace))).toEqual(["workspace"]);
    },
  );

  it("--demo --transcript: a parent history of 6 messages, and all 8 replies", async () => {
    const transcript = join(root, "demo.json");
    const run = await ch06(["--demo", "--transcript", transcript], keyless());
    announcedWorkspace(run.stderr);
    expect(run.code).toBe(0);
    const recorded = await readWire(transcript);
    expect(recorded.messages.map((message) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "tool",
      "assistant",
    ]);
    const walkthrough = JSON.parse(
      readFileSync(new URL("../demo/ch06.json", import.meta.url), "utf8"),
    ) as WireTranscript;
    const childConclusion = walkthrough.replies?.[5]?.content;
    expect(recorded.messages[2]).toEqual({ role: "tool", tool_call_id: "call_demo_1", content: childConclusion });
    expect(recorded.replies).toHaveLength(8);
    expect(recorded.replies).toEqual(walkthrough.replies);
    expect(recorded.replies?.map((reply) => reply.agent)).toEqual([
      "parent",
      ...Array<string>(5).fill("subagent"),
      "parent",
      "parent",
    ]);
  });
});
