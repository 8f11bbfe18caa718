import type { AgentEvent } from "../core/agent-events.js";
import { progressRows } from "./approval-view.js";
import type { Terminal } from "./terminal.js";
import { oneLine } from "./visible.js";

/** Marks a subagent's progress rows and status (chapter 6): its turns and calls interleave with the parent's. */
export const SUBAGENT_LEAD = "子 Agent ";

/**
 * Shows each step as it happens: waiting on the model, each tool call, and how it ended. `lead` starts every row
 * and status of this listener's run (`SUBAGENT_LEAD` for a child's).
 */
export function progressListener(terminal: Terminal, lead = ""): (event: AgentEvent) => void {
  return (event) => {
    switch (event.type) {
      case "model_request":
        terminal.status(`${lead}等待模型回复 (第 ${event.turn} 轮)…`);
        return;
      case "tool_call":
        // The model's name and arguments, bounded like the approval's view of them.
        for (const row of progressRows(event.call.name, event.call.arguments, lead)) terminal.line(row);
        return;
      case "tool_result": {
        const { result } = event;
        if (!result.isError) terminal.line(`${lead}  ${terminal.green("✓ ok")}`);
        else if (result.errorCode === "permission_denied") terminal.line(`${lead}  ${terminal.yellow("✗ denied")}`);
        else terminal.line(`${lead}  ${terminal.red(`✗ ${oneLine(result.errorCode ?? "error")}`)}`);
        return;
      }
    }
  };
}
