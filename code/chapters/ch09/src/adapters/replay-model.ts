import { ModelCallError } from "../core/loop.js";
import type { AssistantMessage, ChatMessage } from "../core/messages.js";
import type { FinishReason, ModelClient, ModelReply, ModelRequest } from "../core/model.js";

/**
 * Whose request a model call is: the run's own (`parent`), a subagent's (chapter 6), or the history summary's
 * (chapter 8).
 */
export type RequestOwner = "parent" | "subagent" | "summarizer";

/**
 * Tells the run's requests from its subagents': the run's all carry the system message its first request carried,
 * a subagent's carries its own. A request that offers no tools is a summary's: every agent offers some. One rule for
 * recording replies and for replaying them, so the two always agree.
 */
export class RequestOwners {
  #parentSystem: string | null | undefined;

  of(request: ModelRequest | undefined): RequestOwner {
    if (request?.tools.length === 0) return "summarizer";
    const system = request?.messages[0]?.content ?? null;
    if (this.#parentSystem === undefined) this.#parentSystem = system;
    return system === this.#parentSystem ? "parent" : "subagent";
  }
}

export interface ReplayOptions {
  /** Turns the recorded model ended otherwise than their calls or text say (a `length` reply, say). */
  readonly cutShort?: ReadonlyMap<AssistantMessage, FinishReason>;
  /**
   * Chapter 6: the subagents' recorded replies, in call order. A request whose system message differs from the
   * first request's is a subagent's and is answered from these, never from the run's own turns.
   */
  readonly subagentTurns?: readonly AssistantMessage[];
  /** Chapter 8: the history summaries' recorded replies, in call order; a summary request is answered only from these. */
  readonly summaryTurns?: readonly AssistantMessage[];
}

/**
 * A model that answers with the assistant turns of a recorded run, in order, whatever happened
 * to the tool calls this time. It never makes a reply up: past the recording, it fails.
 */
export class ReplayModel implements ModelClient {
  private readonly turns: readonly AssistantMessage[];
  private readonly cutShort: ReadonlyMap<AssistantMessage, FinishReason>;
  private readonly subagentTurns: readonly AssistantMessage[] | undefined;
  private readonly summaryTurns: readonly AssistantMessage[];
  private next = 0;
  private nextSubagent = 0;
  private nextSummary = 0;
  private readonly owners = new RequestOwners();

  constructor(history: readonly ChatMessage[], options: ReplayOptions = {}) {
    this.turns = history.filter((message): message is AssistantMessage => message.role === "assistant");
    this.cutShort = options.cutShort ?? new Map();
    this.subagentTurns = options.subagentTurns;
    this.summaryTurns = options.summaryTurns ?? [];
  }

  complete(request?: ModelRequest): Promise<ModelReply> {
    const owner = this.owners.of(request);
    if (owner === "summarizer") {
      const message = this.summaryTurns[this.nextSummary];
      if (message === undefined) {
        const recorded = this.summaryTurns.length;
        return Promise.reject(
          new ModelCallError(`The replay has no summary reply ${this.nextSummary + 1}; it recorded ${recorded}`),
        );
      }
      this.nextSummary += 1;
      return Promise.resolve(this.reply(message));
    }
    if (this.subagentTurns !== undefined && owner === "subagent") {
      const message = this.subagentTurns[this.nextSubagent];
      if (message === undefined) {
        const recorded = this.subagentTurns.length;
        return Promise.reject(
          new ModelCallError(`The replay has no subagent reply ${this.nextSubagent + 1}; it recorded ${recorded}`),
        );
      }
      this.nextSubagent += 1;
      return Promise.resolve(this.reply(message));
    }
    const message = this.turns[this.next];
    if (message === undefined) {
      return Promise.reject(
        new ModelCallError(`The replay has no assistant turn ${this.next + 1}; it recorded ${this.turns.length}`),
      );
    }
    this.next += 1;
    return Promise.resolve(this.reply(message));
  }

  private reply(message: AssistantMessage): ModelReply {
    const finishReason = this.cutShort.get(message) ?? (message.toolCalls.length > 0 ? "tool_calls" : "stop");
    return { message, finishReason };
  }
}
