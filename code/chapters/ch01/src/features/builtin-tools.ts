import { z } from "zod";
import type { CommandResult, CommandRunner } from "../core/commands.js";
import { ToolRegistry, toolError, toolSuccess } from "../core/tools.js";
import type { ToolDefinition, ToolResult } from "../core/tools.js";

export const shellInputSchema = z.strictObject({ command: z.string().min(1) });

/** The `shell` tool: one PowerShell command per call, run by the injected `CommandRunner`. */
export function createShellTool(commandRunner: CommandRunner): ToolDefinition<{ command: string }> {
  return {
    name: "shell",
    description: "Run a PowerShell command in the current workspace.",
    inputSchema: shellInputSchema,
    effect: "execute",
    handler: async ({ command }, context) => {
      let result: CommandResult;
      try {
        result = await commandRunner.run(command, context.workspace);
      } catch {
        // The runner rejects only when no process could start; the model learns that, not the stack.
        return toolError("shell_start_failed", "PowerShell process could not be started");
      }
      return shellResult(result);
    },
  };
}

/** Every outcome of a command is a value the model can read and act on; none of them throws. */
function shellResult({ output, exitCode, timedOut, truncated }: CommandResult): ToolResult {
  const text = (output === "" ? "(no output)" : output) + (truncated ? "\n[output truncated]" : "");
  if (timedOut) return toolError("shell_timeout", text);
  if (exitCode === 0) return toolSuccess(text);
  // No exit code and no timeout: something outside killed the process, and the model is told so.
  const how = exitCode === null ? "was killed before it exited" : `exited with code ${String(exitCode)}`;
  return toolError("shell_failed", `PowerShell ${how}\n${text}`);
}

/** Chapter 1's action space: one tool, `shell`. */
export function createChapterOneTools(commandRunner: CommandRunner): ToolRegistry {
  const registry = new ToolRegistry();
  registry.register(createShellTool(commandRunner));
  return registry;
}
