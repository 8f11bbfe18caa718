import { readFileSync } from "node:fs";

/** Alive means running: a killed process that nobody has reaped yet (a zombie, state Z) is dead. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return true;
  }
}

/**
 * Resolves once `check()` holds, polling; rejects with `what` after `deadlineMs`. The deadline is generous on
 * purpose: it says "this happens", not "this happens fast", on a loaded machine too.
 */
export async function eventually(check: () => boolean, what: string, deadlineMs = 30_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`still waiting after ${deadlineMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The number in a pid file, or `undefined` while it is missing or incomplete. */
export function readPid(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** SIGKILL to `pid`'s process group and to `pid`, ignoring what is already gone: cleanup after a failed test. */
export function killQuietly(pid: number | undefined): void {
  if (pid === undefined) return;
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, "SIGKILL");
    } catch {
      // Gone already.
    }
  }
}
