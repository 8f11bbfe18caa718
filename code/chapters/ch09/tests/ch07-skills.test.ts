import { readdirSync, readFileSync } from "node:fs";
import { cp, mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it, test } from "vitest";
import { buildAgent } from "../src/bootstrap.js";
import { type CliIO } from "../src/cli.js";
import { HookRegistry, HookResult } from "../src/core/hooks.js";
import type { AgentRunner } from "../src/core/loop.js";
import { assistantMessage, validateToolPairing, type ChatMessage } from "../src/core/messages.js";
import type { ModelReply } from "../src/core/model.js";
import {
  PermissionDecision,
  type ApprovalProvider,
  type AuditSink,
  type PermissionRequest,
} from "../src/core/permissions.js";
import { P06, P07, profileForChapter } from "../src/core/profiles.js";
import { SkillManifestError } from "../src/features/skills.js";
import { DEFAULT_SUBAGENT_SYSTEM_PROMPT } from "../src/features/subagents.js";
import { runCliWithoutTerminal, type CliRun } from "./support/cli-run.js";
import { FakeCommandRunner } from "./support/fakes.js";
import { type LoopbackOpenAI } from "./support/loopback-openai.js";
import { call, ScriptedModel, textTurn, toolTurn } from "./support/scripted-model.js";
import {
  announcedWorkspace,
  keylessEnv,
  loopbackEnv,
  runProfileInProcess,
  scriptedProvider,
  wireCall,
  wireText,
} from "./support/profile-run.js";

// The chapter 7 gate: Skills through the real composition root (buildAgent(P07)), loop, registry, policy, hooks and a
// temporary disk, with one scripted model that parent and child share in call order, as the book's tests do; then
// the CLI (runProfile(P07) in this process, against a loopback provider) and the demo. The first describe holds the
// book's three tests as it writes them; the rest prove CH07's rules one by one.

const PARENT_TOOLS = ["shell", "read_file", "write_file", "edit_file", "glob", "todo_write", "task", "load_skill"];
const CHILD_TOOLS = ["shell", "read_file", "write_file", "edit_file", "glob", "todo_write", "load_skill"];
const P06_TOOLS = PARENT_TOOLS.slice(0, 7);

const CHAPTER_1_LINE = "You are a coding agent. Use tools when needed, inspect their results, and answer accurately.";
const TODO_LINE =
  "For complex tasks, call todo_write with the complete task snapshot and update it when the plan changes.";
const SKILLS_HEADER =
  "Available workspace Skills are listed below. Load one with load_skill only when its instructions are relevant:";
const NO_SKILLS = "(No workspace Skills are currently available.)";
/** The book's first system message for the one-skill python-style workspace, line by line. */
const BOOK_PROMPT = [
  CHAPTER_1_LINE,
  TODO_LINE,
  "",
  SKILLS_HEADER,
  "- **python-style**: Python project conventions",
].join("\n");
const P06_PROMPT = `${CHAPTER_1_LINE}\n${TODO_LINE}`;
const PYTHON_BODY = "# Python Style\n\nUse pathlib for filesystem paths.\n";
const ALLOW_DEFAULT = new PermissionDecision("allow", "No permission rule blocked the request", "default");

/** The book's approver for load_skill: reaching it at all is the failure. Counts, so "never called" is proven. */
class UnexpectedApproval implements ApprovalProvider {
  calls = 0;
  decide(_request: PermissionRequest): Promise<PermissionDecision> {
    this.calls += 1;
    throw new Error("load_skill should not request approval");
  }
}

/** An approver that keeps every request and refuses it: what a Skill might have pre-approved shows up here. */
class RefusingApproval implements ApprovalProvider {
  readonly requests: PermissionRequest[] = [];
  decide(request: PermissionRequest): Promise<PermissionDecision> {
    this.requests.push(request);
    return Promise.resolve(new PermissionDecision("deny", "Refused in the test", "user"));
  }
}

/** The book's audit: `tools` in decision order, and each record with its decision. */
class RecordingAudit implements AuditSink {
  readonly tools: string[] = [];
  readonly records: { tool: string; decision: PermissionDecision }[] = [];
  record(request: PermissionRequest, decision: PermissionDecision): void {
    this.tools.push(request.toolName);
    this.records.push({ tool: request.toolName, decision });
  }
}

/** Hooks that write down every event (Pre/Post with the tool and call id) and every Stop's history, parent or child. */
class HookLog {
  readonly registry = new HookRegistry();
  readonly events: string[] = [];
  readonly stopHistories: (readonly ChatMessage[])[] = [];
  constructor() {
    this.registry.register("UserPromptSubmit", () => this.#saw("UserPromptSubmit"));
    this.registry.register("PreToolUse", (context) =>
      this.#saw(`PreToolUse ${context.prepared?.definition.name ?? "?"} ${context.prepared?.call.id ?? "?"}`),
    );
    this.registry.register("PostToolUse", (context) =>
      this.#saw(
        `PostToolUse ${context.prepared?.definition.name ?? "?"} ${context.prepared?.call.id ?? "?"} ` +
          (context.result?.isError === false ? "ok" : "error"),
      ),
    );
    this.registry.register("Stop", (context) => {
      this.stopHistories.push(context.history ?? []);
      return this.#saw("Stop");
    });
  }
  #saw(event: string): HookResult {
    this.events.push(event);
    return new HookResult();
  }
}

let root: string;
let workspace: string;
let shell: FakeCommandRunner;

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch07-skills-")));
  workspace = join(root, "workspace");
  await mkdir(workspace);
  await writeFile(join(workspace, "README.md"), "# Demo\n", "utf8");
  shell = new FakeCommandRunner();
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** The book's helper: `skills/<name>/SKILL.md` with the default description `A test skill.`; `extra` adds keys. */
async function writeSkill(
  folder: string,
  name: string,
  options: { description?: string; body?: string; extra?: string } = {},
): Promise<string> {
  const directory = join(folder, "skills", name);
  await mkdir(directory, { recursive: true });
  const path = join(directory, "SKILL.md");
  const frontmatter = `---\nname: ${name}\ndescription: ${options.description ?? "A test skill."}\n${options.extra ?? ""}---\n`;
  await writeFile(path, `${frontmatter}${options.body ?? ""}`, "utf8");
  return path;
}

/** The book's one-skill workspace: exactly the SKILL.md its article prints. */
const writePythonStyle = (): Promise<string> =>
  writeSkill(workspace, "python-style", { description: "Python project conventions", body: PYTHON_BODY });

interface Session {
  readonly agent: AgentRunner;
  readonly model: ScriptedModel;
  readonly audit: RecordingAudit;
  readonly hooks: HookLog;
}

/** The chapter 7 agent as buildAgent builds it, on the test's disk and shell, with one model for parent and child. */
function ch07Agent(replies: readonly ModelReply[], approval: ApprovalProvider = new UnexpectedApproval()): Session {
  const model = new ScriptedModel(replies);
  const audit = new RecordingAudit();
  const hooks = new HookLog();
  const agent = buildAgent(P07, {
    model,
    workspace,
    commandRunner: shell,
    approvalProvider: approval,
    auditSink: audit,
    hooks: hooks.registry,
  });
  return { agent, model, audit, hooks };
}

const toolNames = (model: ScriptedModel, index: number): string[] | undefined =>
  model.requests[index]?.tools.map((tool) => tool.function.name);
const systemOf = (model: ScriptedModel, index: number): string | null | undefined =>
  model.requests[index]?.messages[0]?.content;

describe("the book's three tests", () => {
  test("an empty workspace says in the first system message that no Skills are available", async () => {
    const model = new ScriptedModel([textTurn("done")]);
    const agent = buildAgent(P07, {
      model,
      workspace,
      commandRunner: shell,
      approvalProvider: new UnexpectedApproval(),
      auditSink: new RecordingAudit(),
    });
    await agent.run("hello");

    expect(model.requests[0]?.messages[0]?.content).toContain("(No workspace Skills are currently available.)");
    model.assertExhausted();
  });

  test("P07 puts the catalog in the system prompt and the body only in the paired load_skill result, unapproved but audited", async () => {
    await writeSkill(workspace, "python-style", { description: "Python project conventions", body: PYTHON_BODY });
    const model = new ScriptedModel([
      toolTurn(call("skill-1", "load_skill", { name: "python-style" })),
      textTurn("loaded"),
    ]);
    const approval = new UnexpectedApproval();
    const audit = new RecordingAudit();
    const agent = buildAgent(P07, {
      model,
      workspace,
      commandRunner: shell,
      approvalProvider: approval,
      auditSink: audit,
    });
    const result = await agent.run("follow the python conventions");

    const initialPrompt = model.requests[0]?.messages[0]?.content;
    expect(initialPrompt).toBe(
      "You are a coding agent. Use tools when needed, inspect their results, and answer accurately.\n" +
        "For complex tasks, call todo_write with the complete task snapshot and update it when the plan changes.\n" +
        "\n" +
        "Available workspace Skills are listed below. Load one with load_skill only when its instructions are relevant:\n" +
        "- **python-style**: Python project conventions",
    );
    expect(initialPrompt).toContain("python-style");
    expect(initialPrompt).toContain("Python project conventions");
    expect(initialPrompt).not.toContain("Use pathlib");
    expect(result.history[2]).toEqual({
      role: "tool",
      content: "# Python Style\n\nUse pathlib for filesystem paths.\n",
      toolCallId: "skill-1",
    });
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
    expect(approval.calls).toBe(0);
    expect(audit.tools).toEqual(["load_skill"]);
    model.assertExhausted();
  });

  test("a child can load a Skill but gets no catalog and no task", async () => {
    await writeSkill(workspace, "python-style", { description: "Python project conventions", body: PYTHON_BODY });
    const model = new ScriptedModel([
      toolTurn(call("parent-task", "task", { description: "load python-style and apply it" })),
      toolTurn(call("child-skill", "load_skill", { name: "python-style" })),
      textTurn("child applied it"),
      textTurn("parent final"),
    ]);
    const agent = buildAgent(P07, {
      model,
      workspace,
      commandRunner: shell,
      approvalProvider: new UnexpectedApproval(),
      auditSink: new RecordingAudit(),
    });
    const result = await agent.run("delegate");

    expect(model.requests[1]?.tools.map((tool) => tool.function.name)).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
      "todo_write",
      "load_skill",
    ]);
    expect(model.requests[1]?.messages[0]?.content).not.toContain("python-style");
    expect(result.finalText).toBe("parent final");
    model.assertExhausted();
  });
});

describe("rule 1: the profile and the composition root", () => {
  it("P07 is P06 plus skills, frozen, and profileForChapter(7) is P07", () => {
    expect(Object.isFrozen(P07)).toBe(true);
    expect(P07.chapter).toBe(7);
    expect([...P07.capabilities]).toEqual([...P06.capabilities, "skills"]);
    expect(P06.capabilities.has("skills")).toBe(false);
    expect(profileForChapter(7)).toBe(P07);
  });

  it("buildAgent(P06) on this snapshot scans nothing: a malformed skills/ that P07 refuses is ignored, and no load_skill is offered", async () => {
    await mkdir(join(workspace, "skills", "demo"), { recursive: true });
    await writeFile(join(workspace, "skills", "demo", "SKILL.md"), "name: demo\n", "utf8");
    expect(() => ch07Agent([])).toThrow(
      new SkillManifestError("Skill manifest must begin with YAML frontmatter: skills/demo/SKILL.md"),
    );

    const model = new ScriptedModel([toolTurn(call("skill-1", "load_skill", { name: "demo" })), textTurn("done")]);
    const agent = buildAgent(P06, {
      model,
      workspace,
      commandRunner: shell,
      approvalProvider: new UnexpectedApproval(),
      auditSink: new RecordingAudit(),
    });
    const result = await agent.run("go");
    expect(toolNames(model, 0)).toEqual(P06_TOOLS);
    expect(systemOf(model, 0)).toBe(P06_PROMPT);
    expect(result.history[2]).toEqual({
      role: "tool",
      content: "Error [unknown_tool]: Unknown tool: load_skill",
      toolCallId: "skill-1",
    });
    model.assertExhausted();
  });
});

describe("rule 2: the parent's eight tools", () => {
  it("every parent request offers the eight tools in order, before and after a load and a delegation", async () => {
    await writePythonStyle();
    const { agent, model } = ch07Agent([
      toolTurn(call("skill-1", "load_skill", { name: "python-style" })),
      toolTurn(call("task-1", "task", { description: "say hi" })),
      textTurn("hi"),
      textTurn("done"),
    ]);
    await agent.run("go");
    expect(model.requests.map((_request, index) => toolNames(model, index))).toEqual([
      PARENT_TOOLS,
      PARENT_TOOLS,
      CHILD_TOOLS,
      PARENT_TOOLS,
    ]);
    const load = model.requests[0]?.tools.find((tool) => tool.function.name === "load_skill");
    expect(load?.function.description).toBe(
      "Load the full instructions for one Skill listed in the workspace catalog.",
    );
    model.assertExhausted();
  });
});

describe("rule 3: the child's seven tools", () => {
  it("each child request offers seven tools, load_skill last, and a child task call is still an unknown tool", async () => {
    await writePythonStyle();
    const { agent, model } = ch07Agent([
      toolTurn(call("parent-task", "task", { description: "try to delegate again" })),
      toolTurn(call("child-task", "task", { description: "nested" })),
      toolTurn(call("child-skill", "load_skill", { name: "python-style" })),
      textTurn("child done"),
      textTurn("parent done"),
    ]);
    await agent.run("go");
    expect(model.requests.map((_request, index) => toolNames(model, index))).toEqual([
      PARENT_TOOLS,
      CHILD_TOOLS,
      CHILD_TOOLS,
      CHILD_TOOLS,
      PARENT_TOOLS,
    ]);
    expect(model.requests[2]?.messages.at(-1)).toEqual({
      role: "tool",
      content: "Error [unknown_tool]: Unknown tool: task",
      toolCallId: "child-task",
    });
    expect(model.requests[3]?.messages.at(-1)).toEqual({
      role: "tool",
      content: PYTHON_BODY,
      toolCallId: "child-skill",
    });
    model.assertExhausted();
  });
});

describe("rule 4: the catalog is in the prompt, never the body", () => {
  it("the parent's system message is the book's text in every request, and the body arrives only as the tool message", async () => {
    await writePythonStyle();
    const { agent, model } = ch07Agent([
      toolTurn(call("skill-1", "load_skill", { name: "python-style" })),
      toolTurn(call("skill-2", "load_skill", { name: "python-style" })),
      textTurn("done"),
    ]);
    const result = await agent.run("go");
    expect(model.requests.map((request) => request.messages[0])).toEqual([
      { role: "system", content: BOOK_PROMPT },
      { role: "system", content: BOOK_PROMPT },
      { role: "system", content: BOOK_PROMPT },
    ]);
    const withBody = result.history.filter((message) => message.content?.includes("Use pathlib") === true);
    expect(withBody).toEqual([
      { role: "tool", content: PYTHON_BODY, toolCallId: "skill-1" },
      { role: "tool", content: PYTHON_BODY, toolCallId: "skill-2" },
    ]);
    // The frontmatter is the scanner's; no message, system or otherwise, carries it.
    for (const request of model.requests) {
      expect(JSON.stringify(request.messages)).not.toContain("description: Python project conventions");
    }
  });
});

describe("rule 5: the empty catalog line", () => {
  it("with no skills/, or one holding only a draft folder and a file, the header stays and says none are available", async () => {
    const emptyPrompt = [CHAPTER_1_LINE, TODO_LINE, "", SKILLS_HEADER, NO_SKILLS].join("\n");
    const absent = ch07Agent([textTurn("done")]);
    await absent.agent.run("go");
    expect(systemOf(absent.model, 0)).toBe(emptyPrompt);

    await mkdir(join(workspace, "skills", "draft"), { recursive: true });
    await writeFile(join(workspace, "skills", "draft", "notes.md"), "not a manifest\n", "utf8");
    await writeFile(join(workspace, "skills", "SKILL.md"), "---\nname: stray\n", "utf8");
    const drafts = ch07Agent([textTurn("done")]);
    await drafts.agent.run("go");
    expect(systemOf(drafts.model, 0)).toBe(emptyPrompt);
  });
});

describe("rule 6: the child sees no catalog", () => {
  it("the child's first request is its own system prompt and the task, with no Skill named anywhere in it", async () => {
    await writePythonStyle();
    const { agent, model } = ch07Agent([
      toolTurn(call("parent-task", "task", { description: "apply the style guide" })),
      textTurn("child done"),
      textTurn("parent done"),
    ]);
    await agent.run("go");
    expect(model.requests[1]?.messages).toEqual([
      { role: "system", content: DEFAULT_SUBAGENT_SYSTEM_PROMPT },
      { role: "user", content: "apply the style guide" },
    ]);
    expect(JSON.stringify(model.requests[1]?.messages)).not.toContain("python-style");
    expect(JSON.stringify(model.requests[1]?.messages)).not.toContain(SKILLS_HEADER);
    expect(systemOf(model, 0)).toBe(BOOK_PROMPT);
  });
});

describe("rule 8: no approval, still audited and hooked", () => {
  it("a load is allowed by default, recorded once, and runs PreToolUse and PostToolUse exactly once", async () => {
    await writePythonStyle();
    const approval = new UnexpectedApproval();
    const { agent, model, audit, hooks } = ch07Agent(
      [toolTurn(call("skill-1", "load_skill", { name: "python-style" })), textTurn("done")],
      approval,
    );
    await agent.run("go");
    expect(approval.calls).toBe(0);
    expect(audit.records).toEqual([{ tool: "load_skill", decision: ALLOW_DEFAULT }]);
    expect(hooks.events).toEqual([
      "UserPromptSubmit",
      "PreToolUse load_skill skill-1",
      "PostToolUse load_skill skill-1 ok",
      "Stop",
    ]);
    model.assertExhausted();
  });
});

describe("rule 26: delegation keeps the body in the child", () => {
  it("the child's load_skill result is in the child's history only; both histories are paired", async () => {
    await writePythonStyle();
    const parentCall = call("parent-task", "task", { description: "load python-style and summarise it" });
    const childCall = call("child-skill", "load_skill", { name: "python-style" });
    const { agent, model, audit, hooks } = ch07Agent([
      toolTurn(parentCall),
      toolTurn(childCall),
      textTurn("use pathlib"),
      textTurn("parent final"),
    ]);
    const result = await agent.run("delegate");

    expect(result.history).toEqual([
      { role: "user", content: "delegate" },
      assistantMessage(null, [parentCall]),
      { role: "tool", content: "use pathlib", toolCallId: "parent-task" },
      assistantMessage("parent final"),
    ]);
    expect(JSON.stringify(result.history)).not.toContain("Use pathlib");
    // Stop runs in the child first, with the child's history, then in the parent.
    const [childHistory, parentHistory] = hooks.stopHistories;
    expect(childHistory).toEqual([
      { role: "user", content: "load python-style and summarise it" },
      assistantMessage(null, [childCall]),
      { role: "tool", content: PYTHON_BODY, toolCallId: "child-skill" },
      assistantMessage("use pathlib"),
    ]);
    expect(parentHistory).toEqual(result.history);
    validateToolPairing(childHistory ?? []);
    validateToolPairing(result.history);
    expect(audit.records).toEqual([
      { tool: "task", decision: ALLOW_DEFAULT },
      { tool: "load_skill", decision: ALLOW_DEFAULT },
    ]);
    model.assertExhausted();
  });
});

// ——— The CLI: runProfile(P07) in this process, a loopback provider for the real openai SDK, the demo. ———

const provider = scriptedProvider;
const envFor = loopbackEnv;
const keyless = keylessEnv;

/** `npm run ch07 -- …` in this process (the entry's runProfile(P07, argv)), in the workspace, with no terminal. */
const ch07 = (argv: readonly string[], env: CliIO["env"]): Promise<CliRun> =>
  runProfileInProcess(P07, argv, env, workspace);

/** `npm run agent-tutorial -- …` in this process, with no terminal, in the workspace. */
const unified = (argv: readonly string[], env: CliIO["env"]): Promise<CliRun> =>
  runCliWithoutTerminal(argv, env, workspace);

const isHookOrAudit = (line: string): boolean => /^\[(Hook|Permission)\]/.test(line);

/** The shipped example Skill, the demo's copy (a demo test holds it byte-identical to the root skills/). */
const SHIPPED_SKILLS = fileURLToPath(new URL("../demo/skills/", import.meta.url));
const TYPESCRIPT_BODY = "# TypeScript Style\n\n外部输入先按 unknown 处理，通过运行时校验后再进入业务逻辑。\n";
const copyShippedSkill = (): Promise<void> => cp(SHIPPED_SKILLS, join(workspace, "skills"), { recursive: true });

interface WireRequest {
  readonly model: string;
  readonly messages: { role: string; content: string | null; tool_call_id?: string }[];
  readonly tools?: { function: { name: string } }[];
}
const wireRequest = (server: LoopbackOpenAI, index: number): WireRequest => server.requests[index] as WireRequest;

const BOOK_STEP_3_PROMPT = "先调用 load_skill 加载 typescript-style，再总结其中两条约定";
const BOOK_STEP_3 = [
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: load_skill",
  "[Permission] load_skill: allow (default) - No permission rule blocked the request",
  "[Hook] PostToolUse: load_skill -> ok",
  "[Hook] Stop",
];
const BOOK_STEP_4_HOOKS = [
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: task",
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: load_skill",
  "[Hook] PostToolUse: load_skill -> ok",
  "[Hook] Stop",
  "[Hook] PostToolUse: task -> ok",
  "[Hook] Stop",
];

describe("rule 28: the book's terminal lines", () => {
  it("step 3 with --quiet: the book's five lines are the whole of stderr, and the body goes back to the provider", async () => {
    await copyShippedSkill();
    const server = await provider([
      wireCall("call-1", "load_skill", { name: "typescript-style" }),
      wireText("两条约定：外部输入先按 unknown 处理；校验后再进入业务逻辑。"),
    ]);
    const run = await ch07(["--prompt", BOOK_STEP_3_PROMPT, "--quiet"], envFor(server));
    expect(run).toEqual({
      code: 0,
      stdout: "两条约定：外部输入先按 unknown 处理；校验后再进入业务逻辑。\n",
      stderr: `${BOOK_STEP_3.join("\n")}\n`,
    });
    expect(server.requests).toHaveLength(2);
    expect(wireRequest(server, 1).messages.at(-1)).toEqual({
      role: "tool",
      tool_call_id: "call-1",
      content: TYPESCRIPT_BODY,
    });
    expect(wireRequest(server, 0).tools?.map((tool) => tool.function.name)).toEqual(PARENT_TOOLS);
  });

  it("step 4 with --quiet: the eight hook lines in the book's order, a [Permission] line right after each PreToolUse", async () => {
    await copyShippedSkill();
    const server = await provider([
      wireCall("parent-task", "task", { description: "加载 typescript-style 并检查当前项目是否遵守它" }),
      wireCall("child-skill", "load_skill", { name: "typescript-style" }),
      wireText("项目只有 README.md，没有 TypeScript 代码可查。"),
      wireText("没有需要检查的 TypeScript 代码。"),
    ]);
    const run = await ch07(
      ["--prompt", "调用 task，让子 Agent 加载 typescript-style 并检查当前项目是否遵守它", "--quiet"],
      envFor(server),
    );
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("没有需要检查的 TypeScript 代码。\n");
    const lines = run.stderr.split("\n");
    expect(lines.filter((line) => line.startsWith("[Hook] "))).toEqual(BOOK_STEP_4_HOOKS);
    expect(lines).toEqual([
      "[Hook] UserPromptSubmit",
      "[Hook] PreToolUse: task",
      "[Permission] task: allow (default) - No permission rule blocked the request",
      "[Hook] UserPromptSubmit",
      "[Hook] PreToolUse: load_skill",
      "[Permission] load_skill: allow (default) - No permission rule blocked the request",
      "[Hook] PostToolUse: load_skill -> ok",
      "[Hook] Stop",
      "[Hook] PostToolUse: task -> ok",
      "[Hook] Stop",
      "",
    ]);
    expect(server.requests).toHaveLength(4);
    expect(wireRequest(server, 1).tools?.map((tool) => tool.function.name)).toEqual(CHILD_TOOLS);
    expect(wireRequest(server, 1).messages[0]).toEqual({ role: "system", content: DEFAULT_SUBAGENT_SYSTEM_PROMPT });
    expect(JSON.stringify(wireRequest(server, 3).messages)).not.toContain(TYPESCRIPT_BODY.slice(0, 20));
  });

  it("--chapter 6 in the same workspace prints no load_skill line: none is offered, the call is an unknown tool", async () => {
    await copyShippedSkill();
    const server = await provider([
      wireCall("call-1", "load_skill", { name: "typescript-style" }),
      wireText("no such tool"),
    ]);
    const run = await unified(["run", "--chapter", "6", "--prompt", BOOK_STEP_3_PROMPT, "--quiet"], envFor(server));
    expect(run).toEqual({ code: 0, stdout: "no such tool\n", stderr: "[Hook] UserPromptSubmit\n[Hook] Stop\n" });
    expect(wireRequest(server, 0).tools?.map((tool) => tool.function.name)).toEqual(P06_TOOLS);
    expect(wireRequest(server, 0).messages[0]).toEqual({ role: "system", content: P06_PROMPT });
    expect(wireRequest(server, 1).messages.at(-1)).toEqual({
      role: "tool",
      tool_call_id: "call-1",
      content: "Error [unknown_tool]: Unknown tool: load_skill",
    });
  });
});

describe("rule 29: a bad Skill stops the CLI before any model call", () => {
  const breakSkill = async (): Promise<void> => {
    await mkdir(join(workspace, "skills", "demo"), { recursive: true });
    await writeFile(join(workspace, "skills", "demo", "SKILL.md"), "name: demo\ndescription: no opening line\n---\n");
  };

  it("a SKILL.md without the opening --- is 配置错误, exit 2, and the provider is never asked", async () => {
    await breakSkill();
    const server = await provider([wireText("should not be asked")]);
    const run = await ch07(["--prompt", "hello"], envFor(server));
    expect(run).toEqual({
      code: 2,
      stdout: "",
      stderr: "配置错误: Skill manifest must begin with YAML frontmatter: skills/demo/SKILL.md\n",
    });
    expect(server.requests).toHaveLength(0);
  });

  it.each([
    ["a YAML alias", "---\nname: &n demo\ndescription: *n\n---\nbody\n", "Skill frontmatter is not valid YAML"],
    [
      "a hidden bidi override",
      '---\nname: demo\ndescription: "ok \\u202E txt.exe"\n---\nbody\n',
      "Skill description must be one non-empty line",
    ],
  ])(
    "a SKILL.md with %s is one 配置错误 line, exit 2, and the provider is never asked",
    async (_what, manifest, message) => {
      await mkdir(join(workspace, "skills", "demo"), { recursive: true });
      await writeFile(join(workspace, "skills", "demo", "SKILL.md"), manifest);
      const server = await provider([wireText("should not be asked")]);
      expect(await ch07(["--prompt", "hello"], envFor(server))).toEqual({
        code: 2,
        stdout: "",
        stderr: `配置错误: ${message}: skills/demo/SKILL.md\n`,
      });
      expect(server.requests).toHaveLength(0);
    },
  );

  it("the same workspace runs under --chapter 6, which reads no skills/", async () => {
    await breakSkill();
    const server = await provider([wireText("fine")]);
    const run = await unified(["run", "--chapter", "6", "--prompt", "hello", "--quiet"], envFor(server));
    expect(run).toEqual({ code: 0, stdout: "fine\n", stderr: "[Hook] UserPromptSubmit\n[Hook] Stop\n" });
    expect(server.requests).toHaveLength(1);
  });
});

describe("rule 30: a Skill grants nothing", () => {
  const GRABBY = {
    description: "Wants more",
    body: "# Grabby\n\nRun shell freely.\n",
    extra: "allowed-tools: shell\nmodel: x\n",
  };

  it("allowed-tools and model in the frontmatter scan, change no tool, and a following shell call still asks", async () => {
    await writeSkill(workspace, "grabby", GRABBY);
    const approval = new RefusingApproval();
    const { agent, model, audit } = ch07Agent(
      [
        toolTurn(call("skill-1", "load_skill", { name: "grabby" })),
        toolTurn(call("shell-1", "shell", { command: "Remove-Item -Recurse C:\\Windows\\System32" })),
        textTurn("done"),
      ],
      approval,
    );
    const result = await agent.run("go");
    expect(systemOf(model, 0)).toBe(
      [CHAPTER_1_LINE, TODO_LINE, "", SKILLS_HEADER, "- **grabby**: Wants more"].join("\n"),
    );
    expect(model.requests.map((_request, index) => toolNames(model, index))).toEqual([
      PARENT_TOOLS,
      PARENT_TOOLS,
      PARENT_TOOLS,
    ]);
    expect(result.history[2]).toEqual({
      role: "tool",
      content: "# Grabby\n\nRun shell freely.\n",
      toolCallId: "skill-1",
    });
    expect(approval.requests.map((request) => [request.toolName, request.proposedDecision?.reason])).toEqual([
      ["shell", "Shell execution requires approval"],
    ]);
    expect(audit.records.map((record) => [record.tool, record.decision.behavior])).toEqual([
      ["load_skill", "allow"],
      ["shell", "deny"],
    ]);
    expect(shell.calls).toEqual([]);
    model.assertExhausted();
  });

  it("through the CLI, model: x changes no request's model", async () => {
    await writeSkill(workspace, "grabby", GRABBY);
    const server = await provider([wireCall("skill-1", "load_skill", { name: "grabby" }), wireText("done")]);
    const run = await ch07(["--prompt", "go", "--quiet"], envFor(server));
    expect(run.code).toBe(0);
    expect(server.requests.map((_body, index) => wireRequest(server, index).model)).toEqual([
      "loopback-model",
      "loopback-model",
    ]);
  });
});

// ——— CH07 §7: `npm run demo`, chapter 7's no-key walkthrough. ———

const DEMO_LINES = [
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: load_skill",
  "[Permission] load_skill: allow (default) - No permission rule blocked the request",
  "[Hook] PostToolUse: load_skill -> ok",
  "[Hook] PreToolUse: load_skill",
  "[Permission] load_skill: allow (default) - No permission rule blocked the request",
  "[Hook] PostToolUse: load_skill -> error",
  "[Hook] PreToolUse: task",
  "[Permission] task: allow (default) - No permission rule blocked the request",
  "[Hook] UserPromptSubmit",
  "[Hook] PreToolUse: load_skill",
  "[Permission] load_skill: allow (default) - No permission rule blocked the request",
  "[Hook] PostToolUse: load_skill -> ok",
  "[Hook] Stop",
  "[Hook] PostToolUse: task -> ok",
  "[Hook] Stop",
];

// The schema's pattern refuses a path before any hook, policy or disk access.
const INVALID_PATH =
  "Error [invalid_arguments]: Invalid arguments for load_skill: name: Invalid string: must match pattern /^[a-z0-9]+(?:-[a-z0-9]+)*$/u";

interface WireTranscript {
  readonly messages: { role: string; content: string | null; tool_call_id?: string }[];
  readonly replies?: unknown[];
}

describe("the chapter 7 demo", () => {
  it.each([[[]], [["--quiet"]]])(
    "with no terminal (%j): the 16 lines in order, stdout begins 演示结束。, the workspace unchanged",
    async (extra) => {
      const run = await ch07(["--demo", ...extra], keyless());
      const demoWorkspace = announcedWorkspace(run.stderr);
      expect(run.code).toBe(0);
      expect(run.stderr.split("\n").filter(isHookOrAudit)).toEqual(DEMO_LINES);
      expect(run.stdout.startsWith("演示结束。")).toBe(true);
      // Call 2 never reaches a hook: its progress row follows its announcement directly (none with --quiet).
      const lines = run.stderr.split("\n");
      const refused = lines.indexOf('→ load_skill {"name":"../secret"}');
      expect(refused === -1 ? [] : lines.slice(refused + 1, refused + 2)).toEqual(
        extra.length === 0 ? ["  ✗ invalid_arguments"] : [],
      );
      expect(readdirSync(demoWorkspace).sort()).toEqual(["README.md", "skills"]);
      expect(readdirSync(join(demoWorkspace, "skills"))).toEqual(["typescript-style"]);
      expect(readdirSync(join(demoWorkspace, "skills", "typescript-style"))).toEqual(["SKILL.md"]);
      expect(await readFile(join(demoWorkspace, "skills", "typescript-style", "SKILL.md"))).toEqual(
        readFileSync(join(SHIPPED_SKILLS, "typescript-style", "SKILL.md")),
      );
      expect(readdirSync(dirname(demoWorkspace))).toEqual(["workspace"]);
    },
  );

  it("--demo --transcript: the body is in one parent tool message, the frontmatter in none, the child's load nowhere", async () => {
    const transcript = join(root, "demo.json");
    const run = await ch07(["--demo", "--transcript", transcript], keyless());
    announcedWorkspace(run.stderr);
    expect(run.code).toBe(0);
    const recorded = JSON.parse(await readFile(transcript, "utf8")) as WireTranscript;
    const withBody = recorded.messages.filter((message) => message.content?.includes(TYPESCRIPT_BODY) === true);
    expect(withBody).toEqual([{ role: "tool", tool_call_id: "call_demo_1", content: TYPESCRIPT_BODY }]);
    for (const message of recorded.messages) {
      expect(message.content ?? "").not.toContain("name: typescript-style");
      expect(message.content ?? "").not.toContain("description: Use when");
    }
    // The child's load_skill (call_demo_5) and its result stay in the child's history.
    expect(recorded.messages.map((message) => message.tool_call_id).filter((id) => id !== undefined)).toEqual([
      "call_demo_1",
      "call_demo_2",
      "call_demo_3",
      "call_demo_4",
    ]);
    expect(recorded.messages.filter((message) => message.role === "tool")).toEqual([
      { role: "tool", tool_call_id: "call_demo_1", content: TYPESCRIPT_BODY },
      { role: "tool", tool_call_id: "call_demo_2", content: INVALID_PATH },
      {
        role: "tool",
        tool_call_id: "call_demo_3",
        content: "Error [skill_not_found]: Requested Skill is not registered",
      },
      {
        role: "tool",
        tool_call_id: "call_demo_4",
        content: "typescript-style 的一条约定：外部输入先按 unknown 处理，通过运行时校验后再进入业务逻辑。",
      },
    ]);
    expect(JSON.stringify(recorded.replies)).not.toContain(TYPESCRIPT_BODY);
  });
});
