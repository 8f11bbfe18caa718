import { mkdirSync, readdirSync } from "node:fs";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { powershell } from "./support/powershell.js";
import { runProbe, type ProbeRun } from "./support/probe.js";

const MB = 1024 * 1024;
/**
 * Peak RSS the runner may add on top of an idle process doing the same imports, for output that streams
 * through: V8 collects the pipe's chunk buffers only after about 64 MiB of them have piled up, so a gigabyte
 * passing through peaks near 64 MiB whatever the runner keeps (on a loaded machine just past it). Holding the
 * output would cost the whole gigabyte.
 */
const STREAMING_BUDGET = 128 * MB;

const probe = fileURLToPath(new URL("./support/shell-flood-probe.ts", import.meta.url));
const measure = (mode: string, workspace: string, command = ""): ProbeRun => runProbe(probe, mode, workspace, command);

let workspace: string;
beforeAll(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "ch01-flood-")));
});
afterAll(async () => {
  await rm(workspace, { recursive: true, force: true });
});

describe.skipIf(powershell === undefined)("a PowerShell command printing 1 GB", () => {
  it("finishes within the memory budget with the first 50,000 characters, says it truncated them, and saves no file", () => {
    const baseline = measure("baseline", workspace).maxRssBytes;
    const flood =
      "$o = [Console]::OpenStandardOutput(); $b = [byte[]]::new(1MB); [Array]::Fill($b, [byte]120); " +
      "for ($i = 0; $i -lt 1024; $i++) { $o.Write($b, 0, $b.Length) }; $o.Flush()";
    const folder = join(workspace, "flood");
    mkdirSync(folder);
    const run = measure("flood", folder, flood);
    expect(run.summary).toEqual({
      length: 50_000,
      tail: "x".repeat(300),
      exitCode: 0,
      timedOut: false,
      truncated: true,
    });
    // The rest of the output is dropped as it arrives: nothing is written to the workspace.
    expect(readdirSync(folder)).toEqual([]);
    expect(run.maxRssBytes - baseline).toBeLessThan(STREAMING_BUDGET);
  }, 240_000);
});
