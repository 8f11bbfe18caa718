import { randomBytes, randomUUID } from "node:crypto";
import {
  chmodSync,
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  fsyncSync,
  lstatSync,
  linkSync,
  openSync,
  readlinkSync,
  unlinkSync,
  writeSync,
  type BigIntStats,
} from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { folderAccess, type Folder, type FolderAccess } from "../adapters/folder-handles.js";
import { systemMessage, toolMessage, userMessage, validateToolPairing } from "../core/messages.js";
import type { ChatMessage } from "../core/messages.js";
import type { ModelClient } from "../core/model.js";
import type { ToolResult } from "../core/tools.js";

/** A result over this many UTF-8 bytes goes to disk; exactly this many stays in the message. */
export const DEFAULT_PERSIST_THRESHOLD_BYTES = 30_000;
/** The most bytes of one reply's results the history keeps inline; the largest beyond it go to disk too. */
export const DEFAULT_BATCH_BUDGET_BYTES = 200_000;
export const DEFAULT_PREVIEW_HEAD_BYTES = 2_000;
export const DEFAULT_PREVIEW_TAIL_BYTES = 2_000;
/** Micro compaction leaves this many of the latest tool groups whole. */
export const DEFAULT_KEEP_RECENT_TOOL_GROUPS = 3;
/** After a prompt-too-long summary, this many of the latest groups follow it. */
export const DEFAULT_REACTIVE_TAIL_GROUPS = 5;
/** A request history over this many bytes (after snip and micro) is summarized by the model. */
export const DEFAULT_PROACTIVE_THRESHOLD_BYTES = 50_000;
/** Snip starts above this many message groups, keeps the first few, a marker, and the rest from the end. */
export const DEFAULT_SNIP_MAX_GROUPS = 50;
export const DEFAULT_SNIP_KEEP_HEAD_GROUPS = 3;
/**
 * Bytes of artifacts (results and transcripts) one manager writes at most: the book sets no bound, and 1,000 turns
 * of 16 MiB replies would fill a disk with the user's workspace on it.
 */
export const DEFAULT_MAX_ARTIFACT_BYTES = 256 * 1024 * 1024;

/** What an older tool result's content becomes in the request history (micro compaction). */
export const COMPACTED_TOOL_RESULT = "[Earlier tool result compacted. Re-run if needed.]";
export const SUMMARY_SYSTEM_PROMPT =
  "Summarize the conversation below so the work can continue from the summary alone. Reply with one JSON object " +
  "and nothing else: no code fence and no tool call. It has exactly these keys: current_goal (a non-empty string), " +
  "key_findings, files_read_or_changed, remaining_work and user_constraints (each an array of non-empty strings).";

/** Where the runtime writes, relative to the workspace: made on the first write, never through a link. */
const ARTIFACT_FOLDERS = [".agent_tutorial", "artifacts"] as const;
/**
 * Written into `.agent_tutorial/` when the runtime makes it: git then offers none of it (tool output, secrets
 * included) to a user whose workspace is their repository, as pytest's and ruff's caches do.
 */
const STATE_GITIGNORE = "*\n";
/** An injected id: lowercase letters and digits, in parts joined by single hyphens. The default has no hyphen. */
const ID_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const MAX_ID_LENGTH = 64;
const SUMMARY_FIELDS = [
  "current_goal",
  "files_read_or_changed",
  "key_findings",
  "remaining_work",
  "user_constraints",
] as const;

/** A summary's five fields as the manager's code reads them, checked when it is made: a summary is valid or none. */
export class CompactionSummary {
  readonly currentGoal: string;
  readonly keyFindings: readonly string[];
  readonly filesReadOrChanged: readonly string[];
  readonly remainingWork: readonly string[];
  readonly userConstraints: readonly string[];

  constructor(fields: {
    readonly currentGoal: string;
    readonly keyFindings: readonly string[];
    readonly filesReadOrChanged: readonly string[];
    readonly remainingWork: readonly string[];
    readonly userConstraints: readonly string[];
  }) {
    this.currentGoal = filledText(fields.currentGoal);
    this.keyFindings = filledList(fields.keyFindings);
    this.filesReadOrChanged = filledList(fields.filesReadOrChanged);
    this.remainingWork = filledList(fields.remainingWork);
    this.userConstraints = filledList(fields.userConstraints);
    Object.freeze(this);
  }
}

const filled = (item: unknown): item is string => typeof item === "string" && item.trim() !== "";

function filledText(value: unknown): string {
  if (!filled(value)) throw new CompactionError("summary model output has invalid values");
  return value;
}

/** A frozen copy: a list changed by its owner later cannot change the summary. */
function filledList(value: unknown): readonly string[] {
  if (!Array.isArray(value) || !value.every(filled)) {
    throw new CompactionError("summary model output has invalid values");
  }
  return Object.freeze([...value]);
}

export interface HistorySummarizer {
  summarize(history: readonly ChatMessage[]): Promise<CompactionSummary>;
}

/** A file the manager published: its absolute path (never shown to the model), the workspace-relative one, its size. */
export interface ArtifactReference {
  readonly path: string;
  /** Relative to the workspace, with `/`: the only path a message or a terminal line holds. */
  readonly relativePath: string;
  readonly originalBytes: number;
}

/** A result `compactToolResults` saved: its place in the batch and its file. */
export interface ToolResultArtifact {
  readonly resultIndex: number;
  readonly reference: ArtifactReference;
}

export interface ToolResultCompactionOutcome {
  readonly results: readonly ToolResult[];
  readonly artifacts: readonly ToolResultArtifact[];
}

/** A summary's outcome: the request history it leaves, and the transcript written before it. */
export interface HistoryCompactionOutcome {
  readonly history: readonly ChatMessage[];
  readonly transcript: ArtifactReference;
}

/** A file the runtime wrote into the workspace without asking, or why it could not: the CLI says both. */
export type ArtifactNotice =
  | { readonly type: "published"; readonly relativePath: string; readonly bytes: number }
  | { readonly type: "failed"; readonly reason: string };

export interface CompactionManagerOptions {
  /** The workspace's real path. */
  readonly workspace: string;
  readonly summarizer: HistorySummarizer;
  /** A new id per file; a UUID without hyphens when omitted. Never a tool-call id, a tool name or model text. */
  readonly idGenerator?: () => string;
  readonly persistThresholdBytes?: number;
  readonly batchBudgetBytes?: number;
  readonly previewHeadBytes?: number;
  readonly previewTailBytes?: number;
  readonly keepRecentToolGroups?: number;
  readonly reactiveTailGroups?: number;
  readonly proactiveThresholdBytes?: number;
  readonly snipMaxGroups?: number;
  readonly snipKeepHeadGroups?: number;
  readonly maxArtifactBytes?: number;
  readonly onArtifact?: (notice: ArtifactNotice) => void;
  /** After each summary: the request history's bytes before it and after it. */
  readonly onSummary?: (bytesBefore: number, bytesAfter: number) => void;
}

export class CompactionError extends Error {
  override readonly name: string = "CompactionError";
}

/** The artifact folder cannot be made, is a link, or leads outside the workspace; or an id is not a safe name. */
export class ArtifactPathError extends CompactionError {
  override readonly name = "ArtifactPathError";
}

/** A file of that name exists already: it is never overwritten. */
export class ArtifactConflictError extends CompactionError {
  override readonly name = "ArtifactConflictError";
}

/** The prompt-too-long recovery was asked again in the same recovery window. */
export class PromptTooLongRetryError extends CompactionError {
  override readonly name = "PromptTooLongRetryError";
}

function requirePositiveInteger(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer`);
}

/** Snip's limits leave room for at least one head group, the marker and one tail group; else a RangeError. */
export function validateSnipConfiguration(maxGroups: number, keepHeadGroups: number): void {
  requirePositiveInteger("maxGroups", maxGroups);
  requirePositiveInteger("keepHeadGroups", keepHeadGroups);
  if (maxGroups < 3) throw new RangeError("maxGroups must leave room for head, marker, and tail groups");
  if (keepHeadGroups > maxGroups - 2) {
    throw new RangeError("keepHeadGroups must leave room for marker and tail groups");
  }
}

/** A history cut into the units every level keeps or drops whole: a message, or a call with all its results. */
type MessageGroup = readonly ChatMessage[];

/** The pairing checked first, then the groups: no cut can fall between a call and one of its results. */
function validatedGroups(history: readonly ChatMessage[]): MessageGroup[] {
  validateToolPairing(history);
  const groups: ChatMessage[][] = [];
  for (const message of history) {
    if (message.role === "tool") (groups.at(-1) as ChatMessage[]).push(message);
    else groups.push([message]);
  }
  return groups;
}

const isToolGroup = (group: MessageGroup): boolean => {
  const [first] = group;
  return first?.role === "assistant" && first.toolCalls.length > 0;
};

/**
 * Above `maxGroups` groups: the first `keepHeadGroups`, one marker, and the last groups up to `maxGroups` in all.
 * The limits are checked first (`validateSnipConfiguration`), then the history's pairing.
 */
export function snipCompactHistory(
  history: readonly ChatMessage[],
  options: { readonly maxGroups?: number; readonly keepHeadGroups?: number } = {},
): readonly ChatMessage[] {
  const maxGroups = options.maxGroups ?? DEFAULT_SNIP_MAX_GROUPS;
  const keepHeadGroups = options.keepHeadGroups ?? DEFAULT_SNIP_KEEP_HEAD_GROUPS;
  validateSnipConfiguration(maxGroups, keepHeadGroups);
  return Object.freeze(snipGroups(validatedGroups(history), maxGroups, keepHeadGroups).flat());
}

/**
 * The groups each marker made here stands for, by the marker's identity (never by its text): a cached request
 * history snipped again drops its old marker with the rest, and the new one counts what that one stood for.
 */
const markerGroups = new WeakMap<ChatMessage, number>();

const groupsStoodFor = (group: MessageGroup): number =>
  group.length === 1 ? (markerGroups.get(group[0] as ChatMessage) ?? 1) : 1;

function snipGroups(groups: readonly MessageGroup[], maxGroups: number, keepHead: number): readonly MessageGroup[] {
  if (groups.length <= maxGroups) return groups;
  const keepTail = maxGroups - keepHead - 1;
  const dropped = groups.slice(keepHead, groups.length - keepTail);
  const omitted = dropped.reduce((sum, group) => sum + groupsStoodFor(group), 0);
  const marker = systemMessage(`[Compacted: ${omitted} message groups omitted]`);
  markerGroups.set(marker, omitted);
  return [...groups.slice(0, keepHead), [marker], ...groups.slice(groups.length - keepTail)];
}

/** Every tool result before the last `keepRecentToolGroups` tool groups becomes the placeholder; calls stay. */
export function microCompactHistory(
  history: readonly ChatMessage[],
  options: { readonly keepRecentToolGroups?: number } = {},
): readonly ChatMessage[] {
  const keepRecentToolGroups = options.keepRecentToolGroups ?? DEFAULT_KEEP_RECENT_TOOL_GROUPS;
  requirePositiveInteger("keepRecentToolGroups", keepRecentToolGroups);
  return microGroups(validatedGroups(history), keepRecentToolGroups);
}

function microGroups(groups: readonly MessageGroup[], keep: number): readonly ChatMessage[] {
  let toolGroupsLeft = groups.filter(isToolGroup).length - keep;
  return Object.freeze(
    groups.flatMap((group) => {
      if (!isToolGroup(group) || toolGroupsLeft <= 0) return group;
      toolGroupsLeft -= 1;
      return group.map((message) =>
        message.role === "tool" ? toolMessage(COMPACTED_TOOL_RESULT, message.toolCallId) : message,
      );
    }),
  );
}

/** The wire shape `adapters/openai-chat.ts` sends, rebuilt here because a feature may not import an adapter. */
function wireMessage(message: ChatMessage): unknown {
  switch (message.role) {
    case "system":
    case "user":
      return { role: message.role, content: message.content };
    case "tool":
      return { role: "tool", tool_call_id: message.toolCallId, content: message.content };
    case "assistant":
      return message.toolCalls.length === 0
        ? { role: "assistant", content: message.content }
        : {
            role: "assistant",
            content: message.content,
            tool_calls: message.toolCalls.map((call) => ({
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: call.arguments },
            })),
          };
  }
}

/** JSON with every object's keys sorted: the same message always gives the same line. */
function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${stableJson(item)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/**
 * The loop's messages are frozen and never replaced, so each one's key-sorted JSON (and its line's size) is made
 * once; anyone else's, every time. The line itself is made only when a transcript is written: it can be six times
 * its JSON (below), and a 30 MB reply of `$` kept as a line would hold 180 MB for the whole run.
 */
const jsons = new WeakMap<ChatMessage, string>();
const lineSizes = new WeakMap<ChatMessage, number>();

/**
 * `$` and `` ` `` as JSON escapes. A transcript is a file the runtime saves unasked, full of the model's words, and a
 * shell handed it (`sh transcript-….jsonl`, one approval that shows only the file name) expands `$(…)` and backticks
 * even inside the double quotes JSON puts around every string. Both occur only inside strings, so each line still
 * parses to the same message; `;`, `|` and `&` stay inside those quotes, where a shell reads them as text.
 */
const DOLLAR = 0x24;
const BACKTICK = 0x60;
const ESCAPED_DOLLAR = Buffer.from("\\u0024", "latin1");
const ESCAPED_BACKTICK = Buffer.from("\\u0060", "latin1");
/** Bytes the escapes add to a line: five for each `$` and backtick (one character becomes the six of its escape). */
function inertExtraBytes(json: string): number {
  let count = 0;
  for (let at = 0; at < json.length; at += 1) {
    const unit = json.charCodeAt(at);
    if (unit === DOLLAR || unit === BACKTICK) count += 1;
  }
  return 5 * count;
}

/**
 * Bytes one transcript may take: the conversation's own bound as JSON (`MAX_CONVERSATION_BYTES`). Only a history
 * full of `$` and backticks, each six bytes as an escape, gets past it; it is refused before its line is made.
 */
export const MAX_TRANSCRIPT_BYTES = 64 * 1024 * 1024;

function messageJson(message: ChatMessage): string {
  let json = jsons.get(message);
  if (json === undefined) {
    json = stableJson(wireMessage(message));
    if (Object.isFrozen(message)) jsons.set(message, json);
  }
  return json;
}

/**
 * The lines of `history` as UTF-8, made inert into one buffer of their known size: the text between two `$` or
 * backticks is copied whole. No line is ever a string of its own (a callback per character, or a string per line,
 * held 800 MiB for 10 MB of `$`).
 */
function transcriptBytes(history: readonly ChatMessage[]): Buffer {
  const out = Buffer.allocUnsafe(historyUtf8Bytes(history));
  let at = 0;
  for (const message of history) {
    const json = Buffer.from(messageJson(message), "utf8");
    let from = 0;
    // Each found once: a search starts again only after the one it found was used.
    let dollar = json.indexOf(DOLLAR);
    let backtick = json.indexOf(BACKTICK);
    while (dollar !== -1 || backtick !== -1) {
      const isDollar = backtick === -1 || (dollar !== -1 && dollar < backtick);
      const next = isDollar ? dollar : backtick;
      at += json.copy(out, at, from, next);
      at += (isDollar ? ESCAPED_DOLLAR : ESCAPED_BACKTICK).copy(out, at);
      from = next + 1;
      if (isDollar) dollar = json.indexOf(DOLLAR, from);
      else backtick = json.indexOf(BACKTICK, from);
    }
    at += json.copy(out, at, from);
    out[at] = 0x0a;
    at += 1;
  }
  // Always all of it (the size is counted as the bytes are written): never a byte `allocUnsafe` left in it.
  return out.subarray(0, at);
}

/** UTF-8 bytes of `message`'s transcript line, counted without making it. */
function lineBytes(message: ChatMessage): number {
  let size = lineSizes.get(message);
  if (size === undefined) {
    const json = messageJson(message);
    size = Buffer.byteLength(json, "utf8") + inertExtraBytes(json) + 1;
    if (Object.isFrozen(message)) lineSizes.set(message, size);
  }
  return size;
}

/** One line of key-sorted wire JSON per message, each ending in a newline; non-ASCII kept as it is. */
export function serializeTranscript(history: readonly ChatMessage[]): string {
  return transcriptBytes(history).toString("utf8");
}

export function historyUtf8Bytes(history: readonly ChatMessage[]): number {
  return history.reduce((sum, message) => sum + lineBytes(message), 0);
}

/** The same message by identity (the loop's), else by its JSON (its line is that JSON with the escapes). */
const sameMessage = (a: ChatMessage | undefined, b: ChatMessage | undefined): boolean =>
  (a === b && Object.isFrozen(a)) || (a !== undefined && b !== undefined && messageJson(a) === messageJson(b));

/** A message as it is now: the loop's own (frozen) as they are, anyone else's as a frozen copy a later edit cannot reach. */
function settled(message: ChatMessage): ChatMessage {
  if (Object.isFrozen(message) && (message.role !== "assistant" || Object.isFrozen(message.toolCalls))) return message;
  const copy = structuredClone(message);
  if (copy.role === "assistant") {
    for (const call of copy.toolCalls) Object.freeze(call);
    Object.freeze(copy.toolCalls);
  }
  return Object.freeze(copy);
}

function historiesEqual(a: readonly ChatMessage[], b: readonly ChatMessage[]): boolean {
  return a.length === b.length && historyStartsWith(a, b);
}

function historyStartsWith(history: readonly ChatMessage[], prefix: readonly ChatMessage[]): boolean {
  return prefix.length <= history.length && prefix.every((message, index) => sameMessage(message, history[index]));
}

/**
 * The summary model's reply text as a summary: one JSON object with exactly the five fields, each filled (the lists
 * may be empty). Anything else is refused, never repaired.
 */
export function parseCompactionSummary(text: string): CompactionSummary {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CompactionError("summary model output is not valid JSON");
  }
  if (
    typeof value !== "object" ||
    value === null ||
    Array.isArray(value) ||
    !sameKeys(Object.keys(value).sort(), SUMMARY_FIELDS)
  ) {
    throw new CompactionError("summary model output must contain the exact fields");
  }
  const fields = value as Record<(typeof SUMMARY_FIELDS)[number], unknown>;
  return new CompactionSummary({
    currentGoal: fields.current_goal as string,
    keyFindings: fields.key_findings as string[],
    filesReadOrChanged: fields.files_read_or_changed as string[],
    remainingWork: fields.remaining_work as string[],
    userConstraints: fields.user_constraints as string[],
  });
}

const sameKeys = (keys: readonly string[], expected: readonly string[]): boolean =>
  keys.length === expected.length && keys.every((key, index) => key === expected[index]);

/**
 * The one system message a summary becomes: its JSON, keys sorted, with its kind and where the transcript is; one
 * key to a line, each value on its key's line, as the book prints it.
 */
function summaryContent(summary: CompactionSummary, transcriptPath: string): string {
  const fields = {
    current_goal: summary.currentGoal,
    files_read_or_changed: summary.filesReadOrChanged,
    key_findings: summary.keyFindings,
    kind: "compacted_history",
    remaining_work: summary.remainingWork,
    transcript_path: transcriptPath,
    user_constraints: summary.userConstraints,
  };
  const lines = Object.entries(fields).map(([key, value]) => `  ${JSON.stringify(key)}: ${JSON.stringify(value)}`);
  return `{\n${lines.join(",\n")}\n}`;
}

/**
 * The fourth level's model call, through the agent's own model: no tools, the fixed prompt, and the history to
 * summarize as its JSONL lines in one user message (a tool message needs the tools it answers, and there are none).
 */
export class ModelHistorySummarizer implements HistorySummarizer {
  constructor(private readonly model: ModelClient) {}

  async summarize(history: readonly ChatMessage[]): Promise<CompactionSummary> {
    const request = Object.freeze({
      messages: Object.freeze([systemMessage(SUMMARY_SYSTEM_PROMPT), userMessage(serializeTranscript(history))]),
      tools: Object.freeze([]),
    });
    const reply = await this.model.complete(request);
    if (reply.message.toolCalls.length > 0) throw new CompactionError("summary model must not call tools");
    if (reply.finishReason !== "stop") throw new CompactionError("summary model finishReason must be stop");
    const content = reply.message.content;
    if (content === null || content.trim() === "") throw new CompactionError("summary model output is empty");
    if (Buffer.byteLength(content, "utf8") > DEFAULT_PROACTIVE_THRESHOLD_BYTES) {
      throw new CompactionError(`summary model output is over ${DEFAULT_PROACTIVE_THRESHOLD_BYTES} bytes`);
    }
    return parseCompactionSummary(content);
  }
}

/**
 * The book's four levels between the canonical history and a request: large results to disk (once, before the
 * history holds them), then snip, micro and, only above the byte threshold, a model summary of the request history.
 */
export class CompactionManager {
  readonly #workspace: string;
  readonly #summarizer: HistorySummarizer;
  readonly #newId: () => string;
  readonly #persistThreshold: number;
  readonly #batchBudget: number;
  readonly #previewHead: number;
  readonly #previewTail: number;
  readonly #keepRecentToolGroups: number;
  readonly #reactiveTailGroups: number;
  readonly #proactiveThreshold: number;
  readonly #snipMaxGroups: number;
  readonly #snipKeepHeadGroups: number;
  readonly #maxArtifactBytes: number;
  readonly #onArtifact: ((notice: ArtifactNotice) => void) | undefined;
  readonly #onSummary: ((bytesBefore: number, bytesAfter: number) => void) | undefined;
  #artifactBytes = 0;
  #preparedSource: readonly ChatMessage[] | undefined;
  #preparedHistory: readonly ChatMessage[] | undefined;

  constructor(options: CompactionManagerOptions) {
    const positive = (name: string, value: number | undefined, fallback: number, zero = false): number => {
      const chosen = value ?? fallback;
      if (!Number.isSafeInteger(chosen) || chosen < (zero ? 0 : 1)) {
        throw new RangeError(`${name} must be a ${zero ? "non-negative" : "positive"} integer`);
      }
      return chosen;
    };
    this.#workspace = options.workspace;
    this.#summarizer = options.summarizer;
    this.#newId = options.idGenerator ?? (() => randomUUID().replaceAll("-", ""));
    this.#persistThreshold = positive(
      "persistThresholdBytes",
      options.persistThresholdBytes,
      DEFAULT_PERSIST_THRESHOLD_BYTES,
    );
    this.#batchBudget = positive("batchBudgetBytes", options.batchBudgetBytes, DEFAULT_BATCH_BUDGET_BYTES);
    this.#previewHead = positive("previewHeadBytes", options.previewHeadBytes, DEFAULT_PREVIEW_HEAD_BYTES, true);
    this.#previewTail = positive("previewTailBytes", options.previewTailBytes, DEFAULT_PREVIEW_TAIL_BYTES, true);
    if (this.#previewHead + this.#previewTail === 0) throw new RangeError("a preview needs a head or a tail");
    this.#keepRecentToolGroups = positive(
      "keepRecentToolGroups",
      options.keepRecentToolGroups,
      DEFAULT_KEEP_RECENT_TOOL_GROUPS,
    );
    this.#reactiveTailGroups = positive("reactiveTailGroups", options.reactiveTailGroups, DEFAULT_REACTIVE_TAIL_GROUPS);
    this.#proactiveThreshold = positive(
      "proactiveThresholdBytes",
      options.proactiveThresholdBytes,
      DEFAULT_PROACTIVE_THRESHOLD_BYTES,
    );
    this.#snipMaxGroups = positive("snipMaxGroups", options.snipMaxGroups, DEFAULT_SNIP_MAX_GROUPS);
    this.#snipKeepHeadGroups = positive(
      "snipKeepHeadGroups",
      options.snipKeepHeadGroups,
      DEFAULT_SNIP_KEEP_HEAD_GROUPS,
    );
    validateSnipConfiguration(this.#snipMaxGroups, this.#snipKeepHeadGroups);
    this.#maxArtifactBytes = positive("maxArtifactBytes", options.maxArtifactBytes, DEFAULT_MAX_ARTIFACT_BYTES);
    this.#onArtifact = options.onArtifact;
    this.#onSummary = options.onSummary;
  }

  /**
   * The next request's history from the canonical one: the same array again for the same history, the cached
   * request history plus what was appended since, else prepared anew; snip, micro, then a summary only above the
   * threshold, after the canonical history's transcript is on disk.
   */
  async prepare(history: readonly ChatMessage[]): Promise<readonly ChatMessage[]> {
    validatedGroups(history);
    const source = this.#preparedSource;
    const cached = this.#preparedHistory;
    if (source !== undefined && cached !== undefined && historiesEqual(history, source)) return cached;
    const base =
      source !== undefined && cached !== undefined && historyStartsWith(history, source)
        ? [...cached, ...history.slice(source.length)]
        : history;
    // Grouped (and its pairing checked) once; snip then micro keep or change whole groups.
    const snipped = snipGroups(validatedGroups(base), this.#snipMaxGroups, this.#snipKeepHeadGroups);
    let prepared = microGroups(snipped, this.#keepRecentToolGroups);
    const bytes = historyUtf8Bytes(prepared);
    if (bytes > this.#proactiveThreshold) {
      prepared = Object.freeze([await this.#summarized(history, prepared)]);
      quietly(() => this.#onSummary?.(bytes, historyUtf8Bytes(prepared)));
    }
    this.#preparedSource = Object.freeze(history.map(settled));
    this.#preparedHistory = prepared;
    return prepared;
  }

  /**
   * One reply's results, whole: each over the threshold to disk, then the largest of the rest (the earlier first on
   * a tie) until what stays inline fits the batch budget. A saved result's message is its reference and previews,
   * with its error code kept. Any failure removes this batch's files and throws.
   */
  async compactToolResults(results: readonly ToolResult[]): Promise<ToolResultCompactionOutcome> {
    const bytes = results.map((result) => Buffer.from(result.content, "utf8"));
    const saved = new Set(
      bytes.flatMap((content, index) => (content.byteLength > this.#persistThreshold ? [index] : [])),
    );
    let inline = bytes.reduce((sum, content, index) => (saved.has(index) ? sum : sum + content.byteLength), 0);
    const bySize = bytes
      .map((content, index) => ({ index, size: content.byteLength }))
      .filter(({ index }) => !saved.has(index))
      .sort((a, b) => b.size - a.size || a.index - b.index);
    for (const { index, size } of bySize) {
      if (inline <= this.#batchBudget) break;
      saved.add(index);
      inline -= size;
    }
    if (saved.size === 0) return Object.freeze({ results, artifacts: Object.freeze([]) });

    const order = [...saved].sort((a, b) => a - b);
    for (const index of order) {
      const result = results[index] as ToolResult;
      // A saved error must stay the error it was: without its code it would be no error the model can tell.
      if (result.isError && result.errorCode === undefined) {
        throw new CompactionError("error tool result lost its errorCode");
      }
    }
    const references = await this.#publishAll(
      order.map((index) => ({ prefix: "tool-result", extension: "txt", bytes: bytes[index] as Buffer })),
    );
    const artifacts = order.map((resultIndex, position) =>
      Object.freeze({ resultIndex, reference: references[position] as ArtifactReference }),
    );
    const compacted = [...results];
    for (const { resultIndex, reference } of artifacts) {
      const result = results[resultIndex] as ToolResult;
      const content = this.#persistedMessage(reference.relativePath, bytes[resultIndex] as Buffer);
      // A saved error is still an error, with its code: the progress row and the model read it as one.
      compacted[resultIndex] = Object.freeze(
        result.isError ? { content, isError: true, errorCode: result.errorCode } : { content, isError: false },
      );
    }
    return Object.freeze({ results: Object.freeze(compacted), artifacts: Object.freeze(artifacts) });
  }

  /** The canonical transcript of `history` on disk, then `[summary]`, whatever the history's size. */
  async compactProactively(history: readonly ChatMessage[]): Promise<HistoryCompactionOutcome> {
    validatedGroups(history);
    const transcript = await this.#writeTranscript(history);
    const summary = await this.#summaryMessage(history, transcript);
    return Object.freeze({ history: Object.freeze([summary]), transcript });
  }

  /**
   * The recovery a caller may try once after a provider refused a request as too long: the transcript, a summary,
   * and the last few whole groups. A second try in the same window throws before anything is written.
   */
  async compactOnPromptTooLong(
    history: readonly ChatMessage[],
    options: { readonly retryCount: number },
  ): Promise<HistoryCompactionOutcome> {
    if (!Number.isSafeInteger(options.retryCount) || options.retryCount < 0) {
      throw new RangeError("retryCount must be a non-negative integer");
    }
    if (options.retryCount > 0) throw new PromptTooLongRetryError("prompt-too-long recovery was already tried once");
    const groups = validatedGroups(history);
    const transcript = await this.#writeTranscript(history);
    const summary = await this.#summaryMessage(history, transcript);
    const tail = groups.slice(Math.max(0, groups.length - this.#reactiveTailGroups)).flat();
    return Object.freeze({ history: Object.freeze([summary, ...tail]), transcript });
  }

  async #summarized(canonical: readonly ChatMessage[], requestHistory: readonly ChatMessage[]): Promise<ChatMessage> {
    const transcript = await this.#writeTranscript(canonical);
    return this.#summaryMessage(requestHistory, transcript);
  }

  /**
   * The one system message a summary becomes. The summarizer must hand back a `CompactionSummary` (checked when it
   * was made); the message is measured as the threshold measures it (its JSON line): a summary past it would be
   * summarized again next turn.
   */
  async #summaryMessage(history: readonly ChatMessage[], transcript: ArtifactReference): Promise<ChatMessage> {
    const summary: unknown = await this.#summarizer.summarize(history);
    if (!(summary instanceof CompactionSummary)) throw new TypeError("summarizer must return CompactionSummary");
    const message = systemMessage(summaryContent(summary, transcript.relativePath));
    if (historyUtf8Bytes([message]) > DEFAULT_PROACTIVE_THRESHOLD_BYTES) {
      throw new CompactionError(`summary message is over ${DEFAULT_PROACTIVE_THRESHOLD_BYTES} bytes`);
    }
    return message;
  }

  async #writeTranscript(history: readonly ChatMessage[]): Promise<ArtifactReference> {
    const bytes = historyUtf8Bytes(history);
    if (bytes > MAX_TRANSCRIPT_BYTES) {
      throw new CompactionError(`transcript would be ${bytes} bytes, over ${MAX_TRANSCRIPT_BYTES}`);
    }
    const [reference] = await this.#publishAll([
      { prefix: "transcript", extension: "jsonl", bytes: transcriptBytes(history) },
    ]);
    return reference as ArtifactReference;
  }

  /** The message that stands for a saved result: where it is, its size, and its first and last bytes. */
  #persistedMessage(relativePath: string, content: Buffer): string {
    const { head, tail } = previews(content, this.#previewHead, this.#previewTail);
    return [
      "<persisted-tool-result>",
      `path: ${relativePath}`,
      `original_bytes: ${content.byteLength}`,
      "head_preview:",
      head,
      "tail_preview:",
      tail,
      "</persisted-tool-result>",
    ].join("\n");
  }

  /**
   * Writes each file, in order, into the artifact folder, and returns a reference to each by its index. All or
   * nothing: a failure removes what this call published (and the folders it made), says why (without a path) and
   * throws.
   */
  async #publishAll(
    files: readonly { readonly prefix: string; readonly extension: string; readonly bytes: Buffer }[],
  ): Promise<ArtifactReference[]> {
    const published: ArtifactReference[] = [];
    const created: string[] = [];
    let folder: ArtifactFolder | undefined;
    try {
      const total = files.reduce((sum, file) => sum + file.bytes.byteLength, 0);
      if (this.#artifactBytes + total > this.#maxArtifactBytes) {
        throw new CompactionError(`artifact quota of ${this.#maxArtifactBytes} bytes reached`);
      }
      const names = files.map((file) => `${file.prefix}-${this.#safeId()}.${file.extension}`);
      folder = ensureSafeDirectory(this.#workspace);
      for (const [index, file] of files.entries()) {
        const name = names[index] as string;
        await writeExclusiveAtomic(folder, name, file.bytes);
        created.push(name);
        published.push(
          Object.freeze({
            path: join(this.#workspace, ...ARTIFACT_FOLDERS, name),
            relativePath: [...ARTIFACT_FOLDERS, name].join("/"),
            originalBytes: file.bytes.byteLength,
          }),
        );
      }
      folder.confirm();
      this.#artifactBytes += total;
    } catch (error) {
      const cleaned = folder === undefined || removeCreatedArtifacts(folder, created);
      if (cleaned) folder?.removeMade();
      folder?.close();
      const reason = failureReason(error);
      const notice = this.#onArtifact;
      quietly(() =>
        notice?.({
          type: "failed",
          reason: cleaned ? reason : `${reason}; and this batch's files could not all be removed`,
        }),
      );
      throw error instanceof CompactionError ? error : new CompactionError(reason, { cause: error });
    }
    folder.close();
    for (const reference of published) {
      const notice = this.#onArtifact;
      quietly(() =>
        notice?.({ type: "published", relativePath: reference.relativePath, bytes: reference.originalBytes }),
      );
    }
    return published;
  }

  #safeId(): string {
    let id: unknown;
    try {
      id = this.#newId();
    } catch (error) {
      throw new ArtifactPathError("artifact id could not be made", { cause: error });
    }
    if (typeof id !== "string" || id.length > MAX_ID_LENGTH || !ID_PATTERN.test(id)) {
      throw new ArtifactPathError("artifact id is not a safe name");
    }
    return id;
  }
}

/** A notice for whoever listens: its failure must not turn a published batch into a failed one. */
function quietly(notify: () => void): void {
  try {
    notify();
  } catch {
    // The CLI's lines only report what happened; the files and the results stand either way.
  }
}

/** At most `headBytes` from the start and `tailBytes` from the end, cut only between characters, never twice. */
function previews(content: Buffer, headBytes: number, tailBytes: number): { head: string; tail: string } {
  const continues = (index: number): boolean =>
    index < content.byteLength && ((content[index] as number) & 0xc0) === 0x80;
  let headEnd = Math.min(headBytes, content.byteLength);
  while (headEnd > 0 && continues(headEnd)) headEnd -= 1;
  let tailStart = Math.max(headEnd, content.byteLength - tailBytes);
  while (continues(tailStart)) tailStart += 1;
  return {
    head: content.subarray(0, headEnd).toString("utf8"),
    tail: content.subarray(tailStart).toString("utf8"),
  };
}

/** The artifact folder, held open: every name in it is reached through it, never through a path that could move. */
interface ArtifactFolder {
  /** A name inside the folder, as the kernel reaches it from the open folder (Linux) or by its checked path. */
  entry(name: string): string;
  /** Throws ArtifactPathError unless it is still the folder that was opened, inside the workspace. */
  confirm(): void;
  /** Best effort: the folder's entries on disk, so a published name survives a crash. */
  sync(): void;
  /**
   * The folders this call made, removed again (with the ignore file it wrote) when each is still that very folder
   * and empty: a failed first batch leaves the workspace as it was. Where folders are reached by name (macOS,
   * Windows) a name may lead elsewhere by now, so nothing is removed there.
   */
  removeMade(): void;
  close(): void;
}

const CANNOT_CREATE = "artifact directory could not be created";
const ESCAPES = "artifact directory escapes workspace";
const MOVED = "artifact directory moved while it was written";

/** A folder this call made under `parent`, and the ignore file it wrote there (its identity), if any. */
interface MadeFolder {
  readonly parent: Folder;
  readonly name: string;
  readonly folder: Folder;
  ignoreFile?: BigIntStats;
}

/**
 * `.agent_tutorial/artifacts` under the workspace, each level opened or made inside the one before, never through a
 * link: a link there (even to a folder inside) or a folder that resolves outside escapes the workspace; a file, a
 * FIFO or a failed mkdir means it could not be created. A `.agent_tutorial` without a `.gitignore` gets one at once.
 */
function ensureSafeDirectory(workspace: string, access: FolderAccess = folderAccess()): ArtifactFolder {
  let current: Folder;
  try {
    current = access.openWorkspace(workspace);
  } catch (error) {
    throw new ArtifactPathError(CANNOT_CREATE, { cause: error });
  }
  const held: Folder[] = [current];
  const made: MadeFolder[] = [];
  /** The `.gitignore` this call added to a `.agent_tutorial` that was there before, if it added one. */
  let addedIgnore: { readonly folder: Folder; readonly file: BigIntStats } | undefined;
  const removeMade = (): void => {
    if (addedIgnore !== undefined) removeIgnoreFile(addedIgnore.folder, addedIgnore.file);
    addedIgnore = undefined;
    for (const entry of made.splice(0).reverse()) {
      if (entry.ignoreFile !== undefined) removeIgnoreFile(entry.folder, entry.ignoreFile);
      access.removeMade(entry.parent, entry.name, entry.folder);
    }
  };
  const closeAll = (): void => {
    for (const folder of held.splice(0).reverse()) access.close(folder);
  };
  try {
    for (const name of ARTIFACT_FOLDERS) {
      let next = access.openSubfolder(current, name);
      let madeHere = false;
      if (next === "missing") {
        madeHere = access.makeSubfolder(current, name);
        next = access.openSubfolder(current, name);
      }
      if (next === "link") throw new ArtifactPathError(ESCAPES);
      if (typeof next === "string") throw new ArtifactPathError(CANNOT_CREATE);
      held.push(next);
      if (!next.inside) throw new ArtifactPathError(ESCAPES);
      if (madeHere) {
        const entry: MadeFolder = { parent: current, name, folder: next };
        made.push(entry);
        // Only its owner may list what the runtime saved there (tool output may hold secrets).
        chmodQuietly(next);
        if (name === ARTIFACT_FOLDERS[0]) entry.ignoreFile = writeIgnoreFile(next);
      } else if (name === ARTIFACT_FOLDERS[0]) {
        // There before this call (a run from before the ignore file, a repository that tracks a file in it): it gets
        // the ignore file too, or git offers the artifacts. One someone already put there is theirs, left as it is.
        const file = addMissingIgnoreFile(next);
        if (file !== undefined) addedIgnore = { folder: next, file };
      }
      current = next;
    }
  } catch (error) {
    removeMade();
    closeAll();
    throw error instanceof ArtifactPathError ? error : new ArtifactPathError(CANNOT_CREATE, { cause: error });
  }
  const folder = current;
  return {
    entry: (name) => (folder.fd === undefined ? join(folder.path, name) : `/proc/self/fd/${folder.fd}/${name}`),
    confirm() {
      try {
        access.confirm(folder);
        // Still inside is not enough: the paths handed to the model must name the files this call wrote.
        if (folder.fd !== undefined && readlinkSync(`/proc/self/fd/${folder.fd}`) !== folder.path) {
          throw new Error("the artifact folder was renamed");
        }
      } catch (error) {
        throw new ArtifactPathError(MOVED, { cause: error });
      }
    },
    sync() {
      if (folder.fd === undefined) return;
      try {
        fsyncSync(folder.fd);
      } catch {
        // Some file systems cannot sync a folder; the file itself was synced before it was published.
      }
    },
    removeMade,
    close: closeAll,
  };
}

/** `.gitignore` holding `*`, new, in the folder just made and through it (never through a link); its identity. */
function writeIgnoreFile(folder: Folder): BigIntStats {
  const path = folder.fd === undefined ? join(folder.path, ".gitignore") : `/proc/self/fd/${folder.fd}/.gitignore`;
  const fd = openSync(path, WRITE_NEW, 0o600);
  let made: BigIntStats | undefined;
  try {
    made = fstatSync(fd, { bigint: true });
    writeSync(fd, STATE_GITIGNORE);
    return made;
  } catch (error) {
    // A full or read-only disk: the empty file goes again (when it is still this one), so the folder it was made in
    // can be removed, or is left as it was.
    if (made !== undefined && sameFile(lstatSync(path, { bigint: true, throwIfNoEntry: false }), made)) {
      removeQuietly(path);
    }
    throw error;
  } finally {
    closeSync(fd);
  }
}

/** `writeIgnoreFile` where no `.gitignore` is (not even a link or a folder by that name); its identity if written. */
function addMissingIgnoreFile(folder: Folder): BigIntStats | undefined {
  const path = folder.fd === undefined ? join(folder.path, ".gitignore") : `/proc/self/fd/${folder.fd}/.gitignore`;
  if (lstatSync(path, { throwIfNoEntry: false }) !== undefined) return undefined;
  try {
    return writeIgnoreFile(folder);
  } catch (error) {
    // Made by someone else in between: theirs, as if it had been there.
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return undefined;
    throw error;
  }
}

/** The `.gitignore` this call wrote into `folder`, removed again when it is still that very file (Linux only). */
function removeIgnoreFile(folder: Folder, file: BigIntStats): void {
  if (folder.fd === undefined) return;
  const ignore = `/proc/self/fd/${folder.fd}/.gitignore`;
  if (sameFile(lstatSync(ignore, { bigint: true, throwIfNoEntry: false }), file)) removeQuietly(ignore);
}

const WRITE_NEW =
  constants.O_WRONLY |
  constants.O_CREAT |
  constants.O_EXCL |
  ((constants as Partial<Record<string, number>>).O_NOFOLLOW ?? 0);

/**
 * `name` appears only whole: the bytes go to a new temporary file (never an existing one, never through a link),
 * synced, then hard-linked to `name` (an existing `name` is a conflict, never overwritten). The temporary name is
 * removed before this returns, so the published file has one name, as read_file requires.
 */
async function writeExclusiveAtomic(folder: ArtifactFolder, name: string, bytes: Buffer): Promise<void> {
  folder.confirm();
  const temp = folder.entry(`.${name}.${randomBytes(6).toString("hex")}.tmp`);
  const target = folder.entry(name);
  let file: FileHandle;
  try {
    file = await open(temp, WRITE_NEW, 0o600);
  } catch (error) {
    // The folder was removed since it was opened (a folder swapped back over it, say).
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    throw new ArtifactPathError(MOVED, { cause: error });
  }
  let opened: BigIntStats;
  try {
    opened = await file.stat({ bigint: true });
  } catch (error) {
    await file.close();
    throw error;
  }
  try {
    try {
      // Without a folder descriptor (macOS, Windows) the name was reached by path, and a folder swapped for a link
      // just before sent the new file elsewhere: before a byte is written, the folder must still be the one that was
      // checked and the new file the one at that name in it.
      folder.confirm();
      if (!sameFile(lstatSync(temp, { bigint: true, throwIfNoEntry: false }), opened)) {
        throw new ArtifactPathError(MOVED);
      }
      await file.writeFile(bytes);
      await file.sync();
    } finally {
      await file.close();
    }
    try {
      linkSync(temp, target);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") {
        throw new ArtifactConflictError("artifact already exists", { cause: error });
      }
      throw error;
    }
  } catch (error) {
    // Only the file this call made: the name may lead to someone else's by now.
    if (sameFile(lstatSync(temp, { bigint: true, throwIfNoEntry: false }), opened)) removeQuietly(temp);
    throw error;
  }
  try {
    unlinkSync(temp);
  } catch (error) {
    // A file with two names is one read_file refuses: it is not published at all.
    removeQuietly(target);
    throw error;
  }
  folder.sync();
}

function chmodQuietly(folder: Folder): void {
  try {
    if (folder.fd === undefined) chmodSync(folder.path, 0o700);
    else fchmodSync(folder.fd, 0o700);
  } catch {
    // Windows has no such mode; the folder is still the user's own.
  }
}

function sameFile(a: BigIntStats | undefined, b: BigIntStats): boolean {
  return a !== undefined && a.dev === b.dev && a.ino === b.ino;
}

/** Removes the files this batch published; false when one of them could not be removed. */
function removeCreatedArtifacts(folder: ArtifactFolder, names: readonly string[]): boolean {
  return names.map((name) => removeQuietly(folder.entry(name))).every(Boolean);
}

function removeQuietly(path: string): boolean {
  try {
    unlinkSync(path);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT";
  }
}

/** Why a write failed, in words that name no path: the CLI prints it as it is. */
function failureReason(error: unknown): string {
  if (error instanceof CompactionError) return error.message;
  switch ((error as NodeJS.ErrnoException).code) {
    case "ENOSPC":
    case "EDQUOT":
      return "the disk is full";
    case "EROFS":
      return "the disk is read-only";
    case "EACCES":
    case "EPERM":
      return "the artifact folder is not writable";
    case "EEXIST":
      return "artifact already exists";
    default:
      return "the artifact could not be written";
  }
}
