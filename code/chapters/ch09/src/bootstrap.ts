import { realpathSync } from "node:fs";
import { NodeWorkspaceFileSystem } from "./adapters/filesystem.js";
import { OpenAIChatModel } from "./adapters/openai-chat.js";
import { PowerShellRunner } from "./adapters/powershell.js";
import { ReplayModel, type ReplayOptions } from "./adapters/replay-model.js";
import type { Settings } from "./config.js";
import type { AgentEventListener } from "./core/agent-events.js";
import type { CommandRunner } from "./core/commands.js";
import { HookRegistry } from "./core/hooks.js";
import { AgentRunner, type TurnLifecycle } from "./core/loop.js";
import type { ChatMessage } from "./core/messages.js";
import type { ModelClient } from "./core/model.js";
import { PermissionPolicy, PermissionRule, type ApprovalProvider, type AuditSink } from "./core/permissions.js";
import { profileForChapter, type ChapterProfile } from "./core/profiles.js";
import type { WorkspaceFileSystem } from "./core/filesystem.js";
import type { ToolRegistry } from "./core/tools.js";
import { createChapterOneTools, createChapterTwoTools } from "./features/builtin-tools.js";
import { CompactionManager, ModelHistorySummarizer, type ArtifactNotice } from "./features/compaction.js";
import { MemorySession, MemoryStore, ModelMemoryQueries, type MemoryNotice } from "./features/memory.js";
import { SkillRegistry } from "./features/skills.js";
import { SubagentTool } from "./features/subagents.js";
import { TodoTracker } from "./features/todos.js";

export { toOpenAIMessage } from "./adapters/openai-chat.js";
export { RequestOwners, type RequestOwner } from "./adapters/replay-model.js";

/** The same every turn and never stored in the history: the loop puts it first in each request. */
export const SYSTEM_PROMPT =
  "You are a coding agent. Use tools when needed, inspect their results, and answer accurately.";

/** Chapter 5's line after it: when to use todo_write. The tool's description says what it does. */
const TODO_SYSTEM_PROMPT =
  "\nFor complex tasks, call todo_write with the complete task snapshot and update it when the plan changes.";

/** Chapter 7: what the catalog of the workspace's Skills follows in the parent's system prompt. */
const SKILLS_PROMPT_HEADER =
  "\n\nAvailable workspace Skills are listed below. Load one with load_skill only when its instructions are relevant:\n";
/** Said instead of an empty catalog, so the model does not guess a Skill and waste a turn on skill_not_found. */
const NO_SKILLS_LINE = "(No workspace Skills are currently available.)";

export interface BuildDependencies {
  readonly model: ModelClient;
  /** Folder the agent works in; resolved to its real path here. */
  readonly workspace: string;
  readonly commandRunner?: CommandRunner;
  readonly fileSystem?: WorkspaceFileSystem;
  readonly approvalProvider?: ApprovalProvider;
  readonly auditSink?: AuditSink;
  /** Chapter 4 or later only. */
  readonly hooks?: HookRegistry;
  /** The parent's model calls; a subagent's 30-turn cap is its own. */
  readonly maxTurns?: number;
  readonly onEvent?: AgentEventListener;
  /** Chapter 6 or later: each child run's progress, apart from the parent's. */
  readonly onSubagentEvent?: AgentEventListener;
  /** Chapter 6 or later: why a child failed, for the person only (the model reads a stable error). */
  readonly onSubagentFailure?: (error: unknown) => void;
  /** Chapter 8: each file the runtime saved into the workspace unasked, or why it could not save one. */
  readonly onArtifact?: (notice: ArtifactNotice) => void;
  /** Chapter 8: after each summary, the request history's UTF-8 bytes before and after it. */
  readonly onSummary?: (bytesBefore: number, bytesAfter: number) => void;
  /** Chapter 9: what memory selected, extracted, saved or removed, or why it could not. */
  readonly onMemory?: (notice: MemoryNotice) => void;
  /**
   * Chapter 9: the run's answer as soon as it has one, before memory's extraction runs after it, so the person reads
   * it without waiting for the extractor. Not called when a hook's stop ends the run on a tool's result (the caller
   * prints that once `run` returns), nor on a profile without memory. A throw from it is ignored: the run still has
   * its answer, returned by `run` as always.
   */
  readonly onAnswer?: (finalText: string) => void;
}

/** The tools of chapters 1–5, and chapter 5's tracker when the profile has one. */
interface StandardTools {
  readonly tools: ToolRegistry;
  readonly todoTracker?: TodoTracker;
}

/** A real model: any OpenAI-compatible Chat Completions endpoint, through the official SDK. */
export function openAIModel(settings: Settings, onAttempt?: (attempt: number, attempts: number) => void): ModelClient {
  return new OpenAIChatModel({ ...settings, ...(onAttempt === undefined ? {} : { onAttempt }) });
}

/** A model that answers with the assistant turns of a recorded history, for --replay and --demo. */
export function replayModel(history: readonly ChatMessage[], options?: ReplayOptions): ModelClient {
  return new ReplayModel(history, options);
}

/** The composition root: the only place that knows which concrete adapters a chapter uses. */
export function buildAgent(profile: ChapterProfile, deps: BuildDependencies): AgentRunner {
  if (profileForChapter(profile.chapter) !== profile) {
    // The book's words from chapter 4 on: a profile with a chapter's number but other capabilities is refused.
    throw new Error("profile must be a fixed chapter profile");
  }
  if (deps.hooks !== undefined && !profile.capabilities.has("hooks")) {
    throw new Error("hooks require chapter 4 or later");
  }
  const workspace = realpathSync(deps.workspace);
  const commandRunner = deps.commandRunner ?? new PowerShellRunner();
  const fileSystem = deps.fileSystem ?? new NodeWorkspaceFileSystem();
  const standardTools = createStandardTools(profile, commandRunner, fileSystem);
  const tools = standardTools.tools;
  const todoTracker = standardTools.todoTracker;
  const permissionPolicy = permissionPolicyForProfile(profile, fileSystem, deps);
  // From chapter 4 on there is always a registry: a subagent shares its parent's, even an empty one.
  const hooks = deps.hooks === undefined && profile.capabilities.has("hooks") ? new HookRegistry() : deps.hooks;
  // Read once, now: the catalog is this moment's snapshot; load_skill rereads a body on every call.
  const skillRegistry = profile.capabilities.has("skills") ? SkillRegistry.scan(workspace) : undefined;
  if (profile.capabilities.has("subagent")) {
    if (hooks === undefined || permissionPolicy === undefined) {
      throw new Error("subagent capability requires hooks and permission policy");
    }
    const subagent = new SubagentTool({
      // The same model every time, so a scripted reply queue is shared by parent and child in call order.
      modelFactory: () => deps.model,
      // A new registry (and tracker) per child; the tracker is dropped, so the child has todo_write but no reminder.
      toolsFactory: () => {
        const childTools = createStandardTools(profile, commandRunner, fileSystem).tools;
        // The child may load a Skill, but it gets no catalog: the task's description names the Skill to use.
        if (skillRegistry !== undefined) childTools.register(skillRegistry.toolDefinition);
        return childTools;
      },
      hooks,
      permissionPolicy,
      ...(deps.onSubagentEvent === undefined ? {} : { onEvent: deps.onSubagentEvent }),
      ...(deps.onSubagentFailure === undefined ? {} : { onFailure: deps.onSubagentFailure }),
    });
    tools.register(subagent.toolDefinition);
  }
  // After task, so the parent's tools keep chapter 6's order with load_skill last.
  if (skillRegistry !== undefined) tools.register(skillRegistry.toolDefinition);
  // One manager per agent, on both seams: its cache is this run's alone. A child runs uncompacted (its final text
  // reaches the parent as a result, and the parent's processor sees it there).
  const compaction =
    profile.capabilities.has("compaction") && profile.capabilities.has("artifacts")
      ? new CompactionManager({
          workspace,
          // The same model as the run: the fourth level's one request without tools.
          summarizer: new ModelHistorySummarizer(deps.model),
          ...(deps.onArtifact === undefined ? {} : { onArtifact: deps.onArtifact }),
          ...(deps.onSummary === undefined ? {} : { onSummary: deps.onSummary }),
        })
      : undefined;
  // Chapter 9: the parent's alone; a child gets none (D3), so it neither reads nor writes .memory.
  const memory = profile.capabilities.has("memory") ? createMemorySession(deps, true) : undefined;
  return new AgentRunner({
    model: deps.model,
    tools,
    systemPrompt: systemPromptFor(todoTracker, skillRegistry),
    workspace,
    ...(deps.maxTurns === undefined ? {} : { maxTurns: deps.maxTurns }),
    ...(permissionPolicy === undefined ? {} : { permissionPolicy }),
    ...(hooks === undefined ? {} : { hooks }),
    // The same tracker is asked before each request and told after each tool round.
    ...(todoTracker === undefined ? {} : { toolRoundObserver: todoTracker }),
    ...(compaction === undefined
      ? {}
      : {
          historyProcessor: compaction,
          toolResultProcessor: async (results) => (await compaction.compactToolResults(results)).results,
        }),
    ...(memory === undefined ? {} : { turnLifecycle: answerBeforeComplete(memory, deps.onAnswer) }),
    ...(deps.onEvent === undefined ? {} : { onEvent: deps.onEvent }),
  });
}

/**
 * Chapter 9 (the book's name): memory for one run, on the workspace's `.memory/`. Its three side queries go to the
 * run's own model object, without tools; `emitContextMessages` says whether the selected memories go into each
 * request as a message (chapter 10 puts them into its system prompt instead).
 */
export function createMemorySession(deps: BuildDependencies, emitContextMessages: boolean): MemorySession {
  const queries = new ModelMemoryQueries(deps.model);
  const onMemory = deps.onMemory;
  const store = new MemoryStore({
    workspace: realpathSync(deps.workspace),
    // Another process holds the lock: said once, so a wait of up to 40 s is not taken for a hung agent.
    ...(onMemory === undefined ? {} : { onLockWait: () => onMemory({ type: "waiting_for_lock" }) }),
  });
  return new MemorySession({
    store,
    selector: queries,
    extractor: queries,
    consolidator: queries,
    emitContextMessages,
    ...(onMemory === undefined ? {} : { onNotice: onMemory }),
  });
}

/**
 * `lifecycle`, handing the run's answer to `onAnswer` before its `complete` (memory's extraction) runs: the book's
 * order, where the user has the answer first and the memory is written after it.
 */
function answerBeforeComplete(lifecycle: TurnLifecycle, onAnswer?: (finalText: string) => void): TurnLifecycle {
  if (onAnswer === undefined) return lifecycle;
  return {
    beginTurn: (query) => lifecycle.beginTurn(query),
    beforeModel: () => lifecycle.beforeModel(),
    complete: async (history) => {
      const last = history.at(-1);
      // An ordinary end: the history ends with the answer the run returns. A hook's stop ends it on a tool's result
      // instead (its text is not the last message), which the caller prints once the run returns.
      if (last?.role === "assistant" && last.toolCalls.length === 0 && last.content !== null) {
        try {
          onAnswer(last.content);
        } catch {
          // Showing the answer early is a courtesy: a run that succeeded must not become "Turn lifecycle failed" over
          // it, nor lose its memory. The caller still has the answer from `run`.
        }
      }
      await lifecycle.complete(history);
    },
  };
}

/** The parent's system prompt: chapter 1's line, chapter 5's TODO line, chapter 7's header and catalog. */
function systemPromptFor(todoTracker: TodoTracker | undefined, skills: SkillRegistry | undefined): string {
  const todo = todoTracker === undefined ? "" : TODO_SYSTEM_PROMPT;
  if (skills === undefined) return `${SYSTEM_PROMPT}${todo}`;
  const catalog = skills.renderCatalog();
  return `${SYSTEM_PROMPT}${todo}${SKILLS_PROMPT_HEADER}${catalog === "" ? NO_SKILLS_LINE : catalog}`;
}

/** The only place chapters 1–5's tools are put together, for the parent and for every subagent alike. */
function createStandardTools(
  profile: ChapterProfile,
  commandRunner: CommandRunner,
  fileSystem: WorkspaceFileSystem,
): StandardTools {
  const tools =
    profile.chapter === 1 ? createChapterOneTools(commandRunner) : createChapterTwoTools(commandRunner, fileSystem);
  if (!profile.capabilities.has("todo")) return Object.freeze({ tools });
  // One tracker per registry: the plan and its stale count are this agent's, never the module's or a sibling's.
  const todoTracker = new TodoTracker();
  tools.register(todoTracker.toolDefinition);
  return Object.freeze({ tools, todoTracker });
}

/** Callers cannot pass a policy: it follows from the profile, so no chapter 3 run lacks one. */
function permissionPolicyForProfile(
  profile: ChapterProfile,
  fileSystem: WorkspaceFileSystem,
  deps: BuildDependencies,
): PermissionPolicy | undefined {
  if (!profile.capabilities.has("policy")) {
    // Chapters 1 and 2 keep only their confirmation: the shell is still asked, nothing else is.
    return deps.approvalProvider === undefined ? undefined : new PermissionPolicy({ approval: deps.approvalProvider });
  }
  if (deps.approvalProvider === undefined) throw new Error("approvalProvider is required for chapter 3 or later");
  if (deps.auditSink === undefined) throw new Error("auditSink is required for chapter 3 or later");
  return new PermissionPolicy({
    rules: [
      new PermissionRule({
        name: "confirm-file-write",
        behavior: "ask",
        reason: "File writes require explicit approval from chapter 3 onward",
        matches: (request) => {
          const name = request.prepared.definition.name;
          return name === "write_file" || name === "edit_file";
        },
      }),
    ],
    approval: deps.approvalProvider,
    audit: deps.auditSink,
    // The same file system the tools use: the boundary judges paths exactly as the handlers resolve them.
    writeBoundary: fileSystem,
  });
}
