import { assistantMessage, toolCall } from "../../src/core/messages.js";
import type { ChatMessage, ToolCall } from "../../src/core/messages.js";
import type { FinishReason, ModelClient, ModelReply, ModelRequest } from "../../src/core/model.js";

/** A model that plays back fixed replies and keeps every request it was sent, as it was sent. */
export class ScriptedModel implements ModelClient {
  readonly requests: ModelRequest[] = [];
  private next = 0;

  constructor(private readonly replies: readonly ModelReply[]) {}

  complete(request: ModelRequest): Promise<ModelReply> {
    this.requests.push(request);
    const reply = this.replies[this.next];
    this.next += 1;
    if (reply === undefined) return Promise.reject(new Error("ScriptedModel ran out of replies"));
    return Promise.resolve(reply);
  }

  /** Throws unless every scripted reply was asked for, and none more: the run made exactly the requests expected. */
  assertExhausted(): void {
    if (this.next !== this.replies.length) {
      throw new Error(`ScriptedModel answered ${this.next} of ${this.replies.length} scripted replies`);
    }
  }
}

/** A tool call; `args` that are not a string are sent as their JSON text. */
export function call(id: string, name: string, args: unknown): ToolCall {
  return toolCall(id, name, typeof args === "string" ? args : JSON.stringify(args));
}

/** A turn in which the model only asks for tools. */
export function toolTurn(...calls: ToolCall[]): ModelReply {
  return { message: assistantMessage(null, calls), finishReason: "tool_calls" };
}

/** A turn with text and no tool calls. */
export function textTurn(content: string | null, finishReason: FinishReason = "stop"): ModelReply {
  return { message: assistantMessage(content), finishReason };
}

/** The tool messages of a history, as `[toolCallId, content]` pairs in order. */
export function toolMessages(history: readonly ChatMessage[]): [string, string][] {
  return history.flatMap((message): [string, string][] =>
    message.role === "tool" ? [[message.toolCallId, message.content]] : [],
  );
}
