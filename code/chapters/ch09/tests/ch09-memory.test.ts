import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { cp, mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildAgent, replayModel, RequestOwners } from "../src/bootstrap.js";
import { runProfile, type CliIO } from "../src/cli.js";
import { prepareDemo } from "../src/cli/demo.js";
import { memoryLine, memoryRows, type MemoryLineNotice } from "../src/cli/memory-lines.js";
import { replayedTurns, readTranscript } from "../src/cli/transcript.js";
import type { AgentEvent } from "../src/core/agent-events.js";
import { HookRegistry, HookResult } from "../src/core/hooks.js";
import {
  assistantMessage,
  systemMessage,
  userMessage,
  validateToolPairing,
  type ChatMessage,
} from "../src/core/messages.js";
import type { ModelClient, ModelReply, ModelRequest } from "../src/core/model.js";
import { PermissionDecision, type ApprovalProvider, type AuditSink } from "../src/core/permissions.js";
import {
  P01,
  P02,
  P03,
  P04,
  P05,
  P06,
  P07,
  P08,
  P09,
  profileForChapter,
  type ChapterProfile,
} from "../src/core/profiles.js";
import { SUMMARY_SYSTEM_PROMPT } from "../src/features/compaction.js";
import {
  catalogOf,
  CONSOLIDATOR_SYSTEM_PROMPT,
  EXTRACTOR_SYSTEM_PROMPT,
  MemoryRecord,
  MemoryStore,
  MemoryType,
  SELECTOR_SYSTEM_PROMPT,
  type MemoryNotice,
} from "../src/features/memory.js";
import { DEFAULT_SUBAGENT_SYSTEM_PROMPT } from "../src/features/subagents.js";
import { TODO_STALE_REMINDER } from "../src/features/todos.js";
import { type CliRun } from "./support/cli-run.js";
import { FakeCommandRunner } from "./support/fakes.js";
import { completion, startLoopbackOpenAI, type LoopbackOpenAI } from "./support/loopback-openai.js";
import {
  announcedWorkspace,
  keylessEnv,
  loopbackEnv,
  runProfileInProcess,
  scriptedProvider,
  wireCall,
  wireText,
} from "./support/profile-run.js";
import { call, ScriptedModel, textTurn, toolTurn } from "./support/scripted-model.js";
import { Sink } from "./support/sink.js";

// The chapter 9 gate ("接线测试"): memory through the real composition root (buildAgent(P09)), loop, tools, policy,
// hooks and a temporary disk, with only the model scripted; then the CLI (runProfile(P09) in this process against a
// loopback provider for the real openai SDK) and the demo. The book prints this file's first test (跨实例选择).

const P08_TOOLS = ["shell", "read_file", "write_file", "edit_file", "glob", "todo_write", "task", "load_skill"];
const TAG = "<relevant_memories>";
const ID = "[0-9a-f]{32}";
/** The book's extracted memory in its cross-instance test. */
const PROJECT_FACT = {
  name: "project-fact",
  type: "project",
  description: "Project database rule",
  body: "Always use the integration database.",
};
/** The memory message that fact makes: the book's layout, nothing around it. */
const PROJECT_FACT_MESSAGE =
  "<relevant_memories>\n\n## project-fact (project)\n\nProject database rule\n\nAlways use the integration database.\n\n</relevant_memories>";

let root: string;
let workspace: string;

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch09-memory-")));
  workspace = join(root, "workspace");
  await mkdir(workspace);
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const memoryFolder = (folder = workspace): string => join(folder, ".memory");
/** The names in `.memory`, sorted; none when it does not exist. */
const storeNames = (folder = workspace): string[] =>
  existsSync(memoryFolder(folder)) ? readdirSync(memoryFolder(folder)).sort() : [];
/** Every file of `.memory` with its bytes, to compare a store before and after. */
const storeBytes = (folder = workspace): Record<string, string> =>
  Object.fromEntries(
    storeNames(folder).map((name) => [name, readFileSync(join(memoryFolder(folder), name)).toString("base64")]),
  );
/** The records' names, in manifest order, as a later run would read them. */
const storedNames = async (folder = workspace): Promise<string[]> =>
  (await new MemoryStore({ workspace: folder }).records()).map((record) => record.name);

const record = (name: string, kind: MemoryType, description: string, body: string): MemoryRecord =>
  new MemoryRecord({ name, kind, description, body });
const DATABASE = record(
  "database-rule",
  MemoryType.FEEDBACK,
  "生产数据库约束",
  "测试必须连真实集成数据库，禁止 mock。",
);
/** The memory message DATABASE alone makes. */
const DATABASE_MESSAGE =
  "<relevant_memories>\n\n## database-rule (feedback)\n\n生产数据库约束\n\n测试必须连真实集成数据库，禁止 mock。\n\n</relevant_memories>";
const TABS = record("tabs-style", MemoryType.USER, "Tabs indentation preference", "Always indent with tabs.");

async function seed(...records: MemoryRecord[]): Promise<void> {
  await new MemoryStore({ workspace }).extend(records);
}

const allow: ApprovalProvider = {
  decide: () => Promise.resolve(new PermissionDecision("allow", "test", "user")),
};
const noAudit: AuditSink = { record: () => undefined };

function agentFor(
  profile: ChapterProfile,
  model: ModelClient,
  extra: { hooks?: HookRegistry; onEvent?: (event: AgentEvent) => void; folder?: string } = {},
) {
  const notices: MemoryNotice[] = [];
  const agent = buildAgent(profile, {
    model,
    workspace: extra.folder ?? workspace,
    commandRunner: new FakeCommandRunner(),
    approvalProvider: allow,
    auditSink: noAudit,
    onMemory: (notice) => notices.push(notice),
    ...(extra.hooks === undefined ? {} : { hooks: extra.hooks }),
    ...(extra.onEvent === undefined ? {} : { onEvent: extra.onEvent }),
  });
  return { agent, notices };
}

/** A side query's reply: the JSON text of `value`. */
const json = (value: unknown): ModelReply => textTurn(JSON.stringify(value));
const toolNames = (request: ModelRequest | undefined): string[] =>
  (request?.tools ?? []).map((tool) => tool.function.name);
/** How often the memory tag occurs in all of a request's messages. */
const tagCount = (request: ModelRequest | undefined): number =>
  (request?.messages ?? []).reduce((count, message) => count + (message.content?.split(TAG).length ?? 1) - 1, 0);

/**
 * A model for the run and its side queries alike, answering each from its own queue: the run's (and a child's)
 * requests from `turns` in order, a memory side query from the queue its purpose names, a summary from `summary`.
 */
class PurposeModel implements ModelClient {
  readonly requests: ModelRequest[] = [];
  readonly #queues: Record<string, ModelReply[]>;

  constructor(queues: {
    turns: ModelReply[];
    selector?: ModelReply[];
    extractor?: ModelReply[];
    consolidator?: ModelReply[];
    summary?: ModelReply[];
  }) {
    this.#queues = {
      run: [...queues.turns],
      selector: [...(queues.selector ?? [])],
      extractor: [...(queues.extractor ?? [])],
      consolidator: [...(queues.consolidator ?? [])],
      summary: [...(queues.summary ?? [])],
    };
  }

  complete(request: ModelRequest): Promise<ModelReply> {
    this.requests.push(request);
    const queue = request.purpose ?? (request.tools.length === 0 ? "summary" : "run");
    const reply = this.#queues[queue === "subagent" ? "run" : queue]?.shift();
    return reply === undefined ? Promise.reject(new Error(`no ${queue} reply left`)) : Promise.resolve(reply);
  }

  /** The requests sent for `purpose`. */
  sent(purpose: ModelRequest["purpose"]): ModelRequest[] {
    return this.requests.filter((request) => request.purpose === purpose);
  }

  /** The loop's requests (the run's and a child's): no purpose, and tools offered. */
  loop(): ModelRequest[] {
    return this.requests.filter((request) => request.purpose === undefined && request.tools.length > 0);
  }
}

/** Every hook event in order, so a run with memory can be compared with the same run without. */
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

// ——— The book's test, as it prints it, and what it implies. ———

describe("跨实例选择 (the book's test)", () => {
  it("a memory one buildAgent(P09) extracts is selected and injected by a second, separate one on the same workspace", async () => {
    const firstModel = new ScriptedModel([textTurn("stored"), json([PROJECT_FACT])]);
    const first = agentFor(P09, firstModel).agent;
    await first.run("remember the database rule");
    // Two requests: the main one, with the eight tools, and the extractor's, with none. The store was empty, so no
    // selector was asked.
    expect(firstModel.requests).toHaveLength(2);
    expect(toolNames(firstModel.requests[0])).toEqual(P08_TOOLS);
    expect(firstModel.requests[1]?.tools).toEqual([]);
    firstModel.assertExhausted();

    const secondModel = new ScriptedModel([json(["project-fact"]), textTurn("the integration database"), json([])]);
    const second = agentFor(P09, secondModel).agent;
    const result = await second.run("which database should I use?");
    expect(secondModel.requests).toHaveLength(3);
    secondModel.assertExhausted();
    expect(
      secondModel.requests[1]?.messages.some((message) =>
        message.content?.includes("Always use the integration database."),
      ),
    ).toBe(true);
    expect(secondModel.requests[0]?.tools).toEqual([]);
    expect(secondModel.requests[2]?.tools).toEqual([]);
    expect(secondModel.requests[1]?.tools.map((tool) => tool.function.name)).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
      "todo_write",
      "task",
      "load_skill",
    ]);
    // Ours, exactly: the memory message right after the history, in the book's layout; not in the history.
    expect(secondModel.requests[1]?.messages.slice(1)).toEqual([
      userMessage("which database should I use?"),
      systemMessage(PROJECT_FACT_MESSAGE),
    ]);
    expect(result.history).toEqual([
      userMessage("which database should I use?"),
      assistantMessage("the integration database"),
    ]);
    expect(secondModel.requests.map((request) => request.purpose)).toEqual(["selector", undefined, "extractor"]);
    expect(await storedNames()).toEqual(["project-fact"]);
  });
});

describe("rule 1: P09", () => {
  it("is P08 plus memory, frozen, profileForChapter(9), with P08's eight tools in order and no memory tool", async () => {
    expect(Object.isFrozen(P09)).toBe(true);
    expect([...P09.capabilities]).toEqual([...P08.capabilities, "memory"]);
    expect(profileForChapter(9)).toBe(P09);
    const model = new PurposeModel({ turns: [textTurn("done")], extractor: [json([])] });
    expect((await agentFor(P09, model).agent.run("hi")).finalText).toBe("done");
    expect(toolNames(model.loop()[0])).toEqual(P08_TOOLS);
  });
});

describe("rule 29: where the memory message goes, and where it never goes", () => {
  it("every loop request has it right after the history and before chapter 5's reminder, exactly once; side queries and the history have none", async () => {
    await seed(DATABASE, TABS);
    const glob = (id: string): ModelReply => toolTurn(call(id, "glob", { pattern: "*.md" }));
    const model = new PurposeModel({
      turns: [glob("g1"), glob("g2"), glob("g3"), textTurn("done")],
      selector: [json(["database-rule"])],
      extractor: [json([])],
    });
    const result = await agentFor(P09, model).agent.run("检查数据库集成");
    expect(result.turns).toBe(4);
    const memory = systemMessage(DATABASE_MESSAGE);
    const loop = model.loop();
    expect(loop).toHaveLength(4);
    loop.forEach((request, index) => {
      // [system prompt, ...the history so far, memory, (chapter 5's reminder)]
      const history = result.history.slice(0, 1 + 2 * index);
      const reminder = index === 3 ? [systemMessage(TODO_STALE_REMINDER)] : [];
      expect(request.messages.slice(1)).toEqual([...history, memory, ...reminder]);
      expect(tagCount(request)).toBe(1);
    });
    // The selector reads the catalog, the extractor the history: neither is given the injected text.
    for (const side of [...model.sent("selector"), ...model.sent("extractor")]) expect(tagCount(side)).toBe(0);
    expect(JSON.stringify(result.history)).not.toContain(TAG);
    expect(JSON.stringify(result.history)).not.toContain("禁止 mock");
    validateToolPairing(result.history);
  });

  it("with nothing selected, the requests carry no memory message at all", async () => {
    await seed(TABS);
    const model = new PurposeModel({ turns: [textTurn("done")], selector: [json([])], extractor: [json([])] });
    await agentFor(P09, model).agent.run("hi");
    expect(model.loop()[0]?.messages.slice(1)).toEqual([userMessage("hi")]);
  });
});

/** 60,000 bytes of 3-byte characters, and seven 29,000-byte parts: chapter 8's summary in two turns. */
async function writeCompactionFiles(): Promise<void> {
  await writeFile(join(workspace, "big.log"), "日志".repeat(10_000), "utf8");
  for (let n = 1; n <= 7; n += 1) await writeFile(join(workspace, `part-${n}.md`), String(n).padEnd(29_000, "x"));
}
const SUMMARY_TEXT = JSON.stringify({
  current_goal: "总结",
  key_findings: [],
  files_read_or_changed: [],
  remaining_work: [],
  user_constraints: [],
});

describe("rule 30: compaction does not see memory", () => {
  it("after a summary the request is [system, summary, …recent, memory]; the summary request and the transcript artifact hold no memory", async () => {
    await writeCompactionFiles();
    await seed(DATABASE);
    const model = new PurposeModel({
      turns: [
        toolTurn(call("c-big", "read_file", { path: "big.log" })),
        toolTurn(...[1, 2, 3, 4, 5, 6, 7].map((n) => call(`c-part-${n}`, "read_file", { path: `part-${n}.md` }))),
        textTurn("总结完成"),
      ],
      selector: [json(["database-rule"])],
      extractor: [json([])],
      summary: [textTurn(SUMMARY_TEXT)],
    });
    const result = await agentFor(P09, model).agent.run("读取并总结");
    expect(result.finalText).toBe("总结完成");
    const summaries = model.requests.filter((request) => request.messages[0]?.content === SUMMARY_SYSTEM_PROMPT);
    expect(summaries).toHaveLength(1);
    expect(tagCount(summaries[0])).toBe(0);
    const third = model.loop()[2] as ModelRequest;
    expect(third.messages.map((message) => message.role)).toEqual(["system", "system", "system"]);
    expect(JSON.parse(third.messages[1]?.content ?? "")).toMatchObject({ kind: "compacted_history" });
    expect(third.messages[2]).toEqual(systemMessage(DATABASE_MESSAGE));
    expect(tagCount(third)).toBe(1);
    // The summarized history was the canonical one: the memory message never counted toward its threshold.
    const artifacts = join(workspace, ".agent_tutorial", "artifacts");
    const transcript = readdirSync(artifacts).find((name) => name.startsWith("transcript-")) as string;
    const lines = readFileSync(join(artifacts, transcript), "utf8");
    expect(lines).not.toContain(TAG);
    expect(lines.trimEnd().split("\n")).toHaveLength(11);
  });
});

describe("rules 39–41: the lifecycle runs around the loop, with no hooks and no events of its own", () => {
  it("a run with all three side queries has P08's hook events, one model_request per loop request, and turns counts loop requests only", async () => {
    // Ten memories, so the extracted one makes eleven candidates and the consolidator is asked.
    await seed(
      ...Array.from({ length: 10 }, (_, n) => record(`note-${n}`, MemoryType.PROJECT, `note ${n}`, `body ${n}`)),
    );
    const script = (): ModelReply[] => [toolTurn(call("g1", "glob", { pattern: "*.md" })), textTurn("done")];
    const withMemory = new HookCount();
    const events: string[] = [];
    const model = new PurposeModel({
      turns: script(),
      selector: [json(["note-1"])],
      extractor: [json([{ name: "fresh", type: "project", description: "fresh note", body: "fresh body" }])],
      consolidator: [
        json({
          source_names: ["note-0", "note-1"],
          records: [{ name: "notes", type: "project", description: "notes 0 and 1", body: "body 0 and 1" }],
        }),
      ],
    });
    const { agent, notices } = agentFor(P09, model, {
      hooks: withMemory.registry,
      onEvent: (event) => events.push(event.type),
    });
    const result = await agent.run("go");
    expect(model.requests.map((request) => request.purpose)).toEqual([
      "selector",
      undefined,
      undefined,
      "extractor",
      "consolidator",
    ]);
    expect(result.turns).toBe(2);
    expect(events.filter((type) => type === "model_request")).toHaveLength(2);
    const without = new HookCount();
    await agentFor(P08, new PurposeModel({ turns: script() }), { hooks: without.registry }).agent.run("go");
    expect(withMemory.events).toEqual(without.events);
    expect(withMemory.events).toEqual(["UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"]);
    expect(notices.map((notice) => notice.type)).toEqual([
      "querying",
      "selected",
      "querying",
      "extracted",
      "querying",
      "consolidated",
      "saved",
      "saved",
      "removed",
      "removed",
    ]);
    expect(await storedNames()).toEqual([...Array.from({ length: 8 }, (_, n) => `note-${n + 2}`), "fresh", "notes"]);
  });

  it("a failing UserPromptSubmit asks no selector, and a failing Stop asks no extractor", async () => {
    await seed(TABS);
    const failing = (event: "UserPromptSubmit" | "Stop"): HookRegistry => {
      const hooks = new HookRegistry();
      hooks.register(event, () => {
        throw new Error("hook broke");
      });
      return hooks;
    };
    const stored = storeBytes();
    const before = new PurposeModel({ turns: [textTurn("done")], selector: [json([])], extractor: [json([])] });
    await expect(agentFor(P09, before, { hooks: failing("UserPromptSubmit") }).agent.run("go")).rejects.toThrow(
      "UserPromptSubmit hook failed",
    );
    expect(before.requests).toEqual([]);
    const after = new PurposeModel({ turns: [textTurn("done")], selector: [json([])], extractor: [json([])] });
    await expect(agentFor(P09, after, { hooks: failing("Stop") }).agent.run("go")).rejects.toThrow("Stop hook failed");
    expect(after.requests.map((request) => request.purpose)).toEqual(["selector", undefined]);
    expect(storeBytes()).toEqual(stored);
  });
});

describe("the answer before extraction (D14, settled the book's way)", () => {
  /** A PurposeModel that also writes, in `order`, when the extractor is asked. */
  const ordered = (order: string[], turns: ModelReply[]): ModelClient => {
    const model = new PurposeModel({ turns, extractor: [json([])] });
    return {
      complete: (request) => {
        if (request.purpose === "extractor") order.push("extractor");
        return model.complete(request);
      },
    };
  };

  it("onAnswer gets the run's final text once, before the extractor is asked", async () => {
    const order: string[] = [];
    const agent = buildAgent(P09, {
      model: ordered(order, [toolTurn(call("g1", "glob", { pattern: "*" })), textTurn("the answer")]),
      workspace,
      commandRunner: new FakeCommandRunner(),
      approvalProvider: allow,
      auditSink: noAudit,
      onAnswer: (text) => order.push(`answer: ${text}`),
    });
    const result = await agent.run("go");
    expect(order).toEqual(["answer: the answer", "extractor"]);
    expect(result.finalText).toBe("the answer");
  });

  it("an onAnswer that throws fails nothing: the run returns its answer and the extractor still saves", async () => {
    const model = new PurposeModel({ turns: [textTurn("the answer")], extractor: [json([PROJECT_FACT])] });
    let told = 0;
    const agent = buildAgent(P09, {
      model,
      workspace,
      commandRunner: new FakeCommandRunner(),
      approvalProvider: allow,
      auditSink: noAudit,
      onAnswer: () => {
        told += 1;
        throw new Error("stdout is gone");
      },
    });
    const result = await agent.run("go");
    expect(told).toBe(1);
    expect(result.finalText).toBe("the answer");
    expect(model.requests.map((request) => request.purpose)).toEqual([undefined, "extractor"]);
    expect(await storedNames()).toEqual(["project-fact"]);
  });

  it("a PostToolUse stop ends the run on a tool's result: onAnswer is not called, the extractor still runs", async () => {
    const order: string[] = [];
    const hooks = new HookRegistry();
    hooks.register("PostToolUse", () => new HookResult({ preventContinuation: true }));
    const agent = buildAgent(P09, {
      model: ordered(order, [toolTurn(call("g1", "glob", { pattern: "*" }))]),
      workspace,
      commandRunner: new FakeCommandRunner(),
      approvalProvider: allow,
      auditSink: noAudit,
      hooks,
      onAnswer: (text) => order.push(`answer: ${text}`),
    });
    const result = await agent.run("go");
    expect(order).toEqual(["extractor"]);
    expect(result.turns).toBe(1);
  });
});

describe("rule 42: subagents get no memory", () => {
  it("a child's requests carry no memory message and ask no side query; the parent's extractor sees the child's answer", async () => {
    await seed(DATABASE);
    const model = new PurposeModel({
      turns: [toolTurn(call("t1", "task", { description: "查数据库" })), textTurn("子 Agent 的结论"), textTurn("done")],
      selector: [json(["database-rule"])],
      extractor: [json([])],
    });
    const result = await agentFor(P09, model).agent.run("go");
    expect(result.finalText).toBe("done");
    const child = model.requests.filter((request) => request.messages[0]?.content === DEFAULT_SUBAGENT_SYSTEM_PROMPT);
    expect(child).toHaveLength(1);
    expect(tagCount(child[0])).toBe(0);
    expect(model.requests.map((request) => request.purpose)).toEqual([
      "selector",
      undefined,
      undefined,
      undefined,
      "extractor",
    ]);
    // The child's answer is the task's result in the parent's history, which is what the extractor reads.
    const payload = JSON.parse(model.sent("extractor")[0]?.messages[1]?.content ?? "") as { conversation: unknown[] };
    expect(payload.conversation).toEqual([
      { role: "user", content: "go" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "t1", type: "function", function: { name: "task", arguments: '{"description":"查数据库"}' } },
        ],
      },
      { role: "tool", content: "子 Agent 的结论", tool_call_id: "t1" },
      { role: "assistant", content: "done" },
    ]);
  });
});

describe("rule 43: what memory costs per run", () => {
  it("with no store, exactly one extra call (the extractor), and nothing extracted leaves no .memory", async () => {
    const model = new PurposeModel({ turns: [textTurn("done")], extractor: [json([])] });
    const { agent, notices } = agentFor(P09, model);
    await agent.run("hi");
    expect(model.requests.map((request) => request.purpose)).toEqual([undefined, "extractor"]);
    expect(existsSync(memoryFolder())).toBe(false);
    expect(notices).toEqual([
      { type: "querying", query: "extractor" },
      { type: "extracted", names: [] },
    ]);
  });
});

describe("rule 46: chapters 1–8 on this snapshot never touch .memory", () => {
  it.each([P01, P02, P03, P04, P05, P06, P07, P08])(
    "$chapter: no side query, no .memory read or made",
    async (profile) => {
      // A store no chapter 9 run could read: an earlier chapter's run does not even look.
      await mkdir(memoryFolder());
      await writeFile(join(memoryFolder(), "manifest.json"), "{ not json", "utf8");
      const model = new PurposeModel({ turns: [textTurn("done")] });
      const hooks = profile.capabilities.has("hooks") ? { hooks: new HookRegistry() } : {};
      expect((await agentFor(profile, model, hooks).agent.run("hi")).finalText).toBe("done");
      expect(model.requests.map((request) => request.purpose)).toEqual([undefined]);
      expect(storeNames()).toEqual(["manifest.json"]);
    },
  );
});

// ——— The CLI: runProfile(P09) in this process, a loopback provider for the real openai SDK. ———

interface WireRequest {
  readonly messages: { role: string; content: string | null; tool_call_id?: string }[];
  readonly tools?: unknown[];
}
const wireRequest = (server: LoopbackOpenAI, index: number): WireRequest => server.requests[index] as WireRequest;
const wireJson = (value: unknown) => wireText(JSON.stringify(value));

const ch09 = (argv: readonly string[], env: CliIO["env"], cwd = workspace): Promise<CliRun> =>
  runProfileInProcess(P09, argv, env, cwd);
const lines = (stderr: string): string[] => stderr.split("\n").filter((line) => line !== "");
/** A `[Memory] saved` line's file, its 32-hex id matched by pattern. */
const saved = (name: string, kind: string, description: string): RegExp =>
  new RegExp(`^\\[Memory\\] saved \\.memory/${name}-${ID}\\.md \\(${kind}\\): ${description}$`, "m");

describe("the bar: two runs of the CLI on one workspace", () => {
  it("run 1 saves what its extractor found and says so; run 2 selects it, says so, and its main request carries it after the history", async () => {
    const first = await scriptedProvider([wireText("stored"), wireJson([PROJECT_FACT])]);
    const one = await ch09(["--prompt", "remember the database rule", "--quiet"], loopbackEnv(first));
    expect(one.code).toBe(0);
    expect(one.stdout).toBe("stored\n");
    expect(lines(one.stderr)).toEqual([
      "[Hook] UserPromptSubmit",
      "[Hook] Stop",
      "[Memory] extracted 1: project-fact",
      expect.stringMatching(saved("project-fact", "project", "Project database rule")),
    ]);
    expect(first.requests).toHaveLength(2);
    expect(wireRequest(first, 1).tools ?? []).toEqual([]);
    expect(wireRequest(first, 1).messages[0]).toEqual({ role: "system", content: EXTRACTOR_SYSTEM_PROMPT });
    const file = /saved (\S+) /.exec(one.stderr)?.[1] as string;
    expect(readFileSync(join(workspace, file), "utf8")).toBe(
      "---\nname: project-fact\ndescription: Project database rule\ntype: project\n---\n\nAlways use the integration database.\n",
    );

    const second = await scriptedProvider([
      wireJson(["project-fact"]),
      wireText("the integration database"),
      wireJson([]),
    ]);
    const two = await ch09(["--prompt", "which database should I use?", "--quiet"], loopbackEnv(second));
    expect(two.code).toBe(0);
    expect(two.stdout).toBe("the integration database\n");
    expect(lines(two.stderr)).toEqual([
      "[Hook] UserPromptSubmit",
      "[Memory] selected 1 of 1: project-fact",
      "[Hook] Stop",
      "[Memory] nothing new to save",
    ]);
    expect(second.requests).toHaveLength(3);
    expect(wireRequest(second, 0).messages[0]).toEqual({ role: "system", content: SELECTOR_SYSTEM_PROMPT });
    expect(wireRequest(second, 0).tools ?? []).toEqual([]);
    expect(wireRequest(second, 1).messages.slice(1)).toEqual([
      { role: "user", content: "which database should I use?" },
      { role: "system", content: PROJECT_FACT_MESSAGE },
    ]);
    expect(wireRequest(second, 2).tools ?? []).toEqual([]);
    expect(await storedNames()).toEqual(["project-fact"]);
  });
});

describe("§8.4: the unified entry", () => {
  it("agent-tutorial run --chapter 9 sends the same requests as npm run ch09, memory's side queries included", async () => {
    await seed(DATABASE);
    const script = () => [wireJson(["database-rule"]), wireText("done"), wireJson([])];
    const [fixed, chosen] = [await scriptedProvider(script()), await scriptedProvider(script())];
    expect((await ch09(["--prompt", "x", "--quiet"], loopbackEnv(fixed))).code).toBe(0);
    const unified = await runCliIn(
      ["run", "--chapter", "9", "--prompt", "x", "--quiet"],
      loopbackEnv(chosen),
      workspace,
    );
    expect(unified.code).toBe(0);
    expect(fixed.requests).toHaveLength(3);
    expect(chosen.requests).toEqual(fixed.requests);
  });
});

describe("an unreadable store", () => {
  it("a hand-edited record file fails the run before any request, with one 配置错误 line naming that file", async () => {
    await seed(TABS);
    const file = storeNames().find((name) => name.startsWith("tabs-style-")) as string;
    await writeFile(join(memoryFolder(), file), "---\nname: tabs-style\n---\n\nno description\n", "utf8");
    const before = storeBytes();
    const server = await scriptedProvider([wireText("never asked")]);
    const run = await ch09(["--prompt", "hi", "--quiet"], loopbackEnv(server));
    expect(run.code).toBe(2);
    const failure = lines(run.stderr).filter((line) => !line.startsWith("[Hook]"));
    expect(failure).toEqual([
      `配置错误: memory file is invalid: .memory/${file}: the frontmatter must have exactly name, description and type`,
    ]);
    expect(server.requests).toEqual([]);
    expect(storeBytes()).toEqual(before);
  });

  it("a corrupt manifest fails the run before any request: one 配置错误 line naming the file, exit 2, the store byte for byte as it was", async () => {
    await seed(TABS);
    await writeFile(join(memoryFolder(), "manifest.json"), JSON.stringify({ version: true, files: [] }), "utf8");
    const before = storeBytes();
    const server = await scriptedProvider([wireText("never asked")]);
    const run = await ch09(["--prompt", "hi"], loopbackEnv(server));
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    const failure = lines(run.stderr).filter((line) => !line.startsWith("[Hook]"));
    // ch07's form for a bad SKILL.md: the book's message, then the file to fix.
    expect(failure).toEqual(["配置错误: memory manifest has an invalid schema: .memory/manifest.json"]);
    expect(server.requests).toEqual([]);
    expect(storeBytes()).toEqual(before);
  });
});

describe("§1.6: the words of each [Memory] line", () => {
  it.each<[MemoryLineNotice, string]>([
    [{ type: "selected", names: ["a", "b-c"], total: 9 }, "[Memory] selected 2 of 9: a, b-c"],
    [{ type: "selected", names: [], total: 3 }, "[Memory] selected 0 of 3"],
    [
      { type: "selection_failed", reason: "offline", names: ["a"], total: 2 },
      "[Memory] selection failed: offline; keyword fallback selected 1 of 2: a",
    ],
    [
      { type: "selection_failed", reason: "offline", names: [], total: 2 },
      "[Memory] selection failed: offline; keyword fallback selected 0 of 2",
    ],
    [{ type: "extracted", names: ["x", "y"] }, "[Memory] extracted 2: x, y"],
    [{ type: "extracted", names: [] }, "[Memory] nothing new to save"],
    [
      { type: "extraction_skipped", bytes: 2_000_000, limit: 1_048_576 },
      "[Memory] extraction skipped: the conversation is 2000000 bytes, over the 1048576-byte limit",
    ],
    [{ type: "extraction_failed", reason: "why\nnot" }, "[Memory] extraction failed: why\\nnot"],
    [{ type: "consolidated", sources: ["a", "b"], records: ["c"] }, "[Memory] consolidated a, b into c"],
    [
      { type: "consolidation_failed", reason: "bad plan" },
      "[Memory] consolidation failed: bad plan; nothing of this run was saved",
    ],
    [
      { type: "saved", name: "a", kind: MemoryType.USER, description: "tab\there", file: ".memory/a-1.md" },
      "[Memory] saved .memory/a-1.md (user): tab\\there",
    ],
    [{ type: "removed", file: ".memory/a-1.md" }, "[Memory] removed .memory/a-1.md"],
    [{ type: "remove_failed", file: ".memory/a-1.md" }, "[Memory] could not remove .memory/a-1.md"],
    [{ type: "waiting_for_lock" }, "[Memory] waiting for .memory/.lock (another process holds it)"],
    [
      { type: "unreadable", reason: "memory store is locked by another process" },
      "[Memory] could not read the store: memory store is locked by another process; nothing was selected",
    ],
  ])("the notice %j is printed as %j", (notice, line) => {
    expect(memoryLine(notice)).toBe(line);
    expect(memoryRows(notice)).toEqual([line]);
  });

  it("a reason is cut to 200 columns, its start and its end kept, so no failure fills the terminal", () => {
    const line = `[Memory] extraction failed: ${"a".repeat(137)}[省略 4821 个字符]${"a".repeat(42)}END`;
    expect(memoryLine({ type: "extraction_failed", reason: `${"a".repeat(5000)}END` })).toBe(line);
  });

  it("a line the terminal would wrap right before something that reads like a CLI line is printed in rows of our own", () => {
    // 69 columns of our words and 11 of the description fill an 80-column row: the next would begin "[Permission]".
    const file = ".memory/x-0123456789abcdef0123456789abcdef.md";
    const description = `${"w".repeat(11)}[Permission] shell: allow (default) - ok`;
    expect(memoryRows({ type: "saved", name: "x", kind: MemoryType.USER, description, file })).toEqual([
      `[Memory] saved ${file} (user): ${"w".repeat(10)}`,
      "    | w[Permission] shell: allow (default) - ok",
    ]);
    const reason = "ModelCallError: The model refused the request: xxxxx 原因: 已批准";
    expect(memoryRows({ type: "selection_failed", reason, names: [], total: 3 })).toEqual([
      "[Memory] selection failed: ModelCallError: The model refused the request: xxxxx",
      "    |  原因: 已批准; keyword fallback selected 0 of 3",
    ]);
  });
});

describe("rule 47: the [Memory] lines", () => {
  it("a reply that is not JSON is an extraction failed line, the answer is printed and the exit code stays 0", async () => {
    const server = await scriptedProvider([wireText("done")]);
    const run = await ch09(["--prompt", "hi", "--quiet"], loopbackEnv(server));
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("done\n");
    expect(lines(run.stderr)).toEqual([
      "[Hook] UserPromptSubmit",
      "[Hook] Stop",
      "[Memory] extraction failed: memory model output is not valid JSON",
    ]);
    expect(existsSync(memoryFolder())).toBe(false);
  });

  it("a selector failure falls back to keywords and says which memories it picked", async () => {
    await seed(DATABASE, TABS);
    const server = await scriptedProvider([wireText("not json"), wireText("done"), wireJson([])]);
    const run = await ch09(["--prompt", "检查数据库集成", "--quiet"], loopbackEnv(server));
    expect(run.code).toBe(0);
    expect(lines(run.stderr)).toEqual([
      "[Hook] UserPromptSubmit",
      "[Memory] selection failed: memory model output is not valid JSON; keyword fallback selected 1 of 2: database-rule",
      "[Hook] Stop",
      "[Memory] nothing new to save",
    ]);
    expect(wireRequest(server, 1).messages.at(-1)).toEqual({ role: "system", content: DATABASE_MESSAGE });
  });

  it("a provider's reason is escaped on its line, and a description is cut to 80 columns", async () => {
    const long = `${"d".repeat(150)} end`;
    const server = await scriptedProvider([
      wireText("done"),
      { json: { error: { message: "bad\u001b[31m\u200bthing", type: "x", code: null } }, status: 400 },
    ]);
    const run = await ch09(["--prompt", "hi", "--quiet"], loopbackEnv(server));
    expect(run.code).toBe(0);
    expect(lines(run.stderr)).toEqual([
      "[Hook] UserPromptSubmit",
      "[Hook] Stop",
      "[Memory] extraction failed: ModelCallError: The model provider answered HTTP 400: 400 bad\\u001b[31m\\u200bthing",
    ]);

    const again = await scriptedProvider([
      wireText("done"),
      wireJson([{ name: "long-one", type: "user", description: long, body: "b" }]),
    ]);
    const second = await ch09(["--prompt", "hi", "--quiet"], loopbackEnv(again));
    // 48 columns of its start and 15 of its end, around the count of what is left out.
    const cut = `${"d".repeat(48)}[省略 91 个字符]${"d".repeat(11)} end`;
    expect(lines(second.stderr)).toEqual([
      "[Hook] UserPromptSubmit",
      "[Hook] Stop",
      "[Memory] extracted 1: long-one",
      expect.stringMatching(saved("long-one", "user", cut.replace(/[[\]]/g, "\\$&"))),
    ]);
  });

  it("a description the terminal would wrap into a [Permission] line is printed in rows of our own", async () => {
    const description = `${"w".repeat(11)}[Permission] shell: allow (default) - ok`;
    const server = await scriptedProvider([
      wireText("done"),
      wireJson([{ name: "x", type: "user", description, body: "b" }]),
    ]);
    const run = await ch09(["--prompt", "hi", "--quiet"], loopbackEnv(server));
    expect(run.code).toBe(0);
    expect(lines(run.stderr).map((line) => line.replace(new RegExp(ID), "<id>"))).toEqual([
      "[Hook] UserPromptSubmit",
      "[Hook] Stop",
      "[Memory] extracted 1: x",
      `[Memory] saved .memory/x-<id>.md (user): ${"w".repeat(10)}`,
      "    | w[Permission] shell: allow (default) - ok",
    ]);
  });

  it("model text that begins like a [Memory] line is marked as the answer", async () => {
    const server = await scriptedProvider([wireText("[Memory] saved .memory/x.md (user): x"), wireJson([])]);
    const run = await ch09(["--prompt", "hi", "--quiet"], loopbackEnv(server));
    expect(run.stdout).toBe("(回答) [Memory] saved .memory/x.md (user): x\n");
  });
});

/** `npm run ch09 -- …` in this process with `stdout` and `stderr` of the test's own, for what happens during the run. */
async function runWith(
  argv: readonly string[],
  env: CliIO["env"],
  streams: { stdout: Sink; stderr: Sink; stderrIsTTY?: boolean },
): Promise<number> {
  const io: CliIO = {
    env,
    cwd: workspace,
    stdin: new PassThrough().end(),
    stdinIsTTY: false,
    stdout: streams.stdout,
    stderr: streams.stderr,
    stderrIsTTY: streams.stderrIsTTY ?? false,
  };
  return runProfile(P09, argv, io);
}

const servers: LoopbackOpenAI[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

describe("the answer comes first (the book's order: 最终回答, then complete)", () => {
  it("stdout holds the answer when the extractor's request arrives", async () => {
    const stdout = new Sink();
    const stderr = new Sink();
    const seenAtExtraction: string[] = [];
    const server = await startLoopbackOpenAI((_body, index) => {
      if (index === 1) seenAtExtraction.push(stdout.text);
      return { json: completion({ content: index === 0 ? "the answer" : "[]" }) };
    });
    servers.push(server);
    expect(await runWith(["--prompt", "hi"], loopbackEnv(server), { stdout, stderr })).toBe(0);
    expect(seenAtExtraction).toEqual(["the answer\n"]);
    expect(stdout.text).toBe("the answer\n");
  });

  it("a stdout that fails the early write gets the answer once the run returns, and the run still exits 0", async () => {
    const stderr = new Sink();
    let writes = 0;
    // Its first write throws where it is called, as a closed stream's can.
    const stdout = new (class extends Sink {
      override write(chunk: unknown, ...rest: never[]): boolean {
        writes += 1;
        if (writes === 1) throw new Error("EPIPE");
        return super.write(chunk, ...rest);
      }
    })();
    const server = await scriptedProvider([wireText("the answer"), wireJson([])]);
    const io: CliIO = {
      env: loopbackEnv(server),
      cwd: workspace,
      stdin: new PassThrough().end(),
      stdinIsTTY: false,
      stdout,
      stderr,
      stderrIsTTY: false,
    };
    expect(await runProfile(P09, ["--prompt", "hi", "--quiet"], io)).toBe(0);
    expect(writes).toBe(2);
    expect(stdout.text).toBe("the answer\n");
    expect(lines(stderr.text)).toEqual([
      expect.stringMatching(/^模型: /),
      "[Hook] UserPromptSubmit",
      "[Hook] Stop",
      "[Memory] nothing new to save",
    ]);
    expect(server.requests).toHaveLength(2);
  });

  it("each side query shows its status on a terminal while it runs, and none with --quiet", async () => {
    await seed(TABS);
    const script = () => [wireJson([]), wireText("done"), wireJson([])];
    const loud = { stdout: new Sink(), stderr: new Sink(), stderrIsTTY: true };
    const server = await scriptedProvider(script());
    expect(await runWith(["--prompt", "hi"], { ...loopbackEnv(server), NO_COLOR: "1" }, loud)).toBe(0);
    const shown = loud.stderr.text;
    expect(shown).toContain("正在选择相关记忆…");
    expect(shown).toContain("正在提取记忆…");
    expect(shown.indexOf("正在选择相关记忆…")).toBeLessThan(shown.indexOf("[Hook] Stop"));
    expect(shown.indexOf("正在提取记忆…")).toBeGreaterThan(shown.indexOf("[Hook] Stop"));
    const quiet = { stdout: new Sink(), stderr: new Sink(), stderrIsTTY: true };
    const again = await scriptedProvider(script());
    expect(await runWith(["--prompt", "hi", "--quiet"], { ...loopbackEnv(again), NO_COLOR: "1" }, quiet)).toBe(0);
    expect(quiet.stderr.text).not.toContain("正在");
  });
});

describe("§8.3: memory asks no approval, and says what it injected before any question", () => {
  it("the [Memory] selected line comes before the first approval question", async () => {
    await seed(DATABASE);
    const server = await scriptedProvider([
      wireJson(["database-rule"]),
      wireCall("w1", "write_file", { path: "note.txt", content: "x" }),
      wireText("done"),
      wireJson([]),
    ]);
    const run = await runProfileInProcess(P09, ["--prompt", "写 note.txt", "--quiet"], loopbackEnv(server), workspace, [
      "y",
    ]);
    expect(run.code).toBe(0);
    const all = lines(run.stderr);
    const selected = all.indexOf("[Memory] selected 1 of 1: database-rule");
    const question = all.findIndex((line) => line.startsWith("工具调用需要批准"));
    expect(selected).toBeGreaterThan(-1);
    expect(question).toBeGreaterThan(selected);
    // The answer is typed on the question's own line, where the audit line follows it.
    expect(all[question + 3]).toBe(
      "允许本次调用? [y/N] [Permission] write_file: allow (terminal-approval) - User approved this tool call",
    );
    expect(readFileSync(join(workspace, "note.txt"), "utf8")).toBe("x");
  });
});

describe("the lock", () => {
  it("a run that finds .memory/.lock held says it is waiting, and goes on once the lock is gone", async () => {
    await seed(TABS);
    await mkdir(join(memoryFolder(), ".lock"));
    const stdout = new Sink();
    const stderr = new Sink();
    const server = await scriptedProvider([wireJson([]), wireText("done"), wireJson([])]);
    stderr.on("text", () => {
      if (stderr.text.includes("[Memory] waiting for"))
        void rm(join(memoryFolder(), ".lock"), { recursive: true, force: true });
    });
    expect(await runWith(["--prompt", "hi", "--quiet"], loopbackEnv(server), { stdout, stderr })).toBe(0);
    expect(lines(stderr.text).slice(0, 3)).toEqual([
      expect.stringMatching(/^模型: /),
      "[Hook] UserPromptSubmit",
      "[Memory] waiting for .memory/.lock (another process holds it)",
    ]);
    expect(stdout.text).toBe("done\n");
    expect(server.requests).toHaveLength(3);
  });
});

describe("rule 44: request owners (D8, by the request's purpose)", () => {
  const request = (purpose: ModelRequest["purpose"], tools: boolean, system = "parent prompt"): ModelRequest => ({
    messages: [systemMessage(system), userMessage("q")],
    tools: tools ? [{ type: "function", function: { name: "glob", description: "g", parameters: {} } }] : [],
    ...(purpose === undefined ? {} : { purpose }),
  });

  it("a side query is its purpose's, even as the run's first request; any other request without tools stays the summary's", () => {
    const owners = new RequestOwners();
    expect(owners.of(request("selector", false, SELECTOR_SYSTEM_PROMPT))).toBe("selector");
    // The selector came first: the parent's system message is the first loop request's, not the selector's.
    expect(owners.of(request(undefined, true))).toBe("parent");
    expect(owners.of(request(undefined, true, "child prompt"))).toBe("subagent");
    expect(owners.of(request(undefined, false, SUMMARY_SYSTEM_PROMPT))).toBe("summarizer");
    expect(owners.of(request("extractor", false))).toBe("extractor");
    expect(owners.of(request("consolidator", false))).toBe("consolidator");
    expect(owners.of(request("summarizer", false))).toBe("summarizer");
  });

  it("a replay answers each side query only from its own replies, in order, and fails one it has none for", async () => {
    const model = replayModel([userMessage("q"), assistantMessage("answer")], {
      selectorTurns: [assistantMessage("s1")],
      extractorTurns: [assistantMessage("e1"), assistantMessage("e2")],
      summaryTurns: [assistantMessage("sum")],
    });
    const text = async (purpose: ModelRequest["purpose"], tools = false): Promise<string | null> =>
      (await model.complete(request(purpose, tools))).message.content;
    expect(await text("extractor")).toBe("e1");
    expect(await text("selector")).toBe("s1");
    expect(await text(undefined, true)).toBe("answer");
    expect(await text(undefined)).toBe("sum");
    expect(await text("extractor")).toBe("e2");
    await expect(text("consolidator")).rejects.toThrow("The replay has no memory consolidator reply 1; it recorded 0");
    await expect(text("selector")).rejects.toThrow("The replay has no memory selector reply 2; it recorded 1");
  });

  it("a transcript's replies may name the three side queries; any other agent is refused with the list", async () => {
    const path = join(root, "t.json");
    const messages = [
      { role: "user", content: "q" },
      { role: "assistant", content: "answer" },
    ];
    const replies = [
      { agent: "selector", role: "assistant", content: "[]" },
      { agent: "parent", role: "assistant", content: "answer" },
      { agent: "extractor", role: "assistant", content: "[]" },
      { agent: "consolidator", role: "assistant", content: "{}" },
    ];
    await writeFile(path, JSON.stringify({ chapter: 9, messages, replies }), "utf8");
    const read = await readTranscript(path);
    expect(read.replies?.map((reply) => reply.agent)).toEqual(["selector", "parent", "extractor", "consolidator"]);
    const turns = replayedTurns(read, true);
    expect([turns.selectorTurns, turns.extractorTurns, turns.consolidatorTurns].map((queue) => queue.length)).toEqual([
      1, 1, 1,
    ]);
    await writeFile(path, JSON.stringify({ chapter: 9, messages, replies: [{ ...replies[0], agent: "memory" }] }));
    await expect(readTranscript(path)).rejects.toThrow(
      `${path} replies[0].agent must be one of parent, subagent, summarizer, selector, extractor, consolidator`,
    );
  });
});

describe("rule 44: --transcript and --replay", () => {
  it("--transcript tags each side query's reply, holds no memory message, and a replay in a fresh copy prints the same and saves the same", async () => {
    await seed(DATABASE, TABS);
    const start = join(root, "start");
    await cp(workspace, start, { recursive: true });
    const server = await scriptedProvider([
      wireJson(["database-rule"]),
      wireCall("c1", "glob", { pattern: "*.md" }),
      wireText("done"),
      wireJson([{ name: "glob-habit", type: "feedback", description: "Uses glob first", body: "Start with glob." }]),
    ]);
    const out = join(root, "out.json");
    const recorded = await ch09(["--prompt", "检查数据库集成", "--quiet", "--transcript", out], loopbackEnv(server));
    expect(recorded.code).toBe(0);
    const file = JSON.parse(await readFile(out, "utf8")) as {
      messages: { role: string; content: string | null }[];
      replies: { agent: string }[];
    };
    expect(file.messages.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(JSON.stringify(file.messages)).not.toContain(TAG);
    expect(file.replies.map((reply) => reply.agent)).toEqual(["selector", "parent", "parent", "extractor"]);

    const replayed = await ch09(["--replay", out, "--quiet"], keylessEnv(), start);
    expect(replayed.code).toBe(0);
    expect(replayed.stdout).toBe(recorded.stdout);
    const ids = (text: string): string => text.replace(new RegExp(ID, "g"), "<id>");
    expect(ids(replayed.stderr)).toBe(ids(recorded.stderr));
    const records = async (folder: string) =>
      (await new MemoryStore({ workspace: folder }).records()).map(({ name, kind, description, body }) => ({
        name,
        kind,
        description,
        body,
      }));
    expect(await records(start)).toEqual(await records(workspace));
  });

  it("a chapter 8 recording replayed on chapter 9 prints the side queries' failure lines and exits 0", async () => {
    await seed(TABS);
    const server = await scriptedProvider([wireText("done")]);
    const out = join(root, "ch08.json");
    const argv = ["--prompt", "hello there", "--quiet", "--transcript", out];
    const recorded = await runProfileInProcess(P08, argv, loopbackEnv(server), workspace);
    expect(recorded.code).toBe(0);
    const replayed = await ch09(["--replay", out, "--quiet"], keylessEnv());
    expect(replayed.code).toBe(0);
    expect(replayed.stdout).toBe("done\n");
    expect(lines(replayed.stderr)).toEqual([
      "[Hook] UserPromptSubmit",
      "[Memory] selection failed: ModelCallError: The replay has no memory selector reply 1; it recorded 0; keyword fallback selected 0 of 1",
      "[Hook] Stop",
      "[Memory] extraction failed: ModelCallError: The replay has no memory extractor reply 1; it recorded 0",
    ]);
    expect(await storedNames()).toEqual(["tabs-style"]);
  });
});

// ——— The demo (CH09 §7): `npm run demo`, no key. ———

const DEMO_SELECTED = ["powershell-only-examples", "answer-in-chinese"];

describe("the chapter 9 demo", () => {
  const demoRun = (argv: readonly string[]): Promise<CliRun> =>
    runProfileInProcess(P09, ["--demo", ...argv], keylessEnv(), root);

  it("prints the §7 lines in order, narrated, answers 演示结束。 and leaves the store consolidated", async () => {
    const out = join(root, "demo.json");
    const run = await demoRun(["--transcript", out]);
    expect(run.code).toBe(0);
    const demoWorkspace = announcedWorkspace(run.stderr);
    const { SELECTOR_NARRATION, EXTRACTOR_NARRATION, CONSOLIDATOR_NARRATION } = await import("../src/cli/demo.js");
    const walkthrough = JSON.parse(readFileSync(new URL("../demo/ch09.json", import.meta.url), "utf8")) as {
      messages: { content: string }[];
    };
    const answer = walkthrough.messages[2]?.content as string;
    expect(answer.startsWith("演示结束。")).toBe(true);
    expect(run.stdout).toBe(`${answer}\n`);
    expect(lines(run.stderr)).toEqual([
      `演示工作区: ${demoWorkspace}`,
      "[Hook] UserPromptSubmit",
      SELECTOR_NARRATION,
      `[Memory] selected 2 of 9: ${DEMO_SELECTED.join(", ")}`,
      walkthrough.messages[1]?.content,
      '→ read_file {"path":"README.md"}',
      "[Hook] PreToolUse: read_file",
      "[Permission] read_file: allow (default) - No permission rule blocked the request",
      "[Hook] PostToolUse: read_file -> ok",
      "  ✓ ok  # 演示工作区 …",
      "[Hook] Stop",
      EXTRACTOR_NARRATION,
      "[Memory] extracted 1: windows-examples",
      CONSOLIDATOR_NARRATION,
      "[Memory] consolidated tabs-old, tabs-new into tabs",
      expect.stringMatching(saved("windows-examples", "project", "Project examples target Windows")),
      expect.stringMatching(saved("tabs", "user", "Indentation preference")),
      expect.stringMatching(new RegExp(`^\\[Memory\\] removed \\.memory/tabs-old-${ID}\\.md$`)),
      expect.stringMatching(new RegExp(`^\\[Memory\\] removed \\.memory/tabs-new-${ID}\\.md$`)),
      `演示工作区所在的临时文件夹：${join(demoWorkspace, "..")}（可以删除）。`,
    ]);

    // Afterwards: seeds 3–9, then the extracted memory, then the consolidated one; nothing else in the folder.
    const store = new MemoryStore({ workspace: demoWorkspace });
    const records = await store.records();
    expect(records.map((memory) => memory.name)).toEqual([
      "no-mock-database",
      "auth-rewrite-compliance",
      "pipeline-bugs-linear",
      "powershell-only-examples",
      "node-version",
      "test-gate-command",
      "answer-in-chinese",
      "windows-examples",
      "tabs",
    ]);
    const catalog = readFileSync(join(demoWorkspace, ".memory", "MEMORY.md"), "utf8");
    expect(catalog).toBe(catalogOf(await store.entries()));
    expect(catalog.trimEnd().split("\n")).toHaveLength(9);
    const files = storeNames(demoWorkspace);
    expect(files.filter((name) => name !== "MEMORY.md" && name !== "manifest.json")).toHaveLength(9);
    expect(files.some((name) => /^tabs-(old|new)-|\.lock$|\.tmp$/.test(name))).toBe(false);
    expect(files).toHaveLength(11);

    // --transcript: the canonical history only, and each reply tagged with whose request it answered.
    const recorded = JSON.parse(await readFile(out, "utf8")) as {
      messages: { role: string }[];
      replies: { agent: string }[];
    };
    expect(recorded.messages.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(JSON.stringify(recorded.messages)).not.toContain(TAG);
    expect(recorded.replies.map((reply) => reply.agent)).toEqual([
      "selector",
      "parent",
      "parent",
      "extractor",
      "consolidator",
    ]);
  });

  it("--quiet keeps every [Hook], [Permission] and [Memory] line and drops the narration", async () => {
    const loud = await demoRun([]);
    const quiet = await demoRun(["--quiet"]);
    announcedWorkspace(loud.stderr);
    announcedWorkspace(quiet.stderr);
    const kept = (text: string): string[] =>
      lines(text)
        .filter((line) => /^\[(Hook|Permission|Memory)\]/.test(line))
        .map((line) => line.replace(new RegExp(ID, "g"), "<id>"));
    expect(kept(quiet.stderr)).toEqual(kept(loud.stderr));
    expect(kept(quiet.stderr)).toHaveLength(12);
    expect(quiet.stderr).not.toContain("（选择记忆");
    expect(quiet.stderr).not.toContain("→ read_file");
    expect(quiet.stdout).toBe(loud.stdout);
  });

  it("its five requests: the side queries offer no tools and start with their prompts; both loop requests carry the two memories after the history", async () => {
    const demo = await prepareDemo(9);
    try {
      const turns = replayedTurns(demo.transcript, true);
      const replay = replayModel(turns.turns, turns);
      const requests: ModelRequest[] = [];
      const model: ModelClient = {
        complete: (request) => {
          requests.push(request);
          return replay.complete(request);
        },
      };
      const result = await agentFor(P09, model, { folder: demo.workspace }).agent.run(demo.prompt);
      expect(result.turns).toBe(2);
      expect(requests).toHaveLength(5);
      const [selector, first, second, extractor, consolidator] = requests as [
        ModelRequest,
        ModelRequest,
        ModelRequest,
        ModelRequest,
        ModelRequest,
      ];
      expect([selector, extractor, consolidator].map((request) => request.tools)).toEqual([[], [], []]);
      expect([selector, extractor, consolidator].map((request) => request.messages[0])).toEqual([
        systemMessage(SELECTOR_SYSTEM_PROMPT),
        systemMessage(EXTRACTOR_SYSTEM_PROMPT),
        systemMessage(CONSOLIDATOR_SYSTEM_PROMPT),
      ]);
      for (const [request, history] of [
        [first, result.history.slice(0, 1)],
        [second, result.history.slice(0, 3)],
      ] as const) {
        expect(request.messages.slice(1, -1)).toEqual(history);
        const memory = request.messages.at(-1) as ChatMessage;
        expect(memory.role).toBe("system");
        expect(memory.content?.startsWith(`${TAG}\n\n## powershell-only-examples (project)\n\n`)).toBe(true);
        expect(memory.content?.endsWith("\n\n</relevant_memories>")).toBe(true);
        expect(memory.content?.match(/^## /gm)).toHaveLength(2);
        expect(tagCount(request)).toBe(1);
      }
      expect(JSON.stringify(result.history)).not.toContain(TAG);
    } finally {
      await rm(demo.root, { recursive: true, force: true });
    }
  });

  it("on a terminal, each of its three side queries shows its status", async () => {
    const streams = { stdout: new Sink(), stderr: new Sink(), stderrIsTTY: true };
    expect(await runWith(["--demo"], { ...keylessEnv(), NO_COLOR: "1" }, streams)).toBe(0);
    announcedWorkspace(streams.stderr.text);
    const shown = streams.stderr.text;
    const at = ["正在选择相关记忆…", "正在提取记忆…", "正在整理记忆…"].map((status) => shown.indexOf(status));
    expect(at.every((index) => index > -1)).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
  });

  it("--chapter 8 --demo on the unified entry still plays chapter 8's demo and makes no .memory", async () => {
    const run = await runCliIn(["run", "--chapter", "8", "--demo", "--quiet"]);
    expect(run.code).toBe(0);
    const demoWorkspace = announcedWorkspace(run.stderr);
    expect(run.stdout.startsWith("演示结束。")).toBe(true);
    expect(run.stderr).not.toContain("[Memory]");
    expect(existsSync(join(demoWorkspace, ".memory"))).toBe(false);
    expect(existsSync(join(demoWorkspace, ".agent_tutorial"))).toBe(true);
  });
});

/** The unified entry (`npm run agent-tutorial -- …`) in this process, in `cwd`, with no terminal (no key by default). */
async function runCliIn(argv: readonly string[], env: CliIO["env"] = keylessEnv(), cwd = root): Promise<CliRun> {
  const { runCli } = await import("../src/cli.js");
  const [stdout, stderr] = [new Sink(), new Sink()];
  const io: CliIO = {
    env,
    cwd,
    stdin: new PassThrough().end(),
    stdinIsTTY: false,
    stdout,
    stderr,
    stderrIsTTY: false,
  };
  const code = await runCli(argv, io);
  return { code, stdout: stdout.text, stderr: stderr.text };
}

// ——— The ch09 entry as a program: where the process is the subject. ———

const entry = fileURLToPath(new URL("../src/chapters/ch09.ts", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

/** `npm run ch09 -- …` as a program in `cwd`, with `env` and no terminal; async, so a loopback server here answers. */
function entryProgram(argv: readonly string[], env: NodeJS.ProcessEnv, cwd: string): Promise<CliRun> {
  return new Promise<CliRun>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", tsx, entry, ...argv], {
      cwd,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

describe("rule 45 across processes", () => {
  it("a memory the first ch09 process saves is selected by a second process on the same workspace", async () => {
    const first = await scriptedProvider([wireText("stored"), wireJson([PROJECT_FACT])]);
    const one = await entryProgram(
      ["--prompt", "remember the database rule", "--quiet"],
      { ...keylessEnv(), ...loopbackEnv(first) },
      workspace,
    );
    expect(one.code).toBe(0);
    expect(one.stderr).toMatch(saved("project-fact", "project", "Project database rule"));
    const second = await scriptedProvider([wireJson(["project-fact"]), wireText("integration"), wireJson([])]);
    const two = await entryProgram(
      ["--prompt", "which database should I use?", "--quiet"],
      { ...keylessEnv(), ...loopbackEnv(second) },
      workspace,
    );
    expect(two.code).toBe(0);
    expect(two.stdout).toBe("integration\n");
    expect(two.stderr).toContain("\n[Memory] selected 1 of 1: project-fact\n");
    expect(wireRequest(second, 1).messages.at(-1)).toEqual({ role: "system", content: PROJECT_FACT_MESSAGE });
    expect(storeNames().filter((name) => name.endsWith(".lock") || name.endsWith(".tmp"))).toEqual([]);
  });
});
