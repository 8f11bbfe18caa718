// Runs one heavy tool call in its own process and prints its peak RSS, so a test can hold the
// agent's memory to a budget without the test runner's own allocations in the way.
// Usage: node --import tsx rss-probe.ts <baseline|read|glob> <workspace> [path or pattern]
import { NodeWorkspaceFileSystem } from "../../src/adapters/filesystem.js";
import { toolCall } from "../../src/core/messages.js";
import type { ToolResult } from "../../src/core/tools.js";
import { createChapterTwoTools } from "../../src/features/builtin-tools.js";

const [mode, workspace = "", arg = ""] = process.argv.slice(2);
// Chapter 2's registry over the real file system; its shell is never called here.
const registry = createChapterTwoTools(
  { run: () => Promise.reject(new Error("the probe runs no shell")) },
  new NodeWorkspaceFileSystem(),
);

async function invoke(name: string, args: Record<string, unknown>): Promise<ToolResult> {
  const prepared = registry.prepare(toolCall("probe", name, JSON.stringify(args)));
  if (prepared.error !== undefined) return prepared.error;
  return registry.invoke(prepared, { workspace, identity: "user" });
}

let summary: unknown = null;

switch (mode) {
  case "baseline":
    break;
  case "read": {
    const result = await invoke("read_file", { path: arg });
    // A refusal is small and is shown whole; a text read is summed up by its size.
    summary = result.isError ? result : { isError: false, length: result.content.length };
    break;
  }
  case "glob": {
    const result = await invoke("glob", { pattern: arg });
    const lines = result.content.split("\n");
    summary = { isError: result.isError, lines: lines.length, last: lines.at(-1) };
    break;
  }
  default:
    throw new Error(`unknown mode ${String(mode)}`);
}

process.stdout.write(`${JSON.stringify({ maxRssBytes: process.resourceUsage().maxRSS * 1024, summary })}\n`);
