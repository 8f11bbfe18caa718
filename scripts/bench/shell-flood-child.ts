// Child process of shell.ts: runs one command through PowerShellRunner and reports its own peak RSS,
// so the flood's memory is measured in a process that does nothing else.
// Usage: node --import tsx scripts/bench/shell-flood-child.ts <pwsh path> <MiB to print, 0 = Write-Output 1>
import { tmpdir } from "node:os";
import { PowerShellRunner } from "../../code/chapters/ch03/src/adapters/powershell.js";
import { floodCommand } from "./shell-commands.js";

const [executable, mebibytes] = process.argv.slice(2);
if (executable === undefined || mebibytes === undefined || !/^\d+$/.test(mebibytes)) {
  console.error("usage: shell-flood-child.ts <pwsh> <MiB>");
  process.exit(2);
}
const command = mebibytes === "0" ? "Write-Output 1" : floodCommand(Number(mebibytes));
const runner = new PowerShellRunner({ executable });
const rssBefore = process.memoryUsage().rss;
const start = process.hrtime.bigint();
const result = await runner.run({ command, cwd: tmpdir() });
const wallNs = Number(process.hrtime.bigint() - start);
console.log(
  JSON.stringify({
    wallNs,
    rssBefore,
    // resourceUsage().maxRSS is in KiB.
    maxRss: process.resourceUsage().maxRSS * 1024,
    outputChars: result.output.length,
    truncated: result.truncated,
    exitCode: result.exitCode,
  }),
);
