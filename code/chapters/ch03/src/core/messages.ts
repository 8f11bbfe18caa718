/**
 * The conversation, shaped exactly like OpenAI Chat Completions messages so that a transcript
 * can be sent to any OpenAI-compatible provider as it is.
 */
export interface SystemMessage {
  readonly role: "system";
  readonly content: string;
}

export interface UserMessage {
  readonly role: "user";
  readonly content: string;
}

export interface ToolCall {
  readonly id: string;
  readonly type: "function";
  readonly function: { readonly name: string; readonly arguments: string };
}

export interface AssistantMessage {
  readonly role: "assistant";
  readonly content: string | null;
  readonly tool_calls?: readonly ToolCall[];
}

export interface ToolMessage {
  readonly role: "tool";
  readonly tool_call_id: string;
  readonly content: string;
}

export type ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage;

export class ToolPairingError extends Error {
  override readonly name = "ToolPairingError";
}

/**
 * Throws unless every assistant message with N tool calls is followed immediately by exactly N
 * tool messages answering those calls (any order, no duplicates), and no tool message stands
 * anywhere else. Providers reject unpaired histories; we would rather find out before sending.
 */
export function validateToolPairing(history: readonly ChatMessage[]): void {
  let index = 0;
  while (index < history.length) {
    const message = history[index] as ChatMessage;
    if (message.role === "tool") {
      throw new ToolPairingError(
        `Tool message at index ${index} (${message.tool_call_id}) answers no preceding assistant tool call`,
      );
    }
    index += 1;
    if (message.role !== "assistant" || !message.tool_calls?.length) continue;
    const pending = new Set<string>();
    for (const call of message.tool_calls) {
      if (pending.has(call.id)) {
        throw new ToolPairingError(`Assistant message at index ${index - 1} repeats tool call id ${call.id}`);
      }
      pending.add(call.id);
    }
    const expected = pending.size;
    for (let answered = 0; answered < expected; answered += 1) {
      const reply = history[index];
      if (reply?.role !== "tool") {
        throw new ToolPairingError(
          `Tool call ${[...pending].join(", ")} has no tool message; found ${reply ? reply.role : "end of history"} at index ${index}`,
        );
      }
      if (!pending.delete(reply.tool_call_id)) {
        throw new ToolPairingError(
          `Tool message at index ${index} answers ${reply.tool_call_id}, which is not an open call of the preceding assistant message`,
        );
      }
      index += 1;
    }
  }
}
