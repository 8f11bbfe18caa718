import { ModelCallError } from "../core/loop.js";
import type { AssistantMessage, ChatMessage } from "../core/messages.js";
import type { FinishReason, ModelClient, ModelReply, ModelRequest } from "../core/model.js";

/**
 * Whose request a model call is: the run's own (`parent`), a subagent's (chapter 6), the history summary's
 * (chapter 8), or one of memory's three side queries (chapter 9).
 */
export type RequestOwner = "parent" | "subagent" | "summarizer" | MemoryQuery;

/** Chapter 9: memory's side queries, each named by the `purpose` its request carries. */
export type MemoryQuery = "selector" | "extractor" | "consolidator";

const MEMORY_QUERIES: readonly string[] = ["selector", "extractor", "consolidator"] satisfies MemoryQuery[];

/**
 * Tells the run's requests from its subagents': the run's all carry the system message its first request carried,
 * a subagent's carries its own. A memory side query says which it is in its `purpose` (it offers no tools, as a
 * summary does); any other request that offers no tools is a summary's: every agent offers some. One rule for
 * recording replies and for replaying them, so the two always agree.
 */
export class RequestOwners {
  #parentSystem: string | null | undefined;

  of(request: ModelRequest | undefined): RequestOwner {
    const purpose = request?.purpose;
    // Before the parent's system message is taken: a run with memory asks its selector first.
    if (purpose !== undefined && MEMORY_QUERIES.includes(purpose)) return purpose as MemoryQuery;
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
  /** Chapter 9: memory's selector replies, in call order; a selector request is answered only from these. */
  readonly selectorTurns?: readonly AssistantMessage[];
  /** Chapter 9: memory's extractor replies, likewise. */
  readonly extractorTurns?: readonly AssistantMessage[];
  /** Chapter 9: memory's consolidator replies, likewise. */
  readonly consolidatorTurns?: readonly AssistantMessage[];
}

/** What a side query's replies are called when one is missing: the words of ModelCallError's message. */
const QUEUE_NAMES = {
  summarizer: "summary",
  selector: "memory selector",
  extractor: "memory extractor",
  consolidator: "memory consolidator",
} as const;

/**
 * A model that answers with the assistant turns of a recorded run, in order, whatever happened
 * to the tool calls this time. It never makes a reply up: past the recording, it fails.
 */
export class ReplayModel implements ModelClient {
  private readonly turns: readonly AssistantMessage[];
  private readonly cutShort: ReadonlyMap<AssistantMessage, FinishReason>;
  private readonly subagentTurns: readonly AssistantMessage[] | undefined;
  /** The summary's and memory's queues: each side request is answered only from its own owner's replies. */
  private readonly sideTurns: Readonly<Record<keyof typeof QUEUE_NAMES, readonly AssistantMessage[]>>;
  private readonly nextSide = { summarizer: 0, selector: 0, extractor: 0, consolidator: 0 };
  private next = 0;
  private nextSubagent = 0;
  private readonly owners = new RequestOwners();

  constructor(history: readonly ChatMessage[], options: ReplayOptions = {}) {
    this.turns = history.filter((message): message is AssistantMessage => message.role === "assistant");
    this.cutShort = options.cutShort ?? new Map();
    this.subagentTurns = options.subagentTurns;
    this.sideTurns = {
      summarizer: options.summaryTurns ?? [],
      selector: options.selectorTurns ?? [],
      extractor: options.extractorTurns ?? [],
      consolidator: options.consolidatorTurns ?? [],
    };
  }

  complete(request?: ModelRequest): Promise<ModelReply> {
    const owner = this.owners.of(request);
    if (owner !== "parent" && owner !== "subagent") {
      const queue = this.sideTurns[owner];
      const index = this.nextSide[owner];
      const message = queue[index];
      if (message === undefined) {
        return Promise.reject(
          new ModelCallError(`The replay has no ${QUEUE_NAMES[owner]} reply ${index + 1}; it recorded ${queue.length}`),
        );
      }
      this.nextSide[owner] = index + 1;
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
