import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { parseArguments, USAGE } from "../verify-experiments.js";

// Issue 35 item 4: verify:experiments makes a git worktree and temp folders; a reader who stops it (Ctrl-C, SIGTERM,
// `timeout`) must not be left with either. Each run here gets its own TMPDIR, so its worktree is found by path. The
// run cleans up itself when it can answer the signal; when tsx kills it outright (it answers a relayed signal only
// when its event loop is free), experiments/janitor.mjs does; either way nothing may be left.

const repository = fileURLToPath(new URL("../../", import.meta.url));
const tsx = join(repository, "node_modules", "tsx", "dist", "cli.mjs");
const script = join(repository, "scripts", "verify-experiments.ts");
const folders: string[] = [];
afterAll(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

function worktreesUnder(folder: string): string[] {
  return execFileSync("git", ["worktree", "list", "--porcelain"], { cwd: repository, encoding: "utf8" })
    .split("\n")
    .filter((line) => line.startsWith("worktree ") && line.slice("worktree ".length).startsWith(folder));
}

/** Starts verify:experiments (through `prefix`, e.g. `timeout`) with a TMPDIR of its own. */
function start(prefix: readonly string[]) {
  const temp = realpathSync(mkdtempSync(join(tmpdir(), "agent-experiments-signal-")));
  folders.push(temp);
  const command = [...prefix, process.execPath, tsx, script, "--only", "ch01"];
  const child = spawn(command[0] as string, command.slice(1), {
    cwd: repository,
    env: { ...process.env, TMPDIR: temp },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal })),
  );
  return { child, temp, exited, stderr: () => stderr };
}

/** What the run left in its TMPDIR; tsx's own compile cache (`tsx-<uid>`) is tsx's, kept between runs on purpose. */
function leftovers(folder: string): string[] {
  return readdirSync(folder).filter((name) => !name.startsWith("tsx-"));
}

/** Waits (up to 10 s) until the run's worktree and scratch folder are gone; what is left. */
async function afterCleanUp(folder: string): Promise<{ worktrees: string[]; files: string[] }> {
  for (let waited = 0; waited < 10_000; waited += 100) {
    if (worktreesUnder(folder).length === 0 && leftovers(folder).length === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { worktrees: worktreesUnder(folder), files: leftovers(folder) };
}

/** Waits until the run's worktree exists (true) or the run ended first (false). */
async function worktreeAppears(run: ReturnType<typeof start>): Promise<boolean> {
  const ended = { yes: false };
  void run.exited.then(() => (ended.yes = true));
  for (let waited = 0; waited < 60_000; waited += 100) {
    if (worktreesUnder(run.temp).length > 0) return true;
    if (ended.yes) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

describe("npm run verify:experiments is safe to run", () => {
  it("--help prints the usage and asks for nothing else; an unknown argument is refused", () => {
    expect(parseArguments(["--help"])).toEqual({ help: true });
    expect(parseArguments(["--only", "ch02", "ch03", "--write"])).toEqual({
      help: false,
      write: true,
      only: ["ch02", "ch03"],
    });
    expect(parseArguments(["--bogus"])).toEqual({ problem: 'unknown argument "--bogus"' });
    expect(parseArguments(["--only"])).toEqual({ problem: "--only names no chapter" });
    expect(USAGE).toContain("--only chNN");
  });

  it.skipIf(process.platform === "win32").each(["SIGINT", "SIGTERM"] as const)(
    "stopped by %s once its worktree exists, it leaves no worktree and no temp folder",
    async (signal) => {
      const run = start([]);
      expect(await worktreeAppears(run), run.stderr()).toBe(true);
      run.child.kill(signal);
      const { code } = await run.exited;
      expect(code).toBe(128 + (signal === "SIGINT" ? 2 : 15));
      expect(await afterCleanUp(run.temp)).toEqual({ worktrees: [], files: [] });
      expect(run.stderr()).toContain(`stopped by ${signal}; removing its worktree and temp folders`);
    },
  );

  it.skipIf(process.platform === "win32")(
    "killed by `timeout` while it measures, it leaves no worktree and no temp folder",
    async () => {
      const run = start(["timeout", "6"]);
      expect(await worktreeAppears(run), run.stderr()).toBe(true);
      const { code } = await run.exited;
      expect(code).toBe(124);
      expect(await afterCleanUp(run.temp)).toEqual({ worktrees: [], files: [] });
    },
  );
});
