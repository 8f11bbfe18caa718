import OpenAI from "openai";
import { ModelCallError } from "../core/agent-errors.js";
import { validateToolPairing } from "../core/messages.js";
import type { ModelClient, ModelReply, ModelRequest } from "../core/model-client.js";
import { parseChatCompletion } from "./openai-reply.js";

export interface OpenAIChatOptions {
  readonly apiKey: string;
  readonly model: string;
  /** Any OpenAI-compatible endpoint: DeepSeek, Qwen (DashScope), Ollama, vLLM, LM Studio, … */
  readonly baseURL?: string;
  readonly timeoutMs?: number;
  readonly maxRetries?: number;
}

/** `ModelClient` over the official `openai` SDK's Chat Completions. */
export class OpenAIChatClient implements ModelClient {
  private readonly client: OpenAI;

  constructor(private readonly options: OpenAIChatOptions) {
    this.client = new OpenAI({
      apiKey: options.apiKey,
      baseURL: options.baseURL,
      timeout: options.timeoutMs ?? 120_000,
      maxRetries: options.maxRetries ?? 2,
    });
  }

  async complete(request: ModelRequest): Promise<ModelReply> {
    // The loop checks pairing too; checking here keeps this adapter safe for any other caller.
    validateToolPairing(request.messages);
    let body: unknown;
    try {
      body = await this.client.chat.completions.create({
        model: this.options.model,
        messages: request.messages as OpenAI.Chat.ChatCompletionMessageParam[],
        ...(request.tools.length > 0 ? { tools: request.tools as OpenAI.Chat.ChatCompletionTool[] } : {}),
      });
    } catch (error) {
      throw new ModelCallError(describeFailure(error, this.options.model), { cause: error });
    }
    return parseChatCompletion(body);
  }
}

function describeFailure(error: unknown, model: string): string {
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return "The model request timed out; check OPENAI_BASE_URL and the provider's status";
  }
  if (error instanceof OpenAI.APIConnectionError) {
    return `Could not reach the model provider: ${error.message}`;
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
    return `The model provider answered HTTP ${error.status ?? "error"}${hint}: ${error.message}`;
  }
  return `The model request failed: ${error instanceof Error ? error.message : String(error)}`;
}
