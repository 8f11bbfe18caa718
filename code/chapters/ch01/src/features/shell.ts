import { CommandStartError, type CommandResult, type CommandRunner } from "../core/command-runner.js";
import type { Tool } from "../core/tool.js";
import { toolError, toolSuccess, type ToolResult } from "../core/tool-result.js";

const DESCRIPTION =
  "Run one PowerShell command in the workspace folder and return its combined output. " +
  "Use PowerShell syntax (Get-ChildItem, Get-Content, Select-String), not bash.";

/** The `shell` tool: one PowerShell command per call, run by the injected `CommandRunner`. */
export function shellTool(runner: CommandRunner): Tool {
  return {
    name: "shell",
    description: DESCRIPTION,
    parameters: {
      type: "object",
      properties: { command: { type: "string", description: "The PowerShell command to run" } },
      required: ["command"],
      additionalProperties: false,
    },
    async execute(args, context) {
      const extra = Object.keys(args).filter((key) => key !== "command");
      if (typeof args.command !== "string" || extra.length > 0) {
        return toolError("invalid_arguments", "shell takes exactly one field, command, a string");
      }
      return runShellCommand(runner, args.command, context.workspace);
    },
  };
}

export async function runShellCommand(runner: CommandRunner, command: string, cwd: string): Promise<ToolResult> {
  let result: CommandResult;
  try {
    result = await runner.run({ command, cwd });
  } catch (error) {
    if (error instanceof CommandStartError) {
      return toolError("shell_start_failed", "PowerShell process could not be started");
    }
    throw error;
  }
  const output =
    (result.output === "" ? "(no output)" : result.output) + (result.truncated ? "\n[output truncated]" : "");
  if (result.timedOut) return toolError("shell_timeout", `PowerShell command timed out\n${output}`);
  if (result.exitCode !== 0)
    return toolError("shell_failed", `PowerShell exited with code ${result.exitCode}\n${output}`);
  return toolSuccess(output);
}
