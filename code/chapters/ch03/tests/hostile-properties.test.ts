import { lstatSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, normalize, sep } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { safePath } from "../src/adapters/filesystem.js";
import { mergeDecisions, PermissionPolicy } from "../src/core/permission-policy.js";
import {
  PERMISSION_BEHAVIORS,
  PermissionDecision,
  PermissionRequest,
  PermissionRule,
  type ApprovalProvider,
  type PermissionBehavior,
} from "../src/core/permissions.js";
import { ToolRegistry, toolSuccess, type ToolEffect, type ValidToolCall } from "../src/core/tools.js";
import { WorkspacePathError } from "../src/core/workspace-fs.js";
import { call } from "./support/scripted-model.js";

const RUNS = 200;
const posix = process.platform !== "win32";

let suiteRoot = "";
beforeAll(() => {
  suiteRoot = realpathSync(mkdtempSync(join(tmpdir(), "ch03-properties-")));
});
afterAll(() => {
  rmSync(suiteRoot, { recursive: true, force: true });
});

const isInside = (ws: string, candidate: string): boolean => candidate === ws || candidate.startsWith(ws + sep);

/**
 * The independent check: `resolved` is `ws` or below it with no `.`/`..`/empty segment, and every component
 * of it that exists on disk (links followed, dangling links refused) has a real path inside `ws`.
 */
function landsInside(ws: string, resolved: string): string | undefined {
  if (!isInside(ws, resolved)) return `not under the workspace: ${resolved}`;
  if (normalize(resolved) !== resolved || resolved.endsWith(sep) !== ws.endsWith(sep)) {
    return `not normalised: ${resolved}`;
  }
  let current = ws;
  for (const part of resolved
    .slice(ws.length)
    .split(sep)
    .filter((segment) => segment !== "")) {
    current = join(current, part);
    try {
      lstatSync(current);
    } catch {
      return undefined; // Missing from here on: writing creates plain folders, following nothing.
    }
    let real: string;
    try {
      real = realpathSync(current);
    } catch {
      return `goes through a dangling link: ${current}`;
    }
    if (!isInside(ws, real)) return `${current} is really ${real}`;
  }
  return undefined;
}

/** Calls `safePath`; anything but a path or a `WorkspacePathError` is a failure. */
function attempt(ws: string, relative: string): { path: string } | { refused: WorkspacePathError } {
  try {
    return { path: safePath(ws, relative) };
  } catch (error) {
    if (error instanceof WorkspacePathError) return { refused: error };
    throw error;
  }
}

const SEGMENTS = [
  "..",
  ".",
  "",
  "a",
  "b",
  "sub",
  "deeper",
  "link",
  "l1",
  "l2",
  "l3",
  "outside",
  "ws",
  "secret.txt",
  "x.txt",
  "\u2025",
  "\uff0e\uff0e",
  "..\u2215..",
  "..\uff0f..",
  "%2e%2e",
  "...",
  "con",
  "a.txt:s",
] as const;
const SEPARATORS = ["/", "\\", "//", "\\/", "/./"] as const;
const LINK_PLACES = ["link", "l1", "a/l2", "sub/l3", "sub/deeper/l4"] as const;

/** Where a link may point: relative and absolute, inside, outside, at a file, at nothing, at another link. */
function linkTargets(root: string): string[] {
  return [
    "..",
    "../..",
    "../outside",
    "../outside/secret.txt",
    "../outside/missing",
    "/",
    ".",
    "a",
    "sub",
    "sub/deeper",
    "../ws",
    "../ws-sibling",
    "nonexistent",
    "l1",
    "link",
    join(root, "outside"),
    join(root, "ws"),
    join(root, "ws", "sub"),
  ];
}

const relativePath = fc
  .array(fc.tuple(fc.constantFrom(...SEPARATORS), fc.constantFrom(...SEGMENTS)), { maxLength: 8 })
  .chain((parts) =>
    fc
      .boolean()
      .map((leading) =>
        parts.map(([separator, segment], i) => (i === 0 && !leading ? "" : separator) + segment).join(""),
      ),
  );

describe.skipIf(!posix)("safePath against random paths and random symlink layouts", () => {
  let run = 0;

  /** A fresh workspace beside `outside/` and a prefix sibling, with `links` made inside it. */
  function layout(links: readonly (readonly [string, number])[]): { ws: string; root: string } {
    run += 1;
    const root = join(suiteRoot, `run-${run}`);
    const ws = join(root, "ws");
    mkdirSync(join(ws, "a"), { recursive: true });
    mkdirSync(join(ws, "sub", "deeper"), { recursive: true });
    mkdirSync(join(root, "outside"));
    mkdirSync(join(root, "ws-sibling"));
    writeFileSync(join(root, "outside", "secret.txt"), "secret");
    writeFileSync(join(ws, "x.txt"), "inside");
    const targets = linkTargets(root);
    for (const [place, target] of links) symlinkSync(targets[target % targets.length] ?? ".", join(ws, place));
    return { ws, root };
  }

  const links = fc.uniqueArray(fc.tuple(fc.constantFrom(...LINK_PLACES), fc.nat()), {
    maxLength: 4,
    selector: ([place]) => place,
  });

  it("never returns a path whose existing part really lies outside the workspace", () => {
    const seen = { resolved: 0, resolvedThroughLink: 0, escapes: 0, invalid: 0 };
    fc.assert(
      fc.property(links, fc.array(relativePath, { minLength: 1, maxLength: 6 }), (made, paths) => {
        const { ws, root } = layout(made);
        try {
          for (const relative of paths) {
            const outcome = attempt(ws, relative);
            if ("refused" in outcome) {
              seen[outcome.refused.problem === "escape" ? "escapes" : "invalid"] += 1;
              continue;
            }
            expect(landsInside(ws, outcome.path)).toBeUndefined();
            seen.resolved += 1;
            if (made.some(([place]) => relative.replace(/[\\/]+/g, "/").includes(place))) seen.resolvedThroughLink += 1;
          }
        } finally {
          rmSync(root, { recursive: true, force: true });
        }
      }),
      { numRuns: RUNS },
    );
    // The run explored both sides of the boundary, links included.
    expect(Math.min(seen.resolved, seen.resolvedThroughLink, seen.escapes, seen.invalid)).toBeGreaterThan(0);
  });

  it("without links, agrees with a lexical model: inside when `..` never climbs above the root, else escape", () => {
    const { ws } = layout([]);
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(...SEPARATORS), fc.constantFrom("..", ".", "a", "b", "sub", "new")), {
          maxLength: 10,
        }),
        (parts) => {
          const relative = parts.map(([separator, segment], i) => (i === 0 ? "" : separator) + segment).join("");
          const stack: string[] = [];
          let escapes = false;
          for (const [, segment] of parts) {
            if (segment === ".") continue;
            if (segment !== "..") stack.push(segment);
            else if (stack.pop() === undefined) escapes = true;
            if (escapes) break;
          }
          const outcome = attempt(ws, relative);
          if (escapes) {
            expect("refused" in outcome && outcome.refused.problem).toBe("escape");
          } else {
            expect(outcome).toEqual({ path: join(ws, ...stack) });
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("any string at all either resolves inside the workspace or is refused with a WorkspacePathError", () => {
    // link -> ../outside, l1 -> a (inside), a/l2 -> ../outside/secret.txt (relative to a/, so dangling).
    const { ws } = layout([
      ["link", 2],
      ["l1", 7],
      ["a/l2", 3],
    ]);
    const tricky = fc.constantFrom(
      ".",
      "..",
      "/",
      "\\",
      ":",
      "C",
      "\u0000",
      "\u001f",
      "\u0085",
      "\u2025",
      "\uff0e",
      "\uff0f",
      "\u2215",
      " ",
      "%",
      "~",
      "link",
      "lf",
      "l1",
      "a",
    );
    fc.assert(
      fc.property(
        fc.string({ unit: fc.oneof(tricky, fc.string({ unit: "grapheme", maxLength: 1 })), maxLength: 24 }),
        (relative) => {
          const outcome = attempt(ws, relative);
          if ("path" in outcome) expect(landsInside(ws, outcome.path)).toBeUndefined();
        },
      ),
      { numRuns: RUNS },
    );
  });
});

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

describe("mergeDecisions over random candidate lists", () => {
  it("returns the first candidate of the strongest behaviour, deny > ask > allow > passthrough", () => {
    fc.assert(
      fc.property(fc.array(decision, { maxLength: 8 }), (candidates) => {
        const merged = mergeDecisions(candidates);
        const behavior = strongest(candidates);
        if (behavior === "passthrough") {
          expect(merged).toEqual(
            new PermissionDecision("passthrough", "No permission participant made a decision", "default"),
          );
        } else {
          expect(merged).toBe(candidates.find((candidate) => candidate.behavior === behavior));
        }
        expect(mergeDecisions([...candidates].reverse()).behavior).toBe(behavior);
      }),
      { numRuns: RUNS },
    );
  });
});

const EFFECTS: readonly ToolEffect[] = ["read", "write", "execute"];

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
  return { read: prepare("read"), write: prepare("write"), execute: prepare("execute") };
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
        const approvals: PermissionDecision[] = [];
        const provided = {
          allow: new PermissionDecision("allow", "Approved", "user"),
          deny: new PermissionDecision("deny", "Refused", "user"),
          ask: new PermissionDecision("ask", "Ask me later", "user"),
        };
        const approvalProvider: ApprovalProvider = {
          requestApproval: (_request, pending) => {
            approvals.push(pending);
            if (answer === "throws") return Promise.reject(new Error("approver crashed"));
            if (answer === "junk") return Promise.resolve({ behavior: "allow" } as unknown as PermissionDecision);
            return Promise.resolve(provided[answer]);
          },
        };
        const audited: PermissionDecision[] = [];
        const policy = new PermissionPolicy({
          ...(boundary === "absent"
            ? {}
            : {
                boundary: {
                  isInsideWorkspace: () => {
                    if (boundary === "throws") throw new Error("cannot tell");
                    return boundary === "inside";
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
          approvalProvider,
          auditSink: { record: (_request, final) => void audited.push(final) },
        });

        const final = await policy.decide(
          new PermissionRequest({
            prepared: prepared[effect],
            context: { workspace: "/ws", identity: "t" },
            recommendations,
          }),
        );

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
        if (merged === "deny") {
          expect(approvals).toEqual([]);
          expect(final).toEqual(first);
        } else if (merged === "ask") {
          expect(approvals).toEqual([first]);
          const expected = {
            allow: provided.allow,
            deny: provided.deny,
            throws: new PermissionDecision("deny", "Approval failed", "approval"),
            junk: new PermissionDecision("deny", "Approval provider returned an invalid answer", "approval"),
            ask: new PermissionDecision("deny", "Approval provider answered ask, not allow or deny", "approval"),
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
