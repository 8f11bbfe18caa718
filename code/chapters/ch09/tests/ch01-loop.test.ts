import { mkdtemp, realpath, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ReplayModel } from "../src/adapters/replay-model.js";
import { buildAgent, SYSTEM_PROMPT } from "../src/bootstrap.js";
import type { AgentEvent } from "../src/core/agent-events.js";
import {
  AgentLimitError,
  AgentRunError,
  AgentRunner,
  IncompleteModelReplyError,
  ModelCallError,
} from "../src/core/loop.js";
import {
  assistantMessage,
  systemMessage,
  toolMessage,
  userMessage,
  validateToolPairing,
  type ChatMessage,
} from "../src/core/messages.js";
import type { ModelReply } from "../src/core/model.js";
import { PermissionPolicy, type ApprovalProvider } from "../src/core/permissions.js";
import { P01 } from "../src/core/profiles.js";
import { ToolRegistry, toolSuccess, type ToolContext, type ToolDefinition } from "../src/core/tools.js";
import { commandResult, CountingApproval, FakeCommandRunner } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";
import { SHELL_TOOL } from "./support/shell-tool.js";

// From chapter 3 the permission policy asks about the shell, with its own reason and fail-closed answers.
const REASON = "Shell execution requires approval";
const DENIED = "Error [permission_denied]: The user did not approve this tool call";
const INVALID = "Error [permission_denied]: Approval provider returned an invalid decision";
const FAILED_CLOSED = "Error [permission_denied]: Approval provider failed; request denied";

let workspace: string;
beforeEach(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "ch01-loop-")));
});
afterEach(async () => {
  await rm(workspace, { recursive: true, force: true });
});

interface AgentParts {
  readonly runner?: FakeCommandRunner;
  readonly approval?: ApprovalProvider;
  readonly maxTurns?: number;
  readonly onEvent?: (event: AgentEvent) => void;
}

/** The chapter 1 agent as bootstrap builds it, with the model, runner and approval provider of the test. */
function agent(model: ScriptedModel, parts: AgentParts = {}): AgentRunner {
  return buildAgent(P01, {
    model,
    workspace,
    commandRunner: parts.runner ?? new FakeCommandRunner(),
    ...(parts.approval === undefined ? {} : { approvalProvider: parts.approval }),
    ...(parts.maxTurns === undefined ? {} : { maxTurns: parts.maxTurns }),
    ...(parts.onEvent === undefined ? {} : { onEvent: parts.onEvent }),
  });
}

/** A loop over `tools` with a plain system prompt, for rules that need a tool other than shell. */
function loopOver(model: ScriptedModel, tools: ToolRegistry, maxTurns?: number): AgentRunner {
  return new AgentRunner({
    model,
    tools,
    systemPrompt: "s",
    workspace,
    ...(maxTurns === undefined ? {} : { maxTurns }),
  });
}

/** A tool with no arguments that records the context it ran with and answers `ok`. */
function probeTool(name: string, contexts: ToolContext[] = []): ToolDefinition<Record<string, never>> {
  return {
    name,
    description: `the ${name} probe`,
    inputSchema: z.strictObject({}),
    effect: "read",
    handler: (_input, context) => {
      contexts.push(context);
      return Promise.resolve(toolSuccess("ok"));
    },
  };
}

/** The error a promise rejects with; fails the test if it resolves. */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected the run to fail, but it finished");
}

describe("the chapter 1 loop", () => {
  it("runs the book's exchange: a shell call, its paired result, then the final text", async () => {
    const shell = call("call_abc123", "shell", { command: "Write-Output 42" });
    const model = new ScriptedModel([toolTurn(shell), textTurn("命令执行成功，输出是 42。")]);
    const runner = new FakeCommandRunner(commandResult({ output: "42" }));
    const approval = new CountingApproval(true);

    const result = await agent(model, { runner, approval }).run("运行 Write-Output 42，并告诉我结果");

    const history = [
      userMessage("运行 Write-Output 42，并告诉我结果"),
      assistantMessage(null, [shell]),
      toolMessage("42", "call_abc123"),
      assistantMessage("命令执行成功，输出是 42。"),
    ];
    expect(result).toStrictEqual({ finalText: "命令执行成功，输出是 42。", history, turns: 2 });
    expect(model.requests).toStrictEqual([
      { messages: [systemMessage(SYSTEM_PROMPT), ...history.slice(0, 1)], tools: [SHELL_TOOL] },
      { messages: [systemMessage(SYSTEM_PROMPT), ...history.slice(0, 3)], tools: [SHELL_TOOL] },
    ]);
    expect(runner.calls).toStrictEqual([{ command: "Write-Output 42", cwd: workspace }]);
    expect(approval.requests).toStrictEqual([
      { toolName: "shell", reason: REASON, arguments: { command: "Write-Output 42" } },
    ]);
  });

  it("keeps the system prompt out of the history and puts it first in every request", async () => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "x" })), textTurn("done")]);
    const result = await agent(model).run("go");
    expect(result.history.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(model.requests.map((request) => request.messages[0])).toStrictEqual([
      { role: "system", content: SYSTEM_PROMPT },
      { role: "system", content: SYSTEM_PROMPT },
    ]);
  });

  it("answers every call of one turn with its own paired result, in call order, in one turn", async () => {
    const model = new ScriptedModel([
      toolTurn(call("c1", "shell", { command: "Get-ChildItem" }), call("c2", "shell", { command: "Get-Date" })),
      textTurn("There is a.txt."),
    ]);
    const runner = new FakeCommandRunner((command) => commandResult({ output: `out of ${command}` }));
    const approval = new CountingApproval(true);
    const result = await agent(model, { runner, approval }).run("what is here?");

    expect(result.turns).toBe(2);
    expect(runner.calls).toStrictEqual([
      { command: "Get-ChildItem", cwd: workspace },
      { command: "Get-Date", cwd: workspace },
    ]);
    expect(approval.requests).toStrictEqual([
      { toolName: "shell", reason: REASON, arguments: { command: "Get-ChildItem" } },
      { toolName: "shell", reason: REASON, arguments: { command: "Get-Date" } },
    ]);
    expect(toolMessages(result.history)).toEqual([
      ["c1", "out of Get-ChildItem"],
      ["c2", "out of Get-Date"],
    ]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
  });

  it("a failed command is data, not an exception: the model reads shell_failed and the loop goes on", async () => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "exit 1" })), textTurn("it failed")]);
    const runner = new FakeCommandRunner(commandResult({ output: "boom", exitCode: 1 }));
    const result = await agent(model, { runner }).run("go");
    expect(result.finalText).toBe("it failed");
    expect(toolMessages(result.history)).toEqual([["c1", "Error [shell_failed]: PowerShell exited with code 1\nboom"]]);
  });

  it("returns the final text exactly as the model wrote it", async () => {
    const result = await agent(new ScriptedModel([textTurn("  two spaces around  ")])).run("go");
    expect(result).toStrictEqual({
      finalText: "  two spaces around  ",
      history: [userMessage("go"), assistantMessage("  two spaces around  ")],
      turns: 1,
    });
  });
});

describe("approval in the chapter 1 loop", () => {
  it("a refused shell call does not run and is answered as permission_denied, paired with its call", async () => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "Remove-Item x" })), textTurn("ok")]);
    const runner = new FakeCommandRunner();
    const approval = new CountingApproval(false);
    const result = await agent(model, { runner, approval }).run("go");
    expect(approval.requests).toStrictEqual([
      { toolName: "shell", reason: REASON, arguments: { command: "Remove-Item x" } },
    ]);
    expect(runner.calls).toEqual([]);
    expect(toolMessages(result.history)).toEqual([["c1", DENIED]]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
  });

  it.each<[string, unknown]>([
    ['the string "yes"', "yes"],
    ['the string "true"', "true"],
    ["the number 1", 1],
    ["an object", { approved: true }],
    ["undefined", undefined],
  ])("only a real allow decision allows a call: an approver answering %s refuses it", async (_name, answer) => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "x" })), textTurn("ok")]);
    const runner = new FakeCommandRunner();
    const approval = new CountingApproval(() => Promise.resolve(answer));
    const result = await agent(model, { runner, approval }).run("go");
    expect(approval.requests).toHaveLength(1);
    expect(runner.calls).toEqual([]);
    expect(toolMessages(result.history)).toEqual([["c1", INVALID]]);
  });

  it.each<[string, ApprovalProvider]>([
    ["rejects", { decide: () => Promise.reject(new Error("terminal gone")) }],
    [
      "throws before it returns a promise",
      {
        decide: () => {
          throw new Error("terminal gone");
        },
      },
    ],
  ])("an approver that %s fails closed: the call is refused and does not run", async (_name, approval) => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "x" })), textTurn("ok")]);
    const runner = new FakeCommandRunner();
    const result = await agent(model, { runner, approval }).run("go");
    expect(runner.calls).toEqual([]);
    expect(toolMessages(result.history)).toEqual([["c1", FAILED_CLOSED]]);
    expect(model.requests[1]?.messages.at(-1)).toStrictEqual(toolMessage(FAILED_CLOSED, "c1"));
  });

  it("a tool that is not execute runs without asking", async () => {
    const registry = new ToolRegistry();
    registry.register(probeTool("probe"));
    const approval = new CountingApproval(false);
    const model = new ScriptedModel([toolTurn(call("c1", "probe", {})), textTurn("ok")]);
    const permissionPolicy = new PermissionPolicy({ approval });
    const runner = new AgentRunner({ model, tools: registry, systemPrompt: "s", workspace, permissionPolicy });
    const result = await runner.run("go");
    expect(approval.requests).toEqual([]);
    expect(toolMessages(result.history)).toEqual([["c1", "ok"]]);
  });
});

describe("calls that never reach approval or the runner", () => {
  it('a call with a wrong field ({"cmd":"Get-ChildItem"}) reaches nobody: not the approver, not the runner', async () => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", '{"cmd":"Get-ChildItem"}')), textTurn("ok")]);
    const runner = new FakeCommandRunner();
    const approval = new CountingApproval(true);
    const result = await agent(model, { runner, approval }).run("go");

    expect(approval.requests).toHaveLength(0);
    expect(runner.calls).toHaveLength(0);
    expect(result.history).toStrictEqual([
      userMessage("go"),
      assistantMessage(null, [call("c1", "shell", '{"cmd":"Get-ChildItem"}')]),
      toolMessage(
        'Error [invalid_arguments]: Invalid arguments for shell: command: Invalid input: expected string, received undefined; (arguments): Unrecognized key: "cmd"',
        "c1",
      ),
      assistantMessage("ok"),
    ]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
  });

  it.each<[string, string, string, string]>([
    ["an unknown tool", "read_file", '{"path":"x"}', "Error [unknown_tool]: Unknown tool: read_file"],
    [
      "arguments that are not JSON",
      "shell",
      "{not json",
      "Error [invalid_json]: Arguments of shell must be a JSON object",
    ],
    [
      "JSON that is not an object",
      "shell",
      '["Get-Date"]',
      "Error [invalid_json]: Arguments of shell must be a JSON object",
    ],
    [
      "a command that is not a string",
      "shell",
      '{"command":5}',
      "Error [invalid_arguments]: Invalid arguments for shell: command: Invalid input: expected string, received number",
    ],
    [
      "an empty command",
      "shell",
      '{"command":""}',
      "Error [invalid_arguments]: Invalid arguments for shell: command: Too small: expected string to have >=1 characters",
    ],
    [
      "no arguments at all",
      "shell",
      "{}",
      "Error [invalid_arguments]: Invalid arguments for shell: command: Invalid input: expected string, received undefined",
    ],
    [
      "an extra field",
      "shell",
      '{"command":"x","extra":true}',
      'Error [invalid_arguments]: Invalid arguments for shell: (arguments): Unrecognized key: "extra"',
    ],
  ])("%s becomes a paired tool error without asking or running anything", async (_name, tool, args, content) => {
    const model = new ScriptedModel([toolTurn(call("c1", tool, args)), textTurn("ok")]);
    const runner = new FakeCommandRunner();
    const approval = new CountingApproval(true);
    const result = await agent(model, { runner, approval }).run("go");
    expect(toolMessages(result.history)).toEqual([["c1", content]]);
    expect(approval.requests).toHaveLength(0);
    expect(runner.calls).toHaveLength(0);
    expect(() => validateToolPairing(result.history)).not.toThrow();
  });

  it("a tool that throws becomes tool_execution_error with no stack trace, and the loop goes on", async () => {
    const registry = new ToolRegistry();
    registry.register({
      ...probeTool("boom"),
      handler: () => Promise.reject(new Error("secret internal detail\n    at frame (file.ts:1:1)")),
    });
    const model = new ScriptedModel([toolTurn(call("c1", "boom", {})), textTurn("ok")]);
    const result = await loopOver(model, registry).run("go");
    expect(toolMessages(result.history)).toEqual([
      ["c1", "Error [tool_execution_error]: Tool boom failed unexpectedly"],
    ]);
    expect(result.finalText).toBe("ok");
  });
});

describe("turn limits", () => {
  it("with maxTurns 1, a first turn that wants a tool runs it and then fails: Agent exceeded maxTurns=1", async () => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "x" })), textTurn("never asked")]);
    const runner = new FakeCommandRunner();
    const agentRunner = agent(model, { runner, maxTurns: 1 });
    const error = await rejection(agentRunner.run("go"));

    expect(error).toBeInstanceOf(AgentLimitError);
    expect(error).toBeInstanceOf(AgentRunError);
    expect(error.name).toBe("AgentLimitError");
    expect(error.message).toBe("Agent exceeded maxTurns=1");
    expect(model.requests).toHaveLength(1);
    expect(runner.calls).toHaveLength(1);
    expect(agentRunner.history).toStrictEqual([
      userMessage("go"),
      assistantMessage(null, [call("c1", "shell", { command: "x" })]),
      toolMessage("a.txt", "c1"),
    ]);
    expect(() => validateToolPairing(agentRunner.history)).not.toThrow();
  });

  it("counts model calls, not tool calls, and stops after 20 when no maxTurns is given", async () => {
    const replies = Array.from({ length: 21 }, (_, n) =>
      toolTurn(call(`c${n}a`, "shell", { command: "x" }), call(`c${n}b`, "shell", { command: "y" })),
    );
    const model = new ScriptedModel(replies);
    const runner = new FakeCommandRunner();
    const agentRunner = agent(model, { runner });
    const error = await rejection(agentRunner.run("go"));
    expect(error).toBeInstanceOf(AgentLimitError);
    expect(error.message).toBe("Agent exceeded maxTurns=20");
    expect(model.requests).toHaveLength(20);
    expect(runner.calls).toHaveLength(40);
    expect(() => validateToolPairing(agentRunner.history)).not.toThrow();
  });

  it("a final answer on the last allowed turn is a success", async () => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "x" })), textTurn("done")]);
    const result = await agent(model, { maxTurns: 2 }).run("go");
    expect(result.finalText).toBe("done");
    expect(result.turns).toBe(2);
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])(
    "maxTurns %s is refused when the agent is built: maxTurns must be a positive integer",
    (maxTurns) => {
      const model = new ScriptedModel([]);
      expect(() => agent(model, { maxTurns })).toThrow(new RangeError("maxTurns must be a positive integer"));
      expect(() => loopOver(model, new ToolRegistry(), maxTurns)).toThrow(RangeError);
      expect(model.requests).toEqual([]);
    },
  );
});

describe("replies that must not pass for an answer", () => {
  it.each<[string, ModelReply, typeof AgentRunError, string]>([
    [
      "a text reply cut at the token limit",
      textTurn("half an answ", "length"),
      IncompleteModelReplyError,
      "Model output reached the token limit",
    ],
    [
      "tool calls cut at the token limit",
      { ...toolTurn(call("c1", "shell", { command: "x" })), finishReason: "length" },
      IncompleteModelReplyError,
      "Model output reached the token limit",
    ],
    [
      "a reply blocked by the content filter",
      textTurn(null, "content_filter"),
      AgentRunError,
      "Model response was blocked by the content filter",
    ],
  ])("%s fails the run, runs nothing and keeps the reply out of the history", async (_name, reply, type, message) => {
    const model = new ScriptedModel([reply]);
    const runner = new FakeCommandRunner();
    const agentRunner = agent(model, { runner });
    const error = await rejection(agentRunner.run("go"));
    expect(error).toBeInstanceOf(type);
    expect(error.constructor).toBe(type);
    expect(error.message).toBe(message);
    expect(runner.calls).toEqual([]);
    expect(agentRunner.history).toStrictEqual([userMessage("go")]);
  });

  it.each<[string, string | null]>([
    ["no text", null],
    ["empty text", ""],
    ["only whitespace", " \n\t "],
  ])("a reply with %s and no tool calls fails: Model stopped without final text or tool calls", async (_n, text) => {
    const agentRunner = agent(new ScriptedModel([textTurn(text)]));
    const error = await rejection(agentRunner.run("go"));
    expect(error.constructor).toBe(AgentRunError);
    expect(error.message).toBe("Model stopped without final text or tool calls");
    expect(agentRunner.history).toStrictEqual([userMessage("go"), assistantMessage(text)]);
  });

  it("a model call that fails ends the run with that error, and the history so far stays readable", async () => {
    const recorded: ChatMessage[] = [
      userMessage("go"),
      assistantMessage(null, [call("c1", "shell", { command: "x" })]),
    ];
    const agentRunner = buildAgent(P01, {
      model: new ReplayModel(recorded),
      workspace,
      commandRunner: new FakeCommandRunner(),
    });
    const error = await rejection(agentRunner.run("go"));
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error.message).toBe("The replay has no assistant turn 2; it recorded 1");
    expect(agentRunner.history).toStrictEqual([...recorded, toolMessage("a.txt", "c1")]);
  });
});

describe("what the loop hands out cannot change it", () => {
  it("the result, its history, every request and every message are frozen", async () => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "x" })), textTurn("done")]);
    const result = await agent(model).run("go");
    expect(Object.isFrozen(result)).toBe(true);
    expect(Object.isFrozen(result.history)).toBe(true);
    expect(result.history.every((message) => Object.isFrozen(message))).toBe(true);
    for (const request of model.requests) {
      expect(Object.isFrozen(request)).toBe(true);
      expect(Object.isFrozen(request.messages)).toBe(true);
      expect(request.messages.every((message) => Object.isFrozen(message))).toBe(true);
    }
    expect(() => (result.history as ChatMessage[]).push(userMessage("forged"))).toThrow(TypeError);
  });

  it("the history getter returns a new frozen copy each time, also after a failed run", async () => {
    const agentRunner = agent(new ScriptedModel([textTurn(null)]));
    await rejection(agentRunner.run("go"));
    const first = agentRunner.history;
    expect(first).toStrictEqual([userMessage("go"), assistantMessage(null)]);
    expect(Object.isFrozen(first)).toBe(true);
    expect(agentRunner.history).not.toBe(first);
    expect(agentRunner.history).toStrictEqual(first);
  });

  it("a request sent earlier is not changed by later turns", async () => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "x" })), textTurn("done")]);
    await agent(model).run("go");
    expect(model.requests[0]?.messages).toStrictEqual([systemMessage(SYSTEM_PROMPT), userMessage("go")]);
  });
});

describe("tools and context", () => {
  it("takes one snapshot per turn: a tool registered during a turn is neither offered nor run until the next", async () => {
    const registry = new ToolRegistry();
    registry.register({
      ...probeTool("installer"),
      handler: () => {
        registry.register(probeTool("late"));
        return Promise.resolve(toolSuccess("installed"));
      },
    });
    const model = new ScriptedModel([
      toolTurn(call("c1", "installer", {}), call("c2", "late", {})),
      toolTurn(call("c3", "late", {})),
      textTurn("done"),
    ]);
    const result = await loopOver(model, registry).run("go");
    expect(model.requests.map((request) => request.tools.map((tool) => tool.function.name))).toEqual([
      ["installer"],
      ["installer", "late"],
      ["installer", "late"],
    ]);
    expect(toolMessages(result.history)).toEqual([
      ["c1", "installed"],
      ["c2", "Error [unknown_tool]: Unknown tool: late"],
      ["c3", "ok"],
    ]);
  });

  it('hands every tool the frozen context { workspace, identity: "user" }', async () => {
    const contexts: ToolContext[] = [];
    const registry = new ToolRegistry();
    registry.register(probeTool("probe", contexts));
    const model = new ScriptedModel([toolTurn(call("c1", "probe", {}), call("c2", "probe", {})), textTurn("done")]);
    await loopOver(model, registry).run("go");
    expect(contexts).toStrictEqual([
      { workspace, identity: "user" },
      { workspace, identity: "user" },
    ]);
    expect(contexts.every((context) => Object.isFrozen(context))).toBe(true);
  });

  it("buildAgent runs commands in the real path of the workspace it was given", async () => {
    const link = `${workspace}-link`;
    await symlink(workspace, link);
    try {
      const runner = new FakeCommandRunner();
      const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "x" })), textTurn("done")]);
      await buildAgent(P01, { model, workspace: link, commandRunner: runner }).run("go");
      expect(runner.calls).toStrictEqual([{ command: "x", cwd: workspace }]);
    } finally {
      await rm(link);
    }
  });

  it("buildAgent accepts only the profile object profileForChapter returns", () => {
    const forged = { chapter: 1, capabilities: P01.capabilities };
    expect(() => buildAgent(forged, { model: new ScriptedModel([]), workspace })).toThrow(
      new Error("profile must be a fixed chapter profile"),
    );
  });

  it("reports each step as an event, in order, with the call and the result the model reads", async () => {
    const events: AgentEvent[] = [];
    const shell = call("c1", "shell", { command: "x" });
    const model = new ScriptedModel([toolTurn(shell), textTurn("done")]);
    await agent(model, { onEvent: (event) => events.push(event) }).run("go");
    expect(events).toStrictEqual([
      { type: "model_request", turn: 1 },
      { type: "tool_call", call: shell },
      { type: "tool_result", call: shell, result: toolSuccess("a.txt") },
      { type: "model_request", turn: 2 },
    ]);
  });
});
