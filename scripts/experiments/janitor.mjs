// The scratch worktree's janitor: verify-experiments.ts starts it, detached, beside each run. It waits until that
// run's process is gone, then stops the run's vitest (its process id is in `<root>/vitest.pid`) and removes the
// worktree and the scratch folder, unless the run removed them itself. A run stopped by a signal cleans up on its
// own; this covers the stops it cannot see: tsx's SIGKILL when the run does not answer a relayed signal within
// 60 ms (it may be busy in a synchronous step), `kill -9`, `timeout -k`.
//   node janitor.mjs <pid> <repository> <root> <tree>
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { clearInterval, setInterval } from "node:timers";

const [pid, repository, root, tree] = process.argv.slice(2);

function alive(id) {
  try {
    process.kill(id, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
}

function stopVitest() {
  let id;
  try {
    id = Number(readFileSync(join(root, "vitest.pid"), "utf8"));
  } catch {
    return;
  }
  if (!Number.isInteger(id) || id <= 0) return;
  try {
    if (process.platform === "win32") spawnSync("taskkill", ["/pid", String(id), "/T", "/F"]);
    else process.kill(-id, "SIGKILL");
  } catch {
    // Already gone.
  }
}

function cleanUp() {
  stopVitest();
  try {
    execFileSync("git", ["worktree", "remove", "--force", "--force", tree], { cwd: repository, stdio: "ignore" });
  } catch {
    rmSync(tree, { recursive: true, force: true });
    spawnSync("git", ["worktree", "prune"], { cwd: repository, stdio: "ignore" });
  }
  rmSync(root, { recursive: true, force: true });
}

const timer = setInterval(() => {
  if (!existsSync(root)) clearInterval(timer);
  else if (!alive(Number(pid))) {
    clearInterval(timer);
    cleanUp();
  }
}, 200);
