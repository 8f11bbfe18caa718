import { describe, expect, it } from "vitest";
import { ToolPairingError, validateToolPairing, type ChatMessage } from "../src/core/messages.js";
import { call } from "./support/scripted-model.js";

const system: ChatMessage = { role: "system", content: "s" };
const user: ChatMessage = { role: "user", content: "u" };
const ask = (...ids: string[]): ChatMessage => ({
  role: "assistant",
  content: null,
  tool_calls: ids.map((id) => call(id, "shell", { command: "x" })),
});
const answer = (id: string): ChatMessage => ({ role: "tool", tool_call_id: id, content: "ok" });

describe("validateToolPairing", () => {
  it.each<[string, ChatMessage[]]>([
    ["a history without tools", [system, user, { role: "assistant", content: "hi" }]],
    ["one call answered", [system, user, ask("a"), answer("a"), { role: "assistant", content: "done" }]],
    [
      "several calls answered in another order",
      [system, user, ask("a", "b", "c"), answer("c"), answer("a"), answer("b")],
    ],
    ["consecutive tool turns", [user, ask("a"), answer("a"), ask("b"), answer("b")]],
    ["an assistant message with an empty tool_calls list", [user, { role: "assistant", content: "x", tool_calls: [] }]],
  ])("accepts %s", (_name, history) => {
    expect(() => validateToolPairing(history)).not.toThrow();
  });

  it.each<[string, ChatMessage[], RegExp]>([
    ["a missing tool message", [user, ask("a", "b"), answer("a")], /Tool call b has no tool message/],
    ["a missing tool message before the next user turn", [user, ask("a"), user], /has no tool message; found user/],
    ["an extra tool message", [user, ask("a"), answer("a"), answer("a")], /answers no preceding assistant tool call/],
    ["an orphan tool message", [system, user, answer("a")], /index 2 \(a\) answers no preceding/],
    ["a tool message before any assistant", [answer("a"), user], /index 0/],
    [
      "a duplicate answer standing in for another call",
      [user, ask("a", "b"), answer("a"), answer("a")],
      /not an open call/,
    ],
    ["a duplicate call id", [user, ask("a", "a"), answer("a"), answer("a")], /repeats tool call id a/],
    ["a mismatched id", [user, ask("a"), answer("z")], /answers z, which is not an open call/],
    ["an answer separated by another message", [user, ask("a"), user, answer("a")], /has no tool message/],
  ])("rejects %s", (_name, history, message) => {
    expect(() => validateToolPairing(history)).toThrow(ToolPairingError);
    expect(() => validateToolPairing(history)).toThrow(message);
  });
});
