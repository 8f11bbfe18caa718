import { ModelCallError } from "../core/loop.js";
import { assistantMessage, MessageContractError, toolCall } from "../core/messages.js";
import type { ToolCall } from "../core/messages.js";
import type { FinishReason, ModelReply, ModelUsage } from "../core/model.js";

/**
 * Turns whatever an OpenAI-compatible provider sent into a `ModelReply`, field by field.
 * The SDK's types describe OpenAI's own API; other providers drift from it, so nothing is trusted.
 */
export function parseChatCompletion(body: unknown): ModelReply {
  // A gateway's HTML error page or a plain-text body arrives here as a string.
  if (typeof body !== "object" || body === null) throw malformed("the response is not a JSON object");
  const choices = field(body, "choices");
  if (!Array.isArray(choices) || choices.length === 0) throw malformed("the response has no choices");
  const choice: unknown = choices[0];
  const message = field(choice, "message");
  if (typeof message !== "object" || message === null) throw malformed("choices[0].message is missing");
  const content = field(message, "content");
  if (content !== null && content !== undefined && typeof content !== "string") {
    throw malformed("choices[0].message.content is not a string");
  }
  // The pre-tools `function_call` shape would silently lose the call: refuse it rather than ignore it.
  if (field(message, "function_call") !== undefined && field(message, "function_call") !== null) {
    throw malformed("the legacy function_call field is not supported; use a model that sends tool_calls");
  }
  // A refusal is the provider's safety layer saying no: report its words instead of "no final text".
  const refusal = field(message, "refusal");
  if (typeof refusal === "string" && refusal.trim() !== "" && (content === null || content === undefined)) {
    throw new ModelCallError(`The model refused the request: ${refusal.slice(0, 200)}`);
  }
  const calls = parseToolCalls(field(message, "tool_calls"));
  const finishReason = parseFinishReason(field(choice, "finish_reason"), calls.length > 0);
  let assistant;
  try {
    assistant = assistantMessage(content ?? null, calls);
  } catch (error) {
    if (error instanceof MessageContractError) throw malformed("two tool calls share one id");
    throw error;
  }
  const usage = parseUsage(field(body, "usage"));
  return usage === undefined ? { message: assistant, finishReason } : { message: assistant, finishReason, usage };
}

/**
 * The most tool calls one reply may ask for. The loop runs at most 32 of them and pairs the rest with an
 * error, but every one of them would still be shown, answered and sent back each turn: a reply asking for
 * more than any model needs is refused whole, before anything runs.
 */
export const MAX_TOOL_CALLS_IN_REPLY = 256;

function parseToolCalls(raw: unknown): ToolCall[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw malformed("message.tool_calls is not an array");
  if (raw.length > MAX_TOOL_CALLS_IN_REPLY) {
    throw malformed(`${raw.length} tool calls in one reply; at most ${MAX_TOOL_CALLS_IN_REPLY} are accepted`);
  }
  return raw.map((call: unknown, index): ToolCall => {
    const id = field(call, "id");
    const fn = field(call, "function");
    const name = field(fn, "name");
    const args = field(fn, "arguments");
    if (typeof id !== "string" || id === "") throw malformed(`tool_calls[${index}].id is missing`);
    if (typeof name !== "string" || name === "") throw malformed(`tool_calls[${index}].function.name is missing`);
    // Some providers send `arguments` as an object or omit it for no-argument calls.
    const text = typeof args === "string" ? args : args === undefined || args === null ? "{}" : JSON.stringify(args);
    return toolCall(id, name, text);
  });
}

function parseFinishReason(raw: unknown, hasToolCalls: boolean): FinishReason {
  switch (raw) {
    case "stop":
    case "tool_calls":
    case "length":
    case "content_filter":
      return raw;
    // Some compatible servers leave it out; the tool calls, or their absence, say why the model stopped.
    case undefined:
    case null:
      return hasToolCalls ? "tool_calls" : "stop";
    default: {
      // A hostile provider must not flood the terminal through an error message.
      const shown = (typeof raw === "string" ? raw : JSON.stringify(raw)).slice(0, 80);
      throw new ModelCallError(`Unsupported finish_reason: ${shown}`);
    }
  }
}

/** Usage is optional, but when a provider sends it, it must be counts, not something else. */
function parseUsage(raw: unknown): ModelUsage | undefined {
  if (raw === undefined || raw === null) return undefined;
  const promptTokens = field(raw, "prompt_tokens");
  const completionTokens = field(raw, "completion_tokens");
  if (!isCount(promptTokens) || !isCount(completionTokens)) {
    throw malformed("usage.prompt_tokens and usage.completion_tokens must be whole numbers");
  }
  return { promptTokens, completionTokens };
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}

function field(value: unknown, key: string): unknown {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}

function malformed(detail: string): ModelCallError {
  return new ModelCallError(`The model provider sent a malformed reply: ${detail}`);
}
