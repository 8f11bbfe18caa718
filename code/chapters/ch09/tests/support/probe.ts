import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

/** What a probe prints: its process's peak RSS, and what it found. */
export interface ProbeRun {
  readonly maxRssBytes: number;
  readonly summary: unknown;
}

/**
 * Runs one of the memory probes in tests/support (`probe`, a path) in a process of its own with `mode` and its
 * arguments, so its peak RSS holds none of the test runner's own allocations.
 */
export function runProbe(probe: string, mode: string, ...args: string[]): ProbeRun {
  const run = spawnSync(process.execPath, ["--import", tsx, probe, mode, ...args], {
    encoding: "utf8",
    timeout: 180_000,
    maxBuffer: 4 * 1024 * 1024,
  });
  if (run.status !== 0) throw new Error(`probe ${mode} failed (${String(run.status)}): ${run.stderr}`);
  return JSON.parse(run.stdout) as ProbeRun;
}
