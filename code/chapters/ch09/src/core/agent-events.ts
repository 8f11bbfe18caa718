import type { ToolCall } from "./messages.js";
import type { ToolResult } from "./tools.js";

/** What the loop reports as it goes, so a CLI can show progress without reaching into the loop. */
export type AgentEvent =
  /** About to ask the model for turn `turn` (1-based). */
  | { readonly type: "model_request"; readonly turn: number }
  /** The model asked for a tool call; it has not run yet. */
  | { readonly type: "tool_call"; readonly call: ToolCall }
  /** The tool message the model will read for `call`. */
  | { readonly type: "tool_result"; readonly call: ToolCall; readonly result: ToolResult };

export type AgentEventListener = (event: AgentEvent) => void;
