import { isChatMessage, systemMessage, userMessage } from "./messages.js";
import type { ChatMessage, SystemMessage, UserMessage } from "./messages.js";
import { PERMISSION_BEHAVIORS, type PermissionBehavior } from "./permissions.js";
import { workspaceSegments } from "./safe-path.js";
import { copyToolResult, freezePreparedToolCall, isToolResult } from "./tools.js";
import type { ToolResult, ValidToolCall } from "./tools.js";

/** The four places the loop publishes to hooks, frozen: both the runtime set and (below) the type. */
export const HOOK_EVENTS = Object.freeze(["UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"] as const);
export type HookEvent = (typeof HOOK_EVENTS)[number];

/** A hook or its caller broke the hook contract: a wrong field, a wrong return value, a changed tool identity. */
export class HookContractError extends Error {
  override readonly name = "HookContractError";
}

/** A callback took longer than the registry's `timeoutMs`; reported like any other failure of the hook. */
export class HookTimeoutError extends Error {
  override readonly name = "HookTimeoutError";
}

function isHookEvent(value: unknown): value is HookEvent {
  return (HOOK_EVENTS as readonly unknown[]).includes(value);
}

function requireEvent(value: unknown): HookEvent {
  if (!isHookEvent(value)) throw new HookContractError("event must be a HookEvent");
  return value;
}

/** Lists the fields of `given` that `allowed` does not hold, for one error message naming them all. */
function foreignFields(given: Iterable<string>, allowed: readonly string[]): string[] {
  return [...given].filter((field) => !allowed.includes(field));
}

type ContextField = "message" | "prepared" | "result" | "history" | "stopHookActive";

/** What each event may carry; every one of them is also required there. */
const CONTEXT_FIELDS: Readonly<Record<HookEvent, readonly ContextField[]>> = Object.freeze({
  UserPromptSubmit: ["message"],
  PreToolUse: ["prepared"],
  PostToolUse: ["prepared", "result"],
  Stop: ["history", "stopHookActive"],
});

export interface HookContextOptions {
  readonly event: HookEvent;
  readonly message?: ChatMessage;
  readonly prepared?: ValidToolCall;
  readonly result?: ToolResult;
  readonly history?: readonly ChatMessage[];
  readonly stopHookActive?: boolean;
}

/**
 * The file a call's `path` argument names, as the file tools resolve it before they touch the disk: the model may
 * spell one file many ways (`./a.txt`, `a.txt/`, `.//a.txt`, `notes\a.txt`), and a hook that compares the raw
 * text lets all but one through. Undefined when there is no string `path`, or one the tools refuse.
 */
function resolvedPathOf(prepared: ValidToolCall | undefined): string | undefined {
  const path = prepared?.arguments.path;
  if (typeof path !== "string") return undefined;
  try {
    return workspaceSegments(path).join("/");
  } catch {
    return undefined;
  }
}

/** What one event tells its callbacks: frozen, and only the fields that event owns. */
export class HookContext {
  readonly event: HookEvent;
  readonly message: UserMessage | undefined;
  readonly prepared: ValidToolCall | undefined;
  readonly result: ToolResult | undefined;
  readonly history: readonly ChatMessage[] | undefined;
  readonly stopHookActive: boolean | undefined;
  /**
   * Ours, beside `prepared` (Pre and Post): the workspace-relative path the call's `path` argument resolves to,
   * `/`-separated, with no `.` or empty segment. Derived, never given. Lexical: case is kept and links are not
   * followed, since whether `A.txt` is `a.txt`, or where a link leads, is the disk's answer.
   */
  readonly resolvedPath: string | undefined;

  constructor(options: HookContextOptions) {
    const event = requireEvent(options.event);
    const given = Object.keys(options).filter(
      (field) => field !== "event" && (options as unknown as Record<string, unknown>)[field] !== undefined,
    );
    const foreign = foreignFields(given, CONTEXT_FIELDS[event]);
    if (foreign.length > 0)
      throw new HookContractError(`${event} context does not allow fields: ${foreign.join(", ")}`);
    for (const field of CONTEXT_FIELDS[event]) {
      if (!given.includes(field)) throw new HookContractError(`${event} context requires ${field}`);
    }
    const { message, prepared, result, history, stopHookActive } = options;
    if (message !== undefined && !(isChatMessage(message) && message.role === "user")) {
      throw new HookContractError(`${event} context message must be a user message`);
    }
    if (result !== undefined && !isToolResult(result))
      throw new HookContractError(`${event} context result must be a ToolResult`);
    if (history !== undefined && !(Array.isArray(history) && history.every(isChatMessage))) {
      throw new HookContractError(`${event} context history must be a list of messages`);
    }
    if (stopHookActive !== undefined && typeof stopHookActive !== "boolean") {
      throw new HookContractError(`${event} context stopHookActive must be a boolean`);
    }
    this.event = event;
    this.message = message === undefined ? undefined : userMessage(message.content);
    this.prepared = prepared === undefined ? undefined : freezePreparedToolCall(prepared);
    this.result = result === undefined ? undefined : copyToolResult(result);
    this.history = history === undefined ? undefined : Object.freeze([...history]);
    this.stopHookActive = stopHookActive;
    this.resolvedPath = resolvedPathOf(this.prepared);
    Object.freeze(this);
  }
}

type ResultField = keyof HookResultOptions;

function isPermissionBehavior(value: unknown): value is PermissionBehavior {
  return (PERMISSION_BEHAVIORS as readonly unknown[]).includes(value);
}

function isSystemMessageList(value: unknown): value is readonly SystemMessage[] {
  return Array.isArray(value) && value.every((message) => isChatMessage(message) && message.role === "system");
}

/** Which event may use which field; `additionalContext` is every event's. */
const RESULT_FIELDS: Readonly<Record<HookEvent, readonly ResultField[]>> = Object.freeze({
  UserPromptSubmit: ["additionalContext"],
  PreToolUse: ["permissionBehavior", "updatedInput", "blockingError", "additionalContext"],
  PostToolUse: ["updatedOutput", "preventContinuation", "additionalContext"],
  Stop: ["forceContinue", "additionalContext"],
});

const ALL_RESULT_FIELDS: readonly ResultField[] = [
  "permissionBehavior",
  "updatedInput",
  "updatedOutput",
  "additionalContext",
  "blockingError",
  "preventContinuation",
  "forceContinue",
];

export interface HookResultOptions {
  readonly permissionBehavior?: PermissionBehavior;
  readonly updatedInput?: ValidToolCall;
  readonly updatedOutput?: ToolResult;
  readonly additionalContext?: readonly ChatMessage[];
  readonly blockingError?: ToolResult;
  readonly preventContinuation?: boolean;
  readonly forceContinue?: ChatMessage;
}

/**
 * What a callback answers. Each field means one thing and belongs to given events (`validateFor`);
 * everything handed in is copied, so the hook's own objects cannot change it afterwards.
 */
export class HookResult {
  // Set only by the constructor, so `Object.create(HookResult.prototype)` cannot pass for a result.
  readonly #checked = true;
  readonly #given: readonly ResultField[];

  readonly permissionBehavior: PermissionBehavior | undefined;
  /** Checked against the call it replaces, and frozen, by the registry; kept as given until then. */
  readonly updatedInput: ValidToolCall | undefined;
  readonly updatedOutput: ToolResult | undefined;
  readonly additionalContext: readonly SystemMessage[];
  readonly blockingError: ToolResult | undefined;
  readonly preventContinuation: boolean;
  readonly forceContinue: UserMessage | undefined;

  /** Built by this class's constructor, not merely given its prototype. */
  static isResult(value: unknown): value is HookResult {
    return typeof value === "object" && value !== null && #checked in value;
  }

  static [Symbol.hasInstance](value: unknown): value is HookResult {
    return HookResult.isResult(value);
  }

  constructor(options: HookResultOptions = {}) {
    // Checked as `unknown`: a hook is JavaScript, and the types cannot vouch for what it hands in.
    const raw: unknown = options;
    if (typeof raw !== "object" || raw === null) throw new HookContractError("HookResult options must be an object");
    const fields = raw as Record<string, unknown>;
    const given = Object.keys(fields).filter((field) => fields[field] !== undefined);
    const unknown = foreignFields(given, ALL_RESULT_FIELDS);
    if (unknown.length > 0) throw new HookContractError(`HookResult has no fields: ${unknown.join(", ")}`);
    const { permissionBehavior, updatedInput, updatedOutput, additionalContext, blockingError } = fields;
    const { preventContinuation, forceContinue } = fields;
    if (permissionBehavior !== undefined && !isPermissionBehavior(permissionBehavior)) {
      throw new HookContractError(`unknown permission behavior: ${JSON.stringify(permissionBehavior)}`);
    }
    if (updatedInput !== undefined && (typeof updatedInput !== "object" || updatedInput === null)) {
      throw new HookContractError("updatedInput must be a prepared tool call");
    }
    if (updatedOutput !== undefined && !isToolResult(updatedOutput)) {
      throw new HookContractError("updatedOutput must be a ToolResult");
    }
    if (blockingError !== undefined && !(isToolResult(blockingError) && blockingError.isError)) {
      throw new HookContractError("blockingError must be an error ToolResult");
    }
    // Only system messages: a tool message would be an orphan, an assistant one a call nobody answers,
    // a user one words the user never said.
    if (additionalContext !== undefined && !isSystemMessageList(additionalContext)) {
      throw new HookContractError("additionalContext must hold only system messages");
    }
    if (preventContinuation !== undefined && typeof preventContinuation !== "boolean") {
      throw new HookContractError("preventContinuation must be a boolean");
    }
    if (forceContinue !== undefined && !(isChatMessage(forceContinue) && forceContinue.role === "user")) {
      throw new HookContractError("forceContinue must be a user message");
    }
    // In the fields' own order, so an error names them the same way whatever order the hook wrote them in.
    this.#given = Object.freeze(ALL_RESULT_FIELDS.filter((field) => given.includes(field)));
    this.permissionBehavior = permissionBehavior;
    this.updatedInput = updatedInput as ValidToolCall | undefined;
    this.updatedOutput = updatedOutput === undefined ? undefined : copyToolResult(updatedOutput);
    this.additionalContext = Object.freeze((additionalContext ?? []).map((message) => systemMessage(message.content)));
    this.blockingError = blockingError === undefined ? undefined : copyToolResult(blockingError);
    this.preventContinuation = preventContinuation ?? false;
    this.forceContinue = forceContinue === undefined ? undefined : userMessage(forceContinue.content);
    Object.freeze(this);
  }

  /** Throws, naming every field `event` does not own, when this result uses one. */
  validateFor(event: HookEvent): void {
    const checked = requireEvent(event);
    const foreign = foreignFields(this.#given, RESULT_FIELDS[checked]);
    if (foreign.length > 0) {
      throw new HookContractError(`${checked} HookResult does not allow fields: ${foreign.join(", ")}`);
    }
  }
}

/** A callback may answer at once or later; the registry waits for each before the next one runs. */
export type HookCallback = (context: HookContext) => HookResult | Promise<HookResult>;

export interface HookRegistryOptions {
  /** Milliseconds one callback may take; a slower one fails like a throwing one. No limit when omitted. */
  readonly timeoutMs?: number;
}

/** deny > ask > allow > passthrough: a later, weaker opinion never overrides an earlier, stronger one. */
function strongerPermission(
  current: PermissionBehavior | undefined,
  next: PermissionBehavior | undefined,
): PermissionBehavior | undefined {
  const order: readonly (PermissionBehavior | undefined)[] = ["deny", "ask", "allow", "passthrough", undefined];
  return order.indexOf(next) < order.indexOf(current) ? next : current;
}

/**
 * A hook may replace the arguments of the call it was shown, never the call: the id, the tool name and
 * the stored definition object (which carries the effect and the handler) must stay, and the new
 * arguments pass the tool's own schema again before they are cloned and frozen.
 */
function normalizeUpdatedInput(original: ValidToolCall, candidate: unknown): ValidToolCall {
  const invalid = (why: string): HookContractError => new HookContractError(`PreToolUse updatedInput ${why}`);
  if (typeof candidate !== "object" || candidate === null) throw invalid("must be a prepared tool call");
  const { call, definition, arguments: args, error } = candidate as Record<string, unknown>;
  if (error !== undefined) throw invalid("must not carry an error");
  const extra = foreignFields(Object.keys(candidate), ["call", "definition", "arguments", "error"]);
  if (extra.length > 0) throw invalid(`has unknown fields: ${extra.join(", ")}`);
  if (typeof call !== "object" || call === null || definition === undefined || args === undefined) {
    throw invalid("needs call, definition and arguments");
  }
  const { id, name } = call as Record<string, unknown>;
  if (id !== original.call.id) throw invalid("must keep the tool call id");
  if (name !== original.call.name) throw invalid("must keep the tool name");
  // Identity, not likeness: a copy of a read tool's definition must not carry a write past the policy.
  if (definition !== original.definition) throw invalid("must keep the tool definition");
  const parsed = original.definition.inputSchema.safeParse(args);
  if (!parsed.success) throw invalid(`does not match the ${original.definition.name} schema`);
  return freezePreparedToolCall({
    call: original.call,
    definition: original.definition,
    arguments: parsed.data as Readonly<Record<string, unknown>>,
  });
}

/** The fields a result was given, as options a new result can be built from. */
function resultFields(result: HookResult): HookResultOptions {
  return {
    permissionBehavior: result.permissionBehavior,
    updatedInput: result.updatedInput,
    updatedOutput: result.updatedOutput,
    additionalContext: result.additionalContext,
    blockingError: result.blockingError,
    preventContinuation: result.preventContinuation || undefined,
    forceContinue: result.forceContinue,
  };
}

/**
 * One event's answer so far, plus the next callback's: rewrites and stops are the later one's (a pipeline),
 * context is joined in order, and the two conservative fields keep the stronger value (deny > ask > allow,
 * and any stop).
 */
function mergeResults(previous: HookResult, next: HookResult): HookResult {
  return new HookResult({
    permissionBehavior: strongerPermission(previous.permissionBehavior, next.permissionBehavior),
    updatedInput: next.updatedInput ?? previous.updatedInput,
    updatedOutput: next.updatedOutput ?? previous.updatedOutput,
    additionalContext: [...previous.additionalContext, ...next.additionalContext],
    blockingError: next.blockingError ?? previous.blockingError,
    preventContinuation: previous.preventContinuation || next.preventContinuation || undefined,
    forceContinue: next.forceContinue ?? previous.forceContinue,
  });
}

/** Callbacks per event, run one at a time in the order they were registered. */
export class HookRegistry {
  readonly #callbacks = new Map<HookEvent, HookCallback[]>(HOOK_EVENTS.map((event) => [event, []]));
  readonly #timeoutMs: number | undefined;

  constructor(options: HookRegistryOptions = {}) {
    const { timeoutMs } = options;
    if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0)) {
      throw new RangeError("timeoutMs must be a positive integer");
    }
    this.#timeoutMs = timeoutMs;
  }

  register(event: HookEvent, callback: HookCallback): void {
    const checked = requireEvent(event);
    if (typeof callback !== "function") throw new HookContractError("hook callback must be a function");
    this.#callbacks.get(checked)?.push(callback);
  }

  /**
   * Runs `context.event`'s callbacks in order and merges what they return. A rewrite is what the next
   * callback sees; a block (Pre) or a forced continuation (Stop) ends the round. Throws what a callback
   * throws, a `HookTimeoutError`, or a `HookContractError` for a return value that breaks the contract.
   */
  async run(context: HookContext): Promise<HookResult> {
    if (!(context instanceof HookContext)) throw new HookContractError("run requires a HookContext");
    const { event } = context;
    // A copy: a callback registered while this event runs takes effect from the next event on.
    const callbacks = [...(this.#callbacks.get(event) ?? [])];
    let current = context;
    let merged = new HookResult();
    for (const callback of callbacks) {
      const outcome: unknown = await this.#call(callback, current);
      if (!HookResult.isResult(outcome)) throw new HookContractError(`${event} hook callback must return HookResult`);
      outcome.validateFor(event);
      let accepted = outcome;
      if (outcome.updatedInput !== undefined && context.prepared !== undefined) {
        const updatedInput = normalizeUpdatedInput(context.prepared, outcome.updatedInput);
        accepted = new HookResult({ ...resultFields(outcome), updatedInput });
        current = new HookContext({ event, prepared: updatedInput });
      }
      if (outcome.updatedOutput !== undefined && current.prepared !== undefined) {
        current = new HookContext({ event, prepared: current.prepared, result: outcome.updatedOutput });
      }
      // The second Stop of a run still runs every callback, but may not continue again.
      if (outcome.forceContinue !== undefined && context.stopHookActive === true) {
        accepted = new HookResult({ ...resultFields(outcome), forceContinue: undefined });
      }
      merged = mergeResults(merged, accepted);
      if (accepted.blockingError !== undefined || accepted.forceContinue !== undefined) break;
    }
    return merged;
  }

  runUserPrompt(message: UserMessage): Promise<HookResult> {
    return this.run(new HookContext({ event: "UserPromptSubmit", message }));
  }

  runPreTool(prepared: ValidToolCall): Promise<HookResult> {
    return this.run(new HookContext({ event: "PreToolUse", prepared }));
  }

  runPostTool(prepared: ValidToolCall, result: ToolResult): Promise<HookResult> {
    return this.run(new HookContext({ event: "PostToolUse", prepared, result }));
  }

  runStop(history: readonly ChatMessage[], stopHookActive: boolean): Promise<HookResult> {
    return this.run(new HookContext({ event: "Stop", history, stopHookActive }));
  }

  /** One callback, bounded by `timeoutMs` when set; a late answer after the timeout is ignored. */
  async #call(callback: HookCallback, context: HookContext): Promise<unknown> {
    const pending = Promise.resolve().then(() => callback(context));
    if (this.#timeoutMs === undefined) return pending;
    const timeoutMs = this.#timeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new HookTimeoutError(`${context.event} hook timed out after ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    // A callback that rejects after its timeout must not surface as an unhandled rejection.
    pending.catch(() => undefined);
    try {
      return await Promise.race([pending, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
