import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { WorkspaceWriteBoundary } from "../src/core/filesystem.js";
import {
  PERMISSION_BEHAVIORS,
  PermissionContractError,
  PermissionDecision,
  PermissionPolicy,
  PermissionRequest,
  PermissionRule,
  strongestDecision,
  type ApprovalProvider,
  type AuditSink,
  type PermissionBehavior,
  type PermissionPolicyOptions,
} from "../src/core/permissions.js";
import { ToolRegistry, toolError, toolSuccess, type ToolEffect, type ValidToolCall } from "../src/core/tools.js";
import { CountingApproval, FakeBoundary } from "./support/fakes.js";
import { call } from "./support/scripted-model.js";

const ASK_SHELL = "Shell execution requires approval";
const PASSED = "No permission rule blocked the request";
const OUTSIDE = "Writing outside the workspace is forbidden";
const UNRESOLVED = "Write path could not be resolved safely";
const PROVIDER_FAILED = "Approval provider failed; request denied";
const INVALID = "Approval provider returned an invalid decision";
const notGranted = (askReason: string): string => `Approval was not explicitly granted: ${askReason}`;

const context = { workspace: "/ws", identity: "test" };
const decision = (behavior: PermissionBehavior, reason = `${behavior} reason`, source = `${behavior}-source`) =>
  new PermissionDecision(behavior, reason, source);
/** What `CountingApproval(true)` answers. */
const APPROVED = decision("allow", "Approved in the test", "user");

/** A prepared call of a tool with the given effect; `write` tools take a `path`. */
function prepared(
  effect: ToolEffect,
  args: Record<string, unknown> = effect === "write" ? { path: "a.txt" } : {},
): ValidToolCall {
  const registry = new ToolRegistry();
  const name = { read: "read_file", write: "write_file", execute: "shell", external: "task" }[effect];
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

/** An approver that returns `raw` exactly as it is (even `true`), counting its calls in `requests`. */
function answering(raw: () => unknown): ApprovalProvider & { readonly requests: string[] } {
  const requests: string[] = [];
  return {
    requests,
    decide: (req) => {
      requests.push(req.toolName);
      return Promise.resolve().then(raw) as Promise<PermissionDecision>;
    },
  };
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

/** A policy with a `CountingApproval(true)` and an `Audit`, and whatever else the test gives it. */
function policy(options: PermissionPolicyOptions = {}) {
  const approval = new CountingApproval(true);
  const audit = new Audit();
  return { policy: new PermissionPolicy({ approval, audit, ...options }), approval, audit };
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
    ["a reason that is no string", "deny", 42, "s", "a decision needs a reason"],
    ["an empty source", "deny", "r", "", "a decision needs a source"],
    ["a blank source", "deny", "r", " \t ", "a decision needs a source"],
    ["a missing source", "deny", "r", undefined, "a decision needs a source"],
  ])("rejects %s with PermissionContractError", (_name, behavior, reason, source, message) => {
    const make = () => new PermissionDecision(behavior as PermissionBehavior, reason as string, source as string);
    expect(make).toThrow(PermissionContractError);
    expect(make).toThrow(message);
  });

  it("a contract error is an Error named PermissionContractError, so a log says which contract broke", () => {
    const error = new PermissionContractError("why");
    expect(error).toBeInstanceOf(Error);
    expect([error.name, error.message, String(error)]).toEqual([
      "PermissionContractError",
      "why",
      "PermissionContractError: why",
    ]);
  });

  it.each<[PermissionBehavior, boolean]>([
    ["allow", true],
    ["deny", false],
    ["ask", false],
    ["passthrough", false],
  ])("isAllowed of a %s decision is %s: only an allow lets the loop run the handler", (behavior, allowed) => {
    expect(decision(behavior).isAllowed).toBe(allowed);
  });

  it("only a decision its constructor built is an instanceof PermissionDecision, not a look-alike on its prototype", () => {
    const forged = Object.assign(Object.create(PermissionDecision.prototype) as object, {
      behavior: "allow",
      reason: "r",
      source: "s",
    });
    expect(decision("allow")).toBeInstanceOf(PermissionDecision);
    expect(Object.create(PermissionDecision.prototype)).not.toBeInstanceOf(PermissionDecision);
    expect(forged).not.toBeInstanceOf(PermissionDecision);
    expect({ behavior: "allow", reason: "r", source: "s", isAllowed: true }).not.toBeInstanceOf(PermissionDecision);
    const others: unknown[] = [null, undefined, "allow", true, 1];
    for (const value of others) expect(value instanceof PermissionDecision).toBe(false);
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

  // Each part of a prepared call checked on its own: the rest is a real prepared call, so only this part is wrong.
  it.each<[string, (valid: ValidToolCall) => unknown]>([
    ["an error beside every valid part", (valid) => ({ ...valid, error: toolError("unknown_tool", "Unknown tool") })],
    ["a call that is null", (valid) => ({ ...valid, call: null })],
    ["a call that is a string", (valid) => ({ ...valid, call: "c1" })],
    ["a definition that is null", (valid) => ({ ...valid, definition: null })],
    [
      "a definition that is a function, even one with a name and an effect",
      (valid) => ({ ...valid, definition: Object.assign(function read_file() {}, { effect: "read" }) }),
    ],
    [
      "a definition whose name is not a string",
      (valid) => ({ ...valid, definition: { ...valid.definition, name: 1 } }),
    ],
    [
      "a definition without an effect",
      (valid) => ({ ...valid, definition: { ...valid.definition, effect: undefined } }),
    ],
    ["arguments that are null", (valid) => ({ ...valid, arguments: null })],
    ["arguments that are a string", (valid) => ({ ...valid, arguments: "{}" })],
    [
      "a function carrying every part",
      (valid) => Object.defineProperties(() => undefined, Object.getOwnPropertyDescriptors(valid)),
    ],
  ])("a prepared call with %s is a contract error", (_name, spoil) => {
    const valid = prepared("read");
    expect(new PermissionRequest({ prepared: valid, context }).toolName).toBe("read_file");
    expect(() => new PermissionRequest({ prepared: spoil(valid) as ValidToolCall, context })).toThrow(
      new PermissionContractError("permission request requires a valid prepared tool call"),
    );
  });

  it("a valid prepared call spelled with error: undefined is still a valid request", () => {
    const made = request("read");
    const spelled = new PermissionRequest({ prepared: { ...made.prepared, error: undefined }, context });
    expect(spelled.toolName).toBe("read_file");
  });

  it("a request is frozen, exposes the tool name and carries no proposedDecision unless given one", () => {
    const made = request("read");
    expect(made.toolName).toBe("read_file");
    expect(made.recommendations).toEqual([]);
    expect(made.proposedDecision).toBeUndefined();
    expect(Object.isFrozen(made)).toBe(true);
  });

  it("an ask decision can be proposed for approval and is kept as it was given", () => {
    const ask = decision("ask", "Shell execution requires approval", "shell-default");
    const made = new PermissionRequest({ prepared: prepared("execute"), context, proposedDecision: ask });
    expect(made.proposedDecision).toBe(ask);
  });

  it.each<[string, unknown]>([
    ["an allow decision", decision("allow")],
    ["a deny decision", decision("deny")],
    ["a passthrough decision", decision("passthrough")],
    ["a plain object shaped like an ask", { behavior: "ask", reason: "r", source: "s" }],
    [
      "an ask look-alike built on the prototype",
      Object.assign(Object.create(PermissionDecision.prototype) as object, {
        behavior: "ask",
        reason: "r",
        source: "s",
      }),
    ],
  ])("proposing %s for approval is a contract error: only an ask can be proposed", (_name, proposed) => {
    const make = () =>
      new PermissionRequest({
        prepared: prepared("execute"),
        context,
        proposedDecision: proposed as PermissionDecision,
      });
    expect(make).toThrow(PermissionContractError);
    expect(make).toThrow("only an ask decision can be proposed for approval");
  });

  it("recommendations must be decisions", () => {
    expect(
      () =>
        new PermissionRequest({
          prepared: prepared("read"),
          context,
          recommendations: [{ behavior: "allow", reason: "r", source: "s" } as unknown as PermissionDecision],
        }),
    ).toThrow(new PermissionContractError("recommendations must be PermissionDecision values"));
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
    const { policy: p, approval, audit } = policy();
    expect(await p.decide(request("read"))).toEqual(decision("allow", PASSED, "default"));
    expect(approval.requests).toEqual([]);
    expect(audit.entries).toEqual([`read_file: allow (default) - ${PASSED}`]);
  });

  it("a passthrough rule is no opinion: the final decision is still allow from default", async () => {
    const { policy: p, approval } = policy({ rules: [rule("abstains", "passthrough")] });
    expect(await p.decide(request("read"))).toEqual(decision("allow", PASSED, "default"));
    expect(approval.requests).toEqual([]);
  });

  it("every execute call is asked with the shell default, whatever its text", async () => {
    const { policy: p, approval, audit } = policy();
    expect(await p.decide(request("execute", [], { command: "Get-Date" }))).toEqual(APPROVED);
    expect(approval.requests).toEqual([{ toolName: "shell", reason: ASK_SHELL, arguments: { command: "Get-Date" } }]);
    expect(audit.entries).toEqual(["shell: allow (user) - Approved in the test"]);
  });

  it("a write outside the workspace is denied by the boundary before anything is asked", async () => {
    const { policy: p, approval, audit } = policy({ writeBoundary: outside, rules: [rule("allow-all", "allow")] });
    const made = request("write", [decision("allow", "hook says yes", "hook")]);
    expect(await p.decide(made)).toEqual(decision("deny", OUTSIDE, "workspace-boundary"));
    expect(approval.requests).toEqual([]);
    expect(audit.entries).toEqual([`write_file: deny (workspace-boundary) - ${OUTSIDE}`]);
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
  ])("a boundary that %s denies: the write path could not be resolved safely", async (_name, writeBoundary) => {
    const { policy: p, approval } = policy({ writeBoundary });
    expect(await p.decide(request("write"))).toEqual(decision("deny", UNRESOLVED, "workspace-boundary"));
    expect(approval.requests).toEqual([]);
  });

  it.each<[string, unknown]>([
    ["the string yes", "yes"],
    ["the number 1", 1],
    ["undefined", undefined],
    ["a decision-shaped object", { inside: true }],
  ])("a boundary answering %s (anything but true) counts as outside", async (_name, answer) => {
    const { policy: p, approval } = policy({ writeBoundary: new FakeBoundary(answer) });
    expect(await p.decide(request("write"))).toEqual(decision("deny", OUTSIDE, "workspace-boundary"));
    expect(approval.requests).toEqual([]);
  });

  it("the boundary is asked with the request's workspace first and the model's path as it came", async () => {
    const writeBoundary = new FakeBoundary(true);
    const { policy: p } = policy({ writeBoundary });
    await p.decide(request("write", [], { path: "nested/../x.txt" }));
    expect(writeBoundary.calls).toEqual([["/ws", "nested/../x.txt"]]);
  });

  it("the boundary judges only write tools with a string path", async () => {
    const writeBoundary = new FakeBoundary(false);
    const { policy: p } = policy({ writeBoundary });
    expect((await p.decide(request("read", [], { path: "../x" }))).behavior).toBe("allow");
    expect((await p.decide(request("write", [], {}))).behavior).toBe("allow");
    expect(writeBoundary.calls).toEqual([]);
    expect((await p.decide(request("write", [], { path: "../x" }))).behavior).toBe("deny");
    expect(writeBoundary.calls).toEqual([["/ws", "../x"]]);
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
    const { policy: p, approval } = policy({ writeBoundary: inside, rules: [rule("asker", "ask"), broken] });
    expect(await p.decide(request("write"))).toEqual(decision("deny", "Permission rule failed: broken", "broken"));
    expect(approval.requests).toEqual([]);
  });

  it("recommendations take part in the merge like rules", async () => {
    const { policy: p, approval } = policy({ rules: [rule("allow-all", "allow")] });
    expect(await p.decide(request("read", [decision("deny", "hook says no", "hook")]))).toEqual(
      decision("deny", "hook says no", "hook"),
    );
    expect(approval.requests).toEqual([]);
  });

  const forgedAllow = () =>
    Object.assign(Object.create(PermissionDecision.prototype) as object, {
      behavior: "allow",
      reason: "r",
      source: "s",
    });

  it.each<[string, () => unknown, string]>([
    [
      "throws",
      () => {
        throw new Error("tty gone");
      },
      PROVIDER_FAILED,
    ],
    ["rejects", () => Promise.reject(new Error("tty gone")), PROVIDER_FAILED],
    ["returns a plain object shaped like an allow", () => ({ behavior: "allow", reason: "r", source: "s" }), INVALID],
    ["returns true", () => true, INVALID],
    ["returns the string yes", () => "yes", INVALID],
    ["returns undefined", () => undefined, INVALID],
    ["returns an allow look-alike built on the prototype", forgedAllow, INVALID],
    ["returns ask", () => decision("ask"), notGranted(ASK_SHELL)],
    ["returns passthrough", () => decision("passthrough"), notGranted(ASK_SHELL)],
  ])("an approver that %s denies (fail closed), and the deny is audited", async (_name, answer, reason) => {
    const approval = answering(answer);
    const audit = new Audit();
    const p = new PermissionPolicy({ approval, audit });
    expect(await p.decide(request("execute"))).toEqual(decision("deny", reason, "approval"));
    expect(approval.requests).toEqual(["shell"]);
    expect(audit.entries).toEqual([`shell: deny (approval) - ${reason}`]);
  });

  it("an approver whose decide throws synchronously denies as a failed provider", async () => {
    const approval: ApprovalProvider = {
      decide: () => {
        throw new Error("not async at all");
      },
    };
    expect(await new PermissionPolicy({ approval }).decide(request("execute"))).toEqual(
      decision("deny", PROVIDER_FAILED, "approval"),
    );
  });

  it("an approver's own deny and allow are final as given", async () => {
    for (const answer of [decision("deny", "Not now", "user"), decision("allow", "Go", "user")]) {
      const p = new PermissionPolicy({ approval: answering(() => answer) });
      expect(await p.decide(request("execute"))).toBe(answer);
    }
  });

  it("with no approver, an ask is denied as not explicitly granted, naming the merged ask's reason", async () => {
    const audit = new Audit();
    const p = new PermissionPolicy({ audit, rules: [rule("asker", "ask")] });
    expect(await p.decide(request("execute"))).toEqual(decision("deny", notGranted(ASK_SHELL), "approval"));
    expect(await p.decide(request("read"))).toEqual(decision("deny", notGranted("asker says ask"), "approval"));
    expect(audit.entries).toEqual([
      `shell: deny (approval) - ${notGranted(ASK_SHELL)}`,
      `read_file: deny (approval) - ${notGranted("asker says ask")}`,
    ]);
  });

  it("the audit sees the final decision after approval, and nothing before it", async () => {
    const order: string[] = [];
    const p = new PermissionPolicy({
      approval: { decide: () => (order.push("approval"), Promise.resolve(decision("allow", "ok", "user"))) },
      audit: { record: (_req, final) => void order.push(`audit ${final.behavior} ${final.source}`) },
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
  ])("an audit sink that %s makes decide throw", async (_name, audit) => {
    const p = new PermissionPolicy({ audit });
    await expect(p.decide(request("read"))).rejects.toThrow("disk full");
  });

  it("decide rejects anything but a PermissionRequest", async () => {
    const forged = { prepared: prepared("read"), context, recommendations: [] } as unknown as PermissionRequest;
    await expect(new PermissionPolicy().decide(forged)).rejects.toThrow(
      new PermissionContractError("permission request requires a valid prepared tool call"),
    );
  });

  it("approval grants one call only: the next identical call is asked again", async () => {
    const { policy: p, approval } = policy();
    await p.decide(request("execute"));
    await p.decide(request("execute"));
    expect(approval.requests).toHaveLength(2);
  });
});

// BOOK decision 5: the approver needs the reason it prints, so it is handed the merged ask.
describe("the approver receives the merged ask as request.proposedDecision", () => {
  it("the approver gets a new request whose proposedDecision is the winning ask; the policy's own request has none", async () => {
    const seenByRule: (PermissionDecision | undefined)[] = [];
    const watcher = new PermissionRule({
      name: "watcher",
      behavior: "ask",
      reason: "watcher says ask",
      matches: (req) => (seenByRule.push(req.proposedDecision), true),
    });
    const hook = decision("ask", "hook says ask", "hook");
    const incoming = request("write", [hook], { path: "a.txt" });
    const { policy: p, approval } = policy({ writeBoundary: inside, rules: [watcher] });

    expect(await p.decide(incoming)).toEqual(APPROVED);
    expect(approval.requests).toEqual([
      { toolName: "write_file", reason: "watcher says ask", arguments: { path: "a.txt" } },
    ]);
    const [given] = approval.received;
    expect(given).toBeInstanceOf(PermissionRequest);
    expect(given).not.toBe(incoming);
    expect(given?.proposedDecision).toStrictEqual(decision("ask", "watcher says ask", "watcher"));
    expect(given?.prepared).toBe(incoming.prepared);
    expect(given?.context).toBe(incoming.context);
    expect(given?.recommendations).toEqual([hook]);
    expect(incoming.proposedDecision).toBeUndefined();
    expect(seenByRule).toEqual([undefined]);
  });

  it("a winning ask recommendation is handed to the approver as that very decision", async () => {
    const hook = decision("ask", "hook says ask", "hook");
    const { policy: p, approval } = policy();
    await p.decide(request("read", [hook]));
    expect(approval.received.map((given) => given.proposedDecision)).toEqual([hook]);
    expect(approval.received[0]?.proposedDecision).toBe(hook);
  });

  it("the shell's ask reaches the approver with the shell default's reason and source", async () => {
    const { policy: p, approval } = policy();
    await p.decide(request("execute", [], { command: "ls" }));
    expect(approval.received.map((given) => given.proposedDecision)).toEqual([
      decision("ask", ASK_SHELL, "shell-default"),
    ]);
  });

  it("an allow, deny or passthrough is never proposed: the approver is asked only when the merge is an ask", async () => {
    for (const behavior of ["allow", "deny", "passthrough"] as const) {
      const { policy: p, approval } = policy({ rules: [rule(`${behavior}-rule`, behavior)] });
      await p.decide(request("read"));
      expect([behavior, approval.requests]).toEqual([behavior, []]);
    }
  });
});

// BOOK decision 4: the participants speak in the chapter 3 text's order, and among equals the first one wins.
describe("participant order: boundary, shell default, rules, then recommendations", () => {
  it("the boundary is consulted and answers before any rule matcher runs, and every rule still runs after its deny", async () => {
    const order: string[] = [];
    const writeBoundary = new FakeBoundary(async () => {
      order.push("boundary asked");
      await new Promise((resolve) => setTimeout(resolve, 5));
      order.push("boundary answered");
      return false;
    });
    const recording = (name: string) =>
      new PermissionRule({
        name,
        behavior: "allow",
        reason: `${name} says allow`,
        matches: () => (order.push(`rule ${name}`), true),
      });
    const { policy: p, approval } = policy({ writeBoundary, rules: [recording("first"), recording("second")] });

    expect(await p.decide(request("write"))).toEqual(decision("deny", OUTSIDE, "workspace-boundary"));
    expect(order).toEqual(["boundary asked", "boundary answered", "rule first", "rule second"]);
    expect(approval.requests).toEqual([]);
  });

  it("among equal denies the boundary's comes first, before a rule's and a recommendation's", async () => {
    const { policy: p } = policy({ writeBoundary: outside, rules: [rule("deny-rule", "deny")] });
    expect(await p.decide(request("write", [decision("deny", "hook says deny", "hook")]))).toEqual(
      decision("deny", OUTSIDE, "workspace-boundary"),
    );
  });

  it("among equal asks the shell default's comes first, before a rule's and a recommendation's", async () => {
    const { policy: p, approval } = policy({ rules: [rule("ask-rule", "ask")] });
    await p.decide(request("execute", [decision("ask", "hook says ask", "hook")]));
    expect(approval.requests.map((seen) => seen.reason)).toEqual([ASK_SHELL]);
    expect(approval.received[0]?.proposedDecision?.source).toBe("shell-default");
  });

  it("among equals a rule comes before a recommendation, whichever the request lists", async () => {
    const hookDeny = decision("deny", "hook says deny", "hook");
    const hookAllow = decision("allow", "hook says allow", "hook");
    const denying = policy({ rules: [rule("deny-rule", "deny")] }).policy;
    const allowing = policy({ rules: [rule("allow-rule", "allow")] }).policy;
    expect(await denying.decide(request("read", [hookDeny]))).toEqual(
      decision("deny", "deny-rule says deny", "deny-rule"),
    );
    expect(await allowing.decide(request("read", [hookAllow]))).toEqual(
      decision("allow", "allow-rule says allow", "allow-rule"),
    );
  });

  it("rules speak in the order they were given: the first of two equal rules supplies reason and source", async () => {
    const { policy: p } = policy({ rules: [rule("one", "deny"), rule("two", "deny")] });
    expect(await p.decide(request("read"))).toEqual(decision("deny", "one says deny", "one"));
  });
});

describe("strongestDecision", () => {
  const all = PERMISSION_BEHAVIORS.map((behavior) => decision(behavior));

  it("no candidates is passthrough from default", () => {
    expect(strongestDecision([])).toEqual(
      decision("passthrough", "No permission participant made a decision", "default"),
    );
  });

  it.each(
    // Every non-empty combination of the four behaviours, in every order of the first two.
    Array.from({ length: 15 }, (_, mask) => all.filter((_, bit) => ((mask + 1) >> bit) & 1)),
  )("the strongest of %j wins", (...candidates) => {
    const strongest = ["deny", "ask", "allow"].find((b) => candidates.some((c) => c.behavior === b)) ?? "passthrough";
    expect(strongestDecision(candidates).behavior).toBe(strongest);
    expect(strongestDecision([...candidates].reverse()).behavior).toBe(strongest);
  });

  it("among equals the first keeps its reason and source", () => {
    expect(strongestDecision([decision("deny", "first", "a"), decision("deny", "second", "b")])).toEqual(
      decision("deny", "first", "a"),
    );
  });

  const behaviours = fc.constantFrom(...PERMISSION_BEHAVIORS);

  it("property: the merge obeys deny > ask > allow > passthrough for any candidates", () => {
    fc.assert(
      fc.property(fc.array(behaviours, { maxLength: 12 }), (list) => {
        const merged = strongestDecision(list.map((behavior, i) => decision(behavior, `r${i}`, `s${i}`)));
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
        const approval = new CountingApproval(true);
        const rules = withDeny.map((behavior, i) => rule(`rule${i}`, behavior));
        const final = await new PermissionPolicy({ approval, rules }).decide(request("execute"));
        expect(approval.requests).toEqual([]);
        expect(final.behavior).toBe("deny");
        expect(final.source).toBe(`rule${withDeny.indexOf("deny")}`);
      }),
      { numRuns: 200 },
    );
  });
});
