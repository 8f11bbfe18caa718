import { closeSync, ftruncateSync, linkSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_FILE_BYTES } from "../src/adapters/filesystem.js";
import { runProbe, type ProbeRun } from "./support/probe.js";

const MB = 1024 * 1024;
const GB = 1024 * MB;
/** Peak RSS the agent may add on top of an idle process doing the same imports. */
const BUDGET = 64 * MB;

const probe = fileURLToPath(new URL("./support/rss-probe.ts", import.meta.url));
const measure = (mode: string, workspace: string, arg = ""): ProbeRun => runProbe(probe, mode, workspace, arg);

/** A file of `size` zero bytes that costs no disk: sparse. */
function sparse(path: string, size: number): void {
  const fd = openSync(path, "w");
  ftruncateSync(fd, size);
  closeSync(fd);
}

let workspace: string;
let baseline: number;

beforeAll(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "ch02-bounded-")));
  baseline = measure("baseline", workspace).maxRssBytes;
}, 60_000);

afterAll(async () => {
  await rm(workspace, { recursive: true, force: true });
});

describe("bounded resources", () => {
  it("read_file on a 1 GB file is refused as filesystem_error without reading it, within the memory budget", () => {
    sparse(join(workspace, "huge.bin"), GB);
    const read = measure("read", workspace, "huge.bin");
    expect(read.summary).toEqual({
      content:
        "Error [filesystem_error]: Could not read file: huge.bin (the file is 1073741824 bytes; at most 10485760 are read)",
      isError: true,
      errorCode: "filesystem_error",
    });
    expect(read.maxRssBytes - baseline).toBeLessThan(BUDGET);
  }, 120_000);

  it("read_file on a file of exactly MAX_FILE_BYTES returns all of it within the memory budget", () => {
    sparse(join(workspace, "edge.bin"), MAX_FILE_BYTES);
    const read = measure("read", workspace, "edge.bin");
    expect(read.summary).toEqual({ isError: false, length: MAX_FILE_BYTES });
    expect(read.maxRssBytes - baseline).toBeLessThan(BUDGET);
  }, 120_000);

  it("glob over 200,000 files returns a capped result within the memory budget", () => {
    // Hard links to one empty file per folder: 200,000 names to walk, made in seconds rather than minutes.
    const tree = join(workspace, "tree");
    for (let d = 0; d < 200; d += 1) {
      const folder = join(tree, `d${d}`);
      mkdirSync(folder, { recursive: true });
      writeFileSync(join(folder, "f0.txt"), "");
      for (let f = 1; f < 1000; f += 1) linkSync(join(folder, "f0.txt"), join(folder, `f${f}.txt`));
    }
    const all = measure("glob", workspace, "tree/**/*.txt");
    expect(all.summary).toEqual({
      isError: false,
      lines: 1001,
      last: "[first 1000 matches shown; narrow the pattern]",
    });
    expect(all.maxRssBytes - baseline).toBeLessThan(BUDGET);
    // A pattern that matches little still walks the whole tree.
    const few = measure("glob", workspace, "tree/**/f999.txt");
    expect(few.summary).toEqual({ isError: false, lines: 200, last: "tree/d99/f999.txt" });
    expect(few.maxRssBytes - baseline).toBeLessThan(BUDGET);
  }, 180_000);
});
