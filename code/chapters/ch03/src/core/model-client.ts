import type { AssistantMessage, ChatMessage } from "./messages.js";

/** A tool as the model sees it: name, description and the JSON Schema of its arguments. */
export interface ToolSchema {
  readonly type: "function";
  readonly function: {
    readonly name: string;
    readonly description: string;
    readonly parameters: Readonly<Record<string, unknown>>;
  };
}

export interface ModelRequest {
  readonly messages: readonly ChatMessage[];
  readonly tools: readonly ToolSchema[];
}

/**
 * Why the model stopped. `stop` and `tool_calls` are normal; `length` and `content_filter` mean the
 * reply is incomplete; `other` is anything a provider invents.
 */
export type FinishReason = "stop" | "tool_calls" | "length" | "content_filter" | "other";

export interface ModelReply {
  readonly message: AssistantMessage;
  readonly finishReason: FinishReason;
}

/** The loop's only view of a model. The OpenAI adapter, the demo and tests each implement it. */
export interface ModelClient {
  complete(request: ModelRequest): Promise<ModelReply>;
}
