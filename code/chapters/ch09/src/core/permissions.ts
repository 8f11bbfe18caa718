import type { WorkspaceWriteBoundary } from "./filesystem.js";
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

  /**
   * `value instanceof PermissionDecision` is the policy's check on what an approver returns; this makes
   * it mean "built and checked by the constructor", not merely "has the right prototype".
   */
  static [Symbol.hasInstance](value: unknown): value is PermissionDecision {
    return typeof value === "object" && value !== null && #validated in value;
  }

  constructor(
    readonly behavior: PermissionBehavior,
    /** Why, in words the model and the user read. */
    readonly reason: string,
    /** Who decided: a rule name, `shell-default`, `workspace-boundary`, `terminal-approval`, `approval`, `default`. */
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

  /** The loop runs the handler only when this is true. */
  get isAllowed(): boolean {
    return this.behavior === "allow";
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
  /** Set only on the request an approver gets: the merged `ask` it must settle, whose reason it shows. */
  readonly proposedDecision: PermissionDecision | undefined;

  constructor(input: {
    prepared: ValidToolCall;
    context: ToolContext;
    recommendations?: readonly PermissionDecision[];
    proposedDecision?: PermissionDecision;
  }) {
    if (!isValidPrepared(input.prepared)) {
      throw new PermissionContractError("permission request requires a valid prepared tool call");
    }
    const recommendations = input.recommendations ?? [];
    if (!recommendations.every((candidate) => candidate instanceof PermissionDecision)) {
      throw new PermissionContractError("recommendations must be PermissionDecision values");
    }
    const proposed = input.proposedDecision;
    if (proposed !== undefined && !(proposed instanceof PermissionDecision && proposed.behavior === "ask")) {
      throw new PermissionContractError("only an ask decision can be proposed for approval");
    }
    this.prepared = input.prepared;
    this.context = input.context;
    this.recommendations = Object.freeze([...recommendations]);
    this.proposedDecision = proposed;
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

/** Settles a merged `ask` (given as `request.proposedDecision`). Only a real allow decision lets the call run. */
export interface ApprovalProvider {
  decide(request: PermissionRequest): Promise<PermissionDecision>;
}

/** Receives every final decision, after approval. If it throws, the call does not run. */
export interface AuditSink {
  record(request: PermissionRequest, decision: PermissionDecision): void | Promise<void>;
}

export interface PermissionPolicyOptions {
  readonly rules?: readonly PermissionRule[];
  /** Without one, every `ask` becomes a deny. */
  readonly approval?: ApprovalProvider;
  readonly audit?: AuditSink;
  /** Hard boundary for `write` tools; no rule, recommendation or human can lift its deny. */
  readonly writeBoundary?: WorkspaceWriteBoundary;
}

/** deny > ask > allow: the first candidate of the strongest behaviour present, else a passthrough. */
export function strongestDecision(decisions: readonly PermissionDecision[]): PermissionDecision {
  for (const behavior of ["deny", "ask", "allow"] as const) {
    const decision = decisions.find((candidate) => candidate.behavior === behavior);
    if (decision !== undefined) return decision;
  }
  return new PermissionDecision("passthrough", "No permission participant made a decision", "default");
}

/** Decides, deterministically and before any side effect, whether one prepared call may run. */
export class PermissionPolicy {
  readonly #rules: readonly PermissionRule[];
  readonly #approval: ApprovalProvider | undefined;
  readonly #audit: AuditSink | undefined;
  readonly #writeBoundary: WorkspaceWriteBoundary | undefined;

  constructor(options: PermissionPolicyOptions = {}) {
    this.#rules = Object.freeze([...(options.rules ?? [])]);
    this.#approval = options.approval;
    this.#audit = options.audit;
    this.#writeBoundary = options.writeBoundary;
  }

  async decide(request: PermissionRequest): Promise<PermissionDecision> {
    if (!(request instanceof PermissionRequest)) {
      throw new PermissionContractError("permission request requires a valid prepared tool call");
    }
    // Every participant speaks, in this order; none short-circuits, so the audit shows the whole conflict.
    const candidates = [
      ...(await this.#workspaceBoundary(request)),
      ...shellDefault(request),
      ...this.#evaluateRules(request),
      ...request.recommendations,
    ];
    const merged = strongestDecision(candidates);
    let final = merged;
    if (merged.behavior === "passthrough") {
      final = new PermissionDecision("allow", "No permission rule blocked the request", "default");
    } else if (merged.behavior === "ask") {
      final = await this.#resolveApproval(request, merged);
    }
    // After approval, so the record says what really happened; before the handler, so it precedes the effect.
    if (this.#audit !== undefined) await this.#audit.record(request, final);
    return final;
  }

  async #workspaceBoundary(request: PermissionRequest): Promise<PermissionDecision[]> {
    const rawPath = request.prepared.arguments.path;
    if (this.#writeBoundary === undefined || request.prepared.definition.effect !== "write") return [];
    if (typeof rawPath !== "string") return [];
    let allowed: unknown;
    try {
      allowed = await this.#writeBoundary.isPathWithinWorkspace(request.context.workspace, rawPath);
    } catch {
      return [new PermissionDecision("deny", "Write path could not be resolved safely", "workspace-boundary")];
    }
    // Only a real `true` is inside: a boundary written in JavaScript answering "yes" is not one.
    if (allowed === true) return [];
    return [new PermissionDecision("deny", "Writing outside the workspace is forbidden", "workspace-boundary")];
  }

  #evaluateRules(request: PermissionRequest): PermissionDecision[] {
    return this.#rules.flatMap((rule) => {
      try {
        return rule.evaluate(request) ?? [];
      } catch {
        return [new PermissionDecision("deny", `Permission rule failed: ${rule.name}`, rule.name)];
      }
    });
  }

  /** Fail closed: anything but a real allow or deny from the approver is a deny. */
  async #resolveApproval(request: PermissionRequest, proposed: PermissionDecision): Promise<PermissionDecision> {
    if (this.#approval === undefined) return implicitApprovalDenial(proposed);
    const approvalRequest = new PermissionRequest({
      prepared: request.prepared,
      context: request.context,
      recommendations: request.recommendations,
      proposedDecision: proposed,
    });
    // `unknown`, not the declared type: the approver is someone else's code.
    let decision: unknown;
    try {
      decision = await this.#approval.decide(approvalRequest);
    } catch {
      return new PermissionDecision("deny", "Approval provider failed; request denied", "approval");
    }
    if (!(decision instanceof PermissionDecision)) {
      return new PermissionDecision("deny", "Approval provider returned an invalid decision", "approval");
    }
    if (decision.behavior === "allow" || decision.behavior === "deny") return decision;
    return implicitApprovalDenial(proposed);
  }
}

/** Every `execute` call is asked. Its risk is never guessed from the command text. */
function shellDefault(request: PermissionRequest): PermissionDecision[] {
  if (request.prepared.definition.effect !== "execute") return [];
  return [new PermissionDecision("ask", "Shell execution requires approval", "shell-default")];
}

/** No approver, or one that answered ask or passthrough: nobody said yes. */
function implicitApprovalDenial(proposed: PermissionDecision): PermissionDecision {
  return new PermissionDecision("deny", `Approval was not explicitly granted: ${proposed.reason}`, "approval");
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
