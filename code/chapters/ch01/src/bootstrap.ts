import { realpathSync } from "node:fs";
import { OpenAIChatClient, type OpenAIChatOptions } from "./adapters/openai-chat.js";
import { PowerShellRunner } from "./adapters/powershell.js";
import { ReplayModel } from "./adapters/replay-model.js";
import type { AgentEventListener } from "./core/agent-events.js";
import { AgentRunner } from "./core/agent-runner.js";
import type { ApprovalProvider } from "./core/approval.js";
import type { CommandRunner } from "./core/command-runner.js";
import type { ChatMessage } from "./core/messages.js";
import type { ModelClient } from "./core/model-client.js";
import { profileForChapter, type ChapterProfile } from "./core/profiles.js";
import { builtinTools } from "./features/builtin-tools.js";

export const DEFAULT_MAX_TURNS = 20;

export interface BuildDependencies {
  readonly model: ModelClient;
  /** Folder the agent works in; resolved to its real path here. */
  readonly workspace: string;
  readonly commandRunner?: CommandRunner;
  readonly approvalProvider?: ApprovalProvider;
  readonly maxTurns?: number;
  readonly onEvent?: AgentEventListener;
}

/** A real model: any OpenAI-compatible Chat Completions endpoint, through the official SDK. */
export function openAIModel(options: OpenAIChatOptions): ModelClient {
  return new OpenAIChatClient(options);
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
  const tools = builtinTools(profile.capabilities, {
    commandRunner: deps.commandRunner ?? new PowerShellRunner(),
  });
  return new AgentRunner({
    model: deps.model,
    tools,
    context: { workspace, identity: `agent-tutorial/ch${String(profile.chapter).padStart(2, "0")}` },
    systemPrompt: systemPrompt(workspace),
    maxTurns: deps.maxTurns ?? DEFAULT_MAX_TURNS,
    ...(deps.approvalProvider ? { approvalProvider: deps.approvalProvider } : {}),
    ...(deps.onEvent ? { onEvent: deps.onEvent } : {}),
  });
}

function systemPrompt(workspace: string): string {
  return [
    "You are a coding agent. You work inside one folder, the workspace:",
    workspace,
    "Use the tools to look before you answer. The shell tool runs PowerShell, not bash.",
    "Every tool call may be refused by the user; if one is, do not retry it, explain instead.",
    "When you are done, reply with a short final answer and no tool call.",
  ].join("\n");
}
