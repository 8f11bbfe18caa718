import type { CommandRunner } from "../core/command-runner.js";
import type { CapabilitySet } from "../core/profiles.js";
import type { ToolRegistry } from "../core/tool-registry.js";
import type { WorkspaceFileSystem } from "../core/workspace-fs.js";
import { editFileTool } from "./edit-file.js";
import { globTool } from "./glob.js";
import { readFileTool } from "./read-file.js";
import { shellTool } from "./shell.js";
import { writeFileTool } from "./write-file.js";

export interface BuiltinToolDependencies {
  readonly commandRunner: CommandRunner;
  readonly fileSystem: WorkspaceFileSystem;
}

/** Registers the tools a chapter's capabilities switch on: `shell` from chapter 1, the file tools from chapter 2. */
export function registerBuiltinTools(
  registry: ToolRegistry,
  capabilities: CapabilitySet,
  deps: BuiltinToolDependencies,
): void {
  if (capabilities.has("powershell")) registry.register(shellTool(deps.commandRunner));
  if (capabilities.has("files")) {
    registry.register(readFileTool(deps.fileSystem));
    registry.register(writeFileTool(deps.fileSystem));
    registry.register(editFileTool(deps.fileSystem));
    registry.register(globTool(deps.fileSystem));
  }
}
