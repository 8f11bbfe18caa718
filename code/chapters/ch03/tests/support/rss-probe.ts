// Runs one heavy operation in its own process and prints its peak RSS, so a test can hold the
// agent's memory to a budget without the test runner's own allocations in the way.
// Usage: node --import tsx rss-probe.ts <baseline|flood|read|glob> <workspace> [arg]
import { NodeWorkspaceFileSystem } from "../../src/adapters/filesystem.js";
import { PowerShellRunner } from "../../src/adapters/powershell.js";
import { createShellTool } from "../../src/features/builtin-tools.js";

const [mode, workspace = "", arg = ""] = process.argv.slice(2);
const fs = new NodeWorkspaceFileSystem(workspace);
let summary: unknown = null;

switch (mode) {
  case "baseline":
    break;
  case "flood": {
    const shell = createShellTool(new PowerShellRunner());
    const result = await shell.handler({ command: arg }, { workspace, identity: "user" });
    summary = { isError: result.isError, length: result.content.length, tail: result.content.slice(-300) };
    break;
  }
  case "read": {
    const page = await fs.readText(arg, { offset: 1, limit: 2000 });
    summary = { lineCount: page.lineCount, textLength: page.text.length, more: page.more };
    break;
  }
  case "glob": {
    const found = await fs.glob(arg, 1000);
    summary = { count: found.paths.length, capped: found.capped };
    break;
  }
  default:
    throw new Error(`unknown mode ${String(mode)}`);
}

process.stdout.write(`${JSON.stringify({ maxRssBytes: process.resourceUsage().maxRSS * 1024, summary })}\n`);
