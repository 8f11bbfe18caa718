import { ModelCallError } from "../core/loop.js";
import type { AssistantMessage, ChatMessage } from "../core/messages.js";
import type { FinishReason, ModelClient, ModelReply } from "../core/model.js";

/**
 * A model that answers with the assistant turns of a recorded run, in order, whatever happened
 * to the tool calls this time. It never makes a reply up: past the recording, it fails.
 */
export class ReplayModel implements ModelClient {
  private readonly turns: readonly AssistantMessage[];
  private next = 0;

  /** `cutShort`: turns the recorded model ended otherwise than its calls or text say (a `length` reply, say). */
  constructor(
    history: readonly ChatMessage[],
    private readonly cutShort: ReadonlyMap<AssistantMessage, FinishReason> = new Map(),
  ) {
    this.turns = history.filter((message): message is AssistantMessage => message.role === "assistant");
  }

  complete(): Promise<ModelReply> {
    const message = this.turns[this.next];
    if (message === undefined) {
      return Promise.reject(
        new ModelCallError(`The replay has no assistant turn ${this.next + 1}; it recorded ${this.turns.length}`),
      );
    }
    this.next += 1;
    const finishReason = this.cutShort.get(message) ?? (message.toolCalls.length > 0 ? "tool_calls" : "stop");
    return Promise.resolve({ message, finishReason });
  }
}
