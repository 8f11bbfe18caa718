import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  readSync,
  utimesSync,
} from "node:fs";
import { join } from "node:path";

// What memory-hostile.test.ts compares before and after an attack: a file's kind, bytes, identity and times. Its own
// reads must change none of them, so files are read with O_NOATIME (Linux, owner only) and folders are never
// listed where their access time is compared: a read of the bait by the store is then seen as a new access time.

const NOATIME = (constants as Partial<Record<string, number>>).O_NOATIME ?? 0;
/** Content compared per file: a sparse 10 GB file is summed up by its size, never read whole. */
const CONTENT_LIMIT = 1024 * 1024;

export interface DiskEntry {
  readonly path: string;
  readonly kind: "file" | "dir" | "link" | "other" | "missing";
  readonly size?: number;
  readonly ino?: number;
  readonly nlink?: number;
  readonly mode?: number;
  readonly mtimeMs?: number;
  readonly ctimeMs?: number;
  readonly atimeMs?: number;
  /** A file's first MiB in base64, or a link's target. */
  readonly content?: string;
}

/** One path as it is now, named `shown`; `withAccess` adds the access time (a read since then changes it). */
export function entryOf(path: string, shown: string, withAccess: boolean): DiskEntry {
  let info;
  try {
    info = lstatSync(path);
  } catch {
    return { path: shown, kind: "missing" };
  }
  const kind = info.isSymbolicLink() ? "link" : info.isDirectory() ? "dir" : info.isFile() ? "file" : "other";
  const content = kind === "file" ? headOf(path) : kind === "link" ? readlinkSync(path) : undefined;
  return {
    path: shown,
    kind,
    size: kind === "dir" ? 0 : info.size,
    ino: info.ino,
    nlink: info.nlink,
    mode: info.mode,
    mtimeMs: info.mtimeMs,
    ctimeMs: info.ctimeMs,
    ...(withAccess ? { atimeMs: info.atimeMs } : {}),
    ...(content === undefined ? {} : { content }),
  };
}

/** Each of `paths` with its access time: for bait whose every path the test made itself (no listing needed). */
export function baitState(paths: readonly string[]): DiskEntry[] {
  return paths.map((path) => entryOf(path, path, true));
}

/**
 * Every entry below `folder` (listed, so without access times), one level of subfolders deep and in name order:
 * the store's folder, whose own times change with each lock it takes.
 */
export function folderState(folder: string): DiskEntry[] {
  let names: string[];
  try {
    names = readdirSync(folder).sort();
  } catch {
    return [entryOf(folder, ".", false)];
  }
  return names.flatMap((name) => {
    const entry = entryOf(join(folder, name), name, false);
    if (entry.kind !== "dir") return [entry];
    return [
      entry,
      ...readdirSync(join(folder, name))
        .sort()
        .map((inner) => entryOf(join(folder, name, inner), `${name}/${inner}`, false)),
    ];
  });
}

function headOf(path: string): string {
  const fd = openSync(path, constants.O_RDONLY | NOATIME);
  try {
    const size = Math.min(fstatSync(fd).size, CONTENT_LIMIT);
    const buffer = Buffer.alloc(size);
    let done = 0;
    while (done < size) {
      const read = readSync(fd, buffer, done, size - done, done);
      if (read === 0) break;
      done += read;
    }
    return buffer.subarray(0, done).toString("base64");
  } finally {
    closeSync(fd);
  }
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Access time three days back and modification time four: with relatime (Linux's default) the next read of the
 * file, or listing of the folder, moves the access time to now, so a read shows. Folders last, as making their
 * files changed them.
 */
export function ageForReads(paths: readonly string[]): void {
  const now = Date.now();
  const files = paths.filter((path) => !lstatSync(path).isDirectory());
  const folders = paths.filter((path) => lstatSync(path).isDirectory()).reverse();
  for (const path of [...files, ...folders]) {
    if (lstatSync(path).isSymbolicLink()) continue;
    utimesSync(path, new Date(now - 3 * DAY_MS), new Date(now - 4 * DAY_MS));
  }
}

/** Bytes this process has read with read(2) and its kin so far (Linux), or `undefined` without /proc. */
export function bytesReadSoFar(): number | undefined {
  try {
    const match = /^rchar: (\d+)$/m.exec(readFileSync("/proc/self/io", "utf8"));
    return match === null ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}
