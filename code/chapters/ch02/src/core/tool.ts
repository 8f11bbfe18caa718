import type { z } from "zod";
import type { ToolResult } from "./tool-result.js";

/** What every tool call may know about where and for whom it runs. */
export interface ToolContext {
  /** Absolute real path of the folder the agent works in. */
  readonly workspace: string;
  /** Who the agent acts for, e.g. `agent-tutorial/ch02`. */
  readonly identity: string;
  /** Reserved for retries that must not repeat a side effect; unused until a later chapter. */
  readonly idempotencyKey?: string;
}

/** What a tool does to the world; the permission policy of chapter 3 decides by it. */
export type ToolEffect = "read" | "write" | "execute";

/** A tool as its author writes it: a strict Zod schema and a handler that gets checked input. */
export interface ToolDefinition<Schema extends z.ZodObject = z.ZodObject> {
  readonly name: string;
  readonly description: string;
  /** Must be `z.strictObject(...)`: an unknown field is an error, not something to ignore. */
  readonly inputSchema: Schema;
  readonly effect: ToolEffect;
  handler(input: z.infer<Schema>, context: ToolContext): Promise<ToolResult>;
}

/**
 * A tool as the registry keeps it. Its handler takes `unknown` and parses it again, so even a
 * caller that skips `prepare()` cannot hand the author's handler unchecked input.
 */
export interface StoredToolDefinition {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: z.ZodObject;
  readonly effect: ToolEffect;
  /** The JSON Schema the model sees, computed once at registration. */
  readonly parameters: Readonly<Record<string, unknown>>;
  handler(input: unknown, context: ToolContext): Promise<ToolResult>;
}

/** Keeps `handler`'s input type tied to the schema when a tool is written as an object literal. */
export function defineTool<Schema extends z.ZodObject>(definition: ToolDefinition<Schema>): ToolDefinition<Schema> {
  return definition;
}
