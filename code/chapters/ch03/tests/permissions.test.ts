import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { mergeDecisions, PermissionPolicy, type PermissionPolicyOptions } from "../src/core/permission-policy.js";
import {
  PERMISSION_BEHAVIORS,
  PermissionContractError,
  PermissionDecision,
  PermissionRequest,
  PermissionRule,
  type ApprovalProvider,
  type AuditSink,
  type PermissionBehavior,
  type WorkspaceWriteBoundary,
} from "../src/core/permissions.js";
import { ToolRegistry, toolError, toolSuccess, type ToolEffect, type ValidToolCall } from "../src/core/tools.js";
import { FakeBoundary } from "./support/fakes.js";
import { call } from "./support/scripted-model.js";

const context = { workspace: "/ws", identity: "test" };
const decision = (behavior: PermissionBehavior, reason = `${behavior} reason`, source = `${behavior}-source`) =>
  new PermissionDecision(behavior, reason, source);

/** A prepared call of a tool with the given effect; `write` tools take a `path`. */
function prepared(
  effect: ToolEffect,
  args: Record<string, unknown> = effect === "write" ? { path: "a.txt" } : {},
): ValidToolCall {
  const registry = new ToolRegistry();
  const name = { read: "read_file", write: "write_file", execute: "shell" }[effect];
  registry.register({
    name,
    description: name,
    inputSchema: z.strictObject({ path: z.string().optional(), command: z.string().optional() }),
    effect,
    handler: () => Promise.resolve(toolSuccess("ran")),
  });
  return registry.prepare(call("c1", name, args)) as ValidToolCall;
}

const request = (effect: ToolEffect, recommendations: PermissionDecision[] = [], args?: Record<string, unknown>) =>
  new PermissionRequest({ prepared: prepared(effect, args), context, recommendations });

class Approver implements ApprovalProvider {
  calls = 0;
  constructor(private readonly answer: () => unknown) {}
  requestApproval(): Promise<PermissionDecision> {
    this.calls += 1;
    return Promise.resolve().then(() => this.answer()) as Promise<PermissionDecision>;
  }
}

class Audit implements AuditSink {
  readonly entries: string[] = [];
  record(req: PermissionRequest, final: PermissionDecision): void {
    this.entries.push(`${req.toolName}: ${final.behavior} (${final.source}) - ${final.reason}`);
  }
}

const inside: WorkspaceWriteBoundary = { isPathWithinWorkspace: () => Promise.resolve(true) };
const outside: WorkspaceWriteBoundary = { isPathWithinWorkspace: () => Promise.resolve(false) };
const rule = (name: string, behavior: PermissionBehavior, matches = true) =>
  new PermissionRule({ name, behavior, reason: `${name} says ${behavior}`, matches: () => matches });

function policy(options: PermissionPolicyOptions = {}) {
  const approver = new Approver(() => decision("allow", "Approved", "user"));
  const audit = new Audit();
  return {
    policy: new PermissionPolicy({ approvalProvider: approver, auditSink: audit, ...options }),
    approver,
    audit,
  };
}

describe("PermissionDecision", () => {
  it("the behaviours are the frozen tuple allow, deny, ask, passthrough", () => {
    expect(PERMISSION_BEHAVIORS).toEqual(["allow", "deny", "ask", "passthrough"]);
    expect(Object.isFrozen(PERMISSION_BEHAVIORS)).toBe(true);
  });

  it("is frozen and keeps what it was given", () => {
    const made = decision("ask", "why", "who");
    expect(made).toMatchObject({ behavior: "ask", reason: "why", source: "who" });
    expect(Object.isFrozen(made)).toBe(true);
    expect(() => {
      (made as { behavior: string }).behavior = "allow";
    }).toThrow(TypeError);
  });

  it.each<[string, unknown, unknown, unknown, string]>([
    ["an unknown behaviour", "maybe", "r", "s", "unknown permission behavior: maybe"],
    ["a boolean behaviour", true, "r", "s", "unknown permission behavior: true"],
    ["an empty reason", "deny", "", "s", "a decision needs a reason"],
    ["a blank reason", "deny", "   ", "s", "a decision needs a reason"],
    ["an empty source", "deny", "r", "", "a decision needs a source"],
    ["a missing source", "deny", "r", undefined, "a decision needs a source"],
  ])("rejects %s with PermissionContractError", (_name, behavior, reason, source, message) => {
    const make = () => new PermissionDecision(behavior as PermissionBehavior, reason as string, source as string);
    expect(make).toThrow(PermissionContractError);
    expect(make).toThrow(message);
  });

  it("only a deny becomes a tool result: permission_denied with the reason", () => {
    expect(decision("deny", "Not here", "rule").toToolResult()).toEqual(toolError("permission_denied", "Not here"));
  });

  it.each<PermissionBehavior>(["allow", "ask", "passthrough"])("toToolResult on %s is a contract error", (behavior) => {
    expect(() => decision(behavior).toToolResult()).toThrow(
      new PermissionContractError("only a final deny decision can become a tool result"),
    );
  });
});

describe("PermissionRequest and PermissionRule", () => {
  it.each<[string, unknown]>([
    ["a failed prepare", { call: call("c1", "x", {}), error: toolError("unknown_tool", "Unknown tool: x") }],
    ["null", null],
    ["a plain call", call("c1", "x", {})],
    ["a definition without arguments", { call: call("c1", "x", {}), definition: { name: "x", effect: "read" } }],
  ])("a request from %s is a contract error", (_name, bad) => {
    expect(() => new PermissionRequest({ prepared: bad as ValidToolCall, context })).toThrow(
      new PermissionContractError("permission request requires a valid prepared tool call"),
    );
  });

  it("a valid prepared call spelled with error: undefined is still a valid request", () => {
    const made = request("read");
    const spelled = new PermissionRequest({ prepared: { ...made.prepared, error: undefined }, context });
    expect(spelled.toolName).toBe("read_file");
  });

  it("a request is frozen and exposes the tool name", () => {
    const made = request("read");
    expect(made.toolName).toBe("read_file");
    expect(made.recommendations).toEqual([]);
    expect(Object.isFrozen(made)).toBe(true);
  });

  it("recommendations must be decisions", () => {
    expect(
      () =>
        new PermissionRequest({
          prepared: prepared("read"),
          context,
          recommendations: [{ behavior: "allow", reason: "r", source: "s" } as unknown as PermissionDecision],
        }),
    ).toThrow(PermissionContractError);
  });

  it("a matching rule yields its decision with the rule's name as source; otherwise no opinion", () => {
    expect(rule("r1", "ask").evaluate(request("read"))).toEqual(decision("ask", "r1 says ask", "r1"));
    expect(rule("r2", "deny", false).evaluate(request("read"))).toBeUndefined();
  });

  it("a rule with an unknown behaviour or an empty name is rejected when it is made", () => {
    expect(() => rule("x", "sometimes" as PermissionBehavior)).toThrow(PermissionContractError);
    expect(() => rule("", "deny")).toThrow("a decision needs a source");
  });
});

describe("PermissionPolicy.decide", () => {
  it("a read with no participant is passthrough, then allow from default, audited, never asked", async () => {
    const { policy: p, approver, audit } = policy();
    expect(await p.decide(request("read"))).toEqual(
      decision("allow", "No permission rule blocked the request", "default"),
    );
    expect(approver.calls).toBe(0);
    expect(audit.entries).toEqual(["read_file: allow (default) - No permission rule blocked the request"]);
  });

  it("every execute call is asked with the shell default, whatever its text", async () => {
    const { policy: p, approver, audit } = policy();
    expect(await p.decide(request("execute", [], { command: "Get-Date" }))).toEqual(
      decision("allow", "Approved", "user"),
    );
    expect(approver.calls).toBe(1);
    expect(audit.entries).toEqual(["shell: allow (user) - Approved"]);
  });

  it("the approver sees the merged ask decision", async () => {
    let seen: PermissionDecision | undefined;
    const p = new PermissionPolicy({
      approvalProvider: {
        requestApproval: (_req, pending) => {
          seen = pending;
          return Promise.resolve(decision("deny", "No", "user"));
        },
      },
    });
    expect(await p.decide(request("execute"))).toEqual(decision("deny", "No", "user"));
    expect(seen).toEqual(decision("ask", "Shell execution requires approval", "shell-default"));
  });

  it("a write outside the workspace is denied by the boundary before anything is asked", async () => {
    const { policy: p, approver, audit } = policy({ boundary: outside, rules: [rule("allow-all", "allow")] });
    const made = request("write", [decision("allow", "hook says yes", "hook")]);
    expect(await p.decide(made)).toEqual(
      decision("deny", "Writing outside the workspace is forbidden", "workspace-boundary"),
    );
    expect(approver.calls).toBe(0);
    expect(audit.entries).toEqual([
      "write_file: deny (workspace-boundary) - Writing outside the workspace is forbidden",
    ]);
  });

  it.each<[string, WorkspaceWriteBoundary]>([
    [
      "throws",
      {
        isPathWithinWorkspace: () => {
          throw new Error("EACCES");
        },
      },
    ],
    ["rejects", { isPathWithinWorkspace: () => Promise.reject(new Error("EIO")) }],
  ])("a boundary that %s denies: the write path could not be resolved safely", async (_name, boundary) => {
    const { policy: p, approver } = policy({ boundary });
    expect(await p.decide(request("write"))).toEqual(
      decision("deny", "Write path could not be resolved safely", "workspace-boundary"),
    );
    expect(approver.calls).toBe(0);
  });

  it.each<[string, unknown]>([
    ["the string yes", "yes"],
    ["the number 1", 1],
    ["undefined", undefined],
    ["a decision-shaped object", { inside: true }],
  ])("a boundary answering %s (anything but true) counts as outside", async (_name, answer) => {
    const { policy: p, approver } = policy({ boundary: new FakeBoundary(answer) });
    expect(await p.decide(request("write"))).toEqual(
      decision("deny", "Writing outside the workspace is forbidden", "workspace-boundary"),
    );
    expect(approver.calls).toBe(0);
  });

  it("the boundary is asked with the request's workspace first and the model's path as it came", async () => {
    const boundary = new FakeBoundary(true);
    const { policy: p } = policy({ boundary });
    await p.decide(request("write", [], { path: "nested/../x.txt" }));
    expect(boundary.calls).toEqual([["/ws", "nested/../x.txt"]]);
  });

  it("the boundary judges only write tools with a string path", async () => {
    const boundary = new FakeBoundary(false);
    const { policy: p } = policy({ boundary });
    expect((await p.decide(request("read", [], { path: "../x" }))).behavior).toBe("allow");
    expect((await p.decide(request("write", [], {}))).behavior).toBe("allow");
    expect(boundary.calls).toEqual([]);
    expect((await p.decide(request("write", [], { path: "../x" }))).behavior).toBe("deny");
    expect(boundary.calls).toEqual([["/ws", "../x"]]);
  });

  it("a rule whose matcher throws denies with its name", async () => {
    const broken = new PermissionRule({
      name: "broken",
      behavior: "allow",
      reason: "r",
      matches: () => {
        throw new Error("bug");
      },
    });
    const { policy: p, approver } = policy({ boundary: inside, rules: [rule("asker", "ask"), broken] });
    expect(await p.decide(request("write"))).toEqual(decision("deny", "Permission rule failed: broken", "broken"));
    expect(approver.calls).toBe(0);
  });

  it("recommendations take part in the merge like rules", async () => {
    const { policy: p, approver } = policy({ rules: [rule("allow-all", "allow")] });
    expect(await p.decide(request("read", [decision("deny", "hook says no", "hook")]))).toEqual(
      decision("deny", "hook says no", "hook"),
    );
    expect(approver.calls).toBe(0);
  });

  it.each<[string, () => unknown, string]>([
    [
      "throws",
      () => {
        throw new Error("tty gone");
      },
      "Approval failed",
    ],
    [
      "returns a plain object",
      () => ({ behavior: "allow", reason: "r", source: "s" }),
      "Approval provider returned an invalid answer",
    ],
    ["returns true", () => true, "Approval provider returned an invalid answer"],
    ["returns undefined", () => undefined, "Approval provider returned an invalid answer"],
    [
      "returns a look-alike built on the prototype",
      () =>
        Object.assign(Object.create(PermissionDecision.prototype) as object, {
          behavior: "allow",
          reason: "",
          source: "",
        }),
      "Approval provider returned an invalid answer",
    ],
    ["returns ask", () => decision("ask"), "Approval provider answered ask, not allow or deny"],
    ["returns passthrough", () => decision("passthrough"), "Approval provider answered passthrough, not allow or deny"],
  ])("an approver that %s denies (fail closed), and the deny is audited", async (_name, answer, reason) => {
    const approver = new Approver(answer);
    const audit = new Audit();
    const p = new PermissionPolicy({ approvalProvider: approver, auditSink: audit });
    const expected = decision("deny", reason, "approval");
    expect(await p.decide(request("execute"))).toEqual(expected);
    expect(approver.calls).toBe(1);
    expect(audit.entries).toEqual([`shell: deny (approval) - ${reason}`]);
  });

  it("an approver's own deny and allow are final as given", async () => {
    for (const answer of [decision("deny", "Not now", "user"), decision("allow", "Go", "user")]) {
      const p = new PermissionPolicy({ approvalProvider: new Approver(() => answer) });
      expect(await p.decide(request("execute"))).toBe(answer);
    }
  });

  it("no approver: an ask is denied", async () => {
    expect(await new PermissionPolicy().decide(request("execute"))).toEqual(
      decision("deny", "No approval provider is available to ask", "approval"),
    );
  });

  it("an approver that never answers is denied after the timeout", async () => {
    const approver: ApprovalProvider = { requestApproval: () => new Promise(() => undefined) };
    const p = new PermissionPolicy({ approvalProvider: approver, approvalTimeoutMs: 20 });
    expect(await p.decide(request("execute"))).toEqual(decision("deny", "Approval timed out", "approval"));
  });

  it("the audit sees the final decision after approval, and nothing before it", async () => {
    const order: string[] = [];
    const p = new PermissionPolicy({
      approvalProvider: {
        requestApproval: () => (order.push("approval"), Promise.resolve(decision("allow", "ok", "user"))),
      },
      auditSink: { record: (_req, final) => void order.push(`audit ${final.behavior} ${final.source}`) },
    });
    await p.decide(request("execute"));
    expect(order).toEqual(["approval", "audit allow user"]);
  });

  it.each<[string, AuditSink]>([
    [
      "throws",
      {
        record: () => {
          throw new Error("disk full");
        },
      },
    ],
    ["rejects", { record: () => Promise.reject(new Error("disk full")) }],
  ])("an audit sink that %s makes decide throw", async (_name, auditSink) => {
    const p = new PermissionPolicy({ auditSink });
    await expect(p.decide(request("read"))).rejects.toThrow("disk full");
  });

  it("decide rejects anything but a PermissionRequest", async () => {
    const forged = { prepared: prepared("read"), context, recommendations: [] } as unknown as PermissionRequest;
    await expect(new PermissionPolicy().decide(forged)).rejects.toThrow(PermissionContractError);
  });

  it("approval grants one call only: the next identical call is asked again", async () => {
    const { policy: p, approver } = policy();
    await p.decide(request("execute"));
    await p.decide(request("execute"));
    expect(approver.calls).toBe(2);
  });
});

describe("merge precedence", () => {
  const all = PERMISSION_BEHAVIORS.map((behavior) => decision(behavior));

  it("no candidates is passthrough from default", () => {
    expect(mergeDecisions([])).toEqual(decision("passthrough", "No permission participant made a decision", "default"));
  });

  it.each(
    // Every non-empty combination of the four behaviours, in every order of the first two.
    Array.from({ length: 15 }, (_, mask) => all.filter((_, bit) => ((mask + 1) >> bit) & 1)),
  )("the strongest of %j wins", (...candidates) => {
    const strongest = ["deny", "ask", "allow"].find((b) => candidates.some((c) => c.behavior === b)) ?? "passthrough";
    expect(mergeDecisions(candidates).behavior).toBe(strongest);
    expect(mergeDecisions([...candidates].reverse()).behavior).toBe(strongest);
  });

  it("among equals the first keeps its reason and source", () => {
    expect(mergeDecisions([decision("deny", "first", "a"), decision("deny", "second", "b")])).toEqual(
      decision("deny", "first", "a"),
    );
  });

  const behaviours = fc.constantFrom(...PERMISSION_BEHAVIORS);

  it("property: the merge obeys deny > ask > allow > passthrough for any candidates", () => {
    fc.assert(
      fc.property(fc.array(behaviours, { maxLength: 12 }), (list) => {
        const merged = mergeDecisions(list.map((behavior, i) => decision(behavior, `r${i}`, `s${i}`)));
        const rank = { deny: 3, ask: 2, allow: 1, passthrough: 0 } as const;
        const best = list.reduce((top, b) => Math.max(top, rank[b]), 0);
        expect(rank[merged.behavior]).toBe(best);
        if (merged.behavior !== "passthrough")
          expect(merged.reason).toBe(`r${list.findIndex((b) => rank[b] === best)}`);
      }),
      { numRuns: 500 },
    );
  });

  it("property: with any deny among the rules, the approver is never called and the result is that deny", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(behaviours, { minLength: 1, maxLength: 8 }), fc.nat(), async (list, at) => {
        const withDeny = [...list];
        withDeny.splice(at % (list.length + 1), 0, "deny");
        const approver = new Approver(() => decision("allow", "yes", "user"));
        const rules = withDeny.map((behavior, i) => rule(`rule${i}`, behavior));
        const final = await new PermissionPolicy({ approvalProvider: approver, rules }).decide(request("execute"));
        expect(approver.calls).toBe(0);
        expect(final.behavior).toBe("deny");
        expect(final.source).toBe(`rule${withDeny.indexOf("deny")}`);
      }),
      { numRuns: 200 },
    );
  });
});
