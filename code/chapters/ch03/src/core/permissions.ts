import { toolError } from "./tools.js";
import type { ToolContext, ToolResult, ValidToolCall } from "./tools.js";

/** The four behaviours, frozen: both the runtime set and (below) the type. */
export const PERMISSION_BEHAVIORS = Object.freeze(["allow", "deny", "ask", "passthrough"] as const);
/** `allow` runs the call; `deny` refuses it; `ask` needs a human; `passthrough` has no opinion. */
export type PermissionBehavior = (typeof PERMISSION_BEHAVIORS)[number];

/** A programmer broke the permission contract. Never shown to the model; the loop fails closed. */
export class PermissionContractError extends Error {
  override readonly name = "PermissionContractError";
}

/** One participant's verdict, or the policy's final one. Immutable and always well-formed. */
export class PermissionDecision {
  // Set only by the constructor, so `Object.create(PermissionDecision.prototype)` cannot pass for a decision.
  readonly #validated = true;

  /** True only for a decision this constructor built and checked; a look-alike object is not one. */
  static isDecision(value: unknown): value is PermissionDecision {
    return typeof value === "object" && value !== null && #validated in value;
  }

  constructor(
    readonly behavior: PermissionBehavior,
    /** Why, in words the model and the user read. */
    readonly reason: string,
    /** Who decided: a participant or rule name, `default`, or the approver. */
    readonly source: string,
  ) {
    // The types say this cannot happen; JavaScript callers and JSON input say otherwise.
    const given: unknown = behavior;
    if (!(PERMISSION_BEHAVIORS as readonly unknown[]).includes(given)) {
      throw new PermissionContractError(`unknown permission behavior: ${String(given)}`);
    }
    if (typeof reason !== "string" || reason.trim() === "")
      throw new PermissionContractError("a decision needs a reason");
    if (typeof source !== "string" || source.trim() === "")
      throw new PermissionContractError("a decision needs a source");
    Object.freeze(this);
  }

  /** Only a final deny reaches the model as a result; anything else here is a bug in the caller. */
  toToolResult(): ToolResult {
    if (this.behavior !== "deny") {
      throw new PermissionContractError("only a final deny decision can become a tool result");
    }
    return toolError("permission_denied", this.reason);
  }
}

/** The question the policy answers: may this prepared call run in this context? */
export class PermissionRequest {
  readonly prepared: ValidToolCall;
  readonly context: ToolContext;
  /** Decisions suggested from outside the policy (chapter 4's hooks); they merge like rules. */
  readonly recommendations: readonly PermissionDecision[];

  constructor(input: {
    prepared: ValidToolCall;
    context: ToolContext;
    recommendations?: readonly PermissionDecision[];
  }) {
    if (!isValidPrepared(input.prepared)) {
      throw new PermissionContractError("permission request requires a valid prepared tool call");
    }
    const recommendations = input.recommendations ?? [];
    if (!recommendations.every((candidate) => PermissionDecision.isDecision(candidate))) {
      throw new PermissionContractError("recommendations must be PermissionDecision values");
    }
    this.prepared = input.prepared;
    this.context = input.context;
    this.recommendations = Object.freeze([...recommendations]);
    Object.freeze(this);
  }

  get toolName(): string {
    return this.prepared.definition.name;
  }
}

/** A named matcher: when it matches it yields its behaviour with itself as the source; else no opinion. */
export class PermissionRule {
  readonly name: string;
  readonly behavior: PermissionBehavior;
  readonly reason: string;
  private readonly matches: (request: PermissionRequest) => boolean;

  constructor(input: {
    name: string;
    behavior: PermissionBehavior;
    reason: string;
    matches: (request: PermissionRequest) => boolean;
  }) {
    // Building the decision once checks behaviour, reason and name up front.
    new PermissionDecision(input.behavior, input.reason, input.name);
    this.name = input.name;
    this.behavior = input.behavior;
    this.reason = input.reason;
    this.matches = input.matches;
    Object.freeze(this);
  }

  /** Throws when the matcher throws; the policy turns that into a deny. */
  evaluate(request: PermissionRequest): PermissionDecision | undefined {
    return this.matches(request) ? new PermissionDecision(this.behavior, this.reason, this.name) : undefined;
  }
}

/** Asks a human about a merged `ask`. Only a real `PermissionDecision` with `allow` lets the call run. */
export interface ApprovalProvider {
  requestApproval(request: PermissionRequest, pending: PermissionDecision): Promise<PermissionDecision>;
}

/** Receives every final decision, after approval. If it throws, the call does not run. */
export interface AuditSink {
  record(request: PermissionRequest, decision: PermissionDecision): void | Promise<void>;
}

/** The hard workspace boundary for writes: `false` outside; throws when it cannot tell. */
export interface WorkspaceWriteBoundary {
  isPathWithinWorkspace(workspace: string, relativePath: string): Promise<boolean>;
}

function isValidPrepared(prepared: unknown): prepared is ValidToolCall {
  if (typeof prepared !== "object" || prepared === null) return false;
  // A valid call may carry `error: undefined`; only a real error makes it an invalid one.
  if ((prepared as { error?: unknown }).error !== undefined) return false;
  const { call, definition, arguments: args } = prepared as Record<string, unknown>;
  const { name, effect } = (typeof definition === "object" && definition !== null ? definition : {}) as Record<
    string,
    unknown
  >;
  return (
    typeof call === "object" &&
    call !== null &&
    typeof name === "string" &&
    typeof effect === "string" &&
    typeof args === "object" &&
    args !== null
  );
}
