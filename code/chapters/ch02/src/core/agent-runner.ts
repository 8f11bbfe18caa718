import { AgentLimitError, AgentRunError, IncompleteModelReplyError, ModelCallError } from "./agent-errors.js";
import type { AgentEventListener } from "./agent-events.js";
import type { ApprovalProvider } from "./approval.js";
import { validateToolPairing, type ChatMessage, type ToolCall } from "./messages.js";
import type { ModelClient } from "./model-client.js";
import type { ToolContext } from "./tool.js";
import type { ToolRegistry, ValidToolCall } from "./tool-registry.js";
import { toolError, type ToolResult } from "./tool-result.js";

export interface AgentRunnerOptions {
  readonly model: ModelClient;
  readonly tools: ToolRegistry;
  readonly context: ToolContext;
  readonly systemPrompt: string;
  readonly maxTurns: number;
  /** Asked before every `execute` call; without one, calls run unasked (offline unit tests only). */
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
  constructor(private readonly options: AgentRunnerOptions) {}

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
    for (let turn = 1; turn <= maxTurns; turn += 1) {
      validateToolPairing(history);
      // One snapshot per turn: the tools offered to the model are exactly the tools that run.
      const tools = this.options.tools.snapshot();
      onEvent?.({ type: "model_request", turn });
      const reply = await model.complete({ messages: [...history], tools: tools.openAITools() });
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
        const result = await this.execute(call, tools);
        onEvent?.({ type: "tool_result", call, result });
        history.push({ role: "tool", tool_call_id: call.id, content: result.content });
      }
    }
    throw new AgentLimitError(maxTurns);
  }

  private async execute(call: ToolCall, tools: ToolRegistry): Promise<ToolResult> {
    const prepared = tools.prepare(call);
    if ("error" in prepared) return prepared.error;
    if (prepared.definition.effect === "execute" && !(await this.approve(prepared))) {
      return toolError("permission_denied", "The user did not approve this tool call");
    }
    return tools.invoke(prepared, this.options.context);
  }

  private async approve(prepared: ValidToolCall): Promise<boolean> {
    const provider = this.options.approvalProvider;
    if (provider === undefined) return true;
    try {
      const request = {
        toolName: prepared.definition.name,
        reason: "Shell execution requires approval",
        arguments: prepared.arguments,
      };
      // Only a real `true` approves: a JavaScript provider returning "yes" or 1 must not slip through.
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-boolean-literal-compare
      return (await provider.approve(request)) === true;
    } catch {
      return false;
    }
  }
}
