import { z } from "zod";
import type { ToolCall } from "./messages.js";
import type { ToolSchema } from "./model-client.js";
import type { StoredToolDefinition, ToolContext, ToolDefinition } from "./tool.js";
import { isToolResult, toolError, type ToolResult } from "./tool-result.js";

/** A call whose tool exists and whose arguments passed the schema. */
export interface ValidToolCall {
  readonly call: ToolCall;
  readonly definition: StoredToolDefinition;
  readonly arguments: Readonly<Record<string, unknown>>;
}

/** A call that never reaches a handler; `error` is what the model is told. */
export interface InvalidToolCall {
  readonly call: ToolCall;
  readonly error: ToolResult;
}

export type PreparedToolCall = ValidToolCall | InvalidToolCall;

const NAME = /^[A-Za-z0-9_]+$/;

/** Looks a call up, parses its JSON, validates it with Zod, and only then invokes the handler. */
export class ToolRegistry {
  private readonly tools = new Map<string, StoredToolDefinition>();
  private sealed = false;

  register<Schema extends z.ZodObject>(definition: ToolDefinition<Schema>): void {
    if (this.sealed) throw new TypeError("a registry snapshot is read-only");
    if (!NAME.test(definition.name)) throw new TypeError(`invalid tool name "${definition.name}"`);
    if (this.tools.has(definition.name)) throw new TypeError(`tool "${definition.name}" is already registered`);
    if (definition.inputSchema._zod.def.catchall?._zod.def.type !== "never") {
      throw new TypeError(`tool "${definition.name}" must use z.strictObject for its input schema`);
    }
    const parameters: Record<string, unknown> = z.toJSONSchema(definition.inputSchema);
    delete parameters.$schema;
    const schema = definition.inputSchema;
    this.tools.set(
      definition.name,
      Object.freeze({
        name: definition.name,
        description: definition.description,
        inputSchema: schema,
        effect: definition.effect,
        parameters,
        handler: (input: unknown, context: ToolContext) => {
          const parsed = schema.safeParse(input);
          if (!parsed.success) return Promise.resolve(invalidArguments(definition.name, parsed.error));
          return definition.handler(parsed.data, context);
        },
      }),
    );
  }

  prepare(call: ToolCall): PreparedToolCall {
    const definition = this.tools.get(call.function.name);
    if (definition === undefined)
      return { call, error: toolError("unknown_tool", `Unknown tool: ${call.function.name}`) };
    const raw = parseObject(call.function.arguments);
    if (raw === undefined) {
      return { call, error: toolError("invalid_json", `Arguments of ${definition.name} must be a JSON object`) };
    }
    const parsed = definition.inputSchema.safeParse(raw);
    if (!parsed.success) return { call, error: invalidArguments(definition.name, parsed.error) };
    return { call, definition, arguments: parsed.data };
  }

  /** Runs the handler. A throw or a malformed return value becomes a stable error, never a stack trace. */
  async invoke(prepared: ValidToolCall, context: ToolContext): Promise<ToolResult> {
    // Use our own stored definition: a forged `prepared.definition` cannot pick the handler.
    const definition = this.tools.get(prepared.definition.name);
    if (definition === undefined) return toolError("unknown_tool", `Unknown tool: ${prepared.definition.name}`);
    let result: unknown;
    try {
      result = await definition.handler(prepared.arguments, context);
    } catch {
      return toolError("tool_execution_error", `Tool ${definition.name} failed unexpectedly`);
    }
    return isToolResult(result) ? result : toolError("invalid_tool_result", "Tool handler returned an invalid result");
  }

  /** A read-only copy for one turn: registering later cannot change what this turn offered or runs. */
  snapshot(): ToolRegistry {
    const copy = new ToolRegistry();
    for (const [name, definition] of this.tools) copy.tools.set(name, definition);
    copy.sealed = true;
    return copy;
  }

  /** What the model is shown: name, description, JSON Schema; never the handler or the effect. */
  openAITools(): ToolSchema[] {
    return [...this.tools.values()].map((tool) => ({
      type: "function",
      function: { name: tool.name, description: tool.description, parameters: tool.parameters },
    }));
  }
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text === "" ? "{}" : text);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Not JSON: fall through.
  }
  return undefined;
}

function invalidArguments(tool: string, error: z.ZodError): ToolResult {
  const problems = error.issues.map(
    (issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(arguments)"}: ${issue.message}`,
  );
  return toolError("invalid_arguments", `Invalid arguments for ${tool}: ${problems.join("; ")}`);
}
