import { AgentLimitError, AgentRunError, IncompleteModelReplyError, ModelCallError } from "./agent-errors.js";
import type { AgentEventListener } from "./agent-events.js";
import { validateToolPairing, type ChatMessage, type ToolCall } from "./messages.js";
import type { ModelClient } from "./model-client.js";
import type { PermissionPolicy } from "./permission-policy.js";
import { PermissionDecision, PermissionRequest } from "./permissions.js";
import type { ToolContext } from "./tool.js";
import type { ToolRegistry } from "./tool-registry.js";
import { toolError, type ToolResult } from "./tool-result.js";

export interface AgentRunnerOptions {
  readonly model: ModelClient;
  readonly tools: ToolRegistry;
  readonly context: ToolContext;
  readonly systemPrompt: string;
  readonly maxTurns: number;
  /** Decides every prepared call before it runs; without one, calls run unasked (offline unit tests only). */
  readonly policy?: PermissionPolicy;
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

  /** prepare → permission → handler, in that order; every path returns exactly one result. */
  private async execute(call: ToolCall, tools: ToolRegistry): Promise<ToolResult> {
    const prepared = tools.prepare(call);
    if ("error" in prepared) return prepared.error;
    const { policy, context } = this.options;
    if (policy !== undefined) {
      try {
        const decision = await policy.decide(new PermissionRequest({ prepared, context }));
        if (!PermissionDecision.isDecision(decision) || decision.behavior !== "allow") return decision.toToolResult();
      } catch {
        // A broken contract or a failed audit: the handler must not run, and the model gets no stack trace.
        return toolError("permission_evaluation_error", "Permission evaluation failed");
      }
    }
    return tools.invoke(prepared, context);
  }
}
