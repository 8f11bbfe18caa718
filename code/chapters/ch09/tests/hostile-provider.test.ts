import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_REPLY_BYTES } from "../src/adapters/bounded-fetch.js";
import { MODEL_CALL_BUDGET_MS, OpenAIChatModel, redacted } from "../src/adapters/openai-chat.js";
import { MAX_TOOL_CALLS_IN_REPLY, parseChatCompletion } from "../src/adapters/openai-reply.js";
import { runCli } from "../src/cli.js";
import { ConfigurationError, loadSettings } from "../src/config.js";
import { ModelCallError } from "../src/core/loop.js";
import { userMessage } from "../src/core/messages.js";
import { completion, startLoopbackOpenAI } from "./support/loopback-openai.js";
import { Sink } from "./support/sink.js";

// A provider, or whatever answers at its address, is hostile: it may ask for any number of calls, and it may
// echo the key back in an error. Neither may reach the loop or the terminal.

function replyWithCalls(count: number): unknown {
  const tool_calls = Array.from({ length: count }, (_, index) => ({
    id: `c${index}`,
    type: "function",
    function: { name: "shell", arguments: "{}" },
  }));
  return { choices: [{ message: { role: "assistant", content: null, tool_calls }, finish_reason: "tool_calls" }] };
}

describe("a reply's tool calls", () => {
  it("up to MAX_TOOL_CALLS_IN_REPLY (256) are accepted", () => {
    expect(MAX_TOOL_CALLS_IN_REPLY).toBe(256);
    expect(parseChatCompletion(replyWithCalls(256)).message.toolCalls).toHaveLength(256);
  });

  it("more are a malformed reply, refused whole before anything runs", () => {
    expect(() => parseChatCompletion(replyWithCalls(257))).toThrow(
      new ModelCallError(
        "The model provider sent a malformed reply: 257 tool calls in one reply; at most 256 are accepted",
      ),
    );
  });
});

describe("the API key", () => {
  const base = { OPENAI_BASE_URL: "http://127.0.0.1:9/v1", OPENAI_MODEL: "m" };

  it.each([
    ["a line break", "sk-first\nsecond"],
    ["a carriage return", "sk-first\rsecond"],
    ["an escape", "sk-\u001b[2Jkey"],
    ["a NUL", "sk-\u0000key"],
  ])("with %s is a configuration error that does not show it", (_name, key) => {
    let thrown: unknown;
    try {
      loadSettings({ ...base, OPENAI_API_KEY: key });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigurationError);
    const { message, hint } = thrown as ConfigurationError;
    expect(message).toBe("OPENAI_API_KEY contains a line break or another control character (the key is not shown)");
    expect(hint).toBe("put the whole key on one line in .env or the environment");
    expect(`${message}${hint ?? ""}`).not.toContain("sk-");
  });

  it("redacted: every Bearer credential and every copy of the key is replaced", () => {
    expect(redacted('header "Authorization: Bearer sk-abc.def" rejected; bearer xyz', "zzzz")).toBe(
      'header "Authorization: Bearer [redacted]" rejected; Bearer [redacted]',
    );
    expect(redacted("key sk-live-123 is invalid", "sk-live-123")).toBe("key [redacted] is invalid");
  });

  it("a provider that echoes the Authorization header in its error never gets it printed", async () => {
    const server = await startLoopbackOpenAI(() => ({
      raw: "forbidden: Authorization: Bearer sk-loopback-secret-key was refused",
      status: 403,
    }));
    try {
      const model = new OpenAIChatModel({
        baseURL: server.baseURL,
        apiKey: "sk-loopback-secret-key",
        model: "m",
        maxRetries: 0,
      });
      const failure = await model.complete({ messages: [userMessage("hi")], tools: [] }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(ModelCallError);
      const { message } = failure as ModelCallError;
      expect(message).toMatch(/^The model provider answered HTTP 403: /);
      expect(message).toContain("Bearer [redacted]");
      expect(message).not.toContain("sk-loopback-secret-key");
      expect(server.headers[0]?.authorization).toBe("Bearer sk-loopback-secret-key");
    } finally {
      await server.close();
    }
  });
});

// Raw loopback servers for what the OpenAI-compatible one does not do: redirect, compress, drip, throttle.
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (server) =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    ),
  );
});

async function serve(
  handle: (request: IncomingMessage, response: ServerResponse, index: number) => void,
): Promise<{ baseURL: string; requests: () => number }> {
  let count = 0;
  const server = createServer((request, response) => {
    request.resume();
    request.on("end", () => handle(request, response, count++));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests: () => count };
}

async function failureOf(
  baseURL: string,
  options: { timeoutMs?: number; maxRetries?: number; budgetMs?: number } = {},
): Promise<unknown> {
  const model = new OpenAIChatModel({ baseURL, apiKey: "sk-test", model: "m", maxRetries: 0, ...options });
  return model.complete({ messages: [userMessage("hi")], tools: [] }).then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe("what answers at the base URL", () => {
  it("a redirect to another origin is not followed: the conversation and the key stay where they were sent", async () => {
    const elsewhere = await serve((_request, response) => response.end(JSON.stringify(completion())));
    const redirecting = await serve((_request, response) => {
      response.writeHead(307, { location: `${elsewhere.baseURL}/chat/completions` }).end();
    });
    const failure = await failureOf(redirecting.baseURL);
    expect(failure).toEqual(
      new ModelCallError(
        "The model provider answered with a redirect (HTTP 307); redirects are not followed, so set OPENAI_BASE_URL to the final address",
      ),
    );
    expect([redirecting.requests(), elsewhere.requests()]).toEqual([1, 0]);
  });

  it("a reply that inflates past MAX_REPLY_BYTES (32 MiB) is cut off with one clear line", async () => {
    expect(MAX_REPLY_BYTES).toBe(32 * 1024 * 1024);
    const bomb = gzipSync(Buffer.alloc(40 * 1024 * 1024, 0x20));
    const server = await serve((_request, response) => {
      response.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" }).end(bomb);
    });
    expect(await failureOf(server.baseURL)).toEqual(
      new ModelCallError("The model provider's reply is larger than 32 MiB; it was not read further"),
    );
  });

  it("a body that drips one byte at a time meets the attempt's deadline, which covers the body too", async () => {
    const server = await serve((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.write("{");
      const timer = setInterval(() => response.write(" "), 200);
      response.on("close", () => clearInterval(timer));
    });
    expect(await failureOf(server.baseURL, { timeoutMs: 1_000 })).toEqual(
      new ModelCallError("The model request timed out; check OPENAI_BASE_URL and the provider's status"),
    );
  });

  it("Retry-After: 3600 is not obeyed: the SDK's own short backoff applies, and the retry gets the answer", async () => {
    const server = await serve((_request, response, index) => {
      if (index === 0) {
        response.writeHead(429, { "content-type": "application/json", "retry-after": "3600" });
        response.end(JSON.stringify({ error: { message: "slow down" } }));
        return;
      }
      response
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify(completion({ content: "ok" })));
    });
    const model = new OpenAIChatModel({ baseURL: server.baseURL, apiKey: "sk-test", model: "m", maxRetries: 1 });
    const reply = await model.complete({ messages: [userMessage("hi")], tools: [] });
    expect(reply.message.content).toBe("ok");
    expect(server.requests()).toBe(2);
  });

  it("a provider that never answers meets the whole call's budget, however many retries are allowed", async () => {
    expect(MODEL_CALL_BUDGET_MS).toBe(300_000);
    const server = await serve(() => {
      // Never answered: each attempt meets its own deadline, and the SDK would retry twenty times.
    });
    const failure = await failureOf(server.baseURL, { timeoutMs: 300, maxRetries: 20, budgetMs: 1_500 });
    expect(failure).toBeInstanceOf(ModelCallError);
    expect((failure as Error).message).toMatch(
      /^The model call took longer than 1\.5 s over [2-4] attempts; check OPENAI_BASE_URL and the provider's status$/,
    );
    expect(server.requests()).toBeLessThanOrEqual(4);
  });

  it("each retry is told to the caller, with its number and how many there can be", async () => {
    const server = await serve((_request, response, index) => {
      if (index < 2) {
        response.writeHead(500, { "content-type": "application/json", "retry-after-ms": "10" });
        response.end(JSON.stringify({ error: { message: "busy" } }));
        return;
      }
      response
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify(completion({ content: "ok" })));
    });
    const attempts: [number, number][] = [];
    const model = new OpenAIChatModel({
      baseURL: server.baseURL,
      apiKey: "sk-test",
      model: "m",
      onAttempt: (attempt, of) => attempts.push([attempt, of]),
    });
    expect((await model.complete({ messages: [userMessage("hi")], tools: [] })).message.content).toBe("ok");
    expect(attempts).toEqual([
      [2, 3],
      [3, 3],
    ]);
    // The next call counts from its own first attempt.
    await model.complete({ messages: [userMessage("again")], tools: [] });
    expect(attempts).toHaveLength(2);
  });
});

describe("the CLI waiting on a provider that fails and retries", () => {
  it("replaces its waiting line with the attempt it is on, and leaves it out with --quiet", async () => {
    const server = await serve((_request, response, index) => {
      if (index % 2 === 0) {
        response.writeHead(503, { "content-type": "application/json", "retry-after-ms": "10" });
        response.end(JSON.stringify({ error: { message: "busy" } }));
        return;
      }
      response
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify(completion({ content: "done" })));
    });
    const run = async (...extra: string[]): Promise<string> => {
      const [stdout, stderr] = [new Sink(), new Sink()];
      const env = { OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: server.baseURL, OPENAI_MODEL: "m", NO_COLOR: "1" };
      // A folder of its own: tmpdir() itself may hold a checkout of this repository, and is then refused.
      const workspace = await mkdtemp(join(tmpdir(), "hostile-provider-"));
      const io = { env, cwd: workspace, stdin: new PassThrough().end(), stdinIsTTY: false, stdout, stderr };
      const argv = ["run", "--chapter", "1", "--prompt", "hi", "--workspace", workspace, ...extra];
      expect(await runCli(argv, { ...io, stderrIsTTY: true })).toBe(0);
      expect(stdout.text).toBe("done\n");
      return stderr.text;
    };
    expect(await run()).toContain("等待模型回复 (第 2 次尝试, 最多 3 次)…");
    expect(await run("--quiet")).not.toContain("次尝试");
  });
});
