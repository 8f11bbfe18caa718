import { execFileSync, spawnSync } from "node:child_process";
import fs, {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { mkdtemp, open, realpath, rm, type FileHandle } from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { afterEach, beforeEach, describe, expect, it, test, vi } from "vitest";
import { toOpenAIMessage } from "../src/adapters/openai-chat.js";
import {
  assistantMessage,
  MessageContractError,
  systemMessage,
  toolCall,
  toolMessage,
  userMessage,
  validateToolPairing,
  type ChatMessage,
} from "../src/core/messages.js";
import type { ModelReply } from "../src/core/model.js";
import { toolError, toolSuccess } from "../src/core/tools.js";
import {
  ArtifactConflictError,
  ArtifactPathError,
  CompactionError,
  CompactionManager,
  CompactionSummary,
  DEFAULT_BATCH_BUDGET_BYTES,
  DEFAULT_KEEP_RECENT_TOOL_GROUPS,
  DEFAULT_MAX_ARTIFACT_BYTES,
  DEFAULT_PERSIST_THRESHOLD_BYTES,
  DEFAULT_PREVIEW_HEAD_BYTES,
  DEFAULT_PREVIEW_TAIL_BYTES,
  DEFAULT_PROACTIVE_THRESHOLD_BYTES,
  DEFAULT_REACTIVE_TAIL_GROUPS,
  DEFAULT_SNIP_KEEP_HEAD_GROUPS,
  DEFAULT_SNIP_MAX_GROUPS,
  historyUtf8Bytes,
  COMPACTED_TOOL_RESULT,
  microCompactHistory,
  ModelHistorySummarizer,
  parseCompactionSummary,
  PromptTooLongRetryError,
  serializeTranscript,
  snipCompactHistory,
  SUMMARY_SYSTEM_PROMPT,
  validateSnipConfiguration,
  type ArtifactNotice,
  type CompactionManagerOptions,
  type HistorySummarizer,
  type ToolResultArtifact,
} from "../src/features/compaction.js";
import { call, ScriptedModel, textTurn, toolTurn } from "./support/scripted-model.js";

// The four levels of features/compaction.ts on their own, against a real temporary workspace: persisted results
// and their references, snip, micro, the summary with its canonical transcript, the cache, and the artifact
// folder's refusals. A counting fake summarizer and an injected id generator keep every file name known.

const POSIX = process.platform !== "win32";
const ARTIFACTS = ".agent_tutorial/artifacts";
const CANNOT_CREATE = "artifact directory could not be created";
const ESCAPES = "artifact directory escapes workspace";

/** A summary as the model writes it: the book's five snake_case fields. */
interface WireSummary {
  current_goal: unknown;
  key_findings: unknown;
  files_read_or_changed: unknown;
  remaining_work: unknown;
  user_constraints: unknown;
}

const WIRE: WireSummary = Object.freeze({
  current_goal: "Summarize the Markdown files",
  key_findings: ["README.md explains the demo", "日志很长"],
  files_read_or_changed: ["README.md"],
  remaining_work: [],
  user_constraints: ["Answer in Chinese"],
});

/** The class the manager requires, from the model's fields (changed by `overrides`). */
function summaryOf(overrides: Partial<WireSummary> = {}): CompactionSummary {
  const fields = { ...WIRE, ...overrides };
  return new CompactionSummary({
    currentGoal: fields.current_goal as string,
    keyFindings: fields.key_findings as string[],
    filesReadOrChanged: fields.files_read_or_changed as string[],
    remainingWork: fields.remaining_work as string[],
    userConstraints: fields.user_constraints as string[],
  });
}

const SUMMARY = summaryOf();

let base: string;
let workspace: string;
let outside: string;

beforeEach(async () => {
  // Real paths: the manager works under the workspace's real path, and /tmp may itself be a link (macOS).
  base = await realpath(await mkdtemp(join(tmpdir(), "compaction-test-")));
  workspace = join(base, "ws");
  outside = join(base, "outside");
  mkdirSync(workspace);
  mkdirSync(outside);
});

afterEach(async () => {
  vi.restoreAllMocks();
  syncBuiltinESMExports();
  await rm(base, { recursive: true, force: true });
});

/** A summarizer that counts its calls, keeps each history it was given, and can look at the disk when called. */
class CountingSummarizer implements HistorySummarizer {
  readonly inputs: (readonly ChatMessage[])[] = [];
  constructor(
    private readonly reply: () => CompactionSummary = () => SUMMARY,
    private readonly onCall: () => void = () => undefined,
  ) {}

  get calls(): number {
    return this.inputs.length;
  }

  summarize(history: readonly ChatMessage[]): Promise<CompactionSummary> {
    this.inputs.push(history);
    this.onCall();
    try {
      return Promise.resolve(this.reply());
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }
}

/** `id-1`, `id-2`, … : every file name a test expects is known before it is written. */
function counter(prefix = "id"): () => string {
  let next = 0;
  return () => {
    next += 1;
    return `${prefix}-${next}`;
  };
}

interface Fixture {
  manager: CompactionManager;
  summarizer: CountingSummarizer;
  notices: ArtifactNotice[];
}

function fixture(options: Partial<CompactionManagerOptions> = {}, summarizer = new CountingSummarizer()): Fixture {
  const notices: ArtifactNotice[] = [];
  const manager = new CompactionManager({
    workspace,
    summarizer,
    idGenerator: counter(),
    onArtifact: (notice) => notices.push(notice),
    ...options,
  });
  return { manager, summarizer, notices };
}

const artifactsDir = (): string => join(workspace, ".agent_tutorial", "artifacts");
const listing = (): string[] => (existsSync(artifactsDir()) ? readdirSync(artifactsDir()).sort() : []);
const fileText = (relative: string): string => readFileSync(join(workspace, relative), "utf8");
/** Every name anywhere under `root`, so "nothing written outside" is a listing that stays empty. */
function tree(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: "utf8" }).sort();
}

/** `[class name, message]` of what `promise` rejected with, or undefined when it resolved. */
async function rejection(promise: Promise<unknown>): Promise<[string, string] | undefined> {
  try {
    await promise;
  } catch (error) {
    return error instanceof Error ? [error.constructor.name, error.message] : ["non-error", String(error)];
  }
  return undefined;
}

function thrown(action: () => unknown): [string, string] | undefined {
  try {
    action();
  } catch (error) {
    return error instanceof Error ? [error.constructor.name, error.message] : ["non-error", String(error)];
  }
  return undefined;
}

/** The summary message the manager builds: the book's JSON, keys sorted, with its kind and the transcript's path. */
function summaryText(transcript: string, summary: CompactionSummary = SUMMARY): string {
  const fields = {
    current_goal: summary.currentGoal,
    files_read_or_changed: summary.filesReadOrChanged,
    key_findings: summary.keyFindings,
    kind: "compacted_history",
    remaining_work: summary.remainingWork,
    transcript_path: transcript,
    user_constraints: summary.userConstraints,
  };
  const lines = Object.entries(fields).map(([key, value]) => `  ${JSON.stringify(key)}: ${JSON.stringify(value)}`);
  return `{\n${lines.join(",\n")}\n}`;
}

/** The block a saved result becomes: the book's lines, exactly. */
function reference(path: string, bytes: number, head: string, tail: string): string {
  return [
    "<persisted-tool-result>",
    `path: ${path}`,
    `original_bytes: ${bytes}`,
    "head_preview:",
    head,
    "tail_preview:",
    tail,
    "</persisted-tool-result>",
  ].join("\n");
}

/** A saved result as compactToolResults returns it: its index and its file's reference. */
function artifact(resultIndex: number, relativePath: string, originalBytes: number): unknown {
  return { resultIndex, reference: { path: join(workspace, ...relativePath.split("/")), relativePath, originalBytes } };
}

/** A transcript's reference as compactProactively returns it. */
function transcriptRef(relativePath: string): unknown {
  const path = join(workspace, ...relativePath.split("/"));
  return { path, relativePath, originalBytes: readFileSync(path).byteLength };
}

/** A tool group: one assistant message with `ids.length` calls and their results, in call order. */
function toolGroup(ids: readonly string[], content: (id: string) => string = (id) => `result ${id}`): ChatMessage[] {
  return [
    assistantMessage(
      null,
      ids.map((id) => toolCall(id, "read_file", JSON.stringify({ path: `${id}.md` }))),
    ),
    ...ids.map((id) => toolMessage(content(id), id)),
  ];
}

/** Groups as lists: every third one a tool group with three calls, the others one user message. */
function mixedGroups(count: number): ChatMessage[][] {
  return Array.from({ length: count }, (_, index) =>
    index % 3 === 0 ? toolGroup([`g${index}-a`, `g${index}-b`, `g${index}-c`]) : [userMessage(`message ${index}`)],
  );
}

/** Keys sorted at every level, as the transcript must have them; independent of the implementation's copy. */
function sortedJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${sortedJson((value as Record<string, unknown>)[key])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function keysSortedEverywhere(value: unknown): boolean {
  if (Array.isArray(value)) return value.every(keysSortedEverywhere);
  if (typeof value !== "object" || value === null) return true;
  const keys = Object.keys(value);
  const sorted = [...keys].sort();
  return (
    keys.every((key, index) => key === sorted[index]) &&
    Object.values(value).every((item: unknown) => keysSortedEverywhere(item))
  );
}

const ascii = (bytes: number, char = "a"): string => char.repeat(bytes);

// ——— The book's 23 cases, under its four describe names and with its titles; then this repository's rules. ———

/** The book's fake: it keeps every history it was asked to summarize, and answers with one summary or a failure. */
class RecordingSummarizer implements HistorySummarizer {
  readonly histories: (readonly ChatMessage[])[] = [];
  constructor(private readonly answer: () => CompactionSummary = () => SUMMARY) {}
  summarize(history: readonly ChatMessage[]): Promise<CompactionSummary> {
    this.histories.push(history);
    try {
      return Promise.resolve(this.answer());
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }
}

/** The given ids in turn, as the book's tests inject them. */
function idGenerator(...ids: string[]): () => string {
  return () => ids.shift() ?? "exhausted";
}

/** One call and its result: a tool exchange group of one call. */
function exchange(id: string, content: string): ChatMessage[] {
  return [assistantMessage(null, [toolCall(id, "read_file", '{"path":"README.md"}')]), toolMessage(content, id)];
}

/** The history of the book's fourth experiment: one reply with two calls, one with one, and a final answer. */
const EXPERIMENT_FOUR: readonly ChatMessage[] = [
  userMessage("开始"),
  assistantMessage(null, [
    toolCall("a", "read_file", '{"path":"a.txt"}'),
    toolCall("b", "read_file", '{"path":"b.txt"}'),
  ]),
  toolMessage("A 的内容", "a"),
  toolMessage("B 的内容", "b"),
  assistantMessage(null, [toolCall("c", "read_file", '{"path":"c.txt"}')]),
  toolMessage("C 的内容", "c"),
  assistantMessage("完成"),
];

describe("model-backed history summarizer", () => {
  const history = [userMessage("总结 README.md"), ...exchange("r1", "# README")];

  test("sends a tool-free request and accepts only the five-field JSON contract", async () => {
    const model = new ScriptedModel([textTurn(JSON.stringify(WIRE))]);
    const summary = await new ModelHistorySummarizer(model).summarize(history);
    expect(summary).toBeInstanceOf(CompactionSummary);
    expect(summary).toEqual(SUMMARY);
    expect(summary.currentGoal).toBe("Summarize the Markdown files");
    expect(model.requests).toEqual([
      { messages: [systemMessage(SUMMARY_SYSTEM_PROMPT), userMessage(serializeTranscript(history))], tools: [] },
    ]);
  });

  test.each([
    ["tool calls", toolTurn(call("c1", "read_file", { path: "a" })), /must not call tools/],
    ["a non-stop finish reason", textTurn(JSON.stringify(WIRE), "length"), /finishReason must be stop/],
    ["an extra field", textTurn(JSON.stringify({ ...WIRE, extra: true })), /exact fields/],
    ["an empty array item", textTurn(JSON.stringify({ ...WIRE, key_findings: [" "] })), /invalid values/],
  ] as const)("rejects %s", async (_name, reply, message) => {
    const summarizer = new ModelHistorySummarizer(new ScriptedModel([reply]));
    const error = await summarizer.summarize(history).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CompactionError);
    expect((error as Error).message).toMatch(message);
  });
});

describe("tool-result artifact budgeting", () => {
  test("persists values above the strict UTF-8 threshold and keeps bounded previews", async () => {
    // The default id generator: the book's tool-result-<id>.txt, its id letters and digits only.
    const manager = new CompactionManager({ workspace, summarizer: new RecordingSummarizer() });
    const content = "甲".repeat(10_001);
    const outcome = await manager.compactToolResults([toolSuccess(content)]);
    const persisted = outcome.results[0]?.content ?? "";
    expect(persisted).toContain("<persisted-tool-result>");
    const relativePath = /^path: (.+)$/m.exec(persisted)?.[1] ?? "";
    expect(relativePath).toMatch(/^\.agent_tutorial\/artifacts\/tool-result-[a-z0-9]+\.txt$/);
    expect(readFileSync(join(workspace, ...relativePath.split("/")), "utf8")).toBe(content);
    expect(persisted).toBe(reference(relativePath, 30_003, "甲".repeat(666), "甲".repeat(666)));
    expect(Buffer.byteLength(persisted, "utf8")).toBeLessThan(4_200);
    expect(outcome.artifacts).toEqual([artifact(0, relativePath, 30_003)]);
  });

  test("keeps a value exactly at the threshold inline", async () => {
    const manager = new CompactionManager({
      workspace,
      summarizer: new RecordingSummarizer(),
      persistThresholdBytes: 6,
    });
    const outcome = await manager.compactToolResults([toolSuccess("abcdef")]);
    expect(outcome.results).toEqual([toolSuccess("abcdef")]);
    expect(outcome.artifacts).toEqual([]);
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
  });

  test("persists the largest remaining value first and preserves error metadata", async () => {
    const manager = new CompactionManager({
      workspace,
      summarizer: new RecordingSummarizer(),
      idGenerator: idGenerator("first", "second"),
      persistThresholdBytes: 100,
      batchBudgetBytes: 60,
    });
    // 10 + 50 + 30 + 10 = 100 over a budget of 60: only the 50-byte failure goes, and it stays a failure.
    const failed = toolError("command_failed", "B".repeat(26));
    const results = [toolSuccess("A".repeat(10)), failed, toolSuccess("C".repeat(30)), toolSuccess("D".repeat(10))];
    expect(results.map((result) => Buffer.byteLength(result.content))).toEqual([10, 50, 30, 10]);
    const outcome = await manager.compactToolResults(results);
    expect(outcome.artifacts.map((saved) => saved.resultIndex)).toEqual([1]);
    expect(outcome.results[1]).toEqual({
      content: reference(`${ARTIFACTS}/tool-result-first.txt`, 50, failed.content, ""),
      isError: true,
      errorCode: "command_failed",
    });
    expect([outcome.results[0], outcome.results[2], outcome.results[3]]).toEqual([results[0], results[2], results[3]]);
  });

  test("never overwrites an existing artifact and removes earlier files from the failed batch", async () => {
    mkdirSync(artifactsDir(), { recursive: true });
    writeFileSync(join(artifactsDir(), "tool-result-taken.txt"), "someone else's");
    const manager = new CompactionManager({
      workspace,
      summarizer: new RecordingSummarizer(),
      idGenerator: idGenerator("fresh", "taken"),
      persistThresholdBytes: 5,
    });
    const error = await manager
      .compactToolResults([toolSuccess("first large"), toolSuccess("second large")])
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ArtifactConflictError);
    expect((error as Error).message).toBe("artifact already exists");
    expect(readFileSync(join(artifactsDir(), "tool-result-taken.txt"), "utf8")).toBe("someone else's");
    expect(listing()).toEqual(["tool-result-taken.txt"]);
  });

  test("rejects unsafe IDs and artifact directory setup failures without changing input", async () => {
    const results = Object.freeze([toolSuccess("a large enough result")]);
    const copy = [...results];
    for (const bad of ["../escape", "UPPER", "a/b", ""]) {
      const manager = new CompactionManager({
        workspace,
        summarizer: new RecordingSummarizer(),
        idGenerator: () => bad,
        persistThresholdBytes: 5,
      });
      await expect(manager.compactToolResults(results)).rejects.toThrow(ArtifactPathError);
    }
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
    writeFileSync(join(workspace, ".agent_tutorial"), "a file, not a folder");
    const manager = new CompactionManager({
      workspace,
      summarizer: new RecordingSummarizer(),
      persistThresholdBytes: 5,
    });
    await expect(manager.compactToolResults(results)).rejects.toThrow(
      new ArtifactPathError("artifact directory could not be created"),
    );
    expect(results).toEqual(copy);
    expect(readFileSync(join(workspace, ".agent_tutorial"), "utf8")).toBe("a file, not a folder");
  });

  test("rejects a state-directory junction that escapes the workspace", async () => {
    // A junction on Windows, a symbolic link to a folder elsewhere.
    symlinkSync(outside, join(workspace, ".agent_tutorial"), "junction");
    const manager = new CompactionManager({
      workspace,
      summarizer: new RecordingSummarizer(),
      persistThresholdBytes: 5,
    });
    await expect(manager.compactToolResults([toolSuccess("a large enough result")])).rejects.toThrow(
      new ArtifactPathError("artifact directory escapes workspace"),
    );
    expect(readdirSync(outside)).toEqual([]);
  });
});

describe("atomic message-group compaction", () => {
  test("micro compaction replaces every old result but keeps recent exchanges intact", () => {
    const micro = microCompactHistory(EXPERIMENT_FOUR, { keepRecentToolGroups: 1 });
    expect(micro).toEqual([
      ...EXPERIMENT_FOUR.slice(0, 2),
      toolMessage(COMPACTED_TOOL_RESULT, "a"),
      toolMessage(COMPACTED_TOOL_RESULT, "b"),
      ...EXPERIMENT_FOUR.slice(4),
    ]);
    validateToolPairing(micro);
    // The book's numbers: a placeholder longer than these short results makes the history longer.
    expect([historyUtf8Bytes(EXPERIMENT_FOUR), historyUtf8Bytes(micro)]).toEqual([642, 720]);
  });

  test("snip compaction removes whole groups and inserts an exact omission marker", () => {
    const snipped = snipCompactHistory(EXPERIMENT_FOUR, { maxGroups: 3, keepHeadGroups: 1 });
    expect(snipped).toEqual([
      userMessage("开始"),
      systemMessage("[Compacted: 2 message groups omitted]"),
      assistantMessage("完成"),
    ]);
    validateToolPairing(snipped);
    expect(historyUtf8Bytes(snipped)).toBe(143);
  });

  test("counts canonical OpenAI JSONL bytes including non-ASCII UTF-8 and the final newline", () => {
    const history = [userMessage("甲"), ...exchange("call-1", "乙")];
    const expected =
      `${JSON.stringify({ content: "甲", role: "user" })}\n` +
      `${JSON.stringify({
        content: null,
        role: "assistant",
        tool_calls: [
          { function: { arguments: '{"path":"README.md"}', name: "read_file" }, id: "call-1", type: "function" },
        ],
      })}\n` +
      `${JSON.stringify({ content: "乙", role: "tool", tool_call_id: "call-1" })}\n`;
    expect(serializeTranscript(history)).toBe(expected);
    expect(historyUtf8Bytes(history)).toBe(Buffer.byteLength(expected, "utf8"));
  });
});

describe("final history compaction", () => {
  test("persists the full transcript before replacing history with one structured summary", async () => {
    const history = [userMessage("总结当前目录的 Markdown 文件"), ...exchange("c1", "# README")];
    let onDisk: string[] = [];
    const summarizer = new RecordingSummarizer(() => {
      onDisk = listing();
      return SUMMARY;
    });
    const manager = new CompactionManager({ workspace, summarizer, idGenerator: idGenerator("probe-1") });
    const outcome = await manager.compactProactively(history);
    expect(onDisk).toEqual(["transcript-probe-1.jsonl"]);
    expect(readFileSync(outcome.transcript.path, "utf8")).toBe(serializeTranscript(history));
    expect(outcome.history).toEqual([systemMessage(summaryText(`${ARTIFACTS}/transcript-probe-1.jsonl`))]);
    expect(outcome.history[0]?.content).toBe(
      [
        "{",
        '  "current_goal": "Summarize the Markdown files",',
        '  "files_read_or_changed": ["README.md"],',
        '  "key_findings": ["README.md explains the demo","日志很长"],',
        '  "kind": "compacted_history",',
        '  "remaining_work": [],',
        '  "transcript_path": ".agent_tutorial/artifacts/transcript-probe-1.jsonl",',
        '  "user_constraints": ["Answer in Chinese"]',
        "}",
      ].join("\n"),
    );
    expect(JSON.parse(outcome.history[0]?.content ?? "")).toEqual({
      ...WIRE,
      kind: "compacted_history",
      transcript_path: ".agent_tutorial/artifacts/transcript-probe-1.jsonl",
    });
    expect(summarizer.histories).toEqual([history]);
  });

  test("keeps the transcript when summarization fails", async () => {
    const summarizer = new RecordingSummarizer(() => {
      throw new Error("summary failed");
    });
    const manager = new CompactionManager({ workspace, summarizer, idGenerator: idGenerator("failed-summary") });
    await expect(manager.compactProactively([userMessage("unchanged")])).rejects.toThrow(/summary failed/);
    expect(readFileSync(join(artifactsDir(), "transcript-failed-summary.jsonl"), "utf8")).toContain("unchanged");
  });

  test("reactive compaction runs once per retry window and retains recent complete groups", async () => {
    const summarizer = new RecordingSummarizer();
    const manager = new CompactionManager({
      workspace,
      summarizer,
      idGenerator: idGenerator("r1"),
      reactiveTailGroups: 2,
    });
    const history = [
      userMessage("start"),
      ...exchange("old", "old data"),
      systemMessage("middle"),
      ...exchange("recent", "data"),
    ];
    const outcome = await manager.compactOnPromptTooLong(history, { retryCount: 0 });
    expect(outcome.history[0]).toEqual(systemMessage(summaryText(`${ARTIFACTS}/transcript-r1.jsonl`)));
    expect(outcome.history.slice(1)).toEqual([systemMessage("middle"), ...exchange("recent", "data")]);
    await expect(manager.compactOnPromptTooLong(history, { retryCount: 1 })).rejects.toThrow(PromptTooLongRetryError);
    expect(summarizer.histories).toHaveLength(1);
    expect(listing()).toEqual(["transcript-r1.jsonl"]);
  });

  test("prepare caches semantic equality, reuses a compressed prefix, and leaves canonical input intact", async () => {
    const manager = new CompactionManager({
      workspace,
      summarizer: new RecordingSummarizer(),
      keepRecentToolGroups: 1,
    });
    const first = [userMessage("start"), ...exchange("old", "large old result"), ...exchange("new", "fresh result")];
    const prepared = await manager.prepare(first);
    expect(prepared[2]).toEqual(toolMessage(COMPACTED_TOOL_RESULT, "old"));
    expect(first[2]).toEqual(toolMessage("large old result", "old"));
    // Equal messages, other objects: the very same prepared history.
    const equal = [userMessage("start"), ...exchange("old", "large old result"), ...exchange("new", "fresh result")];
    expect(await manager.prepare(equal)).toBe(prepared);
    const appended = await manager.prepare([...first, assistantMessage("done")]);
    expect(appended).toEqual([...prepared, assistantMessage("done")]);
    expect(first[2]).toEqual(toolMessage("large old result", "old"));
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
  });

  test("prepare summarizes once, caches equal history, and appends to the compressed prefix", async () => {
    const summarizer = new RecordingSummarizer();
    const manager = new CompactionManager({ workspace, summarizer, proactiveThresholdBytes: 800 });
    const canonical = [userMessage("x".repeat(1_000))];
    expect(historyUtf8Bytes(canonical)).toBe(1029);
    const first = await manager.prepare(canonical);
    expect([summarizer.histories.length, first.length, first[0]?.role]).toEqual([1, 1, "system"]);
    const again = await manager.prepare([userMessage("x".repeat(1_000))]);
    expect(again).toBe(first);
    const appended = await manager.prepare([...canonical, assistantMessage("最新回答")]);
    expect(summarizer.histories).toHaveLength(1);
    expect(appended).toEqual([first[0], assistantMessage("最新回答")]);
    expect(appended[0]).toBe(first[0]);
    expect(canonical).toEqual([userMessage("x".repeat(1_000))]);
  });

  test("recompaction summarizes the cached prefix but transcribes the full canonical history", async () => {
    const summarizer = new RecordingSummarizer();
    const manager = new CompactionManager({
      workspace,
      summarizer,
      idGenerator: idGenerator("first", "second"),
      proactiveThresholdBytes: 800,
    });
    const firstCanonical = [userMessage("x".repeat(1_000))];
    const firstPrepared = await manager.prepare(firstCanonical);
    const appended = assistantMessage("y".repeat(1_000));
    await manager.prepare([...firstCanonical, appended]);
    expect(summarizer.histories).toEqual([firstCanonical, [...firstPrepared, appended]]);
    const transcript = readFileSync(join(artifactsDir(), "transcript-second.jsonl"), "utf8");
    expect(
      transcript
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as unknown),
    ).toEqual([
      { content: "x".repeat(1_000), role: "user" },
      { content: "y".repeat(1_000), role: "assistant" },
    ]);
  });

  test("a transcript collision never overwrites or invokes the summarizer again", async () => {
    const summarizer = new RecordingSummarizer();
    const manager = new CompactionManager({ workspace, summarizer, idGenerator: idGenerator("same", "same") });
    const first = await manager.compactProactively([userMessage("first")]);
    const before = readFileSync(first.transcript.path, "utf8");
    await expect(manager.compactProactively([userMessage("second")])).rejects.toThrow(ArtifactConflictError);
    expect(readFileSync(first.transcript.path, "utf8")).toBe(before);
    expect(summarizer.histories).toEqual([[userMessage("first")]]);
  });

  test("a transcript directory failure leaves history unchanged and skips summarization", async () => {
    writeFileSync(join(workspace, ".agent_tutorial"), "a file, not a folder");
    const summarizer = new RecordingSummarizer();
    const manager = new CompactionManager({ workspace, summarizer });
    const history = Object.freeze([userMessage("keep me"), ...exchange("c1", "data")]);
    const copy = [...history];
    await expect(manager.compactProactively(history)).rejects.toThrow(ArtifactPathError);
    expect(summarizer.histories).toEqual([]);
    expect(history).toEqual(copy);
  });

  test("validates pairing before any transcript write or summary call", async () => {
    const summarizer = new RecordingSummarizer();
    const manager = new CompactionManager({ workspace, summarizer });
    await expect(manager.compactProactively([toolMessage("orphan", "missing")])).rejects.toThrow(/orphan tool result/);
    expect(summarizer.histories).toEqual([]);
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
  });
});

describe("constants", () => {
  it("are the book's numbers, with a 256 MiB artifact quota", () => {
    expect([
      DEFAULT_PERSIST_THRESHOLD_BYTES,
      DEFAULT_BATCH_BUDGET_BYTES,
      DEFAULT_PREVIEW_HEAD_BYTES,
      DEFAULT_PREVIEW_TAIL_BYTES,
      DEFAULT_KEEP_RECENT_TOOL_GROUPS,
      DEFAULT_REACTIVE_TAIL_GROUPS,
      DEFAULT_PROACTIVE_THRESHOLD_BYTES,
      DEFAULT_SNIP_MAX_GROUPS,
      DEFAULT_SNIP_KEEP_HEAD_GROUPS,
      DEFAULT_MAX_ARTIFACT_BYTES,
    ]).toEqual([30_000, 200_000, 2_000, 2_000, 3, 5, 50_000, 50, 3, 268_435_456]);
    expect(COMPACTED_TOOL_RESULT).toBe("[Earlier tool result compacted. Re-run if needed.]");
    expect(SUMMARY_SYSTEM_PROMPT).toBe(
      "Summarize the conversation below so the work can continue from the summary alone. Reply with one JSON " +
        "object and nothing else: no code fence and no tool call. It has exactly these keys: current_goal (a " +
        "non-empty string), key_findings, files_read_or_changed, remaining_work and user_constraints (each an " +
        "array of non-empty strings).",
    );
  });
});

describe("persisted tool results (rules 2–6)", () => {
  it("keeps a result of exactly 30,000 bytes inline and persists one of 30,001 bytes", async () => {
    const { manager, notices } = fixture();
    const results = [toolSuccess(ascii(30_000)), toolSuccess(ascii(30_001, "b"))];
    const out = await manager.compactToolResults(results);
    expect(out.artifacts).toEqual([artifact(1, `${ARTIFACTS}/tool-result-id-1.txt`, 30_001)]);
    expect(out.results[0]).toBe(results[0]);
    expect(out.results[1]).toEqual({
      content: reference(`${ARTIFACTS}/tool-result-id-1.txt`, 30_001, ascii(2000, "b"), ascii(2000, "b")),
      isError: false,
    });
    expect(listing()).toEqual(["tool-result-id-1.txt"]);
    expect(notices).toEqual([{ type: "published", relativePath: `${ARTIFACTS}/tool-result-id-1.txt`, bytes: 30_001 }]);
  });

  it("measures UTF-8 bytes, not length: 10,001 CJK characters are persisted and 29,999 ASCII bytes are not", async () => {
    const { manager } = fixture();
    const cjk = "中".repeat(10_001);
    const out = await manager.compactToolResults([toolSuccess(cjk), toolSuccess(ascii(29_999))]);
    expect(out.artifacts).toEqual([artifact(0, `${ARTIFACTS}/tool-result-id-1.txt`, 30_003)]);
    expect(out.results[1]?.content).toBe(ascii(29_999));
  });

  it("creates no folder when nothing is persisted and returns the very same results", async () => {
    const { manager, notices } = fixture();
    const results = [toolSuccess("small"), toolError("not_found", "File not found")];
    const out = await manager.compactToolResults(results);
    expect(out.results).toBe(results);
    expect(out.artifacts).toEqual([]);
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
    expect(notices).toEqual([]);
  });

  it("persists the largest of the rest, earlier first on a tie, until the inline total is at most 200,000", async () => {
    const { manager } = fixture();
    // Seven results of 29,000 bytes are 203,000: only the first is persisted, leaving 174,000 inline.
    const seven = Array.from({ length: 7 }, (_, index) => toolSuccess(ascii(29_000, String(index))));
    const out = await manager.compactToolResults(seven);
    expect(out.artifacts.map((artifact) => artifact.resultIndex)).toEqual([0]);
    const inline = out.results.slice(1).reduce((sum, result) => sum + Buffer.byteLength(result.content), 0);
    expect(inline).toBe(174_000);

    // Largest first: 20,000 + 7 × 29,999 = 229,993; the first of the 29,999-byte ties goes, leaving 199,994.
    const mixed = [toolSuccess(ascii(20_000)), ...Array.from({ length: 7 }, () => toolSuccess(ascii(29_999)))];
    const second = await manager.compactToolResults(mixed);
    expect(second.artifacts.map((artifact) => artifact.resultIndex)).toEqual([1]);

    // Eight of 29,000 are 232,000: two go (203,000 is still over), in call order.
    const eight = Array.from({ length: 8 }, () => toolSuccess(ascii(29_000)));
    const third = await manager.compactToolResults(eight);
    expect(third.artifacts).toEqual([
      artifact(0, `${ARTIFACTS}/tool-result-id-3.txt`, 29_000),
      artifact(1, `${ARTIFACTS}/tool-result-id-4.txt`, 29_000),
    ]);
  });

  it("persists nothing more when the inline total is exactly 200,000, and does not count results already saved", async () => {
    const { manager } = fixture();
    const exact = [...Array.from({ length: 6 }, () => toolSuccess(ascii(29_000))), toolSuccess(ascii(26_000))];
    const out = await manager.compactToolResults(exact);
    expect(out.artifacts).toEqual([]);
    expect(out.results).toBe(exact);

    // 40,000 goes by the threshold; the remaining 200,000 then fit.
    const withLarge = [toolSuccess(ascii(40_000)), ...exact];
    const second = await manager.compactToolResults(withLarge);
    expect(second.artifacts.map((artifact) => artifact.resultIndex)).toEqual([0]);
  });

  it("writes the exact UTF-8 bytes of the content with a workspace-relative / path", async () => {
    const { manager } = fixture({ idGenerator: () => "0a1b2c3d-4e5f-6789-abcd-ef0123456789" });
    const content = `第一行 ${"données ".repeat(5000)}\r\n\u0000end`;
    const out = await manager.compactToolResults([toolSuccess(content)]);
    const reference = out.artifacts[0]?.reference;
    expect(reference?.relativePath).toMatch(/^\.agent_tutorial\/artifacts\/tool-result-[a-z0-9-]+\.txt$/);
    expect(reference?.relativePath).toBe(`${ARTIFACTS}/tool-result-0a1b2c3d-4e5f-6789-abcd-ef0123456789.txt`);
    expect(reference?.path).toBe(join(artifactsDir(), "tool-result-0a1b2c3d-4e5f-6789-abcd-ef0123456789.txt"));
    const bytes = readFileSync(reference?.path ?? "missing");
    expect(bytes.equals(Buffer.from(content, "utf8"))).toBe(true);
    expect(reference?.originalBytes).toBe(Buffer.byteLength(content, "utf8"));
  });

  it("writes lone surrogates as U+FFFD and counts 3 bytes for each", async () => {
    const { manager } = fixture({ persistThresholdBytes: 10 });
    const content = `a${"\uD800".repeat(10)}b\uDC00`;
    const out = await manager.compactToolResults([toolSuccess(content)]);
    // a + 10 × 3 + b + 3 = 35 bytes.
    expect(out.artifacts).toEqual([artifact(0, `${ARTIFACTS}/tool-result-id-1.txt`, 35)]);
    const bytes = readFileSync(join(artifactsDir(), "tool-result-id-1.txt"));
    expect(bytes.equals(Buffer.from(content, "utf8"))).toBe(true);
    expect(bytes.toString("utf8")).toBe(`a${"\uFFFD".repeat(10)}b\uFFFD`);
    expect(out.results[0]?.content).toContain("original_bytes: 35\n");
  });

  it("cuts previews between characters: 60,000 bytes of CJK give a head and a tail of 666 characters", async () => {
    const { manager } = fixture();
    const content = "汉".repeat(20_000);
    const out = await manager.compactToolResults([toolSuccess(content)]);
    const head = "汉".repeat(666);
    expect(out.results[0]?.content).toBe(reference(`${ARTIFACTS}/tool-result-id-1.txt`, 60_000, head, head));
    expect(out.results[0]?.content).not.toContain("\uFFFD");
  });

  it("starts the tail where the head ended when the content is at most head + tail, so nothing appears twice", async () => {
    const { manager } = fixture({ persistThresholdBytes: 100 });
    const content = `${ascii(2000, "h")}${ascii(1000, "t")}`;
    const out = await manager.compactToolResults([toolSuccess(content)]);
    expect(out.results[0]?.content).toBe(
      reference(`${ARTIFACTS}/tool-result-id-1.txt`, 3000, ascii(2000, "h"), ascii(1000, "t")),
    );
  });

  it("cuts the previews at the configured limits, and a limit of 0 gives an empty preview", async () => {
    const { manager } = fixture({ persistThresholdBytes: 10, previewHeadBytes: 4, previewTailBytes: 0 });
    const out = await manager.compactToolResults([toolSuccess("0123456789abcdef")]);
    expect(out.results[0]?.content).toBe(reference(`${ARTIFACTS}/tool-result-id-1.txt`, 16, "0123", ""));
  });

  it("keeps isError and the errorCode of a persisted error result", async () => {
    const { manager } = fixture({ persistThresholdBytes: 20 });
    const failed = toolError("command_failed", "x".repeat(100));
    const out = await manager.compactToolResults([failed, toolSuccess("ok")]);
    expect(out.results[0]).toEqual({
      content: reference(`${ARTIFACTS}/tool-result-id-1.txt`, 124, failed.content, ""),
      isError: true,
      errorCode: "command_failed",
    });
    expect(out.results[1]).toEqual({ content: "ok", isError: false });
  });
});

describe("message groups, snip and micro (rules 11–14)", () => {
  it("counts a plain message as one group and a call with all its results as one group", () => {
    const history = [userMessage("start"), ...toolGroup(["a", "b", "c"]), assistantMessage("done"), userMessage("go")];
    // Seven messages, four groups: a limit of four changes nothing.
    expect(snipCompactHistory(history, { maxGroups: 4, keepHeadGroups: 1 })).toEqual(history);
    expect(snipCompactHistory(history, { maxGroups: 3, keepHeadGroups: 1 })).toEqual([
      userMessage("start"),
      systemMessage("[Compacted: 2 message groups omitted]"),
      userMessage("go"),
    ]);
    // Keeping two at the head keeps the whole three-call group, never part of it.
    expect(snipCompactHistory(history, { maxGroups: 4, keepHeadGroups: 2 })).toEqual(history);
    expect(snipCompactHistory([...history, userMessage("more")], { maxGroups: 4, keepHeadGroups: 2 })).toEqual([
      userMessage("start"),
      ...toolGroup(["a", "b", "c"]),
      systemMessage("[Compacted: 2 message groups omitted]"),
      userMessage("more"),
    ]);
  });

  it("leaves a history of 50 groups unchanged", () => {
    const history = mixedGroups(50).flat();
    expect(snipCompactHistory(history)).toEqual(history);
  });

  it("keeps the first 3 groups, a marker of G − 49 omitted groups and the last 46 groups above 50", () => {
    const groups = mixedGroups(60);
    const snipped = snipCompactHistory(groups.flat());
    expect(snipped).toEqual([
      ...groups.slice(0, 3).flat(),
      systemMessage("[Compacted: 11 message groups omitted]"),
      ...groups.slice(14).flat(),
    ]);
    validateToolPairing(snipped);

    const fiftyOne = mixedGroups(51);
    expect(snipCompactHistory(fiftyOne.flat())).toEqual([
      ...fiftyOne.slice(0, 3).flat(),
      systemMessage("[Compacted: 2 message groups omitted]"),
      ...fiftyOne.slice(5).flat(),
    ]);
  });

  it("replaces every tool result before the last 3 tool groups, whatever its size, and keeps calls and ids", () => {
    const groups = [
      [userMessage("read five files")],
      toolGroup(["t1"], () => "ok"),
      toolGroup(["t2a", "t2b"], () => "x".repeat(5000)),
      [assistantMessage("halfway")],
      toolGroup(["t3"]),
      toolGroup(["t4"]),
      toolGroup(["t5a", "t5b"]),
      [assistantMessage("done")],
    ];
    const history = groups.flat();
    const micro = microCompactHistory(history);
    expect(micro).toEqual([
      userMessage("read five files"),
      history[1],
      toolMessage(COMPACTED_TOOL_RESULT, "t1"),
      history[3],
      toolMessage(COMPACTED_TOOL_RESULT, "t2a"),
      toolMessage(COMPACTED_TOOL_RESULT, "t2b"),
      ...groups.slice(3).flat(),
    ]);
    expect(micro[1]).toBe(history[1]);
    expect(micro[3]).toBe(history[3]);
    validateToolPairing(micro);
  });

  it("changes nothing with 3 tool groups or fewer", () => {
    const history = [userMessage("go"), ...toolGroup(["a"]), ...toolGroup(["b", "c"]), ...toolGroup(["d"])];
    expect(microCompactHistory(history)).toEqual(history);
    expect(microCompactHistory(history, { keepRecentToolGroups: 2 })).toEqual([
      userMessage("go"),
      history[1],
      toolMessage(COMPACTED_TOOL_RESULT, "a"),
      ...history.slice(3),
    ]);
  });

  it("snips before micro: the last 3 tool groups are counted in the snipped history", async () => {
    // Head: 3 tool groups. Middle: 4 tool groups that snip drops. Tail: 46 user messages.
    const head = [toolGroup(["h1"]), toolGroup(["h2"]), toolGroup(["h3"])];
    const middle = [toolGroup(["m1"]), toolGroup(["m2"]), toolGroup(["m3"]), toolGroup(["m4"])];
    const tail = Array.from({ length: 46 }, (_, index) => [userMessage(`tail ${index}`)]);
    const history = [...head, ...middle, ...tail].flat();
    const { manager, summarizer } = fixture({ proactiveThresholdBytes: 10_000_000 });
    const prepared = await manager.prepare(history);
    // Micro first would have replaced h1–h3 (m2–m4 would be the last three); snip first keeps them whole.
    expect(prepared).toEqual([...head.flat(), systemMessage("[Compacted: 4 message groups omitted]"), ...tail.flat()]);
    expect(summarizer.calls).toBe(0);
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
  });

  it("micro-compacts the request history in prepare but never the canonical history", async () => {
    const history = [userMessage("go"), ...[1, 2, 3, 4].flatMap((n) => toolGroup([`c${n}`]))];
    const copy = [...history];
    const { manager } = fixture({ proactiveThresholdBytes: 10_000_000 });
    const prepared = await manager.prepare(history);
    expect(prepared).toEqual([
      userMessage("go"),
      history[1],
      toolMessage(COMPACTED_TOOL_RESULT, "c1"),
      ...history.slice(3),
    ]);
    expect(history).toEqual(copy);
    expect(history[2]).toEqual(toolMessage("result c1", "c1"));
  });
});

describe("the summary (rules 15–19)", () => {
  it("measures history bytes as the UTF-8 length of the transcript", () => {
    const history = [userMessage("中文"), ...toolGroup(["a"]), assistantMessage("好")];
    expect(historyUtf8Bytes(history)).toBe(Buffer.byteLength(serializeTranscript(history), "utf8"));
    expect(historyUtf8Bytes([])).toBe(0);
  });

  it("summarizes only above 50,000 bytes: exactly 50,000 is sent as it is", async () => {
    // {"content":"…","role":"user"}\n is 29 bytes around the content.
    const exact = [userMessage(ascii(50_000 - 29))];
    expect(historyUtf8Bytes(exact)).toBe(50_000);
    const { manager, summarizer } = fixture();
    expect(await manager.prepare(exact)).toEqual(exact);
    expect(summarizer.calls).toBe(0);
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);

    const over = [userMessage(ascii(50_000 - 28))];
    const prepared = await manager.prepare(over);
    expect(summarizer.calls).toBe(1);
    expect(prepared).toEqual([systemMessage(summaryText(`${ARTIFACTS}/transcript-id-1.jsonl`))]);
  });

  it("writes the canonical transcript first, then summarizes the snipped and micro-compacted history", async () => {
    const groups = mixedGroups(55);
    const history = [...groups.flat(), userMessage("x".repeat(2000))];
    const transcriptFile = join(artifactsDir(), "transcript-id-1.jsonl");
    let onDisk: string | undefined;
    const summarizer = new CountingSummarizer(
      () => SUMMARY,
      () => {
        onDisk = readFileSync(transcriptFile, "utf8");
      },
    );
    const summaries: [number, number][] = [];
    const { manager, notices } = fixture(
      { proactiveThresholdBytes: 1000, onSummary: (before, after) => summaries.push([before, after]) },
      summarizer,
    );
    const prepared = await manager.prepare(history);

    expect(onDisk).toBe(serializeTranscript(history));
    const expectedInput = microCompactHistory(snipCompactHistory(history));
    expect(summarizer.inputs).toEqual([expectedInput]);
    expect(expectedInput).toContainEqual(systemMessage("[Compacted: 7 message groups omitted]"));
    expect(expectedInput).toContainEqual(toolMessage(COMPACTED_TOOL_RESULT, "g12-a"));
    expect(expectedInput).toContainEqual(toolMessage(COMPACTED_TOOL_RESULT, "g0-a"));
    expect(expectedInput).toContainEqual(toolMessage("result g48-a", "g48-a"));
    expect(expectedInput).not.toContainEqual(userMessage("message 9"));

    const summary = systemMessage(summaryText(`${ARTIFACTS}/transcript-id-1.jsonl`));
    expect(prepared).toEqual([summary]);
    expect(listing()).toEqual(["transcript-id-1.jsonl"]);
    expect(notices).toEqual([
      {
        type: "published",
        relativePath: `${ARTIFACTS}/transcript-id-1.jsonl`,
        bytes: Buffer.byteLength(serializeTranscript(history)),
      },
    ]);
    expect(summaries).toEqual([[historyUtf8Bytes(expectedInput), historyUtf8Bytes([summary])]]);
  });

  it("refuses a summary whose message would be over 50,000 bytes and keeps the transcript", async () => {
    const big = summaryOf({ current_goal: "g".repeat(49_900) });
    const { manager } = fixture({ proactiveThresholdBytes: 10 }, new CountingSummarizer(() => big));
    const history = [userMessage("a long enough history")];
    expect(await rejection(manager.prepare(history))).toEqual([
      "CompactionError",
      "summary message is over 50000 bytes",
    ]);
    expect(listing()).toEqual(["transcript-id-1.jsonl"]);
  });

  it("accepts a summary message of exactly 50,000 bytes as the threshold measures it (its JSON line) and refuses one of 50,001", async () => {
    const path = `${ARTIFACTS}/transcript-id-1.jsonl`;
    const line = (summary: CompactionSummary): number => historyUtf8Bytes([systemMessage(summaryText(path, summary))]);
    const pad = 50_000 - line(summaryOf({ current_goal: "g" })) + 1;
    const exact = summaryOf({ current_goal: "g".repeat(pad) });
    expect(line(exact)).toBe(50_000);
    const { manager } = fixture({}, new CountingSummarizer(() => exact));
    expect((await manager.compactProactively([userMessage("hi")])).history).toEqual([
      systemMessage(summaryText(path, exact)),
    ]);

    const over = summaryOf({ current_goal: "g".repeat(pad + 1) });
    const second = fixture({ idGenerator: () => "id-1" }, new CountingSummarizer(() => over));
    rmSync(join(workspace, ".agent_tutorial"), { recursive: true });
    expect(await rejection(second.manager.compactProactively([userMessage("hi")]))).toEqual([
      "CompactionError",
      "summary message is over 50000 bytes",
    ]);
  });

  it("measures a summary by its JSON line, where every quote costs twice: 48,000 bytes of quotes are refused", async () => {
    // The summary message's text escapes each `"` once, its line (what the threshold counts) twice: a cap on the
    // text alone let a summary past the threshold through, and every later request summarized again.
    const quotes = summaryOf({ key_findings: ['"'.repeat(24_000)] });
    const { manager } = fixture({}, new CountingSummarizer(() => quotes));
    expect(Buffer.byteLength(summaryText(`${ARTIFACTS}/transcript-id-1.jsonl`, quotes), "utf8")).toBeLessThan(50_000);
    expect(await rejection(manager.compactProactively([userMessage("hi")]))).toEqual([
      "CompactionError",
      "summary message is over 50000 bytes",
    ]);
  });

  it("refuses a summarizer that returns a look-alike object instead of a CompactionSummary, and keeps the transcript and the history", async () => {
    const lookAlike: unknown = {
      currentGoal: SUMMARY.currentGoal,
      keyFindings: SUMMARY.keyFindings,
      filesReadOrChanged: SUMMARY.filesReadOrChanged,
      remainingWork: SUMMARY.remainingWork,
      userConstraints: SUMMARY.userConstraints,
    };
    const { manager, summarizer } = fixture(
      { proactiveThresholdBytes: 10 },
      new CountingSummarizer(() => lookAlike as CompactionSummary),
    );
    const history = Object.freeze([userMessage("a long enough history"), assistantMessage("reply")]);
    const copy = [...history];
    expect(await rejection(manager.prepare(history))).toEqual([
      "TypeError",
      "summarizer must return CompactionSummary",
    ]);
    expect(summarizer.calls).toBe(1);
    expect(history).toEqual(copy);
    expect(fileText(`${ARTIFACTS}/transcript-id-1.jsonl`)).toBe(serializeTranscript(history));
  });

  it("passes a summarizer's error through, keeps the transcript, and tries again on the next prepare", async () => {
    let fail = true;
    const summarizer = new CountingSummarizer(() => {
      if (fail) throw new Error("model unreachable");
      return SUMMARY;
    });
    const { manager } = fixture({ proactiveThresholdBytes: 10 }, summarizer);
    const history = [userMessage("a long enough history")];
    expect(await rejection(manager.prepare(history))).toEqual(["Error", "model unreachable"]);
    expect(listing()).toEqual(["transcript-id-1.jsonl"]);
    fail = false;
    expect(await manager.prepare(history)).toEqual([systemMessage(summaryText(`${ARTIFACTS}/transcript-id-2.jsonl`))]);
    expect(summarizer.calls).toBe(2);
  });

  it("never calls the summarizer when the transcript cannot be written", async () => {
    writeFileSync(join(workspace, ".agent_tutorial"), "a file, not a folder");
    const { manager, summarizer, notices } = fixture({ proactiveThresholdBytes: 10 });
    const history = Object.freeze([userMessage("a long enough history")]);
    expect(await rejection(manager.prepare(history))).toEqual(["ArtifactPathError", CANNOT_CREATE]);
    expect(summarizer.calls).toBe(0);
    expect(history).toEqual([userMessage("a long enough history")]);
    expect(readFileSync(join(workspace, ".agent_tutorial"), "utf8")).toBe("a file, not a folder");
    expect(notices).toEqual([{ type: "failed", reason: CANNOT_CREATE }]);
  });
});

describe("ModelHistorySummarizer (rules 16, 17)", () => {
  const valid = JSON.stringify(WIRE);
  const history = [userMessage("读取 README.md"), ...toolGroup(["r1"]), assistantMessage("done")];

  async function summarizeWith(reply: ModelReply): Promise<{ outcome: unknown; model: ScriptedModel }> {
    const model = new ScriptedModel([reply]);
    const summarizer = new ModelHistorySummarizer(model);
    let outcome: unknown;
    try {
      outcome = await summarizer.summarize(history);
    } catch (error) {
      outcome = error instanceof Error ? [error.constructor.name, error.message] : error;
    }
    model.assertExhausted();
    return { outcome, model };
  }

  it("sends no tools, the fixed prompt first and the history's JSONL lines as one user message", async () => {
    const { outcome, model } = await summarizeWith(textTurn(valid));
    expect(outcome).toEqual(SUMMARY);
    expect(model.requests).toHaveLength(1);
    expect(model.requests[0]?.tools).toEqual([]);
    expect(model.requests[0]?.messages).toEqual([
      systemMessage(SUMMARY_SYSTEM_PROMPT),
      userMessage(serializeTranscript(history)),
    ]);
  });

  it("accepts a reply of exactly 50,000 bytes", async () => {
    const pad = 50_000 - Buffer.byteLength(JSON.stringify({ ...WIRE, current_goal: "" }), "utf8");
    const exact = { ...WIRE, current_goal: "g".repeat(pad) };
    expect(Buffer.byteLength(JSON.stringify(exact), "utf8")).toBe(50_000);
    expect((await summarizeWith(textTurn(JSON.stringify(exact)))).outcome).toEqual(summaryOf(exact));
  });

  it("accepts empty lists and surrounding whitespace", async () => {
    const empty = { ...WIRE, key_findings: [], files_read_or_changed: [], user_constraints: [] };
    expect((await summarizeWith(textTurn(`\n ${JSON.stringify(empty)} \n`))).outcome).toEqual(summaryOf(empty));
  });

  const keys = "summary model output must contain the exact fields";
  const notJson = "summary model output is not valid JSON";
  const invalid = "summary model output has invalid values";
  const tools = "summary model must not call tools";
  const notStop = "summary model finishReason must be stop";
  const empty = "summary model output is empty";
  const cases: [string, ModelReply, string][] = [
    ["tool calls", toolTurn(call("c1", "read_file", { path: "a" })), tools],
    [
      "tool calls with stop",
      { message: assistantMessage(valid, [call("c1", "read_file", { path: "a" })]), finishReason: "stop" },
      tools,
    ],
    ["length", textTurn(valid, "length"), notStop],
    ["content_filter", textTurn(valid, "content_filter"), notStop],
    ["null content", textTurn(null), empty],
    ["empty content", textTurn(""), empty],
    ["blank content", textTurn(" \n\t "), empty],
    ["prose", textTurn("Here is the summary: the user wants a summary."), notJson],
    ["prose around JSON", textTurn(`Summary:\n${valid}`), notJson],
    ["a fenced block", textTurn(`\`\`\`json\n${valid}\n\`\`\``), notJson],
    ["a JSON array", textTurn(`[${valid}]`), keys],
    ["JSON null", textTurn("null"), keys],
    ["a JSON string", textTurn(JSON.stringify(valid)), keys],
    ["an extra key", textTurn(JSON.stringify({ ...WIRE, notes: [] })), keys],
    ["a missing key", textTurn(JSON.stringify({ ...WIRE, user_constraints: undefined })), keys],
    ["a misspelled key", textTurn(valid.replace("key_findings", "keyFindings")), keys],
    ["current_goal not a string", textTurn(JSON.stringify({ ...WIRE, current_goal: ["goal"] })), invalid],
    ["a blank current_goal", textTurn(JSON.stringify({ ...WIRE, current_goal: " \n " })), invalid],
    ["a list that is a string", textTurn(JSON.stringify({ ...WIRE, key_findings: "one finding" })), invalid],
    ["a list holding a number", textTurn(JSON.stringify({ ...WIRE, remaining_work: ["step", 2] })), invalid],
    ["a list holding a blank string", textTurn(JSON.stringify({ ...WIRE, user_constraints: ["  "] })), invalid],
    ["a list holding an empty string", textTurn(JSON.stringify({ ...WIRE, files_read_or_changed: [""] })), invalid],
    ["a list holding null", textTurn(JSON.stringify({ ...WIRE, key_findings: [null] })), invalid],
    [
      "a reply over 50,000 bytes",
      textTurn(JSON.stringify({ ...WIRE, current_goal: "目".repeat(16_700) })),
      "summary model output is over 50000 bytes",
    ],
  ];

  it.each(cases)("refuses %s with a CompactionError", async (_name, reply, message) => {
    const { outcome } = await summarizeWith(reply);
    expect(outcome).toEqual(["CompactionError", message]);
  });

  it("parseCompactionSummary refuses the same forms directly", () => {
    expect(parseCompactionSummary(valid)).toEqual(SUMMARY);
    expect(parseCompactionSummary(valid)).toBeInstanceOf(CompactionSummary);
    expect(thrown(() => parseCompactionSummary("{"))).toEqual(["CompactionError", notJson]);
    expect(thrown(() => parseCompactionSummary(JSON.stringify({ ...WIRE, current_goal: 7 })))).toEqual([
      "CompactionError",
      invalid,
    ]);
  });

  it("a failed summary reply fails prepare, keeps the transcript and leaves the history as it was", async () => {
    const model = new ScriptedModel([textTurn(`\`\`\`json\n${valid}\n\`\`\``)]);
    const manager = new CompactionManager({
      workspace,
      summarizer: new ModelHistorySummarizer(model),
      idGenerator: counter(),
      proactiveThresholdBytes: 10,
    });
    const canonical = Object.freeze([...history]);
    expect(await rejection(manager.prepare(canonical))).toEqual(["CompactionError", notJson]);
    expect(canonical).toEqual(history);
    expect(fileText(`${ARTIFACTS}/transcript-id-1.jsonl`)).toBe(serializeTranscript(history));
    model.assertExhausted();
  });
});

describe("the transcript (rule 20)", () => {
  it("has one line per message: the key-sorted JSON of toOpenAIMessage, CJK literal, each ending in \\n", async () => {
    const history: ChatMessage[] = [
      systemMessage("系统提示"),
      userMessage('读取 "README.md"\n然后总结 \u0001 \\ 😀'),
      assistantMessage(null, [
        toolCall("call_1", "read_file", '{"path":"README.md"}'),
        toolCall("call_2", "glob", '{"pattern":"*.md","z":1,"a":2}'),
      ]),
      toolMessage("文件内容", "call_2"),
      toolMessage("Error [not_found]: File not found", "call_1"),
      assistantMessage("我再看一个文件", [toolCall("call_3", "shell", '{"command":"ls"}')]),
      toolMessage("a.md\nb.md", "call_3"),
      assistantMessage("完成。"),
      assistantMessage(null),
    ];
    const { manager, summarizer } = fixture();
    const { transcript } = await manager.compactProactively(history);
    expect(transcript).toEqual(transcriptRef(`${ARTIFACTS}/transcript-id-1.jsonl`));
    const text = readFileSync(transcript.path, "utf8");
    expect(text.endsWith("\n")).toBe(true);
    expect(text).toBe(serializeTranscript(history));
    const lines = text.slice(0, -1).split("\n");
    expect(lines).toHaveLength(history.length);
    lines.forEach((line, index) => {
      const wire = toOpenAIMessage(history[index] as ChatMessage);
      expect(JSON.parse(line)).toEqual(wire);
      expect(line).toBe(sortedJson(wire));
      expect(keysSortedEverywhere(JSON.parse(line))).toBe(true);
    });
    expect(lines[2]).toBe(
      '{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{\\"path\\":\\"README.md\\"}",' +
        '"name":"read_file"},"id":"call_1","type":"function"},{"function":{"arguments":"{\\"pattern\\":\\"*.md\\",' +
        '\\"z\\":1,\\"a\\":2}","name":"glob"},"id":"call_2","type":"function"}]}',
    );
    expect(lines[3]).toBe('{"content":"文件内容","role":"tool","tool_call_id":"call_2"}');
    expect(text).toContain("😀");
    expect(text).not.toMatch(/\\u(?!0001)/);
    expect(summarizer.inputs).toEqual([history]);
  });

  it("writes $ and ` as JSON escapes, so a shell handed the transcript expands nothing the model wrote", async () => {
    const history: ChatMessage[] = [
      userMessage("echo $(touch user-ran) `touch user-ran-2`"),
      assistantMessage("$(touch model-ran); `touch model-ran-2` ${HOME}", [
        toolCall("call_1", "shell", '{"command":"$(touch args-ran)"}'),
      ]),
      toolMessage("`touch result-ran` \\$(touch escaped-ran)", "call_1"),
    ];
    const { manager } = fixture();
    const { transcript } = await manager.compactProactively(history);
    const text = readFileSync(transcript.path, "utf8");
    expect(text).not.toMatch(/[$`]/);
    expect(text).toContain('"content":"$(touch model-ran)'.replace("$", "\\u0024"));
    const lines = text.slice(0, -1).split("\n");
    expect(lines.map((line) => JSON.parse(line) as unknown)).toEqual(history.map(toOpenAIMessage));
    expect(Buffer.byteLength(text)).toBe(historyUtf8Bytes(history));
    const shellFolder = mkdtempSync(join(tmpdir(), "transcript-shell-"));
    try {
      spawnSync("sh", [transcript.path], { cwd: shellFolder, stdio: "ignore", timeout: 10_000 });
      expect(readdirSync(shellFolder)).toEqual([]);
    } finally {
      rmSync(shellFolder, { recursive: true, force: true });
    }
  });

  it("is an empty file for an empty history", async () => {
    const { manager } = fixture();
    const { transcript, history } = await manager.compactProactively([]);
    expect(readFileSync(transcript.path).byteLength).toBe(0);
    expect(transcript.originalBytes).toBe(0);
    expect(history).toEqual([systemMessage(summaryText(`${ARTIFACTS}/transcript-id-1.jsonl`))]);
  });
});

describe("ids and publication (rules 21, 27)", () => {
  it("refuses a repeated id with ArtifactConflictError and never overwrites the first file", async () => {
    const { manager, notices } = fixture({ idGenerator: () => "same", persistThresholdBytes: 10 });
    await manager.compactToolResults([toolSuccess("first result, long")]);
    expect(await rejection(manager.compactToolResults([toolSuccess("second result, long")]))).toEqual([
      "ArtifactConflictError",
      "artifact already exists",
    ]);
    expect(fileText(`${ARTIFACTS}/tool-result-same.txt`)).toBe("first result, long");
    expect(listing()).toEqual(["tool-result-same.txt"]);
    expect(notices).toEqual([
      { type: "published", relativePath: `${ARTIFACTS}/tool-result-same.txt`, bytes: 18 },
      { type: "failed", reason: "artifact already exists" },
    ]);
  });

  it("removes every file of a failed batch: the listing equals the listing before", async () => {
    const ids = ["x", "a", "b", "a"];
    const { manager, notices } = fixture({ idGenerator: () => ids.shift() ?? "none", persistThresholdBytes: 10 });
    await manager.compactToolResults([toolSuccess("kept from before")]);
    const before = listing();
    expect(before).toEqual(["tool-result-x.txt"]);
    const batch = [toolSuccess("first of three"), toolSuccess("second of three"), toolSuccess("third of three")];
    const error = await manager.compactToolResults(batch).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ArtifactConflictError);
    expect(error).toBeInstanceOf(CompactionError);
    expect(listing()).toEqual(before);
    expect(fileText(`${ARTIFACTS}/tool-result-x.txt`)).toBe("kept from before");
    expect(notices.at(-1)).toEqual({ type: "failed", reason: "artifact already exists" });
  });

  it.skipIf(!POSIX)(
    "publishes files with one name, mode 0o600, in folders of mode 0o700, and no .tmp left",
    async () => {
      const { manager } = fixture({ persistThresholdBytes: 10 });
      const out = await manager.compactToolResults([toolSuccess("a result of some length"), toolSuccess("short")]);
      const { transcript } = await manager.compactProactively([userMessage("hello")]);
      expect(listing()).toEqual(["tool-result-id-1.txt", "transcript-id-2.jsonl"]);
      for (const relative of [out.artifacts[0]?.reference.relativePath ?? "missing", transcript.relativePath]) {
        const info = lstatSync(join(workspace, relative));
        expect(info.isFile()).toBe(true);
        expect(info.nlink).toBe(1);
        expect(info.mode & 0o777).toBe(0o600);
      }
      expect(statSync(join(workspace, ".agent_tutorial")).mode & 0o777).toBe(0o700);
      expect(statSync(artifactsDir()).mode & 0o777).toBe(0o700);
    },
  );

  it("publishes a file with nlink 1 and leaves no .tmp after a conflict", async () => {
    mkdirSync(artifactsDir(), { recursive: true });
    writeFileSync(join(artifactsDir(), "tool-result-taken.txt"), "someone else's");
    const ids = ["fresh", "taken"];
    const { manager } = fixture({ idGenerator: () => ids.shift() ?? "none", persistThresholdBytes: 10 });
    await manager.compactToolResults([toolSuccess("a fresh result")]);
    expect(lstatSync(join(artifactsDir(), "tool-result-fresh.txt")).nlink).toBe(1);
    expect(await rejection(manager.compactToolResults([toolSuccess("a second result")]))).toEqual([
      "ArtifactConflictError",
      "artifact already exists",
    ]);
    expect(listing()).toEqual(["tool-result-fresh.txt", "tool-result-taken.txt"]);
    expect(readFileSync(join(artifactsDir(), "tool-result-taken.txt"), "utf8")).toBe("someone else's");
  });

  const badIds: [string, () => unknown, string][] = [
    [
      "throws",
      () => {
        throw new Error("no entropy");
      },
      "artifact id could not be made",
    ],
    ["returns a non-slug", () => "../escape", "artifact id is not a safe name"],
    ["returns upper case", () => "ABC", "artifact id is not a safe name"],
    ["returns a trailing hyphen", () => "abc-", "artifact id is not a safe name"],
    ["returns an empty string", () => "", "artifact id is not a safe name"],
    ["returns 65 characters", () => "a".repeat(65), "artifact id is not a safe name"],
    ["returns a number", () => 42, "artifact id is not a safe name"],
    ["returns undefined", () => undefined, "artifact id is not a safe name"],
  ];

  it.each(badIds)("refuses an id generator that %s before any file exists", async (_name, generate, message) => {
    const { manager, notices } = fixture({
      idGenerator: generate as () => string,
      persistThresholdBytes: 10,
    });
    expect(await rejection(manager.compactToolResults([toolSuccess("a result of some length")]))).toEqual([
      "ArtifactPathError",
      message,
    ]);
    expect(await rejection(manager.compactProactively([userMessage("hello")]))).toEqual(["ArtifactPathError", message]);
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
    expect(notices).toEqual([
      { type: "failed", reason: message },
      { type: "failed", reason: message },
    ]);
  });

  it("refuses a batch whose second id is bad before writing the first", async () => {
    const ids = ["good", "Bad!"];
    const { manager } = fixture({ idGenerator: () => ids.shift() ?? "none", persistThresholdBytes: 10 });
    const error = await manager
      .compactToolResults([toolSuccess("first result"), toolSuccess("second result")])
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ArtifactPathError);
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
  });

  it("accepts an id of exactly 64 characters", async () => {
    const id = "a".repeat(64);
    const { manager } = fixture({ idGenerator: () => id, persistThresholdBytes: 10 });
    const out = await manager.compactToolResults([toolSuccess("a result of some length")]);
    expect(out.artifacts[0]?.reference.relativePath).toBe(`${ARTIFACTS}/tool-result-${id}.txt`);
  });

  it("stops at the artifact quota: a batch past it fails and writes nothing", async () => {
    const { manager, notices } = fixture({ persistThresholdBytes: 10, maxArtifactBytes: 100 });
    const over = await rejection(manager.compactToolResults([toolSuccess(ascii(60)), toolSuccess(ascii(41))]));
    expect(over).toEqual(["CompactionError", "artifact quota of 100 bytes reached"]);
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);

    await manager.compactToolResults([toolSuccess(ascii(60))]);
    expect(listing()).toEqual(["tool-result-id-1.txt"]);
    // 60 written and 41 more would be 101: refused, also for a transcript.
    expect(await rejection(manager.compactToolResults([toolSuccess(ascii(41))]))).toEqual([
      "CompactionError",
      "artifact quota of 100 bytes reached",
    ]);
    expect(await rejection(manager.compactProactively([userMessage(ascii(20))]))).toEqual([
      "CompactionError",
      "artifact quota of 100 bytes reached",
    ]);
    expect(listing()).toEqual(["tool-result-id-1.txt"]);
    // Exactly up to the quota is allowed: 60 + 40 = 100.
    await manager.compactToolResults([toolSuccess(ascii(40))]);
    expect(listing()).toHaveLength(2);
    expect(notices.filter((notice) => notice.type === "failed")).toEqual([
      { type: "failed", reason: "artifact quota of 100 bytes reached" },
      { type: "failed", reason: "artifact quota of 100 bytes reached" },
      { type: "failed", reason: "artifact quota of 100 bytes reached" },
    ]);
  });
});

describe("the cache (rule 22)", () => {
  it("trusts identity only for frozen messages: a plain message changed in place is prepared anew", async () => {
    const { manager } = fixture();
    const message = { role: "user", content: "first" } as { role: "user"; content: string };
    const first = await manager.prepare([message]);
    message.content = "second, longer";
    const second = await manager.prepare([message]);
    expect(second).not.toBe(first);
    expect(second).toEqual([{ role: "user", content: "second, longer" }]);
    expect(historyUtf8Bytes([message])).toBe(Buffer.byteLength(serializeTranscript([message]), "utf8"));
    expect(serializeTranscript([message])).toBe('{"content":"second, longer","role":"user"}\n');
  });

  it("returns the very same prepared array for an identical snapshot, with no second summary or file", async () => {
    const { manager, summarizer } = fixture({ proactiveThresholdBytes: 10 });
    const history = [userMessage("read the files"), ...toolGroup(["a"]), assistantMessage("done")];
    const first = await manager.prepare(history);
    const second = await manager.prepare([...history]);
    expect(second).toBe(first);
    expect(summarizer.calls).toBe(1);
    expect(listing()).toEqual(["transcript-id-1.jsonl"]);

    // Without a summary too.
    const plain = fixture({ proactiveThresholdBytes: 10_000_000 });
    const a = await plain.manager.prepare(history);
    expect(await plain.manager.prepare(history)).toBe(a);
  });

  it("summarizes the cached prepared prefix plus the appended suffix, and writes the full canonical transcript", async () => {
    const { manager, summarizer } = fixture({ proactiveThresholdBytes: 10 });
    const history = [userMessage("read the files"), ...toolGroup(["a"]), assistantMessage("done")];
    const [summary] = await manager.prepare(history);
    const appended = [...history, userMessage("now the next step")];
    const prepared = await manager.prepare(appended);
    expect(summarizer.inputs[1]).toEqual([summary, userMessage("now the next step")]);
    expect(prepared).toEqual([systemMessage(summaryText(`${ARTIFACTS}/transcript-id-2.jsonl`))]);
    expect(fileText(`${ARTIFACTS}/transcript-id-2.jsonl`)).toBe(serializeTranscript(appended));
  });

  it("after cached appends the snip marker still counts every group really omitted, as a fresh snip would", async () => {
    const options = { proactiveThresholdBytes: 10_000_000, snipMaxGroups: 4, snipKeepHeadGroups: 1 };
    const { manager, summarizer } = fixture(options);
    const history = Array.from({ length: 6 }, (_, index) => userMessage(`m${index}`));
    expect(await manager.prepare(history)).toEqual([
      userMessage("m0"),
      systemMessage("[Compacted: 3 message groups omitted]"),
      userMessage("m4"),
      userMessage("m5"),
    ]);
    // The input is now the cached [m0, marker, m4, m5] plus m6: the old marker is dropped with m4, and the new one
    // counts the 3 groups it stood for, not 1 (m1–m4 are gone).
    for (const [length, omitted] of [
      [7, 4],
      [8, 5],
      [9, 6],
    ] as const) {
      const canonical = Array.from({ length }, (_, index) => userMessage(`m${index}`));
      const expected = [
        userMessage("m0"),
        systemMessage(`[Compacted: ${omitted} message groups omitted]`),
        userMessage(`m${length - 2}`),
        userMessage(`m${length - 1}`),
      ];
      expect(await manager.prepare(canonical)).toEqual(expected);
      expect(await fixture(options).manager.prepare(canonical)).toEqual(expected);
    }
    expect(summarizer.calls).toBe(0);
  });

  it("counts a marker by identity, never by its text: a look-alike system message is one group", () => {
    const lookAlike = systemMessage("[Compacted: 40 message groups omitted]");
    const history = [userMessage("m0"), lookAlike, userMessage("m2"), userMessage("m3"), userMessage("m4")];
    expect(snipCompactHistory(history, { maxGroups: 4, keepHeadGroups: 1 })).toEqual([
      userMessage("m0"),
      systemMessage("[Compacted: 2 message groups omitted]"),
      userMessage("m3"),
      userMessage("m4"),
    ]);
    // Its own output snipped again counts what its marker stood for.
    const once = snipCompactHistory(history, { maxGroups: 4, keepHeadGroups: 1 });
    expect(snipCompactHistory([...once, userMessage("m5")], { maxGroups: 4, keepHeadGroups: 1 })).toEqual([
      userMessage("m0"),
      systemMessage("[Compacted: 3 message groups omitted]"),
      userMessage("m4"),
      userMessage("m5"),
    ]);
  });

  it("prepares any other change from scratch", async () => {
    const { manager, summarizer } = fixture({ proactiveThresholdBytes: 10 });
    const history = [userMessage("read the files"), ...toolGroup(["a"]), assistantMessage("done")];
    await manager.prepare(history);
    const changed = [userMessage("read other files"), ...history.slice(1), userMessage("more")];
    await manager.prepare(changed);
    expect(summarizer.inputs[1]).toEqual(changed);
    const shorter = history.slice(0, 1);
    await manager.prepare(shorter);
    expect(summarizer.inputs[2]).toEqual(shorter);
    expect(summarizer.calls).toBe(3);
    expect(listing()).toEqual(["transcript-id-1.jsonl", "transcript-id-2.jsonl", "transcript-id-3.jsonl"]);
  });
});

describe("proactive and reactive compaction (rules 23, 24)", () => {
  const history = [
    userMessage("g1"),
    ...toolGroup(["a", "b"]),
    assistantMessage("g3"),
    userMessage("g4"),
    ...toolGroup(["c"]),
    ...toolGroup(["d", "e", "f"]),
    assistantMessage("g7"),
    userMessage("g8"),
  ];

  it("compactProactively writes the transcript of h and returns [summary]", async () => {
    const { manager, summarizer } = fixture();
    const out = await manager.compactProactively(history);
    expect(out).toEqual({
      history: [systemMessage(summaryText(`${ARTIFACTS}/transcript-id-1.jsonl`))],
      transcript: transcriptRef(`${ARTIFACTS}/transcript-id-1.jsonl`),
    });
    expect(readFileSync(out.transcript.path, "utf8")).toBe(serializeTranscript(history));
    expect(summarizer.calls).toBe(1);
  });

  it("compactProactively fails on a failed summary and keeps the transcript", async () => {
    const summarizer = new CountingSummarizer(() => {
      throw new CompactionError("the summary reply is empty");
    });
    const { manager } = fixture({}, summarizer);
    expect(await rejection(manager.compactProactively(history))).toEqual([
      "CompactionError",
      "the summary reply is empty",
    ]);
    expect(listing()).toEqual(["transcript-id-1.jsonl"]);
  });

  it("compactProactively fails on a failed write without calling the summarizer", async () => {
    mkdirSync(join(workspace, ".agent_tutorial"));
    writeFileSync(join(workspace, ".agent_tutorial", "artifacts"), "a file");
    const { manager, summarizer } = fixture();
    expect(await rejection(manager.compactProactively(history))).toEqual(["ArtifactPathError", CANNOT_CREATE]);
    expect(summarizer.calls).toBe(0);
  });

  it("compactProactively fails on an id collision without overwriting or calling the summarizer", async () => {
    mkdirSync(artifactsDir(), { recursive: true });
    writeFileSync(join(artifactsDir(), "transcript-dup.jsonl"), "older transcript\n");
    const { manager, summarizer } = fixture({ idGenerator: () => "dup" });
    expect(await rejection(manager.compactProactively(history))).toEqual([
      "ArtifactConflictError",
      "artifact already exists",
    ]);
    expect(summarizer.calls).toBe(0);
    expect(listing()).toEqual(["transcript-dup.jsonl"]);
    expect(readFileSync(join(artifactsDir(), "transcript-dup.jsonl"), "utf8")).toBe("older transcript\n");
  });

  it("compactOnPromptTooLong returns the summary and the last 5 complete groups", async () => {
    const { manager, summarizer } = fixture();
    const out = await manager.compactOnPromptTooLong(history, { retryCount: 0 });
    expect(out.history).toEqual([
      systemMessage(summaryText(`${ARTIFACTS}/transcript-id-1.jsonl`)),
      userMessage("g4"),
      ...toolGroup(["c"]),
      ...toolGroup(["d", "e", "f"]),
      assistantMessage("g7"),
      userMessage("g8"),
    ]);
    validateToolPairing(out.history);
    expect(readFileSync(out.transcript.path, "utf8")).toBe(serializeTranscript(history));
    expect(summarizer.inputs).toEqual([history]);

    // Fewer groups than the tail: all of them follow the summary.
    const short = fixture({ reactiveTailGroups: 5, idGenerator: counter("short") });
    const two = [userMessage("a"), assistantMessage("b")];
    expect((await short.manager.compactOnPromptTooLong(two, { retryCount: 0 })).history).toEqual([
      systemMessage(summaryText(`${ARTIFACTS}/transcript-short-1.jsonl`)),
      ...two,
    ]);
  });

  it("refuses a second reactive try with PromptTooLongRetryError, no summary and no file", async () => {
    const { manager, summarizer } = fixture();
    expect(await rejection(manager.compactOnPromptTooLong(history, { retryCount: 1 }))).toEqual([
      "PromptTooLongRetryError",
      "prompt-too-long recovery was already tried once",
    ]);
    const error = await manager.compactOnPromptTooLong(history, { retryCount: 2 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PromptTooLongRetryError);
    expect(error).toBeInstanceOf(CompactionError);
    expect(summarizer.calls).toBe(0);
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
  });
});

describe("folder safety (rule 26)", () => {
  async function refused(setup: () => void, reason = ESCAPES): Promise<void> {
    setup();
    const outsideBefore = tree(outside);
    const { manager, summarizer, notices } = fixture({ persistThresholdBytes: 10, proactiveThresholdBytes: 10 });
    expect(await rejection(manager.compactToolResults([toolSuccess("a result of some length")]))).toEqual([
      "ArtifactPathError",
      reason,
    ]);
    expect(await rejection(manager.prepare([userMessage("a long enough history")]))).toEqual([
      "ArtifactPathError",
      reason,
    ]);
    expect(await rejection(manager.compactProactively([userMessage("hello")]))).toEqual(["ArtifactPathError", reason]);
    expect(summarizer.calls).toBe(0);
    expect(tree(outside)).toEqual(outsideBefore);
    expect(notices).toEqual([
      { type: "failed", reason: reason },
      { type: "failed", reason: reason },
      { type: "failed", reason: reason },
    ]);
    for (const notice of notices) {
      expect(notice.type === "failed" && (notice.reason.includes("/") || notice.reason.includes(base))).toBe(false);
    }
  }

  it.skipIf(!POSIX)(".agent_tutorial as a symlink to an outside folder", async () => {
    await refused(() => symlinkSync(outside, join(workspace, ".agent_tutorial"), "dir"));
    expect(readdirSync(outside)).toEqual([]);
  });

  it.skipIf(!POSIX)(".agent_tutorial as a symlink to a folder inside the workspace", async () => {
    mkdirSync(join(workspace, "inside", "artifacts"), { recursive: true });
    await refused(() => symlinkSync(join(workspace, "inside"), join(workspace, ".agent_tutorial"), "dir"));
    expect(tree(join(workspace, "inside"))).toEqual(["artifacts"]);
  });

  it.skipIf(!POSIX)(".agent_tutorial as a relative symlink inside the workspace", async () => {
    mkdirSync(join(workspace, "inside"));
    await refused(() => symlinkSync("inside", join(workspace, ".agent_tutorial"), "dir"));
    expect(readdirSync(join(workspace, "inside"))).toEqual([]);
  });

  it.skipIf(!POSIX)("artifacts as a symlink to an outside folder", async () => {
    mkdirSync(join(workspace, ".agent_tutorial"));
    await refused(() => symlinkSync(outside, join(workspace, ".agent_tutorial", "artifacts"), "dir"));
    expect(readdirSync(outside)).toEqual([]);
  });

  it.skipIf(!POSIX)("artifacts as a symlink to a folder inside the workspace", async () => {
    mkdirSync(join(workspace, ".agent_tutorial", "real"), { recursive: true });
    await refused(() =>
      symlinkSync(join(workspace, ".agent_tutorial", "real"), join(workspace, ".agent_tutorial", "artifacts"), "dir"),
    );
    expect(readdirSync(join(workspace, ".agent_tutorial", "real"))).toEqual([]);
  });

  it.skipIf(!POSIX)("a dangling symlink at .agent_tutorial", async () => {
    await refused(() => symlinkSync(join(outside, "not-yet"), join(workspace, ".agent_tutorial"), "dir"));
    expect(existsSync(join(outside, "not-yet"))).toBe(false);
  });

  it(".agent_tutorial as a file", async () => {
    await refused(() => writeFileSync(join(workspace, ".agent_tutorial"), "not a folder"), CANNOT_CREATE);
    expect(readFileSync(join(workspace, ".agent_tutorial"), "utf8")).toBe("not a folder");
  });

  it("artifacts as a file", async () => {
    mkdirSync(join(workspace, ".agent_tutorial"));
    await refused(() => writeFileSync(join(workspace, ".agent_tutorial", "artifacts"), "not a folder"), CANNOT_CREATE);
    expect(readFileSync(join(workspace, ".agent_tutorial", "artifacts"), "utf8")).toBe("not a folder");
  });

  it.skipIf(!POSIX)(".agent_tutorial as a FIFO", async () => {
    await refused(() => execFileSync("mkfifo", [join(workspace, ".agent_tutorial")]), CANNOT_CREATE);
    expect(lstatSync(join(workspace, ".agent_tutorial")).isFIFO()).toBe(true);
  });

  it.skipIf(!POSIX)("artifacts as a FIFO", async () => {
    mkdirSync(join(workspace, ".agent_tutorial"));
    await refused(() => execFileSync("mkfifo", [join(workspace, ".agent_tutorial", "artifacts")]), CANNOT_CREATE);
  });

  it("a workspace that is not a real folder is refused before anything is written", async () => {
    const { manager, notices } = fixture({ workspace: join(base, "missing"), persistThresholdBytes: 10 });
    const error = await manager.compactToolResults([toolSuccess("a result of some length")]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ArtifactPathError);
    expect(existsSync(join(base, "missing"))).toBe(false);
    expect(notices).toEqual([{ type: "failed", reason: CANNOT_CREATE }]);
  });
});

describe("notices", () => {
  it("a notice listener that throws changes nothing: the batch stands, its files and references with it", async () => {
    const { manager } = fixture({
      onArtifact: () => {
        throw new Error("listener broke");
      },
    });
    const { results, artifacts } = await manager.compactToolResults([toolSuccess(ascii(30_001))]);
    expect(artifacts.map((artifact) => artifact.reference.relativePath)).toEqual([`${ARTIFACTS}/tool-result-id-1.txt`]);
    expect(results[0]?.content).toMatch(
      /^<persisted-tool-result>\npath: \.agent_tutorial\/artifacts\/tool-result-id-1\.txt\n/,
    );
    expect(fileText(`${ARTIFACTS}/tool-result-id-1.txt`)).toBe(ascii(30_001));
  });
});

describe("the runtime's own folder: ignored by git, and gone again after a failed first batch", () => {
  const stateDir = (): string => join(workspace, ".agent_tutorial");
  const failure = (code: string): NodeJS.ErrnoException =>
    Object.assign(new Error(`${code}: simulated at the file handle`), { code });

  /** The prototype every FileHandle shares: a fault there is a fault of the real disk's handle, nothing above it. */
  async function fileHandlePrototype(): Promise<FileHandle> {
    const handle = await open(join(base, "probe"), "w");
    await handle.close();
    return Object.getPrototypeOf(handle) as FileHandle;
  }

  it("a new .agent_tutorial gets a .gitignore holding *, so git offers none of it; so does one that had none", async () => {
    const { manager } = fixture({ persistThresholdBytes: 10 });
    await manager.compactToolResults([toolSuccess("a result of some length")]);
    expect(readdirSync(stateDir()).sort()).toEqual([".gitignore", "artifacts"]);
    expect(readFileSync(join(stateDir(), ".gitignore"), "utf8")).toBe("*\n");
    const info = lstatSync(join(stateDir(), ".gitignore"));
    expect(info.isFile() && info.nlink === 1).toBe(true);
    if (POSIX) expect(info.mode & 0o777).toBe(0o600);
    // Later batches write no second one, and a folder the runtime did not make gets one as well.
    await manager.compactToolResults([toolSuccess("another result of some length")]);
    expect(readdirSync(stateDir()).sort()).toEqual([".gitignore", "artifacts"]);
    rmSync(stateDir(), { recursive: true });
    mkdirSync(stateDir());
    await fixture({ persistThresholdBytes: 10, idGenerator: counter("later") }).manager.compactToolResults([
      toolSuccess("a result of some length"),
    ]);
    expect(readdirSync(stateDir()).sort()).toEqual([".gitignore", "artifacts"]);
  });

  it("git status in a repository workspace shows nothing of .agent_tutorial", async () => {
    execFileSync("git", ["init", "--quiet", workspace]);
    writeFileSync(join(workspace, "README.md"), "mine\n");
    const { manager } = fixture({ persistThresholdBytes: 10 });
    await manager.compactToolResults([toolSuccess("secret=hunter2 in a long enough result")]);
    await manager.compactProactively([userMessage("hello")]);
    const status = execFileSync("git", ["status", "--porcelain", "--untracked-files=all"], {
      cwd: workspace,
      encoding: "utf8",
    });
    expect(status).toBe("?? README.md\n");
  });

  it.skipIf(!POSIX)(
    "the .gitignore is made new through the folder just made, never through a link: a planted link fails the batch and outside is unchanged",
    async () => {
      const target = join(outside, "victim.txt");
      writeFileSync(target, "outside, untouched\n");
      // Right after the runtime makes .agent_tutorial, another process plants .gitignore as a link to outside.
      const realMkdir = fs.mkdirSync;
      vi.spyOn(fs, "mkdirSync").mockImplementation((path, options) => {
        const made = realMkdir(path, options);
        if (String(path).endsWith("/.agent_tutorial")) symlinkSync(target, join(stateDir(), ".gitignore"));
        return made;
      });
      syncBuiltinESMExports();
      const { manager, notices } = fixture({ persistThresholdBytes: 10 });
      expect(await rejection(manager.compactToolResults([toolSuccess("a result of some length")]))).toEqual([
        "ArtifactPathError",
        CANNOT_CREATE,
      ]);
      expect(readFileSync(target, "utf8")).toBe("outside, untouched\n");
      expect(lstatSync(join(stateDir(), ".gitignore")).isSymbolicLink()).toBe(true);
      expect(existsSync(artifactsDir())).toBe(false);
      expect(notices).toEqual([{ type: "failed", reason: CANNOT_CREATE }]);
    },
  );

  it("a failed first batch leaves no .agent_tutorial: the folders it made and their .gitignore are removed again", async () => {
    const ids = ["a", "a"];
    const { manager } = fixture({ idGenerator: () => ids.shift() ?? "none", persistThresholdBytes: 10 });
    const error = await manager
      .compactToolResults([toolSuccess("first result, long"), toolSuccess("second result, long")])
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ArtifactConflictError);
    // Where folders are reached by name (macOS, Windows) a name may lead elsewhere by now: they are kept there.
    if (process.platform === "linux") expect(existsSync(stateDir())).toBe(false);
    // A folder that was there before stays, whatever fails.
    mkdirSync(stateDir());
    writeFileSync(join(stateDir(), "notes.txt"), "mine");
    const again = fixture({ idGenerator: () => "b", persistThresholdBytes: 10 });
    await again.manager.compactToolResults([toolSuccess("first result, long")]);
    await again.manager.compactToolResults([toolSuccess("second result, long")]).catch(() => undefined);
    expect(readdirSync(stateDir()).sort()).toEqual([".gitignore", "artifacts", "notes.txt"]);
    expect(listing()).toEqual(["tool-result-b.txt"]);
  });

  const linux = process.platform === "linux";
  /** Descriptors this process holds now (Linux): a batch that leaks one leaves the count higher. */
  const descriptors = (): number => readdirSync("/proc/self/fd").length;

  it.skipIf(!linux)(
    "every descriptor a batch opens is closed again: the folders', the workspace's and the .gitignore's, after a first batch that succeeds and one that fails",
    async () => {
      const before = descriptors();
      await fixture({ persistThresholdBytes: 10 }).manager.compactToolResults([toolSuccess("a result of some length")]);
      expect(readFileSync(join(stateDir(), ".gitignore"), "utf8")).toBe("*\n");
      expect(descriptors()).toBe(before);
      rmSync(stateDir(), { recursive: true });
      const ids = ["a", "a"];
      const failing = fixture({ idGenerator: () => ids.shift() ?? "none", persistThresholdBytes: 10 }).manager;
      const batch = [toolSuccess("first result, long"), toolSuccess("second result, long")];
      expect(await failing.compactToolResults(batch).catch((caught: unknown) => caught)).toBeInstanceOf(
        ArtifactConflictError,
      );
      expect(descriptors()).toBe(before);
    },
  );

  it.skipIf(!linux)(
    "a failed first batch removes only its own .gitignore: one put in its place is kept (and so the folder), a removed one is no error",
    async () => {
      const proto = await fileHandlePrototype();
      const real = Reflect.get(proto, "writeFile") as (this: FileHandle, ...args: unknown[]) => Promise<void>;
      let change = (): void => undefined;
      vi.spyOn(proto, "writeFile").mockImplementation(async function (this: FileHandle, ...args: unknown[]) {
        // While the batch's first file is written, another process changes the .gitignore the runtime made.
        change();
        change = () => undefined;
        return real.apply(this, args);
      });
      const failedBatch = async (): Promise<unknown> => {
        const ids = ["a", "a"];
        const { manager } = fixture({ idGenerator: () => ids.shift() ?? "none", persistThresholdBytes: 10 });
        const batch = [toolSuccess("first result, long"), toolSuccess("second result, long")];
        return manager.compactToolResults(batch).catch((caught: unknown) => caught);
      };
      change = () => {
        // Made before the old one goes, so it cannot reuse the old one's inode number.
        writeFileSync(join(stateDir(), "mine"), "mine\n");
        renameSync(join(stateDir(), "mine"), join(stateDir(), ".gitignore"));
      };
      expect(await failedBatch()).toBeInstanceOf(ArtifactConflictError);
      expect(readdirSync(stateDir())).toEqual([".gitignore"]);
      expect(readFileSync(join(stateDir(), ".gitignore"), "utf8")).toBe("mine\n");

      rmSync(stateDir(), { recursive: true });
      change = () => unlinkSync(join(stateDir(), ".gitignore"));
      expect(await failedBatch()).toBeInstanceOf(ArtifactConflictError);
      expect(existsSync(stateDir())).toBe(false);
    },
  );

  it.skipIf(!linux)(
    "a failed first batch takes back the .gitignore it added to a .agent_tutorial that was there: the folder is left as it was",
    async () => {
      mkdirSync(stateDir());
      const ids = ["a", "a"];
      const { manager } = fixture({ idGenerator: () => ids.shift() ?? "none", persistThresholdBytes: 10 });
      const batch = [toolSuccess("first result, long"), toolSuccess("second result, long")];
      expect(await manager.compactToolResults(batch).catch((caught: unknown) => caught)).toBeInstanceOf(
        ArtifactConflictError,
      );
      expect(readdirSync(stateDir())).toEqual([]);
    },
  );

  it("a .gitignore someone makes between the check and the write is theirs: kept as they wrote it, and the batch goes on", async () => {
    mkdirSync(stateDir());
    const realLstat = fs.lstatSync;
    let planted = false;
    vi.spyOn(fs, "lstatSync").mockImplementation((...args: Parameters<typeof fs.lstatSync>) => {
      const answer = realLstat(...args);
      if (!planted && answer === undefined && String(args[0]).endsWith(".gitignore")) {
        planted = true;
        writeFileSync(join(stateDir(), ".gitignore"), "theirs\n");
      }
      return answer;
    });
    syncBuiltinESMExports();
    const { manager } = fixture({ persistThresholdBytes: 10 });
    const { artifacts } = await manager.compactToolResults([toolSuccess("a result of some length")]);
    expect(planted).toBe(true);
    expect(artifacts).toHaveLength(1);
    expect(readFileSync(join(stateDir(), ".gitignore"), "utf8")).toBe("theirs\n");
  });

  it("an ignore file that cannot be written fails the batch closed, the system's error as its cause: nothing is saved", async () => {
    mkdirSync(stateDir());
    const realOpen = fs.openSync;
    vi.spyOn(fs, "openSync").mockImplementation((...args: Parameters<typeof fs.openSync>) => {
      if (String(args[0]).endsWith(".gitignore")) throw failure("ENOSPC");
      return realOpen(...args);
    });
    syncBuiltinESMExports();
    const { manager, notices } = fixture({ persistThresholdBytes: 10 });
    const error = await manager
      .compactToolResults([toolSuccess("a result of some length")])
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ArtifactPathError);
    expect((error as Error).message).toBe(CANNOT_CREATE);
    expect(((error as Error).cause as NodeJS.ErrnoException).code).toBe("ENOSPC");
    expect(readdirSync(stateDir())).toEqual([]);
    expect(notices).toEqual([{ type: "failed", reason: CANNOT_CREATE }]);
  });

  it.skipIf(!linux)(
    "a failed first batch whose files cannot all be removed keeps its folders and their .gitignore, and says so",
    async () => {
      const realUnlink = fs.unlinkSync;
      vi.spyOn(fs, "unlinkSync").mockImplementation((path) => {
        if (String(path).endsWith("/tool-result-a.txt")) throw failure("EBUSY");
        realUnlink(path);
      });
      syncBuiltinESMExports();
      const ids = ["a", "a"];
      const { manager, notices } = fixture({ idGenerator: () => ids.shift() ?? "none", persistThresholdBytes: 10 });
      const batch = [toolSuccess("first result, long"), toolSuccess("second result, long")];
      expect(await manager.compactToolResults(batch).catch((caught: unknown) => caught)).toBeInstanceOf(
        ArtifactConflictError,
      );
      expect(readdirSync(stateDir()).sort()).toEqual([".gitignore", "artifacts"]);
      expect(listing()).toEqual(["tool-result-a.txt"]);
      expect(notices).toEqual([
        { type: "failed", reason: "artifact already exists; and this batch's files could not all be removed" },
      ]);
    },
  );

  describe.skipIf(!linux)("a .agent_tutorial renamed right after it is opened, a new folder put in its place", () => {
    /** `swap` moves .agent_tutorial aside and makes a new one by its name, once, holding `files`. */
    let swapped = false;
    const swap = (files: Record<string, string> = {}): void => {
      if (swapped) return;
      swapped = true;
      renameSync(stateDir(), join(workspace, "aside"));
      mkdirSync(stateDir());
      for (const [name, text] of Object.entries(files)) writeFileSync(join(stateDir(), name), text);
    };
    beforeEach(() => {
      swapped = false;
    });
    const batch = async (): Promise<void> => {
      const { manager } = fixture({ persistThresholdBytes: 10 });
      await manager.compactToolResults([toolSuccess("a result of some length")]).catch(() => undefined);
    };

    it("made by this call: its .gitignore goes into the folder made, through it, and the new folder gets none", async () => {
      const realChmod = fs.fchmodSync;
      vi.spyOn(fs, "fchmodSync").mockImplementation((...args: Parameters<typeof fs.fchmodSync>) => {
        swap();
        realChmod(...args);
      });
      syncBuiltinESMExports();
      await batch();
      expect(swapped).toBe(true);
      expect(readdirSync(stateDir())).toEqual([]);
      expect(readFileSync(join(workspace, "aside", ".gitignore"), "utf8")).toBe("*\n");
    });

    it("there before: the .gitignore it lacked goes into that folder, looked for and written through it, whatever the new one holds", async () => {
      mkdirSync(stateDir());
      const realLstat = fs.lstatSync;
      vi.spyOn(fs, "lstatSync").mockImplementation((...args: Parameters<typeof fs.lstatSync>) => {
        if (String(args[0]).endsWith(".gitignore")) swap({ ".gitignore": "theirs\n" });
        return realLstat(...args);
      });
      syncBuiltinESMExports();
      await batch();
      expect(swapped).toBe(true);
      expect(readdirSync(stateDir())).toEqual([".gitignore"]);
      expect(readFileSync(join(stateDir(), ".gitignore"), "utf8")).toBe("theirs\n");
      expect(readFileSync(join(workspace, "aside", ".gitignore"), "utf8")).toBe("*\n");
    });
  });

  it("a failed walk keeps the system's error as its cause: a workspace that cannot be opened, an ignore file that cannot be made", async () => {
    const batch = [toolSuccess("a result of some length")];
    rmSync(workspace, { recursive: true });
    const gone = await fixture({ persistThresholdBytes: 10 })
      .manager.compactToolResults(batch)
      .catch((caught: unknown) => caught);
    expect(gone).toBeInstanceOf(ArtifactPathError);
    expect((gone as Error).message).toBe(CANNOT_CREATE);
    expect((gone as Error).cause).toMatchObject({ code: expect.any(String) as unknown });
    if (!POSIX) return;
    // Right after the runtime makes .agent_tutorial, another process plants .gitignore as a link: O_EXCL refuses it.
    mkdirSync(workspace);
    const realMkdir = fs.mkdirSync;
    vi.spyOn(fs, "mkdirSync").mockImplementation((path, options) => {
      const made = realMkdir(path, options);
      if (String(path).endsWith("/.agent_tutorial")) symlinkSync(join(outside, "x"), join(stateDir(), ".gitignore"));
      return made;
    });
    syncBuiltinESMExports();
    const planted = await fixture({ persistThresholdBytes: 10 })
      .manager.compactToolResults(batch)
      .catch((caught: unknown) => caught);
    expect(planted).toBeInstanceOf(ArtifactPathError);
    expect((planted as Error).message).toBe(CANNOT_CREATE);
    expect(((planted as Error).cause as NodeJS.ErrnoException).code).toBe("EEXIST");
  });

  const faults: [string, string, "writeFile" | "sync", string][] = [
    ["ENOSPC while the bytes are written", "ENOSPC", "writeFile", "the disk is full"],
    ["EROFS when the file is synced", "EROFS", "sync", "the disk is read-only"],
  ];

  it.each(faults)(
    "%s fails the whole batch closed: no temporary file, no file of the batch, no folder made for it",
    async (_name, code, method, reason) => {
      const proto = await fileHandlePrototype();
      const real = Reflect.get(proto, method) as (this: FileHandle, ...args: unknown[]) => Promise<void>;
      let calls = 0;
      vi.spyOn(proto, method).mockImplementation(async function (this: FileHandle, ...args: unknown[]) {
        calls += 1;
        // The batch's second file: the first is published by then, and half of the second's bytes reach the disk.
        if (calls < 2) return real.apply(this, args);
        if (method === "writeFile") await this.write(Buffer.from("half of it"));
        throw failure(code);
      });
      const { manager, notices } = fixture({ persistThresholdBytes: 10 });
      const batch = [toolSuccess("first result, long"), toolSuccess("second result, long")];
      expect(await rejection(manager.compactToolResults(batch))).toEqual(["CompactionError", reason]);
      if (process.platform === "linux") expect(existsSync(stateDir())).toBe(false);
      expect(listing()).toEqual([]);
      expect(notices).toEqual([{ type: "failed", reason }]);

      // With files of earlier batches there, the listing afterwards equals the listing before.
      vi.restoreAllMocks();
      const earlier = await manager.compactToolResults([toolSuccess("an earlier result")]);
      const before = listing();
      calls = 0;
      vi.spyOn(proto, method).mockImplementation(async function (this: FileHandle, ...args: unknown[]) {
        calls += 1;
        if (calls < 2) return real.apply(this, args);
        throw failure(code);
      });
      expect(await rejection(manager.compactToolResults(batch))).toEqual(["CompactionError", reason]);
      expect(listing()).toEqual(before);
      expect(readdirSync(artifactsDir()).some((name) => name.endsWith(".tmp"))).toBe(false);
      expect(readFileSync(earlier.artifacts[0]?.reference.path ?? "missing", "utf8")).toBe("an earlier result");
    },
  );
});

describe("a folder swapped while it is written (rule 26, D3)", () => {
  // A worker thread plays the other process: as fast as it can, it renames the artifacts folder aside, puts a link
  // to the outside folder in its place, and undoes both. Whatever moment a write meets, nothing may land outside,
  // a batch that succeeds must have written exactly the files its references name, and one that fails leaves none.
  const SWAPPER = `
    const { renameSync, symlinkSync, unlinkSync } = require("node:fs");
    const { workerData, parentPort } = require("node:worker_threads");
    const flag = new Int32Array(workerData.flag);
    const { folder, aside, outside } = workerData;
    let swaps = 0;
    while (Atomics.load(flag, 0) === 0) {
      try { renameSync(folder, aside); } catch { continue; }
      try { symlinkSync(outside, folder); } catch {}
      try { unlinkSync(folder); } catch {}
      try { renameSync(aside, folder); } catch {}
      swaps += 1;
    }
    parentPort.postMessage(swaps);
  `;

  it.skipIf(!POSIX)("never writes outside, and every reference it returns names its own bytes", async () => {
    const { manager } = fixture({ idGenerator: undefined, onArtifact: undefined });
    // The folders exist first: the race is on a write, not on the first mkdir.
    await manager.compactToolResults([toolSuccess(ascii(30_001))]);
    const folder = artifactsDir();
    const aside = join(workspace, ".agent_tutorial", "aside");
    const flag = new SharedArrayBuffer(4);
    const worker = new Worker(SWAPPER, { eval: true, workerData: { flag, folder, aside, outside } });
    const swapped = new Promise<number>((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
    });
    const kept = new Map<string, string>();
    let failures = 0;
    try {
      for (let batch = 0; batch < 150; batch += 1) {
        const content = `${String(batch).padStart(4, "0")}${ascii(30_000)}`;
        try {
          const { artifacts } = await manager.compactToolResults([toolSuccess(content)]);
          kept.set((artifacts[0] as ToolResultArtifact).reference.relativePath, content);
        } catch (error) {
          expect(error).toBeInstanceOf(ArtifactPathError);
          failures += 1;
        }
      }
    } finally {
      Atomics.store(new Int32Array(flag), 0, 1);
    }
    expect(await swapped).toBeGreaterThan(0);
    await worker.terminate();
    // Where the swapper stopped, the link goes; the folder may be aside, and the manager may have made a new one
    // while it was: a file is where its folder went, but only ever in one of the two.
    if (lstatSync(folder, { throwIfNoEntry: false })?.isSymbolicLink() === true) unlinkSync(folder);
    expect(tree(outside)).toEqual([]);
    expect(kept.size + failures).toBe(150);
    const names = [folder, aside].flatMap((place) =>
      existsSync(place) ? readdirSync(place).map((name) => join(place, name)) : [],
    );
    for (const [relative, content] of kept) {
      const name = relative.split("/").at(-1) as string;
      const found = names.filter((path) => path.endsWith(`/${name}`));
      expect(found).toHaveLength(1);
      expect(readFileSync(found[0] as string, "utf8")).toBe(content);
    }
    // One file from before the race, one per kept batch; no temporary name and no file of a failed batch.
    expect(names).toHaveLength(kept.size + 1);
  });
});

describe("invalid histories (rule 29)", () => {
  const broken: [string, ChatMessage[], string][] = [
    [
      "a call without its result",
      [userMessage("go"), assistantMessage(null, [toolCall("c1", "read_file", "{}")]), userMessage("next")],
      'missing tool results for ids: ["c1"]',
    ],
    ["an orphan result", [userMessage("go"), toolMessage("stray", "c9")], "orphan tool result id: c9"],
    [
      "a result for another call",
      [assistantMessage(null, [toolCall("c1", "read_file", "{}")]), toolMessage("x", "c2")],
      "unexpected tool result id: c2",
    ],
  ];

  it.each(broken)("throws on %s before any file or summary", async (_name, history, message) => {
    const { manager, summarizer } = fixture({ proactiveThresholdBytes: 10 });
    const expected = ["MessageContractError", message];
    expect(await rejection(manager.prepare(history))).toEqual(expected);
    expect(await rejection(manager.compactProactively(history))).toEqual(expected);
    expect(await rejection(manager.compactOnPromptTooLong(history, { retryCount: 0 }))).toEqual(expected);
    expect(thrown(() => snipCompactHistory(history))).toEqual(expected);
    expect(thrown(() => microCompactHistory(history))).toEqual(expected);
    expect(summarizer.calls).toBe(0);
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
    expect(await manager.prepare(history).catch((error: unknown) => error)).toBeInstanceOf(MessageContractError);
  });
});

describe("configuration (rule 34)", () => {
  const numeric = [
    "persistThresholdBytes",
    "batchBudgetBytes",
    "keepRecentToolGroups",
    "reactiveTailGroups",
    "proactiveThresholdBytes",
    "snipMaxGroups",
    "snipKeepHeadGroups",
    "maxArtifactBytes",
  ] as const;

  it.each(numeric)("refuses a %s that is not a positive integer", (name) => {
    for (const value of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(thrown(() => fixture({ [name]: value }))).toEqual(["RangeError", `${name} must be a positive integer`]);
    }
  });

  it("allows one preview to be 0 but not both, and no negative or fractional preview", () => {
    expect(thrown(() => fixture({ previewHeadBytes: 0 }))).toBeUndefined();
    expect(thrown(() => fixture({ previewTailBytes: 0 }))).toBeUndefined();
    expect(thrown(() => fixture({ previewHeadBytes: 0, previewTailBytes: 0 }))).toEqual([
      "RangeError",
      "a preview needs a head or a tail",
    ]);
    expect(thrown(() => fixture({ previewHeadBytes: -1 }))).toEqual([
      "RangeError",
      "previewHeadBytes must be a non-negative integer",
    ]);
    expect(thrown(() => fixture({ previewTailBytes: 0.5 }))).toEqual([
      "RangeError",
      "previewTailBytes must be a non-negative integer",
    ]);
  });

  it("checks snip's limits with validateSnipConfiguration: room for a head group, the marker and a tail group", () => {
    const head = ["RangeError", "keepHeadGroups must leave room for marker and tail groups"];
    const max = ["RangeError", "maxGroups must leave room for head, marker, and tail groups"];
    expect(thrown(() => fixture({ snipMaxGroups: 4, snipKeepHeadGroups: 3 }))).toEqual(head);
    expect(thrown(() => fixture({ snipMaxGroups: 3, snipKeepHeadGroups: 3 }))).toEqual(head);
    expect(thrown(() => fixture({ snipMaxGroups: 5, snipKeepHeadGroups: 3 }))).toBeUndefined();
    expect(thrown(() => fixture({ snipMaxGroups: 4 }))).toEqual(head);
    expect(thrown(() => fixture({ snipMaxGroups: 2, snipKeepHeadGroups: 1 }))).toEqual(max);
    expect(thrown(() => validateSnipConfiguration(3, 1))).toBeUndefined();
    expect(thrown(() => validateSnipConfiguration(0, 1))).toEqual([
      "RangeError",
      "maxGroups must be a positive integer",
    ]);
    expect(thrown(() => validateSnipConfiguration(3, 1.5))).toEqual([
      "RangeError",
      "keepHeadGroups must be a positive integer",
    ]);
  });

  it("snipCompactHistory and microCompactHistory check their options before anything is cut", () => {
    // Today's bug: maxGroups 2 with the default 3 head groups dropped the tail under a marker that miscounted.
    const history = Array.from({ length: 6 }, (_, index) => userMessage(`m${index}`));
    expect(thrown(() => snipCompactHistory(history, { maxGroups: 2 }))).toEqual([
      "RangeError",
      "maxGroups must leave room for head, marker, and tail groups",
    ]);
    expect(thrown(() => snipCompactHistory(history, { maxGroups: 4 }))).toEqual([
      "RangeError",
      "keepHeadGroups must leave room for marker and tail groups",
    ]);
    expect(thrown(() => snipCompactHistory(history, { keepHeadGroups: 0 }))).toEqual([
      "RangeError",
      "keepHeadGroups must be a positive integer",
    ]);
    for (const keepRecentToolGroups of [0, -1, 1.5]) {
      expect(thrown(() => microCompactHistory(history, { keepRecentToolGroups }))).toEqual([
        "RangeError",
        "keepRecentToolGroups must be a positive integer",
      ]);
    }
    // Checked before the history: a broken history with broken options names the options.
    expect(thrown(() => snipCompactHistory([toolMessage("stray", "c9")], { maxGroups: 2 }))?.[0]).toBe("RangeError");
  });

  it("refuses a negative or fractional retryCount", async () => {
    const { manager, summarizer } = fixture();
    for (const retryCount of [-1, 0.5]) {
      expect(await rejection(manager.compactOnPromptTooLong([], { retryCount }))).toEqual([
        "RangeError",
        "retryCount must be a non-negative integer",
      ]);
    }
    expect(summarizer.calls).toBe(0);
  });
});
