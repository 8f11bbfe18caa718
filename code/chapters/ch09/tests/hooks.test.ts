import { describe, expect, it } from "vitest";
import {
  HOOK_EVENTS,
  HookContext,
  HookContractError,
  type HookContextOptions,
  HookRegistry,
  HookResult,
  HookTimeoutError,
  type HookCallback,
} from "../src/core/hooks.js";
import { assistantMessage, systemMessage, toolMessage, userMessage } from "../src/core/messages.js";
import { toolError, toolSuccess, type ValidToolCall } from "../src/core/tools.js";
import { createChapterTwoTools } from "../src/features/builtin-tools.js";
import { FakeCommandRunner, FakeFileSystem } from "./support/fakes.js";
import { call } from "./support/scripted-model.js";

// The unit level of chapter 4: what a context may carry, what a result may say, and how the registry
// runs and merges callbacks. The loop, the policy and the CLI around them are in ch04-hooks.test.ts.

/** A real prepared call of the real file tools: the definition is the registry's stored object. */
function prepared(name = "write_file", args: unknown = { path: "a.txt", content: "A" }): ValidToolCall {
  const tools = createChapterTwoTools(new FakeCommandRunner(), new FakeFileSystem());
  const result = tools.prepare(call("call_1", name, args));
  if (result.error !== undefined) throw new Error(result.error.content);
  return result;
}

const empty = (): HookResult => new HookResult();

describe("rule 1: four events only", () => {
  it("HOOK_EVENTS deep-equals the four names and is frozen", () => {
    expect(HOOK_EVENTS).toEqual(["UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"]);
    expect(Object.isFrozen(HOOK_EVENTS)).toBe(true);
  });

  it('register("SessionStart") throws `event must be a HookEvent`', () => {
    const hooks = new HookRegistry();
    expect(() => hooks.register("SessionStart" as never, empty)).toThrow(HookContractError);
    expect(() => hooks.register("SessionStart" as never, empty)).toThrow("event must be a HookEvent");
  });

  it("a callback must be a function, a timeout a positive integer", () => {
    expect(() => new HookRegistry().register("Stop", "stop" as never)).toThrow("hook callback must be a function");
    for (const timeoutMs of [0, -1, 1.5, Number.NaN]) {
      expect(() => new HookRegistry({ timeoutMs })).toThrow("timeoutMs must be a positive integer");
    }
  });
});

describe("HookContext: each event carries only its own fields", () => {
  it("a user message in a PreToolUse context is a HookContractError naming the field", () => {
    expect(() => new HookContext({ event: "PreToolUse", prepared: prepared(), message: userMessage("hi") })).toThrow(
      "PreToolUse context does not allow fields: message",
    );
  });

  it.each([
    ["UserPromptSubmit", { history: [] }, "UserPromptSubmit context does not allow fields: history"],
    ["PostToolUse", { prepared: prepared() }, "PostToolUse context requires result"],
    ["Stop", { history: [] }, "Stop context requires stopHookActive"],
    [
      "Stop",
      { history: [], stopHookActive: false, result: toolSuccess("x") },
      "Stop context does not allow fields: result",
    ],
    ["UserPromptSubmit", { message: systemMessage("x") }, "UserPromptSubmit context message must be a user message"],
  ] as const)("case %#, a %s context with fields it does not own or lacks, fails", (event, fields, message) => {
    const options: unknown = { event, ...fields };
    expect(() => new HookContext(options as HookContextOptions)).toThrow(message);
  });

  it("is frozen all the way into the arguments, and keeps the stored definition object", () => {
    const call = prepared();
    const context = new HookContext({ event: "PreToolUse", prepared: call });
    expect(Object.isFrozen(context)).toBe(true);
    expect(Object.isFrozen(context.prepared)).toBe(true);
    expect(Object.isFrozen(context.prepared?.arguments)).toBe(true);
    expect(context.prepared?.definition).toBe(call.definition);
    expect(() => Reflect.set(context.prepared?.arguments ?? {}, "path", "b.txt")).not.toThrow();
    expect(Reflect.set(context.prepared?.arguments ?? {}, "path", "b.txt")).toBe(false);
    expect(context.prepared?.arguments.path).toBe("a.txt");
  });

  it("Pre and Post carry resolvedPath, the path the file tools resolve, beside the model's spelling; none where no file is named", () => {
    const resolved = (args: unknown, name = "write_file"): [unknown, string | undefined, string | undefined] => {
      const call = prepared(name, args);
      const pre = new HookContext({ event: "PreToolUse", prepared: call });
      const post = new HookContext({ event: "PostToolUse", prepared: call, result: toolSuccess("ok") });
      return [pre.prepared?.arguments.path, pre.resolvedPath, post.resolvedPath];
    };
    const spellings: [string, string][] = [
      ["a.txt", "a.txt"],
      ["./a.txt", "a.txt"],
      ["a.txt/", "a.txt"],
      [".//a.txt", "a.txt"],
      ["notes\\a.txt", "notes/a.txt"],
      ["notes/./a.txt/", "notes/a.txt"],
      ["notes/generated.txt", "notes/generated.txt"],
    ];
    for (const [path, expected] of spellings) {
      expect(resolved({ path, content: "A" })).toEqual([path, expected, expected]);
    }
    expect(resolved({ path: "./README.md" }, "read_file")).toEqual(["./README.md", "README.md", "README.md"]);
    // Paths the tools refuse name no file in the workspace: a hook sees undefined, the tool answers path_escape.
    for (const path of ["../a.txt", "notes/../a.txt", "/etc/passwd", "C:\\x.txt", ".", "./", "NUL.txt"]) {
      expect(resolved({ path, content: "A" })).toEqual([path, undefined, undefined]);
    }
    expect(resolved({ command: "Get-ChildItem" }, "shell")).toEqual([undefined, undefined, undefined]);
    expect(resolved({ pattern: "./*.md" }, "glob")).toEqual([undefined, undefined, undefined]);
  });
});

describe("HookResult: one meaning per field, checked per event", () => {
  it("rule 3: a blockingError on PostToolUse names the field", () => {
    const result = new HookResult({ blockingError: toolError("hook_blocked", "no") });
    expect(() => result.validateFor("PostToolUse")).toThrow(HookContractError);
    expect(() => result.validateFor("PostToolUse")).toThrow(
      "PostToolUse HookResult does not allow fields: blockingError",
    );
    expect(() => result.validateFor("PreToolUse")).not.toThrow();
  });

  it("lists every foreign field at once", () => {
    const result = new HookResult({ forceContinue: userMessage("again"), preventContinuation: true });
    expect(() => result.validateFor("PreToolUse")).toThrow(
      "PreToolUse HookResult does not allow fields: preventContinuation, forceContinue",
    );
  });

  it("additionalContext is every event's field", () => {
    const result = new HookResult({ additionalContext: [systemMessage("note")] });
    for (const event of HOOK_EVENTS) expect(() => result.validateFor(event)).not.toThrow();
  });

  it.each([
    [
      "a user message in additionalContext",
      { additionalContext: [userMessage("u")] },
      "additionalContext must hold only system messages",
    ],
    [
      "an assistant message with tool calls in additionalContext",
      { additionalContext: [assistantMessage(null, [call("x", "glob", {})])] },
      "additionalContext must hold only system messages",
    ],
    [
      "a tool message in additionalContext",
      { additionalContext: [toolMessage("r", "x")] },
      "additionalContext must hold only system messages",
    ],
    ["a successful blockingError", { blockingError: toolSuccess("fine") }, "blockingError must be an error ToolResult"],
    ["an updatedOutput that is no ToolResult", { updatedOutput: { content: 1 } }, "updatedOutput must be a ToolResult"],
    ["an unknown behavior", { permissionBehavior: "always" }, 'unknown permission behavior: "always"'],
    [
      "a system message as forceContinue",
      { forceContinue: systemMessage("s") },
      "forceContinue must be a user message",
    ],
    ["a field no event has", { decision: "allow" }, "HookResult has no fields: decision"],
  ] as const)("refuses %s", (_label, options, message) => {
    expect(() => new HookResult(options as never)).toThrow(HookContractError);
    expect(() => new HookResult(options as never)).toThrow(message);
  });

  it("copies what it is given: changing the hook's own objects later changes nothing", () => {
    const output = { content: "original", isError: false };
    const context = [{ role: "system" as const, content: "note" }];
    const result = new HookResult({ updatedOutput: output, additionalContext: context });
    output.content = "changed";
    context[0] = { role: "system", content: "changed" };
    expect(result.updatedOutput).toEqual({ content: "original", isError: false });
    expect(result.additionalContext).toEqual([{ role: "system", content: "note" }]);
    expect(Object.isFrozen(result)).toBe(true);
    expect(Object.isFrozen(result.updatedOutput)).toBe(true);
  });

  it("only the constructor makes one: a forged prototype, a plain object and a boolean are not results", () => {
    expect(HookResult.isResult(new HookResult())).toBe(true);
    expect(new HookResult() instanceof HookResult).toBe(true);
    for (const forged of [Object.create(HookResult.prototype), {}, { additionalContext: [] }, true, undefined]) {
      expect(HookResult.isResult(forged)).toBe(false);
      expect(forged instanceof HookResult).toBe(false);
    }
  });
});

describe("rule 2: order", () => {
  it("sync, async (20 ms) and sync callbacks record exactly [1, 2, 3]", async () => {
    const hooks = new HookRegistry();
    const seen: number[] = [];
    hooks.register("UserPromptSubmit", () => {
      seen.push(1);
      return new HookResult();
    });
    hooks.register("UserPromptSubmit", async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      seen.push(2);
      return new HookResult();
    });
    hooks.register("UserPromptSubmit", () => {
      seen.push(3);
      return new HookResult();
    });
    await hooks.runUserPrompt(userMessage("go"));
    expect(seen).toEqual([1, 2, 3]);
  });

  it("two Post rewriters: the second sees the first's content, the merged result holds the last one's", async () => {
    const hooks = new HookRegistry();
    const seen: (string | undefined)[] = [];
    hooks.register("PostToolUse", (context) => {
      seen.push(context.result?.content);
      return new HookResult({ updatedOutput: toolSuccess("rewritten once") });
    });
    hooks.register("PostToolUse", (context) => {
      seen.push(context.result?.content);
      return new HookResult();
    });
    hooks.register("PostToolUse", (context) => {
      seen.push(context.result?.content);
      return new HookResult({ updatedOutput: toolSuccess("rewritten twice") });
    });
    const merged = await hooks.runPostTool(prepared(), toolSuccess("original"));
    expect(seen).toEqual(["original", "rewritten once", "rewritten once"]);
    expect(merged.updatedOutput).toEqual({ content: "rewritten twice", isError: false });
  });

  it("a callback registered while an event runs takes effect from the next event on", async () => {
    const hooks = new HookRegistry();
    const seen: string[] = [];
    hooks.register("Stop", () => {
      seen.push("first");
      hooks.register("Stop", () => {
        seen.push("late");
        return new HookResult();
      });
      return new HookResult();
    });
    await hooks.runStop([], false);
    expect(seen).toEqual(["first"]);
    await hooks.runStop([], true);
    expect(seen).toEqual(["first", "first", "late"]);
  });
});

describe("merging", () => {
  it("permission recommendations keep the strongest: a later allow never overrides an earlier deny", async () => {
    const behaviours = async (...answers: ("allow" | "ask" | "deny" | "passthrough")[]): Promise<unknown> => {
      const hooks = new HookRegistry();
      for (const permissionBehavior of answers)
        hooks.register("PreToolUse", () => new HookResult({ permissionBehavior }));
      return (await hooks.runPreTool(prepared())).permissionBehavior;
    };
    expect(await behaviours("deny", "allow")).toBe("deny");
    expect(await behaviours("allow", "deny")).toBe("deny");
    expect(await behaviours("allow", "ask", "allow")).toBe("ask");
    expect(await behaviours("passthrough", "allow")).toBe("allow");
    expect(await behaviours("passthrough")).toBe("passthrough");
    expect(await behaviours()).toBeUndefined();
  });

  it("additionalContext is joined in registration order; preventContinuation is an OR", async () => {
    const hooks = new HookRegistry();
    hooks.register(
      "PostToolUse",
      () => new HookResult({ additionalContext: [systemMessage("one")], preventContinuation: true }),
    );
    hooks.register(
      "PostToolUse",
      () => new HookResult({ additionalContext: [systemMessage("two")], preventContinuation: false }),
    );
    const merged = await hooks.runPostTool(prepared(), toolSuccess("x"));
    expect(merged.additionalContext).toEqual([systemMessage("one"), systemMessage("two")]);
    expect(merged.preventContinuation).toBe(true);
  });

  it("a blockingError stops the later Pre callbacks", async () => {
    const hooks = new HookRegistry();
    let later = 0;
    hooks.register("PreToolUse", () => new HookResult({ blockingError: toolError("hook_blocked", "no") }));
    hooks.register("PreToolUse", () => {
      later += 1;
      return new HookResult({ permissionBehavior: "allow" });
    });
    const merged = await hooks.runPreTool(prepared());
    expect(merged.blockingError?.content).toBe("Error [hook_blocked]: no");
    expect(merged.permissionBehavior).toBeUndefined();
    expect(later).toBe(0);
  });

  it("rule 12: the first forceContinue stops the later Stop callbacks; with stopHookActive it is dropped and all run", async () => {
    const hooks = new HookRegistry();
    const seen: [string, boolean | undefined][] = [];
    hooks.register("Stop", (context) => {
      seen.push(["forcer", context.stopHookActive]);
      return new HookResult({ forceContinue: userMessage("again") });
    });
    hooks.register("Stop", (context) => {
      seen.push(["second", context.stopHookActive]);
      return new HookResult();
    });
    const first = await hooks.runStop([], false);
    expect(first.forceContinue).toEqual(userMessage("again"));
    expect(seen).toEqual([["forcer", false]]);
    const second = await hooks.runStop([], true);
    expect(second.forceContinue).toBeUndefined();
    expect(seen).toEqual([
      ["forcer", false],
      ["forcer", true],
      ["second", true],
    ]);
  });
});

describe("prepare hands out frozen calls", () => {
  it("the arguments are deep-frozen, so what is approved is what runs", () => {
    const call = prepared("edit_file", { path: "a.txt", old_text: "x", new_text: "y" });
    expect(Object.isFrozen(call)).toBe(true);
    expect(Object.isFrozen(call.arguments)).toBe(true);
    expect(Reflect.set(call.arguments, "path", "b.txt")).toBe(false);
    expect(call.arguments.path).toBe("a.txt");
  });
});

describe("rule 5: updatedInput is re-validated against the call it replaces, then frozen", () => {
  const rewrite = (update: (original: ValidToolCall) => unknown): HookRegistry => {
    const hooks = new HookRegistry();
    hooks.register("PreToolUse", (context) => {
      if (context.prepared === undefined) throw new Error("no prepared call");
      return new HookResult({ updatedInput: update(context.prepared) as ValidToolCall });
    });
    return hooks;
  };

  it("new arguments of the same call pass, cloned and frozen; the hook's own object cannot change them later", async () => {
    const mine = { path: "b.txt", content: "B" };
    const original = prepared();
    const merged = await rewrite((p) => ({ ...p, arguments: mine })).runPreTool(original);
    mine.path = "elsewhere.txt";
    expect(merged.updatedInput?.arguments).toEqual({ path: "b.txt", content: "B" });
    expect(Object.isFrozen(merged.updatedInput)).toBe(true);
    expect(Object.isFrozen(merged.updatedInput?.arguments)).toBe(true);
    expect(merged.updatedInput?.definition).toBe(original.definition);
    expect(merged.updatedInput?.call).toBe(original.call);
  });

  it("the next Pre callback sees the rewritten arguments", async () => {
    const hooks = rewrite((p) => ({ ...p, arguments: { path: "b.txt", content: "B" } }));
    const seen: unknown[] = [];
    hooks.register("PreToolUse", (context) => {
      seen.push(context.prepared?.arguments);
      return new HookResult();
    });
    await hooks.runPreTool(prepared());
    expect(seen).toEqual([{ path: "b.txt", content: "B" }]);
  });

  it("the next Pre callback's resolvedPath is the rewritten call's", async () => {
    const hooks = rewrite((p) => ({ ...p, arguments: { path: "./notes//b.txt", content: "B" } }));
    const seen: (string | undefined)[] = [];
    const record = (context: HookContext): HookResult => {
      seen.push(context.resolvedPath);
      return new HookResult();
    };
    hooks.register("PreToolUse", record);
    hooks.register("PostToolUse", record);
    const merged = await hooks.runPreTool(prepared("write_file", { path: "a.txt", content: "A" }));
    await hooks.runPostTool(merged.updatedInput as ValidToolCall, toolSuccess("ok"));
    expect(seen).toEqual(["notes/b.txt", "notes/b.txt"]);
  });

  it.each([
    [
      "another call id",
      (p: ValidToolCall) => ({ ...p, call: { ...p.call, id: "call_2" } }),
      "must keep the tool call id",
    ],
    [
      "another tool name",
      (p: ValidToolCall) => ({ ...p, call: { ...p.call, name: "read_file" } }),
      "must keep the tool name",
    ],
    [
      "another tool's definition",
      (p: ValidToolCall) => ({ ...p, definition: prepared("read_file", { path: "a.txt" }).definition }),
      "must keep the tool definition",
    ],
    [
      "a structural clone of write_file's own definition",
      (p: ValidToolCall) => ({ ...p, definition: { ...p.definition } }),
      "must keep the tool definition",
    ],
    [
      "an extra argument",
      (p: ValidToolCall) => ({ ...p, arguments: { ...p.arguments, mode: "append" } }),
      "does not match the write_file schema",
    ],
    [
      "arguments the schema refuses",
      (p: ValidToolCall) => ({ ...p, arguments: { path: 1 } }),
      "does not match the write_file schema",
    ],
    ["an error", (p: ValidToolCall) => ({ ...p, error: toolError("x", "y") }), "must not carry an error"],
    ["an extra field", (p: ValidToolCall) => ({ ...p, effect: "read" }), "has unknown fields: effect"],
    [
      "no definition",
      (p: ValidToolCall) => ({ call: p.call, arguments: p.arguments }),
      "needs call, definition and arguments",
    ],
  ])("refuses %s", async (_label, update, message) => {
    const run = rewrite(update).runPreTool(prepared());
    await expect(run).rejects.toThrow(HookContractError);
    await expect(rewrite(update).runPreTool(prepared())).rejects.toThrow(`PreToolUse updatedInput ${message}`);
  });
});

describe("contract failures of a callback", () => {
  it.each([
    ["a plain object", () => ({ additionalContext: [] })],
    ["a forged prototype", () => Object.create(HookResult.prototype) as HookResult],
    ["undefined", () => undefined],
    ["a boolean", () => true],
    ["a promise of a plain object", () => Promise.resolve({})],
  ])("%s is `<event> hook callback must return HookResult`", async (_label, callback) => {
    const hooks = new HookRegistry();
    hooks.register("PreToolUse", callback as unknown as HookCallback);
    await expect(hooks.runPreTool(prepared())).rejects.toThrow(
      new HookContractError("PreToolUse hook callback must return HookResult"),
    );
  });

  it("a throw or a rejection comes out as it is", async () => {
    const failure = new Error("hook broke");
    const hooks = new HookRegistry();
    hooks.register("Stop", () => {
      throw failure;
    });
    await expect(hooks.runStop([], false)).rejects.toBe(failure);
    const rejecting = new HookRegistry();
    rejecting.register("Stop", () => Promise.reject(failure));
    await expect(rejecting.runStop([], false)).rejects.toBe(failure);
  });

  it("a callback that never settles fails with HookTimeoutError after timeoutMs, and the rest do not run", async () => {
    const hooks = new HookRegistry({ timeoutMs: 20 });
    let later = 0;
    hooks.register("PreToolUse", () => new Promise<HookResult>(() => undefined));
    hooks.register("PreToolUse", () => {
      later += 1;
      return new HookResult();
    });
    await expect(hooks.runPreTool(prepared())).rejects.toThrow(HookTimeoutError);
    expect(later).toBe(0);
  });

  it("a callback that rejects after its timeout raises no unhandled rejection", async () => {
    const hooks = new HookRegistry({ timeoutMs: 10 });
    hooks.register(
      "Stop",
      () => new Promise<HookResult>((_, reject) => setTimeout(() => reject(new Error("late")), 30)),
    );
    await expect(hooks.runStop([], false)).rejects.toThrow(HookTimeoutError);
    // vitest fails the file on an unhandled rejection; give the late one time to happen.
    await new Promise((resolve) => setTimeout(resolve, 50));
  });

  it("an empty registry answers an empty result for every event", async () => {
    const hooks = new HookRegistry();
    const merged = await hooks.runPreTool(prepared());
    expect(merged.permissionBehavior).toBeUndefined();
    expect(merged.updatedInput).toBeUndefined();
    expect(merged.blockingError).toBeUndefined();
    expect(merged.additionalContext).toEqual([]);
    expect((await hooks.runStop([], false)).forceContinue).toBeUndefined();
  });

  it("run takes only a HookContext", async () => {
    await expect(new HookRegistry().run({ event: "Stop" } as never)).rejects.toThrow("run requires a HookContext");
  });
});
