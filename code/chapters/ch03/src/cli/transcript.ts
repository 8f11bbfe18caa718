import { readFile, writeFile } from "node:fs/promises";
import { toOpenAIMessage } from "../bootstrap.js";
import { ConfigurationError } from "../config.js";
import { assistantMessage, systemMessage, toolCall, toolMessage, userMessage } from "../core/messages.js";
import type { ChatMessage, ToolCall } from "../core/messages.js";

/** What `--transcript` writes and `--replay` reads: the whole history, in Chat Completions form. */
export interface Transcript {
  readonly chapter: number;
  readonly messages: readonly ChatMessage[];
}

export async function writeTranscript(path: string, transcript: Transcript): Promise<void> {
  const wire = { chapter: transcript.chapter, messages: transcript.messages.map(toOpenAIMessage) };
  await writeFile(path, `${JSON.stringify(wire, null, 2)}\n`, "utf8");
}

export async function readTranscript(path: string | URL): Promise<Transcript> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(path, "utf8"));
  } catch (error) {
    throw new ConfigurationError(`cannot read transcript ${String(path)}: ${(error as Error).message}`);
  }
  const record = (typeof raw === "object" && raw !== null ? raw : {}) as { chapter?: unknown; messages?: unknown };
  if (!Array.isArray(record.messages)) {
    throw new ConfigurationError(`transcript ${String(path)} has no "messages" array`);
  }
  const messages = record.messages.map((message: unknown, index) =>
    toMessage(message, `${String(path)} messages[${index}]`),
  );
  return { chapter: typeof record.chapter === "number" ? record.chapter : 0, messages };
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
