import { ModelCallError } from "../core/agent-errors.js";
import type { AssistantMessage, ToolCall } from "../core/messages.js";
import type { FinishReason, ModelReply } from "../core/model-client.js";

/**
 * Turns whatever an OpenAI-compatible provider sent into a `ModelReply`, field by field.
 * The SDK's types describe OpenAI's own API; other providers drift from it, so nothing is trusted.
 */
export function parseChatCompletion(body: unknown): ModelReply {
  // A gateway's HTML error page or a plain-text body arrives here as a string.
  if (typeof body !== "object" || body === null) throw malformed("the response is not a JSON object");
  const choices = field(body, "choices");
  if (!Array.isArray(choices) || choices.length === 0) {
    throw malformed("the response has no choices");
  }
  const choice: unknown = choices[0];
  const message = field(choice, "message");
  if (typeof message !== "object" || message === null) throw malformed("choices[0].message is missing");
  const content = field(message, "content");
  if (content !== null && content !== undefined && typeof content !== "string") {
    throw malformed("choices[0].message.content is not a string");
  }
  const toolCalls = parseToolCalls(field(message, "tool_calls"));
  const assistant: AssistantMessage =
    toolCalls.length > 0
      ? { role: "assistant", content: content ?? null, tool_calls: toolCalls }
      : { role: "assistant", content: content ?? null };
  return { message: assistant, finishReason: parseFinishReason(field(choice, "finish_reason")) };
}

function parseToolCalls(raw: unknown): ToolCall[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw malformed("message.tool_calls is not an array");
  return raw.map((call: unknown, index): ToolCall => {
    const id = field(call, "id");
    const fn = field(call, "function");
    const name = field(fn, "name");
    const args = field(fn, "arguments");
    if (typeof id !== "string" || id === "") throw malformed(`tool_calls[${index}].id is missing`);
    if (typeof name !== "string" || name === "") throw malformed(`tool_calls[${index}].function.name is missing`);
    // Some providers send `arguments` as an object or omit it for no-argument calls.
    const text = typeof args === "string" ? args : args === undefined || args === null ? "{}" : JSON.stringify(args);
    return { id, type: "function", function: { name, arguments: text } };
  });
}

function parseFinishReason(raw: unknown): FinishReason {
  switch (raw) {
    case "stop":
    case "tool_calls":
    case "length":
    case "content_filter":
      return raw;
    case "function_call":
      return "tool_calls";
    default:
      return "other";
  }
}

function field(value: unknown, key: string): unknown {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}

function malformed(detail: string): ModelCallError {
  return new ModelCallError(`The model provider sent a malformed reply: ${detail}`);
}
