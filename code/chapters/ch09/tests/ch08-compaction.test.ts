import { existsSync, lstatSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildAgent, SYSTEM_PROMPT } from "../src/bootstrap.js";
import { HookRegistry, HookResult } from "../src/core/hooks.js";
import { IncompleteModelReplyError, ModelCallError } from "../src/core/loop.js";
import { validateToolPairing, type ChatMessage } from "../src/core/messages.js";
import type { ModelClient, ModelReply, ModelRequest } from "../src/core/model.js";
import {
  PermissionDecision,
  type ApprovalProvider,
  type AuditSink,
  type PermissionRequest,
} from "../src/core/permissions.js";
import { P07, P08, profileForChapter, type ChapterProfile } from "../src/core/profiles.js";
import {
  historyUtf8Bytes,
  COMPACTED_TOOL_RESULT,
  SUMMARY_SYSTEM_PROMPT,
  type ArtifactNotice,
} from "../src/features/compaction.js";
import { DEFAULT_SUBAGENT_SYSTEM_PROMPT } from "../src/features/subagents.js";
import { type CliRun } from "./support/cli-run.js";
import { FakeCommandRunner } from "./support/fakes.js";
import { completion, type LoopbackOpenAI } from "./support/loopback-openai.js";
import {
  announcedWorkspace,
  keylessEnv,
  loopbackEnv,
  runProfileInProcess,
  scriptedProvider,
  wireText,
} from "./support/profile-run.js";
import { call, textTurn, toolTurn } from "./support/scripted-model.js";

// The chapter 8 gate: artifacts and compaction through the real composition root (buildAgent(P08)), loop, tools,
// policy, hooks and a temporary disk; then the CLI (runProfile(P08) in this process against a loopback provider for
// the real openai SDK) and the demo. The book names no test file: this file's name is ours (CH08.md §3).

const P07_TOOLS = ["shell", "read_file", "write_file", "edit_file", "glob", "todo_write", "task", "load_skill"];
const ARTIFACT = /^\.agent_tutorial\/artifacts\/tool-result-[a-z0-9]+\.txt$/;
const TRANSCRIPT = /^\.agent_tutorial\/artifacts\/transcript-[a-z0-9]+\.jsonl$/;
const SUMMARY = {
  current_goal: "总结 Markdown 文件",
  key_findings: ["big.log 全是构建日志"],
  files_read_or_changed: ["big.log"],
  remaining_work: [],
  user_constraints: ["只读"],
};
const SUMMARY_TEXT = JSON.stringify(SUMMARY);

let root: string;
let workspace: string;

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch08-compaction-")));
  workspace = join(root, "workspace");
  await mkdir(workspace);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** 60,000 bytes of 3-byte characters: over the 30,000-byte threshold alone. */
const BIG = "日志".repeat(10_000);
/** 29,000 ASCII bytes: under the threshold, seven of them over the 200,000-byte batch budget. */
const part = (n: number): string => String(n).padEnd(29_000, "x");

async function writeWorkspaceFiles(): Promise<void> {
  await writeFile(join(workspace, "big.log"), BIG, "utf8");
  for (let n = 1; n <= 7; n += 1) await writeFile(join(workspace, `part-${n}.md`), part(n), "utf8");
}

const artifactFolder = (): string => join(workspace, ".agent_tutorial", "artifacts");
const artifactNames = (): string[] => (existsSync(artifactFolder()) ? readdirSync(artifactFolder()).sort() : []);

/** A model for parent, child and summary alike: a request offering no tools is the summary's, the rest in order. */
class RoutingModel implements ModelClient {
  readonly requests: ModelRequest[] = [];
  readonly summaryRequests: ModelRequest[] = [];
  #next = 0;
  constructor(
    private readonly replies: readonly ModelReply[],
    private readonly summary: () => ModelReply = () => textTurn(SUMMARY_TEXT),
  ) {}
  complete(request: ModelRequest): Promise<ModelReply> {
    if (request.tools.length === 0) {
      this.summaryRequests.push(request);
      return Promise.resolve(this.summary());
    }
    this.requests.push(request);
    const reply = this.replies[this.#next];
    this.#next += 1;
    return reply === undefined ? Promise.reject(new Error("out of replies")) : Promise.resolve(reply);
  }
  get answered(): number {
    return this.#next;
  }
}

/** Every hook event, in order, so a run with a summary can be compared with one without. */
class HookCount {
  readonly registry = new HookRegistry();
  readonly events: string[] = [];
  constructor() {
    for (const event of ["UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"] as const) {
      this.registry.register(event, () => {
        this.events.push(event);
        return new HookResult();
      });
    }
  }
}

const allow: ApprovalProvider = {
  decide: () => Promise.resolve(new PermissionDecision("allow", "test", "user")),
};
const noAudit: AuditSink = { record: () => undefined };

function agentFor(
  profile: ChapterProfile,
  model: ModelClient,
  extra: { hooks?: HookRegistry; maxTurns?: number } = {},
) {
  const notices: ArtifactNotice[] = [];
  const summaries: [number, number][] = [];
  const agent = buildAgent(profile, {
    model,
    workspace,
    commandRunner: new FakeCommandRunner(),
    approvalProvider: allow,
    auditSink: noAudit,
    onArtifact: (notice) => notices.push(notice),
    onSummary: (before, after) => summaries.push([before, after]),
    ...extra,
  });
  return { agent, notices, summaries };
}

/** The history part of a loop request: between the system prompt and any trailing guidance of chapter 5. */
const requestHistory = (request: ModelRequest): readonly ChatMessage[] => {
  const [, ...rest] = request.messages;
  const last = rest.at(-1);
  return last?.role === "system" && last.content.startsWith("Keep the TODO list current") ? rest.slice(0, -1) : rest;
};

// ——— The book's one case of this file (it prints its checks, not its title), and the proof that nothing asks. ———

/** The book's approver: any question is a failure, since saving artifacts and summarizing ask nobody. */
class UnexpectedApproval implements ApprovalProvider {
  requests = 0;
  decide(_request: PermissionRequest): Promise<PermissionDecision> {
    this.requests += 1;
    return Promise.reject(new Error("read_file should not request approval"));
  }
}

describe("the book's full-agent case", () => {
  it("saves a large read_file result before it enters the history, keeps the pairing, asks nothing and adds no compact tool", async () => {
    const content = "甲".repeat(10_001);
    await writeFile(join(workspace, "large.txt"), content, "utf8");
    const approval = new UnexpectedApproval();
    const model = new RoutingModel([toolTurn(call("call-1", "read_file", { path: "large.txt" })), textTurn("done")]);
    const agent = buildAgent(P08, {
      model,
      workspace,
      commandRunner: new FakeCommandRunner(),
      approvalProvider: approval,
      auditSink: noAudit,
    });
    const result = await agent.run("读取 large.txt");
    const persisted = requestHistory(model.requests[1] as ModelRequest).at(-1) as ChatMessage;
    expect(persisted.content).toContain("<persisted-tool-result>");
    const relativePath = /^path: (.+)$/m.exec(persisted.content ?? "")?.[1] ?? "";
    expect(relativePath).toMatch(/^\.agent_tutorial\/artifacts\/tool-result-[a-z0-9]+\.txt$/);
    expect(await readFile(join(workspace, ...relativePath.split("/")), "utf8")).toBe(content);
    expect(result.history[2]).toEqual(persisted);
    validateToolPairing(result.history);
    expect(approval.requests).toBe(0);
    expect(model.requests[0]?.tools.map((tool) => tool.function.name)).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
      "todo_write",
      "task",
      "load_skill",
    ]);
  });

  it("asks for no approval while it saves artifacts, writes the transcript and summarizes: the approver is called 0 times", async () => {
    await writeWorkspaceFiles();
    const approval = new UnexpectedApproval();
    const model = new RoutingModel([
      toolTurn(call("c-big", "read_file", { path: "big.log" })),
      toolTurn(...[1, 2, 3, 4, 5, 6, 7].map((n) => call(`c-part-${n}`, "read_file", { path: `part-${n}.md` }))),
      textTurn("总结完成"),
    ]);
    const notices: ArtifactNotice[] = [];
    const agent = buildAgent(P08, {
      model,
      workspace,
      commandRunner: new FakeCommandRunner(),
      approvalProvider: approval,
      auditSink: noAudit,
      onArtifact: (notice) => notices.push(notice),
    });
    expect((await agent.run("go")).finalText).toBe("总结完成");
    // Two results and a transcript published, one summary made: every write the runtime's own, none asked.
    expect(notices.map((notice) => notice.type)).toEqual(["published", "published", "published"]);
    expect(model.summaryRequests).toHaveLength(1);
    expect(artifactNames()).toHaveLength(3);
    expect(approval.requests).toBe(0);
  });
});

describe("rule 1: P08", () => {
  it("is P07 plus artifacts and compaction, frozen, profileForChapter(8), with P07's eight tools and no compact tool", async () => {
    expect(Object.isFrozen(P08)).toBe(true);
    expect(P08.chapter).toBe(8);
    expect([...P08.capabilities]).toEqual([...P07.capabilities, "artifacts", "compaction"]);
    expect(profileForChapter(8)).toBe(P08);
    const model = new RoutingModel([textTurn("done")]);
    const { agent } = agentFor(P08, model);
    expect((await agent.run("hi")).finalText).toBe("done");
    expect(model.requests[0]?.tools.map((tool) => tool.function.name)).toEqual(P07_TOOLS);
  });
});

describe("the book's request path through buildAgent(P08)", () => {
  const script = (): ModelReply[] => [
    toolTurn(call("c-big", "read_file", { path: "big.log" })),
    toolTurn(...[1, 2, 3, 4, 5, 6, 7].map((n) => call(`c-part-${n}`, "read_file", { path: `part-${n}.md` }))),
    textTurn("总结完成"),
  ];

  it("rules 10 and 16: large results go to disk before the history holds them; the summary replaces only the request history", async () => {
    await writeWorkspaceFiles();
    const model = new RoutingModel(script());
    const { agent, notices, summaries } = agentFor(P08, model);
    const result = await agent.run("读取当前目录中的 Markdown 文件并总结关键信息");
    expect(result.finalText).toBe("总结完成");
    expect(result.turns).toBe(3);
    validateToolPairing(result.history);

    // Three files: big.log's text, part-1.md's (the earliest of seven equal results over the budget), the transcript.
    const published = notices.filter((notice) => notice.type === "published");
    expect(notices).toHaveLength(3);
    expect(published.map((notice) => notice.bytes)).toEqual([60_000, 29_000, expect.any(Number)]);
    const [bigPath, partPath, transcriptPath] = published.map((notice) => notice.relativePath);
    expect(bigPath).toMatch(ARTIFACT);
    expect(partPath).toMatch(ARTIFACT);
    expect(transcriptPath).toMatch(TRANSCRIPT);
    expect(artifactNames()).toHaveLength(3);
    expect(artifactNames().some((name) => name.endsWith(".tmp"))).toBe(false);
    expect(readFileSync(join(workspace, bigPath as string), "utf8")).toBe(BIG);
    expect(readFileSync(join(workspace, partPath as string), "utf8")).toBe(part(1));
    expect(lstatSync(join(workspace, bigPath as string)).nlink).toBe(1);

    // The canonical history holds the references, never the text, and nothing of snip, micro or the summary.
    const tools = result.history.filter((message) => message.role === "tool");
    expect(tools).toHaveLength(8);
    expect(tools[0]?.content).toMatch(
      new RegExp(`^<persisted-tool-result>\\npath: ${bigPath}\\noriginal_bytes: 60000\\n`),
    );
    expect(tools[0]?.content).not.toContain(BIG);
    expect(tools[1]?.content).toMatch(/^<persisted-tool-result>\npath: .*\noriginal_bytes: 29000\n/);
    expect(tools.slice(2).map((message) => message.content)).toEqual([2, 3, 4, 5, 6, 7].map(part));
    const texts = JSON.stringify(result.history);
    expect(texts).not.toContain("[Compacted:");
    expect(texts).not.toContain(COMPACTED_TOOL_RESULT);
    expect(texts).not.toContain("transcript_path");

    // Book order: the transcript of the canonical history (user, 2 calls, 8 results) is on disk before the summary.
    const transcriptLines = readFileSync(join(workspace, transcriptPath as string), "utf8").split("\n");
    expect(transcriptLines.pop()).toBe("");
    expect(transcriptLines).toHaveLength(11);
    expect(historyUtf8Bytes(result.history.slice(0, 11))).toBe(published[2]?.bytes);
    expect(model.summaryRequests).toHaveLength(1);
    const summaryRequest = model.summaryRequests[0] as ModelRequest;
    expect(summaryRequest.tools).toEqual([]);
    expect(summaryRequest.messages[0]).toEqual({ role: "system", content: SUMMARY_SYSTEM_PROMPT });

    // The third loop request is [system prompt, summary] (and chapter 5's guidance): no recent message appended.
    const third = model.requests[2] as ModelRequest;
    expect(third.messages[0]?.content).toContain(SYSTEM_PROMPT);
    const history = requestHistory(third);
    expect(history).toHaveLength(1);
    expect(history[0]?.role).toBe("system");
    // The book's summary message: its JSON, keys sorted, with its kind and the transcript's path, and nothing else.
    const fields = { ...SUMMARY, kind: "compacted_history", transcript_path: transcriptPath };
    expect(JSON.parse(history[0]?.content ?? "")).toEqual(fields);
    expect(history[0]?.content).toBe(
      [
        "{",
        `  "current_goal": "总结 Markdown 文件",`,
        `  "files_read_or_changed": ["big.log"],`,
        `  "key_findings": ["big.log 全是构建日志"],`,
        `  "kind": "compacted_history",`,
        `  "remaining_work": [],`,
        `  "transcript_path": "${transcriptPath}",`,
        `  "user_constraints": ["只读"]`,
        "}",
      ].join("\n"),
    );
    // Neither snip nor micro changed anything here: the summarized request history was the canonical one.
    expect(summaries).toEqual([[historyUtf8Bytes(result.history.slice(0, 11)), historyUtf8Bytes(history)]]);
  });

  it("rule 22: after a summary, the next request is the cached summary plus what was appended, and no second summary is made", async () => {
    await writeWorkspaceFiles();
    const model = new RoutingModel([
      ...script().slice(0, 2),
      toolTurn(call("c-readme", "glob", { pattern: "*.log" })),
      textTurn("总结完成"),
    ]);
    const { agent } = agentFor(P08, model);
    const result = await agent.run("go");
    expect(result.turns).toBe(4);
    expect(model.summaryRequests).toHaveLength(1);
    const fourth = requestHistory(model.requests[3] as ModelRequest);
    expect(fourth).toHaveLength(3);
    expect(fourth[0]).toBe(requestHistory(model.requests[2] as ModelRequest)[0]);
    expect(fourth.slice(1)).toEqual(result.history.slice(11, 13));
    expect(artifactNames()).toHaveLength(3);
  });

  it("rule 28: a run with a summary has exactly the hook events of the same run in P07", async () => {
    await writeWorkspaceFiles();
    const withCompaction = new HookCount();
    const model = new RoutingModel(script());
    await agentFor(P08, model, { hooks: withCompaction.registry }).agent.run("go");
    expect(model.summaryRequests).toHaveLength(1);
    const without = new HookCount();
    await agentFor(P07, new RoutingModel(script()), { hooks: without.registry }).agent.run("go");
    expect(withCompaction.events).toEqual(without.events);
    expect(withCompaction.events.filter((event) => event === "PostToolUse")).toHaveLength(8);
  });

  it("rule 32: P07 on this snapshot and a P08 run with only small results create no .agent_tutorial", async () => {
    await writeWorkspaceFiles();
    const p07 = new RoutingModel(script());
    await agentFor(P07, p07).agent.run("go");
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
    expect(p07.summaryRequests).toHaveLength(0);
    // P07's requests hold the full text: nothing of chapter 8 reaches them.
    expect(JSON.stringify(p07.requests[1]?.messages)).toContain(BIG);
    const small = new RoutingModel([toolTurn(call("c1", "read_file", { path: "part-1.md" })), textTurn("ok")]);
    await agentFor(P08, small).agent.run("go");
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
    expect(requestHistory(small.requests[1] as ModelRequest).at(-1)).toEqual({
      role: "tool",
      content: part(1),
      toolCallId: "c1",
    });
  });

  it("rule 30: a child's requests are never compacted, and its large final text reaches the parent cut, never saved (issue 34 E1)", async () => {
    await writeWorkspaceFiles();
    const childAnswer = "结".repeat(12_000);
    const model = new RoutingModel([
      toolTurn(call("parent-task", "task", { description: "读 big.log" })),
      toolTurn(call("child-read", "read_file", { path: "big.log" })),
      textTurn(childAnswer),
      textTurn("done"),
    ]);
    const { agent, notices } = agentFor(P08, model);
    const result = await agent.run("go");
    expect(result.finalText).toBe("done");
    // The child's second request carries big.log whole: the child runs without processors.
    const childSecond = model.requests[2] as ModelRequest;
    expect(childSecond.messages[0]?.content).toBe(DEFAULT_SUBAGENT_SYSTEM_PROMPT);
    expect(childSecond.messages.at(-1)).toEqual({ role: "tool", content: BIG, toolCallId: "child-read" });
    // The model wrote all 36,000 bytes: task cuts them to 4,096 (chapter 6), too few for the processor to save.
    expect(notices).toEqual([]);
    const taskResult = result.history.find((message) => message.role === "tool");
    expect(taskResult?.content).toBe(
      `${"结".repeat(1_342)}\n[Subagent answer cut: 31974 of its 36000 UTF-8 bytes are not shown]`,
    );
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
  });

  it("rule 25: a model error is not caught to compact, and a length reply is IncompleteModelReplyError with no transcript written", async () => {
    await writeWorkspaceFiles();
    const cutShort = new RoutingModel([...script().slice(0, 2), textTurn("半句", "length")]);
    await expect(agentFor(P08, cutShort).agent.run("go")).rejects.toThrow(IncompleteModelReplyError);
    // The cut-off reply came after the one summary; no second transcript, no retry.
    expect(cutShort.summaryRequests).toHaveLength(1);
    expect(artifactNames().filter((name) => name.startsWith("transcript-"))).toHaveLength(1);
    await rm(join(workspace, ".agent_tutorial"), { recursive: true });
    const failing: ModelClient = {
      complete: () => Promise.reject(new ModelCallError("prompt_too_long: too many tokens")),
    };
    await expect(agentFor(P08, failing).agent.run("go")).rejects.toThrow("prompt_too_long: too many tokens");
    expect(existsSync(join(workspace, ".agent_tutorial"))).toBe(false);
  });

  it("rule 27: read_file reads a published artifact back whole, through the reference's own path", async () => {
    await writeWorkspaceFiles();
    const model = new RoutingModel([toolTurn(call("c-big", "read_file", { path: "big.log" })), textTurn("next")]);
    const first = await agentFor(P08, model).agent.run("go");
    const reference = first.history.find((message) => message.role === "tool")?.content ?? "";
    const path = /^path: (\S+)$/m.exec(reference)?.[1] as string;
    expect(path).toMatch(ARTIFACT);
    // P07 has no processor: the result of reading the artifact is the artifact, byte for byte.
    const back = new RoutingModel([toolTurn(call("c-back", "read_file", { path })), textTurn("done")]);
    await agentFor(P07, back).agent.run("go");
    expect(requestHistory(back.requests[1] as ModelRequest).at(-1)).toEqual({
      role: "tool",
      content: BIG,
      toolCallId: "c-back",
    });
  });

  it("the bar: a 60-turn run keeps every request history within 50,000 bytes where P07's grows past 1.7 MB", async () => {
    await writeWorkspaceFiles();
    const turns = (): ModelReply[] => [
      ...Array.from({ length: 59 }, (_, index) =>
        toolTurn(call(`c-${index}`, "read_file", { path: `part-${(index % 7) + 1}.md` })),
      ),
      textTurn("done"),
    ];
    const compacted = new RoutingModel(turns());
    const result = await agentFor(P08, compacted, { maxTurns: 60 }).agent.run("go");
    expect(result.turns).toBe(60);
    expect(compacted.requests).toHaveLength(60);
    const sizes = compacted.requests.map((request) => historyUtf8Bytes(requestHistory(request)));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(50_000);
    expect(compacted.summaryRequests.length).toBeGreaterThan(20);
    validateToolPairing(result.history);
    expect(result.history).toHaveLength(1 + 59 * 2 + 1);

    const plain = new RoutingModel(turns());
    await agentFor(P07, plain, { maxTurns: 60 }).agent.run("go");
    const plainSizes = plain.requests.map((request) => historyUtf8Bytes(requestHistory(request)));
    expect(plainSizes.at(-1)).toBeGreaterThan(1_700_000);
  });
});

// ——— The CLI: runProfile(P08) in this process, a loopback provider for the real openai SDK, the demo. ———

interface WireRequest {
  readonly messages: { role: string; content: string | null; tool_call_id?: string }[];
  readonly tools?: unknown[];
}
const wireRequest = (server: LoopbackOpenAI, index: number): WireRequest => server.requests[index] as WireRequest;

const ch08 = (argv: readonly string[], env: Record<string, string | undefined>): Promise<CliRun> =>
  runProfileInProcess(P08, argv, env, workspace);

const wireCalls = (...calls: [id: string, name: string, args: unknown][]) => ({
  json: completion({ toolCalls: calls.map(([id, name, args]) => ({ id, name, arguments: JSON.stringify(args) })) }),
});

describe("rule 33 and the bar: the CLI through a loopback provider", () => {
  it("a 60,000-byte read is on disk, its preview is what the provider gets next, and [Artifact] follows PostToolUse, with --quiet", async () => {
    await writeWorkspaceFiles();
    const server = await scriptedProvider([
      wireCalls(["call-1", "read_file", { path: "big.log" }]),
      wireText("读完了"),
    ]);
    const run = await ch08(["--prompt", "读 big.log", "--quiet"], loopbackEnv(server));
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("读完了\n");
    const lines = run.stderr.split("\n");
    const [path] = artifactNames();
    expect(lines).toEqual([
      "[Hook] UserPromptSubmit",
      "[Hook] PreToolUse: read_file",
      "[Permission] read_file: allow (default) - No permission rule blocked the request",
      "[Hook] PostToolUse: read_file -> ok",
      `[Artifact] .agent_tutorial/artifacts/${path} (60000 bytes)`,
      "[Hook] Stop",
      "",
    ]);
    expect(readFileSync(join(artifactFolder(), path as string), "utf8")).toBe(BIG);
    // The tool message as the SDK sent it: the reference, the size, and 666 characters (1,998 bytes) at each end.
    const sent = wireRequest(server, 1).messages.at(-1);
    expect(sent?.tool_call_id).toBe("call-1");
    expect(sent?.content).toBe(
      [
        "<persisted-tool-result>",
        `path: .agent_tutorial/artifacts/${path}`,
        "original_bytes: 60000",
        "head_preview:",
        "日志".repeat(333),
        "tail_preview:",
        "日志".repeat(333),
        "</persisted-tool-result>",
      ].join("\n"),
    );
  });

  it("a batch that cannot be saved prints [Artifact] failed: with the reason, and the model reads the stable error", async () => {
    await writeWorkspaceFiles();
    await writeFile(join(workspace, ".agent_tutorial"), "a file where the folder would go");
    const server = await scriptedProvider([
      wireCalls(["call-1", "read_file", { path: "big.log" }], ["call-2", "read_file", { path: "part-2.md" }]),
      wireText("没存下"),
    ]);
    const run = await ch08(["--prompt", "读 big.log", "--quiet"], loopbackEnv(server));
    expect(run.code).toBe(0);
    const lines = run.stderr.split("\n");
    expect(lines.slice(lines.indexOf("[Hook] PostToolUse: read_file -> ok") + 4, -1)).toEqual([
      "[Artifact] failed: artifact directory could not be created",
      "[Hook] Stop",
    ]);
    // Both calls of the reply read the same error, paired; nothing was written, the file stays as it was.
    expect(wireRequest(server, 1).messages.slice(-2)).toEqual([
      {
        role: "tool",
        tool_call_id: "call-1",
        content: "Error [tool_result_processing_error]: Tool result processing failed",
      },
      {
        role: "tool",
        tool_call_id: "call-2",
        content: "Error [tool_result_processing_error]: Tool result processing failed",
      },
    ]);
    expect(readFileSync(join(workspace, ".agent_tutorial"), "utf8")).toBe("a file where the folder would go");
  });

  it("[Compaction] once per summary; the summary request offers no tools and the next request is [system, summary]", async () => {
    await writeWorkspaceFiles();
    const server = await scriptedProvider([
      wireCalls(["c1", "read_file", { path: "part-1.md" }], ["c2", "read_file", { path: "part-2.md" }]),
      wireText(SUMMARY_TEXT),
      wireText("总结完成"),
    ]);
    const run = await ch08(["--prompt", "读两个文件", "--quiet"], loopbackEnv(server));
    expect(run.code).toBe(0);
    const lines = run.stderr.split("\n");
    const [transcript] = artifactNames();
    expect(lines.filter((line) => line.startsWith("[Artifact]") || line.startsWith("[Compaction]"))).toEqual([
      expect.stringMatching(new RegExp(`^\\[Artifact\\] \\.agent_tutorial/artifacts/${transcript} \\(\\d+ bytes\\)$`)),
      expect.stringMatching(/^\[Compaction\] request history summarized: \d+ -> \d+ bytes$/),
    ]);
    expect(transcript).toMatch(/^transcript-[a-z0-9]+\.jsonl$/);
    expect(wireRequest(server, 1).tools ?? []).toEqual([]);
    expect(wireRequest(server, 1).messages[0]).toEqual({ role: "system", content: SUMMARY_SYSTEM_PROMPT });
    expect(wireRequest(server, 2).messages.map((message) => message.role)).toEqual(["system", "system"]);
  });

  it("a failed preparation is 运行失败, exit 1, the oversized request is never sent, and --transcript is still written", async () => {
    await writeWorkspaceFiles();
    const server = await scriptedProvider([
      wireCalls(["c1", "read_file", { path: "part-1.md" }], ["c2", "read_file", { path: "part-2.md" }]),
      wireText("这里是一段散文，不是 JSON。"),
    ]);
    const out = join(root, "out.json");
    const run = await ch08(["--prompt", "读两个文件", "--quiet", "--transcript", out], loopbackEnv(server));
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr.split("\n").filter((line) => line.startsWith("运行失败"))).toEqual([
      "运行失败: Request history processing failed: summary model output is not valid JSON",
    ]);
    expect(server.requests).toHaveLength(2);
    const recorded = JSON.parse(await readFile(out, "utf8")) as { messages: { role: string }[] };
    expect(recorded.messages.map((message) => message.role)).toEqual(["user", "assistant", "tool", "tool"]);
    // The transcript written before the summary stays for inspection.
    expect(artifactNames().filter((name) => name.startsWith("transcript-"))).toHaveLength(1);
  });
});

describe("the chapter 8 demo", () => {
  const demoRun = (argv: readonly string[]): Promise<CliRun> =>
    runProfileInProcess(P08, ["--demo", ...argv], keylessEnv(), root);

  it("prints the §7 lines, saves big.log, part-1.md and the transcript, and answers 演示结束。", async () => {
    const out = join(root, "demo.json");
    const run = await demoRun(["--transcript", out]);
    expect(run.code).toBe(0);
    expect(run.stdout.startsWith("演示结束。")).toBe(true);
    const demoWorkspace = announcedWorkspace(run.stderr);
    const lines = run.stderr
      .split("\n")
      .filter((line) => /^\[(Hook|Permission|Artifact|Compaction)\]/.test(line) || line.startsWith("无交互输入"));
    const read = [
      "[Hook] PreToolUse: read_file",
      "[Permission] read_file: allow (default) - No permission rule blocked the request",
      "[Hook] PostToolUse: read_file -> ok",
    ];
    expect(lines).toEqual([
      "[Hook] UserPromptSubmit",
      ...read,
      expect.stringMatching(/^\[Artifact\] \.agent_tutorial\/artifacts\/tool-result-[a-z0-9]+\.txt \(60000 bytes\)$/),
      "[Hook] PreToolUse: glob",
      "[Permission] glob: allow (default) - No permission rule blocked the request",
      "[Hook] PostToolUse: glob -> ok",
      ...read,
      ...read,
      ...read,
      ...read,
      ...read,
      ...read,
      ...read,
      expect.stringMatching(/^\[Artifact\] \.agent_tutorial\/artifacts\/tool-result-[a-z0-9]+\.txt \(29000 bytes\)$/),
      expect.stringMatching(/^\[Artifact\] \.agent_tutorial\/artifacts\/transcript-[a-z0-9]+\.jsonl \(\d+ bytes\)$/),
      expect.stringMatching(/^\[Compaction\] request history summarized: \d+ -> \d+ bytes$/),
      "[Hook] Stop",
    ]);
    const [before] = /summarized: (\d+) ->/.exec(lines.at(-2) as string)?.slice(1) ?? [];
    expect(Number(before)).toBeGreaterThan(50_000);

    const folder = join(demoWorkspace, ".agent_tutorial", "artifacts");
    const files = readdirSync(folder);
    expect(files).toHaveLength(3);
    const pathOf = (line: string): string => join(demoWorkspace, /\] (\S+) \(/.exec(line)?.[1] as string);
    const artifactLines = run.stderr.split("\n").filter((line) => line.startsWith("[Artifact]"));
    expect(readFileSync(pathOf(artifactLines[0] as string))).toEqual(readFileSync(join(demoWorkspace, "big.log")));
    expect(readFileSync(join(demoWorkspace, "big.log"))).toHaveLength(60_000);
    const transcript = readFileSync(pathOf(artifactLines[2] as string), "utf8")
      .trimEnd()
      .split("\n");
    expect(transcript).toHaveLength(13);
    const persisted = transcript.filter((line) => line.includes("<persisted-tool-result>"));
    expect(persisted).toHaveLength(2);

    // --transcript: the canonical history (14 messages, two references, no summary) and the five tagged replies.
    const recorded = JSON.parse(await readFile(out, "utf8")) as {
      messages: { role: string; content: string | null }[];
      replies: { agent: string }[];
    };
    expect(recorded.messages).toHaveLength(14);
    expect(recorded.messages.filter((message) => message.content?.startsWith("<persisted-tool-result>"))).toHaveLength(
      2,
    );
    expect(JSON.stringify(recorded.messages)).not.toContain("transcript_path");
    expect(recorded.replies.map((reply) => reply.agent)).toEqual([
      "parent",
      "parent",
      "parent",
      "summarizer",
      "parent",
    ]);
  });

  it("--quiet keeps every [Hook], [Permission], [Artifact] and [Compaction] line", async () => {
    const loud = await demoRun([]);
    const quiet = await demoRun(["--quiet"]);
    announcedWorkspace(loud.stderr);
    announcedWorkspace(quiet.stderr);
    const kept = (text: string): string[] =>
      text
        .split("\n")
        .filter((line) => /^\[(Hook|Permission|Artifact|Compaction)\]/.test(line))
        .map((line) => line.replace(/[0-9a-f]{32}/, "<id>").replace(/\(\d+ bytes\)$/, "(N bytes)"));
    expect(kept(quiet.stderr)).toEqual(kept(loud.stderr));
    expect(quiet.stdout).toBe(loud.stdout);
  });
});
