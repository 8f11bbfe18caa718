import { describe, expect, it } from "vitest";
import {
  assistantMessage,
  MessageContractError,
  systemMessage,
  toolCall,
  toolMessage,
  userMessage,
  validateToolPairing,
  type ChatMessage,
} from "../src/core/messages.js";

const user = userMessage("u");
const ask = (...ids: string[]): ChatMessage =>
  assistantMessage(
    null,
    ids.map((id) => toolCall(id, "shell", '{"command":"x"}')),
  );
const answer = (id: string): ChatMessage => toolMessage("ok", id);

/** The error `validateToolPairing(history)` throws; fails the test when it throws nothing. */
function pairingError(history: readonly ChatMessage[]): MessageContractError {
  try {
    validateToolPairing(history);
  } catch (error) {
    expect(error).toBeInstanceOf(MessageContractError);
    return error as MessageContractError;
  }
  throw new Error("expected validateToolPairing to throw");
}

describe("message factories", () => {
  it("build the four internal messages with camelCase fields, each frozen", () => {
    const call = toolCall("call_1", "shell", '{"command":"Get-Date"}');
    const messages = [
      systemMessage("s"),
      userMessage("u"),
      assistantMessage("looking", [call]),
      toolMessage("42", "call_1"),
    ];
    expect(messages).toStrictEqual([
      { role: "system", content: "s" },
      { role: "user", content: "u" },
      {
        role: "assistant",
        content: "looking",
        toolCalls: [{ id: "call_1", name: "shell", arguments: '{"command":"Get-Date"}' }],
      },
      { role: "tool", content: "42", toolCallId: "call_1" },
    ]);
    expect(messages.map((message) => Object.isFrozen(message))).toEqual([true, true, true, true]);
    expect(Object.isFrozen(call)).toBe(true);
  });

  it("an assistant message without calls has an empty, frozen toolCalls array and may have null content", () => {
    const message = assistantMessage(null);
    expect(message).toStrictEqual({ role: "assistant", content: null, toolCalls: [] });
    expect(Object.isFrozen(message.toolCalls)).toBe(true);
  });

  it("an assistant message keeps its own frozen copy of the calls, so changing the input later changes nothing", () => {
    const calls = [{ id: "a", name: "shell", arguments: "{}" }];
    const message = assistantMessage(null, calls);
    calls.push({ id: "b", name: "shell", arguments: "{}" });
    (calls[0] as { id: string }).id = "changed";
    expect(message.toolCalls).toStrictEqual([{ id: "a", name: "shell", arguments: "{}" }]);
    expect(Object.isFrozen(message.toolCalls)).toBe(true);
    expect(Object.isFrozen(message.toolCalls[0])).toBe(true);
  });

  it("a frozen message cannot be changed, even by code that ignores the types", () => {
    const message = toolMessage("42", "call_1") as { content: string };
    expect(() => {
      message.content = "forged";
    }).toThrow(TypeError);
    expect(message.content).toBe("42");
  });

  it("assistantMessage refuses two calls with one id, naming the id", () => {
    const twice = [toolCall("call_1", "shell", "{}"), toolCall("call_1", "shell", '{"command":"x"}')];
    expect(() => assistantMessage(null, twice)).toThrow(MessageContractError);
    expect(() => assistantMessage(null, twice)).toThrow(new MessageContractError("duplicate tool call id: call_1"));
    expect(new MessageContractError("x").name).toBe("MessageContractError");
  });
});

describe("validateToolPairing", () => {
  it.each<[string, ChatMessage[]]>([
    ["an empty history", []],
    ["a history without tools", [systemMessage("s"), user, assistantMessage("hi")]],
    ["one call answered", [user, ask("a"), answer("a"), assistantMessage("done")]],
    ["several calls answered in another order", [user, ask("a", "b", "c"), answer("c"), answer("a"), answer("b")]],
    ["consecutive tool turns", [user, ask("a"), answer("a"), ask("b"), answer("b")]],
    [
      "an assistant message with text and calls",
      [user, assistantMessage("let me look", [toolCall("a", "x", "{}")]), answer("a")],
    ],
  ])("accepts %s", (_name, history) => {
    expect(() => validateToolPairing(history)).not.toThrow();
  });

  it('names the missing result as a JSON array: missing tool results for ids: ["call_2"]', () => {
    const history = [user, ask("call_1", "call_2"), toolMessage("42", "call_1")];
    expect(pairingError(history).message).toBe('missing tool results for ids: ["call_2"]');
  });

  it.each<[string, ChatMessage[], string]>([
    ["every call left unanswered, in call order", [user, ask("b", "a")], 'missing tool results for ids: ["b","a"]'],
    ["a call followed by the next user turn", [user, ask("a"), user], 'missing tool results for ids: ["a"]'],
    ["an answer separated from its call", [user, ask("a"), user, answer("a")], 'missing tool results for ids: ["a"]'],
    ["a result for a call that was not made", [user, ask("a"), answer("z")], "unexpected tool result id: z"],
    ["the same call answered twice", [user, ask("a", "b"), answer("a"), answer("a")], "unexpected tool result id: a"],
    ["one answer too many", [user, ask("a"), answer("a"), answer("a")], "unexpected tool result id: a"],
    ["a tool message before any assistant", [answer("a"), user], "orphan tool result id: a"],
    ["a tool message after a user turn", [systemMessage("s"), user, answer("a")], "orphan tool result id: a"],
    [
      "a tool message after an assistant message without calls",
      [user, assistantMessage("hi"), answer("a")],
      "orphan tool result id: a",
    ],
  ])("refuses %s with the exact message", (_name, history, message) => {
    expect(pairingError(history).message).toBe(message);
  });

  it("refuses a hand-built assistant message that repeats a call id", () => {
    const forged: ChatMessage = {
      role: "assistant",
      content: null,
      toolCalls: [toolCall("a", "shell", "{}"), toolCall("a", "shell", "{}")],
    };
    expect(pairingError([user, forged, answer("a"), answer("a")]).message).toBe(
      "duplicate tool call id in one assistant message",
    );
  });
});
