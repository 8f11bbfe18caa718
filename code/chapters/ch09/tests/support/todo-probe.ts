// Runs one model reply holding one huge `todo_write` call through the real loop in its own process and prints its
// peak RSS, so a test can hold that reply's memory to a budget without the test runner's own allocations in the way.
// The arguments are made in both modes, so `baseline` is the same process without the reply.
// Usage: node --import tsx todo-probe.ts <baseline|write> <MiB of UTF-8 in one item's content> <character>
import { AgentRunner } from "../../src/core/loop.js";
import { ToolRegistry } from "../../src/core/tools.js";
import { TodoTracker } from "../../src/features/todos.js";
import { call, ScriptedModel, textTurn, toolTurn } from "./scripted-model.js";

const [mode, mebibytes = "0", character = "a"] = process.argv.slice(2);
if (mode !== "baseline" && mode !== "write") throw new Error(`unknown mode ${String(mode)}`);

const bytes = Number(mebibytes) * 1024 * 1024;
const content = character.repeat(Math.floor(bytes / Buffer.byteLength(character)));
const args = `{"todos":[{"content":"${content}","status":"pending"}]}`;

let summary: unknown = null;
if (mode === "write") {
  const tracker = new TodoTracker();
  const tools = new ToolRegistry();
  tools.register(tracker.toolDefinition);
  const model = new ScriptedModel([toolTurn(call("todo-1", "todo_write", args)), textTurn("done")]);
  const runner = new AgentRunner({
    model,
    tools,
    systemPrompt: "probe",
    workspace: "/unused",
    toolRoundObserver: tracker,
  });
  const { history } = await runner.run("plan");
  const result = history.find((message) => message.role === "tool");
  summary = {
    result: result?.content.slice(0, 300),
    resultLength: result?.content.length,
    todos: tracker.todos.length,
  };
}

process.stdout.write(`${JSON.stringify({ maxRssBytes: process.resourceUsage().maxRSS * 1024, summary })}\n`);
