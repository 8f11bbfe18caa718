import type { AssistantMessage, ChatMessage } from "./messages.js";

/** A tool as the model sees it in the request's `tools` array: made by `ToolRegistry.openAITools()`. */
export interface OpenAIToolSchema {
  readonly type: "function";
  readonly function: {
    readonly name: string;
    readonly description: string;
    readonly parameters: Readonly<Record<string, unknown>>;
  };
}

/**
 * Chapter 9: who asked, for a record of the run (`--transcript`, `--replay`): a request with no tools is a summary's
 * or one of memory's three side queries, and only the asker can tell which. Never sent to the provider.
 */
export type RequestPurpose = "run" | "subagent" | "summarizer" | "selector" | "extractor" | "consolidator";

/** One request: the system prompt first, then the history, and the tools of this turn's snapshot. */
export interface ModelRequest {
  readonly messages: readonly ChatMessage[];
  readonly tools: readonly OpenAIToolSchema[];
  /** Chapter 9: who asked; the loop's own requests leave it out. */
  readonly purpose?: RequestPurpose;
}

/**
 * Why the model stopped. `stop` and `tool_calls` are normal; the loop refuses `length` and
 * `content_filter`. The adapter rejects anything else before it reaches the loop.
 */
export type FinishReason = "stop" | "tool_calls" | "length" | "content_filter";

/** Token counts as the provider reported them, when it did. */
export interface ModelUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
}

export interface ModelReply {
  readonly message: AssistantMessage;
  readonly finishReason: FinishReason;
  readonly usage?: ModelUsage;
}

/** The loop's only view of a model. The OpenAI adapter, the demo and tests each implement it. */
export interface ModelClient {
  complete(request: ModelRequest): Promise<ModelReply>;
}
