import { z } from "zod";
import type { CommandResult, CommandRunner } from "../core/commands.js";
import { ToolRegistry, toolError, toolSuccess } from "../core/tools.js";
import type { ToolDefinition, ToolResult } from "../core/tools.js";
import { GLOB_RESULT_LIMIT, type WorkspaceFileSystem } from "../core/filesystem.js";
import { shownPath } from "../core/safe-path.js";
import { withFileErrors } from "./file-errors.js";

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

export const readFileInputSchema = z.strictObject({
  path: z.string().min(1).describe("Workspace-relative file path. Escapes and device names are rejected."),
  limit: z.number().int().positive().optional().describe("Optional maximum number of lines to return."),
});

export const writeFileInputSchema = z.strictObject({
  path: z
    .string()
    .min(1)
    .describe("Workspace-relative destination path; parent directories are created automatically."),
  content: z.string().describe("UTF-8 text content to write; an empty string clears the file."),
});

export const editFileInputSchema = z.strictObject({
  path: z.string().min(1).describe("Workspace-relative target file path."),
  old_text: z.string().min(1).describe("Exact existing text to replace; only the first occurrence is changed."),
  new_text: z.string().describe("Replacement text; an empty string deletes the matched text."),
});

export const globInputSchema = z.strictObject({
  pattern: z.string().min(1).describe("Workspace-relative glob pattern, for example **/*.ts."),
});

export function createReadFileTool(
  fileSystem: WorkspaceFileSystem,
): ToolDefinition<z.infer<typeof readFileInputSchema>> {
  return {
    name: "read_file",
    description:
      "Read a UTF-8 text file in the workspace. Without limit it returns the whole file; with limit, the first " +
      "limit lines and then a line '... (N more lines)'. Use it instead of shell to look at files. Fails with " +
      "invalid_utf8 for binary files, file_not_found (find the path with glob) or path_escape.",
    inputSchema: readFileInputSchema,
    effect: "read",
    handler: ({ path, limit }, context) =>
      withFileErrors(`Could not read file: ${shownPath(path)}`, async () =>
        toolSuccess(await fileSystem.readFile(context.workspace, path, limit)),
      ),
  };
}

export function createWriteFileTool(
  fileSystem: WorkspaceFileSystem,
): ToolDefinition<z.infer<typeof writeFileInputSchema>> {
  return {
    name: "write_file",
    description:
      "Create or overwrite a UTF-8 text file in the workspace with the given content; missing parent folders " +
      "are created. Returns how many UTF-8 bytes were written. Use it instead of shell to write files.",
    inputSchema: writeFileInputSchema,
    effect: "write",
    handler: ({ path, content }, context) =>
      withFileErrors(`Could not write file: ${shownPath(path)}`, async () => {
        const bytes = await fileSystem.writeFile(context.workspace, path, content);
        return toolSuccess(`Wrote ${bytes} UTF-8 bytes to ${shownPath(path)}`);
      }),
  };
}

export function createEditFileTool(
  fileSystem: WorkspaceFileSystem,
): ToolDefinition<z.infer<typeof editFileInputSchema>> {
  return {
    name: "edit_file",
    description:
      "Replace the first exact occurrence of old_text with new_text in a workspace file. It takes no line " +
      "numbers: read_file first and copy old_text exactly, whitespace included. If old_text is not found " +
      "(text_not_found) the file is left unchanged: read it again before retrying.",
    inputSchema: editFileInputSchema,
    effect: "write",
    handler: ({ path, old_text, new_text }, context) =>
      withFileErrors(`Could not edit file: ${shownPath(path)}`, async () => {
        await fileSystem.editFile(context.workspace, path, old_text, new_text);
        return toolSuccess(`Edited ${shownPath(path)}`);
      }),
  };
}

export function createGlobTool(fileSystem: WorkspaceFileSystem): ToolDefinition<z.infer<typeof globInputSchema>> {
  return {
    name: "glob",
    description:
      "Find files in the workspace by glob pattern (*, **, ?, [...]). Returns workspace-relative paths with / " +
      "separators, sorted, one per line, or (no matches). Symlinked folders are not entered.",
    inputSchema: globInputSchema,
    effect: "read",
    handler: ({ pattern }, context) =>
      withFileErrors(`Could not list files: ${shownPath(pattern)}`, async () => {
        const paths = await fileSystem.globFiles(context.workspace, pattern);
        if (paths.length === 0) return toolSuccess("(no matches)");
        const shown = paths.slice(0, GLOB_RESULT_LIMIT).join("\n");
        return toolSuccess(
          paths.length > GLOB_RESULT_LIMIT
            ? `${shown}\n[first ${GLOB_RESULT_LIMIT} matches shown; narrow the pattern]`
            : shown,
        );
      }),
  };
}

/** Chapter 2's: chapter 1's registry, and the four file tools over the injected file system. */
export function createChapterTwoTools(commandRunner: CommandRunner, fileSystem: WorkspaceFileSystem): ToolRegistry {
  const registry = createChapterOneTools(commandRunner);
  registry.register(createReadFileTool(fileSystem));
  registry.register(createWriteFileTool(fileSystem));
  registry.register(createEditFileTool(fileSystem));
  registry.register(createGlobTool(fileSystem));
  return registry;
}
