// Measures the CI gate side by side: the steps `.ci/run` ran at a baseline commit against the steps it runs now,
// one after the other on this machine, and writes the times to docs/gate-timing.json, from which the tables
// in docs/snapshots.md and README.md are made (verify:guides fails when they disagree with it).
// Usage: `npm run measure:gate -- --baseline <commit>`; takes as long as both gates together (20–30 minutes).
import { execFileSync, spawnSync } from "node:child_process";
import { cpus, totalmem } from "node:os";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { applyTiming, renderTiming, type GateTiming, type SideTiming } from "./gate-timing.js";

const repository = fileURLToPath(new URL("../", import.meta.url));

/** The steps `.ci/run` ran before the test plan, and the steps it runs now (PowerShell is installed already). */
const BASELINE_STEPS: readonly (readonly string[])[] = [
  ["npm", "ci", "--no-audit", "--no-fund"],
  ["npm", "test"],
  ["npm", "run", "typecheck"],
  ["npm", "run", "lint"],
  ["npm", "run", "format:check"],
  ["npm", "run", "build"],
];
const CURRENT_STEPS: readonly (readonly string[])[] = [
  ["npm", "ci", "--no-audit", "--no-fund"],
  ["npm", "test"],
  ["npm", "run", "gate:offline"],
];

function runSide(folder: string, revision: string, steps: readonly (readonly string[])[]): SideTiming {
  const times: { step: string; seconds: number }[] = [];
  for (const [command, ...args] of steps) {
    const step = [command, ...args].join(" ");
    const started = process.hrtime.bigint();
    console.log(`== ${revision.slice(0, 7)}: ${step}`);
    const run = spawnSync(command as string, args, {
      cwd: folder,
      stdio: ["ignore", "ignore", "inherit"],
      env: { ...process.env, CI: "true" },
      // npm is npm.cmd on Windows, which only a shell starts.
      shell: process.platform === "win32",
    });
    if (run.status !== 0) throw new Error(`${step} failed at ${revision} (exit ${run.status ?? run.signal ?? "?"})`);
    times.push({ step, seconds: Math.round(Number(process.hrtime.bigint() - started) / 1e8) / 10 });
    // Said as it is measured, so a later failure loses no figure.
    console.log(`== ${revision.slice(0, 7)}: ${step}: ${times.at(-1)?.seconds ?? 0} s`);
  }
  const total = Math.round(times.reduce((sum, time) => sum + time.seconds, 0) * 10) / 10;
  return { revision, steps: times, total };
}

function main(argv: readonly string[]): void {
  const index = argv.indexOf("--baseline");
  const baseline = index >= 0 ? argv[index + 1] : undefined;
  if (baseline === undefined) throw new Error("usage: npm run measure:gate -- --baseline <commit>");
  const git = (...args: string[]): string => execFileSync("git", args, { cwd: repository, encoding: "utf8" }).trim();
  const baselineRevision = git("rev-parse", baseline);
  // The tree measured is the working tree: it must be exactly HEAD, or the label would name another tree.
  if (git("status", "--porcelain") !== "") throw new Error("commit first: the measurement labels the tree with HEAD");
  const currentRevision = git("rev-parse", "HEAD");
  const worktree = join(mkdtempSync(join(tmpdir(), "measure-gate-")), "baseline");
  git("worktree", "add", "--detach", worktree, baselineRevision);
  try {
    const before = runSide(worktree, baselineRevision, BASELINE_STEPS);
    const after = runSide(repository, currentRevision, CURRENT_STEPS);
    const timing: GateTiming = {
      machine: `${cpus().length} cores (${cpus()[0]?.model.trim() ?? "?"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`,
      baseline: before,
      current: after,
    };
    writeFileSync(join(repository, "docs", "gate-timing.json"), `${JSON.stringify(timing, null, 2)}\n`);
    applyTiming(repository, timing);
    console.log(renderTiming(timing));
    console.log("Wrote docs/gate-timing.json, its table in docs/snapshots.md and the npm test time in README.md.");
  } finally {
    git("worktree", "remove", "--force", worktree);
    rmSync(join(worktree, ".."), { recursive: true, force: true });
  }
}

main(process.argv.slice(2));
