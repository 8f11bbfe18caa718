import { readFile, writeFile } from "node:fs/promises";
import { RequestOwners, toOpenAIMessage, type RequestOwner } from "../bootstrap.js";
import { ConfigurationError } from "../config.js";
import { HookResult, type HookCallback } from "../core/hooks.js";
import { ModelCallError } from "../core/loop.js";
import { assistantMessage, systemMessage, toolCall, toolMessage, userMessage } from "../core/messages.js";
import type { AssistantMessage, ChatMessage, ToolCall } from "../core/messages.js";
import type { FinishReason, ModelClient } from "../core/model.js";
import { toolError, type ValidToolCall } from "../core/tools.js";

/** What `--transcript` writes and `--replay` reads: the whole history, in Chat Completions form. */
export interface Transcript {
  readonly chapter: number;
  readonly messages: readonly ChatMessage[];
  /**
   * From chapter 4: the calls of `messages` a PreToolUse hook rewrote, each with the arguments (JSON text) that went
   * to the policy, the approval and the handler. `messages` keeps every call as the model sent it.
   */
  readonly rewrittenArguments?: ReadonlyMap<ToolCall, string>;
  /**
   * From chapter 6, when a subagent ran (chapter 8: a summary was made; chapter 9: memory asked the model, which every
   * run does): every reply the model gave, in call order, each saying whose request it answered (those replies are
   * in no history the run keeps). The parent's are the assistant turns of `messages`, and come back as those very
   * objects once read.
   */
  readonly replies?: readonly RecordedReply[];
}

export interface RecordedReply {
  readonly message: AssistantMessage;
  readonly finishReason: FinishReason;
  /** Whose request it answered. */
  readonly agent: RequestOwner;
}

/**
 * Replies recorded past this many bytes are dropped, and the transcript then holds none: a provider's replies are
 * not ours to keep without bound (20 subagents of 30 turns could otherwise pin gigabytes until the run ends).
 */
export const MAX_RECORDED_REPLY_BYTES = 64 * 1024 * 1024;

/**
 * `model`, and every reply it gives, in order, with whose request it answered (`RequestOwners`, the rule the replay
 * answers by). `replies` is `undefined` once they outgrew `MAX_RECORDED_REPLY_BYTES`.
 */
export function recordReplies(model: ModelClient): {
  readonly model: ModelClient;
  readonly replies: () => readonly RecordedReply[] | undefined;
} {
  let replies: RecordedReply[] | undefined = [];
  let bytes = 0;
  const owners = new RequestOwners();
  return {
    replies: () => replies,
    model: {
      async complete(request) {
        const agent = owners.of(request);
        const reply = await model.complete(request);
        if (replies !== undefined) {
          bytes += JSON.stringify(toOpenAIMessage(reply.message)).length;
          if (bytes > MAX_RECORDED_REPLY_BYTES) replies = undefined;
          else replies.push(Object.freeze({ message: reply.message, finishReason: reply.finishReason, agent }));
        }
        return reply;
      },
    },
  };
}

/** What a reply's calls or text say about how it ended; a recorded reply says so only when it ended otherwise. */
function naturalEnd(message: AssistantMessage): FinishReason {
  return message.toolCalls.length > 0 ? "tool_calls" : "stop";
}

/** One entry of the file's `rewritten_arguments`: which call (by position, as ids may repeat) and what it ran with. */
interface WireRewrite {
  readonly message: number;
  readonly tool_call_id: string;
  readonly arguments: string;
}

export async function writeTranscript(path: string, transcript: Transcript): Promise<void> {
  const rewritten = transcript.rewrittenArguments ?? new Map<ToolCall, string>();
  const rewrites = transcript.messages.flatMap((message, index): WireRewrite[] =>
    message.role !== "assistant"
      ? []
      : message.toolCalls.flatMap((call) => {
          const ran = rewritten.get(call);
          return ran === undefined ? [] : [{ message: index, tool_call_id: call.id, arguments: ran }];
        }),
  );
  const replies = transcript.replies;
  // Only when a subagent ran, a summary was made or memory asked its model (chapter 9's runs always do, since the
  // extractor always runs): a run without any of them is recorded exactly as before.
  const moreReplies = replies !== undefined && replies.some((reply) => reply.agent !== "parent");
  const wire = {
    chapter: transcript.chapter,
    messages: transcript.messages.map(toOpenAIMessage),
    // Only when a hook rewrote a call: a run without one is recorded exactly as before.
    ...(rewrites.length === 0 ? {} : { rewritten_arguments: rewrites }),
    ...(moreReplies ? { replies: replies.map(toWireReply) } : {}),
  };
  await writeFile(path, `${JSON.stringify(wire, null, 2)}\n`, "utf8");
}

export async function readTranscript(path: string | URL): Promise<Transcript> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(path, "utf8"));
  } catch (error) {
    throw new ConfigurationError(`cannot read transcript ${String(path)}: ${(error as Error).message}`);
  }
  const record = (typeof raw === "object" && raw !== null ? raw : {}) as {
    chapter?: unknown;
    messages?: unknown;
    rewritten_arguments?: unknown;
    replies?: unknown;
  };
  if (!Array.isArray(record.messages)) {
    throw new ConfigurationError(`transcript ${String(path)} has no "messages" array`);
  }
  const messages = record.messages.map((message: unknown, index) =>
    toMessage(message, `${String(path)} messages[${index}]`),
  );
  const chapter = typeof record.chapter === "number" ? record.chapter : 0;
  const where = `transcript ${String(path)}`;
  return {
    chapter,
    messages,
    ...(record.rewritten_arguments === undefined
      ? {}
      : { rewrittenArguments: toRewrites(record.rewritten_arguments, messages, where) }),
    ...(record.replies === undefined ? {} : { replies: toReplies(record.replies, messages, String(path)) }),
  };
}

/**
 * What a replay answers with: the run's own turns (the assistant turns of the messages, and a last reply the model
 * cut short) and, apart from them, the subagents' replies in call order. `cutShort` holds the replies the model
 * ended with `length` or `content_filter`. The run's turns carry the model's own calls when the replay `runsHooks`
 * (`ReplayRewrites` checks what the hooks make of them), else the arguments each call ran with.
 */
export function replayedTurns(
  transcript: Transcript,
  runsHooks: boolean,
): {
  readonly turns: readonly ChatMessage[];
  readonly subagentTurns: readonly AssistantMessage[];
  readonly summaryTurns: readonly AssistantMessage[];
  readonly selectorTurns: readonly AssistantMessage[];
  readonly extractorTurns: readonly AssistantMessage[];
  readonly consolidatorTurns: readonly AssistantMessage[];
  readonly cutShort: ReadonlyMap<AssistantMessage, FinishReason>;
} {
  const turns = runsHooks ? transcript.messages : replayedMessages(transcript);
  const replies = transcript.replies ?? [];
  const cutShort = new Map<AssistantMessage, FinishReason>();
  for (const reply of replies) {
    if (reply.finishReason !== naturalEnd(reply.message)) cutShort.set(reply.message, reply.finishReason);
  }
  // A parent reply cut short is in no history: the run ended there, so it answers the run's last request.
  const lastParent = replies.filter((reply) => reply.agent === "parent").at(-1);
  const cutParent = lastParent !== undefined && cutShort.has(lastParent.message) ? [lastParent.message] : [];
  const of = (agent: RequestOwner): AssistantMessage[] =>
    replies.filter((reply) => reply.agent === agent).map((reply) => reply.message);
  return {
    turns: [...turns, ...cutParent],
    subagentTurns: of("subagent"),
    summaryTurns: of("summarizer"),
    selectorTurns: of("selector"),
    extractorTurns: of("extractor"),
    consolidatorTurns: of("consolidator"),
    cutShort,
  };
}

/**
 * The recorded messages with each call a hook rewrote carrying the arguments it ran with: what a replay answers with
 * when it runs no hooks (chapters 1–3), so the policy, the approval and the handler see what happened. A replay that
 * runs hooks answers with the model's own calls instead, and `ReplayRewrites` checks what the hooks make of them.
 */
export function replayedMessages(transcript: Transcript): readonly ChatMessage[] {
  const rewritten = transcript.rewrittenArguments;
  if (rewritten === undefined || rewritten.size === 0) return transcript.messages;
  return transcript.messages.map((message) => {
    if (message.role !== "assistant" || !message.toolCalls.some((call) => rewritten.has(call))) return message;
    const calls = message.toolCalls.map((call) => {
      const ran = rewritten.get(call);
      return ran === undefined ? call : toolCall(call.id, call.name, ran);
    });
    return assistantMessage(message.content, calls);
  });
}

/** What the model reads in place of a call whose arguments the replay's hooks made otherwise than the recording. */
export const REPLAY_DIVERGED = toolError(
  "replay_diverged",
  "The PreToolUse hooks changed these arguments otherwise than in the recorded run; the call did not run",
);

/**
 * Keeps a replay that runs hooks to the recording's PreToolUse rewrites, each applied exactly once. The replay
 * answers with the model's own calls, so the hooks rewrite them as they did when the run was recorded; `check`,
 * registered after every other PreToolUse callback, then sees what each of the run's calls would run with:
 * - what the recording ran: it runs;
 * - the model's own arguments where the recording ran rewritten ones (the rewriting hook is not registered now):
 *   the recorded arguments, so the replay still runs what ran;
 * - anything else: the call does not run, and `guard` ends the replay at its next request.
 * A call that is none of the recording's turns (a subagent's, chapter 6) passes: its replies are replayed as the
 * model sent them, and the hooks rewrite it once, as they did then.
 */
export class ReplayRewrites {
  readonly #calls: ReadonlySet<ToolCall>;
  readonly #rewritten: ReadonlyMap<ToolCall, string>;
  #diverged: string | undefined;

  constructor(transcript: Transcript) {
    this.#calls = new Set(
      transcript.messages.flatMap((message) => (message.role === "assistant" ? message.toolCalls : [])),
    );
    this.#rewritten = transcript.rewrittenArguments ?? new Map<ToolCall, string>();
  }

  readonly check: HookCallback = (context) => {
    const prepared = context.prepared as ValidToolCall;
    const { call } = prepared;
    if (!this.#calls.has(call)) return new HookResult();
    const ran = JSON.stringify(prepared.arguments);
    const sent = canonicalArguments(prepared, call.arguments);
    const recordedText = this.#rewritten.get(call);
    const recorded = recordedText === undefined ? sent : canonicalArguments(prepared, recordedText);
    if (recorded !== undefined && ran === recorded) return new HookResult();
    if (recorded !== undefined && ran === sent) {
      return new HookResult({
        updatedInput: { ...prepared, arguments: JSON.parse(recorded) as Record<string, unknown> },
      });
    }
    const id = JSON.stringify(call.id.slice(0, 64));
    this.#diverged ??= `The replay stopped: the PreToolUse hooks made the arguments of ${call.name} call ${id} other than the recorded run's, so it did not run`;
    return new HookResult({ blockingError: REPLAY_DIVERGED });
  };

  /** `model`, refusing every request once a call diverged: the recording's later turns answered another run. */
  guard(model: ModelClient): ModelClient {
    return {
      complete: (request) => {
        if (this.#diverged !== undefined) return Promise.reject(new ModelCallError(this.#diverged));
        return model.complete(request);
      },
    };
  }
}

/** `text` as the tool's schema reads it, in the form the loop records a rewrite; undefined when it reads none. */
function canonicalArguments(prepared: ValidToolCall, text: string): string | undefined {
  try {
    const parsed = prepared.definition.inputSchema.safeParse(JSON.parse(text === "" ? "{}" : text));
    return parsed.success ? JSON.stringify(parsed.data) : undefined;
  } catch {
    return undefined;
  }
}

/** `rewritten_arguments`, each entry naming a call the messages hold: a stale or edited entry must not pass unseen. */
function toRewrites(value: unknown, messages: readonly ChatMessage[], where: string): ReadonlyMap<ToolCall, string> {
  if (!Array.isArray(value)) throw new ConfigurationError(`${where} "rewritten_arguments" must be a list`);
  const rewrites = new Map<ToolCall, string>();
  value.forEach((entry: unknown, index) => {
    const at = `${where} rewritten_arguments[${index}]`;
    const fields = (typeof entry === "object" && entry !== null ? entry : {}) as Record<string, unknown>;
    const { message: position, tool_call_id: id, arguments: args } = fields;
    if (!Number.isInteger(position) || typeof id !== "string" || typeof args !== "string") {
      throw new ConfigurationError(`${at} needs an integer message, a string tool_call_id and string arguments`);
    }
    const holder = messages[position as number];
    const call = holder?.role === "assistant" ? holder.toolCalls.find((candidate) => candidate.id === id) : undefined;
    if (call === undefined) {
      throw new ConfigurationError(
        `${at} names ${JSON.stringify(id)}, which is no tool call of messages[${String(position)}]`,
      );
    }
    if (rewrites.has(call)) throw new ConfigurationError(`${at} names ${JSON.stringify(id)} a second time`);
    rewrites.set(call, args);
  });
  return rewrites;
}

function toWireReply(reply: RecordedReply): Record<string, unknown> {
  const { message, finishReason, agent } = reply;
  // Only the two reasons that change what the loop does: a provider may say "stop" beside tool calls.
  const cut = finishReason === "length" || finishReason === "content_filter";
  return { agent, ...toOpenAIMessage(message), ...(cut ? { finish_reason: finishReason } : {}) };
}

/** Every `agent` a recorded reply may name, in the words of the error that lists them. */
const AGENTS: readonly string[] = [
  "parent",
  "subagent",
  "summarizer",
  "selector",
  "extractor",
  "consolidator",
] satisfies RequestOwner[];

/**
 * `replies`: assistant messages, each with `agent` (one of `AGENTS`) and an optional `finish_reason` of
 * `length` or `content_filter`. The parent's entries are exactly the assistant turns of `messages`, in order (and
 * at most one more, cut short, at their end): a replay never answers the run with a reply its history does not show.
 */
function toReplies(value: unknown, messages: readonly ChatMessage[], path: string): readonly RecordedReply[] {
  if (!Array.isArray(value)) throw new ConfigurationError(`transcript ${path} "replies" must be a list`);
  const turns = messages.filter((message): message is AssistantMessage => message.role === "assistant");
  const mismatch = (): ConfigurationError =>
    new ConfigurationError(`transcript ${path} "replies" must hold every assistant turn of "messages", in order`);
  let matched = 0;
  let cutParent = false;
  const replies = value.map((entry: unknown, index): RecordedReply => {
    const where = `${path} replies[${index}]`;
    const fields = (typeof entry === "object" && entry !== null ? entry : {}) as Record<string, unknown>;
    if (fields.role !== "assistant") throw new ConfigurationError(`${where}.role must be assistant`);
    const agent = fields.agent;
    if (typeof agent !== "string" || !AGENTS.includes(agent)) {
      throw new ConfigurationError(`${where}.agent must be one of ${AGENTS.join(", ")}`);
    }
    const read = toMessage(fields, where) as AssistantMessage;
    const reason = fields.finish_reason;
    if (reason !== undefined && reason !== "length" && reason !== "content_filter") {
      throw new ConfigurationError(`${where}.finish_reason must be length or content_filter when given`);
    }
    let message = read;
    if (agent === "parent") {
      // Nothing of the parent's may follow a reply that ended its run.
      if (cutParent) throw mismatch();
      if (reason === undefined) {
        const turn = turns[matched];
        if (turn === undefined || !sameTurn(turn, read)) throw mismatch();
        message = turn;
        matched += 1;
      } else {
        cutParent = true;
      }
    }
    return Object.freeze({ message, finishReason: reason ?? naturalEnd(message), agent: agent as RequestOwner });
  });
  if (matched !== turns.length) throw mismatch();
  return Object.freeze(replies);
}

/** Each side serialized once: a hostile file's long turn is compared once, not once per reply. */
function sameTurn(a: AssistantMessage, b: AssistantMessage): boolean {
  return JSON.stringify(toOpenAIMessage(a)) === JSON.stringify(toOpenAIMessage(b));
}

function toMessage(value: unknown, where: string): ChatMessage {
  const m = (typeof value === "object" && value !== null ? value : {}) as Record<string, unknown>;
  const text = (key: string): string => {
    if (typeof m[key] !== "string") throw new ConfigurationError(`${where}.${key} must be a string`);
    return m[key];
  };
  switch (m.role) {
    case "system":
      return systemMessage(text("content"));
    case "user":
      return userMessage(text("content"));
    case "tool":
      return toolMessage(text("content"), text("tool_call_id"));
    case "assistant": {
      const content = m.content === null || m.content === undefined ? null : text("content");
      const calls = Array.isArray(m.tool_calls)
        ? m.tool_calls.map((call: unknown, i) => toCall(call, `${where}.tool_calls[${i}]`))
        : [];
      try {
        return assistantMessage(content, calls);
      } catch (error) {
        throw new ConfigurationError(`${where}: ${(error as Error).message}`);
      }
    }
    default:
      throw new ConfigurationError(`${where}.role must be system, user, assistant or tool`);
  }
}

function toCall(value: unknown, where: string): ToolCall {
  const call = value as { id?: unknown; function?: { name?: unknown; arguments?: unknown } } | null;
  const id = call?.id;
  const name = call?.function?.name;
  const args = call?.function?.arguments;
  if (typeof id !== "string" || typeof name !== "string" || typeof args !== "string") {
    throw new ConfigurationError(`${where} needs string id, function.name and function.arguments`);
  }
  return toolCall(id, name, args);
}
