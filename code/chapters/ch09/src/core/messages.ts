/**
 * The conversation as the loop keeps it: four kinds of message told apart by `role`. These are our
 * own frozen values, not SDK objects; `adapters/openai-chat.ts` converts them for the wire.
 */
export interface SystemMessage {
  readonly role: "system";
  readonly content: string;
}

export interface UserMessage {
  readonly role: "user";
  readonly content: string;
}

/** One tool call the model asked for; `arguments` is the JSON text exactly as the model sent it. */
export interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

export interface AssistantMessage {
  readonly role: "assistant";
  /** `null` when the model only asked for tools. */
  readonly content: string | null;
  readonly toolCalls: readonly ToolCall[];
}

export interface ToolMessage {
  readonly role: "tool";
  readonly content: string;
  /** The `id` of the call this message answers. */
  readonly toolCallId: string;
}

export type ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage;

/** A history or a message that breaks the tool-call pairing contract: a programming error, not model data. */
export class MessageContractError extends Error {
  override readonly name = "MessageContractError";
}

/** Whether `value` is a message of one of the four kinds, well formed: for values from code the types cannot vouch for. */
export function isChatMessage(value: unknown): value is ChatMessage {
  if (typeof value !== "object" || value === null) return false;
  const { role, content } = value as Record<string, unknown>;
  switch (role) {
    case "system":
    case "user":
      return typeof content === "string";
    case "tool":
      return typeof content === "string" && typeof (value as { toolCallId?: unknown }).toolCallId === "string";
    case "assistant": {
      const calls = (value as { toolCalls?: unknown }).toolCalls;
      return (content === null || typeof content === "string") && Array.isArray(calls) && calls.every(isToolCall);
    }
    default:
      return false;
  }
}

function isToolCall(value: unknown): value is ToolCall {
  if (typeof value !== "object" || value === null) return false;
  const { id, name, arguments: argumentsText } = value as Record<string, unknown>;
  return typeof id === "string" && typeof name === "string" && typeof argumentsText === "string";
}

export function systemMessage(content: string): SystemMessage {
  return Object.freeze({ role: "system", content });
}

export function userMessage(content: string): UserMessage {
  return Object.freeze({ role: "user", content });
}

export function toolCall(id: string, name: string, argumentsText: string): ToolCall {
  return Object.freeze({ id, name, arguments: argumentsText });
}

/** Refuses two calls with one id: their results could never be told apart. */
export function assistantMessage(content: string | null, toolCalls: readonly ToolCall[] = []): AssistantMessage {
  const ids = new Set<string>();
  for (const call of toolCalls) {
    if (ids.has(call.id)) throw new MessageContractError(`duplicate tool call id: ${call.id}`);
    ids.add(call.id);
  }
  return Object.freeze({
    role: "assistant",
    content,
    toolCalls: Object.freeze(toolCalls.map((call) => toolCall(call.id, call.name, call.arguments))),
  });
}

export function toolMessage(content: string, toolCallId: string): ToolMessage {
  return Object.freeze({ role: "tool", content, toolCallId });
}

/**
 * Throws unless every assistant message with N tool calls is followed immediately by exactly N
 * tool messages answering those calls (any order, once each), and no tool message stands anywhere
 * else. Providers reject such histories vaguely; this names the id before anything is sent.
 */
export function validateToolPairing(history: readonly ChatMessage[]): void {
  let index = 0;
  while (index < history.length) {
    const message = history[index] as ChatMessage;
    index += 1;
    if (message.role === "tool") throw new MessageContractError(`orphan tool result id: ${message.toolCallId}`);
    if (message.role !== "assistant" || message.toolCalls.length === 0) continue;
    const pending = new Set(message.toolCalls.map((call) => call.id));
    if (pending.size !== message.toolCalls.length) {
      throw new MessageContractError("duplicate tool call id in one assistant message");
    }
    for (let reply = history[index]; reply?.role === "tool"; reply = history[index]) {
      if (!pending.delete(reply.toolCallId)) {
        throw new MessageContractError(`unexpected tool result id: ${reply.toolCallId}`);
      }
      index += 1;
    }
    if (pending.size > 0) {
      throw new MessageContractError(`missing tool results for ids: ${JSON.stringify([...pending])}`);
    }
  }
}
