import { lstat, mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { OpenAIChatClient } from "../src/adapters/openai-chat.js";
import { buildAgent } from "../src/bootstrap.js";
import type { CommandRunner } from "../src/core/command-runner.js";
import { validateToolPairing, type ChatMessage } from "../src/core/messages.js";
import type { ToolSchema } from "../src/core/model-client.js";
import { P02 } from "../src/core/profiles.js";
import {
  apiError,
  completion,
  startLoopbackOpenAI,
  type CompletionSpec,
  type LoopbackOpenAI,
} from "./support/loopback-openai.js";
import { CountingApproval, RecordingCommandRunner, shellRequest } from "./support/fakes.js";
import { toolMessages } from "./support/scripted-model.js";

/** The part of a Chat Completions request body these tests read. */
interface WireRequest {
  readonly model: string;
  readonly messages: ChatMessage[];
  readonly tools?: ToolSchema[];
}

let root: string;
let workspace: string;
let server: LoopbackOpenAI | undefined;

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch02-loop-")));
  workspace = join(root, "ws");
  await mkdir(join(workspace, "src"), { recursive: true });
  await writeFile(join(workspace, "src", "app.ts"), "export {};\n");
});

afterEach(async () => {
  await server?.close();
  server = undefined;
  await rm(root, { recursive: true, force: true });
});

/** A loopback server playing `turns` in order, and a P02 agent talking to it through the real SDK. */
async function agentAgainst(turns: readonly CompletionSpec[], runner: CommandRunner, approval: CountingApproval) {
  const loopback = await startLoopbackOpenAI((_body, index) => {
    const turn = turns[index];
    return turn === undefined ? { json: apiError("script ran out"), status: 500 } : { json: completion(turn) };
  });
  server = loopback;
  const model = new OpenAIChatClient({
    apiKey: "test-key",
    model: "test-model",
    baseURL: loopback.baseURL,
    maxRetries: 0,
    timeoutMs: 5_000,
  });
  const agent = buildAgent(P02, { model, workspace, commandRunner: runner, approvalProvider: approval });
  const requests = (): WireRequest[] => loopback.requests as WireRequest[];
  return { agent, requests };
}

function toolCall(id: string, name: string, args: Record<string, unknown>) {
  return { id, name, arguments: JSON.stringify(args) };
}

const ESCAPE_MESSAGE = 'Error [path_escape]: path leaves the workspace: "../outside.txt"';
const SUMMARY = "One source file: src/app.ts.\n";

describe("the chapter 2 loop over the real OpenAI SDK and a loopback server", () => {
  it("refuses a write outside, writes inside without asking, reads and globs, and pairs every result", async () => {
    const runner = new RecordingCommandRunner();
    const approval = new CountingApproval(true);
    const { agent, requests } = await agentAgainst(
      [
        { toolCalls: [toolCall("call_escape", "write_file", { path: "../outside.txt", content: "leak" })] },
        { toolCalls: [toolCall("call_write", "write_file", { path: "notes/summary.txt", content: SUMMARY })] },
        { toolCalls: [toolCall("call_read", "read_file", { path: "notes/summary.txt" })] },
        { toolCalls: [toolCall("call_glob", "glob", { pattern: "**/*" })] },
        { content: "Wrote notes/summary.txt." },
      ],
      runner,
      approval,
    );

    const result = await agent.run("Summarise the workspace into notes/summary.txt");

    expect(result.finalText).toBe("Wrote notes/summary.txt.");
    expect(result.turns).toBe(5);
    const sent = requests();
    expect(sent).toHaveLength(5);
    expect(sent.map((request) => request.messages.length)).toEqual([2, 4, 6, 8, 10]);
    // The refusal reaches the model in the very next request, as the tool message answering its call.
    expect(sent[1]?.messages.at(-1)).toEqual({ role: "tool", tool_call_id: "call_escape", content: ESCAPE_MESSAGE });
    expect(toolMessages(sent[4]?.messages ?? [])).toEqual([
      ["call_escape", ESCAPE_MESSAGE],
      ["call_write", "Created notes/summary.txt (29 bytes)"],
      ["call_read", "One source file: src/app.ts."],
      ["call_glob", "notes/summary.txt\nsrc/app.ts"],
    ]);
    for (const request of sent) expect(() => validateToolPairing(request.messages)).not.toThrow();
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(result.history.slice(0, -1)).toEqual(sent[4]?.messages);
    expect(result.history.at(-1)).toEqual({ role: "assistant", content: "Wrote notes/summary.txt." });

    // Nothing outside the workspace; the inside write is on disk, exactly; P02 asked nobody about writes.
    await expect(lstat(join(root, "outside.txt"))).rejects.toMatchObject({ code: "ENOENT" });
    expect(await readdir(root)).toEqual(["ws"]);
    expect(await readFile(join(workspace, "notes", "summary.txt"), "utf8")).toBe(SUMMARY);
    expect(approval.requests).toHaveLength(0);
    expect(runner.commands).toHaveLength(0);
  });

  it("offers exactly shell, read_file, write_file, edit_file and glob, each a strict schema with no handler or effect", async () => {
    const { agent, requests } = await agentAgainst(
      [{ content: "Nothing to do." }],
      new RecordingCommandRunner(),
      new CountingApproval(true),
    );
    await agent.run("hello");

    const [request] = requests();
    expect(request?.model).toBe("test-model");
    const tools = request?.tools ?? [];
    expect(tools.map((tool) => tool.function.name)).toEqual(["shell", "read_file", "write_file", "edit_file", "glob"]);
    expect(tools.map((tool) => Object.keys(tool).sort())).toEqual(Array(5).fill(["function", "type"]));
    expect(tools.map((tool) => Object.keys(tool.function).sort())).toEqual(
      Array(5).fill(["description", "name", "parameters"]),
    );
    expect(
      tools.map(({ function: { parameters } }) => ({
        type: parameters.type,
        additionalProperties: parameters.additionalProperties,
        properties: Object.keys(parameters.properties as object),
        required: parameters.required,
      })),
    ).toEqual([
      { type: "object", additionalProperties: false, properties: ["command"], required: ["command"] },
      { type: "object", additionalProperties: false, properties: ["path", "offset", "limit"], required: ["path"] },
      { type: "object", additionalProperties: false, properties: ["path", "content"], required: ["path", "content"] },
      {
        type: "object",
        additionalProperties: false,
        properties: ["path", "old_string", "new_string", "replace_all"],
        required: ["path", "old_string", "new_string"],
      },
      { type: "object", additionalProperties: false, properties: ["pattern"], required: ["pattern"] },
    ]);
    for (const tool of tools) expect(tool.function.description).not.toBe("");
    expect(JSON.stringify(tools)).not.toMatch(/"(handler|effect|inputSchema)"/);
  });

  it("asks approval for a shell call but not for a write in the same turn, and runs the approved command", async () => {
    const runner = new RecordingCommandRunner();
    const approval = new CountingApproval(true);
    const { agent, requests } = await agentAgainst(
      [
        {
          toolCalls: [
            toolCall("call_ls", "shell", { command: "Get-ChildItem" }),
            toolCall("call_log", "write_file", { path: "log.txt", content: "listed\n" }),
          ],
        },
        { content: "Listed." },
      ],
      runner,
      approval,
    );

    const result = await agent.run("List the workspace and log it");

    expect(approval.requests).toEqual([
      { toolName: "shell", reason: "Shell execution requires approval", arguments: { command: "Get-ChildItem" } },
    ]);
    expect(runner.commands).toEqual([shellRequest("Get-ChildItem", workspace)]);
    const sent = requests();
    expect(toolMessages(sent[1]?.messages ?? [])).toEqual([
      ["call_ls", "a.txt"],
      ["call_log", "Created log.txt (7 bytes)"],
    ]);
    for (const request of sent) expect(() => validateToolPairing(request.messages)).not.toThrow();
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(await readFile(join(workspace, "log.txt"), "utf8")).toBe("listed\n");
  });

  it("a refused shell call never reaches the CommandRunner and the model is told permission_denied", async () => {
    const runner = new RecordingCommandRunner();
    const approval = new CountingApproval(false);
    const { agent, requests } = await agentAgainst(
      [
        { toolCalls: [toolCall("call_rm", "shell", { command: "Remove-Item -Recurse -Force ." })] },
        { content: "I was not allowed to delete anything." },
      ],
      runner,
      approval,
    );

    const result = await agent.run("Delete everything");

    expect(approval.requests).toHaveLength(1);
    expect(runner.commands).toHaveLength(0);
    const sent = requests();
    expect(sent).toHaveLength(2);
    expect(toolMessages(sent[1]?.messages ?? [])).toEqual([
      ["call_rm", "Error [permission_denied]: The user did not approve this tool call"],
    ]);
    for (const request of sent) expect(() => validateToolPairing(request.messages)).not.toThrow();
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(await readdir(workspace)).toEqual(["src"]);
  });
});
