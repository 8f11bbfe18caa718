import { execFileSync } from "node:child_process";
import fs, {
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  promises,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { openConfined, platformError } from "../src/adapters/confined-open.js";
import { NodeWorkspaceFileSystem } from "../src/adapters/filesystem.js";
import {
  FileNotFoundError,
  FileSystemOperationError,
  InvalidFilePathError,
  WorkspacePathError,
} from "../src/core/filesystem.js";
import { toolCall } from "../src/core/messages.js";
import { createReadFileTool } from "../src/features/builtin-tools.js";
import { ToolRegistry } from "../src/core/tools.js";
import { outsideTree } from "./support/outside-tree.js";

// The path checks and the open are two steps; openConfined proves, on the opened file itself, what the open
// landed on. These tests play the other process with the file system's own calls (a folder renamed and a link
// put in its place, right after the adapter resolved the path), so every race here happens every time.

const posix = process.platform !== "win32";
const SECRET = "outside secret\n";
const roots: string[] = [];
const files = new NodeWorkspaceFileSystem();
const escapes = (path: string) => new WorkspacePathError(`Path escapes workspace: ${path}`);

afterEach(() => {
  vi.restoreAllMocks();
  syncBuiltinESMExports();
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** `root/ws` with `dir/notes.txt` and `plain.txt`, beside `root/outside` holding `notes.txt` with the secret. */
function makePlaces(): { root: string; ws: string; outside: string } {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "ch02-confined-open-")));
  roots.push(root);
  const ws = join(root, "ws");
  const outside = join(root, "outside");
  mkdirSync(join(ws, "dir"), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(ws, "dir", "notes.txt"), "inside notes\n");
  writeFileSync(join(ws, "plain.txt"), "plain\n");
  writeFileSync(join(outside, "notes.txt"), SECRET);
  return { root, ws, outside };
}

/**
 * Plays another process: right after the adapter has resolved (or tried to resolve) `ws/<relative>` for the
 * `times`-th time, `swap` changes the disk. The path checks are done by then; only the open is left.
 */
function afterResolving(ws: string, relative: string, times: number, swap: () => void): () => number {
  const original = realpathSync.native;
  let resolved = 0;
  let swaps = 0;
  vi.spyOn(realpathSync, "native").mockImplementation(((path: string) => {
    // A path that does not exist yet is resolved too (and throws): the swap follows that attempt as well.
    try {
      return original(path);
    } finally {
      if (path === join(ws, relative)) {
        resolved += 1;
        if (resolved === times) {
          swap();
          swaps += 1;
        }
      }
    }
  }) as typeof realpathSync.native);
  return () => swaps;
}

/** `ws/dir` moves aside to `ws/dir-before` and a link to the outside folder takes its name. */
const folderToLink = (ws: string, outside: string) => () => {
  renameSync(join(ws, "dir"), join(ws, "dir-before"));
  symlinkSync(outside, join(ws, "dir"), "junction");
};

describe("an open that lands outside after the path was checked", () => {
  it("a read whose folder became an outside link is path_escape, and the outside file is neither shown nor removed", async () => {
    const { root, ws, outside } = makePlaces();
    const before = outsideTree(root);
    const swaps = afterResolving(ws, "dir/notes.txt", 1, folderToLink(ws, outside));
    await expect(files.readFile(ws, "dir/notes.txt")).rejects.toThrow(escapes("dir/notes.txt"));
    expect(swaps()).toBe(1);
    expect(outsideTree(root)).toEqual(before);
    expect(readFileSync(join(outside, "notes.txt"), "utf8")).toBe(SECRET);
  });

  it("a write onto an outside file that was already there is path_escape, and that file keeps its name and bytes", async () => {
    const { root, ws, outside } = makePlaces();
    const before = outsideTree(root);
    // A write resolves the path twice (before making folders, and again before opening): swap after the second.
    const swaps = afterResolving(ws, "dir/notes.txt", 2, folderToLink(ws, outside));
    await expect(files.writeFile(ws, "dir/notes.txt", "pwned")).rejects.toThrow(escapes("dir/notes.txt"));
    expect(swaps()).toBe(1);
    expect(outsideTree(root)).toEqual(before);
  });

  it("a write that created its file outside removes exactly that file and nothing else", async () => {
    const { root, ws, outside } = makePlaces();
    // The outside folder's own times change with the file made and removed in it: compare what is in it.
    const inOutside = () => outsideTree(root).entries.filter((entry) => entry.path !== "outside");
    const before = inOutside();
    // new.txt does not exist yet, so each check ends by resolving dir itself: swap after the second.
    const swaps = afterResolving(ws, "dir", 2, folderToLink(ws, outside));
    await expect(files.writeFile(ws, "dir/new.txt", "pwned")).rejects.toThrow(escapes("dir/new.txt"));
    expect(swaps()).toBe(1);
    expect(existsSync(join(outside, "new.txt"))).toBe(false);
    expect(inOutside()).toEqual(before);
    expect(before.map((entry) => entry.path)).toEqual(["outside/notes.txt"]);
    expect(readFileSync(join(ws, "dir-before", "notes.txt"), "utf8")).toBe("inside notes\n");
  });

  it("a write whose folder became a link after the check is path_escape even when the link leads inside", async () => {
    const { ws } = makePlaces();
    mkdirSync(join(ws, "other"));
    // x.txt does not exist yet, so the check resolves dir itself: the swap follows that.
    const swaps = afterResolving(ws, "dir", 1, () => {
      renameSync(join(ws, "dir"), join(ws, "dir-before"));
      symlinkSync(join(ws, "other"), join(ws, "dir"), "junction");
    });
    await expect(files.writeFile(ws, "dir/x.txt", "x")).rejects.toThrow(escapes("dir/x.txt"));
    expect(swaps()).toBe(1);
    expect(readdirSync(join(ws, "other"))).toEqual([]);
    expect(readdirSync(join(ws, "dir-before"))).toEqual(["notes.txt"]);
  });

  it("openConfined on a target the path check never saw, outside through a folder link, refuses both modes", async () => {
    const { root, ws, outside } = makePlaces();
    symlinkSync(outside, join(ws, "out"), "junction");
    const before = outsideTree(root);
    for (const mode of ["read", "write"] as const) {
      await expect(openConfined(ws, join(ws, "out", "notes.txt"), "out/notes.txt", mode)).rejects.toThrow(
        escapes("out/notes.txt"),
      );
    }
    expect(outsideTree(root)).toEqual(before);
  });
});

describe.skipIf(!posix)("a link in the last component is refused at the open (O_NOFOLLOW, ELOOP)", () => {
  it("a link to a file inside the workspace is path_escape for a read and a write: the open never follows it", async () => {
    const { ws } = makePlaces();
    symlinkSync(join(ws, "plain.txt"), join(ws, "link.txt"));
    for (const mode of ["read", "write"] as const) {
      await expect(openConfined(ws, join(ws, "link.txt"), "link.txt", mode)).rejects.toThrow(escapes("link.txt"));
    }
    expect(readFileSync(join(ws, "plain.txt"), "utf8")).toBe("plain\n");
  });

  it("a file swapped for a link to outside after its check is path_escape for read, write and edit, and outside is unchanged", async () => {
    const { root, ws, outside } = makePlaces();
    const before = outsideTree(root);
    const toLink = () => {
      unlinkSync(join(ws, "plain.txt"));
      symlinkSync(join(outside, "notes.txt"), join(ws, "plain.txt"));
    };
    const calls: [() => Promise<unknown>, number][] = [
      [() => files.readFile(ws, "plain.txt"), 1],
      [() => files.writeFile(ws, "plain.txt", "pwned"), 2],
      // Once for the read, twice for the write: after the third, the edit's own read is already done.
      [() => files.editFile(ws, "plain.txt", "plain", "pwned"), 3],
    ];
    for (const [run, times] of calls) {
      writeFileSync(join(ws, "plain.txt"), "plain\n");
      const swaps = afterResolving(ws, "plain.txt", times, toLink);
      await expect(run()).rejects.toThrow(escapes("plain.txt"));
      expect(swaps()).toBe(1);
      vi.restoreAllMocks();
      unlinkSync(join(ws, "plain.txt"));
    }
    expect(outsideTree(root)).toEqual(before);
  });

  it("a write never creates the missing target of a dangling link, inside or outside", async () => {
    const { root, ws, outside } = makePlaces();
    symlinkSync(join(outside, "planted.txt"), join(ws, "dangling-out"));
    symlinkSync(join(ws, "planted.txt"), join(ws, "dangling-in"));
    const before = outsideTree(root);
    for (const name of ["dangling-out", "dangling-in"]) {
      await expect(openConfined(ws, join(ws, name), name, "write")).rejects.toThrow(escapes(name));
    }
    expect(existsSync(join(ws, "planted.txt"))).toBe(false);
    expect(outsideTree(root)).toEqual(before);
  });
});

describe("openConfined answers what it opened and whether it made it", () => {
  it("a read of a plain file hands back its open handle, not created; a write of a new file says it created it", async () => {
    const { ws } = makePlaces();
    const read = await openConfined(ws, join(ws, "plain.txt"), "plain.txt", "read");
    expect(read.created).toBe(false);
    expect(await read.handle.readFile("utf8")).toBe("plain\n");
    await read.handle.close();
    const existing = await openConfined(ws, join(ws, "plain.txt"), "plain.txt", "write");
    expect(existing.created).toBe(false);
    await existing.handle.close();
    const made = await openConfined(ws, join(ws, "made.txt"), "made.txt", "write");
    expect(made.created).toBe(true);
    await made.handle.write("new");
    await made.handle.close();
    expect(readFileSync(join(ws, "made.txt"), "utf8")).toBe("new");
    expect(readFileSync(join(ws, "plain.txt"), "utf8")).toBe("plain\n");
  });

  it("a folder is Path is a directory for a read and a write", async () => {
    const { ws } = makePlaces();
    for (const mode of ["read", "write"] as const) {
      await expect(openConfined(ws, join(ws, "dir"), "dir", mode)).rejects.toThrow(
        new InvalidFilePathError("Path is a directory: dir"),
      );
    }
  });

  it.skipIf(!posix)(
    "a FIFO is Path is not a regular file for a read and a write, and neither waits for a peer",
    async () => {
      const { ws } = makePlaces();
      execFileSync("mkfifo", [join(ws, "pipe")]);
      for (const mode of ["read", "write"] as const) {
        await expect(openConfined(ws, join(ws, "pipe"), "pipe", mode)).rejects.toThrow(
          new InvalidFilePathError("Path is not a regular file: pipe"),
        );
      }
    },
  );

  it("a missing file, or a file where a folder is meant, is File not found for a read", async () => {
    const { ws } = makePlaces();
    for (const path of ["nope.txt", "plain.txt/x"]) {
      await expect(openConfined(ws, join(ws, path), path, "read")).rejects.toThrow(
        new FileNotFoundError(`File not found: ${path}`),
      );
    }
  });
});

describe("a write that cannot create its file", () => {
  it.each<[string, Error]>([
    ["EROFS", new FileSystemOperationError("the file system is read-only")],
    ["EACCES", new FileSystemOperationError("the operating system refused access")],
    ["ENOSPC", new FileSystemOperationError("the disk is full")],
  ])(
    "is told why (%s): the create is not retried as an overwrite of a file that is not there",
    async (code, expected) => {
      const { ws } = makePlaces();
      const original = promises.open;
      const opens: number[] = [];
      // The disk refuses every create, as a read-only, locked or full one does.
      vi.spyOn(promises, "open").mockImplementation(((path: string, flags: number, ...rest: never[]) => {
        opens.push(flags);
        if ((flags & constants.O_CREAT) !== 0) {
          return Promise.reject(Object.assign(new Error(`${code}: cannot create ${path}`), { code }));
        }
        return original(path, flags, ...rest);
      }) as typeof promises.open);
      syncBuiltinESMExports();
      await expect(files.writeFile(ws, "new.txt", "x")).rejects.toThrow(expected);
      expect(opens).toHaveLength(1);
      expect(existsSync(join(ws, "new.txt"))).toBe(false);
    },
  );
});

describe("platformError: the platform's codes become the domain's errors", () => {
  const errno = (code: string) => Object.assign(new Error(`${code}: from the system`), { code });

  it.each<[string, Error]>([
    ["ENOENT", new FileNotFoundError("File not found: a/b.txt")],
    ["ENOTDIR", new FileNotFoundError("File not found: a/b.txt")],
    ["EISDIR", new InvalidFilePathError("Path is a directory: a/b.txt")],
    ["ENXIO", new InvalidFilePathError("Path is not a regular file: a/b.txt")],
    ["ELOOP", escapes("a/b.txt")],
    ["ENAMETOOLONG", escapes("a/b.txt")],
    ["EACCES", new FileSystemOperationError("the operating system refused access")],
    ["EPERM", new FileSystemOperationError("the operating system refused access")],
    ["ENOSPC", new FileSystemOperationError("the disk is full")],
    ["EROFS", new FileSystemOperationError("the file system is read-only")],
  ])("%s becomes %s", (code, expected) => {
    const mapped = platformError(errno(code), "a/b.txt");
    expect(mapped).toEqual(expected);
    expect(mapped.constructor).toBe(expected.constructor);
  });

  it("quotes a long path cut short, as every message does", () => {
    const long = "x".repeat(300);
    expect(platformError(errno("ENOENT"), long)).toEqual(new FileNotFoundError(`File not found: ${"x".repeat(200)}…`));
  });

  it("EEXIST is the write's own signal that the file was there already, none of the errors a tool result names", () => {
    const mapped = platformError(errno("EEXIST"), "a/b.txt");
    expect(mapped.message).toBe("a/b.txt");
    for (const named of [WorkspacePathError, FileNotFoundError, InvalidFilePathError, FileSystemOperationError]) {
      expect(mapped).not.toBeInstanceOf(named);
    }
  });

  it("a code it does not know stays the very error it was, and a thrown non-error becomes an Error", () => {
    const unknown = errno("EIO");
    expect(platformError(unknown, "a/b.txt")).toBe(unknown);
    const uncoded = new Error("no code at all");
    expect(platformError(uncoded, "a/b.txt")).toBe(uncoded);
    expect(platformError("boom", "a/b.txt")).toEqual(new Error("boom"));
  });
});

/** FileHandle's prototype, where the file system's calls on every opened file go. */
async function handlePrototype(ws: string): Promise<FileHandle> {
  const probe = await open(join(ws, "plain.txt"), "r");
  await probe.close();
  return Object.getPrototypeOf(probe) as FileHandle;
}

/** Every file handle opened from now on, as the file system hands it out (each is stat'ed right after its open). */
async function trackHandles(ws: string): Promise<Set<FileHandle>> {
  const prototype = await handlePrototype(ws);
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with each handle as `this`
  const stat = prototype.stat;
  const seen = new Set<FileHandle>();
  vi.spyOn(prototype, "stat").mockImplementation(function (this: FileHandle, ...args: Parameters<FileHandle["stat"]>) {
    seen.add(this);
    return stat.apply(this, args);
  });
  return seen;
}

/** The descriptor of each tracked handle: -1 once it is closed. */
const descriptors = (seen: Set<FileHandle>) => [...seen].map((handle) => handle.fd);

describe("every file handle is closed, whatever happens after the open", () => {
  it("after a read, a write and an edit that succeed", async () => {
    const { ws } = makePlaces();
    const seen = await trackHandles(ws);
    expect(await files.readFile(ws, "plain.txt")).toBe("plain\n");
    expect(await files.writeFile(ws, "plain.txt", "changed")).toBe(7);
    await files.editFile(ws, "plain.txt", "changed", "edited");
    expect(descriptors(seen)).toEqual([-1, -1, -1, -1]);
    expect(readFileSync(join(ws, "plain.txt"), "utf8")).toBe("edited");
  });

  it("after the opened file is refused: a folder, a file outside, bytes that are not UTF-8, text that is not there", async () => {
    const { ws, outside } = makePlaces();
    symlinkSync(outside, join(ws, "out"), "junction");
    writeFileSync(join(ws, "bad.bin"), Buffer.from([0xc3, 0x28]));
    const seen = await trackHandles(ws);
    await expect(openConfined(ws, join(ws, "dir"), "dir", "read")).rejects.toThrow(
      new InvalidFilePathError("Path is a directory: dir"),
    );
    await expect(openConfined(ws, join(ws, "out", "notes.txt"), "out/notes.txt", "read")).rejects.toThrow(
      escapes("out/notes.txt"),
    );
    await expect(files.readFile(ws, "bad.bin")).rejects.toThrow("File is not valid UTF-8: bad.bin");
    await expect(files.editFile(ws, "plain.txt", "absent", "x")).rejects.toThrow("Exact text not found in plain.txt");
    expect(descriptors(seen)).toEqual([-1, -1, -1, -1]);
  });

  it("after a read that fails with an error nobody named: the caller gets that very error", async () => {
    const { ws } = makePlaces();
    const seen = await trackHandles(ws);
    const eio = Object.assign(new Error("EIO: i/o error, read"), { code: "EIO" });
    vi.spyOn(await handlePrototype(ws), "read").mockRejectedValue(eio);
    await expect(files.readFile(ws, "plain.txt")).rejects.toBe(eio);
    expect(descriptors(seen)).toEqual([-1]);
  });

  it.each<[string, Error]>([
    ["ENOSPC", new FileSystemOperationError("the disk is full")],
    ["EROFS", new FileSystemOperationError("the file system is read-only")],
  ])(
    "after a write the disk refuses with %s: the file system's message, and the handle closed",
    async (code, expected) => {
      const { ws } = makePlaces();
      const seen = await trackHandles(ws);
      const prototype = await handlePrototype(ws);
      const refused = () => Object.assign(new Error(`${code}: refused`), { code });
      vi.spyOn(prototype, "writeFile").mockRejectedValue(refused());
      await expect(files.writeFile(ws, "plain.txt", "x")).rejects.toThrow(expected);
      vi.spyOn(prototype, "truncate").mockRejectedValue(refused());
      await expect(files.writeFile(ws, "plain.txt", "x")).rejects.toThrow(expected);
      expect(descriptors(seen)).toEqual([-1, -1]);
    },
  );
});

describe("an error nobody named, from the real file system, reaches the model as tool_execution_error", () => {
  it("read_file whose read fails with EIO says only that the tool failed, never the errno", async () => {
    const { ws } = makePlaces();
    vi.spyOn(await handlePrototype(ws), "read").mockRejectedValue(
      Object.assign(new Error(`EIO: i/o error, read ${ws}`), { code: "EIO" }),
    );
    const registry = new ToolRegistry();
    registry.register(createReadFileTool(files));
    const prepared = registry.prepare(toolCall("c1", "read_file", JSON.stringify({ path: "plain.txt" })));
    if (prepared.error !== undefined) throw new Error(prepared.error.content);
    expect(await registry.invoke(prepared, { workspace: ws, identity: "user" })).toStrictEqual({
      content: "Error [tool_execution_error]: Tool read_file failed unexpectedly",
      isError: true,
      errorCode: "tool_execution_error",
    });
  });
});

describe.skipIf(!existsSync("/proc/self/fd"))(
  "where there is /proc (Linux), the descriptor says where the file is",
  () => {
    it("a file renamed inside the workspace after the open is still read: not its old name, the file itself counts", async () => {
      const { ws } = makePlaces();
      const original = promises.readlink;
      vi.spyOn(promises, "readlink").mockImplementation(((path: string, ...rest: never[]) => {
        // Between the open and the check, another process renames the file; its old name leads nowhere now.
        if (path.startsWith("/proc/self/fd/")) renameSync(join(ws, "plain.txt"), join(ws, "renamed.txt"));
        return original(path, ...rest);
      }) as typeof promises.readlink);
      syncBuiltinESMExports();
      expect(await files.readFile(ws, "plain.txt")).toBe("plain\n");
      expect(existsSync(join(ws, "plain.txt"))).toBe(false);
    });
  },
);

describe("where there is no /proc (macOS, Windows), the path must still lead to the opened file", () => {
  /** Every readlink of /proc/self/fd fails, as it does without /proc; `then` runs first, after the open. */
  function withoutProc(then: () => void = () => undefined): void {
    const original = promises.readlink;
    vi.spyOn(promises, "readlink").mockImplementation(((path: string, ...rest: never[]) => {
      if (!path.startsWith("/proc/self/fd/")) return original(path, ...rest);
      then();
      return Promise.reject(Object.assign(new Error("ENOENT: no /proc"), { code: "ENOENT" }));
    }) as typeof promises.readlink);
    syncBuiltinESMExports();
  }

  it("a file still at its path is read and written as usual", async () => {
    const { ws } = makePlaces();
    withoutProc();
    expect(await files.readFile(ws, "plain.txt")).toBe("plain\n");
    expect(await files.writeFile(ws, "dir/new.txt", "new")).toBe(3);
    expect(readFileSync(join(ws, "dir", "new.txt"), "utf8")).toBe("new");
  });

  it("a file replaced by another after the open is path_escape, and the replacement is left alone", async () => {
    const { ws } = makePlaces();
    withoutProc(() => {
      renameSync(join(ws, "plain.txt"), join(ws, "plain-before.txt"));
      writeFileSync(join(ws, "plain.txt"), "replacement\n");
    });
    await expect(files.readFile(ws, "plain.txt")).rejects.toThrow(escapes("plain.txt"));
    expect(readFileSync(join(ws, "plain.txt"), "utf8")).toBe("replacement\n");
  });

  it("a new file moved away after the open is path_escape, and what now has its name is not removed", async () => {
    const { ws } = makePlaces();
    withoutProc(() => {
      renameSync(join(ws, "made.txt"), join(ws, "made-before.txt"));
      writeFileSync(join(ws, "made.txt"), "someone else's\n");
    });
    await expect(files.writeFile(ws, "made.txt", "mine")).rejects.toThrow(escapes("made.txt"));
    expect(readFileSync(join(ws, "made.txt"), "utf8")).toBe("someone else's\n");
  });

  it("a file removed after the open is path_escape", async () => {
    const { ws } = makePlaces();
    withoutProc(() => unlinkSync(join(ws, "plain.txt")));
    await expect(files.readFile(ws, "plain.txt")).rejects.toThrow(escapes("plain.txt"));
  });

  it("a file at its path with the same inode number on another device is another file: path_escape", async () => {
    const { ws } = makePlaces();
    withoutProc();
    const { statSync } = fs;
    vi.spyOn(fs, "statSync").mockImplementation(((path: string, options?: fs.StatSyncOptions) => {
      const stats = statSync(path, options) as fs.Stats;
      return path === join(ws, "plain.txt") ? Object.assign(stats, { dev: stats.dev + 1 }) : stats;
    }) as typeof fs.statSync);
    syncBuiltinESMExports();
    await expect(files.readFile(ws, "plain.txt")).rejects.toThrow(escapes("plain.txt"));
  });
});
