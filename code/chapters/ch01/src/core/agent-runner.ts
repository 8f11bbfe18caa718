import { AgentLimitError, AgentRunError, IncompleteModelReplyError, ModelCallError } from "./agent-errors.js";
import type { AgentEventListener } from "./agent-events.js";
import type { ApprovalProvider } from "./approval.js";
import { validateToolPairing, type ChatMessage, type ToolCall } from "./messages.js";
import type { ModelClient } from "./model-client.js";
import type { Tool, ToolContext } from "./tool.js";
import { toolError, type ToolResult } from "./tool-result.js";

export interface AgentRunnerOptions {
  readonly model: ModelClient;
  readonly tools: readonly Tool[];
  readonly context: ToolContext;
  readonly systemPrompt: string;
  readonly maxTurns: number;
  /** Asked before every tool call; without one, calls run unasked (offline unit tests only). */
  readonly approvalProvider?: ApprovalProvider;
  readonly onEvent?: AgentEventListener;
}

export interface RunResult {
  readonly finalText: string;
  /** Model calls made, the last one included. */
  readonly turns: number;
  readonly history: readonly ChatMessage[];
}

/** Ask the model, run each tool call it asks for, append the paired results, repeat. */
export class AgentRunner {
  private readonly tools: ReadonlyMap<string, Tool>;

  constructor(private readonly options: AgentRunnerOptions) {
    this.tools = new Map(options.tools.map((tool) => [tool.name, tool]));
  }

  async run(prompt: string): Promise<RunResult> {
    const history: ChatMessage[] = [
      { role: "system", content: this.options.systemPrompt },
      { role: "user", content: prompt },
    ];
    try {
      return await this.loop(history);
    } catch (error) {
      if (error instanceof AgentRunError) error.history = [...history];
      throw error;
    }
  }

  private async loop(history: ChatMessage[]): Promise<RunResult> {
    const { model, maxTurns, onEvent } = this.options;
    const schemas = this.options.tools.map((tool) => ({
      type: "function" as const,
      function: { name: tool.name, description: tool.description, parameters: tool.parameters },
    }));
    for (let turn = 1; turn <= maxTurns; turn += 1) {
      validateToolPairing(history);
      onEvent?.({ type: "model_request", turn });
      const reply = await model.complete({ messages: [...history], tools: schemas });
      if (reply.finishReason === "length" || reply.finishReason === "content_filter") {
        throw new IncompleteModelReplyError(reply.finishReason);
      }
      const calls = reply.message.tool_calls ?? [];
      // Two calls with one id could never be answered apart: refuse the reply before anything runs.
      if (new Set(calls.map((call) => call.id)).size !== calls.length) {
        throw new ModelCallError("The model sent two tool calls with the same id");
      }
      history.push(reply.message);
      if (calls.length === 0) {
        const finalText = reply.message.content?.trim() ?? "";
        if (finalText === "") throw new IncompleteModelReplyError(reply.finishReason);
        return { finalText, turns: turn, history };
      }
      for (const call of calls) {
        onEvent?.({ type: "tool_call", call });
        const result = await this.execute(call);
        onEvent?.({ type: "tool_result", call, result });
        history.push({ role: "tool", tool_call_id: call.id, content: result.content });
      }
    }
    throw new AgentLimitError(maxTurns);
  }

  private async execute(call: ToolCall): Promise<ToolResult> {
    const tool = this.tools.get(call.function.name);
    if (tool === undefined) return toolError("unknown_tool", `Unknown tool: ${call.function.name}`);
    const args = parseArguments(call.function.arguments);
    if (args === undefined) {
      return toolError("invalid_json", `Arguments of ${tool.name} must be a JSON object`);
    }
    if (!(await this.approve(tool, args))) {
      return toolError("permission_denied", "The user did not approve this tool call");
    }
    try {
      return await tool.execute(args, this.options.context);
    } catch {
      // The model gets a stable code, never a stack trace.
      return toolError("tool_execution_error", `Tool ${tool.name} failed unexpectedly`);
    }
  }

  private async approve(tool: Tool, args: Readonly<Record<string, unknown>>): Promise<boolean> {
    const provider = this.options.approvalProvider;
    if (provider === undefined) return true;
    try {
      const request = { toolName: tool.name, reason: "Shell execution requires approval", arguments: args };
      // Only a real `true` approves: a JavaScript provider returning "yes" or 1 must not slip through.
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-boolean-literal-compare
      return (await provider.approve(request)) === true;
    } catch {
      return false;
    }
  }
}

function parseArguments(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text === "" ? "{}" : text);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) {
      return value as Record<string, unknown>;
    }
  } catch {
    // Not JSON: fall through.
  }
  return undefined;
}
