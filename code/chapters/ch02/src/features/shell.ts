import { z } from "zod";
import { CommandStartError, type CommandResult, type CommandRunner, type SavedOutput } from "../core/command-runner.js";
import { defineTool } from "../core/tool.js";
import { toolError, toolSuccess, type ToolResult } from "../core/tool-result.js";

const DESCRIPTION =
  "Run one PowerShell command in the workspace folder and return its combined output. " +
  "Use PowerShell syntax (Get-ChildItem, Get-Content, Select-String), not bash.";

const input = z.strictObject({
  command: z.string().min(1).describe("The PowerShell command to run"),
});

/** The `shell` tool: one PowerShell command per call, run by the injected `CommandRunner`. */
export function shellTool(runner: CommandRunner) {
  return defineTool({
    name: "shell",
    description: DESCRIPTION,
    inputSchema: input,
    effect: "execute",
    handler: ({ command }, context) => runShellCommand(runner, command, context.workspace),
  });
}

/** Where long output is saved, relative to the workspace; the model is told the file's name. */
export const SHELL_OUTPUT_FOLDER = ".agent/shell-output";

export async function runShellCommand(runner: CommandRunner, command: string, cwd: string): Promise<ToolResult> {
  const saveAs = `${SHELL_OUTPUT_FOLDER}/shell-${Date.now()}-${Math.random().toString(36).slice(2, 8)}.log`;
  let result: CommandResult;
  try {
    result = await runner.run({ command, cwd, fullOutputPath: `${cwd}/${saveAs}` });
  } catch (error) {
    if (error instanceof CommandStartError) {
      return toolError("shell_start_failed", "PowerShell process could not be started");
    }
    throw error;
  }
  const output =
    (result.output === "" ? "(no output)" : result.output) +
    (result.truncated ? "\n[output truncated]" : "") +
    (result.savedOutput === undefined ? "" : savedNote(saveAs, result.savedOutput));
  if (result.timedOut) return toolError("shell_timeout", `PowerShell command timed out\n${output}`);
  if (result.exitCode !== 0) {
    return toolError("shell_failed", `PowerShell exited with code ${result.exitCode}\n${output}`);
  }
  return toolSuccess(output);
}

function savedNote(path: string, saved: SavedOutput): string {
  const what = saved.complete ? `full output (${saved.bytes} bytes)` : `first ${saved.bytes} bytes of output`;
  return `\n[${what} saved to ${path}; read it in pages with read_file]`;
}
