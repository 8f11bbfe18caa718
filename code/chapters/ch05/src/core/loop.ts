import type { AgentEvent, AgentEventListener } from "./agent-events.js";
import { HookContractError, HookRegistry, type HookResult } from "./hooks.js";
import { systemMessage, toolMessage, userMessage, validateToolPairing } from "./messages.js";
import type { ChatMessage, SystemMessage, ToolCall } from "./messages.js";
import type { ModelClient, ModelRequest } from "./model.js";
import { PermissionContractError, PermissionDecision, PermissionPolicy, PermissionRequest } from "./permissions.js";
import { toolError } from "./tools.js";
import type { ToolContext, ToolRegistry, ToolResult } from "./tools.js";

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

/** A UserPromptSubmit or Stop hook failed: outside the tool phase there is no result to pair, so the run fails. */
export class HookRunError extends AgentRunError {
  override readonly name = "HookRunError";

  constructor(
    message: string,
    /** The conversation up to the failure. */
    readonly history: readonly ChatMessage[],
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

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
const STOPPED_RESULT = toolError("hook_stopped_continuation", "Skipped after PostToolUse requested a stop");
const PRE_TOOL_FAILED = toolError("hook_execution_error", "PreToolUse hook failed");
const PRE_TOOL_INVALID = toolError("hook_contract_error", "PreToolUse hook returned an invalid update");
const POST_TOOL_FAILED = toolError("hook_execution_error", "PostToolUse hook failed");

/** One call's paired result, the system context its hooks deferred, and whether its Post hook ended the round. */
interface ToolExecution {
  readonly result: ToolResult;
  readonly context: readonly SystemMessage[];
  readonly stop: boolean;
}

/**
 * What the loop tells about each tool round and asks before each model request; chapter 5's TODO tracker is one.
 * The loop knows only these two methods, not what is counted behind them.
 */
export interface ToolRoundObserver {
  /** System messages for the next request only: they go after the history and never into it. */
  beforeModel(): readonly ChatMessage[];
  /** The names of every call of one assistant message, once each of them has its paired result. */
  recordToolRound(toolNames: readonly string[]): void;
}

export interface AgentRunnerOptions {
  readonly model: ModelClient;
  readonly tools: ToolRegistry;
  readonly systemPrompt: string;
  /** Folder the tools work in. */
  readonly workspace: string;
  /** Model calls allowed per run; 20 when omitted. */
  readonly maxTurns?: number;
  /**
   * Decides every prepared call before it runs; without one, calls run unasked (offline unit tests only).
   * With hooks and no policy, an empty policy still merges what the hooks recommend.
   */
  readonly permissionPolicy?: PermissionPolicy;
  /** Callbacks at the four mount points; an empty registry when omitted. */
  readonly hooks?: HookRegistry;
  /** Trusted code like a hook: if it throws or returns anything but system messages, the run fails. */
  readonly toolRoundObserver?: ToolRoundObserver;
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
  readonly #permissionPolicy: PermissionPolicy | undefined;
  readonly #hooks: HookRegistry;
  readonly #toolRoundObserver: ToolRoundObserver | undefined;
  readonly #onEvent: AgentEventListener | undefined;
  readonly #history: ChatMessage[] = [];
  readonly #rewritten = new Map<ToolCall, string>();

  constructor(options: AgentRunnerOptions) {
    const maxTurns = options.maxTurns ?? 20;
    if (!Number.isInteger(maxTurns) || maxTurns <= 0) throw new RangeError("maxTurns must be a positive integer");
    this.#model = options.model;
    this.#tools = options.tools;
    this.#systemPrompt = options.systemPrompt;
    this.#context = Object.freeze({ workspace: options.workspace, identity: "user" });
    this.#maxTurns = maxTurns;
    // A hook's deny must land somewhere: with hooks, no policy means an empty one, never none.
    this.#permissionPolicy =
      options.permissionPolicy === undefined && options.hooks !== undefined
        ? new PermissionPolicy()
        : options.permissionPolicy;
    this.#hooks = options.hooks ?? new HookRegistry();
    this.#toolRoundObserver = options.toolRoundObserver;
    this.#onEvent = options.onEvent;
  }

  /** The conversation so far, also after a failed run; a frozen copy. */
  get history(): readonly ChatMessage[] {
    return Object.freeze([...this.#history]);
  }

  /**
   * The calls of the history a PreToolUse hook rewrote (the history's own call objects: an id may come back in a
   * later reply), each with the arguments, as JSON text, that the policy, the approval and the handler got instead.
   * The history keeps every call as the model sent it, since that is what the model is shown; a record of the run
   * needs both. A copy, also after a failed run.
   */
  get rewrittenArguments(): ReadonlyMap<ToolCall, string> {
    return new Map(this.#rewritten);
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
    const submitted = userMessage(prompt);
    const promptHook = await this.#runOutsideTools("UserPromptSubmit", () => this.#hooks.runUserPrompt(submitted));
    this.#history.push(submitted, ...promptHook.additionalContext);
    let stopHookActive = false;
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
      // Guidance for this request only: it follows the history and is never pushed into it.
      const observerGuidance = this.#beforeModel();
      const request: ModelRequest = Object.freeze({
        messages: Object.freeze([systemMessage(this.#systemPrompt), ...this.#history, ...observerGuidance]),
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
        const stopHook = await this.#runOutsideTools("Stop", () => this.#hooks.runStop(this.history, stopHookActive));
        // At most once per run: the registry drops a second forceContinue, and the forced turn counts.
        // Stop's context goes in only with the turn it is for; a run that ends has no next request to carry it.
        if (stopHook.forceContinue !== undefined) {
          this.#history.push(...stopHook.additionalContext, stopHook.forceContinue);
          stopHookActive = true;
          continue;
        }
        return Object.freeze({ finalText: assistant.content, history: this.history, turns: turn });
      }

      const budget = new ResultBudget(MAX_TURN_RESULT_BYTES);
      // Hook context waits until every call of this reply has its result: nothing may sit between them.
      const deferred: SystemMessage[] = [];
      let stoppedWith: string | undefined;
      for (const [index, call] of assistant.toolCalls.entries()) {
        this.#emit({ type: "tool_call", call });
        let result: ToolResult;
        if (stoppedWith !== undefined) {
          // A Post hook ended the round: the rest never run, but each still gets its paired result.
          result = STOPPED_RESULT;
        } else if (index >= MAX_TOOL_CALLS_PER_REPLY) {
          // Past the bound a call is neither approved nor run, but it still gets its paired result.
          result = CALL_LIMIT_RESULT;
        } else {
          const execution = await this.#executeTool(call, tools);
          result = budget.keep(execution.result);
          deferred.push(...execution.context);
          if (execution.stop) stoppedWith = result.content;
        }
        this.#emit({ type: "tool_result", call, result });
        this.#history.push(toolMessage(result.content, call.id));
      }
      // One round per assistant message, after its last paired result and before the hooks' deferred context.
      this.#recordToolRound(assistant.toolCalls.map((call) => call.name));
      this.#history.push(...deferred);
      if (stoppedWith !== undefined)
        return Object.freeze({ finalText: stoppedWith, history: this.history, turns: turn });
    }
    throw new AgentLimitError(`Agent exceeded maxTurns=${this.#maxTurns}`);
  }

  /**
   * The observer's guidance, rebuilt as frozen system messages. Anything else appended to a request could break
   * the provider's pairing, which validateToolPairing checks only in the history: it fails the run instead.
   */
  #beforeModel(): readonly SystemMessage[] {
    if (this.#toolRoundObserver === undefined) return [];
    try {
      const guidance: unknown = this.#toolRoundObserver.beforeModel();
      if (!Array.isArray(guidance)) throw new TypeError("guidance is not an array");
      return Object.freeze(guidance.map(systemCopy));
    } catch (error) {
      throw new AgentRunError("Tool round observer failed", { cause: error });
    }
  }

  #recordToolRound(toolNames: readonly string[]): void {
    try {
      this.#toolRoundObserver?.recordToolRound(Object.freeze(toolNames));
    } catch (error) {
      throw new AgentRunError("Tool round observer failed", { cause: error });
    }
  }

  /** UserPromptSubmit and Stop stand outside the tool pairing: their failure fails the run, with the history. */
  async #runOutsideTools(event: "UserPromptSubmit" | "Stop", run: () => Promise<HookResult>): Promise<HookResult> {
    try {
      return await run();
    } catch (error) {
      throw new HookRunError(`${event} hook failed`, this.history, { cause: error });
    }
  }

  /**
   * prepare → PreToolUse → permission → handler → PostToolUse, in that order; every path returns exactly
   * one result, and no hook failure lets a handler run or an unvetted output reach the model.
   */
  async #executeTool(call: ToolCall, tools: ToolRegistry): Promise<ToolExecution> {
    const done = (result: ToolResult, context: readonly SystemMessage[] = [], stop = false): ToolExecution => ({
      result,
      context,
      stop,
    });
    let prepared;
    try {
      prepared = tools.prepare(call);
    } catch {
      return done(toolError("tool_preparation_error", "Tool preparation failed"));
    }
    if (prepared.error !== undefined) return done(prepared.error);

    let pre: HookResult;
    try {
      pre = await this.#hooks.runPreTool(prepared);
    } catch (error) {
      return done(error instanceof HookContractError ? PRE_TOOL_INVALID : PRE_TOOL_FAILED);
    }
    if (pre.blockingError !== undefined) return done(pre.blockingError, pre.additionalContext);
    // From here on everyone sees the same frozen arguments: the rewritten ones when a hook rewrote them.
    const effective = pre.updatedInput ?? prepared;
    if (pre.updatedInput !== undefined) this.#rewritten.set(call, JSON.stringify(effective.arguments));

    if (this.#permissionPolicy !== undefined) {
      try {
        // A hook's opinion is one more candidate for the unchanged policy, never a decision of its own.
        const behavior = pre.permissionBehavior;
        const recommendations =
          behavior === undefined || behavior === "passthrough"
            ? []
            : [new PermissionDecision(behavior, `PreToolUse hook requested ${behavior}`, "pre-tool-hook")];
        const decision: unknown = await this.#permissionPolicy.decide(
          new PermissionRequest({ prepared: effective, context: this.#context, recommendations }),
        );
        // Only a checked decision may let a handler run, even from a policy subclass written elsewhere.
        if (!(decision instanceof PermissionDecision)) throw new PermissionContractError("policy returned no decision");
        if (!decision.isAllowed) return done(decision.toToolResult(), pre.additionalContext);
      } catch {
        // A broken contract or a failed audit: the handler must not run, and the model gets no stack trace.
        return done(toolError("permission_evaluation_error", "Permission evaluation failed"), pre.additionalContext);
      }
    }

    const output = await tools.invoke(effective, this.#context);
    let post: HookResult;
    try {
      post = await this.#hooks.runPostTool(effective, output);
    } catch {
      // The handler ran; what it returned was not vetted, so the model gets the failure instead.
      return done(POST_TOOL_FAILED, pre.additionalContext);
    }
    return done(
      post.updatedOutput ?? output,
      [...pre.additionalContext, ...post.additionalContext],
      post.preventContinuation,
    );
  }
}

/** A new frozen system message with the text of `message`, read once; anything else throws. */
function systemCopy(message: unknown): SystemMessage {
  const { role, content } = (typeof message === "object" && message !== null ? message : {}) as Record<string, unknown>;
  if (role !== "system" || typeof content !== "string") throw new TypeError("guidance is not a system message");
  return systemMessage(content);
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
