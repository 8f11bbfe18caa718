import type { AgentEvent, AgentEventListener } from "./agent-events.js";
import { systemMessage, toolMessage, userMessage, validateToolPairing } from "./messages.js";
import type { ChatMessage, ToolCall } from "./messages.js";
import type { ModelClient, ModelRequest } from "./model.js";
import { toolError } from "./tools.js";
import type { ToolContext, ToolRegistry, ToolResult, ValidToolCall } from "./tools.js";

/** Every way a run can end without a final answer. Callers catch this one base class. */
export class AgentRunError extends Error {
  override readonly name: string = "AgentRunError";
}

/** The model still wanted tools after `maxTurns` model calls. */
export class AgentLimitError extends AgentRunError {
  override readonly name = "AgentLimitError";
}

/** The reply was cut off at the token limit: half an answer must not pass for a whole one. */
export class IncompleteModelReplyError extends AgentRunError {
  override readonly name = "IncompleteModelReplyError";
}

/** The provider could not be reached, refused the request, or sent a reply that cannot be read. */
export class ModelCallError extends AgentRunError {
  override readonly name = "ModelCallError";
}

/** What a person is shown before a tool call with side effects runs. */
export interface AuthorizationRequest {
  readonly toolName: string;
  readonly reason: string;
  readonly arguments: Readonly<Record<string, unknown>>;
}

/** Says yes or no to one call. Only a real `true` lets it run; `false`, anything else or a throw refuses it. */
export interface ToolAuthorizer {
  authorize(request: AuthorizationRequest): Promise<boolean>;
}

export const SHELL_APPROVAL_REASON = "PowerShell command execution requires explicit approval.";

/** Calls run per reply: the model's reply is not ours, and one reply may ask for thousands. */
export const MAX_TOOL_CALLS_PER_REPLY = 32;
/**
 * UTF-8 bytes of tool results kept per reply: room for the largest single result any chapter's tools return
 * (a whole 10 MiB file from read_file), while 32 such results could not outgrow memory and the next request.
 */
export const MAX_TURN_RESULT_BYTES = 16 * 1024 * 1024;
/**
 * UTF-8 bytes of JSON the whole conversation may take (texts, tool results and call arguments, escaped as a
 * request sends them): four replies' worth of the largest results, far below what a provider accepts.
 */
export const MAX_CONVERSATION_BYTES = 64 * 1024 * 1024;

const CALL_LIMIT_RESULT = toolError(
  "tool_call_limit",
  `At most ${MAX_TOOL_CALLS_PER_REPLY} tool calls run per reply; this one did not run. Call it again in the next turn.`,
);

export interface AgentRunnerOptions {
  readonly model: ModelClient;
  readonly tools: ToolRegistry;
  readonly systemPrompt: string;
  /** Folder the tools work in. */
  readonly workspace: string;
  /** Model calls allowed per run; 20 when omitted. */
  readonly maxTurns?: number;
  /** Asked before every `execute` call; without one, calls run unasked (offline unit tests only). */
  readonly authorizer?: ToolAuthorizer;
  readonly onEvent?: AgentEventListener;
}

export interface RunResult {
  readonly finalText: string;
  readonly history: readonly ChatMessage[];
  /** Model calls made, the last one included. */
  readonly turns: number;
}

/** Ask the model, run each tool call it asks for, append the paired results, repeat. */
export class AgentRunner {
  readonly #model: ModelClient;
  readonly #tools: ToolRegistry;
  readonly #systemPrompt: string;
  readonly #context: ToolContext;
  readonly #maxTurns: number;
  readonly #authorizer: ToolAuthorizer | undefined;
  readonly #onEvent: AgentEventListener | undefined;
  readonly #history: ChatMessage[] = [];

  constructor(options: AgentRunnerOptions) {
    const maxTurns = options.maxTurns ?? 20;
    if (!Number.isInteger(maxTurns) || maxTurns <= 0) throw new RangeError("maxTurns must be a positive integer");
    this.#model = options.model;
    this.#tools = options.tools;
    this.#systemPrompt = options.systemPrompt;
    this.#context = Object.freeze({ workspace: options.workspace, identity: "user" });
    this.#maxTurns = maxTurns;
    this.#authorizer = options.authorizer;
    this.#onEvent = options.onEvent;
  }

  /** The conversation so far, also after a failed run; a frozen copy. */
  get history(): readonly ChatMessage[] {
    return Object.freeze([...this.#history]);
  }

  /** Progress for whoever listens; a listener that throws changes nothing about the run or its pairing. */
  #emit(event: AgentEvent): void {
    try {
      this.#onEvent?.(event);
    } catch {
      // The listener only shows what happens (the CLI's progress lines): its failure is not the run's.
    }
  }

  async run(prompt: string): Promise<RunResult> {
    this.#history.push(userMessage(prompt));
    for (let turn = 1; turn <= this.#maxTurns; turn += 1) {
      validateToolPairing(this.#history);
      // The whole conversation goes out again every turn: past the budget, stop before building a request no
      // provider would take (and a string the runtime could not hold).
      const size = conversationBytes(this.#history);
      if (size > MAX_CONVERSATION_BYTES) {
        throw new AgentLimitError(
          `The conversation reached ${size} bytes, past the ${MAX_CONVERSATION_BYTES} bytes one request may carry`,
        );
      }
      // One snapshot per turn: the tools offered to the model are exactly the tools that run.
      const tools = this.#tools.snapshot();
      const request: ModelRequest = Object.freeze({
        messages: Object.freeze([systemMessage(this.#systemPrompt), ...this.#history]),
        tools: tools.openAITools(),
      });
      this.#emit({ type: "model_request", turn });
      const reply = await this.#model.complete(request);
      if (reply.finishReason === "length") throw new IncompleteModelReplyError("Model output reached the token limit");
      if (reply.finishReason === "content_filter") {
        throw new AgentRunError("Model response was blocked by the content filter");
      }

      const assistant = reply.message;
      this.#history.push(assistant);
      if (assistant.toolCalls.length === 0) {
        // Whitespace is no answer either: an empty result must not pass for success.
        if (assistant.content === null || assistant.content.trim() === "") {
          throw new AgentRunError("Model stopped without final text or tool calls");
        }
        return Object.freeze({ finalText: assistant.content, history: this.history, turns: turn });
      }

      const budget = new ResultBudget(MAX_TURN_RESULT_BYTES);
      for (const [index, call] of assistant.toolCalls.entries()) {
        this.#emit({ type: "tool_call", call });
        // Past the bound a call is neither approved nor run, but it still gets its paired result.
        const result =
          index < MAX_TOOL_CALLS_PER_REPLY ? budget.keep(await this.#execute(call, tools)) : CALL_LIMIT_RESULT;
        this.#emit({ type: "tool_result", call, result });
        this.#history.push(toolMessage(result.content, call.id));
      }
    }
    throw new AgentLimitError(`Agent exceeded maxTurns=${this.#maxTurns}`);
  }

  /** Look up, parse, validate, then approve, then run: nothing is shown for approval before it is valid. */
  async #execute(call: ToolCall, tools: ToolRegistry): Promise<ToolResult> {
    const prepared = tools.prepare(call);
    if (prepared.error !== undefined) return prepared.error;
    if (prepared.definition.effect === "execute") {
      let approved: unknown;
      try {
        approved = await this.#approve(prepared);
      } catch {
        // An approval step that breaks must refuse, or breaking it would be a way around it.
        return toolError("permission_denied", "Tool approval failed closed");
      }
      if (approved !== true) return toolError("permission_denied", "The user did not approve this tool call");
    }
    return tools.invoke(prepared, this.#context);
  }

  async #approve(prepared: ValidToolCall): Promise<unknown> {
    if (this.#authorizer === undefined) return true;
    return this.#authorizer.authorize({
      toolName: prepared.definition.name,
      reason: SHELL_APPROVAL_REASON,
      arguments: prepared.arguments,
    });
  }
}

/** Each message's size, measured once: the history only grows, and its messages are frozen. */
const messageSizes = new WeakMap<ChatMessage, number>();

function conversationBytes(history: readonly ChatMessage[]): number {
  const encoder = new TextEncoder();
  let total = 0;
  for (const message of history) {
    let size = messageSizes.get(message);
    if (size === undefined) {
      const calls = message.role === "assistant" ? message.toolCalls : [];
      const parts = [message.content ?? "", ...calls.flatMap((call) => [call.id, call.name, call.arguments])];
      size = parts.reduce((sum, part) => sum + encoder.encode(JSON.stringify(part)).byteLength, 0);
      messageSizes.set(message, size);
    }
    total += size;
  }
  return total;
}

/** What is left of one reply's result budget: a result that does not fit is replaced by a short error. */
class ResultBudget {
  #left: number;

  constructor(bytes: number) {
    this.#left = bytes;
  }

  keep(result: ToolResult): ToolResult {
    const bytes = new TextEncoder().encode(result.content).byteLength;
    if (bytes > this.#left) {
      return toolError(
        "turn_result_limit",
        `The tool results of one reply may total at most ${MAX_TURN_RESULT_BYTES} bytes; this ${bytes}-byte result ` +
          `did not fit in the ${this.#left} bytes left and was dropped after the call finished. ` +
          "Ask for less output, or call again in the next turn.",
      );
    }
    this.#left -= bytes;
    return result;
  }
}
