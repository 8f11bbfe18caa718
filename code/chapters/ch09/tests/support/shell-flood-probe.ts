// Runs PowerShellRunner on one command in its own process and prints its peak RSS, so a test can hold the
// runner's memory to a budget without the test runner's own allocations in the way. Only the runner is
// imported: what the shell tool makes of its result is checked in shell-tool.test.ts.
// Usage: node --import tsx shell-flood-probe.ts <baseline|flood> <workspace> [command]
import { PowerShellRunner } from "../../src/adapters/powershell.js";

const [mode, workspace = "", command = ""] = process.argv.slice(2);

let summary: unknown = null;
if (mode === "flood") {
  const result = await new PowerShellRunner().run(command, workspace);
  const { exitCode, timedOut, truncated } = result;
  summary = { length: result.output.length, tail: result.output.slice(-300), exitCode, timedOut, truncated };
} else if (mode !== "baseline") {
  throw new Error(`unknown mode ${String(mode)}`);
}

process.stdout.write(`${JSON.stringify({ maxRssBytes: process.resourceUsage().maxRSS * 1024, summary })}\n`);
