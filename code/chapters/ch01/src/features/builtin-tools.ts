import type { CommandRunner } from "../core/command-runner.js";
import type { CapabilitySet } from "../core/profiles.js";
import type { Tool } from "../core/tool.js";
import { shellTool } from "./shell.js";

export interface BuiltinToolDependencies {
  readonly commandRunner: CommandRunner;
}

/** The tools a chapter's capabilities switch on. Chapter 1 has one: `shell`. */
export function builtinTools(capabilities: CapabilitySet, deps: BuiltinToolDependencies): Tool[] {
  const tools: Tool[] = [];
  if (capabilities.has("powershell")) tools.push(shellTool(deps.commandRunner));
  return tools;
}
