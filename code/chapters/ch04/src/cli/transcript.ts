import { readFile, writeFile } from "node:fs/promises";
import { toOpenAIMessage } from "../bootstrap.js";
import { ConfigurationError } from "../config.js";
import { HookResult, type HookCallback } from "../core/hooks.js";
import { ModelCallError } from "../core/loop.js";
import { assistantMessage, systemMessage, toolCall, toolMessage, userMessage } from "../core/messages.js";
import type { ChatMessage, ToolCall } from "../core/messages.js";
import type { ModelClient } from "../core/model.js";
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
  const wire = {
    chapter: transcript.chapter,
    messages: transcript.messages.map(toOpenAIMessage),
    // Only when a hook rewrote a call: a run without one is recorded exactly as before.
    ...(rewrites.length === 0 ? {} : { rewritten_arguments: rewrites }),
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
  };
  if (!Array.isArray(record.messages)) {
    throw new ConfigurationError(`transcript ${String(path)} has no "messages" array`);
  }
  const messages = record.messages.map((message: unknown, index) =>
    toMessage(message, `${String(path)} messages[${index}]`),
  );
  const chapter = typeof record.chapter === "number" ? record.chapter : 0;
  if (record.rewritten_arguments === undefined) return { chapter, messages };
  const rewrittenArguments = toRewrites(record.rewritten_arguments, messages, `transcript ${String(path)}`);
  return { chapter, messages, rewrittenArguments };
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
