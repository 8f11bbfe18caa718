import type { ToolResult } from "./tool-result.js";

/** What every tool call may know about where and for whom it runs. */
export interface ToolContext {
  /** Absolute real path of the folder the agent works in. */
  readonly workspace: string;
  /** Who the agent acts for, e.g. `agent-tutorial/ch01`. */
  readonly identity: string;
}

/**
 * A tool in its simplest form: a name, a description and a JSON Schema for the model, and a
 * function that checks its own arguments. Chapter 2 replaces this with a registry and Zod.
 */
export interface Tool {
  readonly name: string;
  readonly description: string;
  readonly parameters: Readonly<Record<string, unknown>>;
  execute(args: Readonly<Record<string, unknown>>, context: ToolContext): Promise<ToolResult>;
}
