import type { AgentEvent } from "../core/agent-events.js";
import type { Terminal } from "./terminal.js";
import { visible } from "./visible.js";

const MAX_ARGUMENT_CHARS = 120;

/** Shows each step as it happens: waiting on the model, each tool call, and how it ended. */
export function progressListener(terminal: Terminal): (event: AgentEvent) => void {
  return (event) => {
    switch (event.type) {
      case "model_request":
        terminal.status(`等待模型回复 (第 ${event.turn} 轮)…`);
        return;
      case "tool_call":
        // Escape first, then shorten: escapes must not make a line longer than the cap.
        terminal.line(`→ ${shorten(visible(event.call.name))} ${shorten(visible(event.call.arguments))}`);
        return;
      case "tool_result": {
        const { result } = event;
        if (!result.isError) terminal.line(`  ${terminal.green("✓ ok")}`);
        else if (result.errorCode === "permission_denied") terminal.line(`  ${terminal.yellow("✗ denied")}`);
        else terminal.line(`  ${terminal.red(`✗ ${result.errorCode ?? "error"}`)}`);
        return;
      }
    }
  };
}

function shorten(text: string): string {
  const flat = text.replace(/\s+/g, " ");
  return flat.length <= MAX_ARGUMENT_CHARS ? flat : `${flat.slice(0, MAX_ARGUMENT_CHARS - 1)}…`;
}
