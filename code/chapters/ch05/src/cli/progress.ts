import type { AgentEvent } from "../core/agent-events.js";
import { progressRows } from "./approval-view.js";
import type { Terminal } from "./terminal.js";
import { oneLine } from "./visible.js";

/** Shows each step as it happens: waiting on the model, each tool call, and how it ended. */
export function progressListener(terminal: Terminal): (event: AgentEvent) => void {
  return (event) => {
    switch (event.type) {
      case "model_request":
        terminal.status(`等待模型回复 (第 ${event.turn} 轮)…`);
        return;
      case "tool_call":
        // The model's name and arguments, bounded like the approval's view of them.
        for (const row of progressRows(event.call.name, event.call.arguments)) terminal.line(row);
        return;
      case "tool_result": {
        const { result } = event;
        if (!result.isError) terminal.line(`  ${terminal.green("✓ ok")}`);
        else if (result.errorCode === "permission_denied") terminal.line(`  ${terminal.yellow("✗ denied")}`);
        else terminal.line(`  ${terminal.red(`✗ ${oneLine(result.errorCode ?? "error")}`)}`);
        return;
      }
    }
  };
}
