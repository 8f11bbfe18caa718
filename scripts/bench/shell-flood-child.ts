// Child process of shell.ts: runs one command and reports its own wall time and peak RSS, so a flood's
// memory is measured in a fresh process that does nothing else. Modes:
//   runner  through PowerShellRunner, output kept to the cap;
//   saved   through PowerShellRunner with `fullOutputPath`, as the shell tool calls it (the full output
//           goes to a file in a temporary folder, removed afterwards);
//   raw     pwsh spawned with the same command, its bytes only counted (the baseline).
// Usage: node --import tsx scripts/bench/shell-flood-child.ts <pwsh path> <MiB, 0 = Write-Output 1> <mode>
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PowerShellRunner } from "../../code/chapters/ch03/src/adapters/powershell.js";
import type { CommandResult } from "../../code/chapters/ch03/src/core/command-runner.js";
import { floodCommand, spawnDrain } from "./shell-commands.js";

const [executable, mebibytes, mode] = process.argv.slice(2);
if (
  executable === undefined ||
  mebibytes === undefined ||
  !/^\d+$/.test(mebibytes) ||
  !/^(runner|saved|raw)$/.test(mode ?? "")
) {
  console.error("usage: shell-flood-child.ts <pwsh> <MiB> <runner|saved|raw>");
  process.exit(2);
}
const command = mebibytes === "0" ? "Write-Output 1" : floodCommand(Number(mebibytes));
const folder = realpathSync(mkdtempSync(join(tmpdir(), "agent-bench-flood-")));
try {
  const rssBefore = process.memoryUsage().rss;
  const start = process.hrtime.bigint();
  let report: { outputBytes: number; truncated: boolean; exitCode: number | null; savedBytes?: number };
  if (mode === "raw") {
    const args = ["-NoLogo", "-NoProfile", "-NonInteractive", "-Command", command];
    const result = await spawnDrain(executable, args, folder, false);
    report = { outputBytes: result.bytes, truncated: false, exitCode: result.exitCode };
  } else {
    // Not an object literal on purpose: a runner without `fullOutputPath` support simply ignores the field.
    const request = {
      command,
      cwd: folder,
      ...(mode === "saved" ? { fullOutputPath: join(folder, ".agent", "shell-output", "full.log") } : {}),
    };
    const result: CommandResult & { savedOutput?: { bytes: number } } = await new PowerShellRunner({ executable }).run(
      request,
    );
    report = {
      outputBytes: Buffer.byteLength(result.output),
      truncated: result.truncated,
      exitCode: result.exitCode,
      ...(result.savedOutput === undefined ? {} : { savedBytes: result.savedOutput.bytes }),
    };
  }
  const wallNs = Number(process.hrtime.bigint() - start);
  // resourceUsage().maxRSS is in KiB.
  console.log(JSON.stringify({ wallNs, rssBefore, maxRss: process.resourceUsage().maxRSS * 1024, ...report }));
} finally {
  rmSync(folder, { recursive: true, force: true });
}
