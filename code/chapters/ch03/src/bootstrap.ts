import { realpathSync } from "node:fs";
import { NodeWorkspaceFileSystem } from "./adapters/filesystem.js";
import { OpenAIChatModel } from "./adapters/openai-chat.js";
import { PowerShellRunner } from "./adapters/powershell.js";
import { ReplayModel } from "./adapters/replay-model.js";
import type { Settings } from "./config.js";
import type { AgentEventListener } from "./core/agent-events.js";
import type { CommandRunner } from "./core/commands.js";
import { AgentRunner } from "./core/loop.js";
import type { ChatMessage } from "./core/messages.js";
import type { ModelClient } from "./core/model.js";
import { PermissionPolicy } from "./core/permission-policy.js";
import { PermissionRule, type ApprovalProvider, type AuditSink } from "./core/permissions.js";
import { profileForChapter, type ChapterProfile } from "./core/profiles.js";
import type { WorkspaceFileSystem } from "./core/filesystem.js";
import { createChapterOneTools, createChapterTwoTools } from "./features/builtin-tools.js";

export { toOpenAIMessage } from "./adapters/openai-chat.js";

/** The same every turn and never stored in the history: the loop puts it first in each request. */
export const SYSTEM_PROMPT =
  "You are a coding agent. Use tools when needed, inspect their results, and answer accurately.";

export interface BuildDependencies {
  readonly model: ModelClient;
  /** Folder the agent works in; resolved to its real path here. */
  readonly workspace: string;
  readonly commandRunner?: CommandRunner;
  readonly fileSystem?: WorkspaceFileSystem;
  readonly approvalProvider?: ApprovalProvider;
  readonly auditSink?: AuditSink;
  readonly maxTurns?: number;
  readonly onEvent?: AgentEventListener;
}

/** Chapter 3's rule set: exactly one rule. */
export const P03_RULES: readonly PermissionRule[] = Object.freeze([
  new PermissionRule({
    name: "confirm-file-write",
    behavior: "ask",
    reason: "File writes require explicit approval from chapter 3 onward",
    matches: (request) => request.toolName === "write_file" || request.toolName === "edit_file",
  }),
]);

/** A real model: any OpenAI-compatible Chat Completions endpoint, through the official SDK. */
export function openAIModel(settings: Settings): ModelClient {
  return new OpenAIChatModel(settings);
}

/** A model that answers with the assistant turns of a recorded history, for --replay and --demo. */
export function replayModel(history: readonly ChatMessage[]): ModelClient {
  return new ReplayModel(history);
}

/** The composition root: the only place that knows which concrete adapters a chapter uses. */
export function buildAgent(profile: ChapterProfile, deps: BuildDependencies): AgentRunner {
  if (profileForChapter(profile.chapter) !== profile) {
    throw new TypeError("buildAgent accepts only a profile returned by profileForChapter()");
  }
  const workspace = realpathSync(deps.workspace);
  const commandRunner = deps.commandRunner ?? new PowerShellRunner();
  const tools =
    profile.chapter === 1
      ? createChapterOneTools(commandRunner)
      : createChapterTwoTools(commandRunner, deps.fileSystem ?? new NodeWorkspaceFileSystem());
  return new AgentRunner({
    model: deps.model,
    tools,
    systemPrompt: SYSTEM_PROMPT,
    workspace,
    ...(deps.maxTurns === undefined ? {} : { maxTurns: deps.maxTurns }),
    ...optionalPolicy(buildPolicy(profile, deps)),
    ...(deps.onEvent === undefined ? {} : { onEvent: deps.onEvent }),
  });
}

/** Callers cannot pass a policy: it follows from the profile, so no chapter 3 run lacks one. */
function buildPolicy(profile: ChapterProfile, deps: BuildDependencies): PermissionPolicy | undefined {
  const { approvalProvider, auditSink } = deps;
  if (profile.capabilities.has("policy")) {
    if (approvalProvider === undefined) throw new TypeError("approvalProvider is required for chapter 3 or later");
    if (auditSink === undefined) throw new TypeError("auditSink is required for chapter 3 or later");
    return new PermissionPolicy({
      boundary: new NodeWorkspaceFileSystem(),
      rules: P03_RULES,
      approvalProvider,
      auditSink,
    });
  }
  // Chapters 1 and 2 keep only their confirmation: the shell is still asked, nothing else is.
  return approvalProvider === undefined ? undefined : new PermissionPolicy({ approvalProvider });
}

function optionalPolicy(policy: PermissionPolicy | undefined): { policy?: PermissionPolicy } {
  return policy === undefined ? {} : { policy };
}
