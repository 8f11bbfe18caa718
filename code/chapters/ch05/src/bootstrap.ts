import { realpathSync } from "node:fs";
import { NodeWorkspaceFileSystem } from "./adapters/filesystem.js";
import { OpenAIChatModel } from "./adapters/openai-chat.js";
import { PowerShellRunner } from "./adapters/powershell.js";
import { ReplayModel } from "./adapters/replay-model.js";
import type { Settings } from "./config.js";
import type { AgentEventListener } from "./core/agent-events.js";
import type { CommandRunner } from "./core/commands.js";
import type { HookRegistry } from "./core/hooks.js";
import { AgentRunner } from "./core/loop.js";
import type { ChatMessage } from "./core/messages.js";
import type { ModelClient } from "./core/model.js";
import { PermissionPolicy, PermissionRule, type ApprovalProvider, type AuditSink } from "./core/permissions.js";
import { profileForChapter, type ChapterProfile } from "./core/profiles.js";
import type { WorkspaceFileSystem } from "./core/filesystem.js";
import { createChapterOneTools, createChapterTwoTools } from "./features/builtin-tools.js";
import { TodoTracker } from "./features/todos.js";

export { toOpenAIMessage } from "./adapters/openai-chat.js";

/** The same every turn and never stored in the history: the loop puts it first in each request. */
export const SYSTEM_PROMPT =
  "You are a coding agent. Use tools when needed, inspect their results, and answer accurately.";

/** Chapter 5's line after it: when to use todo_write. The tool's description says what it does. */
const TODO_SYSTEM_PROMPT =
  "\nFor complex tasks, call todo_write with the complete task snapshot and update it when the plan changes.";

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
  readonly maxTurns?: number;
  readonly onEvent?: AgentEventListener;
}

/** A real model: any OpenAI-compatible Chat Completions endpoint, through the official SDK. */
export function openAIModel(settings: Settings, onAttempt?: (attempt: number, attempts: number) => void): ModelClient {
  return new OpenAIChatModel({ ...settings, ...(onAttempt === undefined ? {} : { onAttempt }) });
}

/** A model that answers with the assistant turns of a recorded history, for --replay and --demo. */
export function replayModel(history: readonly ChatMessage[]): ModelClient {
  return new ReplayModel(history);
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
  const tools =
    profile.chapter === 1 ? createChapterOneTools(commandRunner) : createChapterTwoTools(commandRunner, fileSystem);
  // One tracker per agent: the plan and its stale count are this session's, never the module's.
  const todoTracker = profile.capabilities.has("todo") ? new TodoTracker() : undefined;
  if (todoTracker !== undefined) tools.register(todoTracker.toolDefinition);
  const permissionPolicy = buildPolicy(profile, deps, fileSystem);
  return new AgentRunner({
    model: deps.model,
    tools,
    systemPrompt: todoTracker === undefined ? SYSTEM_PROMPT : `${SYSTEM_PROMPT}${TODO_SYSTEM_PROMPT}`,
    workspace,
    ...(deps.maxTurns === undefined ? {} : { maxTurns: deps.maxTurns }),
    ...(permissionPolicy === undefined ? {} : { permissionPolicy }),
    ...(deps.hooks === undefined ? {} : { hooks: deps.hooks }),
    // The same tracker is asked before each request and told after each tool round.
    ...(todoTracker === undefined ? {} : { toolRoundObserver: todoTracker }),
    ...(deps.onEvent === undefined ? {} : { onEvent: deps.onEvent }),
  });
}

/** Callers cannot pass a policy: it follows from the profile, so no chapter 3 run lacks one. */
function buildPolicy(
  profile: ChapterProfile,
  deps: BuildDependencies,
  fileSystem: WorkspaceFileSystem,
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
