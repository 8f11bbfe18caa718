import { lstat, lutimes, mkdir, realpath, rmdir, rmdirSync } from "node:fs";
import { lock } from "proper-lockfile";

/**
 * How one lock is taken: proper-lockfile's own options (its lock is a folder made with mkdir at `lockfilePath`), and
 * the wait around it, which is ours: proper-lockfile is asked once per attempt (`retries: 0`), so the pause, the
 * bound and the Windows races are decided here and nowhere else. Each chapter passes its book's numbers.
 */
export interface FileLockOptions {
  /** The lock folder; used as given (no realpath), so the caller passes a path it has checked. */
  readonly lockfilePath: string;
  /** A lock folder not refreshed for this long (ms) is a crashed holder's, and is taken over. */
  readonly stale: number;
  /** How often (ms) the held lock's mtime is refreshed. */
  readonly update: number;
  /** The pause (ms) between two attempts while another holder has it. */
  readonly retryMs: number;
  /** Give up with FileLockTimeoutError after waiting this long (ms); undefined waits as long as it takes. */
  readonly maxWaitMs?: number;
  /**
   * How many attempts that meet EPERM, EBUSY or ENOTEMPTY (Windows, where a folder being made or removed by another
   * process answers so) count as "held" and are tried again; past it the error is thrown. Undefined: no count.
   */
  readonly maxRaceRetries?: number;
  /** Called once per acquisition, when it has waited `waitingAfterMs` (default 1,000 ms) and still waits. */
  readonly onWaiting?: () => void;
  readonly waitingAfterMs?: number;
  /** Resolve `target` with realpath first (proper-lockfile's option); default false. */
  readonly realpath?: boolean;
}

/** The lock while the operation runs. */
export interface HeldLock {
  /**
   * Whether proper-lockfile found the lock taken from us (its folder removed, or its mtime changed by someone else)
   * while the operation ran. An operation checks it before the write that commits.
   */
  compromised(): boolean;
}

/** Another holder kept the lock for the whole of `maxWaitMs`. */
export class FileLockTimeoutError extends Error {
  override readonly name = "FileLockTimeoutError";
}

/**
 * The file system proper-lockfile works through (every call it makes), with each link seen as itself: `stat` is
 * `lstat` and `utimes` is `lutimes`. A `.lock` someone swapped for a link (even one to a folder carrying our mtime) is
 * then not our lock, so the refresh finds it compromised, and no time is ever written through it. One object, because
 * proper-lockfile caches the mtime precision it measured on it.
 */
const NO_FOLLOW_FS = { mkdir, rmdir, rmdirSync, realpath, stat: lstat, utimes: lutimes };

const HELD = new Set(["ELOCKED"]);
const RACES = new Set(["EPERM", "EBUSY", "ENOTEMPTY"]);
const DEFAULT_WAITING_AFTER_MS = 1_000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `operation` while holding the lock at `options.lockfilePath`, and releases it afterwards, also when the
 * operation throws. proper-lockfile's default `onCompromised` throws from a timer, an uncaught exception that ends the
 * process; ours only records it, for `HeldLock.compromised()`.
 */
export async function withFileLock<T>(
  target: string,
  options: FileLockOptions,
  operation: (lock: HeldLock) => Promise<T>,
): Promise<T> {
  let compromised = false;
  const release = await acquire(target, options, () => {
    compromised = true;
  });
  try {
    return await operation({ compromised: () => compromised });
  } finally {
    // A lock already taken from us (compromised) is not ours to remove; any other failure leaves a folder that goes
    // stale and is taken over: the operation's own outcome stands either way.
    await release().catch(() => undefined);
  }
}

async function acquire(
  target: string,
  options: FileLockOptions,
  onCompromised: () => void,
): Promise<() => Promise<void>> {
  const started = Date.now();
  const waitingAfter = options.waitingAfterMs ?? DEFAULT_WAITING_AFTER_MS;
  let told = false;
  let races = 0;
  for (;;) {
    try {
      return await lock(target, {
        lockfilePath: options.lockfilePath,
        stale: options.stale,
        update: options.update,
        retries: 0,
        realpath: options.realpath ?? false,
        fs: NO_FOLLOW_FS,
        onCompromised,
      });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "";
      if (RACES.has(code)) {
        races += 1;
        if (options.maxRaceRetries !== undefined && races > options.maxRaceRetries) throw error;
      } else if (!HELD.has(code)) {
        throw error;
      }
    }
    const waited = Date.now() - started;
    if (options.maxWaitMs !== undefined && waited >= options.maxWaitMs) {
      throw new FileLockTimeoutError(`the lock was held for ${options.maxWaitMs} ms`);
    }
    if (!told && waited >= waitingAfter && options.onWaiting !== undefined) {
      told = true;
      try {
        options.onWaiting();
      } catch {
        // Only a line for the reader: its failure is no reason to stop waiting.
      }
    }
    const pause =
      options.maxWaitMs === undefined ? options.retryMs : Math.min(options.retryMs, options.maxWaitMs - waited);
    await sleep(Math.max(pause, 0));
  }
}
