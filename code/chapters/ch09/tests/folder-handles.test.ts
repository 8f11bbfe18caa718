import fs, {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  byName,
  folderAccess,
  FolderMovedError,
  viaDescriptors,
  type Folder,
  type FolderAccess,
} from "../src/adapters/folder-handles.js";
import { makeRealFolders } from "../src/adapters/real-folders.js";

// Both ways of reaching folders, on the real disk: through /proc/self/fd descriptors (Linux) and by name with
// device and inode checks (macOS, Windows; it works on Linux too, so it is tested here as well).

const linux = process.platform === "linux" && existsSync("/proc/self/fd");
const posix = process.platform !== "win32";
const roots: string[] = [];
const opened: [FolderAccess, Folder][] = [];

afterEach(() => {
  vi.restoreAllMocks();
  syncBuiltinESMExports();
  for (const [access, folder] of opened.splice(0)) {
    try {
      access.close(folder);
    } catch {
      // Closed by the test itself.
    }
  }
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** `root/ws` holding `sub/` (with `file.txt`), `file.txt` and links, beside `root/outside/` holding `secret/`. */
function makePlaces(): { root: string; ws: string; outside: string } {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "ch02-folder-handles-")));
  roots.push(root);
  const ws = join(root, "ws");
  const outside = join(root, "outside");
  mkdirSync(join(ws, "sub"), { recursive: true });
  mkdirSync(join(outside, "secret"), { recursive: true });
  writeFileSync(join(ws, "sub", "file.txt"), "in sub");
  writeFileSync(join(ws, "file.txt"), "a file");
  symlinkSync(join(ws, "sub"), join(ws, "link-in"), "junction");
  symlinkSync(outside, join(ws, "link-out"), "junction");
  if (posix) {
    symlinkSync(join(ws, "file.txt"), join(ws, "link-to-file"));
    symlinkSync(join(ws, "nothing"), join(ws, "dangling"));
  }
  return { root, ws, outside };
}

/** Opens the workspace and remembers it, so afterEach closes what a failed test left open. */
function openWs(access: FolderAccess, ws: string): Folder {
  const folder = access.openWorkspace(ws);
  opened.push([access, folder]);
  return folder;
}

function sub(access: FolderAccess, parent: Folder, name: string, locate?: boolean): Folder {
  const found = access.openSubfolder(parent, name, locate);
  if (typeof found === "string") throw new Error(`${name} is ${found}`);
  opened.push([access, found]);
  return found;
}

const moved = (path: string) => new FolderMovedError(`${path} is no longer the folder that was checked`);

describe("folderAccess", () => {
  it.skipIf(!linux)("is the descriptor way where /proc/self/fd leads to open folders, every time it is asked", () => {
    expect(folderAccess()).toBe(viaDescriptors);
    expect(folderAccess()).toBe(viaDescriptors);
  });

  it("FolderMovedError carries ELOOP, the code platformError turns into path_escape", () => {
    expect(new FolderMovedError("x").code).toBe("ELOOP");
    expect(moved("/a").message).toBe("/a is no longer the folder that was checked");
  });

  /** A fresh folder-handles.ts, which asks the system again which way works (the answer is kept per module). */
  async function chosenAfresh(): Promise<"descriptors" | "names"> {
    vi.resetModules();
    const fresh = await import("../src/adapters/folder-handles.js");
    const chosen = fresh.folderAccess();
    expect(fresh.folderAccess()).toBe(chosen);
    return chosen === fresh.viaDescriptors ? "descriptors" : "names";
  }

  /** statSync through /proc/self/fd answers with `change` applied: a /proc that leads somewhere else. */
  function procStatReports(change: (real: fs.BigIntStats) => Partial<fs.BigIntStats>): void {
    const { statSync } = fs;
    vi.spyOn(fs, "statSync").mockImplementation(((path: string, options?: fs.StatSyncOptions) => {
      const real = statSync(path, options);
      if (!path.startsWith("/proc/self/fd/")) return real;
      const stats = real as unknown as fs.BigIntStats;
      return Object.assign(stats, change(stats));
    }) as unknown as typeof fs.statSync);
    syncBuiltinESMExports();
  }

  it.skipIf(!linux)("asks once, closing the folder it opened to ask", async () => {
    const seen = trackDescriptors();
    expect(await chosenAfresh()).toBe("descriptors");
    expect(seen.opened).toHaveLength(1);
    expect(seen.closed).toEqual(seen.opened);
  });

  it.skipIf(!linux)("is the name way on any other platform, even one where /proc would answer", async () => {
    const platform = Object.getOwnPropertyDescriptor(process, "platform") as PropertyDescriptor;
    Object.defineProperty(process, "platform", { ...platform, value: "darwin" });
    try {
      expect(await chosenAfresh()).toBe("names");
    } finally {
      Object.defineProperty(process, "platform", platform);
    }
  });

  it.skipIf(!linux)("is the name way where /proc/self/fd names another folder than the one opened", async () => {
    const { readlinkSync } = fs;
    vi.spyOn(fs, "readlinkSync").mockImplementation(((path: string, options?: never) =>
      path.startsWith("/proc/self/fd/") ? "/elsewhere" : readlinkSync(path, options)) as typeof fs.readlinkSync);
    syncBuiltinESMExports();
    expect(await chosenAfresh()).toBe("names");
  });

  it.skipIf(!linux)("is the name way where a folder reached through /proc/self/fd is another inode", async () => {
    procStatReports((real) => ({ ino: real.ino + 1n }));
    expect(await chosenAfresh()).toBe("names");
  });

  it.skipIf(!linux)("is the name way where a folder reached through /proc/self/fd is on another device", async () => {
    procStatReports((real) => ({ dev: real.dev + 1n }));
    expect(await chosenAfresh()).toBe("names");
  });

  it.skipIf(!linux)(
    "is the name way where /proc/self/fd cannot be read, and the folder it opened is closed",
    async () => {
      const seen = trackDescriptors();
      const { statSync } = fs;
      vi.spyOn(fs, "statSync").mockImplementation(((path: string, options?: fs.StatSyncOptions) => {
        if (path.startsWith("/proc/self/fd/")) throw Object.assign(new Error("ENOENT: no /proc"), { code: "ENOENT" });
        return statSync(path, options);
      }) as typeof fs.statSync);
      syncBuiltinESMExports();
      expect(await chosenAfresh()).toBe("names");
      expect(seen.opened).toHaveLength(1);
      expect(seen.closed).toEqual(seen.opened);
    },
  );

  it.skipIf(!linux)(
    "is the name way where not even / opens as a folder, and nothing is closed that never opened",
    async () => {
      const seen = trackDescriptors();
      vi.spyOn(fs, "openSync").mockImplementation(() => {
        throw Object.assign(new Error("EMFILE: too many open files"), { code: "EMFILE" });
      });
      syncBuiltinESMExports();
      expect(await chosenAfresh()).toBe("names");
      expect(seen.closed).toEqual([]);
    },
  );
});

describe.each<[string, FolderAccess, boolean]>([
  ["through descriptors (Linux)", viaDescriptors, linux],
  ["by name (macOS, Windows)", byName, true],
])("folders %s", (_name, access, runs) => {
  it.skipIf(!runs)("opens the workspace folder as the real path it was given, inside", () => {
    const { ws } = makePlaces();
    const folder = openWs(access, ws);
    const info = lstatSync(ws, { bigint: true });
    expect(folder).toMatchObject({ root: ws, path: ws, dev: info.dev, ino: info.ino, inside: true });
    expect(folder.fd === undefined).toBe(access === byName);
  });

  it.skipIf(!runs)(
    "refuses a workspace that is missing, a file, a link, or no real path, as a folder that moved",
    () => {
      const { root, ws } = makePlaces();
      symlinkSync(root, join(ws, "up"), "junction");
      for (const path of [join(ws, "missing"), join(ws, "file.txt"), join(ws, "link-in"), join(ws, "up", "ws")]) {
        expect(() => access.openWorkspace(path)).toThrow(moved(path));
      }
    },
  );

  it.skipIf(!runs)("names what is in a folder: a folder, nothing, a link to a folder, inside or out, a file", () => {
    const { ws } = makePlaces();
    const top = openWs(access, ws);
    const found = sub(access, top, "sub");
    const info = lstatSync(join(ws, "sub"), { bigint: true });
    expect(found).toMatchObject({ root: ws, path: join(ws, "sub"), dev: info.dev, ino: info.ino, inside: true });
    expect(access.openSubfolder(top, "missing")).toBe("missing");
    expect(access.openSubfolder(top, "link-in")).toBe("link");
    expect(access.openSubfolder(top, "link-out")).toBe("link");
    expect(access.openSubfolder(top, "file.txt")).toBe("not-a-folder");
    expect(access.openSubfolder(found, "file.txt")).toBe("not-a-folder");
    expect(access.openSubfolder(top, "file.txt/x")).toBe("missing");
  });

  it.skipIf(!runs || !posix)("a link to a file and a dangling link are links, never what they point at", () => {
    const { ws } = makePlaces();
    const top = openWs(access, ws);
    expect(access.openSubfolder(top, "link-to-file")).toBe("link");
    expect(access.openSubfolder(top, "dangling")).toBe("link");
  });

  it.skipIf(!runs)("lists a folder's entries, files and folders with their kinds", async () => {
    const { ws } = makePlaces();
    const top = openWs(access, ws);
    const entries = await access.list(top);
    expect(entries.map((entry) => [entry.name, entry.isDirectory(), entry.isSymbolicLink()]).sort()).toEqual(
      [
        ["file.txt", false, false],
        ["link-in", false, true],
        ["link-out", false, true],
        ["sub", true, false],
        ...(posix
          ? [
              ["dangling", false, true],
              ["link-to-file", false, true],
            ]
          : []),
      ].sort(),
    );
    expect((await access.list(sub(access, top, "sub"))).map((entry) => entry.name)).toEqual(["file.txt"]);
  });

  it.skipIf(!runs)(
    "a folder moved out of the workspace after it was opened is neither listed nor confirmed",
    async () => {
      const { ws, outside } = makePlaces();
      const top = openWs(access, ws);
      const found = sub(access, top, "sub");
      renameSync(join(ws, "sub"), join(outside, "sub"));
      await expect(access.list(found)).rejects.toThrow(moved(join(ws, "sub")));
      expect(() => access.confirm(found)).toThrow(moved(join(ws, "sub")));
    },
  );

  it.skipIf(!runs)("a folder removed after it was opened is neither listed nor confirmed, nor made into", async () => {
    const { ws } = makePlaces();
    const top = openWs(access, ws);
    mkdirSync(join(ws, "gone"));
    const found = sub(access, top, "gone");
    rmdirSync(join(ws, "gone"));
    await expect(access.list(found)).rejects.toThrow(FolderMovedError);
    expect(() => access.confirm(found)).toThrow(FolderMovedError);
    expect(() => access.makeSubfolder(found, "new")).toThrow(FolderMovedError);
    expect(existsSync(join(ws, "gone"))).toBe(false);
  });

  it.skipIf(!runs)(
    "a folder still where it was is confirmed, and lists the same after a folder beside it changed",
    async () => {
      const { ws } = makePlaces();
      const top = openWs(access, ws);
      const found = sub(access, top, "sub");
      mkdirSync(join(ws, "beside"));
      expect(() => access.confirm(found)).not.toThrow();
      expect(() => access.confirm(top)).not.toThrow();
      expect((await access.list(found)).map((entry) => entry.name)).toEqual(["file.txt"]);
    },
  );

  it.skipIf(!runs)("makes a folder: true when it made it, false when something was there already", () => {
    const { ws } = makePlaces();
    const top = openWs(access, ws);
    expect(access.makeSubfolder(top, "new")).toBe(true);
    expect(lstatSync(join(ws, "new")).isDirectory()).toBe(true);
    expect(access.makeSubfolder(top, "new")).toBe(false);
    expect(access.makeSubfolder(top, "file.txt")).toBe(false);
    expect(readdirSync(join(ws, "new"))).toEqual([]);
  });

  it.skipIf(!runs)("an error looking a name up that says nothing of what is there is thrown as it is", () => {
    const { ws } = makePlaces();
    const top = openWs(access, ws);
    expect(() => access.openSubfolder(top, "x".repeat(300))).toThrow(
      expect.objectContaining({ code: "ENAMETOOLONG" }) as Error,
    );
  });

  it.skipIf(!runs)("an error making a folder that is no sign of a move is thrown as it is", () => {
    const { ws } = makePlaces();
    const top = openWs(access, ws);
    expect(() => access.makeSubfolder(top, "x".repeat(300))).toThrow(
      expect.objectContaining({ code: "ENAMETOOLONG" }) as Error,
    );
  });
});

describe.skipIf(!linux)("through descriptors only", () => {
  it("opens a folder that is only to be listed without locating it, with no identity yet", () => {
    const { ws } = makePlaces();
    const top = openWs(viaDescriptors, ws);
    const found = sub(viaDescriptors, top, "sub", false);
    expect(found).toMatchObject({ root: ws, path: join(ws, "sub"), dev: 0n, ino: 0n, inside: true });
    expect(typeof found.fd).toBe("number");
  });

  it("a folder reached after its parent moved out is found outside: inside is false", () => {
    const { ws, outside } = makePlaces();
    mkdirSync(join(ws, "sub", "deeper"));
    const top = openWs(viaDescriptors, ws);
    const parent = sub(viaDescriptors, top, "sub");
    renameSync(join(ws, "sub"), join(outside, "sub"));
    const found = sub(viaDescriptors, parent, "deeper");
    expect(found).toMatchObject({ path: join(outside, "sub", "deeper"), inside: false });
  });

  it("makes into the folder it opened, not into whatever has its name now", () => {
    const { ws, outside } = makePlaces();
    const top = openWs(viaDescriptors, ws);
    const parent = sub(viaDescriptors, top, "sub");
    renameSync(join(ws, "sub"), join(ws, "sub-before"));
    symlinkSync(outside, join(ws, "sub"), "junction");
    expect(viaDescriptors.makeSubfolder(parent, "new")).toBe(true);
    expect(existsSync(join(ws, "sub-before", "new"))).toBe(true);
    expect(existsSync(join(outside, "new"))).toBe(false);
  });

  it("removes a folder it made only while that very folder, still empty, has the name", () => {
    const { ws } = makePlaces();
    const top = openWs(viaDescriptors, ws);
    viaDescriptors.makeSubfolder(top, "made");
    const made = sub(viaDescriptors, top, "made");
    // Replaced by another folder of the same name: left alone.
    renameSync(join(ws, "made"), join(ws, "made-before"));
    mkdirSync(join(ws, "made"));
    viaDescriptors.removeMade(top, "made", made);
    expect(existsSync(join(ws, "made"))).toBe(true);
    rmdirSync(join(ws, "made"));
    // Back, but with something in it: left alone.
    renameSync(join(ws, "made-before"), join(ws, "made"));
    writeFileSync(join(ws, "made", "kept.txt"), "");
    viaDescriptors.removeMade(top, "made", made);
    expect(readdirSync(join(ws, "made"))).toEqual(["kept.txt"]);
    rmSync(join(ws, "made", "kept.txt"));
    // The very folder, empty: removed. Gone already: nothing happens.
    viaDescriptors.removeMade(top, "made", made);
    expect(existsSync(join(ws, "made"))).toBe(false);
    expect(() => viaDescriptors.removeMade(top, "made", made)).not.toThrow();
  });

  it("refuses a workspace reached through a link that loops, as a folder that moved", () => {
    const { ws } = makePlaces();
    symlinkSync("loop", join(ws, "loop"));
    expect(() => viaDescriptors.openWorkspace(join(ws, "loop", "x"))).toThrow(moved(join(ws, "loop", "x")));
  });

  it("a folder removed between its open and the look at where it is, is not inside: it is nowhere", () => {
    const { ws } = makePlaces();
    mkdirSync(join(ws, "gone"));
    const top = openWs(viaDescriptors, ws);
    const { readlinkSync } = fs;
    vi.spyOn(fs, "readlinkSync").mockImplementation(((path: string, options?: never) => {
      if (existsSync(join(ws, "gone"))) rmdirSync(join(ws, "gone"));
      return readlinkSync(path, options);
    }) as typeof fs.readlinkSync);
    syncBuiltinESMExports();
    const found = sub(viaDescriptors, top, "gone");
    expect(found.inside).toBe(false);
  });

  it("a folder whose place cannot be read is not handed out, and its descriptor is closed", () => {
    const { ws } = makePlaces();
    const top = openWs(viaDescriptors, ws);
    const seen = trackDescriptors();
    const eio = Object.assign(new Error("EIO: i/o error, readlink"), { code: "EIO" });
    vi.spyOn(fs, "readlinkSync").mockImplementation(() => {
      throw eio;
    });
    syncBuiltinESMExports();
    expect(() => viaDescriptors.openSubfolder(top, "sub")).toThrow(eio);
    expect(seen.opened).toHaveLength(1);
    expect(seen.closed).toEqual(seen.opened);
  });

  it("a file with the name of a folder it made is not removed", () => {
    const { ws } = makePlaces();
    const top = openWs(viaDescriptors, ws);
    viaDescriptors.makeSubfolder(top, "made");
    const made = sub(viaDescriptors, top, "made");
    rmdirSync(join(ws, "made"));
    writeFileSync(join(ws, "made"), "a file now");
    viaDescriptors.removeMade(top, "made", made);
    expect(lstatSync(join(ws, "made")).isFile()).toBe(true);
  });

  it("an entry the kernel answers ELOOP for is a link", () => {
    const { ws } = makePlaces();
    const top = openWs(viaDescriptors, ws);
    vi.spyOn(fs, "openSync").mockImplementation(() => {
      throw Object.assign(new Error("ELOOP: too many symbolic links encountered"), { code: "ELOOP" });
    });
    syncBuiltinESMExports();
    expect(viaDescriptors.openSubfolder(top, "sub")).toBe("link");
  });

  it("a workspace that fails to open for another reason, even one with no code, throws that very error", () => {
    const { ws } = makePlaces();
    for (const failure of [
      Object.assign(new Error("EACCES: permission denied"), { code: "EACCES" }),
      new Error("no code at all"),
    ]) {
      vi.spyOn(fs, "openSync").mockImplementation(() => {
        throw failure;
      });
      syncBuiltinESMExports();
      expect(() => viaDescriptors.openWorkspace(ws)).toThrow(failure);
      vi.restoreAllMocks();
      syncBuiltinESMExports();
    }
  });
});

describe("by name only", () => {
  it("nothing is held open, and nothing it made is ever removed: a name may lead elsewhere by now", () => {
    const { ws } = makePlaces();
    const top = openWs(byName, ws);
    expect(byName.makeSubfolder(top, "made")).toBe(true);
    const made = sub(byName, top, "made");
    byName.removeMade(top, "made", made);
    byName.close(made);
    expect(lstatSync(join(ws, "made")).isDirectory()).toBe(true);
    expect(made.fd).toBeUndefined();
  });

  it("a parent swapped for a link since it was opened is refused before anything is looked up or made in it", async () => {
    const { ws, outside } = makePlaces();
    const top = openWs(byName, ws);
    const parent = sub(byName, top, "sub");
    renameSync(join(ws, "sub"), join(ws, "sub-before"));
    symlinkSync(join(outside, "secret"), join(ws, "sub"), "junction");
    expect(() => byName.openSubfolder(parent, "x")).toThrow(moved(join(ws, "sub")));
    expect(() => byName.makeSubfolder(parent, "new")).toThrow(moved(join(ws, "sub")));
    await expect(byName.list(parent)).rejects.toThrow(moved(join(ws, "sub")));
    expect(readdirSync(join(outside, "secret"))).toEqual([]);
  });

  it("a parent replaced by another folder of the same name is refused too: same path, other inode", () => {
    const { ws } = makePlaces();
    const top = openWs(byName, ws);
    const parent = sub(byName, top, "sub");
    renameSync(join(ws, "sub"), join(ws, "sub-before"));
    mkdirSync(join(ws, "sub"));
    expect(() => byName.confirm(parent)).toThrow(moved(join(ws, "sub")));
    expect(() => byName.makeSubfolder(parent, "new")).toThrow(moved(join(ws, "sub")));
    expect(readdirSync(join(ws, "sub"))).toEqual([]);
  });

  it("a folder swapped for a link between its lstat and its real path is found outside, or missing when removed", () => {
    const { ws, outside } = makePlaces();
    const top = openWs(byName, ws);
    const original = realpathSync.native;
    let swap: () => void = () => undefined;
    vi.spyOn(realpathSync, "native").mockImplementation(((path: string) => {
      if (path === join(ws, "sub")) swap();
      return original(path);
    }) as typeof realpathSync.native);
    swap = () => {
      swap = () => undefined;
      renameSync(join(ws, "sub"), join(ws, "sub-before"));
      symlinkSync(join(outside, "secret"), join(ws, "sub"), "junction");
    };
    expect(byName.openSubfolder(top, "sub")).toMatchObject({ path: join(outside, "secret"), inside: false });
    rmSync(join(ws, "sub"));
    renameSync(join(ws, "sub-before"), join(ws, "sub"));
    swap = () => {
      swap = () => undefined;
      rmSync(join(ws, "sub"), { recursive: true });
    };
    expect(byName.openSubfolder(top, "sub")).toBe("missing");
  });

  /** Runs `swap` once, right before the real path of `path` is asked for next. */
  function beforeRealPath(path: string, swap: () => void): void {
    const original = realpathSync.native;
    let pending = true;
    vi.spyOn(realpathSync, "native").mockImplementation(((asked: string) => {
      if (pending && asked === path) {
        pending = false;
        swap();
      }
      return original(asked);
    }) as typeof realpathSync.native);
  }

  it("a folder swapped for a link to another folder inside, between its lstat and its real path, is not inside", () => {
    const { ws } = makePlaces();
    mkdirSync(join(ws, "other"));
    const top = openWs(byName, ws);
    beforeRealPath(join(ws, "sub"), () => {
      renameSync(join(ws, "sub"), join(ws, "sub-before"));
      symlinkSync(join(ws, "other"), join(ws, "sub"), "junction");
    });
    expect(byName.openSubfolder(top, "sub")).toMatchObject({ path: join(ws, "other"), inside: false });
  });

  it.skipIf(!posix)(
    "a folder swapped for a looping link between its lstat and its real path is an error, not missing",
    () => {
      const { ws } = makePlaces();
      const top = openWs(byName, ws);
      beforeRealPath(join(ws, "sub"), () => {
        renameSync(join(ws, "sub"), join(ws, "sub-before"));
        symlinkSync("sub", join(ws, "sub"));
      });
      expect(() => byName.openSubfolder(top, "sub")).toThrow(expect.objectContaining({ code: "ELOOP" }) as Error);
    },
  );

  it("a folder whose parent became a file between its lstat and its real path is missing", () => {
    const { ws } = makePlaces();
    mkdirSync(join(ws, "sub", "deeper"));
    const top = openWs(byName, ws);
    const parent = sub(byName, top, "sub");
    beforeRealPath(join(ws, "sub", "deeper"), () => {
      renameSync(join(ws, "sub"), join(ws, "sub-before"));
      writeFileSync(join(ws, "sub"), "a file now");
    });
    expect(byName.openSubfolder(parent, "deeper")).toBe("missing");
  });

  it("a workspace removed, or under a file, between its lstat and its real path has moved; another failure is thrown", () => {
    const { ws } = makePlaces();
    beforeRealPath(ws, () => renameSync(ws, `${ws}-before`));
    expect(() => byName.openWorkspace(ws)).toThrow(moved(ws));
    renameSync(`${ws}-before`, ws);
    vi.restoreAllMocks();
    // Its parent became a file: the real path says ENOTDIR.
    beforeRealPath(join(ws, "sub"), () => {
      renameSync(ws, `${ws}-before`);
      writeFileSync(ws, "a file now");
    });
    expect(() => byName.openWorkspace(join(ws, "sub"))).toThrow(moved(join(ws, "sub")));
    rmSync(ws);
    renameSync(`${ws}-before`, ws);
    vi.restoreAllMocks();
    const eio = Object.assign(new Error("EIO: i/o error, realpath"), { code: "EIO" });
    vi.spyOn(realpathSync, "native").mockImplementation(() => {
      throw eio;
    });
    expect(() => byName.openWorkspace(ws)).toThrow(eio);
  });

  it("a mkdir whose parent vanished after it was confirmed is a folder that moved", () => {
    const { ws } = makePlaces();
    const top = openWs(byName, ws);
    mkdirSync(join(ws, "gone"));
    const parent = sub(byName, top, "gone");
    const original = realpathSync.native;
    let calls = 0;
    vi.spyOn(realpathSync, "native").mockImplementation(((path: string) => {
      const real = original(path);
      calls += 1;
      // After confirmSame's own real-path check, the last step before the mkdir.
      if (path === join(ws, "gone") && calls === 1) rmdirSync(join(ws, "gone"));
      return real;
    }) as typeof realpathSync.native);
    expect(() => byName.makeSubfolder(parent, "new")).toThrow(moved(join(ws, "gone")));
    expect(existsSync(join(ws, "gone"))).toBe(false);
  });
});

describe.each<[string, FolderAccess, boolean]>([
  ["through descriptors", viaDescriptors, linux],
  ["by name", byName, true],
])("makeRealFolders %s", (_name, access, runs) => {
  it.skipIf(!runs)("makes every missing level, inside the workspace only", () => {
    const { ws } = makePlaces();
    makeRealFolders(ws, join(ws, "a", "b", "c"), access);
    expect(lstatSync(join(ws, "a", "b", "c")).isDirectory()).toBe(true);
    makeRealFolders(ws, join(ws, "a", "b", "c"), access);
    makeRealFolders(ws, ws, access);
    expect(readdirSync(join(ws, "a", "b", "c"))).toEqual([]);
  });

  it.skipIf(!runs)("refuses a level that is a link, and one that is a file", () => {
    const { ws, outside } = makePlaces();
    expect(() => makeRealFolders(ws, join(ws, "link-out", "x"), access)).toThrow(FolderMovedError);
    expect(() => makeRealFolders(ws, join(ws, "file.txt", "x"), access)).toThrow(
      new Error(`${join(ws, "file.txt")} is not a plain folder`),
    );
    expect(readdirSync(outside)).toEqual(["secret"]);
  });
});

/** `lstat` (or `stat`) answers for `path` as for a folder with the same inode number on another file system. */
function onAnotherDevice(method: "lstatSync" | "statSync", path: string): void {
  const original = fs[method];
  vi.spyOn(fs, method).mockImplementation(((asked: string, options?: fs.StatSyncOptions) => {
    const stats = original(asked, options) as fs.BigIntStats;
    return asked === path ? Object.assign(stats, { dev: stats.dev + 1n }) : stats;
  }) as unknown as typeof fs.lstatSync);
  syncBuiltinESMExports();
}

// Inode numbers are unique only within one file system: a mount can bring another folder with the same number.
describe("a folder on another device with the same inode number is another folder", () => {
  it.skipIf(!linux)("through descriptors, a folder it made is not removed when its name now leads there", () => {
    const { ws } = makePlaces();
    const top = openWs(viaDescriptors, ws);
    viaDescriptors.makeSubfolder(top, "made");
    const made = sub(viaDescriptors, top, "made");
    onAnotherDevice("lstatSync", `/proc/self/fd/${String(top.fd)}/made`);
    viaDescriptors.removeMade(top, "made", made);
    expect(lstatSync(join(ws, "made")).isDirectory()).toBe(true);
  });

  it("by name, a folder whose real path leads there is not inside", () => {
    const { ws } = makePlaces();
    const top = openWs(byName, ws);
    onAnotherDevice("statSync", join(ws, "sub"));
    expect(byName.openSubfolder(top, "sub")).toMatchObject({ path: join(ws, "sub"), inside: false });
  });

  it("by name, a folder whose name now leads there has moved", () => {
    const { ws } = makePlaces();
    const top = openWs(byName, ws);
    const found = sub(byName, top, "sub");
    onAnotherDevice("lstatSync", join(ws, "sub"));
    expect(() => byName.confirm(found)).toThrow(moved(join(ws, "sub")));
  });
});

/** Every descriptor opened and closed from now on through node:fs, which folder-handles.ts imports by name. */
function trackDescriptors(): { opened: number[]; closed: number[] } {
  const seen = { opened: [] as number[], closed: [] as number[] };
  const { openSync, closeSync } = fs;
  vi.spyOn(fs, "openSync").mockImplementation((...args: Parameters<typeof fs.openSync>) => {
    const fd = openSync(...args);
    seen.opened.push(fd);
    return fd;
  });
  vi.spyOn(fs, "closeSync").mockImplementation((fd) => {
    seen.closed.push(fd);
    closeSync(fd);
  });
  syncBuiltinESMExports();
  return seen;
}

// Descriptors are numbers the kernel hands out again: one left open would be someone else's later.
describe.skipIf(!linux)("every descriptor opened is closed", () => {
  it("after a folder is opened, listed and closed, and after makeRealFolders, levels made or found", async () => {
    const { ws } = makePlaces();
    const seen = trackDescriptors();
    const top = viaDescriptors.openWorkspace(ws);
    const found = sub(viaDescriptors, top, "sub");
    await viaDescriptors.list(found);
    viaDescriptors.close(found);
    viaDescriptors.close(top);
    makeRealFolders(ws, join(ws, "sub", "m", "n"), viaDescriptors);
    expect(seen.opened).toHaveLength(6);
    expect([...seen.closed].sort()).toEqual([...seen.opened].sort());
    expect(() => fs.fstatSync(top.fd as number)).toThrow(expect.objectContaining({ code: "EBADF" }) as Error);
  });

  it("after a workspace opened through a link in a parent is refused", () => {
    const { root, ws } = makePlaces();
    symlinkSync(root, join(ws, "up"), "junction");
    const seen = trackDescriptors();
    expect(() => viaDescriptors.openWorkspace(join(ws, "up", "ws"))).toThrow(moved(join(ws, "up", "ws")));
    expect(seen.opened).toHaveLength(1);
    expect(seen.closed).toEqual(seen.opened);
  });
});
