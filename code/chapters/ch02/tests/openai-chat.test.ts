import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { OpenAIChatClient } from "../src/adapters/openai-chat.js";
import { buildAgent } from "../src/bootstrap.js";
import { AgentRunError, ModelCallError } from "../src/core/agent-errors.js";
import { ToolPairingError, validateToolPairing, type ChatMessage } from "../src/core/messages.js";
import type { ModelRequest, ToolSchema } from "../src/core/model-client.js";
import { P01 } from "../src/core/profiles.js";
import {
  apiError,
  completion,
  startLoopbackOpenAI,
  type LoopbackOpenAI,
  type LoopbackReply,
} from "./support/loopback-openai.js";
import { CountingApproval, RecordingCommandRunner, shellRequest } from "./support/fakes.js";

const MODEL = "test-model";
const LIST = { id: "call_1", name: "shell", arguments: '{"command":"Get-ChildItem"}' };

const shellSchema: ToolSchema = {
  type: "function",
  function: {
    name: "shell",
    description: "Run a command",
    parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
  },
};
const conversation: ChatMessage[] = [
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

/** A loopback server answering with `replies` in order, and a client pointed at it. */
async function setUp(...replies: LoopbackReply[]): Promise<{ loopback: LoopbackOpenAI; client: OpenAIChatClient }> {
  const loopback = await startLoopbackOpenAI(
    (_body, index) => replies[index] ?? { json: apiError("no reply"), status: 500 },
  );
  server = loopback;
  return { loopback, client: clientFor(loopback) };
}

function clientFor(loopback: LoopbackOpenAI, timeoutMs = 5_000): OpenAIChatClient {
  return new OpenAIChatClient({
    apiKey: "test-key",
    model: MODEL,
    baseURL: loopback.baseURL,
    maxRetries: 0,
    timeoutMs,
  });
}

const ask = (tools: readonly ToolSchema[] = [shellSchema]): ModelRequest => ({ messages: conversation, tools });

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

describe("OpenAIChatClient against a loopback OpenAI-compatible server", () => {
  it("parses tool calls into an assistant message with every call, in order", async () => {
    const { client } = await setUp({
      json: completion({
        content: "Let me look.",
        toolCalls: [LIST, { id: "call_2", name: "shell", arguments: '{"command":"Get-Content README.md"}' }],
      }),
    });
    expect(await client.complete(ask())).toStrictEqual({
      message: {
        role: "assistant",
        content: "Let me look.",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "shell", arguments: '{"command":"Get-ChildItem"}' } },
          {
            id: "call_2",
            type: "function",
            function: { name: "shell", arguments: '{"command":"Get-Content README.md"}' },
          },
        ],
      },
      finishReason: "tool_calls",
    });
  });

  it("parses a text reply into an assistant message without a tool_calls key", async () => {
    const { client } = await setUp({ json: completion({ content: "All done." }) });
    expect(await client.complete(ask())).toStrictEqual({
      message: { role: "assistant", content: "All done." },
      finishReason: "stop",
    });
  });

  it("drops an empty tool_calls list and keeps a null content as null", async () => {
    const body = {
      choices: [{ message: { role: "assistant", content: null, tool_calls: [] }, finish_reason: "stop" }],
    };
    const { client } = await setUp({ json: body });
    expect(await client.complete(ask())).toStrictEqual({
      message: { role: "assistant", content: null },
      finishReason: "stop",
    });
  });

  it("sends the model, the messages and the tools, and nothing else", async () => {
    const { loopback, client } = await setUp({ json: completion({ content: "ok" }) });
    await client.complete(ask());
    expect(loopback.requests).toEqual([{ model: MODEL, messages: conversation, tools: [shellSchema] }]);
    expect(loopback.headers[0]?.authorization).toBe("Bearer test-key");
  });

  it("sends no tools key at all when there are no tools", async () => {
    const { loopback, client } = await setUp({ json: completion({ content: "ok" }) });
    await client.complete(ask([]));
    expect(loopback.requests).toStrictEqual([{ model: MODEL, messages: conversation }]);
  });

  it("sends an assistant tool call and its tool message exactly as the history holds them", async () => {
    const history: ChatMessage[] = [
      ...conversation,
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "shell", arguments: LIST.arguments } }],
      },
      { role: "tool", tool_call_id: "call_1", content: "README.md" },
    ];
    const { loopback, client } = await setUp({ json: completion({ content: "ok" }) });
    await client.complete({ messages: history, tools: [shellSchema] });
    expect(loopback.requests).toEqual([{ model: MODEL, messages: history, tools: [shellSchema] }]);
  });

  describe("narrows a malformed provider reply to a ModelCallError", () => {
    const message = (fields: Record<string, unknown>): unknown => ({
      choices: [{ message: { role: "assistant", ...fields }, finish_reason: "stop" }],
    });
    it.each<[string, unknown, string]>([
      ["an empty object", {}, "the response has no choices"],
      ["an empty choices list", { choices: [] }, "the response has no choices"],
      ["choices that are not a list", { choices: { 0: {} } }, "the response has no choices"],
      ["a choice without a message", { choices: [{ finish_reason: "stop" }] }, "choices[0].message is missing"],
      ["a null message", { choices: [{ message: null }] }, "choices[0].message is missing"],
      ["a number as content", message({ content: 42 }), "choices[0].message.content is not a string"],
      ["tool_calls that are not a list", message({ tool_calls: { id: "x" } }), "message.tool_calls is not an array"],
      [
        "a tool call without an id",
        message({ tool_calls: [{ type: "function", function: { name: "shell", arguments: "{}" } }] }),
        "tool_calls[0].id is missing",
      ],
      [
        "a tool call with an empty id",
        message({ tool_calls: [{ id: "", function: { name: "shell", arguments: "{}" } }] }),
        "tool_calls[0].id is missing",
      ],
      [
        "a second tool call without a name",
        message({
          tool_calls: [
            { id: "a", function: { name: "shell", arguments: "{}" } },
            { id: "b", function: { arguments: "{}" } },
          ],
        }),
        "tool_calls[1].function.name is missing",
      ],
      [
        "a tool call without a function",
        message({ tool_calls: [{ id: "a" }] }),
        "tool_calls[0].function.name is missing",
      ],
    ])("%s", async (_name, body, detail) => {
      const { client } = await setUp({ json: body });
      const error = await modelCallError(client.complete(ask()));
      expect(error.message).toBe(`The model provider sent a malformed reply: ${detail}`);
    });

    it("a body that is not JSON at all", async () => {
      const { client } = await setUp({ raw: "<html>gateway</html>", contentType: "text/html" });
      const error = await modelCallError(client.complete(ask()));
      expect(error.message).toBe("The model provider sent a malformed reply: the response is not a JSON object");
    });
  });

  it("turns tool call arguments sent as an object into JSON text, and missing ones into {}", async () => {
    const body = {
      choices: [
        {
          message: {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "a", type: "function", function: { name: "shell", arguments: { command: "Get-Date" } } },
              { id: "b", type: "function", function: { name: "shell" } },
              { id: "c", type: "function", function: { name: "shell", arguments: null } },
            ],
          },
          finish_reason: "tool_calls",
        },
      ],
    };
    const { client } = await setUp({ json: body });
    const reply = await client.complete(ask());
    expect(reply.message.tool_calls).toStrictEqual([
      { id: "a", type: "function", function: { name: "shell", arguments: '{"command":"Get-Date"}' } },
      { id: "b", type: "function", function: { name: "shell", arguments: "{}" } },
      { id: "c", type: "function", function: { name: "shell", arguments: "{}" } },
    ]);
  });

  it.each<[unknown, string]>([
    ["stop", "stop"],
    ["tool_calls", "tool_calls"],
    ["length", "length"],
    ["content_filter", "content_filter"],
    ["function_call", "tool_calls"],
    ["eos_token", "other"],
    [null, "other"],
  ])("maps finish_reason %j to %s", async (raw, expected) => {
    const body = { choices: [{ message: { role: "assistant", content: "x" }, finish_reason: raw }] };
    const { client } = await setUp({ json: body });
    expect((await client.complete(ask())).finishReason).toBe(expected);
  });

  it.each<[string, ChatMessage[]]>([
    ["an orphan tool message", [...conversation, { role: "tool", tool_call_id: "call_9", content: "x" }]],
    [
      "an unanswered tool call",
      [
        ...conversation,
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "shell", arguments: "{}" } }],
        },
        { role: "user", content: "and?" },
      ],
    ],
  ])("refuses to send %s and never contacts the provider", async (_name, messages) => {
    const { loopback, client } = await setUp({ json: completion({ content: "ok" }) });
    const error = await rejection(client.complete({ messages, tools: [shellSchema] }));
    expect(error).toBeInstanceOf(ToolPairingError);
    expect(loopback.requests).toHaveLength(0);
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
      const { loopback, client } = await setUp({ json: apiError(detail), status });
      const error = await modelCallError(client.complete(ask()));
      expect(error.message).toBe(expected);
      expect(error.cause).toBeInstanceOf(OpenAI.APIError);
      expect(loopback.requests).toHaveLength(1);
    });

    it("a provider slower than timeoutMs", async () => {
      const { loopback } = await setUp({ json: completion({ content: "late" }), delayMs: 5_000 });
      const error = await modelCallError(clientFor(loopback, 200).complete(ask()));
      expect(error.message).toBe("The model request timed out; check OPENAI_BASE_URL and the provider's status");
      expect(error.cause).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
    });

    it("a connection reset by the provider", async () => {
      const { client } = await setUp({ destroy: true });
      const error = await modelCallError(client.complete(ask()));
      expect(error.message).toBe("Could not reach the model provider: Connection error.");
    });

    it("a provider that is not listening", async () => {
      const { loopback, client } = await setUp();
      await loopback.close();
      const error = await modelCallError(client.complete(ask()));
      expect(error.message).toBe("Could not reach the model provider: Connection error.");
    });
  });
});

describe("the chapter 1 agent against a loopback OpenAI-compatible server", () => {
  it("runs an approved shell call and sends the paired tool message back to the model", async () => {
    const workspace = await realpath(await mkdtemp(join(tmpdir(), "ch01-openai-")));
    folders.push(workspace);
    const loopback = await startLoopbackOpenAI((_body, index) =>
      index === 0
        ? { json: completion({ toolCalls: [LIST] }) }
        : { json: completion({ content: "The workspace holds README.md and src." }) },
    );
    server = loopback;
    const runner = new RecordingCommandRunner({
      output: "README.md\nsrc",
      exitCode: 0,
      timedOut: false,
      truncated: false,
    });
    const approval = new CountingApproval();
    const agent = buildAgent(P01, {
      model: clientFor(loopback),
      workspace,
      commandRunner: runner,
      approvalProvider: approval,
    });

    const result = await agent.run("What is in the workspace?");

    const user: ChatMessage = { role: "user", content: "What is in the workspace?" };
    const assistant: ChatMessage = {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "shell", arguments: LIST.arguments } }],
    };
    const tool: ChatMessage = { role: "tool", tool_call_id: "call_1", content: "README.md\nsrc" };
    expect(result.finalText).toBe("The workspace holds README.md and src.");
    expect(result.turns).toBe(2);
    expect(loopback.requests).toHaveLength(2);
    expect(loopback.requests[1]).toEqual({
      model: MODEL,
      messages: [{ role: "system", content: expect.stringContaining(workspace) as unknown }, user, assistant, tool],
      tools: [
        expect.objectContaining({ type: "function", function: expect.objectContaining({ name: "shell" }) as unknown }),
      ],
    });
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(result.history.slice(1)).toEqual([
      user,
      assistant,
      tool,
      { role: "assistant", content: "The workspace holds README.md and src." },
    ]);
    expect(approval.requests).toEqual([
      { toolName: "shell", reason: "Shell execution requires approval", arguments: { command: "Get-ChildItem" } },
    ]);
    expect(runner.commands).toEqual([shellRequest("Get-ChildItem", workspace)]);
  });
});
