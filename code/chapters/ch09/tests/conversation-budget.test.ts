import { describe, expect, it } from "vitest";
import { z } from "zod";
import { AgentLimitError, AgentRunner, ConversationLimitError, MAX_CONVERSATION_BYTES } from "../src/core/loop.js";
import { validateToolPairing } from "../src/core/messages.js";
import { ToolRegistry, toolSuccess } from "../src/core/tools.js";
import { call, ScriptedModel, textTurn, toolTurn } from "./support/scripted-model.js";

// Every turn sends the whole conversation again. However much each reply may keep, a run that piles up results
// turn after turn stops at a run-wide budget, before it builds a request no provider takes.
const MB = 1024 * 1024;

/** A registry with one read tool that returns `bytes` ASCII bytes every time it is called. */
function bigTool(bytes: number): { tools: ToolRegistry; calls: () => number } {
  let calls = 0;
  const tools = new ToolRegistry();
  tools.register({
    name: "big",
    description: "Returns a large text.",
    inputSchema: z.strictObject({}),
    effect: "read",
    handler: () => {
      calls += 1;
      return Promise.resolve(toolSuccess("x".repeat(bytes)));
    },
  });
  return { tools, calls: () => calls };
}

describe("the run-wide conversation budget", () => {
  it("is 64 MiB of the JSON a request carries", () => {
    expect(MAX_CONVERSATION_BYTES).toBe(64 * MB);
  });

  it("past it the run stops with AgentLimitError before the next request, every call answered and paired", async () => {
    const { tools, calls } = bigTool(12 * MB);
    const turns = Array.from({ length: 8 }, (_, index) => toolTurn(call(`c${index}`, "big", {})));
    const model = new ScriptedModel([...turns, textTurn("never")]);
    const agent = new AgentRunner({ model, tools, systemPrompt: "s", workspace: "/w" });
    // The seventh request would carry the prompt "x" (3 bytes as JSON), six replies of a call (content "", id
    // "cN", name "big", arguments "{}": 2 + 4 + 5 + 4 bytes) and six results of 12 MiB in quotes: over 72 MiB.
    const size = 3 + 6 * (2 + 4 + 5 + 4) + 6 * (12 * MB + 2);
    // Chapter 6 names this limit apart (a subagent's caller must not call it the turn cap); it is still one.
    const failure: unknown = await agent.run("x").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(AgentLimitError);
    expect(failure).toStrictEqual(
      new ConversationLimitError(
        `The conversation reached ${size} bytes, past the ${64 * MB} bytes one request may carry`,
      ),
    );
    expect(model.requests).toHaveLength(6);
    expect(calls()).toBe(6);
    validateToolPairing(agent.history);
    expect(agent.history.at(-1)?.role).toBe("tool");
  });

  it("a conversation just under it goes on as before", async () => {
    const { tools } = bigTool(10 * MB);
    const turns = Array.from({ length: 6 }, (_, index) => toolTurn(call(`c${index}`, "big", {})));
    const model = new ScriptedModel([...turns, textTurn("done")]);
    const agent = new AgentRunner({ model, tools, systemPrompt: "s", workspace: "/w" });
    expect((await agent.run("x")).finalText).toBe("done");
    expect(model.requests).toHaveLength(7);
  });
});
