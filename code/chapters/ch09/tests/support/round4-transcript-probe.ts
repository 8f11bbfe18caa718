// Runs chapter 8's agent (buildAgent(P08)) on one model reply holding one huge `todo_write` call, then a summary, in
// its own process, and prints its peak RSS, how the run ended and the artifacts it left, so a test can hold that
// reply's memory to a budget without the test runner's own allocations in the way.
// Usage: node --import tsx round4-transcript-probe.ts <baseline|write> <MiB of UTF-8 in one item's content> <character>
import { mkdtempSync, readdirSync, realpathSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildAgent } from "../../src/bootstrap.js";
import type { ApprovalProvider } from "../../src/core/permissions.js";
import { P08 } from "../../src/core/profiles.js";
import { FakeCommandRunner } from "./fakes.js";
import { call, ScriptedModel, textTurn, toolTurn } from "./scripted-model.js";

const [mode, mebibytes = "0", character = "a"] = process.argv.slice(2);
if (mode !== "baseline" && mode !== "write") throw new Error(`unknown mode ${String(mode)}`);

const bytes = Number(mebibytes) * 1024 * 1024;
const content = character.repeat(Math.floor(bytes / Buffer.byteLength(character)));
const args = `{"todos":[{"content":"${content}","status":"pending"}]}`;
const summary = JSON.stringify({
  current_goal: "plan",
  files_read_or_changed: [],
  key_findings: [],
  remaining_work: [],
  user_constraints: [],
});
const noApproval: ApprovalProvider = {
  decide: () => Promise.reject(new Error("no approval is asked for in this probe")),
};

let outcome: unknown = null;
if (mode === "write") {
  const workspace = realpathSync(mkdtempSync(join(tmpdir(), "round4-transcript-probe-")));
  try {
    const model = new ScriptedModel([
      toolTurn(call("todo-1", "todo_write", args)),
      textTurn(summary),
      textTurn("done"),
    ]);
    const agent = buildAgent(P08, {
      model,
      workspace,
      commandRunner: new FakeCommandRunner(),
      approvalProvider: noApproval,
      auditSink: { record: () => undefined },
    });
    let ended: string;
    try {
      ended = (await agent.run("plan")).finalText;
    } catch (error) {
      ended = error instanceof Error ? error.message : String(error);
    }
    const folder = join(workspace, ".agent_tutorial", "artifacts");
    let artifacts: number[] = [];
    try {
      artifacts = readdirSync(folder).map((name) => statSync(join(folder, name)).size);
    } catch {
      // No artifact folder: nothing was saved.
    }
    outcome = { ended, artifacts };
  } finally {
    rmSync(workspace, { recursive: true, force: true });
  }
}

process.stdout.write(`${JSON.stringify({ maxRssBytes: process.resourceUsage().maxRSS * 1024, outcome })}\n`);
