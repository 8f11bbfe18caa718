import { spawn } from "node:child_process";
import { nowNs } from "./stats.js";

/**
 * PowerShell that prints `mebibytes` MiB of `x` lines (1 MiB each). It writes bytes to the raw stdout
 * stream: `[Console]::Out.Write` goes through a small autoflushing buffer (1 GiB took 34 s instead of 4 s here), which
 * would time PowerShell's console writer instead of the runner.
 */
export function floodCommand(mebibytes: number): string {
  return (
    "$out = [Console]::OpenStandardOutput(); $line = [byte[]]::new(1048576); [Array]::Fill($line, [byte]120); " +
    `$line[1048575] = 10; for ($i = 0; $i -lt ${mebibytes}; $i++) { $out.Write($line, 0, $line.Length) }; $out.Flush()`
  );
}

/** Copy of the prelude in code/chapters/ch03/src/adapters/powershell.ts, to tell its cost from Node's. */
export const RUNNER_PRELUDE =
  "[Console]::OutputEncoding = [System.Text.UTF8Encoding]::new($false); " +
  "$OutputEncoding = [Console]::OutputEncoding; $ProgressPreference = 'SilentlyContinue'\n";

/** Spawns and drains a process; `keep` keeps stdout as text (small outputs only). */
export function spawnDrain(
  executable: string,
  args: readonly string[],
  cwd: string,
  keep: boolean,
): Promise<{ wallNs: number; bytes: number; text: string; exitCode: number | null }> {
  return new Promise((resolve, reject) => {
    const start = nowNs();
    const child = spawn(executable, args, { cwd, stdio: ["ignore", "pipe", "ignore"] });
    const chunks: Buffer[] = [];
    let bytes = 0;
    child.stdout.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (keep) chunks.push(chunk);
    });
    child.once("error", reject);
    child.once("close", (exitCode) =>
      resolve({ wallNs: nowNs() - start, bytes, text: Buffer.concat(chunks).toString("utf8"), exitCode }),
    );
  });
}
