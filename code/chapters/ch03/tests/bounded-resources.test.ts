import { spawnSync } from "node:child_process";
import { closeSync, ftruncateSync, mkdirSync, openSync, readdirSync, writeFileSync } from "node:fs";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { powershell } from "./support/powershell.js";

const MB = 1024 * 1024;
const GB = 1024 * MB;
/** Peak RSS the agent may add on top of an idle process doing the same imports. */
const BUDGET = 64 * MB;

const probe = fileURLToPath(new URL("./support/rss-probe.ts", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

interface Probe {
  maxRssBytes: number;
  summary: Record<string, unknown>;
}

function measure(mode: string, workspace: string, arg = ""): Probe {
  const run = spawnSync(process.execPath, ["--import", tsx, probe, mode, workspace, arg], {
    encoding: "utf8",
    timeout: 180_000,
    maxBuffer: 4 * MB,
  });
  if (run.status !== 0) throw new Error(`probe ${mode} failed (${run.status}): ${run.stderr}`);
  return JSON.parse(run.stdout) as Probe;
}

let workspace: string;
let baseline: number;

beforeAll(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "ch03-bounded-")));
  baseline = measure("baseline", workspace).maxRssBytes;
}, 60_000);

afterAll(async () => {
  await rm(workspace, { recursive: true, force: true });
});

describe("bounded resources", () => {
  it("read_file on a 1 GB file returns one capped page within the memory budget", () => {
    // A sparse 1 GB file with no newline at all: the worst case, one enormous line.
    const fd = openSync(join(workspace, "huge.bin"), "w");
    ftruncateSync(fd, GB);
    closeSync(fd);
    const read = measure("read", workspace, "huge.bin");
    expect(read.summary).toEqual({
      lineCount: 1,
      textLength: 2000 + " … [line cut at 2000 characters]".length,
      more: false,
    });
    expect(read.maxRssBytes - baseline).toBeLessThan(BUDGET);
  }, 120_000);

  it("glob over 200,000 files returns a capped result within the memory budget", () => {
    const tree = join(workspace, "tree");
    for (let d = 0; d < 200; d += 1) {
      mkdirSync(join(tree, `d${d}`), { recursive: true });
      for (let f = 0; f < 1000; f += 1) writeFileSync(join(tree, `d${d}`, `f${f}.txt`), "");
    }
    const all = measure("glob", workspace, "tree/**/*.txt");
    expect(all.summary).toEqual({ count: 1000, capped: true });
    expect(all.maxRssBytes - baseline).toBeLessThan(BUDGET);
    // A pattern that matches little still walks the whole tree.
    const few = measure("glob", workspace, "tree/**/f999.txt");
    expect(few.summary).toEqual({ count: 200, capped: false });
    expect(few.maxRssBytes - baseline).toBeLessThan(BUDGET);
  }, 180_000);

  it.skipIf(powershell === undefined)(
    "a PowerShell command printing 1 GB finishes within the memory budget with the first 50,000 characters and no file saved",
    () => {
      const flood =
        "$o = [Console]::OpenStandardOutput(); $b = [byte[]]::new(1MB); [Array]::Fill($b, [byte]120); " +
        "for ($i = 0; $i -lt 1024; $i++) { $o.Write($b, 0, $b.Length) }; $o.Flush()";
      const folder = join(workspace, "flood");
      mkdirSync(folder);
      const run = measure("flood", folder, flood);
      const cut = "\n[output truncated]";
      expect(run.summary).toEqual({
        isError: false,
        length: 50_000 + cut.length,
        tail: "x".repeat(300 - cut.length) + cut,
      });
      // The rest of the output is dropped as it arrives: nothing is written to the workspace.
      expect(readdirSync(folder)).toEqual([]);
      expect(run.maxRssBytes - baseline).toBeLessThan(BUDGET);
      console.info(
        `1 GB flood: peak RSS ${(run.maxRssBytes / MB).toFixed(1)} MB, baseline ${(baseline / MB).toFixed(1)} MB`,
      );
    },
    180_000,
  );
});
