import OpenAI from "openai";
import { ModelCallError } from "../core/loop.js";
import { validateToolPairing } from "../core/messages.js";
import type { ChatMessage } from "../core/messages.js";
import type { ModelClient, ModelReply, ModelRequest } from "../core/model.js";
import { boundedFetch, ProviderReplyError } from "./bounded-fetch.js";
import { parseChatCompletion } from "./openai-reply.js";

export interface OpenAIChatOptions {
  /** Any OpenAI-compatible endpoint: OpenAI, DeepSeek, Qwen (DashScope), Ollama, vLLM, LM Studio, … */
  readonly baseURL: string;
  readonly apiKey: string;
  readonly model: string;
  readonly timeoutMs?: number;
  readonly maxRetries?: number;
  /** The whole call, every attempt and every wait between them included. */
  readonly budgetMs?: number;
  /** Told when a call starts its second or later attempt, so a person waiting knows it is retrying. */
  readonly onAttempt?: (attempt: number, attempts: number) => void;
}

/** How long one model call may take across all its attempts: each attempt's deadline alone allows three times 120 s. */
export const MODEL_CALL_BUDGET_MS = 300_000;

/** Our message as Chat Completions wants it on the wire; made anew for every request. */
export function toOpenAIMessage(message: ChatMessage): OpenAI.Chat.ChatCompletionMessageParam {
  switch (message.role) {
    case "system":
    case "user":
      return { role: message.role, content: message.content };
    case "tool":
      return { role: "tool", tool_call_id: message.toolCallId, content: message.content };
    case "assistant":
      return message.toolCalls.length === 0
        ? { role: "assistant", content: message.content }
        : {
            role: "assistant",
            content: message.content,
            tool_calls: message.toolCalls.map((call) => ({
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: call.arguments },
            })),
          };
  }
}

/** `ModelClient` over the official `openai` SDK's Chat Completions; no SDK object leaves this file. */
export class OpenAIChatModel implements ModelClient {
  readonly #client: OpenAI;
  /** Attempts made by the call in progress; the loop makes one call at a time. */
  #attempts = 0;

  constructor(private readonly options: OpenAIChatOptions) {
    const timeout = options.timeoutMs ?? 120_000;
    const maxRetries = options.maxRetries ?? 2;
    // One deadline per attempt that covers the body, no redirects, a bounded body and a bounded Retry-After.
    const bounded = boundedFetch({ deadlineMs: timeout });
    this.#client = new OpenAI({
      apiKey: options.apiKey,
      baseURL: options.baseURL,
      timeout,
      maxRetries,
      fetch: (input, init) => {
        this.#attempts += 1;
        if (this.#attempts > 1) options.onAttempt?.(this.#attempts, maxRetries + 1);
        return bounded(input, init);
      },
    });
  }

  async complete(request: ModelRequest): Promise<ModelReply> {
    // The loop checks pairing too; checking here keeps this adapter safe for any other caller.
    validateToolPairing(request.messages);
    let body: unknown;
    const budgetMs = this.options.budgetMs ?? MODEL_CALL_BUDGET_MS;
    const budget = AbortSignal.timeout(budgetMs);
    this.#attempts = 0;
    try {
      body = await this.#client.chat.completions.create(
        {
          model: this.options.model,
          messages: request.messages.map(toOpenAIMessage),
          ...(request.tools.length > 0 ? { tools: request.tools as OpenAI.Chat.ChatCompletionTool[] } : {}),
        },
        { signal: budget },
      );
    } catch (error) {
      const description = budget.aborted
        ? `The model call took longer than ${budgetMs / 1000} s over ${this.#attempts} attempt${this.#attempts === 1 ? "" : "s"}; check OPENAI_BASE_URL and the provider's status`
        : describeFailure(error, this.options.model);
      throw new ModelCallError(redacted(description, this.options.apiKey), { cause: error });
    }
    return parseChatCompletion(body);
  }
}

function describeFailure(error: unknown, model: string): string {
  // Ours, from the fetch the SDK was given: thrown as is, or wrapped by the SDK as a connection error.
  const cause = (error as { cause?: unknown } | null)?.cause;
  const bound = error instanceof ProviderReplyError ? error : cause;
  if (bound instanceof ProviderReplyError) return bound.message;
  // The attempt's deadline (boundedFetch) fired, while the headers or the body were on their way.
  if ([error, cause].some((value) => value instanceof Error && value.name === "TimeoutError")) {
    return "The model request timed out; check OPENAI_BASE_URL and the provider's status";
  }
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return "The model request timed out; check OPENAI_BASE_URL and the provider's status";
  }
  if (error instanceof OpenAI.APIConnectionError) {
    return `Could not reach the model provider: ${capped(error.message)}`;
  }
  if (error instanceof OpenAI.APIError) {
    const hint =
      error.status === 401
        ? " (check OPENAI_API_KEY)"
        : error.status === 404
          ? ` (check OPENAI_MODEL="${model}" and OPENAI_BASE_URL)`
          : error.status === 429
            ? " (rate limited; wait and retry)"
            : "";
    return `The model provider answered HTTP ${error.status ?? "error"}${hint}: ${capped(error.message)}`;
  }
  return `The model request failed: ${capped(error instanceof Error ? error.message : String(error))}`;
}

/**
 * `text` without the key: a provider or a proxy may echo the request's `Authorization` header back in its error,
 * so every `Bearer …` credential and every copy of the key itself is replaced before anything is shown.
 */
export function redacted(text: string, apiKey: string): string {
  const withoutBearer = text.replace(/\bBearer\s+[^\s"',;]+/gi, "Bearer [redacted]");
  return apiKey.length < 4 ? withoutBearer : withoutBearer.split(apiKey).join("[redacted]");
}

/** A provider's error body can be a whole HTML page: one line's worth tells the reader enough. */
function capped(text: string): string {
  return text.length <= 300 ? text : `${text.slice(0, 300)}… (${text.length - 300} more characters)`;
}
