import { toolError, type ToolResult } from "../core/tools.js";
import { FileNotFoundError, FileTooLargeError, NotAFileError, WorkspacePathError } from "../core/workspace-fs.js";

/**
 * Runs a file operation and turns the workspace's domain errors into stable tool errors.
 * Anything else is unexpected and propagates: the registry reports it as `tool_execution_error`.
 */
export async function withFileErrors(operation: () => Promise<ToolResult>): Promise<ToolResult> {
  try {
    return await operation();
  } catch (error) {
    if (error instanceof WorkspacePathError) {
      return error.problem === "escape"
        ? toolError("path_escape", error.message)
        : toolError("invalid_path", error.message);
    }
    if (error instanceof FileNotFoundError) return toolError("file_not_found", error.message);
    if (error instanceof NotAFileError) return toolError("not_a_file", error.message);
    if (error instanceof FileTooLargeError) return toolError("file_too_large", error.message);
    throw error;
  }
}
