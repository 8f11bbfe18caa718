import { lstat, mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { OpenAIChatModel } from "../src/adapters/openai-chat.js";
import { buildAgent, SYSTEM_PROMPT, toOpenAIMessage } from "../src/bootstrap.js";
import type { CommandRunner } from "../src/core/commands.js";
import { assistantMessage, validateToolPairing, type ChatMessage } from "../src/core/messages.js";
import { P02 } from "../src/core/profiles.js";
import type { OpenAIToolSchema } from "../src/core/model.js";
import type { WorkspaceFileSystem } from "../src/core/filesystem.js";
import {
  apiError,
  completion,
  startLoopbackOpenAI,
  type CompletionSpec,
  type LoopbackOpenAI,
} from "./support/loopback-openai.js";
import { CountingApproval, FakeCommandRunner, FakeFileSystem } from "./support/fakes.js";
import { FILE_TOOLS } from "./support/file-tools.js";
import { SHELL_TOOL } from "./support/shell-tool.js";

/** A message as Chat Completions carries it on the wire: snake_case, tool calls under `tool_calls`. */
type WireMessage = ReturnType<typeof toOpenAIMessage>;

/** The part of a Chat Completions request body these tests read. */
interface WireRequest {
  readonly model: string;
  readonly messages: WireMessage[];
  readonly tools?: OpenAIToolSchema[];
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
async function agentAgainst(
  turns: readonly CompletionSpec[],
  runner: CommandRunner,
  approval: CountingApproval,
  fileSystem?: WorkspaceFileSystem,
) {
  const loopback = await startLoopbackOpenAI((_body, index) => {
    const turn = turns[index];
    return turn === undefined ? { json: apiError("script ran out"), status: 500 } : { json: completion(turn) };
  });
  server = loopback;
  const model = new OpenAIChatModel({
    apiKey: "test-key",
    model: "test-model",
    baseURL: loopback.baseURL,
    maxRetries: 0,
    timeoutMs: 5_000,
  });
  const agent = buildAgent(P02, {
    model,
    workspace,
    commandRunner: runner,
    approvalProvider: approval,
    ...(fileSystem === undefined ? {} : { fileSystem }),
  });
  const requests = (): WireRequest[] => loopback.requests as WireRequest[];
  return { agent, requests };
}

function wireCall(id: string, name: string, args: Record<string, unknown>) {
  return { id, name, arguments: JSON.stringify(args) };
}

/** The tool messages of a request body, as `[tool_call_id, content]` pairs in order. */
function wireToolMessages(messages: readonly WireMessage[]): [string, string][] {
  return messages.flatMap((message) =>
    message.role === "tool" ? [[message.tool_call_id, message.content as string] as [string, string]] : [],
  );
}

/**
 * What the requests must have carried, one per assistant message of the final history: the system
 * prompt, then the history up to that assistant message (the prompt, the earlier turns and their results).
 */
function expectedRequests(history: readonly ChatMessage[]): WireMessage[][] {
  return history.flatMap((message, index) =>
    message.role === "assistant"
      ? [[{ role: "system", content: SYSTEM_PROMPT }, ...history.slice(0, index).map(toOpenAIMessage)]]
      : [],
  );
}

const ESCAPE_MESSAGE = "Error [path_escape]: Path escapes workspace: ../outside.txt";
const SUMMARY = "One source file: src/app.ts.\n";

describe("the chapter 2 loop over the real OpenAI SDK and a loopback server", () => {
  it("refuses a write outside, writes inside without asking, reads and globs, and pairs every result", async () => {
    const runner = new FakeCommandRunner();
    const approval = new CountingApproval(true);
    const { agent, requests } = await agentAgainst(
      [
        { toolCalls: [wireCall("call_escape", "write_file", { path: "../outside.txt", content: "leak" })] },
        { toolCalls: [wireCall("call_write", "write_file", { path: "notes/summary.txt", content: SUMMARY })] },
        { toolCalls: [wireCall("call_read", "read_file", { path: "notes/summary.txt" })] },
        { toolCalls: [wireCall("call_glob", "glob", { pattern: "**/*" })] },
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
    expect(wireToolMessages(sent[4]?.messages ?? [])).toEqual([
      ["call_escape", ESCAPE_MESSAGE],
      ["call_write", "Wrote 29 UTF-8 bytes to notes/summary.txt"],
      ["call_read", SUMMARY],
      ["call_glob", "notes/summary.txt\nsrc/app.ts"],
    ]);
    // Every request is the system prompt and a prefix of the paired history, nothing more.
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(sent.map((request) => request.messages)).toEqual(expectedRequests(result.history));
    expect(result.history).toHaveLength(10);
    expect(result.history.filter((message) => message.role === "system")).toEqual([]);
    expect(result.history.at(-1)).toEqual(assistantMessage("Wrote notes/summary.txt.", []));

    // Nothing outside the workspace; the inside write is on disk, exactly; P02 asked nobody about writes.
    await expect(lstat(join(root, "outside.txt"))).rejects.toMatchObject({ code: "ENOENT" });
    expect(await readdir(root)).toEqual(["ws"]);
    expect(await readFile(join(workspace, "notes", "summary.txt"), "utf8")).toBe(SUMMARY);
    expect(approval.requests).toHaveLength(0);
    expect(runner.calls).toHaveLength(0);
  });

  it("edits a file in place without asking, and the model reads the edit back", async () => {
    const runner = new FakeCommandRunner();
    const approval = new CountingApproval(true);
    const { agent, requests } = await agentAgainst(
      [
        {
          toolCalls: [
            wireCall("call_edit", "edit_file", { path: "src/app.ts", old_text: "{}", new_text: "{ main }" }),
            wireCall("call_read", "read_file", { path: "src/app.ts" }),
          ],
        },
        { content: "Exported main." },
      ],
      runner,
      approval,
    );

    const result = await agent.run("Export main from src/app.ts");

    expect(result.finalText).toBe("Exported main.");
    expect(wireToolMessages(requests()[1]?.messages ?? [])).toEqual([
      ["call_edit", "Edited src/app.ts"],
      ["call_read", "export { main };\n"],
    ]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(requests().map((request) => request.messages)).toEqual(expectedRequests(result.history));
    expect(await readFile(join(workspace, "src", "app.ts"), "utf8")).toBe("export { main };\n");
    expect(approval.requests).toHaveLength(0);
    expect(runner.calls).toHaveLength(0);
  });

  it("runs the file tools on the file system it was given, and never on the disk", async () => {
    const fileSystem = new FakeFileSystem({ "src/app.ts": "export {};\n" });
    const approval = new CountingApproval(true);
    const { agent, requests } = await agentAgainst(
      [
        {
          toolCalls: [
            wireCall("call_glob", "glob", { pattern: "**/*.ts" }),
            wireCall("call_read", "read_file", { path: "src/app.ts", limit: 5 }),
            wireCall("call_edit", "edit_file", { path: "src/app.ts", old_text: "{}", new_text: "{ x }" }),
            wireCall("call_write", "write_file", { path: "notes.md", content: "n" }),
          ],
        },
        { content: "Done." },
      ],
      new FakeCommandRunner(),
      approval,
      fileSystem,
    );

    await agent.run("Work in memory");

    expect(fileSystem.calls).toEqual([
      ["globFiles", workspace, "**/*.ts"],
      ["readFile", workspace, "src/app.ts", 5],
      ["editFile", workspace, "src/app.ts", "{}", "{ x }"],
      ["writeFile", workspace, "notes.md", "n"],
    ]);
    expect(wireToolMessages(requests()[1]?.messages ?? [])).toEqual([
      ["call_glob", "src/app.ts"],
      ["call_read", "export {};\n"],
      ["call_edit", "Edited src/app.ts"],
      ["call_write", "Wrote 1 UTF-8 bytes to notes.md"],
    ]);
    expect(fileSystem.files).toEqual(
      new Map([
        ["src/app.ts", "export { x };\n"],
        ["notes.md", "n"],
      ]),
    );
    // The real workspace is as it was: the agent wrote through the port, not around it.
    expect(await readFile(join(workspace, "src", "app.ts"), "utf8")).toBe("export {};\n");
    expect(await readdir(workspace)).toEqual(["src"]);
    expect(approval.requests).toHaveLength(0);
  });

  it("offers exactly shell, read_file, write_file, edit_file and glob, each a strict schema with no handler or effect", async () => {
    const { agent, requests } = await agentAgainst(
      [{ content: "Nothing to do." }],
      new FakeCommandRunner(),
      new CountingApproval(true),
    );
    await agent.run("hello");

    const [request] = requests();
    expect(request?.model).toBe("test-model");
    const tools = request?.tools ?? [];
    expect(tools.map((tool) => tool.function.name)).toEqual(["shell", "read_file", "write_file", "edit_file", "glob"]);
    // The whole of what the model is shown: chapter 1's shell, then the four file tools, nothing else.
    expect(tools).toStrictEqual([SHELL_TOOL, ...FILE_TOOLS]);
    for (const tool of tools) expect(tool.function.description).not.toBe("");
    expect(JSON.stringify(tools)).not.toMatch(/"(handler|effect|inputSchema)"/);
  });

  it("asks approval for a shell call but not for a write in the same turn, and runs the approved command", async () => {
    const runner = new FakeCommandRunner();
    const approval = new CountingApproval(true);
    const { agent, requests } = await agentAgainst(
      [
        {
          toolCalls: [
            wireCall("call_ls", "shell", { command: "Get-ChildItem" }),
            wireCall("call_log", "write_file", { path: "log.txt", content: "listed\n" }),
          ],
        },
        { content: "Listed." },
      ],
      runner,
      approval,
    );

    const result = await agent.run("List the workspace and log it");

    // From chapter 3 the permission policy asks about the shell, with its own reason; P02 has no file rule.
    expect(approval.requests).toEqual([
      { toolName: "shell", reason: "Shell execution requires approval", arguments: { command: "Get-ChildItem" } },
    ]);
    expect(runner.calls).toEqual([{ command: "Get-ChildItem", cwd: workspace }]);
    const sent = requests();
    expect(wireToolMessages(sent[1]?.messages ?? [])).toEqual([
      ["call_ls", "a.txt"],
      ["call_log", "Wrote 7 UTF-8 bytes to log.txt"],
    ]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(sent.map((request) => request.messages)).toEqual(expectedRequests(result.history));
    expect(await readFile(join(workspace, "log.txt"), "utf8")).toBe("listed\n");
  });

  it("a refused shell call never reaches the CommandRunner and the model is told permission_denied", async () => {
    const runner = new FakeCommandRunner();
    const approval = new CountingApproval(false);
    const { agent, requests } = await agentAgainst(
      [
        { toolCalls: [wireCall("call_rm", "shell", { command: "Remove-Item -Recurse -Force ." })] },
        { content: "I was not allowed to delete anything." },
      ],
      runner,
      approval,
    );

    const result = await agent.run("Delete everything");

    expect(approval.requests).toHaveLength(1);
    expect(runner.calls).toHaveLength(0);
    const sent = requests();
    expect(sent).toHaveLength(2);
    expect(wireToolMessages(sent[1]?.messages ?? [])).toEqual([
      ["call_rm", "Error [permission_denied]: The user did not approve this tool call"],
    ]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(sent.map((request) => request.messages)).toEqual(expectedRequests(result.history));
    expect(await readdir(workspace)).toEqual(["src"]);
  });
});
