// Child process of shell.ts: runs one command and reports its own wall time and peak RSS, so a flood's
// memory is measured in a fresh process that does nothing else. Modes:
//   runner  through PowerShellRunner, which keeps the first OUTPUT_CAP_CHARS characters and drops the rest;
//   raw     pwsh spawned with the same command, its bytes only counted (the baseline).
// Usage: node --import tsx scripts/bench/shell-flood-child.ts <pwsh path> <MiB, 0 = Write-Output 1> <mode>
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PowerShellRunner } from "../../code/chapters/ch03/src/adapters/powershell.js";
import { floodCommand, spawnDrain } from "./shell-commands.js";

const [executable, mebibytes, mode] = process.argv.slice(2);
if (
  executable === undefined ||
  mebibytes === undefined ||
  !/^\d+$/.test(mebibytes) ||
  !/^(runner|raw)$/.test(mode ?? "")
) {
  console.error("usage: shell-flood-child.ts <pwsh> <MiB> <runner|raw>");
  process.exit(2);
}
const command = mebibytes === "0" ? "Write-Output 1" : floodCommand(Number(mebibytes));
const folder = realpathSync(mkdtempSync(join(tmpdir(), "agent-bench-flood-")));
try {
  const rssBefore = process.memoryUsage().rss;
  const start = process.hrtime.bigint();
  let report: { outputChars: number; outputBytes: number; truncated: boolean; exitCode: number | null };
  if (mode === "raw") {
    const args = ["-NoLogo", "-NoProfile", "-NonInteractive", "-Command", command];
    const result = await spawnDrain(executable, args, folder, false);
    report = { outputChars: result.bytes, outputBytes: result.bytes, truncated: false, exitCode: result.exitCode };
  } else {
    const result = await new PowerShellRunner({ executable }).run(command, folder);
    report = {
      outputChars: result.output.length,
      outputBytes: Buffer.byteLength(result.output),
      truncated: result.truncated,
      exitCode: result.exitCode,
    };
  }
  const wallNs = Number(process.hrtime.bigint() - start);
  // resourceUsage().maxRSS is in KiB.
  console.log(JSON.stringify({ wallNs, rssBefore, maxRss: process.resourceUsage().maxRSS * 1024, ...report }));
} finally {
  rmSync(folder, { recursive: true, force: true });
}
