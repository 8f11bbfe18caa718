import type { AssistantMessage, ChatMessage, ToolCall } from "../../src/core/messages.js";
import type { FinishReason, ModelClient, ModelReply, ModelRequest } from "../../src/core/model-client.js";

/** A model that plays back fixed replies and records every request it was sent. */
export class ScriptedModel implements ModelClient {
  readonly requests: ModelRequest[] = [];
  private next = 0;

  constructor(private readonly replies: readonly ModelReply[]) {}

  complete(request: ModelRequest): Promise<ModelReply> {
    this.requests.push({ messages: structuredClone(request.messages), tools: request.tools });
    const reply = this.replies[this.next];
    this.next += 1;
    if (reply === undefined) return Promise.reject(new Error("ScriptedModel ran out of replies"));
    return Promise.resolve(reply);
  }
}

export function call(id: string, name: string, args: unknown): ToolCall {
  return {
    id,
    type: "function",
    function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) },
  };
}

export function toolTurn(...calls: ToolCall[]): ModelReply {
  return { message: { role: "assistant", content: null, tool_calls: calls }, finishReason: "tool_calls" };
}

export function textTurn(content: string | null, finishReason: FinishReason = "stop"): ModelReply {
  const message: AssistantMessage = { role: "assistant", content };
  return { message, finishReason };
}

/** The tool messages of a history, as `[tool_call_id, content]` pairs in order. */
export function toolMessages(history: readonly ChatMessage[]): [string, string][] {
  return history.flatMap((message) => (message.role === "tool" ? [[message.tool_call_id, message.content]] : []));
}
