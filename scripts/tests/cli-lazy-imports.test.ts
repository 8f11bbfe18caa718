import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { chapterNames } from "../test-plan/plan.js";

// Issue 36: the CLI loads the composition root (the openai SDK, yaml, every feature), the demo and the transcript
// codec only when a run uses them, so `--help`, an argument error and a configuration error start without them.
// Each case starts a chapter's fixed entry the way `npm run chNN` does (through tsx) and records every module the
// process loads.
const chapters = fileURLToPath(new URL("../../code/chapters/", import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const recorder = pathToFileURL(fileURLToPath(new URL("./support/load-recorder.mjs", import.meta.url))).href;
const scratch = mkdtempSync(join(tmpdir(), "cli-lazy-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs `chNN` with `args` in a folder without .env and with no settings; the exit code and what it loaded. */
function loaded(chapter: string, args: readonly string[]): { code: number | null; modules: string[] } {
  const record = join(scratch, `${chapter}-${args.join("_").replace(/\W/g, "")}.txt`);
  const entry = join(chapters, chapter, "src", "chapters", `${chapter}.ts`);
  const run = spawnSync(process.execPath, ["--import", tsx, "--import", recorder, entry, ...args], {
    cwd: scratch,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOAD_RECORD: record },
    encoding: "utf8",
    timeout: 60_000,
  });
  const modules = readFileSync(record, "utf8").split("\n").filter(Boolean);
  return { code: run.status, modules };
}

/** What the case must not load: the SDK, yaml, and any feature module of the snapshot. */
const heavy = (modules: readonly string[]): string[] =>
  modules.filter((url) => /\/node_modules\/(openai|yaml)\/|\/src\/features\/|\/src\/bootstrap\.ts$/.test(url));

describe.each(chapterNames(chapters))("%s's fixed entry", (chapter) => {
  it.each<[string, string[], number]>([
    ["--help", ["--help"], 0],
    ["an argument error", ["--no-such-flag"], 1],
    ["a configuration error (no settings anywhere)", ["--prompt", "hello"], 2],
  ])("%s loads no SDK, no yaml, no feature module and not the composition root", (_case, args, exit) => {
    const run = loaded(chapter, args);
    expect(run.code).toBe(exit);
    // The entry itself was recorded, so an empty list is not a pass.
    expect(run.modules.some((url) => url.endsWith(`/src/chapters/${chapter}.ts`))).toBe(true);
    expect(heavy(run.modules)).toEqual([]);
  });

  it("a replay loads the composition root when it runs", () => {
    const run = loaded(chapter, ["--replay", join(chapters, chapter, "demo", `${chapter}.json`), "--quiet"]);
    expect(run.modules.some((url) => url.endsWith("/src/bootstrap.ts"))).toBe(true);
  });
});
