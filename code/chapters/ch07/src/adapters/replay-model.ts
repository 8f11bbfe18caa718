import { ModelCallError } from "../core/loop.js";
import type { AssistantMessage, ChatMessage } from "../core/messages.js";
import type { FinishReason, ModelClient, ModelReply, ModelRequest } from "../core/model.js";

export interface ReplayOptions {
  /** Turns the recorded model ended otherwise than their calls or text say (a `length` reply, say). */
  readonly cutShort?: ReadonlyMap<AssistantMessage, FinishReason>;
  /**
   * Chapter 6: the subagents' recorded replies, in call order. A request whose system message differs from the
   * first request's is a subagent's and is answered from these, never from the run's own turns.
   */
  readonly subagentTurns?: readonly AssistantMessage[];
}

/**
 * A model that answers with the assistant turns of a recorded run, in order, whatever happened
 * to the tool calls this time. It never makes a reply up: past the recording, it fails.
 */
export class ReplayModel implements ModelClient {
  private readonly turns: readonly AssistantMessage[];
  private readonly cutShort: ReadonlyMap<AssistantMessage, FinishReason>;
  private readonly subagentTurns: readonly AssistantMessage[] | undefined;
  private next = 0;
  private nextSubagent = 0;
  private parentSystem: string | null | undefined;

  constructor(history: readonly ChatMessage[], options: ReplayOptions = {}) {
    this.turns = history.filter((message): message is AssistantMessage => message.role === "assistant");
    this.cutShort = options.cutShort ?? new Map();
    this.subagentTurns = options.subagentTurns;
  }

  complete(request?: ModelRequest): Promise<ModelReply> {
    const system = request?.messages[0]?.content ?? null;
    this.parentSystem ??= system;
    if (this.subagentTurns !== undefined && system !== this.parentSystem) {
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
