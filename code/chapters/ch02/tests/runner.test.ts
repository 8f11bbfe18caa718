import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildAgent } from "../src/bootstrap.js";
import { AgentLimitError, AgentRunError, IncompleteModelReplyError } from "../src/core/agent-errors.js";
import type { AgentEvent } from "../src/core/agent-events.js";
import { AgentRunner } from "../src/core/agent-runner.js";
import type { CommandRunner } from "../src/core/command-runner.js";
import { validateToolPairing } from "../src/core/messages.js";
import { P01, profileForChapter } from "../src/core/profiles.js";
import { z } from "zod";
import { ToolRegistry } from "../src/core/tool-registry.js";
import { toolSuccess, type ToolResult } from "../src/core/tool-result.js";
import { CountingApproval, RecordingCommandRunner, shellRequest } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";

let workspace: string;
beforeEach(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "ch01-runner-")));
});
afterEach(async () => {
  await rm(workspace, { recursive: true, force: true });
});

function agent(model: ScriptedModel, runner: CommandRunner, approval?: CountingApproval, maxTurns?: number) {
  return buildAgent(P01, {
    model,
    workspace,
    commandRunner: runner,
    ...(approval ? { approvalProvider: approval } : {}),
    ...(maxTurns ? { maxTurns } : {}),
  });
}

describe("the chapter 1 loop", () => {
  it("returns the final text after tool turns, with every result paired to its call id", async () => {
    const model = new ScriptedModel([
      toolTurn(call("c1", "shell", { command: "Get-ChildItem" }), call("c2", "shell", { command: "Get-Date" })),
      textTurn("  There is a.txt.  "),
    ]);
    const runner = new RecordingCommandRunner();
    const approval = new CountingApproval(() => Promise.resolve(true));
    const result = await agent(model, runner, approval).run("what is here?");

    expect(result.finalText).toBe("There is a.txt.");
    expect(result.turns).toBe(2);
    expect(runner.commands).toEqual([shellRequest("Get-ChildItem", workspace), shellRequest("Get-Date", workspace)]);
    expect(approval.requests).toEqual([
      { toolName: "shell", reason: "Shell execution requires approval", arguments: { command: "Get-ChildItem" } },
      { toolName: "shell", reason: "Shell execution requires approval", arguments: { command: "Get-Date" } },
    ]);
    expect(toolMessages(result.history)).toEqual([
      ["c1", "a.txt"],
      ["c2", "a.txt"],
    ]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(model.requests[1]?.messages.slice(-3).map((m) => m.role)).toEqual(["assistant", "tool", "tool"]);
    expect(model.requests[0]?.tools.map((t) => t.function.name)).toEqual(["shell"]);
  });

  it("sends the system prompt and the user's prompt first", async () => {
    const model = new ScriptedModel([textTurn("hi")]);
    await agent(model, new RecordingCommandRunner()).run("hello");
    const [system, user] = model.requests[0]?.messages ?? [];
    expect(system?.role).toBe("system");
    expect(system?.content).toContain(workspace);
    expect(user).toEqual({ role: "user", content: "hello" });
  });

  it("a refused shell call does not run and is answered as permission_denied", async () => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "Remove-Item x" })), textTurn("ok")]);
    const runner = new RecordingCommandRunner();
    const approval = new CountingApproval(() => Promise.resolve(false));
    const result = await agent(model, runner, approval).run("go");
    expect(approval.requests).toHaveLength(1);
    expect(runner.commands).toHaveLength(0);
    expect(toolMessages(result.history)).toEqual([
      ["c1", "Error [permission_denied]: The user did not approve this tool call"],
    ]);
  });

  it.each<[string, () => Promise<unknown>]>([
    ["throws", () => Promise.reject(new Error("terminal gone"))],
    ["answers a truthy string", () => Promise.resolve("yes")],
    ["answers 1", () => Promise.resolve(1)],
    ["answers an object", () => Promise.resolve({ approved: true })],
  ])("an approval provider that %s refuses the call (fail closed)", async (_name, answer) => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "x" })), textTurn("ok")]);
    const runner = new RecordingCommandRunner();
    const result = await agent(model, runner, new CountingApproval(answer)).run("go");
    expect(runner.commands).toHaveLength(0);
    expect(toolMessages(result.history)[0]?.[1]).toBe(
      "Error [permission_denied]: The user did not approve this tool call",
    );
  });

  it.each<[string, string, string]>([
    ["an unknown tool", "read_file", "Error [unknown_tool]: Unknown tool: read_file"],
    ["arguments that are not JSON", "shell", "Error [invalid_json]: Arguments of shell must be a JSON object"],
  ])("%s becomes a tool error without asking or running anything", async (_name, tool, content) => {
    const args = tool === "shell" ? "{not json" : { path: "x" };
    const model = new ScriptedModel([toolTurn(call("c1", tool, args)), textTurn("ok")]);
    const runner = new RecordingCommandRunner();
    const approval = new CountingApproval(() => Promise.resolve(true));
    const result = await agent(model, runner, approval).run("go");
    expect(toolMessages(result.history)).toEqual([["c1", content]]);
    expect(approval.requests).toHaveLength(0);
    expect(runner.commands).toHaveLength(0);
  });

  it.each([["[1,2]"], ['"text"'], ["null"], ["42"]])(
    "arguments %s that are JSON but not an object are invalid_json",
    async (args) => {
      const model = new ScriptedModel([toolTurn(call("c1", "shell", args)), textTurn("ok")]);
      const result = await agent(model, new RecordingCommandRunner()).run("go");
      expect(toolMessages(result.history)[0]?.[1]).toBe(
        "Error [invalid_json]: Arguments of shell must be a JSON object",
      );
    },
  );

  it.each<[object, string]>([
    [{ command: 5 }, "command: Invalid input: expected string, received number"],
    [{}, "command: Invalid input: expected string, received undefined"],
    [{ command: "x", extra: true }, '(arguments): Unrecognized key: "extra"'],
  ])("shell arguments %j are invalid_arguments naming the field", async (args, problem) => {
    const model = new ScriptedModel([toolTurn(call("c1", "shell", args)), textTurn("ok")]);
    const runner = new RecordingCommandRunner();
    const approval = new CountingApproval(() => Promise.resolve(true));
    const result = await agent(model, runner, approval).run("go");
    expect(toolMessages(result.history)[0]?.[1]).toBe(
      `Error [invalid_arguments]: Invalid arguments for shell: ${problem}`,
    );
    expect(approval.requests).toHaveLength(0);
    expect(runner.commands).toHaveLength(0);
  });

  it("a tool that throws becomes tool_execution_error with no stack trace", async () => {
    const tools = new ToolRegistry();
    tools.register({
      name: "boom",
      description: "throws",
      inputSchema: z.strictObject({}),
      effect: "read",
      handler: () => Promise.reject(new Error("secret internal detail\n    at frame (file.ts:1:1)")),
    });
    const model = new ScriptedModel([toolTurn(call("c1", "boom", {})), textTurn("ok")]);
    const runner = new AgentRunner({
      model,
      tools,
      context: { workspace, identity: "test" },
      systemPrompt: "s",
      maxTurns: 3,
    });
    const result = await runner.run("go");
    expect(toolMessages(result.history)).toEqual([
      ["c1", "Error [tool_execution_error]: Tool boom failed unexpectedly"],
    ]);
  });

  it("stops with AgentLimitError after maxTurns model calls that all want tools", async () => {
    const model = new ScriptedModel([1, 2, 3].map((n) => toolTurn(call(`c${n}`, "shell", { command: "x" }))));
    const error = await agent(model, new RecordingCommandRunner(), undefined, 2)
      .run("go")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentLimitError);
    expect(error).toBeInstanceOf(AgentRunError);
    expect((error as AgentLimitError).message).toBe("The agent did not finish within 2 turns");
    expect(model.requests).toHaveLength(2);
    const history = (error as AgentLimitError).history;
    expect(toolMessages(history).map(([id]) => id)).toEqual(["c1", "c2"]);
    expect(() => validateToolPairing(history)).not.toThrow();
  });

  it.each<[string, ReturnType<typeof textTurn>]>([
    ["length", textTurn("partial", "length")],
    ["content_filter", textTurn(null, "content_filter")],
    ["stop", textTurn(null, "stop")],
    ["stop", textTurn("   ", "stop")],
    ["length", toolTurnWith("length")],
  ])("an incomplete reply (finish_reason %s) raises IncompleteModelReplyError", async (reason, reply) => {
    const runner = new RecordingCommandRunner();
    const error = await agent(new ScriptedModel([reply]), runner)
      .run("go")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IncompleteModelReplyError);
    expect((error as IncompleteModelReplyError).message).toBe(
      `The model's reply was incomplete (finish_reason: ${reason})`,
    );
    expect(runner.commands).toHaveLength(0);
  });

  it("reports each step as an event, in order", async () => {
    const events: AgentEvent[] = [];
    const model = new ScriptedModel([toolTurn(call("c1", "shell", { command: "x" })), textTurn("done")]);
    const runner = new AgentRunner({
      model,
      tools: registryWith("shell", () => Promise.resolve(toolSuccess("out"))),
      context: { workspace, identity: "t" },
      systemPrompt: "s",
      maxTurns: 5,
      onEvent: (event) => events.push(event),
    });
    await runner.run("go");
    expect(events.map((e) => e.type)).toEqual(["model_request", "tool_call", "tool_result", "model_request"]);
    expect(events[2]).toEqual({
      type: "tool_result",
      call: call("c1", "shell", { command: "x" }),
      result: toolSuccess("out"),
    });
  });

  it("buildAgent accepts only the singleton profile", () => {
    const forged = { chapter: 1, capabilities: P01.capabilities };
    expect(() => buildAgent(forged, { model: new ScriptedModel([]), workspace })).toThrow(
      "buildAgent accepts only a profile returned by profileForChapter()",
    );
    expect(profileForChapter(1)).toBe(P01);
    expect(() => profileForChapter(3)).toThrow("No profile for chapter 3; this snapshot knows chapters 1, 2");
  });
});

function toolTurnWith(finishReason: "length") {
  return { ...toolTurn(call("c1", "shell", { command: "x" })), finishReason };
}

function registryWith(name: string, handler: () => Promise<ToolResult>): ToolRegistry {
  const tools = new ToolRegistry();
  tools.register({
    name,
    description: "",
    inputSchema: z.strictObject({ command: z.string() }),
    effect: "read",
    handler,
  });
  return tools;
}
