import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  PERMISSION_BEHAVIORS,
  PermissionDecision,
  PermissionPolicy,
  PermissionRequest,
  PermissionRule,
  strongestDecision,
  type ApprovalProvider,
  type PermissionBehavior,
} from "../src/core/permissions.js";
import { ToolRegistry, toolSuccess, type ToolEffect, type ValidToolCall } from "../src/core/tools.js";
import { call } from "./support/scripted-model.js";

// safePath's own properties (random paths, random link layouts) are chapter 2's: path-properties.test.ts.
// These are chapter 3's: the merge and the policy over random participants.

const RUNS = 200;

const decision = fc
  .record({
    behavior: fc.constantFrom(...PERMISSION_BEHAVIORS),
    reason: fc.string({ minLength: 1, maxLength: 8 }).filter((text) => text.trim() !== ""),
    source: fc.constantFrom("rule-a", "rule-b", "hook", "default"),
  })
  .map(({ behavior, reason, source }) => new PermissionDecision(behavior, reason, source));

/** deny > ask > allow > passthrough, written out as the spec says it, not as the code computes it. */
function strongest(candidates: readonly PermissionDecision[]): PermissionBehavior {
  for (const behavior of ["deny", "ask", "allow"] as const) {
    if (candidates.some((candidate) => candidate.behavior === behavior)) return behavior;
  }
  return "passthrough";
}

describe("strongestDecision over random candidate lists", () => {
  it("returns the first candidate of the strongest behaviour, deny > ask > allow > passthrough", () => {
    fc.assert(
      fc.property(fc.array(decision, { maxLength: 8 }), (candidates) => {
        const merged = strongestDecision(candidates);
        const behavior = strongest(candidates);
        if (behavior === "passthrough") {
          expect(merged).toEqual(
            new PermissionDecision("passthrough", "No permission participant made a decision", "default"),
          );
        } else {
          expect(merged).toBe(candidates.find((candidate) => candidate.behavior === behavior));
        }
        expect(strongestDecision([...candidates].reverse()).behavior).toBe(behavior);
      }),
      { numRuns: RUNS },
    );
  });
});

const EFFECTS: readonly ToolEffect[] = ["read", "write", "execute", "external"];

/** One prepared call per effect; the handlers never run here. */
function preparedCalls(): Record<ToolEffect, ValidToolCall> {
  const registry = new ToolRegistry();
  for (const effect of EFFECTS) {
    registry.register({
      name: `probe_${effect}`,
      description: effect,
      inputSchema: z.strictObject({ path: z.string() }),
      effect,
      handler: () => Promise.resolve(toolSuccess("ran")),
    });
  }
  const prepare = (effect: ToolEffect): ValidToolCall => {
    const prepared = registry.prepare(call(`c-${effect}`, `probe_${effect}`, { path: "some/file.txt" }));
    if (prepared.error !== undefined) throw new Error(prepared.error.content);
    return prepared;
  };
  return { read: prepare("read"), write: prepare("write"), execute: prepare("execute"), external: prepare("external") };
}

const scenario = fc.record({
  effect: fc.constantFrom(...EFFECTS),
  boundary: fc.constantFrom("absent", "inside", "outside", "throws"),
  rules: fc.array(
    fc.record({
      behavior: fc.constantFrom(...PERMISSION_BEHAVIORS),
      outcome: fc.constantFrom("match", "miss", "throw"),
    }),
    { maxLength: 6 },
  ),
  recommendations: fc.array(decision, { maxLength: 3 }),
  answer: fc.constantFrom("allow", "deny", "throws", "junk", "ask"),
});

describe("PermissionPolicy.decide with random rules, boundaries, recommendations and approvers", () => {
  const prepared = preparedCalls();

  it("asks the approver only for a merged ask, never past a deny, and audits exactly the final decision once", async () => {
    const merges: Record<PermissionBehavior, number> = { deny: 0, ask: 0, allow: 0, passthrough: 0 };
    await fc.assert(
      fc.asyncProperty(scenario, async ({ effect, boundary, rules, recommendations, answer }) => {
        const approvals: (PermissionDecision | undefined)[] = [];
        const approvalRequests: PermissionRequest[] = [];
        const provided = {
          allow: new PermissionDecision("allow", "Approved", "user"),
          deny: new PermissionDecision("deny", "Refused", "user"),
          ask: new PermissionDecision("ask", "Ask me later", "user"),
        };
        const approval: ApprovalProvider = {
          decide: (request) => {
            approvals.push(request.proposedDecision);
            approvalRequests.push(request);
            if (answer === "throws") return Promise.reject(new Error("approver crashed"));
            if (answer === "junk") return Promise.resolve({ behavior: "allow" } as unknown as PermissionDecision);
            return Promise.resolve(provided[answer]);
          },
        };
        const audited: PermissionDecision[] = [];
        const judged: [string, string][] = [];
        const policy = new PermissionPolicy({
          ...(boundary === "absent"
            ? {}
            : {
                writeBoundary: {
                  isPathWithinWorkspace: (workspace: string, relativePath: string) => {
                    judged.push([workspace, relativePath]);
                    if (boundary === "throws") throw new Error("cannot tell");
                    return Promise.resolve(boundary === "inside");
                  },
                },
              }),
          rules: rules.map(
            (rule, i) =>
              new PermissionRule({
                name: `rule-${i}`,
                behavior: rule.behavior,
                reason: `reason ${i}`,
                matches: () => {
                  if (rule.outcome === "throw") throw new Error("rule bug");
                  return rule.outcome === "match";
                },
              }),
          ),
          approval,
          audit: { record: (_request, final) => void audited.push(final) },
        });

        const request = new PermissionRequest({
          prepared: prepared[effect],
          context: { workspace: "/ws", identity: "t" },
          recommendations,
        });
        const final = await policy.decide(request);

        // The candidates in the spec's order: boundary, shell default, rules, recommendations.
        const candidates: PermissionDecision[] = [];
        if (effect === "write" && boundary === "outside") {
          candidates.push(
            new PermissionDecision("deny", "Writing outside the workspace is forbidden", "workspace-boundary"),
          );
        }
        if (effect === "write" && boundary === "throws") {
          candidates.push(
            new PermissionDecision("deny", "Write path could not be resolved safely", "workspace-boundary"),
          );
        }
        if (effect === "execute")
          candidates.push(new PermissionDecision("ask", "Shell execution requires approval", "shell-default"));
        rules.forEach((rule, i) => {
          if (rule.outcome === "match")
            candidates.push(new PermissionDecision(rule.behavior, `reason ${i}`, `rule-${i}`));
          if (rule.outcome === "throw") {
            candidates.push(new PermissionDecision("deny", `Permission rule failed: rule-${i}`, `rule-${i}`));
          }
        });
        candidates.push(...recommendations);
        const merged = strongest(candidates);
        merges[merged] += 1;
        const first = candidates.find((candidate) => candidate.behavior === merged);

        expect(audited).toHaveLength(1);
        expect(audited[0]).toBe(final);
        // Only a write is judged by the boundary: once, with the request's workspace and the model's path.
        expect(judged).toEqual(effect === "write" && boundary !== "absent" ? [["/ws", "some/file.txt"]] : []);
        if (merged === "deny") {
          expect(approvals).toEqual([]);
          expect(final).toEqual(first);
        } else if (merged === "ask") {
          // The approver is asked about this very call, with the merged ask as the decision it settles.
          expect(approvals).toEqual([first]);
          expect(approvalRequests.map((seen) => [seen.prepared, seen.context, seen.recommendations])).toEqual([
            [request.prepared, request.context, request.recommendations],
          ]);
          const expected = {
            allow: provided.allow,
            deny: provided.deny,
            throws: new PermissionDecision("deny", "Approval provider failed; request denied", "approval"),
            junk: new PermissionDecision("deny", "Approval provider returned an invalid decision", "approval"),
            ask: new PermissionDecision("deny", `Approval was not explicitly granted: ${first?.reason}`, "approval"),
          }[answer];
          expect(final).toEqual(expected);
        } else {
          expect(approvals).toEqual([]);
          expect(final).toEqual(
            merged === "allow"
              ? first
              : new PermissionDecision("allow", "No permission rule blocked the request", "default"),
          );
        }
        expect(final.behavior === "allow").toBe(
          merged === "allow" || (merged === "ask" && answer === "allow") || merged === "passthrough",
        );
      }),
      { numRuns: RUNS },
    );
    expect(Math.min(...Object.values(merges))).toBeGreaterThan(0);
  });
});
