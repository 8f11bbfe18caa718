import { realpathSync } from "node:fs";
import { NodeWorkspaceFileSystem } from "./adapters/filesystem.js";
import { OpenAIChatModel } from "./adapters/openai-chat.js";
import { PowerShellRunner } from "./adapters/powershell.js";
import { ReplayModel } from "./adapters/replay-model.js";
import type { Settings } from "./config.js";
import type { AgentEventListener } from "./core/agent-events.js";
import type { CommandRunner } from "./core/commands.js";
import { AgentRunner, type ToolAuthorizer } from "./core/loop.js";
import type { ChatMessage } from "./core/messages.js";
import type { ModelClient } from "./core/model.js";
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
  readonly authorizer?: ToolAuthorizer;
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
    ...(deps.authorizer === undefined ? {} : { authorizer: deps.authorizer }),
    ...(deps.onEvent === undefined ? {} : { onEvent: deps.onEvent }),
  });
}
