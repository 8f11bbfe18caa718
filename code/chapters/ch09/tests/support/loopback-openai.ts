import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** How the loopback server answers one request; `delayMs` waits first. */
export type LoopbackReply =
  /** A JSON body (status 200 unless given). */
  | { readonly json: unknown; readonly status?: number; readonly delayMs?: number }
  /** A body that is not JSON, sent as `text/plain` unless `contentType` says otherwise. */
  | { readonly raw: string; readonly status?: number; readonly contentType?: string; readonly delayMs?: number }
  /** Reset the connection without answering. */
  | { readonly destroy: true; readonly delayMs?: number };

export type LoopbackResponder = (body: unknown, index: number) => LoopbackReply | Promise<LoopbackReply>;

export interface LoopbackOpenAI {
  /** Pass as the SDK's `baseURL` (or `OPENAI_BASE_URL`); the SDK appends `/chat/completions`. */
  readonly baseURL: string;
  /** Parsed JSON bodies of every `POST /v1/chat/completions`, in arrival order. */
  readonly requests: unknown[];
  /** Request headers, index for index with `requests`. */
  readonly headers: IncomingHttpHeaders[];
  close(): Promise<void>;
}

const CHAT_PATH = "/v1/chat/completions";

/**
 * A tiny OpenAI-compatible Chat Completions server on 127.0.0.1 and a free port, so tests run the
 * real `openai` SDK without the network. Any other path answers 404 and is not recorded.
 */
export async function startLoopbackOpenAI(respond: LoopbackResponder): Promise<LoopbackOpenAI> {
  const requests: unknown[] = [];
  const headers: IncomingHttpHeaders[] = [];
  const timers = new Set<NodeJS.Timeout>();

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const text = await readBody(request);
    if (request.method !== "POST" || request.url !== CHAT_PATH) {
      send(response, {
        json: apiError(`loopback: no route ${request.method ?? "?"} ${request.url ?? "?"}`),
        status: 404,
      });
      return;
    }
    const index = requests.length;
    requests.push(parseJson(text));
    headers.push(request.headers);
    let reply: LoopbackReply;
    try {
      reply = await respond(requests[index], index);
    } catch (error) {
      reply = { json: apiError(`loopback: responder threw: ${String(error)}`), status: 500 };
    }
    if (reply.delayMs !== undefined && reply.delayMs > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          timers.delete(timer);
          resolve();
        }, reply.delayMs);
        timers.add(timer);
      });
    }
    if ("destroy" in reply) request.socket.destroy();
    else send(response, reply);
  };

  const server = createServer((request, response) => {
    handle(request, response).catch(() => request.socket.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    headers,
    close: () => {
      // A delayed reply still pending must not keep the test process alive.
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      return closed;
    },
  };
}

export interface CompletionSpec {
  readonly content?: string | null;
  readonly toolCalls?: readonly { readonly id: string; readonly name: string; readonly arguments: string }[];
  /** Defaults to `tool_calls` when there are tool calls, else `stop`. */
  readonly finishReason?: string;
}

/** A well-formed Chat Completions response body with one choice. */
export function completion(spec: CompletionSpec = {}): unknown {
  const calls = spec.toolCalls ?? [];
  const message = {
    role: "assistant",
    content: spec.content ?? null,
    ...(calls.length > 0
      ? {
          tool_calls: calls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          })),
        }
      : {}),
  };
  return {
    id: "chatcmpl-loopback",
    object: "chat.completion",
    created: 0,
    model: "loopback",
    choices: [{ index: 0, message, finish_reason: spec.finishReason ?? (calls.length > 0 ? "tool_calls" : "stop") }],
  };
}

/** An OpenAI-style error body, as sent with a 4xx or 5xx status. */
export function apiError(message: string): unknown {
  return { error: { message, type: "loopback_error", code: null } };
}

function send(response: ServerResponse, reply: Exclude<LoopbackReply, { destroy: true }>): void {
  const [body, contentType] =
    "json" in reply ? [JSON.stringify(reply.json), "application/json"] : [reply.raw, reply.contentType ?? "text/plain"];
  response.writeHead(reply.status ?? 200, { "content-type": contentType });
  response.end(body);
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
