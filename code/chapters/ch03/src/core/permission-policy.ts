import {
  PermissionContractError,
  PermissionDecision,
  PermissionRequest,
  type ApprovalProvider,
  type AuditSink,
  type PermissionBehavior,
  type PermissionRule,
  type WorkspaceWriteBoundary,
} from "./permissions.js";

export interface PermissionPolicyOptions {
  /** Hard boundary for `write` tools; no rule, recommendation or human can lift its deny. */
  readonly boundary?: WorkspaceWriteBoundary;
  readonly rules?: readonly PermissionRule[];
  /** Without one, every `ask` becomes a deny. */
  readonly approvalProvider?: ApprovalProvider;
  readonly auditSink?: AuditSink;
  /** An approval that takes longer is a deny. */
  readonly approvalTimeoutMs?: number;
}

const STRENGTH: Readonly<Record<PermissionBehavior, number>> = { deny: 3, ask: 2, allow: 1, passthrough: 0 };

/**
 * The strongest candidate wins: deny > ask > allow; among equals, the first. None, or only
 * passthroughs, is a passthrough from `default`.
 */
export function mergeDecisions(candidates: readonly PermissionDecision[]): PermissionDecision {
  let strongest: PermissionDecision | undefined;
  for (const candidate of candidates) {
    if (candidate.behavior === "passthrough") continue;
    if (strongest === undefined || STRENGTH[candidate.behavior] > STRENGTH[strongest.behavior]) strongest = candidate;
  }
  return strongest ?? new PermissionDecision("passthrough", "No permission participant made a decision", "default");
}

/** Decides, deterministically and before any side effect, whether one prepared tool call may run. */
export class PermissionPolicy {
  constructor(private readonly options: PermissionPolicyOptions = {}) {}

  async decide(request: PermissionRequest): Promise<PermissionDecision> {
    if (!(request instanceof PermissionRequest)) {
      throw new PermissionContractError("permission request requires a valid prepared tool call");
    }
    const candidates = [
      ...(await this.workspaceBoundary(request)),
      ...shellDefault(request),
      ...this.rules(request),
      ...request.recommendations,
    ];
    let decision = mergeDecisions(candidates);
    if (decision.behavior === "passthrough") {
      decision = new PermissionDecision("allow", "No permission rule blocked the request", "default");
    }
    if (decision.behavior === "ask") decision = await this.approve(request, decision);
    // Audited after approval, so the record says what really happened; a failing audit fails the call.
    await this.options.auditSink?.record(request, decision);
    return decision;
  }

  private async workspaceBoundary(request: PermissionRequest): Promise<PermissionDecision[]> {
    const { boundary } = this.options;
    const path = request.prepared.arguments.path;
    if (boundary === undefined || request.prepared.definition.effect !== "write" || typeof path !== "string") return [];
    try {
      // Fail closed: only a real `true` is inside; a JavaScript boundary answering "yes" is not.
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-boolean-literal-compare
      if ((await boundary.isPathWithinWorkspace(request.context.workspace, path)) === true) return [];
      return [new PermissionDecision("deny", "Writing outside the workspace is forbidden", "workspace-boundary")];
    } catch {
      return [new PermissionDecision("deny", "Write path could not be resolved safely", "workspace-boundary")];
    }
  }

  private rules(request: PermissionRequest): PermissionDecision[] {
    return (this.options.rules ?? []).flatMap((rule) => {
      try {
        return rule.evaluate(request) ?? [];
      } catch {
        return [new PermissionDecision("deny", `Permission rule failed: ${rule.name}`, rule.name)];
      }
    });
  }

  /** Fail closed: anything but a real allow decision from the provider is a deny. */
  private async approve(request: PermissionRequest, pending: PermissionDecision): Promise<PermissionDecision> {
    const provider = this.options.approvalProvider;
    if (provider === undefined) return denyApproval("No approval provider is available to ask");
    let answer: unknown;
    try {
      answer = await withTimeout(provider.requestApproval(request, pending), this.options.approvalTimeoutMs);
    } catch (error) {
      return denyApproval(error instanceof ApprovalTimeout ? "Approval timed out" : "Approval failed");
    }
    if (!PermissionDecision.isDecision(answer)) return denyApproval("Approval provider returned an invalid answer");
    if (answer.behavior === "allow" || answer.behavior === "deny") return answer;
    return denyApproval(`Approval provider answered ${answer.behavior}, not allow or deny`);
  }
}

/** Every `execute` call is asked. Its risk is never guessed from the command text. */
function shellDefault(request: PermissionRequest): PermissionDecision[] {
  if (request.prepared.definition.effect !== "execute") return [];
  return [new PermissionDecision("ask", "Shell execution requires approval", "shell-default")];
}

function denyApproval(reason: string): PermissionDecision {
  return new PermissionDecision("deny", reason, "approval");
}

class ApprovalTimeout extends Error {}

function withTimeout<T>(promise: Promise<T>, ms: number | undefined): Promise<T> {
  if (ms === undefined) return promise;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ApprovalTimeout()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
