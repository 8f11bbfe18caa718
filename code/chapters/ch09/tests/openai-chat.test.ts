import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { OpenAIChatModel, toOpenAIMessage } from "../src/adapters/openai-chat.js";
import { AgentRunError, AgentRunner, ModelCallError } from "../src/core/loop.js";
import {
  assistantMessage,
  MessageContractError,
  systemMessage,
  toolCall,
  toolMessage,
  userMessage,
  type ChatMessage,
} from "../src/core/messages.js";
import type { ModelRequest } from "../src/core/model.js";
import type { OpenAIToolSchema } from "../src/core/model.js";
import { PermissionPolicy } from "../src/core/permissions.js";
import { createChapterOneTools } from "../src/features/builtin-tools.js";
import { commandResult, CountingApproval, FakeCommandRunner } from "./support/fakes.js";
import {
  apiError,
  completion,
  startLoopbackOpenAI,
  type LoopbackOpenAI,
  type LoopbackReply,
} from "./support/loopback-openai.js";
import { SHELL_TOOL } from "./support/shell-tool.js";

const MODEL = "test-model";
const LIST = { id: "call_1", name: "shell", arguments: '{"command":"Get-ChildItem"}' };

const shellTool: OpenAIToolSchema = {
  type: "function",
  function: {
    name: "shell",
    description: "Run a command",
    parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
  },
};
const conversation: ChatMessage[] = [systemMessage("You are a test."), userMessage("List the files.")];
const wireConversation = [
  { role: "system", content: "You are a test." },
  { role: "user", content: "List the files." },
];

let server: LoopbackOpenAI | undefined;
const folders: string[] = [];

afterEach(async () => {
  await server?.close();
  server = undefined;
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

/** A loopback server answering with `replies` in order, and a model pointed at it. */
async function setUp(...replies: LoopbackReply[]): Promise<{ loopback: LoopbackOpenAI; model: OpenAIChatModel }> {
  const loopback = await startLoopbackOpenAI(
    (_body, index) => replies[index] ?? { json: apiError("no reply"), status: 500 },
  );
  server = loopback;
  return { loopback, model: modelFor(loopback) };
}

function modelFor(loopback: LoopbackOpenAI, options: { timeoutMs?: number; model?: string } = {}): OpenAIChatModel {
  return new OpenAIChatModel({
    apiKey: "test-key",
    model: options.model ?? MODEL,
    baseURL: loopback.baseURL,
    maxRetries: 0,
    timeoutMs: options.timeoutMs ?? 5_000,
  });
}

const ask = (tools: readonly OpenAIToolSchema[] = [shellTool]): ModelRequest => ({ messages: conversation, tools });

/** The error a promise rejects with; fails the test if it resolves. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the promise to reject, but it resolved");
}

async function modelCallError(promise: Promise<unknown>): Promise<ModelCallError> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(ModelCallError);
  expect(error).toBeInstanceOf(AgentRunError);
  return error as ModelCallError;
}

/** A one-choice body with `message` fields and `finish_reason`, as a provider might send it. */
function body(message: Record<string, unknown>, finishReason: unknown = "stop", extra: object = {}): unknown {
  return { choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finishReason }], ...extra };
}

describe("toOpenAIMessage", () => {
  it("writes each internal message in the Chat Completions wire form, tool_calls and tool_call_id included", () => {
    const messages = [
      systemMessage("s"),
      userMessage("u"),
      assistantMessage("looking", [toolCall("call_1", "shell", '{"command":"x"}')]),
      toolMessage("42", "call_1"),
      assistantMessage("done"),
      assistantMessage(null, [toolCall("call_2", "shell", "{}")]),
    ];
    expect(messages.map(toOpenAIMessage)).toStrictEqual([
      { role: "system", content: "s" },
      { role: "user", content: "u" },
      {
        role: "assistant",
        content: "looking",
        tool_calls: [{ id: "call_1", type: "function", function: { name: "shell", arguments: '{"command":"x"}' } }],
      },
      { role: "tool", tool_call_id: "call_1", content: "42" },
      { role: "assistant", content: "done" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_2", type: "function", function: { name: "shell", arguments: "{}" } }],
      },
    ]);
  });
});

describe("OpenAIChatModel against a loopback OpenAI-compatible server", () => {
  it("normalises tool calls into a frozen internal assistant message with every call, in order", async () => {
    const { model } = await setUp({
      json: completion({
        content: "Let me look.",
        toolCalls: [LIST, { id: "call_2", name: "shell", arguments: '{"command":"Get-Content README.md"}' }],
      }),
    });
    const reply = await model.complete(ask());
    expect(reply).toStrictEqual({
      message: {
        role: "assistant",
        content: "Let me look.",
        toolCalls: [
          { id: "call_1", name: "shell", arguments: '{"command":"Get-ChildItem"}' },
          { id: "call_2", name: "shell", arguments: '{"command":"Get-Content README.md"}' },
        ],
      },
      finishReason: "tool_calls",
    });
    expect(Object.isFrozen(reply.message)).toBe(true);
    expect(Object.isFrozen(reply.message.toolCalls)).toBe(true);
  });

  it("normalises a text reply to an assistant message with no tool calls", async () => {
    const { model } = await setUp({ json: completion({ content: "All done." }) });
    expect(await model.complete(ask())).toStrictEqual({
      message: { role: "assistant", content: "All done.", toolCalls: [] },
      finishReason: "stop",
    });
  });

  it("keeps a null content as null and reads an empty or null tool_calls list as no calls", async () => {
    const { model } = await setUp(
      { json: body({ content: null, tool_calls: [] }) },
      { json: body({ content: "x", tool_calls: null, function_call: null }) },
    );
    expect(await model.complete(ask())).toStrictEqual({
      message: { role: "assistant", content: null, toolCalls: [] },
      finishReason: "stop",
    });
    expect(await model.complete(ask())).toStrictEqual({
      message: { role: "assistant", content: "x", toolCalls: [] },
      finishReason: "stop",
    });
  });

  it("turns tool call arguments sent as an object into JSON text, and missing ones into {}", async () => {
    const { model } = await setUp({
      json: body(
        {
          content: null,
          tool_calls: [
            { id: "a", type: "function", function: { name: "shell", arguments: { command: "Get-Date" } } },
            { id: "b", type: "function", function: { name: "shell" } },
            { id: "c", type: "function", function: { name: "shell", arguments: null } },
          ],
        },
        "tool_calls",
      ),
    });
    expect((await model.complete(ask())).message.toolCalls).toStrictEqual([
      { id: "a", name: "shell", arguments: '{"command":"Get-Date"}' },
      { id: "b", name: "shell", arguments: "{}" },
      { id: "c", name: "shell", arguments: "{}" },
    ]);
  });

  it("reads usage as whole token counts when the provider sends it", async () => {
    const { model } = await setUp({
      json: body({ content: "ok" }, "stop", { usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 } }),
    });
    expect(await model.complete(ask())).toStrictEqual({
      message: { role: "assistant", content: "ok", toolCalls: [] },
      finishReason: "stop",
      usage: { promptTokens: 12, completionTokens: 3 },
    });
  });

  it("sends the model, the wire messages and the tools, and nothing else", async () => {
    const { loopback, model } = await setUp({ json: completion({ content: "ok" }) });
    await model.complete(ask());
    expect(loopback.requests).toStrictEqual([{ model: MODEL, messages: wireConversation, tools: [shellTool] }]);
    expect(loopback.headers[0]?.authorization).toBe("Bearer test-key");
  });

  it("sends no tools key at all when there are no tools", async () => {
    const { loopback, model } = await setUp({ json: completion({ content: "ok" }) });
    await model.complete(ask([]));
    expect(loopback.requests).toStrictEqual([{ model: MODEL, messages: wireConversation }]);
  });

  it.each<[string, ChatMessage[], string]>([
    ["an orphan tool message", [...conversation, toolMessage("x", "call_9")], "orphan tool result id: call_9"],
    [
      "an unanswered tool call",
      [...conversation, assistantMessage(null, [toolCall("call_1", "shell", "{}")]), userMessage("and?")],
      'missing tool results for ids: ["call_1"]',
    ],
  ])("refuses to send %s and never contacts the provider", async (_name, messages, message) => {
    const { loopback, model } = await setUp({ json: completion({ content: "ok" }) });
    const error = await rejection(model.complete({ messages, tools: [shellTool] }));
    expect(error).toBeInstanceOf(MessageContractError);
    expect((error as Error).message).toBe(message);
    expect(loopback.requests).toHaveLength(0);
  });

  describe("finish_reason", () => {
    it.each<[unknown, boolean, string]>([
      ["stop", false, "stop"],
      ["tool_calls", true, "tool_calls"],
      ["length", false, "length"],
      ["content_filter", false, "content_filter"],
      [null, false, "stop"],
      [undefined, false, "stop"],
      [null, true, "tool_calls"],
      [undefined, true, "tool_calls"],
    ])("%j (tool calls: %s) is read as %s", async (raw, withCalls, expected) => {
      const calls = withCalls ? { tool_calls: [{ id: "a", function: { name: "shell", arguments: "{}" } }] } : {};
      const choice = { message: { role: "assistant", content: "x", ...calls }, finish_reason: raw };
      const { model } = await setUp({ json: { choices: [choice] } });
      expect((await model.complete(ask())).finishReason).toBe(expected);
    });

    it.each<[unknown, string]>([
      ["eos_token", "Unsupported finish_reason: eos_token"],
      ["function_call", "Unsupported finish_reason: function_call"],
      [42, "Unsupported finish_reason: 42"],
      [{ why: "x" }, 'Unsupported finish_reason: {"why":"x"}'],
      ["z".repeat(500), `Unsupported finish_reason: ${"z".repeat(80)}`],
    ])("any other value, such as %j, is refused: Unsupported finish_reason", async (raw, message) => {
      const { model } = await setUp({ json: body({ content: "x" }, raw) });
      expect((await modelCallError(model.complete(ask()))).message).toBe(message);
    });
  });

  describe("narrows a malformed provider reply to a ModelCallError", () => {
    it.each<[string, unknown, string]>([
      ["an empty object", {}, "the response has no choices"],
      ["an empty choices list", { choices: [] }, "the response has no choices"],
      ["choices that are not a list", { choices: { 0: {} } }, "the response has no choices"],
      ["a choice without a message", { choices: [{ finish_reason: "stop" }] }, "choices[0].message is missing"],
      ["a null message", { choices: [{ message: null }] }, "choices[0].message is missing"],
      ["a number as content", body({ content: 42 }), "choices[0].message.content is not a string"],
      ["tool_calls that are not a list", body({ tool_calls: { id: "x" } }), "message.tool_calls is not an array"],
      [
        "a tool call without an id",
        body({ tool_calls: [{ type: "function", function: { name: "shell", arguments: "{}" } }] }),
        "tool_calls[0].id is missing",
      ],
      [
        "a tool call with an empty id",
        body({ tool_calls: [{ id: "", function: { name: "shell", arguments: "{}" } }] }),
        "tool_calls[0].id is missing",
      ],
      [
        "a second tool call without a name",
        body({
          tool_calls: [
            { id: "a", function: { name: "shell", arguments: "{}" } },
            { id: "b", function: { arguments: "{}" } },
          ],
        }),
        "tool_calls[1].function.name is missing",
      ],
      ["a tool call without a function", body({ tool_calls: [{ id: "a" }] }), "tool_calls[0].function.name is missing"],
      [
        "two tool calls with one id",
        body({
          tool_calls: [
            { id: "a", function: { name: "shell", arguments: "{}" } },
            { id: "a", function: { name: "shell", arguments: "{}" } },
          ],
        }),
        "two tool calls share one id",
      ],
      [
        "the legacy function_call field instead of tool_calls",
        body({ content: null, function_call: { name: "shell", arguments: '{"command":"x"}' } }, "function_call"),
        "the legacy function_call field is not supported; use a model that sends tool_calls",
      ],
      [
        "usage with a token count that is a string",
        body({ content: "x" }, "stop", { usage: { prompt_tokens: "12", completion_tokens: 3 } }),
        "usage.prompt_tokens and usage.completion_tokens must be whole numbers",
      ],
      [
        "usage with a negative count",
        body({ content: "x" }, "stop", { usage: { prompt_tokens: 12, completion_tokens: -1 } }),
        "usage.prompt_tokens and usage.completion_tokens must be whole numbers",
      ],
      [
        "usage with a fractional count",
        body({ content: "x" }, "stop", { usage: { prompt_tokens: 1.5, completion_tokens: 3 } }),
        "usage.prompt_tokens and usage.completion_tokens must be whole numbers",
      ],
      [
        "usage without completion_tokens",
        body({ content: "x" }, "stop", { usage: { prompt_tokens: 12 } }),
        "usage.prompt_tokens and usage.completion_tokens must be whole numbers",
      ],
    ])("%s", async (_name, reply, detail) => {
      const { model } = await setUp({ json: reply });
      const error = await modelCallError(model.complete(ask()));
      expect(error.message).toBe(`The model provider sent a malformed reply: ${detail}`);
    });

    it("a body that is not JSON at all", async () => {
      const { model } = await setUp({ raw: "<html>gateway</html>", contentType: "text/html" });
      const error = await modelCallError(model.complete(ask()));
      expect(error.message).toBe("The model provider sent a malformed reply: the response is not a JSON object");
    });
  });

  it("a refusal without content is reported in the provider's words, cut at 200 characters", async () => {
    const { model } = await setUp(
      { json: body({ content: null, refusal: "I can't help with that." }) },
      { json: body({ content: null, refusal: "r".repeat(500) }) },
    );
    expect((await modelCallError(model.complete(ask()))).message).toBe(
      "The model refused the request: I can't help with that.",
    );
    expect((await modelCallError(model.complete(ask()))).message).toBe(
      `The model refused the request: ${"r".repeat(200)}`,
    );
  });

  it("a refusal field beside real content, or a blank one, is not a refusal", async () => {
    const { model } = await setUp(
      { json: body({ content: "Here it is.", refusal: "ignored" }) },
      { json: body({ content: null, refusal: "  ", tool_calls: [{ id: "a", function: { name: "shell" } }] }) },
    );
    expect((await model.complete(ask())).message).toStrictEqual(assistantMessage("Here it is."));
    expect((await model.complete(ask())).message).toStrictEqual(assistantMessage(null, [toolCall("a", "shell", "{}")]));
  });

  it("cuts a provider's long error body to 300 characters and says how much is left out", async () => {
    const { model } = await setUp({ json: apiError("x".repeat(2_000)), status: 500 });
    const error = await modelCallError(model.complete(ask()));
    // The SDK puts the status in front of the body: "500 xxx…".
    expect(error.message).toBe(`The model provider answered HTTP 500: 500 ${"x".repeat(296)}… (1704 more characters)`);
  });

  describe("reports a failed call as a ModelCallError naming the cause", () => {
    it.each<[number, string, string]>([
      [500, "boom", "The model provider answered HTTP 500: 500 boom"],
      [
        401,
        "Incorrect API key provided",
        "The model provider answered HTTP 401 (check OPENAI_API_KEY): 401 Incorrect API key provided",
      ],
      [
        429,
        "Rate limit reached",
        "The model provider answered HTTP 429 (rate limited; wait and retry): 429 Rate limit reached",
      ],
      [
        404,
        "The model does not exist",
        `The model provider answered HTTP 404 (check OPENAI_MODEL="${MODEL}" and OPENAI_BASE_URL): 404 The model does not exist`,
      ],
    ])("HTTP %i, asked once with maxRetries 0", async (status, detail, expected) => {
      const { loopback, model } = await setUp({ json: apiError(detail), status });
      const error = await modelCallError(model.complete(ask()));
      expect(error.message).toBe(expected);
      expect(error.cause).toBeInstanceOf(OpenAI.APIError);
      expect(loopback.requests).toHaveLength(1);
    });

    it("a provider slower than timeoutMs", async () => {
      const { loopback } = await setUp({ json: completion({ content: "late" }), delayMs: 5_000 });
      const error = await modelCallError(modelFor(loopback, { timeoutMs: 200 }).complete(ask()));
      expect(error.message).toBe("The model request timed out; check OPENAI_BASE_URL and the provider's status");
      expect(error.cause).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
    });

    it("a connection reset by the provider", async () => {
      const { model } = await setUp({ destroy: true });
      const error = await modelCallError(model.complete(ask()));
      expect(error.message).toBe("Could not reach the model provider: Connection error.");
    });

    it("a provider that is not listening", async () => {
      const { loopback, model } = await setUp();
      await loopback.close();
      const error = await modelCallError(model.complete(ask()));
      expect(error.message).toBe("Could not reach the model provider: Connection error.");
    });
  });
});

// That buildAgent(P01) gives the loop this prompt, this tool and this confirmation is ch01-loop.test.ts's to check.
describe("the book's two-turn exchange, through chapter 1's loop, the SDK and the loopback server", () => {
  it("sends exactly the book's two request bodies for `运行 Write-Output 42，并告诉我结果`", async () => {
    const workspace = await realpath(await mkdtemp(join(tmpdir(), "ch01-openai-")));
    folders.push(workspace);
    // The two responses as the book prints them.
    const loopback = await startLoopbackOpenAI((_body, index) =>
      index === 0
        ? {
            json: {
              choices: [
                {
                  finish_reason: "tool_calls",
                  message: {
                    role: "assistant",
                    content: null,
                    tool_calls: [
                      {
                        id: "call_abc123",
                        type: "function",
                        function: { name: "shell", arguments: '{"command":"Write-Output 42"}' },
                      },
                    ],
                  },
                },
              ],
            },
          }
        : {
            json: {
              choices: [
                {
                  finish_reason: "stop",
                  message: { role: "assistant", content: "命令执行成功，输出是 42。", tool_calls: [] },
                },
              ],
            },
          },
    );
    server = loopback;
    const runner = new FakeCommandRunner(commandResult({ output: "42" }));
    const approval = new CountingApproval(true);
    const system = {
      role: "system",
      content: "You are a coding agent. Use tools when needed, inspect their results, and answer accurately.",
    };
    const agent = new AgentRunner({
      model: modelFor(loopback, { model: "gpt-4.1" }),
      tools: createChapterOneTools(runner),
      systemPrompt: system.content,
      workspace,
      permissionPolicy: new PermissionPolicy({ approval }),
    });

    const result = await agent.run("运行 Write-Output 42，并告诉我结果");
    const user = { role: "user", content: "运行 Write-Output 42，并告诉我结果" };
    const tools = [SHELL_TOOL];
    expect(loopback.requests).toStrictEqual([
      { model: "gpt-4.1", messages: [system, user], tools },
      {
        model: "gpt-4.1",
        messages: [
          system,
          user,
          {
            role: "assistant",
            content: null,
            tool_calls: [
              {
                id: "call_abc123",
                type: "function",
                function: { name: "shell", arguments: '{"command":"Write-Output 42"}' },
              },
            ],
          },
          { role: "tool", tool_call_id: "call_abc123", content: "42" },
        ],
        tools,
      },
    ]);
    expect(result).toStrictEqual({
      finalText: "命令执行成功，输出是 42。",
      history: [
        userMessage("运行 Write-Output 42，并告诉我结果"),
        assistantMessage(null, [toolCall("call_abc123", "shell", '{"command":"Write-Output 42"}')]),
        toolMessage("42", "call_abc123"),
        assistantMessage("命令执行成功，输出是 42。"),
      ],
      turns: 2,
    });
    expect(runner.calls).toStrictEqual([{ command: "Write-Output 42", cwd: workspace }]);
    // From chapter 3 the permission policy asks about the shell, with its own reason.
    expect(approval.requests).toStrictEqual([
      { toolName: "shell", reason: "Shell execution requires approval", arguments: { command: "Write-Output 42" } },
    ]);
  });
});
