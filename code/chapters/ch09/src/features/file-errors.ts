import {
  FileNotFoundError,
  FileSystemOperationError,
  InvalidFilePathError,
  InvalidUtf8Error,
  TextNotFoundError,
  WorkspacePathError,
} from "../core/filesystem.js";
import { toolError, type ToolResult } from "../core/tools.js";

/**
 * Runs a file operation and turns the errors the file system names into stable tool errors.
 * Anything else is unexpected and propagates, so the registry reports it as `tool_execution_error`
 * instead of passing a real bug off as an ordinary failure. `failure` says what could not be done.
 */
export async function withFileErrors(failure: string, operation: () => Promise<ToolResult>): Promise<ToolResult> {
  try {
    return await operation();
  } catch (error) {
    if (error instanceof WorkspacePathError) return toolError("path_escape", error.message);
    if (error instanceof TextNotFoundError) return toolError("text_not_found", error.message);
    if (error instanceof InvalidUtf8Error) return toolError("invalid_utf8", error.message);
    if (error instanceof FileNotFoundError) return toolError("file_not_found", error.message);
    if (error instanceof InvalidFilePathError) return toolError("invalid_path", error.message);
    if (error instanceof FileSystemOperationError) return toolError("filesystem_error", `${failure} (${error.detail})`);
    throw error;
  }
}
