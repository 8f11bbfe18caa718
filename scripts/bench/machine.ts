// The machine the figures were taken on, printed above the table and copied into docs/benchmarks.md.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { availableParallelism, loadavg, release, totalmem } from "node:os";
import { findPowerShell } from "../../code/chapters/ch03/src/adapters/powershell.js";

export function describeMachine(): string[] {
  const nproc = spawnSync("nproc", { encoding: "utf8" }).stdout.trim() || String(availableParallelism());
  let cpu = "unknown";
  try {
    cpu = /^model name\s*:\s*(.*)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpu;
  } catch {
    // Not Linux: no /proc/cpuinfo.
  }
  const pwsh = findPowerShell();
  const pwshVersion =
    pwsh === undefined ? "not found" : spawnSync(pwsh, ["--version"], { encoding: "utf8" }).stdout.trim() || "unknown";
  return [
    `date: ${new Date().toISOString()}`,
    `nproc: ${nproc}; CPU: ${cpu}; memory: ${(totalmem() / 2 ** 30).toFixed(1)} GiB; kernel: ${release()}`,
    `node: ${process.version}; pwsh: ${pwshVersion}`,
    `load average at start: ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  ];
}
