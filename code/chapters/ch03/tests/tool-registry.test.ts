import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { ToolContext } from "../src/core/tool.js";
import { ToolRegistry, type ValidToolCall } from "../src/core/tool-registry.js";
import { toolError, toolSuccess, type ToolResult } from "../src/core/tool-result.js";
import { call } from "./support/scripted-model.js";

const context: ToolContext = { workspace: "/ws", identity: "test" };

function registryWith(handler: (input: { path: string; count?: number | undefined }) => Promise<unknown>) {
  const calls: unknown[] = [];
  const registry = new ToolRegistry();
  registry.register({
    name: "probe",
    description: "a probe tool",
    inputSchema: z.strictObject({ path: z.string(), count: z.number().int().optional() }),
    effect: "read",
    handler: (input) => {
      calls.push(input);
      return handler(input) as Promise<ToolResult>;
    },
  });
  return { registry, calls };
}

const ok = () => Promise.resolve(toolSuccess("done"));

describe("ToolRegistry.register", () => {
  it.each(["", "read-file", "a b", "名字", "x.y"])("rejects the tool name %j", (name) => {
    const registry = new ToolRegistry();
    expect(() =>
      registry.register({ name, description: "", inputSchema: z.strictObject({}), effect: "read", handler: ok }),
    ).toThrow(`invalid tool name "${name}"`);
  });

  it("rejects a second tool with the same name", () => {
    const { registry } = registryWith(ok);
    expect(() =>
      registry.register({
        name: "probe",
        description: "",
        inputSchema: z.strictObject({}),
        effect: "read",
        handler: ok,
      }),
    ).toThrow('tool "probe" is already registered');
  });

  it.each([
    ["z.object", z.object({ a: z.string() })],
    ["z.looseObject", z.looseObject({ a: z.string() })],
  ])("rejects a non-strict schema (%s)", (_kind, inputSchema) => {
    const registry = new ToolRegistry();
    expect(() => registry.register({ name: "t", description: "", inputSchema, effect: "read", handler: ok })).toThrow(
      'tool "t" must use z.strictObject for its input schema',
    );
  });
});

describe("ToolRegistry.prepare", () => {
  const { registry } = registryWith(ok);

  it("an unknown name is unknown_tool with the exact text", () => {
    expect(registry.prepare(call("c1", "nope", {}))).toEqual({
      call: call("c1", "nope", {}),
      error: toolError("unknown_tool", "Unknown tool: nope"),
    });
  });

  it.each(["{not json", "[1]", '"s"', "null", "3", "true"])("arguments %s are invalid_json", (args) => {
    const prepared = registry.prepare(call("c1", "probe", args));
    expect(prepared).toEqual({
      call: call("c1", "probe", args),
      error: toolError("invalid_json", "Arguments of probe must be a JSON object"),
    });
  });

  it.each<[unknown, string]>([
    [{}, "path: Invalid input: expected string, received undefined"],
    [{ path: 1 }, "path: Invalid input: expected string, received number"],
    [{ path: "a", count: 1.5 }, "count: Invalid input: expected int, received number"],
    [{ path: "a", extra: 1 }, '(arguments): Unrecognized key: "extra"'],
    [JSON.parse('{"path":"a","__proto__":{"polluted":true}}'), '(arguments): Unrecognized key: "__proto__"'],
    [{ path: "a", constructor: "x" }, '(arguments): Unrecognized key: "constructor"'],
  ])("schema failures are invalid_arguments naming the field (%j)", (args, problem) => {
    const prepared = registry.prepare(call("c1", "probe", args));
    expect(prepared).toEqual({
      call: call("c1", "probe", args),
      error: toolError("invalid_arguments", `Invalid arguments for probe: ${problem}`),
    });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("a valid call carries the definition and the parsed arguments", () => {
    const prepared = registry.prepare(call("c1", "probe", { path: "a", count: 2 }));
    expect("error" in prepared).toBe(false);
    const valid = prepared as ValidToolCall;
    expect(valid.arguments).toEqual({ path: "a", count: 2 });
    expect(valid.definition.name).toBe("probe");
    expect(valid.definition.effect).toBe("read");
  });
});

describe("ToolRegistry.invoke", () => {
  const prepareValid = (registry: ToolRegistry, args: unknown = { path: "a" }) =>
    registry.prepare(call("c1", "probe", args)) as ValidToolCall;

  it("runs the handler once with the parsed input and returns its result", async () => {
    const { registry, calls } = registryWith(ok);
    expect(await registry.invoke(prepareValid(registry), context)).toEqual(toolSuccess("done"));
    expect(calls).toEqual([{ path: "a" }]);
  });

  it("a handler's own domain error comes back unchanged", async () => {
    const { registry } = registryWith(() => Promise.resolve(toolError("file_not_found", "a does not exist")));
    expect(await registry.invoke(prepareValid(registry), context)).toEqual(
      toolError("file_not_found", "a does not exist"),
    );
  });

  it("a throwing handler becomes tool_execution_error with no stack or message in the content", async () => {
    const { registry } = registryWith(() => Promise.reject(new Error("db password is hunter2")));
    const result = await registry.invoke(prepareValid(registry), context);
    expect(result).toEqual(toolError("tool_execution_error", "Tool probe failed unexpectedly"));
    expect(result.content).not.toContain("hunter2");
    expect(result.content).not.toMatch(/\bat\b.*:\d+:\d+/);
  });

  it.each<[string, unknown]>([
    ["undefined", undefined],
    ["a string", "done"],
    ["an error without a code", { content: "x", isError: true }],
    ["a content that is not a string", { content: 1, isError: false }],
  ])("a handler returning %s becomes invalid_tool_result", async (_name, junk) => {
    const { registry } = registryWith(() => Promise.resolve(junk));
    expect(await registry.invoke(prepareValid(registry), context)).toEqual(
      toolError("invalid_tool_result", "Tool handler returned an invalid result"),
    );
  });

  it("invoke without prepare still validates: forged arguments never reach the handler", async () => {
    const { registry, calls } = registryWith(ok);
    const forged = { ...prepareValid(registry), arguments: { path: 42, extra: true } };
    expect(await registry.invoke(forged, context)).toEqual(
      toolError(
        "invalid_arguments",
        'Invalid arguments for probe: path: Invalid input: expected string, received number; (arguments): Unrecognized key: "extra"',
      ),
    );
    expect(calls).toEqual([]);
  });

  it("a forged definition cannot choose the handler", async () => {
    const { registry, calls } = registryWith(ok);
    const valid = prepareValid(registry);
    let forgedRan = false;
    const forged: ValidToolCall = {
      ...valid,
      definition: {
        ...valid.definition,
        handler: () => {
          forgedRan = true;
          return Promise.resolve(toolSuccess("forged"));
        },
      },
    };
    expect(await registry.invoke(forged, context)).toEqual(toolSuccess("done"));
    expect(forgedRan).toBe(false);
    expect(calls).toHaveLength(1);
  });
});

describe("ToolRegistry.snapshot and openAITools", () => {
  it("a snapshot is unaffected by later registration and cannot register itself", () => {
    const { registry } = registryWith(ok);
    const snapshot = registry.snapshot();
    registry.register({
      name: "later",
      description: "",
      inputSchema: z.strictObject({}),
      effect: "write",
      handler: ok,
    });
    expect(snapshot.openAITools().map((tool) => tool.function.name)).toEqual(["probe"]);
    expect(snapshot.prepare(call("c1", "later", {}))).toEqual({
      call: call("c1", "later", {}),
      error: toolError("unknown_tool", "Unknown tool: later"),
    });
    expect(() =>
      snapshot.register({ name: "x", description: "", inputSchema: z.strictObject({}), effect: "read", handler: ok }),
    ).toThrow("a registry snapshot is read-only");
  });

  it("exposes only name, description and the JSON Schema of the input", () => {
    const { registry } = registryWith(ok);
    expect(registry.openAITools()).toEqual([
      {
        type: "function",
        function: {
          name: "probe",
          description: "a probe tool",
          parameters: {
            type: "object",
            properties: {
              path: { type: "string" },
              count: { type: "integer", minimum: -9007199254740991, maximum: 9007199254740991 },
            },
            required: ["path"],
            additionalProperties: false,
          },
        },
      },
    ]);
    expect(JSON.stringify(registry.openAITools())).not.toMatch(/handler|effect|\$schema/);
  });
});
