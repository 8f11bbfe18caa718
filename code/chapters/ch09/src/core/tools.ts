import { z } from "zod";
import type { ToolCall } from "./messages.js";
import type { OpenAIToolSchema } from "./model.js";

/**
 * What a tool call gives back to the model. Failures the model can act on are values with a
 * stable `errorCode`, never exceptions: the model reads `content`, a program reads the code.
 */
export interface ToolResult {
  /** Text placed in the `tool` message the model reads next. */
  readonly content: string;
  readonly isError: boolean;
  /** Stable, machine-readable cause; present exactly when `isError` is true. */
  readonly errorCode?: string;
}

export function toolSuccess(content: string): ToolResult {
  return Object.freeze({ content, isError: false });
}

export function toolError(code: string, message: string): ToolResult {
  return Object.freeze({ content: `Error [${code}]: ${message}`, isError: true, errorCode: code });
}

/** A frozen copy of a result someone else built: later changes to their object cannot reach the history. */
export function copyToolResult(result: ToolResult): ToolResult {
  if (!isToolResult(result)) throw new TypeError("copyToolResult requires a ToolResult");
  const { content, isError, errorCode } = result;
  return Object.freeze(isError ? { content, isError, errorCode } : { content, isError });
}

export function isToolResult(value: unknown): value is ToolResult {
  if (typeof value !== "object" || value === null) return false;
  const candidate = value as Record<string, unknown>;
  if (typeof candidate.content !== "string" || typeof candidate.isError !== "boolean") return false;
  if (!candidate.isError) return true;
  return typeof candidate.errorCode === "string" && candidate.errorCode.length > 0;
}

/** What every tool call may know about where and for whom it runs. */
export interface ToolContext {
  /** Absolute real path of the folder the agent works in. */
  readonly workspace: string;
  /** On whose behalf the call runs. */
  readonly identity: string;
  /** Reserved for retries that must not repeat a side effect; unused until a later chapter. */
  readonly idempotencyKey?: string;
}

/**
 * What a tool does to the world. The policy's built-in checks read it (the write boundary `write`, the
 * shell default `execute`); `external` starts a run of its own (chapter 6's `task`), and only rules and hooks
 * decide it.
 */
export type ToolEffect = "read" | "write" | "execute" | "external";

/**
 * A tool as its author writes it. One Zod schema both describes the input to the model and
 * validates what the model sends, so the two cannot drift apart.
 */
export interface ToolDefinition<Input = Record<string, unknown>> {
  readonly name: string;
  readonly description: string;
  /** Must be `z.strictObject(...)`: an unknown field is an error, not something to ignore. */
  readonly inputSchema: z.ZodType<Input>;
  readonly effect: ToolEffect;
  readonly handler: (input: Input, context: ToolContext) => Promise<ToolResult>;
}

/**
 * A tool as the registry keeps it. Its handler takes `unknown` and parses it again, so even a
 * caller that skips `prepare()` cannot hand the author's handler unchecked input.
 */
export interface StoredToolDefinition {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: z.ZodType;
  readonly effect: ToolEffect;
  /** The JSON Schema the model sees, computed once at registration. */
  readonly parameters: Readonly<Record<string, unknown>>;
  readonly handler: (input: unknown, context: ToolContext) => Promise<ToolResult>;
}

/** A call whose tool exists and whose arguments passed the schema. */
export interface ValidToolCall {
  readonly call: ToolCall;
  readonly definition: StoredToolDefinition;
  readonly arguments: Readonly<Record<string, unknown>>;
  /** Never set: lets a caller write `prepared.error === undefined` to tell the two kinds apart. */
  readonly error?: undefined;
}

/** A call that never reaches a handler; `error` is what the model is told. */
export interface InvalidToolCall {
  readonly call: ToolCall;
  readonly error: ToolResult;
}

export type PreparedToolCall = ValidToolCall | InvalidToolCall;

const NAME = /^[A-Za-z0-9_]+$/;
/** Characters of an unknown name that its error repeats: 64 is the most a tool name may have at OpenAI. */
const SHOWN_NAME_CHARS = 64;
/** Issues an `invalid_arguments` error lists, and characters of their text: one call may hold thousands. */
const LISTED_ISSUES = 10;
const SHOWN_PROBLEM_CHARS = 1_000;

/**
 * The action space: look a call up, parse its JSON, validate it with Zod (`prepare`, which has no
 * side effect), and only then run the handler (`invoke`).
 */
export class ToolRegistry {
  readonly #tools = new Map<string, StoredToolDefinition>();
  #sealed = false;

  register<Input>(definition: ToolDefinition<Input>): void {
    if (this.#sealed) throw new TypeError("a registry snapshot is read-only");
    if (!NAME.test(definition.name)) throw new TypeError(`invalid tool name "${definition.name}"`);
    if (this.#tools.has(definition.name)) throw new TypeError(`tool "${definition.name}" is already registered`);
    const schema = definition.inputSchema;
    if (!(schema instanceof z.ZodObject) || schema._zod.def.catchall?._zod.def.type !== "never") {
      throw new TypeError(`tool "${definition.name}" must use z.strictObject for its input schema`);
    }
    this.#tools.set(
      definition.name,
      Object.freeze({
        name: definition.name,
        description: definition.description,
        inputSchema: schema,
        effect: definition.effect,
        parameters: deepFreeze(z.toJSONSchema(schema)),
        handler: (input: unknown, context: ToolContext) => {
          const parsed = definition.inputSchema.safeParse(input);
          if (!parsed.success) return Promise.resolve(invalidArguments(definition.name, parsed.error));
          return definition.handler(parsed.data, context);
        },
      }),
    );
  }

  /** The registered names, in registration order: who is offered what (a subagent must never get `task`). */
  get names(): readonly string[] {
    return Object.freeze([...this.#tools.keys()]);
  }

  prepare(call: ToolCall): PreparedToolCall {
    const definition = this.#tools.get(call.name);
    if (definition === undefined) {
      return { call, error: toolError("unknown_tool", `Unknown tool: ${shownName(call.name)}`) };
    }
    const raw = parseObject(call.arguments);
    if (raw === undefined) {
      return { call, error: toolError("invalid_json", `Arguments of ${definition.name} must be a JSON object`) };
    }
    const parsed = definition.inputSchema.safeParse(raw);
    if (!parsed.success) return { call, error: invalidArguments(definition.name, parsed.error) };
    return freezePreparedToolCall({ call, definition, arguments: parsed.data as Readonly<Record<string, unknown>> });
  }

  /** Runs the handler. A throw or a malformed return value becomes a stable error, never a stack trace. */
  async invoke(prepared: ValidToolCall, context: ToolContext): Promise<ToolResult> {
    // Use our own stored definition: a forged `prepared.definition` cannot pick the handler.
    const definition = this.#tools.get(prepared.definition.name);
    if (definition === undefined) {
      return toolError("unknown_tool", `Unknown tool: ${shownName(prepared.definition.name)}`);
    }
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
    for (const [name, definition] of this.#tools) copy.#tools.set(name, definition);
    copy.#sealed = true;
    return copy;
  }

  /** What the model is shown: name, description, JSON Schema; never the handler or the effect. */
  openAITools(): readonly OpenAIToolSchema[] {
    // Frozen all the way down: a model client cannot change what the next turn shows the model.
    return Object.freeze(
      [...this.#tools.values()].map((tool) =>
        Object.freeze({
          type: "function" as const,
          function: Object.freeze({ name: tool.name, description: tool.description, parameters: tool.parameters }),
        }),
      ),
    );
  }
}

/**
 * A valid call nobody can change any more: the arguments are a deep-frozen clone, so whoever kept a
 * reference to the object they came from (a hook, say) cannot change what is approved or what runs.
 */
export function freezePreparedToolCall(prepared: ValidToolCall): ValidToolCall {
  return Object.freeze({
    call: prepared.call,
    definition: prepared.definition,
    arguments: deepFreeze(structuredClone(prepared.arguments)),
  });
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
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

/**
 * Names the fields that failed, at most 1,000 characters of them: Zod's text quotes the model's own keys
 * (`Unrecognized key: "…"`), and a result the model can make as large as it likes is one chapter 8 saves to a file.
 */
function invalidArguments(tool: string, error: z.ZodError): ToolResult {
  const problems = error.issues
    .slice(0, LISTED_ISSUES)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(arguments)"}: ${issue.message}`);
  const unlisted = error.issues.length - problems.length;
  if (unlisted > 0) problems.push(`${unlisted} more`);
  return toolError(
    "invalid_arguments",
    `Invalid arguments for ${tool}: ${cut(problems.join("; "), SHOWN_PROBLEM_CHARS)}`,
  );
}

/**
 * A name the model sent, as an error repeats it: its first 64 characters, letters, digits, `_`, `-` and `.` as they
 * are and any other as `\uXXXX`, then `…` if it went on. The model chose every byte: repeated whole, a 31 KB name
 * is a 31 KB result, which chapter 8 saves to a file nobody was asked about; repeated raw, a control character in
 * it reaches the terminal, and `;`, `$(` or a newline in it would run if that file were ever run.
 */
function shownName(name: string): string {
  const head = name.slice(0, SHOWN_NAME_CHARS);
  const shown = head.replace(/[^A-Za-z0-9_.-]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, "0")}`);
  return head.length < name.length ? `${shown}…` : shown;
}

/** The first `chars` UTF-16 units of `text` and `…`, never half a surrogate pair; `text` itself when it fits. */
function cut(text: string, chars: number): string {
  if (text.length <= chars) return text;
  const last = text.charCodeAt(chars - 1);
  return `${text.slice(0, last >= 0xd800 && last <= 0xdbff ? chars - 1 : chars)}…`;
}
