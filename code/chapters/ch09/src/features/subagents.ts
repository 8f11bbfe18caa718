import { z } from "zod";
import type { AgentEventListener } from "../core/agent-events.js";
import { HookRegistry } from "../core/hooks.js";
import { AgentLimitError, AgentRunner, ConversationLimitError } from "../core/loop.js";
import type { ModelClient } from "../core/model.js";
import { PermissionPolicy } from "../core/permissions.js";
import { ToolRegistry, toolError, toolSuccess, type ToolContext, type ToolDefinition } from "../core/tools.js";
import type { ToolResult } from "../core/tools.js";

export const TASK_TOOL_NAME = "task";
/** The child's cap: tests may set it lower, nothing may set it higher. */
export const DEFAULT_SUBAGENT_MAX_TURNS = 30;
/**
 * Children one session may start. The model's replies choose how many `task` calls there are: without a cap, 32
 * calls a reply × 30 child turns × 20 parent turns is some 19,000 model calls; with it, at most 20 × 30 more.
 */
export const MAX_SUBAGENT_RUNS = 20;
/**
 * UTF-8 bytes of a child's conclusion the parent reads, the note on a cut included: a few paragraphs, and 20
 * children at most 80 KiB of the parent's context. The model chose every byte of it, and chapter 8 saves a result
 * to a file nobody is asked about when it is over 30,000 bytes, or when a reply's results together are over 200,000:
 * 32 results of this size and the 224 refused calls a reply can add to them stay under both.
 */
export const MAX_SUBAGENT_ANSWER_BYTES = 4_096;

export const DEFAULT_SUBAGENT_SYSTEM_PROMPT =
  "You are a focused coding subagent working in the current workspace. " +
  "Complete only the delegated task, then return a concise, evidence-based final conclusion. " +
  "Do not delegate further.";

const taskInputSchema = z
  .object({
    // Trimmed first, then checked: "   " must fail, which min(1) on the raw text would let through.
    description: z
      .string()
      .transform((description) => description.trim())
      .pipe(z.string().min(1))
      .describe("A self-contained task for the subagent to complete."),
  })
  .strict();

export type TaskInput = Readonly<z.output<typeof taskInputSchema>>;

export interface SubagentToolOptions {
  /** Asked once per `task` call, after the tools; the composition root hands back its one model every time. */
  readonly modelFactory: () => ModelClient;
  /** A new registry per `task` call, which must not hold `task`: the child starts with nothing of a sibling's. */
  readonly toolsFactory: () => ToolRegistry;
  /** The parent's own hooks and policy: a child is governed exactly like its parent. */
  readonly hooks: HookRegistry;
  readonly permissionPolicy: PermissionPolicy;
  readonly systemPrompt?: string;
  /** 1 to 30; 30 when omitted. */
  readonly maxTurns?: number;
  /** Each child run's progress, for whoever shows it (the CLI marks the rows as the child's). */
  readonly onEvent?: AgentEventListener;
  /** Why a child failed, for the person running the agent; the model reads only the stable error. */
  readonly onFailure?: (error: unknown) => void;
}

const LIMIT_REACHED = toolError(
  "subagent_limit",
  `At most ${MAX_SUBAGENT_RUNS} subagents run per session; this task did not run.`,
);

/**
 * The `task` tool: each call runs a fresh `AgentRunner` on the delegated description and returns only its final
 * text. Not a second loop and not a sandbox: the child shares the parent's hooks, policy, workspace and identity.
 */
export class SubagentTool {
  readonly toolDefinition: ToolDefinition<TaskInput>;
  readonly #modelFactory: () => ModelClient;
  readonly #toolsFactory: () => ToolRegistry;
  readonly #hooks: HookRegistry;
  readonly #permissionPolicy: PermissionPolicy;
  readonly #systemPrompt: string;
  readonly #maxTurns: number;
  readonly #onEvent: AgentEventListener | undefined;
  readonly #onFailure: ((error: unknown) => void) | undefined;
  #runs = 0;

  constructor(options: SubagentToolOptions) {
    if (typeof options.modelFactory !== "function") throw new TypeError("modelFactory must be a function");
    if (typeof options.toolsFactory !== "function") throw new TypeError("toolsFactory must be a function");
    if (!(options.hooks instanceof HookRegistry)) throw new TypeError("hooks must be a HookRegistry");
    if (!(options.permissionPolicy instanceof PermissionPolicy)) {
      throw new TypeError("permissionPolicy must be a PermissionPolicy");
    }
    const maxTurns = options.maxTurns ?? DEFAULT_SUBAGENT_MAX_TURNS;
    if (!Number.isInteger(maxTurns) || maxTurns <= 0) throw new Error("maxTurns must be a positive integer");
    if (maxTurns > DEFAULT_SUBAGENT_MAX_TURNS) throw new Error("maxTurns must be at most 30");
    const systemPrompt = options.systemPrompt ?? DEFAULT_SUBAGENT_SYSTEM_PROMPT;
    if (typeof systemPrompt !== "string" || systemPrompt.trim() === "") {
      throw new Error("systemPrompt must be a non-empty string");
    }
    this.#modelFactory = options.modelFactory;
    this.#toolsFactory = options.toolsFactory;
    this.#hooks = options.hooks;
    this.#permissionPolicy = options.permissionPolicy;
    this.#systemPrompt = systemPrompt;
    this.#maxTurns = maxTurns;
    this.#onEvent = options.onEvent;
    this.#onFailure = options.onFailure;
    this.toolDefinition = Object.freeze({
      name: TASK_TOOL_NAME,
      description: "Launch an isolated subagent and return only its final conclusion.",
      inputSchema: taskInputSchema,
      effect: "external",
      handler: (input: TaskInput, context: ToolContext) => this.#runTask(input, context),
    });
  }

  async #runTask(input: TaskInput, context: ToolContext): Promise<ToolResult> {
    if (this.#runs >= MAX_SUBAGENT_RUNS) return LIMIT_REACHED;
    this.#runs += 1;
    try {
      const tools: unknown = this.#toolsFactory();
      if (!(tools instanceof ToolRegistry)) {
        return toolError("subagent_configuration_error", "Subagent tools factory must return ToolRegistry");
      }
      // Checked before any runner exists: a misconfigured factory costs no model call and has no effect.
      if (tools.names.includes(TASK_TOOL_NAME)) {
        return toolError("subagent_configuration_error", "Subagent tools must not include task");
      }
      const model: unknown = this.#modelFactory();
      if (!isModelClient(model)) {
        return toolError("subagent_configuration_error", "Subagent model factory must return ModelClient");
      }
      const runner = new AgentRunner({
        model,
        tools,
        systemPrompt: this.#systemPrompt,
        workspace: context.workspace,
        identity: context.identity,
        maxTurns: this.#maxTurns,
        hooks: this.#hooks,
        permissionPolicy: this.#permissionPolicy,
        ...(this.#onEvent === undefined ? {} : { onEvent: this.#onEvent }),
      });
      const result = await runner.run(input.description);
      return toolSuccess(conclusion(result.finalText));
    } catch (error) {
      this.#tellFailure(error);
      // No conclusion is safer than an unreliable one: never the child's last tool output, never its error text.
      // The turn cap only: a child whose conversation outgrew its byte budget did not run out of turns.
      if (error instanceof AgentLimitError && !(error instanceof ConversationLimitError)) {
        return toolError("subagent_turn_limit", `Subagent exceeded max_turns=${this.#maxTurns} without a final answer`);
      }
      return toolError("subagent_execution_error", "Subagent execution failed");
    }
  }

  #tellFailure(error: unknown): void {
    try {
      this.#onFailure?.(error);
    } catch {
      // Only a report for the person: its failure must not change what the model reads.
    }
  }
}

/**
 * The child's final text as the parent reads it: whole when it fits in `MAX_SUBAGENT_ANSWER_BYTES`, else as much of
 * its start as fits beside a line saying how many bytes were left out, cut between two characters.
 */
function conclusion(finalText: string): string {
  const bytes = new TextEncoder().encode(finalText);
  if (bytes.byteLength <= MAX_SUBAGENT_ANSWER_BYTES) return finalText;
  const note = (kept: number): string =>
    `\n[Subagent answer cut: ${bytes.byteLength - kept} of its ${bytes.byteLength} UTF-8 bytes are not shown]`;
  // Room for the longest note there can be (every byte cut): the one printed is never longer.
  let kept = MAX_SUBAGENT_ANSWER_BYTES - new TextEncoder().encode(note(0)).byteLength;
  while ((bytes[kept] ?? 0) >> 6 === 0b10) kept -= 1;
  return `${new TextDecoder().decode(bytes.subarray(0, kept))}${note(kept)}`;
}

function isModelClient(value: unknown): value is ModelClient {
  return (
    typeof value === "object" && value !== null && typeof (value as { complete?: unknown }).complete === "function"
  );
}
