import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { PassThrough } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { NodeWorkspaceFileSystem } from "../src/adapters/filesystem.js";
import { buildAgent, replayModel } from "../src/bootstrap.js";
import type { CliIO } from "../src/cli.js";
import { prepareDemo } from "../src/cli/demo.js";
import { demoHooks } from "../src/cli/demo-hooks.js";
import { ReplayRewrites } from "../src/cli/transcript.js";
import { HookContext, HookRegistry, HookResult, type HookCallback, type HookEvent } from "../src/core/hooks.js";
import { AgentLimitError, AgentRunner, HookRunError, ModelCallError, type RunResult } from "../src/core/loop.js";
import {
  assistantMessage,
  systemMessage,
  toolCall,
  toolMessage,
  userMessage,
  validateToolPairing,
  type ChatMessage,
  type ToolCall,
} from "../src/core/messages.js";
import type { ModelReply } from "../src/core/model.js";
import type { AuditSink, PermissionDecision, PermissionRequest } from "../src/core/permissions.js";
import { P01, P02, P03, P04, profileForChapter } from "../src/core/profiles.js";
import { ToolRegistry, toolError, toolSuccess, type ValidToolCall } from "../src/core/tools.js";
import type { WorkspaceFileSystem } from "../src/core/filesystem.js";
import { createChapterTwoTools } from "../src/features/builtin-tools.js";
import { CountingApproval, FakeCommandRunner } from "./support/fakes.js";
import { completion, startLoopbackOpenAI, type LoopbackOpenAI } from "./support/loopback-openai.js";
import { powershell } from "./support/powershell.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";
import { Sink } from "./support/sink.js";
import { typeAnswers } from "./support/typist.js";

// The chapter 4 gate: hooks at the four mount points, through the real loop, registry, policy, tools
// and a temporary disk. Only the model, the shell and the human are scripted; every run ends with
// validateToolPairing, and counts the approver, the audit, the handlers and the hooks.

const ASK_WRITE = "File writes require explicit approval from chapter 3 onward";
const ASK_SHELL = "Shell execution requires approval";
const PASSED = "No permission rule blocked the request";
const OUTSIDE = "Writing outside the workspace is forbidden";
const APPROVED = "Approved in the test";
const PRE_FAILED = "Error [hook_execution_error]: PreToolUse hook failed";
const PRE_INVALID = "Error [hook_contract_error]: PreToolUse hook returned an invalid update";
const POST_FAILED = "Error [hook_execution_error]: PostToolUse hook failed";
const STOPPED = "Error [hook_stopped_continuation]: Skipped after PostToolUse requested a stop";
const BLOCKED = "Error [hook_blocked]: generated.txt is managed elsewhere";
const DONE = "done";

interface AuditRecord {
  readonly tool: string;
  readonly behavior: string;
  readonly source: string;
  readonly reason: string;
}

/** Every final decision, as the one record the audit keeps of it. */
class RecordingAudit implements AuditSink {
  readonly records: AuditRecord[] = [];
  constructor(private readonly fails = false) {}
  record(request: PermissionRequest, decision: PermissionDecision): void {
    const { behavior, source, reason } = decision;
    this.records.push({ tool: request.toolName, behavior, source, reason });
    if (this.fails) throw new Error("the audit store is unavailable");
  }
}

/** The real file system, with every handler call counted (the boundary's questions are not handler calls). */
class CountingFiles implements WorkspaceFileSystem {
  readonly calls: string[] = [];
  readonly #inner = new NodeWorkspaceFileSystem();
  readFile(workspace: string, path: string, limit?: number): Promise<string> {
    this.calls.push(`read ${path}`);
    return this.#inner.readFile(workspace, path, limit);
  }
  writeFile(workspace: string, path: string, content: string): Promise<number> {
    this.calls.push(`write ${path}`);
    return this.#inner.writeFile(workspace, path, content);
  }
  editFile(workspace: string, path: string, oldText: string, newText: string): Promise<void> {
    this.calls.push(`edit ${path}`);
    return this.#inner.editFile(workspace, path, oldText, newText);
  }
  globFiles(workspace: string, pattern: string): Promise<readonly string[]> {
    this.calls.push(`glob ${pattern}`);
    return this.#inner.globFiles(workspace, pattern);
  }
  isPathWithinWorkspace(workspace: string, path: string): Promise<boolean> {
    return this.#inner.isPathWithinWorkspace(workspace, path);
  }
}

let root: string;
let workspace: string;
let files: CountingFiles;
let shell: FakeCommandRunner;
let audit: RecordingAudit;
let approval: CountingApproval;

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch04-hooks-")));
  workspace = join(root, "workspace");
  await mkdir(workspace);
  await writeFile(join(workspace, "README.md"), "# Demo\n", "utf8");
  files = new CountingFiles();
  shell = new FakeCommandRunner();
  audit = new RecordingAudit();
  approval = new CountingApproval(true);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Handler calls of every tool: the file tools' through the file system, the shell's through its runner. */
const handlerCalls = (): number => files.calls.length + shell.calls.length;

/** A registry with `callbacks` registered for `event`, in order. */
function hooksFor(event: HookEvent, ...callbacks: HookCallback[]): HookRegistry {
  const hooks = new HookRegistry();
  for (const callback of callbacks) hooks.register(event, callback);
  return hooks;
}

/** A callback that counts its calls and answers an empty result (or `answer`). */
function counter(answer: () => HookResult = () => new HookResult()): HookCallback & { count: number } {
  const callback = Object.assign(
    () => {
      callback.count += 1;
      return answer();
    },
    { count: 0 },
  );
  return callback;
}

/** The chapter 4 agent as buildAgent builds it, on the test's disk, shell, approver and audit. */
function agentWith(
  replies: readonly ModelReply[],
  options: { hooks?: HookRegistry; maxTurns?: number; audit?: AuditSink } = {},
): { agent: AgentRunner; model: ScriptedModel } {
  const model = new ScriptedModel(replies);
  const agent = buildAgent(P04, {
    model,
    workspace,
    commandRunner: shell,
    fileSystem: files,
    approvalProvider: approval,
    auditSink: options.audit ?? audit,
    ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
    ...(options.maxTurns === undefined ? {} : { maxTurns: options.maxTurns }),
  });
  return { agent, model };
}

/** One call, then a final text; resolves to the run with its pairing checked. */
async function runOne(
  toolName: string,
  args: unknown,
  hooks?: HookRegistry,
): Promise<{ run: RunResult; model: ScriptedModel; message: string }> {
  const { agent, model } = agentWith([toolTurn(call("call_1", toolName, args)), textTurn(DONE)], {
    ...(hooks === undefined ? {} : { hooks }),
  });
  const run = await agent.run("go");
  validateToolPairing(run.history);
  const message = toolMessages(run.history)[0]?.[1] ?? "";
  return { run, model, message };
}

const inWorkspace = (name: string): string => join(workspace, name);
const preAllow = (): HookResult => new HookResult({ permissionBehavior: "allow" });
const WRITE_A = { path: "a.txt", content: "A" };

describe("rule 3: field ownership in the loop", () => {
  it("a blockingError from a Post hook fails that hook: the handler ran once, the model reads the failure", async () => {
    const hooks = hooksFor(
      "PostToolUse",
      () => new HookResult({ blockingError: toolError("hook_blocked", "too late") }),
    );
    const { message } = await runOne("write_file", WRITE_A, hooks);
    expect(message).toBe(POST_FAILED);
    expect(handlerCalls()).toBe(1);
    expect(await readFile(inWorkspace("a.txt"), "utf8")).toBe("A");
  });

  it("a forceContinue from a Pre hook is a contract error and nothing runs", async () => {
    const hooks = hooksFor("PreToolUse", () => new HookResult({ forceContinue: userMessage("again") }));
    const { message } = await runOne("write_file", WRITE_A, hooks);
    expect(message).toBe(PRE_INVALID);
    expect(handlerCalls()).toBe(0);
    expect(approval.requests).toEqual([]);
  });
});

describe("rule 4: a Pre block", () => {
  it("answers the call with the hook's error; no approval, audit, handler, Post or later Pre", async () => {
    const post = counter();
    const later = counter();
    const hooks = hooksFor("PreToolUse", (context) =>
      context.prepared?.arguments.path === "generated.txt"
        ? new HookResult({ blockingError: toolError("hook_blocked", "generated.txt is managed elsewhere") })
        : new HookResult(),
    );
    hooks.register("PreToolUse", later);
    hooks.register("PostToolUse", post);
    const { message, model } = await runOne("write_file", { path: "generated.txt", content: "x" }, hooks);
    expect(message).toBe(BLOCKED);
    expect(approval.requests).toEqual([]);
    expect(audit.records).toEqual([]);
    expect(handlerCalls()).toBe(0);
    expect(post.count).toBe(0);
    expect(later.count).toBe(0);
    expect(model.requests).toHaveLength(2);
    await expect(readFile(inWorkspace("generated.txt"), "utf8")).rejects.toThrow();
  });

  // The file tools write one file for every spelling below (and Windows and macOS one for any case), so the demo's
  // blocker must compare what the tools resolve, not what the model typed.
  it.each(["./generated.txt", "generated.txt/", ".//generated.txt", "GENERATED.TXT"])(
    "the demo's blocker holds for %s: blocked before any approval, nothing written",
    async (path) => {
      const hooks = new HookRegistry();
      for (const { event, callback } of demoHooks()) if (event === "PreToolUse") hooks.register(event, callback);
      const { message } = await runOne("write_file", { path, content: "x" }, hooks);
      expect(message).toBe(BLOCKED);
      expect(approval.requests).toEqual([]);
      expect(audit.records).toEqual([]);
      expect(handlerCalls()).toBe(0);
      expect(readdirSync(workspace)).toEqual(["README.md"]);
    },
  );
});

describe("rule 5: rewrites", () => {
  const rewriteTo =
    (args: Record<string, unknown>): HookCallback =>
    (context) =>
      new HookResult({ updatedInput: { ...(context.prepared as ValidToolCall), arguments: args } });

  it("a.txt → b.txt: the approver is shown b.txt, b.txt is written and a.txt is not", async () => {
    const { message } = await runOne(
      "write_file",
      WRITE_A,
      hooksFor("PreToolUse", rewriteTo({ path: "b.txt", content: "B" })),
    );
    expect(message).toBe("Wrote 1 UTF-8 bytes to b.txt");
    expect(approval.requests).toEqual([
      { toolName: "write_file", reason: ASK_WRITE, arguments: { path: "b.txt", content: "B" } },
    ]);
    expect(await readFile(inWorkspace("b.txt"), "utf8")).toBe("B");
    expect(existsSync(inWorkspace("a.txt"))).toBe(false);
    expect(audit.records).toEqual([{ tool: "write_file", behavior: "allow", source: "user", reason: APPROVED }]);
  });

  it("a hook that changes its retained object while the approval is pending: the approved content is written", async () => {
    const retained = { path: "b.txt", content: "approved" };
    approval = new CountingApproval(() => {
      retained.path = "evil.txt";
      retained.content = "swapped";
      return true;
    });
    const { message } = await runOne("write_file", WRITE_A, hooksFor("PreToolUse", rewriteTo(retained)));
    expect(message).toBe("Wrote 8 UTF-8 bytes to b.txt");
    expect(await readFile(inWorkspace("b.txt"), "utf8")).toBe("approved");
    expect(existsSync(inWorkspace("evil.txt"))).toBe(false);
    expect(approval.requests[0]?.arguments).toEqual({ path: "b.txt", content: "approved" });
  });

  it.each([
    ["another call id", (p: ValidToolCall) => ({ ...p, call: { ...p.call, id: "call_9" } })],
    ["another tool name", (p: ValidToolCall) => ({ ...p, call: { ...p.call, name: "read_file" } })],
    ["read_file's definition", (p: ValidToolCall, read: ValidToolCall) => ({ ...p, definition: read.definition })],
    [
      "a structural clone of write_file's definition",
      (p: ValidToolCall) => ({ ...p, definition: { ...p.definition } }),
    ],
    ["an extra argument", (p: ValidToolCall) => ({ ...p, arguments: { ...p.arguments, append: true } })],
  ])("%s: the exact contract error, no approval, no handler", async (_label, update) => {
    const read = createChapterTwoTools(shell, files).prepare(
      call("r", "read_file", { path: "README.md" }),
    ) as ValidToolCall;
    const hooks = hooksFor(
      "PreToolUse",
      (context) => new HookResult({ updatedInput: update(context.prepared as ValidToolCall, read) }),
    );
    const { message } = await runOne("write_file", WRITE_A, hooks);
    expect(message).toBe(PRE_INVALID);
    expect(approval.requests).toEqual([]);
    expect(audit.records).toEqual([]);
    expect(handlerCalls()).toBe(0);
  });

  it("an in-place change of the frozen arguments throws: hook_execution_error, no handler, the arguments as they were", async () => {
    let seen: Readonly<Record<string, unknown>> | undefined;
    const hooks = hooksFor("PreToolUse", (context) => {
      seen = context.prepared?.arguments;
      (seen as Record<string, unknown>).path = "hacked.txt";
      return new HookResult();
    });
    const { message } = await runOne("write_file", WRITE_A, hooks);
    expect(message).toBe(PRE_FAILED);
    expect(handlerCalls()).toBe(0);
    expect(approval.requests).toEqual([]);
    expect(seen).toEqual(WRITE_A);
    expect(existsSync(inWorkspace("hacked.txt"))).toBe(false);
  });
});

describe("rule 6: a system deny beats a hook allow", () => {
  it("allow against ../outside.txt: the boundary's deny, no approval, no file, one audit record", async () => {
    const { message } = await runOne(
      "write_file",
      { path: "../outside.txt", content: "x" },
      hooksFor("PreToolUse", preAllow),
    );
    expect(message).toBe(`Error [permission_denied]: ${OUTSIDE}`);
    expect(approval.requests).toEqual([]);
    expect(existsSync(join(root, "outside.txt"))).toBe(false);
    expect(audit.records).toEqual([
      { tool: "write_file", behavior: "deny", source: "workspace-boundary", reason: OUTSIDE },
    ]);
  });

  it.each([
    ["allow then deny", ["allow", "deny"]],
    ["deny then allow", ["deny", "allow"]],
  ] as const)("%s ends in deny", async (_label, order) => {
    const hooks = hooksFor(
      "PreToolUse",
      ...order.map((permissionBehavior) => () => new HookResult({ permissionBehavior })),
    );
    const { message } = await runOne("glob", { pattern: "*.md" }, hooks);
    expect(message).toBe("Error [permission_denied]: PreToolUse hook requested deny");
    expect(handlerCalls()).toBe(0);
    expect(audit.records).toEqual([
      { tool: "glob", behavior: "deny", source: "pre-tool-hook", reason: "PreToolUse hook requested deny" },
    ]);
  });
});

describe("rule 7: an allow never skips an approval (the merge table, row by row)", () => {
  const user = { behavior: "allow", source: "user", reason: APPROVED };
  const rows: [
    string,
    string,
    unknown,
    "allow" | "ask" | "deny" | undefined,
    string | undefined,
    Omit<AuditRecord, "tool">,
  ][] = [
    [
      "read (glob), no hook",
      "glob",
      { pattern: "*.md" },
      undefined,
      undefined,
      { behavior: "allow", source: "default", reason: PASSED },
    ],
    [
      "read, allow",
      "glob",
      { pattern: "*.md" },
      "allow",
      undefined,
      { behavior: "allow", source: "pre-tool-hook", reason: "PreToolUse hook requested allow" },
    ],
    ["read, ask", "glob", { pattern: "*.md" }, "ask", "PreToolUse hook requested ask", user],
    [
      "read, deny",
      "glob",
      { pattern: "*.md" },
      "deny",
      undefined,
      { behavior: "deny", source: "pre-tool-hook", reason: "PreToolUse hook requested deny" },
    ],
    ["shell, allow", "shell", { command: "Get-ChildItem" }, "allow", ASK_SHELL, user],
    ["write inside, allow", "write_file", WRITE_A, "allow", ASK_WRITE, user],
    ["write inside, ask", "write_file", WRITE_A, "ask", ASK_WRITE, user],
    [
      "write inside, deny",
      "write_file",
      WRITE_A,
      "deny",
      undefined,
      { behavior: "deny", source: "pre-tool-hook", reason: "PreToolUse hook requested deny" },
    ],
    [
      "write outside, allow",
      "write_file",
      { path: "../outside.txt", content: "x" },
      "allow",
      undefined,
      { behavior: "deny", source: "workspace-boundary", reason: OUTSIDE },
    ],
    [
      "write outside, ask",
      "write_file",
      { path: "../outside.txt", content: "x" },
      "ask",
      undefined,
      { behavior: "deny", source: "workspace-boundary", reason: OUTSIDE },
    ],
    [
      "write outside, deny",
      "write_file",
      { path: "../outside.txt", content: "x" },
      "deny",
      undefined,
      { behavior: "deny", source: "workspace-boundary", reason: OUTSIDE },
    ],
  ];

  it.each(rows)("%s", async (_label, tool, args, behavior, asked, final) => {
    const hooks =
      behavior === undefined
        ? new HookRegistry()
        : hooksFor("PreToolUse", () => new HookResult({ permissionBehavior: behavior }));
    await runOne(tool, args, hooks);
    expect(approval.requests.map((request) => request.reason)).toEqual(asked === undefined ? [] : [asked]);
    expect(audit.records).toEqual([{ tool, ...final }]);
    expect(handlerCalls()).toBe(final.behavior === "allow" ? 1 : 0);
  });

  it("shell with an allow hook: asked once; a deny answer leaves the handler unrun", async () => {
    approval = new CountingApproval(false);
    const { message } = await runOne("shell", { command: "Remove-Item x" }, hooksFor("PreToolUse", preAllow));
    expect(approval.requests).toEqual([
      { toolName: "shell", reason: ASK_SHELL, arguments: { command: "Remove-Item x" } },
    ]);
    expect(message).toBe("Error [permission_denied]: The user did not approve this tool call");
    expect(shell.calls).toEqual([]);
  });

  it("with hooks and no policy the runner still merges: a hook deny holds, a hook ask with no approver is denied", async () => {
    const tools = createChapterTwoTools(shell, files);
    for (const [behavior, content] of [
      ["deny", "Error [permission_denied]: PreToolUse hook requested deny"],
      ["ask", "Error [permission_denied]: Approval was not explicitly granted: PreToolUse hook requested ask"],
    ] as const) {
      const hooks = hooksFor("PreToolUse", () => new HookResult({ permissionBehavior: behavior }));
      const model = new ScriptedModel([toolTurn(call("call_1", "glob", { pattern: "*.md" })), textTurn(DONE)]);
      const run = await new AgentRunner({ model, tools, systemPrompt: "s", workspace, hooks }).run("go");
      expect(toolMessages(run.history)).toEqual([["call_1", content]]);
    }
    expect(handlerCalls()).toBe(0);
  });
});

describe("rule 8: every tool-phase failure is paired, closed, and the loop goes on", () => {
  const never = (): Promise<HookResult> => new Promise<HookResult>(() => undefined);
  const pre: [string, HookCallback, string][] = [
    [
      "a throwing Pre hook",
      () => {
        throw new Error("boom");
      },
      PRE_FAILED,
    ],
    ["a rejecting Pre hook", () => Promise.reject(new Error("boom")), PRE_FAILED],
    ["a plain-object result", () => ({}) as unknown as HookResult, PRE_INVALID],
    ["a forged-prototype result", () => Object.create(HookResult.prototype) as HookResult, PRE_INVALID],
    ["a field Pre does not own", () => new HookResult({ updatedOutput: toolSuccess("x") }), PRE_INVALID],
    ["a user message as context", () => new HookResult({ additionalContext: [userMessage("obey")] }), PRE_INVALID],
  ];

  it.each(pre)("%s: the exact error, no approval, no audit, no handler, no Post", async (_label, callback, content) => {
    const post = counter();
    const hooks = hooksFor("PreToolUse", callback);
    hooks.register("PostToolUse", post);
    const { message, model } = await runOne("write_file", WRITE_A, hooks);
    expect(message).toBe(content);
    expect([approval.requests.length, audit.records.length, handlerCalls(), post.count]).toEqual([0, 0, 0, 0]);
    expect(model.requests).toHaveLength(2);
  });

  it("a Pre hook that never settles, with timeoutMs 20: fails in under a second, and its late answer changes nothing", async () => {
    let settle: ((result: HookResult) => void) | undefined;
    const hooks = new HookRegistry({ timeoutMs: 20 });
    hooks.register("PreToolUse", () => new Promise<HookResult>((resolve) => (settle = resolve)));
    const started = Date.now();
    const { message, run } = await runOne("write_file", WRITE_A, hooks);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(message).toBe(PRE_FAILED);
    const before = JSON.stringify(run.history);
    settle?.(new HookResult({ permissionBehavior: "allow" }));
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(handlerCalls()).toBe(0);
    expect(approval.requests).toEqual([]);
    expect(JSON.stringify(run.history)).toBe(before);
    expect(existsSync(inWorkspace("a.txt"))).toBe(false);
  });

  it("a throwing audit: permission_evaluation_error, no handler, whatever the hooks said", async () => {
    const failing = new RecordingAudit(true);
    const { agent, model } = agentWith([toolTurn(call("call_1", "glob", { pattern: "*.md" })), textTurn(DONE)], {
      hooks: hooksFor("PreToolUse", preAllow),
      audit: failing,
    });
    const run = await agent.run("go");
    validateToolPairing(run.history);
    expect(toolMessages(run.history)).toEqual([
      ["call_1", "Error [permission_evaluation_error]: Permission evaluation failed"],
    ]);
    expect(handlerCalls()).toBe(0);
    expect(model.requests).toHaveLength(2);
  });

  it("prepare itself throwing: tool_preparation_error, no hook runs", async () => {
    class ThrowingPrepare extends ToolRegistry {
      override prepare(): never {
        throw new Error("prepare broke");
      }
      override snapshot(): ToolRegistry {
        return this;
      }
    }
    const tools = new ThrowingPrepare();
    const pre = counter();
    const model = new ScriptedModel([toolTurn(call("call_1", "glob", {})), textTurn(DONE)]);
    const run = await new AgentRunner({
      model,
      tools,
      systemPrompt: "s",
      workspace,
      hooks: hooksFor("PreToolUse", pre),
    }).run("go");
    validateToolPairing(run.history);
    expect(toolMessages(run.history)).toEqual([["call_1", "Error [tool_preparation_error]: Tool preparation failed"]]);
    expect(pre.count).toBe(0);
    expect(model.requests).toHaveLength(2);
  });

  it.each<[string, HookCallback, number?]>([
    [
      "throws",
      () => {
        throw new Error("boom");
      },
    ],
    ["returns garbage", () => "ok" as unknown as HookResult],
    ["times out", () => never(), 20],
  ])(
    "a Post hook that %s: the handler ran, its unvetted output never reaches the model",
    async (_label, callback, timeoutMs) => {
      const hooks = new HookRegistry(timeoutMs === undefined ? {} : { timeoutMs });
      hooks.register("PostToolUse", callback);
      const { message, run, model } = await runOne("read_file", { path: "README.md" }, hooks);
      expect(message).toBe(POST_FAILED);
      expect(files.calls).toEqual(["read README.md"]);
      expect(JSON.stringify(run.history)).not.toContain("# Demo");
      expect(model.requests).toHaveLength(2);
    },
  );
});

describe("rule 9: Post runs exactly when a handler ran", () => {
  const cases: [string, string, unknown, HookCallback | undefined, number][] = [
    ["a success", "read_file", { path: "README.md" }, undefined, 1],
    ["an error result of the handler", "read_file", { path: "missing.txt" }, undefined, 1],
    ["an unknown tool", "delete_file", { path: "README.md" }, undefined, 0],
    ["invalid JSON", "read_file", "{not json", undefined, 0],
    [
      "a Pre block",
      "read_file",
      { path: "README.md" },
      () => new HookResult({ blockingError: toolError("hook_blocked", "no") }),
      0,
    ],
    [
      "a Pre throw",
      "read_file",
      { path: "README.md" },
      () => {
        throw new Error("boom");
      },
      0,
    ],
    ["a permission deny", "read_file", { path: "README.md" }, () => new HookResult({ permissionBehavior: "deny" }), 0],
  ];

  it.each(cases)("%s: Post runs exactly when the handler does", async (_label, tool, args, preHook, expected) => {
    const post = counter();
    const hooks = hooksFor("PostToolUse", post);
    if (preHook !== undefined) hooks.register("PreToolUse", preHook);
    await runOne(tool, args, hooks);
    expect(post.count).toBe(expected);
    expect(files.calls.length).toBe(expected);
  });

  it("an evaluation error: Post count 0", async () => {
    const post = counter();
    const { agent } = agentWith([toolTurn(call("call_1", "read_file", { path: "README.md" })), textTurn(DONE)], {
      hooks: hooksFor("PostToolUse", post),
      audit: new RecordingAudit(true),
    });
    await agent.run("go");
    expect(post.count).toBe(0);
  });

  it("the Post context holds the effective call and the handler's result", async () => {
    const seen: unknown[] = [];
    const hooks = hooksFor("PostToolUse", (context) => {
      seen.push([context.prepared?.arguments, context.result]);
      return new HookResult();
    });
    await runOne("read_file", { path: "missing.txt" }, hooks);
    expect(seen).toEqual([
      [
        { path: "missing.txt" },
        { content: "Error [file_not_found]: File not found: missing.txt", isError: true, errorCode: "file_not_found" },
      ],
    ]);
  });
});

describe("rule 10: preventContinuation", () => {
  it("three calls, a stop after the first: the others are skipped and paired, the run ends with the first's content", async () => {
    const pre = counter();
    const stop = counter();
    const hooks = hooksFor("PreToolUse", pre);
    hooks.register("PostToolUse", () => new HookResult({ preventContinuation: true }));
    hooks.register("Stop", stop);
    const { agent, model } = agentWith(
      [
        toolTurn(
          call("call_1", "read_file", { path: "README.md" }),
          call("call_2", "write_file", WRITE_A),
          call("call_3", "shell", { command: "Get-ChildItem" }),
        ),
        textTurn("never asked"),
      ],
      { hooks },
    );
    const run = await agent.run("go");
    validateToolPairing(run.history);
    expect(toolMessages(run.history)).toEqual([
      ["call_1", "# Demo\n"],
      ["call_2", STOPPED],
      ["call_3", STOPPED],
    ]);
    expect(handlerCalls()).toBe(1);
    expect(pre.count).toBe(1);
    expect(model.requests).toHaveLength(1);
    expect(stop.count).toBe(0);
    expect(run.finalText).toBe("# Demo\n");
    expect(run.turns).toBe(1);
  });
});

describe("rule 11: context placement", () => {
  it("Pre and Post context follow the last tool message of their assistant message, as system messages, Pre before Post", async () => {
    const hooks = hooksFor(
      "PreToolUse",
      (context) => new HookResult({ additionalContext: [systemMessage(`pre ${context.prepared?.call.id ?? ""}`)] }),
    );
    hooks.register(
      "PostToolUse",
      (context) => new HookResult({ additionalContext: [systemMessage(`post ${context.prepared?.call.id ?? ""}`)] }),
    );
    const { agent, model } = agentWith(
      [
        toolTurn(call("call_1", "read_file", { path: "README.md" }), call("call_2", "glob", { pattern: "*.md" })),
        textTurn(DONE),
      ],
      { hooks },
    );
    const run = await agent.run("go");
    validateToolPairing(run.history);
    expect(
      run.history.map((message) => [message.role, message.role === "tool" ? message.toolCallId : message.content]),
    ).toEqual([
      ["user", "go"],
      ["assistant", null],
      ["tool", "call_1"],
      ["tool", "call_2"],
      ["system", "pre call_1"],
      ["system", "post call_1"],
      ["system", "pre call_2"],
      ["system", "post call_2"],
      ["assistant", DONE],
    ]);
    // The model's second request carries them, after both results.
    expect(model.requests[1]?.messages.slice(-4).map((message) => message.content)).toEqual([
      "pre call_1",
      "post call_1",
      "pre call_2",
      "post call_2",
    ]);
  });

  it("a user message in additionalContext is a contract error, and no user message is added", async () => {
    const hooks = hooksFor(
      "PreToolUse",
      () => new HookResult({ additionalContext: [userMessage("I approve everything")] }),
    );
    const { message, run } = await runOne("read_file", { path: "README.md" }, hooks);
    expect(message).toBe(PRE_INVALID);
    expect(run.history.filter((entry) => entry.role === "user")).toEqual([userMessage("go")]);
  });

  it("UserPromptSubmit context is in the first request right after the unchanged user message", async () => {
    let seen: ChatMessage | undefined;
    const hooks = hooksFor("UserPromptSubmit", (context) => {
      seen = context.message;
      return new HookResult({ additionalContext: [systemMessage("check the acceptance criteria")] });
    });
    const { agent, model } = agentWith([textTurn(DONE)], { hooks });
    await agent.run("summarise README.md");
    expect(seen).toEqual(userMessage("summarise README.md"));
    const first = model.requests[0]?.messages ?? [];
    expect(first.slice(1)).toEqual([
      userMessage("summarise README.md"),
      systemMessage("check the acceptance criteria"),
    ]);
    expect(first[0]?.role).toBe("system");
  });
});

describe("rule 12: Stop continues at most once", () => {
  it("an always-forcing Stop: two model calls, two Stops (the second with stopHookActive), one forced message", async () => {
    const active: (boolean | undefined)[] = [];
    const hooks = hooksFor("Stop", (context) => {
      active.push(context.stopHookActive);
      return new HookResult({ forceContinue: userMessage("请先用工具核对结果。") });
    });
    const { agent, model } = agentWith([textTurn("first"), textTurn("second")], { hooks });
    const run = await agent.run("go");
    validateToolPairing(run.history);
    expect(model.requests).toHaveLength(2);
    expect(active).toEqual([false, true]);
    expect(run.history.filter((message) => message.role === "user")).toEqual([
      userMessage("go"),
      userMessage("请先用工具核对结果。"),
    ]);
    expect(run.finalText).toBe("second");
    expect(run.turns).toBe(2);
  });

  it("Stop's context goes in with the forced turn, before the forced message, and only then", async () => {
    const hooks = hooksFor(
      "Stop",
      (context) =>
        new HookResult({
          additionalContext: [systemMessage(`stop ${String(context.stopHookActive)}`)],
          forceContinue: userMessage("again"),
        }),
    );
    const { agent, model } = agentWith([textTurn("first"), textTurn("second")], { hooks });
    const run = await agent.run("go");
    expect(run.history.map((message) => [message.role, message.content])).toEqual([
      ["user", "go"],
      ["assistant", "first"],
      ["system", "stop false"],
      ["user", "again"],
      ["assistant", "second"],
    ]);
    expect(model.requests[1]?.messages.slice(-2)).toEqual([systemMessage("stop false"), userMessage("again")]);
  });

  it("a second Stop callback is skipped on the first Stop and runs on the second", async () => {
    const second = counter();
    const hooks = hooksFor("Stop", () => new HookResult({ forceContinue: userMessage("again") }), second);
    const { agent } = agentWith([textTurn("first"), textTurn("second")], { hooks });
    await agent.run("go");
    expect(second.count).toBe(1);
  });

  it("forcing on the last turn ends in AgentLimitError", async () => {
    const hooks = hooksFor("Stop", () => new HookResult({ forceContinue: userMessage("again") }));
    const { agent } = agentWith([textTurn("first"), textTurn("second")], { hooks, maxTurns: 1 });
    await expect(agent.run("go")).rejects.toThrow(AgentLimitError);
  });

  it("a reply with neither text nor tool calls fails as before, and Stop does not run", async () => {
    const stop = counter();
    const { agent } = agentWith([textTurn("  ")], { hooks: hooksFor("Stop", stop) });
    await expect(agent.run("go")).rejects.toThrow("Model stopped without final text or tool calls");
    expect(stop.count).toBe(0);
  });
});

describe("rule 13: failures outside the tool phase fail the run", () => {
  it("a throwing UserPromptSubmit: HookRunError, the model never called", async () => {
    const failure = new Error("prompt hook broke");
    const { agent, model } = agentWith([textTurn(DONE)], {
      hooks: hooksFor("UserPromptSubmit", () => {
        throw failure;
      }),
    });
    const error = await agent.run("go").catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(HookRunError);
    expect(error).toMatchObject({ name: "HookRunError", message: "UserPromptSubmit hook failed", cause: failure });
    expect(model.requests).toHaveLength(0);
  });

  it.each<[string, HookCallback, number?]>([
    [
      "throws",
      () => {
        throw new Error("stop hook broke");
      },
    ],
    ["returns garbage", () => ({ forceContinue: "again" }) as unknown as HookResult],
    ["times out", () => new Promise<HookResult>(() => undefined), 20],
  ])("a Stop hook that %s: HookRunError with the history", async (_label, callback, timeoutMs) => {
    const hooks = new HookRegistry(timeoutMs === undefined ? {} : { timeoutMs });
    hooks.register("Stop", callback);
    const { agent } = agentWith([textTurn(DONE)], { hooks });
    const error = await agent.run("go").catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(HookRunError);
    expect((error as HookRunError).message).toBe("Stop hook failed");
    expect((error as HookRunError).history.map((message) => message.content)).toEqual(["go", DONE]);
  });
});

describe("rule 14: the profile", () => {
  it("P04 is P03 plus hooks, and profileForChapter(4) is P04", () => {
    expect([...P04.capabilities]).toEqual([...P03.capabilities, "hooks"]);
    expect(profileForChapter(4)).toBe(P04);
    expect(Object.isFrozen(P04)).toBe(true);
  });

  it.each([
    ["P01", P01],
    ["P02", P02],
    ["P03", P03],
  ] as const)("buildAgent(%s) with hooks throws `hooks require chapter 4 or later`", (_name, profile) => {
    expect(() =>
      buildAgent(profile, {
        model: new ScriptedModel([]),
        workspace,
        approvalProvider: approval,
        auditSink: audit,
        hooks: new HookRegistry(),
      }),
    ).toThrow("hooks require chapter 4 or later");
  });
});

describe("rule 15: chapter 3 unchanged", () => {
  it("buildAgent(P04) without hooks replays the chapter 3 walkthrough with P03's tool messages and audit", async () => {
    const replay = async (profile: typeof P03): Promise<{ tools: [string, string][]; audit: AuditRecord[] }> => {
      const setup = await prepareDemo(3);
      const records = new RecordingAudit();
      try {
        const agent = buildAgent(profile, {
          model: replayModel(setup.transcript.messages),
          workspace: setup.workspace,
          commandRunner: shell,
          approvalProvider: new CountingApproval(false),
          auditSink: records,
        });
        const run = await agent.run(setup.prompt);
        validateToolPairing(run.history);
        return { tools: toolMessages(run.history), audit: records.records };
      } finally {
        await rm(dirname(setup.workspace), { recursive: true, force: true });
      }
    };
    const three = await replay(P03);
    const four = await replay(P04);
    expect(four).toEqual(three);
    expect(four.audit.map((record) => record.source)).toEqual(["default", "user", "workspace-boundary"]);
  });
});

// ——— The CLI: the real runCli, a loopback provider for the real openai SDK, and the real demo. ———

const servers: LoopbackOpenAI[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** A loopback model that asks for one read_file of README.md, then answers. */
async function readThenAnswer(): Promise<LoopbackOpenAI> {
  const server = await startLoopbackOpenAI((body) =>
    (body as { messages: { role: string }[] }).messages.some((message) => message.role === "tool")
      ? { json: completion({ content: "README.md has one heading." }) }
      : { json: completion({ toolCalls: [{ id: "call_1", name: "read_file", arguments: '{"path":"README.md"}' }] }) },
  );
  servers.push(server);
  return server;
}

/** `runCli` in the workspace; with `answers`, stdin is a terminal that types each one once its question shows. */
async function runCliIn(
  argv: readonly string[],
  env: CliIO["env"],
  answers?: readonly string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { runCli } = await import("../src/cli.js");
  const stdin = new PassThrough();
  const stdout = new Sink();
  const stderr = new Sink();
  if (answers !== undefined) typeAnswers(stdin, stderr, answers);
  const io: CliIO = {
    env,
    cwd: workspace,
    stdin,
    stdinIsTTY: answers !== undefined,
    stdout,
    stderr,
    stderrIsTTY: false,
  };
  const code = await runCli(argv, io);
  return { code, stdout: stdout.text, stderr: stderr.text };
}

const envFor = (server: LoopbackOpenAI): CliIO["env"] => ({
  OPENAI_API_KEY: "test-key",
  OPENAI_BASE_URL: server.baseURL,
  OPENAI_MODEL: "loopback-model",
});

const hookOrAudit = (text: string): string[] => text.split("\n").filter((line) => /^\[(Hook|Permission)\]/.test(line));

describe("rule 16: the CLI prints the hook lines around the permission line", () => {
  it("a read_file run: UserPromptSubmit, PreToolUse, Permission, PostToolUse, Stop, in that order, also with --quiet", async () => {
    for (const extra of [[], ["--quiet"]]) {
      const server = await readThenAnswer();
      const run = await runCliIn(
        ["run", "--chapter", "4", "--prompt", "读取 README.md 并概括运行方式", ...extra],
        envFor(server),
      );
      expect(run.code).toBe(0);
      expect(hookOrAudit(run.stderr)).toEqual([
        "[Hook] UserPromptSubmit",
        "[Hook] PreToolUse: read_file",
        `[Permission] read_file: allow (default) - ${PASSED}`,
        "[Hook] PostToolUse: read_file -> ok",
        "[Hook] Stop",
      ]);
      expect(run.stdout).toBe("README.md has one heading.\n");
      // The observing hooks change nothing the model reads: the second request carries the file as it is.
      const second = server.requests[1] as { messages: { role: string; content: string }[] };
      expect(second.messages.filter((message) => message.role === "tool").map((message) => message.content)).toEqual([
        "# Demo\n",
      ]);
    }
  });

  it.each(["1", "2", "3"])(
    "--chapter %s on this snapshot registers no hooks and prints no [Hook] line",
    async (chapter) => {
      const server = await readThenAnswer();
      const run = await runCliIn(["run", "--chapter", chapter, "--prompt", "读取 README.md"], envFor(server));
      expect(run.stderr).not.toContain("[Hook]");
      expect(run.stderr).not.toContain("hooks require chapter 4 or later");
    },
  );
});

describe("rule 13 through the CLI: a failing UserPromptSubmit or Stop hook", () => {
  afterEach(() => {
    vi.doUnmock("../src/cli/live-hooks.js");
    vi.resetModules();
  });

  it.each<[HookEvent, string, string[]]>([
    ["UserPromptSubmit", "运行失败: UserPromptSubmit hook failed", []],
    ["Stop", "运行失败: Stop hook failed", ["user", "assistant", "tool", "assistant"]],
  ])("a failing %s hook: exit 1 with `%s`, and the transcript holds what happened", async (event, line, roles) => {
    vi.resetModules();
    vi.doMock("../src/cli/live-hooks.js", async (importOriginal) => {
      const real = await importOriginal<typeof import("../src/cli/live-hooks.js")>();
      return {
        liveHooks: (...args: Parameters<typeof real.liveHooks>) => {
          const hooks = real.liveHooks(...args);
          hooks.register(event, () => {
            throw new Error(`${event} hook broke`);
          });
          return hooks;
        },
      };
    });
    const server = await readThenAnswer();
    const transcript = join(root, "rec.json");
    const run = await runCliIn(
      ["run", "--chapter", "4", "--prompt", "读取 README.md", "--transcript", transcript],
      envFor(server),
    );
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr.split("\n")).toContain(line);
    expect(server.requests).toHaveLength(roles.length === 0 ? 0 : 2);
    if (roles.length === 0) {
      // Nothing happened: no message, so no transcript either.
      expect(existsSync(transcript)).toBe(false);
      return;
    }
    const recorded = JSON.parse(readFileSync(transcript, "utf8")) as { messages: { role: string }[] };
    expect(recorded.messages.map((message) => message.role)).toEqual(roles);
  });
});

describe("rule 5 through the CLI: the record says what ran", () => {
  afterEach(() => {
    vi.doUnmock("../src/cli/live-hooks.js");
    vi.resetModules();
  });

  const MODEL_CALL = { id: "call_w", name: "write_file", arguments: JSON.stringify(WRITE_A) };
  const RAN = JSON.stringify({ path: "b.txt", content: "B" });

  it("a.txt → b.txt: the model's call stays as sent, the transcript records b.txt as what ran, and --replay writes b.txt", async () => {
    vi.resetModules();
    vi.doMock("../src/cli/live-hooks.js", async (importOriginal) => {
      const real = await importOriginal<typeof import("../src/cli/live-hooks.js")>();
      // The CLI's own module graph, reset above: its HookResult is the one the registry recognises.
      const { HookResult: CliHookResult } = await import("../src/core/hooks.js");
      return {
        liveHooks: (...args: Parameters<typeof real.liveHooks>) => {
          const hooks = real.liveHooks(...args);
          hooks.register(
            "PreToolUse",
            (context) =>
              new CliHookResult({
                updatedInput: { ...(context.prepared as ValidToolCall), arguments: { path: "b.txt", content: "B" } },
              }),
          );
          return hooks;
        },
      };
    });
    const server = await startLoopbackOpenAI((body) =>
      (body as { messages: { role: string }[] }).messages.some((message) => message.role === "tool")
        ? { json: completion({ content: "Wrote it." }) }
        : { json: completion({ toolCalls: [MODEL_CALL] }) },
    );
    servers.push(server);
    const transcript = join(root, "rewrite.json");
    const run = await runCliIn(
      ["run", "--chapter", "4", "--prompt", "把 A 写入 a.txt", "--transcript", transcript],
      envFor(server),
      ["y\n"],
    );
    expect(run.code).toBe(0);
    expect(await readFile(inWorkspace("b.txt"), "utf8")).toBe("B");
    expect(existsSync(inWorkspace("a.txt"))).toBe(false);
    // What the model is shown, as the book shows it: its own call, answered by what ran.
    const wireCall = {
      id: "call_w",
      type: "function",
      function: { name: "write_file", arguments: MODEL_CALL.arguments },
    };
    const second = server.requests[1] as { messages: unknown[] };
    expect(second.messages.slice(2)).toEqual([
      { role: "assistant", content: null, tool_calls: [wireCall] },
      { role: "tool", tool_call_id: "call_w", content: "Wrote 1 UTF-8 bytes to b.txt" },
    ]);
    const recorded = JSON.parse(readFileSync(transcript, "utf8")) as {
      messages: unknown[];
      rewritten_arguments?: unknown;
    };
    expect(recorded.messages.slice(1, 3)).toEqual(second.messages.slice(2));
    expect(recorded.rewritten_arguments).toEqual([{ message: 1, tool_call_id: "call_w", arguments: RAN }]);

    // The replay has no rewriting hook: it runs what the record says ran, through the policy and an approval.
    vi.doUnmock("../src/cli/live-hooks.js");
    vi.resetModules();
    const again = join(root, "again");
    await mkdir(again);
    const replay = await runCliIn(["run", "--chapter", "4", "--replay", transcript, "--workspace", again], {}, ["y\n"]);
    expect(replay.code).toBe(0);
    expect(replay.stderr).toContain(
      "[Permission] write_file: allow (terminal-approval) - User approved this tool call",
    );
    expect(await readFile(join(again, "b.txt"), "utf8")).toBe("B");
    expect(existsSync(join(again, "a.txt"))).toBe(false);
  });

  /** From here on the CLI's hooks end with a PreToolUse hook that gives every call `rewrite(its arguments)`. */
  function rewritingLiveHooks(rewrite: (args: Readonly<Record<string, unknown>>) => Record<string, unknown>): void {
    vi.resetModules();
    vi.doMock("../src/cli/live-hooks.js", async (importOriginal) => {
      const real = await importOriginal<typeof import("../src/cli/live-hooks.js")>();
      const { HookResult: CliHookResult } = await import("../src/core/hooks.js");
      return {
        liveHooks: (...args: Parameters<typeof real.liveHooks>) => {
          const hooks = real.liveHooks(...args);
          hooks.register("PreToolUse", (context) => {
            const prepared = context.prepared as ValidToolCall;
            return new CliHookResult({ updatedInput: { ...prepared, arguments: rewrite(prepared.arguments) } });
          });
          return hooks;
        },
      };
    });
  }

  /** One approved run in which the model asks for MODEL_CALL once, recorded to `name` beside the workspace. */
  async function recordedWrite(name: string): Promise<string> {
    const server = await startLoopbackOpenAI((body) =>
      (body as { messages: { role: string }[] }).messages.some((message) => message.role === "tool")
        ? { json: completion({ content: "Wrote it." }) }
        : { json: completion({ toolCalls: [MODEL_CALL] }) },
    );
    servers.push(server);
    const transcript = join(root, name);
    const run = await runCliIn(
      ["run", "--chapter", "4", "--prompt", "把 A 写入 a.txt", "--transcript", transcript],
      envFor(server),
      ["y\n"],
    );
    expect(run.code).toBe(0);
    return transcript;
  }

  it("a replay that still runs the recording's rewriting hook applies it once: a.txt.bak, not a.txt.bak.bak", async () => {
    rewritingLiveHooks((args) => ({ ...args, path: `${String(args.path)}.bak` }));
    const transcript = await recordedWrite("bak.json");
    expect(await readFile(inWorkspace("a.txt.bak"), "utf8")).toBe("A");
    const ran = JSON.stringify({ path: "a.txt.bak", content: "A" });
    const again = join(root, "again");
    await mkdir(again);
    const rerecorded = join(root, "bak-again.json");
    const replay = await runCliIn(
      ["run", "--chapter", "4", "--replay", transcript, "--workspace", again, "--transcript", rerecorded],
      {},
      ["y\n"],
    );
    expect(replay.code).toBe(0);
    expect(readdirSync(again)).toEqual(["a.txt.bak"]);
    expect(await readFile(join(again, "a.txt.bak"), "utf8")).toBe("A");
    // The replay's own record says what the first one said: the model's call, and the one rewrite that ran.
    const first = JSON.parse(readFileSync(transcript, "utf8")) as { rewritten_arguments?: unknown };
    const second = JSON.parse(readFileSync(rerecorded, "utf8")) as { rewritten_arguments?: unknown };
    expect(first.rewritten_arguments).toEqual([{ message: 1, tool_call_id: "call_w", arguments: ran }]);
    expect(second.rewritten_arguments).toEqual(first.rewritten_arguments);
  });

  it("a replay whose hooks rewrite a call otherwise than the recording does not run it, asks nothing, and stops with one 运行失败 line", async () => {
    rewritingLiveHooks((args) => ({ ...args, path: "b.txt" }));
    const transcript = await recordedWrite("to-b.json");
    rewritingLiveHooks((args) => ({ ...args, path: "c.txt" }));
    const again = join(root, "again");
    await mkdir(again);
    const replay = await runCliIn(["run", "--chapter", "4", "--replay", transcript, "--workspace", again], {});
    expect(replay.code).toBe(1);
    expect(replay.stdout).toBe("");
    expect(readdirSync(again)).toEqual([]);
    expect(replay.stderr).not.toContain("工具调用需要批准");
    expect(replay.stderr.split("\n").filter((line) => line.startsWith("运行失败: "))).toEqual([
      '运行失败: The replay stopped: the PreToolUse hooks made the arguments of write_file call "call_w" other than the recorded run\'s, so it did not run',
    ]);
  });

  it("a replay file whose rewritten_arguments names no recorded call is a configuration error, and nothing runs", async () => {
    const transcript = join(root, "stale.json");
    const messages = [
      { role: "user", content: "把 A 写入 a.txt" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_w", type: "function", function: { name: "write_file", arguments: MODEL_CALL.arguments } },
        ],
      },
      { role: "tool", tool_call_id: "call_w", content: "Wrote 1 UTF-8 bytes to b.txt" },
      { role: "assistant", content: "Wrote it." },
    ];
    const stale = [{ message: 1, tool_call_id: "call_x", arguments: RAN }];
    await writeFile(transcript, JSON.stringify({ chapter: 4, messages, rewritten_arguments: stale }), "utf8");
    const run = await runCliIn(["run", "--chapter", "4", "--replay", transcript], {}, ["y\n"]);
    expect(run.code).toBe(2);
    expect(run.stderr.split("\n").filter((line) => line.startsWith("配置错误: "))).toEqual([
      `配置错误: transcript ${transcript} rewritten_arguments[0] names "call_x", which is no tool call of messages[1]`,
    ]);
    expect(readdirSync(workspace)).toEqual(["README.md"]);
  });
});

describe("rule 5 on replay: ReplayRewrites.check, call by call", () => {
  /** A read tool whose one field is optional, so `""` (no arguments at all) is a valid call of it. */
  const NOTE = {
    name: "note",
    description: "Takes an optional text.",
    inputSchema: z.strictObject({ text: z.string().optional() }),
    effect: "read" as const,
    handler: () => Promise.resolve(toolSuccess("noted")),
  };
  const tools = new ToolRegistry();
  tools.register(NOTE);

  /** `sent` as the registry prepares it, with the arguments the hooks before `check` made of it. */
  function prepared(sent: ToolCall, hooked?: Record<string, unknown>): ValidToolCall {
    const valid = tools.prepare(sent);
    if (valid.error !== undefined) throw new Error(valid.error.content);
    return hooked === undefined ? valid : { ...valid, arguments: hooked };
  }
  /**
   * A recording whose one turn asked for `sent`, which ran with `ran` when given (a hook rewrote it then), and that
   * turn's call: the message holds its own copy, and a replay's calls are the recorded messages' own.
   */
  function recording(sent: ToolCall, ran?: string): { rewrites: ReplayRewrites; recorded: ToolCall } {
    const turn = assistantMessage(null, [sent]);
    const recorded = turn.toolCalls[0] as ToolCall;
    const messages = [userMessage("x"), turn, toolMessage(sent.id, "noted")];
    const rewrittenArguments = new Map(ran === undefined ? [] : [[recorded, ran] as const]);
    return { rewrites: new ReplayRewrites({ chapter: 4, messages, rewrittenArguments }), recorded };
  }
  /** What the model reads in place of a call that does not run. */
  const DIVERGED = {
    content:
      "Error [replay_diverged]: The PreToolUse hooks changed these arguments otherwise than in the recorded run; " +
      "the call did not run",
    isError: true,
    errorCode: "replay_diverged",
  };
  const check = (rewrites: ReplayRewrites, call: ValidToolCall): Promise<HookResult> =>
    Promise.resolve(rewrites.check(new HookContext({ event: "PreToolUse", prepared: call })));

  it("a call no recorded turn holds (a child's, from chapter 6) passes as the hooks made it", async () => {
    const sent = toolCall("call_n", "note", '{"text":"a"}');
    // The same id, name and arguments, but no call of the recording: a child's turn replayed as it came.
    const result = await check(recording(sent).rewrites, prepared(sent, { text: "rewritten" }));
    expect(result.blockingError).toBeUndefined();
    expect(result.updatedInput).toBeUndefined();
  });

  it('a call the model sent with no arguments ("") reads as {} and runs as it came', async () => {
    const { rewrites, recorded } = recording(toolCall("call_n", "note", ""));
    const result = await check(rewrites, prepared(recorded));
    expect(result.blockingError).toBeUndefined();
    expect(result.updatedInput).toBeUndefined();
  });

  it.each([
    ["the tool's schema does not read", '{"text":5}'],
    ["is no JSON", '{"text":'],
  ])(
    "a recorded rewrite %s matches nothing: the model's own arguments do not run (replay_diverged)",
    async (_name, ran) => {
      const { rewrites, recorded } = recording(toolCall("call_n", "note", '{"text":"a"}'), ran);
      const result = await check(rewrites, prepared(recorded));
      expect(result.updatedInput).toBeUndefined();
      expect(result.blockingError).toEqual(DIVERGED);
    },
  );

  it("after a divergence the replay's next request is refused without asking the model, naming at most 64 characters of the call's id", async () => {
    const id = `${"i".repeat(64)}TAIL`;
    const { rewrites, recorded } = recording(toolCall(id, "note", '{"text":"a"}'), '{"text":"b"}');
    let asked = 0;
    const model = rewrites.guard({
      complete: () => {
        asked += 1;
        return Promise.resolve({ message: assistantMessage("ok"), finishReason: "stop" });
      },
    });
    await model.complete({ messages: [], tools: [] });
    expect(asked).toBe(1);
    expect((await check(rewrites, prepared(recorded, { text: "c" }))).blockingError).toEqual(DIVERGED);
    await expect(model.complete({ messages: [], tools: [] })).rejects.toThrow(
      new ModelCallError(
        `The replay stopped: the PreToolUse hooks made the arguments of note call "${"i".repeat(64)}" other than the recorded run's, so it did not run`,
      ),
    );
    expect(asked).toBe(1);
  });
});

// ——— Rule 17: `npm run demo`, chapter 4's no-key walkthrough, as a reader runs it. ———

const entry = fileURLToPath(new URL("../src/chapters/ch04.ts", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const walkthrough = JSON.parse(readFileSync(new URL("../demo/ch04.json", import.meta.url), "utf8")) as {
  messages: { role: string; content: string | null }[];
};
const finalText = walkthrough.messages.at(-1)?.content ?? "";

const DEMO_LINES = [
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: glob",
  "[Permission] glob: allow (pre-tool-hook) - PreToolUse hook requested allow",
  "[Hook] PostToolUse: glob -> ok",
  "[Hook] PreToolUse: shell",
  "[Permission] shell: deny (terminal-approval) - No interactive approval input was available",
  "[Hook] PreToolUse: write_file",
  "[Hook] PreToolUse: write_file",
  "[Permission] write_file: deny (terminal-approval) - No interactive approval input was available",
  "[Hook] PreToolUse: write_file",
  "[Permission] write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden",
  "[Hook] Stop",
  "[Hook] Stop",
];

function keyless(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_")));
}

const demoRoots: string[] = [];
afterEach(async () => {
  await Promise.all(demoRoots.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

/** The temp workspace the demo names on stderr; its parent is removed after the test. */
function announcedWorkspace(output: string): string {
  const named = /演示工作区[:：] ?(\S+?)(?:（|\s|$)/.exec(output)?.[1];
  if (named === undefined) throw new Error(`the demo did not say where its workspace is:\n${output}`);
  demoRoots.push(dirname(named));
  return named;
}

describe("rule 17: the chapter 4 demo", () => {
  it("tells the model, call by call, what the hooks and the policy decided", async () => {
    const transcript = join(root, "demo.json");
    // `npm run demo` is the ch04 entry's `run --chapter 4 --demo`: its CLI, in this process.
    const run = await runCliIn(["run", "--chapter", "4", "--demo", "--transcript", transcript], keyless());
    announcedWorkspace(run.stderr);
    expect(run.code).toBe(0);
    const recorded = JSON.parse(readFileSync(transcript, "utf8")) as {
      messages: { role: string; tool_call_id?: string; content: string | null }[];
    };
    const noTTY = "Error [permission_denied]: No interactive approval input was available";
    expect(recorded.messages.filter((message) => message.role === "tool")).toEqual([
      { role: "tool", tool_call_id: "call_demo_1", content: "README.md" },
      { role: "tool", tool_call_id: "call_demo_2", content: noTTY },
      { role: "tool", tool_call_id: "call_demo_3", content: BLOCKED },
      { role: "tool", tool_call_id: "call_demo_4", content: noTTY },
      { role: "tool", tool_call_id: "call_demo_5", content: `Error [permission_denied]: ${OUTSIDE}` },
    ]);
    // The forced turn: exactly one user message from the Stop hook, after the first answer.
    expect(recorded.messages.filter((message) => message.role === "user").map((message) => message.content)).toEqual([
      walkthrough.messages[0]?.content,
      "请对照 [Hook] 和 [Permission] 行再总结一次。",
    ]);
  });

  it.each([[[]], [["--quiet"]]])(
    "with no terminal (%j): the 13 lines, nothing written, the answer on stdout",
    async (extra) => {
      const run = await runCliIn(["run", "--chapter", "4", "--demo", ...extra], keyless());
      const demoWorkspace = announcedWorkspace(run.stderr);
      expect(run.code).toBe(0);
      expect(hookOrAudit(run.stderr)).toEqual(DEMO_LINES);
      expect(run.stdout).toBe(`${finalText}\n`);
      expect(run.stdout.startsWith("演示结束。")).toBe(true);
      expect(readdirSync(demoWorkspace)).toEqual(["README.md"]);
      expect(readdirSync(dirname(demoWorkspace))).toEqual(["workspace"]);
    },
  );

  const hasScript = spawnSync("script", ["--version"], { encoding: "utf8" }).status === 0;
  it.skipIf(!(hasScript && process.platform === "linux" && powershell !== undefined))(
    "on a terminal, answering y twice runs the shell call and writes chapter4-note.txt, each followed by its Post line",
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
      // What the screen shows: the terminal ends lines with "\r\n", and a status line is redrawn after "\r", so only
      // the text after a line's last inner "\r" stays.
      const plain = output
        .split("\n")
        // eslint-disable-next-line no-control-regex -- the colour codes are exactly what this removes
        .map((line) => (line.replace(/\r+$/, "").split("\r").at(-1) ?? "").replace(/\u001b\[[0-9;]*[A-Za-z]/g, ""))
        .join("\n");
      const demoWorkspace = announcedWorkspace(plain);
      expect(hookOrAudit(plain)).toEqual([
        "[Hook] UserPromptSubmit",
        "[Hook] PreToolUse: glob",
        "[Permission] glob: allow (pre-tool-hook) - PreToolUse hook requested allow",
        "[Hook] PostToolUse: glob -> ok",
        "[Hook] PreToolUse: shell",
        "[Permission] shell: allow (terminal-approval) - User approved this tool call",
        "[Hook] PostToolUse: shell -> ok",
        "[Hook] PreToolUse: write_file",
        "[Hook] PreToolUse: write_file",
        "[Permission] write_file: allow (terminal-approval) - User approved this tool call",
        "[Hook] PostToolUse: write_file -> ok",
        "[Hook] PreToolUse: write_file",
        "[Permission] write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden",
        "[Hook] Stop",
        "[Hook] Stop",
      ]);
      expect(readFileSync(join(demoWorkspace, "chapter4-note.txt"), "utf8")).toBe(
        "第 4 章在循环的四个固定位置挂上了 hook。\n",
      );
      expect(readdirSync(demoWorkspace).sort()).toEqual(["README.md", "chapter4-note.txt"]);
      expect(existsSync(join(dirname(demoWorkspace), "outside.txt"))).toBe(false);
    },
  );
});
