import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { AgentRunner, MAX_TOOL_CALLS_PER_REPLY, MAX_TURN_RESULT_BYTES } from "../src/core/loop.js";
import { validateToolPairing } from "../src/core/messages.js";
import { PermissionPolicy, type AuditSink } from "../src/core/permissions.js";
import { ToolRegistry, toolSuccess } from "../src/core/tools.js";
import { createChapterOneTools } from "../src/features/builtin-tools.js";
import { commandResult, CountingApproval, FakeCommandRunner } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";

// The model's reply is the attacker's: how many calls run, and how much of their output is kept, is ours to say.
const CALL_LIMIT =
  "Error [tool_call_limit]: At most 32 tool calls run per reply; this one did not run. Call it again in the next turn.";

function resultLimit(bytes: number, left: number): string {
  return (
    "Error [turn_result_limit]: The tool results of one reply may total at most 16777216 bytes; " +
    `this ${bytes}-byte result did not fit in the ${left} bytes left and was dropped after the call finished. ` +
    "Ask for less output, or call again in the next turn."
  );
}

let workspace: string;
beforeEach(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "loop-bounds-")));
});
afterEach(async () => {
  await rm(workspace, { recursive: true, force: true });
});

/** `count` shell calls with ids `c0`, `c1`, … and the command `Write-Output <i>`. */
function shellCalls(count: number) {
  return Array.from({ length: count }, (_, i) => call(`c${i}`, "shell", { command: `Write-Output ${i}` }));
}

/** A tool that answers `char` repeated `repeat` times, and counts how often its handler ran. */
function emitTool(runs: { count: number }): ToolRegistry {
  const tools = new ToolRegistry();
  tools.register({
    name: "emit",
    description: "emits text of a given size",
    inputSchema: z.strictObject({ char: z.string(), repeat: z.number().int() }),
    effect: "read",
    handler: ({ char, repeat }) => {
      runs.count += 1;
      return Promise.resolve(toolSuccess(char.repeat(repeat)));
    },
  });
  return tools;
}

describe("bounds on one reply", () => {
  it("the bounds are 32 calls and 1 MiB of results per reply", () => {
    expect([MAX_TOOL_CALLS_PER_REPLY, MAX_TURN_RESULT_BYTES]).toEqual([32, 16_777_216]);
  });

  it("a reply with 1,000 calls runs 32 of them; the other 968 reach neither the policy nor the approver, each answered tool_call_limit", async () => {
    const calls = shellCalls(1_000);
    const model = new ScriptedModel([toolTurn(...calls), textTurn("done")]);
    const runner = new FakeCommandRunner((command) => commandResult({ output: `ran ${command}` }));
    const approval = new CountingApproval(true);
    const audited: string[] = [];
    const auditSink: AuditSink = { record: (request) => void audited.push(request.toolName) };

    const result = await new AgentRunner({
      model,
      tools: createChapterOneTools(runner),
      systemPrompt: "s",
      workspace,
      permissionPolicy: new PermissionPolicy({ approval, audit: auditSink }),
    }).run("go");

    expect(runner.calls).toHaveLength(32);
    expect(approval.requests).toHaveLength(32);
    expect(audited).toHaveLength(32);
    expect(runner.calls.map((seen) => seen.command)).toEqual(calls.slice(0, 32).map((_, i) => `Write-Output ${i}`));
    expect(toolMessages(result.history)).toEqual(
      calls.map((seen, i) => [seen.id, i < 32 ? `ran Write-Output ${i}` : CALL_LIMIT]),
    );
    expect(() => validateToolPairing(result.history)).not.toThrow();
    // The model is told in its next request, one paired result per call.
    expect(model.requests[1]?.messages.filter((message) => message.role === "tool")).toHaveLength(1_000);
    expect(result.finalText).toBe("done");
  });

  it("a reply with exactly 32 calls runs all 32", async () => {
    const calls = shellCalls(32);
    const model = new ScriptedModel([toolTurn(...calls), textTurn("done")]);
    const runner = new FakeCommandRunner((command) => commandResult({ output: `ran ${command}` }));
    const tools = createChapterOneTools(runner);
    const result = await new AgentRunner({ model, tools, systemPrompt: "s", workspace }).run("go");
    expect(runner.calls).toHaveLength(32);
    expect(toolMessages(result.history)).toEqual(calls.map((seen, i) => [seen.id, `ran Write-Output ${i}`]));
  });

  it("results past 16 MiB of UTF-8 in one reply are replaced by turn_result_limit, and the next reply starts fresh", async () => {
    const runs = { count: 0 };
    // "é" is 2 bytes: 4,800,000 of them are 9,600,000 bytes, though only 4,800,000 characters.
    const wide = { char: "é", repeat: 4_800_000 };
    const model = new ScriptedModel([
      toolTurn(
        call("a", "emit", wide),
        call("b", "emit", wide),
        call("c", "emit", { char: "x", repeat: 7_177_216 }),
        call("d", "emit", { char: "y", repeat: 1 }),
      ),
      toolTurn(call("e", "emit", wide), call("f", "emit", { char: "x", repeat: 7_177_216 })),
      textTurn("done"),
    ]);
    const runner = new AgentRunner({ model, tools: emitTool(runs), systemPrompt: "s", workspace });

    const result = await runner.run("go");

    expect(runs.count).toBe(6);
    expect(toolMessages(result.history)).toEqual([
      ["a", "é".repeat(4_800_000)],
      ["b", resultLimit(9_600_000, 7_177_216)],
      // Exactly what is left still fits; after it, not one byte more does.
      ["c", "x".repeat(7_177_216)],
      ["d", resultLimit(1, 0)],
      ["e", "é".repeat(4_800_000)],
      ["f", "x".repeat(7_177_216)],
    ]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
  });
});
