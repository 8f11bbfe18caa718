import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { OpenAIChatModel } from "../src/adapters/openai-chat.js";
import { buildAgent } from "../src/bootstrap.js";
import { runCli, type CliIO } from "../src/cli.js";
import {
  AgentLimitError,
  AgentRunError,
  AgentRunner,
  IncompleteModelReplyError,
  ModelCallError,
  type RunResult,
} from "../src/core/loop.js";
import { validateToolPairing, type ChatMessage } from "../src/core/messages.js";
import type { ModelClient } from "../src/core/model.js";
import {
  PermissionDecision,
  PermissionPolicy,
  PermissionRequest,
  PermissionRule,
  type ApprovalProvider,
  type AuditSink,
  type PermissionPolicyOptions,
} from "../src/core/permissions.js";
import { P03 } from "../src/core/profiles.js";
import { ToolRegistry, toolError, toolSuccess, type ToolResult } from "../src/core/tools.js";
import { CountingApproval, FakeCommandRunner } from "./support/fakes.js";
import {
  apiError,
  completion,
  startLoopbackOpenAI,
  type LoopbackOpenAI,
  type LoopbackReply,
} from "./support/loopback-openai.js";
import { afterSettingsLine } from "./support/cli-run.js";
import { Sink } from "./support/sink.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";

const EVALUATION_FAILED = "Error [permission_evaluation_error]: Permission evaluation failed";
/** The probe tools never touch the disk, so their workspace need not exist. */
const WORKSPACE = "/nonexistent-workspace";

const folders: string[] = [];
const servers: LoopbackOpenAI[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

async function tempFolder(): Promise<string> {
  const folder = await realpath(await mkdtemp(join(tmpdir(), "ch03-faults-")));
  folders.push(folder);
  return folder;
}

/** Counts handler runs per tool name. */
class HandlerLog {
  readonly runs: string[] = [];
  count(name: string): number {
    return this.runs.filter((run) => run === name).length;
  }
}

/** A registry of probe tools, one per effect, plus tools whose handlers misbehave on purpose. */
function probeRegistry(log: HandlerLog): ToolRegistry {
  const registry = new ToolRegistry();
  const ran = (name: string, result: unknown): Promise<ToolResult> => {
    log.runs.push(name);
    // The misbehaving handlers return what a careless author might: the registry must not trust it.
    return Promise.resolve(result as ToolResult);
  };
  registry.register({
    name: "probe_read",
    description: "read",
    inputSchema: z.strictObject({ path: z.string() }),
    effect: "read",
    handler: () => ran("probe_read", toolSuccess("read ok")),
  });
  registry.register({
    name: "probe_write",
    description: "write",
    inputSchema: z.strictObject({ path: z.string() }),
    effect: "write",
    handler: () => ran("probe_write", toolSuccess("write ok")),
  });
  registry.register({
    name: "probe_exec",
    description: "execute",
    inputSchema: z.strictObject({ command: z.string() }),
    effect: "execute",
    handler: () => ran("probe_exec", toolSuccess("exec ok")),
  });
  registry.register({
    name: "throws",
    description: "throws",
    inputSchema: z.strictObject({ value: z.string() }),
    effect: "read",
    handler: ({ value }) => {
      log.runs.push("throws");
      if (value === "error") throw new Error("kaboom at /home/secret/stack.ts:1:1");
      if (value === "rejects") return Promise.reject(new TypeError("kaboom rejected"));
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- a careless handler throwing a non-Error
      throw "kaboom string";
    },
  });
  const junk: Record<string, unknown> = {
    object: { ok: true },
    "error without code": { content: "x", isError: true },
    "error with empty code": { content: "x", isError: true, errorCode: "" },
    "numeric content": { content: 5, isError: false },
    "string isError": { content: "x", isError: "false" },
    undefined: undefined,
    null: null,
    string: "done",
  };
  registry.register({
    name: "junk",
    description: "returns junk",
    inputSchema: z.strictObject({ kind: z.string() }),
    effect: "read",
    handler: ({ kind }) => ran("junk", kind === "own error" ? toolError("custom_failure", "it broke") : junk[kind]),
  });
  return registry;
}

class RecordingAudit implements AuditSink {
  readonly records: [string, string, string, string][] = [];
  record(request: PermissionRequest, decision: PermissionDecision): void {
    this.records.push([request.toolName, decision.behavior, decision.source, decision.reason]);
  }
}

/** An approval provider that answers with anything at all, and counts its calls. */
class RawApproval implements ApprovalProvider {
  calls = 0;
  constructor(private readonly answer: () => unknown) {}
  decide(): Promise<PermissionDecision> {
    this.calls += 1;
    return this.answer() as Promise<PermissionDecision>;
  }
}

interface Probe {
  readonly result: RunResult;
  readonly log: HandlerLog;
  readonly audit: RecordingAudit;
}

/** Runs one turn of `calls` through the real AgentRunner with the policy `options` make, then a final text. */
async function probe(
  calls: ReturnType<typeof call>[],
  options: PermissionPolicyOptions | ((audit: RecordingAudit) => PermissionPolicy),
): Promise<Probe> {
  const log = new HandlerLog();
  const audit = new RecordingAudit();
  const permissionPolicy = typeof options === "function" ? options(audit) : new PermissionPolicy({ audit, ...options });
  const runner = new AgentRunner({
    model: new ScriptedModel([toolTurn(...calls), textTurn("done")]),
    tools: probeRegistry(log),
    systemPrompt: "fault injection",
    workspace: WORKSPACE,
    maxTurns: 3,
    permissionPolicy,
  });
  const result = await runner.run("go");
  expect(result.finalText).toBe("done");
  expect(() => validateToolPairing(result.history)).not.toThrow();
  return { result, log, audit };
}

const exec = (id = "e1", command = "Remove-Item -Recurse *") => call(id, "probe_exec", { command });
/** What the policy says when nobody explicitly allowed or denied the shell's ask. */
const NOT_GRANTED = "Approval was not explicitly granted: Shell execution requires approval";
const FAILED = "Approval provider failed; request denied";
const INVALID = "Approval provider returned an invalid decision";

describe("an approval provider that fails is a deny, and the handler never runs", () => {
  it.each<[string, () => unknown, string]>([
    [
      "throws synchronously",
      () => {
        throw new Error("provider crashed");
      },
      FAILED,
    ],
    ["rejects", () => Promise.reject(new Error("provider crashed")), FAILED],
    ["returns true", () => true, INVALID],
    ["returns the string allow", () => "allow", INVALID],
    [
      "returns an allow-shaped plain object",
      () => ({ behavior: "allow", reason: "looks right", source: "user" }),
      INVALID,
    ],
    [
      "returns an allow forged from PermissionDecision.prototype",
      () =>
        Object.create(PermissionDecision.prototype, {
          behavior: { value: "allow" },
          reason: { value: "" },
          source: { value: "user" },
        }) as unknown,
      INVALID,
    ],
    ["returns undefined", () => undefined, INVALID],
    ["returns null", () => null, INVALID],
    ["returns an ask decision", () => new PermissionDecision("ask", "ask again", "user"), NOT_GRANTED],
    ["returns a passthrough decision", () => new PermissionDecision("passthrough", "no opinion", "user"), NOT_GRANTED],
  ])("a provider that %s makes the call a deny, and its handler never runs", async (_name, answer, reason) => {
    const approval = new RawApproval(answer);
    const { result, log, audit } = await probe([exec()], { approval });

    expect(toolMessages(result.history)).toEqual([["e1", `Error [permission_denied]: ${reason}`]]);
    expect(approval.calls).toBe(1);
    expect(log.runs).toEqual([]);
    expect(audit.records).toEqual([["probe_exec", "deny", "approval", reason]]);
  });

  it("without a provider every ask is a deny that says approval was not granted, with the ask's own reason", async () => {
    const { result, log, audit } = await probe([exec(), call("w1", "probe_write", { path: "a.txt" })], {
      rules: [new PermissionRule({ name: "ask-writes", behavior: "ask", reason: "writes ask", matches: () => true })],
    });
    // The shell's own ask comes first among equals, so it is the one the shell call's deny names.
    const writeNotGranted = "Approval was not explicitly granted: writes ask";
    expect(toolMessages(result.history)).toEqual([
      ["e1", `Error [permission_denied]: ${NOT_GRANTED}`],
      ["w1", `Error [permission_denied]: ${writeNotGranted}`],
    ]);
    expect(log.runs).toEqual([]);
    expect(audit.records).toEqual([
      ["probe_exec", "deny", "approval", NOT_GRANTED],
      ["probe_write", "deny", "approval", writeNotGranted],
    ]);
  });
});

describe("an audit sink that fails fails the call closed", () => {
  const failing = (mode: "throw" | "reject", when: (decision: PermissionDecision) => boolean): AuditSink => ({
    record: (_request, decision) => {
      if (!when(decision)) return;
      if (mode === "throw") throw new Error("disk full");
      return Promise.reject(new Error("disk full"));
    },
  });

  it.each([
    ["throws", "throw"],
    ["rejects", "reject"],
  ] as const)(
    "an audit sink that %s on an allowed read makes it permission_evaluation_error, and the handler never runs",
    async (_word, mode) => {
      const { result, log } = await probe([call("r1", "probe_read", { path: "a" })], () => {
        return new PermissionPolicy({ audit: failing(mode, () => true) });
      });
      expect(toolMessages(result.history)).toEqual([["r1", EVALUATION_FAILED]]);
      expect(log.runs).toEqual([]);
    },
  );

  it("an audit sink that fails only after an approved ask still stops the handler, and the approval was asked once", async () => {
    const approval = new CountingApproval(true);
    const { result, log } = await probe([exec()], () => {
      return new PermissionPolicy({
        approval,
        audit: failing("throw", (decision) => decision.behavior === "allow"),
      });
    });
    expect(toolMessages(result.history)).toEqual([["e1", EVALUATION_FAILED]]);
    expect(approval.requests).toHaveLength(1);
    expect(log.runs).toEqual([]);
  });

  it("an audit sink that fails on a deny still answers with an error paired to the call", async () => {
    const { result, log } = await probe([exec()], () => {
      return new PermissionPolicy({ audit: failing("throw", () => true) });
    });
    expect(toolMessages(result.history)).toEqual([["e1", EVALUATION_FAILED]]);
    expect(log.runs).toEqual([]);
  });
});

describe("a rule that throws is a deny from that rule, never asked", () => {
  const exploding = (thrown: unknown) =>
    new PermissionRule({
      name: "exploding-rule",
      behavior: "allow",
      reason: "would allow",
      matches: () => {
        throw thrown;
      },
    });

  it.each<[string, unknown]>([
    ["an Error", new Error("rule bug")],
    ["a string", "rule bug"],
    ["undefined", undefined],
  ])("a rule throwing %s on a shell call denies it without asking the approver", async (_name, thrown) => {
    const approval = new CountingApproval(true);
    const allowAll = new PermissionRule({
      name: "allow-all",
      behavior: "allow",
      reason: "everything",
      matches: () => true,
    });
    const { result, log, audit } = await probe([exec()], {
      rules: [allowAll, exploding(thrown)],
      approval,
    });

    expect(toolMessages(result.history)).toEqual([
      ["e1", "Error [permission_denied]: Permission rule failed: exploding-rule"],
    ]);
    expect(approval.requests).toEqual([]);
    expect(log.runs).toEqual([]);
    expect(audit.records).toEqual([["probe_exec", "deny", "exploding-rule", "Permission rule failed: exploding-rule"]]);
  });
});

describe("a policy that breaks its contract never lets the handler run", () => {
  class BrokenPolicy extends PermissionPolicy {
    constructor(private readonly broken: () => Promise<PermissionDecision>) {
      super();
    }
    override decide(): Promise<PermissionDecision> {
      return this.broken();
    }
  }

  it.each<[string, () => Promise<PermissionDecision>]>([
    ["throws", () => Promise.reject(new Error("policy bug"))],
    ["returns an allow-shaped object", () => Promise.resolve({ behavior: "allow" } as unknown as PermissionDecision)],
    ["returns an unresolved ask", () => Promise.resolve(new PermissionDecision("ask", "still asking", "rule"))],
    ["returns a passthrough", () => Promise.resolve(new PermissionDecision("passthrough", "no opinion", "rule"))],
    ["returns undefined", () => Promise.resolve(undefined as unknown as PermissionDecision)],
    [
      "returns an allow forged from PermissionDecision.prototype",
      () =>
        Promise.resolve(
          Object.create(PermissionDecision.prototype, { behavior: { value: "allow" } }) as PermissionDecision,
        ),
    ],
  ])("a decide() that %s becomes permission_evaluation_error, and the handler never runs", async (_name, broken) => {
    const { result, log } = await probe([call("r1", "probe_read", { path: "a" })], () => new BrokenPolicy(broken));
    expect(toolMessages(result.history)).toEqual([["r1", EVALUATION_FAILED]]);
    expect(log.runs).toEqual([]);
  });
});

describe("a handler that misbehaves becomes a stable error code", () => {
  it.each(["error", "rejects", "string"])(
    "a handler that %s becomes tool_execution_error with no message or stack of its own",
    async (value) => {
      const { result, log, audit } = await probe([call("t1", "throws", { value })], {});
      expect(toolMessages(result.history)).toEqual([
        ["t1", "Error [tool_execution_error]: Tool throws failed unexpectedly"],
      ]);
      expect(JSON.stringify(result.history)).not.toContain("kaboom");
      expect(log.runs).toEqual(["throws"]);
      expect(audit.records).toEqual([["throws", "allow", "default", "No permission rule blocked the request"]]);
    },
  );

  it.each([
    "object",
    "error without code",
    "error with empty code",
    "numeric content",
    "string isError",
    "undefined",
    "null",
    "string",
  ])("a handler returning %s becomes invalid_tool_result", async (kind) => {
    const { result, log } = await probe([call("j1", "junk", { kind })], {});
    expect(toolMessages(result.history)).toEqual([
      ["j1", "Error [invalid_tool_result]: Tool handler returned an invalid result"],
    ]);
    expect(log.runs).toEqual(["junk"]);
  });

  it("a handler's own error result reaches the model unchanged", async () => {
    const { result } = await probe([call("j1", "junk", { kind: "own error" })], {});
    expect(toolMessages(result.history)).toEqual([["j1", "Error [custom_failure]: it broke"]]);
  });

  it("in one turn, exactly the calls the rules and the approver allow reach their handlers", async () => {
    const approval = new CountingApproval((seen: { arguments: unknown }) => {
      return (seen.arguments as { command?: string }).command === "Get-Date";
    });
    const denyWrites = new PermissionRule({
      name: "deny-writes",
      behavior: "deny",
      reason: "No writes today",
      matches: (request) => request.toolName === "probe_write",
    });
    const { result, log, audit } = await probe(
      [
        call("r1", "probe_read", { path: "a" }),
        call("w1", "probe_write", { path: "a" }),
        exec("e1", "Get-Date"),
        exec("e2", "Remove-Item *"),
        call("x1", "probe_exec", "{not json"),
        call("u1", "no_such_tool", {}),
      ],
      { rules: [denyWrites], approval },
    );

    expect(toolMessages(result.history)).toEqual([
      ["r1", "read ok"],
      ["w1", "Error [permission_denied]: No writes today"],
      ["e1", "exec ok"],
      ["e2", "Error [permission_denied]: The user did not approve this tool call"],
      ["x1", "Error [invalid_json]: Arguments of probe_exec must be a JSON object"],
      ["u1", "Error [unknown_tool]: Unknown tool: no_such_tool"],
    ]);
    expect(log.runs).toEqual(["probe_read", "probe_exec"]);
    expect(approval.requests.map((seen) => seen.arguments)).toEqual([
      { command: "Get-Date" },
      { command: "Remove-Item *" },
    ]);
    expect(audit.records.map((record) => record.slice(0, 3))).toEqual([
      ["probe_read", "allow", "default"],
      ["probe_write", "deny", "deny-writes"],
      ["probe_exec", "allow", "user"],
      ["probe_exec", "deny", "user"],
    ]);
  });
});

/** The P03 agent on the real OpenAI SDK against a loopback server answering `replies` in order. */
async function loopbackAgent(
  replies: readonly LoopbackReply[],
  options: { timeoutMs?: number; approve?: boolean; maxTurns?: number } = {},
) {
  const server = await startLoopbackOpenAI(
    (_body, index) => replies[index] ?? { json: apiError("no more replies"), status: 500 },
  );
  servers.push(server);
  const model: ModelClient = new OpenAIChatModel({
    apiKey: "test-key",
    model: "loopback",
    baseURL: server.baseURL,
    maxRetries: 0,
    timeoutMs: options.timeoutMs ?? 5_000,
  });
  const runner = new FakeCommandRunner();
  const approval = new CountingApproval(options.approve ?? false);
  const audit = new RecordingAudit();
  const agent = buildAgent(P03, {
    model,
    workspace: await tempFolder(),
    commandRunner: runner,
    approvalProvider: approval,
    auditSink: audit,
    ...(options.maxTurns === undefined ? {} : { maxTurns: options.maxTurns }),
  });
  return { server, agent, runner, approval, audit };
}

/** Runs `agent` to its failure: an `AgentRunError`, after which the history the agent keeps is still paired. */
async function runError(agent: AgentRunner): Promise<AgentRunError> {
  try {
    await agent.run("go");
  } catch (error) {
    expect(error).toBeInstanceOf(AgentRunError);
    expect(() => validateToolPairing(agent.history)).not.toThrow();
    return error as AgentRunError;
  }
  throw new Error("expected the run to fail, but it finished");
}

const shellCall = (id: string) => ({ id, name: "shell", arguments: '{"command":"Get-ChildItem"}' });
const roles = (history: readonly ChatMessage[]) => history.map((message) => message.role);

describe("model faults over the real SDK end in a tool error code or an AgentRunError", () => {
  it("invalid JSON arguments and an unknown tool become paired tool errors and no handler or approval runs", async () => {
    const { agent, runner, approval, audit } = await loopbackAgent([
      {
        json: completion({
          toolCalls: [
            { id: "c1", name: "shell", arguments: '{"command": "Get-ChildItem"' },
            { id: "c2", name: "rm_rf", arguments: "{}" },
            { id: "c3", name: "write_file", arguments: "[1,2]" },
          ],
        }),
      },
      { json: completion({ content: "gave up" }) },
    ]);
    const result = await agent.run("go");

    expect(result.finalText).toBe("gave up");
    expect(toolMessages(result.history)).toEqual([
      ["c1", "Error [invalid_json]: Arguments of shell must be a JSON object"],
      ["c2", "Error [unknown_tool]: Unknown tool: rm_rf"],
      ["c3", "Error [invalid_json]: Arguments of write_file must be a JSON object"],
    ]);
    expect(runner.calls).toEqual([]);
    expect(approval.requests).toEqual([]);
    expect(audit.records).toEqual([]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
  });

  it.each<[string, LoopbackReply, string | RegExp]>([
    [
      "empty choices",
      { json: { id: "x", object: "chat.completion", choices: [] } },
      "The model provider sent a malformed reply: the response has no choices",
    ],
    [
      "a tool call without an id",
      {
        json: {
          choices: [
            {
              index: 0,
              finish_reason: "tool_calls",
              message: {
                role: "assistant",
                content: null,
                tool_calls: [{ type: "function", function: { name: "shell", arguments: "{}" } }],
              },
            },
          ],
        },
      },
      "The model provider sent a malformed reply: tool_calls[0].id is missing",
    ],
    [
      "a tool call without a function name",
      {
        json: {
          choices: [
            {
              index: 0,
              finish_reason: "tool_calls",
              message: {
                role: "assistant",
                content: null,
                tool_calls: [{ id: "c1", type: "function", function: { arguments: "{}" } }],
              },
            },
          ],
        },
      },
      "The model provider sent a malformed reply: tool_calls[0].function.name is missing",
    ],
    [
      "an HTML page with status 200",
      { raw: "<html>bad gateway</html>", contentType: "text/html" },
      "The model provider sent a malformed reply: the response is not a JSON object",
    ],
    [
      "HTTP 429",
      { json: apiError("Rate limit reached"), status: 429 },
      "The model provider answered HTTP 429 (rate limited; wait and retry): 429 Rate limit reached",
    ],
    ["HTTP 500", { json: apiError("boom"), status: 500 }, "The model provider answered HTTP 500: 500 boom"],
    ["a connection reset", { destroy: true }, "Could not reach the model provider: Connection error."],
  ])("%s on the first request is a ModelCallError and nothing runs", async (_name, reply, message) => {
    const { server, agent, runner, approval, audit } = await loopbackAgent([reply]);
    const error = await runError(agent);

    expect(error).toBeInstanceOf(ModelCallError);
    expect(error.message).toEqual(message);
    expect(roles(agent.history)).toEqual(["user"]);
    expect(server.requests).toHaveLength(1);
    expect(runner.calls).toEqual([]);
    expect(approval.requests).toEqual([]);
    expect(audit.records).toEqual([]);
  });

  it("a body slower than the client timeout is a ModelCallError that says it timed out", async () => {
    const { agent } = await loopbackAgent([{ json: completion({ content: "late" }), delayMs: 3_000 }], {
      timeoutMs: 150,
    });
    const error = await runError(agent);
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error.message).toBe("The model request timed out; check OPENAI_BASE_URL and the provider's status");
  });

  it("a failure on the second request keeps the first turn's call and its paired answer in the error's history", async () => {
    const { agent, runner, approval } = await loopbackAgent([
      { json: completion({ toolCalls: [shellCall("s1")] }) },
      { json: apiError("boom"), status: 500 },
    ]);
    const error = await runError(agent);

    expect(error).toBeInstanceOf(ModelCallError);
    expect(roles(agent.history)).toEqual(["user", "assistant", "tool"]);
    expect(toolMessages(agent.history)).toEqual([
      ["s1", "Error [permission_denied]: The user did not approve this tool call"],
    ]);
    expect(approval.requests).toHaveLength(1);
    expect(runner.calls).toEqual([]);
  });

  it("finish_reason length is an IncompleteModelReplyError, and the half answer never enters the history", async () => {
    const { agent } = await loopbackAgent([{ json: completion({ content: "partial", finishReason: "length" }) }]);
    const error = await runError(agent);
    expect(error).toBeInstanceOf(IncompleteModelReplyError);
    expect(error.message).toBe("Model output reached the token limit");
    expect(roles(agent.history)).toEqual(["user"]);
  });

  it("finish_reason content_filter is an AgentRunError of its own, and the filtered text never enters the history", async () => {
    const { agent } = await loopbackAgent([
      { json: completion({ content: "partial", finishReason: "content_filter" }) },
    ]);
    const error = await runError(agent);
    expect(error.name).toBe("AgentRunError");
    expect(error).not.toBeInstanceOf(IncompleteModelReplyError);
    expect(error.message).toBe("Model response was blocked by the content filter");
    expect(roles(agent.history)).toEqual(["user"]);
  });

  it("a reply with neither text nor tool calls is an AgentRunError that says so", async () => {
    const { agent } = await loopbackAgent([{ json: completion({ content: null }) }]);
    const error = await runError(agent);
    expect(error.name).toBe("AgentRunError");
    expect(error.message).toBe("Model stopped without final text or tool calls");
    expect(roles(agent.history)).toEqual(["user", "assistant"]);
  });

  it("a model that never stops calling tools is an AgentLimitError after maxTurns, with every call paired", async () => {
    const { agent, server, approval } = await loopbackAgent(
      [1, 2, 3].map((n) => ({ json: completion({ toolCalls: [shellCall(`s${n}`)] }) })),
      { maxTurns: 3 },
    );
    const error = await runError(agent);
    expect(error).toBeInstanceOf(AgentLimitError);
    expect(error.message).toBe("Agent exceeded maxTurns=3");
    expect(toolMessages(agent.history).map(([id]) => id)).toEqual(["s1", "s2", "s3"]);
    expect(server.requests).toHaveLength(3);
    expect(approval.requests).toHaveLength(3);
  });

  // The adapter refuses a reply whose calls share an id, so none of them reaches the loop.
  it("a reply that repeats a tool call id is a ModelCallError before any of its calls runs", async () => {
    const { agent, runner, approval } = await loopbackAgent(
      [{ json: completion({ toolCalls: [shellCall("dup"), shellCall("dup")] }) }],
      { approve: true },
    );
    const error = await runError(agent);
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error.message).toBe("The model provider sent a malformed reply: two tool calls share one id");
    expect(roles(agent.history)).toEqual(["user"]);
    expect(runner.calls).toEqual([]);
    expect(approval.requests).toEqual([]);
  });
});

describe("runCli exit codes under faults", () => {
  async function cli(argv: readonly string[], env: CliIO["env"]) {
    const stdin = new PassThrough();
    stdin.end();
    const stdout = new Sink();
    const stderr = new Sink();
    const cwd = await tempFolder();
    // As `npm run ch03` calls it: the fixed entry puts `run --chapter 3` in front.
    const code = await runCli(
      ["run", "--chapter", "3", ...argv],
      { env, cwd, stdin, stdinIsTTY: false, stdout, stderr, stderrIsTTY: false },
      "ch03",
    );
    const printed = afterSettingsLine(stderr.text, argv, env);
    return { code, stdout: stdout.text, stderr: printed.split("\n").filter((line) => line !== "") };
  }

  async function server(replies: readonly LoopbackReply[]) {
    const loopback = await startLoopbackOpenAI(
      (_body, index) => replies[index] ?? { json: apiError("no more replies"), status: 500 },
    );
    servers.push(loopback);
    return loopback;
  }

  const envFor = (loopback: LoopbackOpenAI): CliIO["env"] => ({
    OPENAI_API_KEY: "test-key",
    OPENAI_BASE_URL: loopback.baseURL,
    OPENAI_MODEL: "loopback",
  });

  it("a malformed provider reply exits 1 with one 运行失败 line and nothing on stdout", async () => {
    const loopback = await server([{ json: { choices: [] } }]);
    const run = await cli(["--prompt", "hi", "--quiet"], envFor(loopback));
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toEqual(["运行失败: The model provider sent a malformed reply: the response has no choices"]);
    expect(loopback.requests).toHaveLength(1);
  });

  it("HTTP 400 from the provider exits 1 after one request", async () => {
    const loopback = await server([{ json: apiError("bad request"), status: 400 }]);
    const run = await cli(["--prompt", "hi", "--quiet"], envFor(loopback));
    expect(run.code).toBe(1);
    expect(run.stderr).toEqual(["运行失败: The model provider answered HTTP 400: 400 bad request"]);
    expect(loopback.requests).toHaveLength(1);
  });

  it("running out of turns exits 1 and says so", async () => {
    const loopback = await server([{ json: completion({ toolCalls: [shellCall("s1")] }) }]);
    const run = await cli(["--prompt", "hi", "--quiet", "--max-turns", "1"], envFor(loopback));
    expect(run.code).toBe(1);
    expect(run.stderr.at(-1)).toBe("运行失败: Agent exceeded maxTurns=1");
  });

  // Everything the model wrote is printed through visible(): ESC[8m could otherwise hide the next 参数 line.
  it("the CLI never writes a control character the model sent to the terminal", async () => {
    const loopback = await server([
      {
        json: completion({
          toolCalls: [
            { id: "c1", name: "shell\u001b]52;c;aGk=\u0007", arguments: "{}" },
            { id: "c2", name: "shell", arguments: "\u001b[8m{" },
          ],
        }),
      },
      { json: completion({ content: "done" }) },
    ]);
    const run = await cli(["--prompt", "hi"], envFor(loopback));
    expect(run.code).toBe(0);
    // stderr is not a TTY here, so the CLI itself writes no escape sequence at all.
    // eslint-disable-next-line no-control-regex -- control characters are exactly what this looks for
    expect(run.stderr.join("\n")).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/);
  });

  it.each<[string, string[], (loopback: LoopbackOpenAI) => CliIO["env"], string[]]>([
    [
      "a missing API key and model",
      ["--prompt", "hi"],
      (loopback) => ({ OPENAI_BASE_URL: loopback.baseURL }),
      [
        "配置错误: Missing required settings: OPENAI_API_KEY, OPENAI_MODEL",
        expect.stringMatching(/^ {2}looked in the environment; there is no \.env in /),
      ],
    ],
    [
      "a base URL that is not a URL",
      ["--prompt", "hi"],
      () => ({ OPENAI_API_KEY: "k", OPENAI_BASE_URL: "::nope", OPENAI_MODEL: "m" }),
      ['配置错误: OPENAI_BASE_URL="::nope" is not a URL'],
    ],
  ])("%s exits 2 with 配置错误 and never contacts the model", async (_name, argv, env, stderr) => {
    const loopback = await server([{ json: completion({ content: "should not be asked" }) }]);
    const run = await cli(argv, env(loopback));
    expect(run).toEqual({ code: 2, stdout: "", stderr });
    expect(loopback.requests).toHaveLength(0);
  });

  it.each<[string, string[], string]>([
    [
      "a malformed --max-turns",
      ["--prompt", "hi", "--max-turns", "ten"],
      '--max-turns must be a whole number from 1 to 1000, not "ten"',
    ],
    [
      "--max-turns 0",
      ["--prompt", "hi", "--max-turns", "0"],
      '--max-turns must be a whole number from 1 to 1000, not "0"',
    ],
    [
      "an unknown flag",
      ["--prompt", "hi", "--yolo"],
      'Unknown argument: --yolo\n  a prompt of several words or lines needs quotes (--prompt "…"), or put it in a file: --prompt-file <path>',
    ],
    [
      "a missing workspace",
      ["--prompt", "hi", "--workspace", "/nonexistent/ch03-faults"],
      "workspace /nonexistent/ch03-faults does not exist: create it first (New-Item -ItemType Directory " +
        "'/nonexistent/ch03-faults')\n  in bash: mkdir -p '/nonexistent/ch03-faults'",
    ],
    [
      "no prompt",
      [],
      '--prompt is required\n  npm run ch03 -- --prompt "<task>" (or --prompt-file <path>); npm run demo:ch03 needs neither',
    ],
  ])("%s exits 1 with one 运行失败 line (and a hint) and never contacts the model", async (_name, argv, message) => {
    const loopback = await server([{ json: completion({ content: "should not be asked" }) }]);
    const run = await cli(argv, envFor(loopback));
    expect(run).toEqual({ code: 1, stdout: "", stderr: `运行失败: ${message}`.split("\n") });
    expect(loopback.requests).toHaveLength(0);
  });
});
