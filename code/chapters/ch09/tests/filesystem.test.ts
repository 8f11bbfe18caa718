import { execFileSync } from "node:child_process";
import fs, { existsSync, promises, renameSync } from "node:fs";
import {
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  realpath,
  rm,
  symlink,
  truncate,
  writeFile,
  type FileHandle,
} from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  MAX_FILE_BYTES,
  MAX_GLOB_PATTERN_CHARS,
  MAX_GLOB_RESULTS,
  NodeWorkspaceFileSystem,
  safePath,
} from "../src/adapters/filesystem.js";
import { platformError } from "../src/adapters/confined-open.js";
import {
  FileNotFoundError,
  FileSystemOperationError,
  InvalidFilePathError,
  InvalidUtf8Error,
  TextNotFoundError,
  WorkspacePathError,
} from "../src/core/filesystem.js";
import {
  MAX_PATH_BYTES,
  MAX_SEGMENT_BYTES,
  resolveInWorkspace,
  shownPath,
  workspaceSegments,
  type PathProbe,
} from "../src/core/safe-path.js";

// Folder links are made as junctions: Windows allows them without privileges, POSIX ignores the type.
// Links to files and FIFOs need POSIX.
const posix = process.platform !== "win32";

let root: string;
let ws: string;

beforeAll(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch02-filesystem-")));
  ws = join(root, "ws");
  await mkdir(join(ws, "a", "deep"), { recursive: true });
  await mkdir(join(root, "outside"));
  await mkdir(join(root, "ws-sibling"));
  await writeFile(join(ws, "a", "b.txt"), "inside");
  await writeFile(join(root, "outside", "secret.txt"), "secret");
  const dirLink = (target: string, at: string) => symlink(target, join(ws, at), "junction");
  await dirLink(join(ws, "a"), "link-in-dir");
  await dirLink(join(root, "outside"), "escape");
  await dirLink(join(root, "outside"), "chain2");
  await dirLink(join(ws, "chain2"), "chain1");
  await dirLink(join(ws, "a"), "chain-in2");
  await dirLink(join(ws, "chain-in2"), "chain-in1");
  await dirLink(join(ws, "escape"), join("a", "nested-out"));
  await dirLink(root, "link-to-parent");
  await dirLink(ws, "link-to-self");
  await dirLink(join(root, "ws-sibling"), "prefix-sibling");
  if (!posix) return;
  await symlink(join(ws, "a", "b.txt"), join(ws, "link-in-file"));
  await symlink("a", join(ws, "relative-link-in"));
  await symlink(join(root, "outside", "secret.txt"), join(ws, "link-out-file"));
  await symlink("../outside", join(ws, "relative-link-out"));
  await symlink(join(root, "outside", "missing.txt"), join(ws, "dangling-out"));
  await symlink(join(ws, "nothing-here.txt"), join(ws, "dangling-in"));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Where `relative` lands, as a `/` path below the workspace's real path (`""` for the workspace itself). */
type Outcome = { inside: string } | "refused";

/** Runs `safePath`; a refusal must be a `WorkspacePathError` saying exactly `Path escapes workspace: <path>`. */
async function outcome(relative: string): Promise<Outcome> {
  try {
    const resolved = await safePath(ws, relative);
    return {
      inside:
        resolved === ws
          ? ""
          : resolved
              .slice(ws.length + 1)
              .split(sep)
              .join("/"),
    };
  } catch (error) {
    expect(error).toBeInstanceOf(WorkspacePathError);
    const shown = relative.length <= 200 ? relative : `${relative.slice(0, 200)}…`;
    expect((error as Error).message).toBe(`Path escapes workspace: ${shown}`);
    return "refused";
  }
}

const RESERVED = [
  "CON",
  "PRN",
  "AUX",
  "NUL",
  ...Array.from({ length: 10 }, (_, i) => `COM${i}`),
  ...Array.from({ length: 10 }, (_, i) => `LPT${i}`),
  "COM¹",
  "COM²",
  "COM³",
  "LPT¹",
  "CONIN$",
  "CONOUT$",
];

// [model-supplied path, where it must land or "refused"]: every rule that needs no disk.
const lexical: [string, Outcome][] = [
  ["a/b.txt", { inside: "a/b.txt" }],
  ["./a/./b.txt", { inside: "a/b.txt" }],
  ["a\\b.txt", { inside: "a/b.txt" }],
  ["a//b.txt", { inside: "a/b.txt" }],
  ["a/", { inside: "a" }],
  ["new/folder/file.txt", { inside: "new/folder/file.txt" }],
  ["中文 名字.txt", { inside: "中文 名字.txt" }],
  ["‥/x", { inside: "‥/x" }], // U+2025 is a name, not `..`
  ["%2e%2e/x", { inside: "%2e%2e/x" }], // no URL decoding: a literal name
  ["．．/x", { inside: "．．/x" }], // full-width dots are a literal name
  ["..hidden/x", { inside: "..hidden/x" }],
  ["x..y", { inside: "x..y" }],
  ["console.txt", { inside: "console.txt" }],
  ["com10", { inside: "com10" }],
  ["nul_file.txt", { inside: "nul_file.txt" }],
  ["auxiliary/x", { inside: "auxiliary/x" }],
  ["falcon.txt", { inside: "falcon.txt" }], // a device name only counts at the start of a name
  ["notes.aux", { inside: "notes.aux" }],
  ["comx.txt", { inside: "comx.txt" }],
  ["x".repeat(255), { inside: "x".repeat(255) }],
  ["中".repeat(85), { inside: "中".repeat(85) }], // 255 bytes: names are measured in UTF-8 bytes
  [`${"🙂".repeat(63)}abc`, { inside: `${"🙂".repeat(63)}abc` }], // 255 bytes, 129 UTF-16 units
  ["", "refused"],
  ["/etc/passwd", "refused"],
  ["\\Windows\\win.ini", "refused"],
  ["C:\\secret.txt", "refused"],
  ["c:/windows", "refused"],
  ["C:x", "refused"],
  ["a:b", "refused"],
  ["\\\\server\\share\\x", "refused"],
  ["//server/share/x", "refused"],
  ["\\\\?\\C:\\x", "refused"],
  ["\\\\.\\PhysicalDrive0", "refused"],
  ["file:stream", "refused"], // NTFS alternate data stream
  ["file.txt::$DATA", "refused"],
  ["a\u0000b", "refused"],
  ["a\nb", "refused"],
  ["a\u001fb", "refused"],
  ["a\u007fb", "refused"],
  ["a\u0085b", "refused"], // C1 controls too: U+009B is a terminal's CSI
  ["\u009b31m.txt", "refused"],
  ...["<", ">", '"', "|", "?", "*"].map((char): [string, Outcome] => [`a${char}b`, "refused"]),
  ["trailing.", "refused"],
  ["trailing ", "refused"],
  ["dir./x", "refused"],
  ["dir /x", "refused"],
  ["...", "refused"],
  ["x".repeat(256), "refused"],
  ["中".repeat(86), "refused"], // 258 bytes in 86 UTF-16 units
  ["中".repeat(200), "refused"], // 600 bytes: a disk takes 255
  ["🙂".repeat(64), "refused"], // 256 bytes
  [`${"a/".repeat(2047)}ab`, "refused"], // 4,096 bytes: one more than a whole path may take
  // The workspace folder itself is no place inside it: nothing can be written there.
  [".", "refused"],
  ["./", "refused"],
  [".//.\\.", "refused"],
  [".\\", "refused"],
  [`../${"a".repeat(5_000)}`, "refused"],
];

// Every `..` is refused, even where it would land back inside: simplifying it is never attempted.
const dotDot = [
  "..",
  "../",
  "../x",
  "..\\x",
  "a/..",
  "a/../b.txt",
  "nested/../x.txt",
  "a/deep/../b.txt",
  "a\\deep\\..\\b.txt",
  "./../a/b.txt",
  "a/./../a/b.txt",
  "a//..//a/b.txt",
  "a/../../x",
  "link-to-self/../ws/a/b.txt",
];

describe("safePath's first check: the text alone, no disk", () => {
  it.each(lexical)("%j → %j", async (relative, expected) => {
    expect(await outcome(relative)).toEqual(expected);
  });

  it.each(dotDot)("%j is refused: every .. segment, wherever it would lead", async (relative) => {
    expect(await outcome(relative)).toBe("refused");
  });

  it.each(RESERVED.flatMap((name) => [name, name.toLowerCase(), `${name}.txt`, `sub/${name}.log`, `${name}/x`]))(
    "the Windows device name %j is refused in any segment, on every platform",
    async (relative) => {
      expect(await outcome(relative)).toBe("refused");
    },
  );

  it("returns a promise and refuses by rejecting, never by throwing", async () => {
    const accepted = safePath(ws, "a/b.txt");
    const refused = safePath(ws, "../x");
    expect(accepted).toBeInstanceOf(Promise);
    expect(refused).toBeInstanceOf(Promise);
    expect(await accepted).toBe(join(ws, "a", "b.txt"));
    await expect(refused).rejects.toThrow(new WorkspacePathError("Path escapes workspace: ../x"));
  });
});

describe("names and paths are measured in UTF-8 bytes, as the disk counts them, not in UTF-16 units", () => {
  const files = new NodeWorkspaceFileSystem();

  it("a name takes at most MAX_SEGMENT_BYTES (255) bytes and a path's text MAX_PATH_BYTES (4,095)", () => {
    expect([MAX_SEGMENT_BYTES, MAX_PATH_BYTES]).toEqual([255, 4095]);
    // "中/" is 4 bytes in 2 UTF-16 units: 4,095 bytes are 2,048 units.
    const longest = `${"中/".repeat(1023)}中`;
    expect(Buffer.byteLength(longest, "utf8")).toBe(4095);
    expect(workspaceSegments(longest)).toHaveLength(1024);
    expect(() => workspaceSegments(`${longest}x`)).toThrow(
      new WorkspacePathError(`Path escapes workspace: ${shownPath(`${longest}x`)}`),
    );
  });

  it("safePath counts the workspace's own path too: an absolute path of 4,095 bytes resolves, one of 4,096 is refused", async () => {
    // The workspace's path and its separator take some of the 4,095; "a/" segments and a last name take the rest.
    const rest = MAX_PATH_BYTES - Buffer.byteLength(ws, "utf8") - 1;
    const pairs = Math.floor((rest - 1) / 2);
    const fits = `${"a/".repeat(pairs)}${"b".repeat(rest - 2 * pairs)}`;
    expect(Buffer.byteLength(join(ws, fits), "utf8")).toBe(4095);
    expect(await safePath(ws, fits)).toBe(join(ws, fits));
    await expect(safePath(ws, `${fits}c`)).rejects.toThrow(
      new WorkspacePathError(`Path escapes workspace: ${shownPath(`${fits}c`)}`),
    );
  });

  it("a 600-byte name of 200 characters is path_escape for a write, an edit and a read, and nothing is created", async () => {
    const name = "中".repeat(200);
    const escape = new WorkspacePathError(`Path escapes workspace: ${name}`);
    const before = await readdir(ws);
    await expect(files.writeFile(ws, name, "x")).rejects.toThrow(escape);
    await expect(files.writeFile(ws, `new-folder/${name}`, "x")).rejects.toThrow(
      new WorkspacePathError(`Path escapes workspace: ${shownPath(`new-folder/${name}`)}`),
    );
    await expect(files.editFile(ws, name, "x", "y")).rejects.toThrow(escape);
    await expect(files.readFile(ws, name)).rejects.toThrow(escape);
    expect(await readdir(ws)).toEqual(before);
  });

  it("an ASCII path of exactly MAX_PATH_BYTES characters passes the text check; one more does not", () => {
    const longest = `${"a/".repeat(2047)}a`;
    expect(longest.length).toBe(MAX_PATH_BYTES);
    expect(workspaceSegments(longest)).toHaveLength(2048);
    expect(() => workspaceSegments(`${longest}a`)).toThrow(WorkspacePathError);
  });

  // Node's own count is the oracle: a name is taken exactly when Buffer.byteLength says it fits in 255 bytes.
  // Each unit is repeated up to the limit and one past it; lone surrogates count as U+FFFD (3 bytes), as written.
  it.each<[string, string]>([
    ["U+00A0, the first two-byte character that is no control", "\u00a0"],
    ["U+07FF, the last two-byte character", "\u07ff"],
    ["U+0800, the first three-byte character", "\u0800"],
    ["U+10000, the first pair (high surrogate D800)", "\u{10000}"],
    ["U+10FFFF, the last pair (high surrogate DBFF)", "\u{10ffff}"],
    ["a lone low surrogate after a letter", "a\udc00"],
    ["two lone low surrogates", "\udc00\udc00"],
    ["a lone low surrogate after U+E000", "\ue000\udc00"],
    ["a lone high surrogate before a CJK character", "\ud800中"],
    ["a lone high surrogate before a two-byte character", "\udbffé"],
  ])("measures %s as Node writes it to the disk", (_name, unit) => {
    const bytes = Buffer.byteLength(unit, "utf8");
    const fits = unit.repeat(Math.floor(MAX_SEGMENT_BYTES / bytes));
    const over = unit.repeat(Math.floor(MAX_SEGMENT_BYTES / bytes) + 1);
    expect(Buffer.byteLength(fits, "utf8")).toBeLessThanOrEqual(MAX_SEGMENT_BYTES);
    expect(Buffer.byteLength(over, "utf8")).toBeGreaterThan(MAX_SEGMENT_BYTES);
    expect(workspaceSegments(fits)).toEqual([fits]);
    expect(() => workspaceSegments(over)).toThrow(new WorkspacePathError(`Path escapes workspace: ${shownPath(over)}`));
  });

  it("measures the workspace's own path in bytes too, whatever characters its name holds", () => {
    // A fake disk where only the workspace exists: every path below it is still to be made.
    for (const name of ["\u0080", "\u07ff", "\u0800", "\u{10000}"]) {
      const ws = `/${name.repeat(40)}`;
      const probe: PathProbe = {
        separator: "/",
        realpath: (path) => {
          if (path === ws) return ws;
          throw new Error(`ENOENT: ${path}`);
        },
        exists: () => false,
      };
      const rest = MAX_PATH_BYTES - Buffer.byteLength(ws, "utf8") - 1;
      const fits = `${"a/".repeat(Math.floor((rest - 1) / 2))}${"b".repeat(rest - 2 * Math.floor((rest - 1) / 2))}`;
      expect(Buffer.byteLength(`${ws}/${fits}`, "utf8")).toBe(MAX_PATH_BYTES);
      expect(resolveInWorkspace(ws, fits, probe)).toBe(`${ws}/${fits}`);
      expect(() => resolveInWorkspace(ws, `${fits}c`, probe)).toThrow(WorkspacePathError);
    }
  });

  it("a name too long for this system's open (ENAMETOOLONG) is path_escape too, never an errno", () => {
    const tooLong = Object.assign(new Error("ENAMETOOLONG: name too long"), { code: "ENAMETOOLONG" });
    expect(platformError(tooLong, "x.txt")).toEqual(new WorkspacePathError("Path escapes workspace: x.txt"));
  });
});

// [path, where it must land or "refused"]: only the real path on disk decides.
const dirLinks: [string, Outcome][] = [
  ["link-in-dir/b.txt", { inside: "a/b.txt" }],
  ["link-in-dir/new.txt", { inside: "a/new.txt" }],
  ["chain-in1/b.txt", { inside: "a/b.txt" }],
  ["link-to-self/a/b.txt", { inside: "a/b.txt" }],
  ["link-to-parent/ws/a/b.txt", { inside: "a/b.txt" }], // out and back in: only the real path counts
  ["escape", "refused"],
  ["escape/secret.txt", "refused"],
  ["escape/new.txt", "refused"],
  ["escape/new/deeper/file.txt", "refused"],
  ["chain1/secret.txt", "refused"],
  ["a/nested-out/secret.txt", "refused"],
  ["link-to-parent/outside/secret.txt", "refused"],
  ["prefix-sibling/x.txt", "refused"], // ws-sibling starts with "ws" but is not inside it
];

const fileLinks: [string, Outcome][] = [
  ["link-in-file", { inside: "a/b.txt" }],
  ["relative-link-in/b.txt", { inside: "a/b.txt" }],
  ["link-out-file", "refused"],
  ["relative-link-out/secret.txt", "refused"],
  ["dangling-out", "refused"], // writing through it would create the target, wherever it is
  ["dangling-in", "refused"],
];

describe("safePath's second check: the real path on disk", () => {
  it.each(dirLinks)("through junctions and folder links: %j → %j", async (relative, expected) => {
    expect(await outcome(relative)).toEqual(expected);
  });

  it.skipIf(!posix).each(fileLinks)("through file links: %j → %j", async (relative, expected) => {
    expect(await outcome(relative)).toEqual(expected);
  });

  it("the book's junction case: escape/id_rsa passes the first check and only the disk refuses it", async () => {
    expect(workspaceSegments("escape/id_rsa")).toEqual(["escape", "id_rsa"]);
    await expect(safePath(ws, "escape/id_rsa")).rejects.toThrow(
      new WorkspacePathError("Path escapes workspace: escape/id_rsa"),
    );
  });

  it("resolves against the workspace's real path, also when the workspace is named through a link", async () => {
    const alias = join(root, "ws-alias");
    await symlink(ws, alias, "junction");
    expect(await safePath(alias, "a/b.txt")).toBe(join(ws, "a", "b.txt"));
    await expect(safePath(alias, "escape/secret.txt")).rejects.toThrow(WorkspacePathError);
  });

  it("has more than 100 cases in all", () => {
    expect(lexical.length + dotDot.length + RESERVED.length * 5 + dirLinks.length + fileLinks.length).toBeGreaterThan(
      100,
    );
  });
});

describe("NodeWorkspaceFileSystem: the port on the real disk, the workspace first in every call", () => {
  let fsRoot: string;
  let one: string;
  let two: string;
  const files = new NodeWorkspaceFileSystem();

  beforeAll(async () => {
    fsRoot = await realpath(await mkdtemp(join(tmpdir(), "ch02-node-fs-")));
    one = join(fsRoot, "one");
    two = join(fsRoot, "two");
    await mkdir(join(one, "src"), { recursive: true });
    await mkdir(two);
    await writeFile(join(one, "src", "a.ts"), "one\ntwo\nthree\n");
    await writeFile(join(one, "src", "b.ts"), "");
    await writeFile(join(one, "c.md"), "c");
    await writeFile(join(two, "c.md"), "the other workspace");
  });

  afterAll(async () => {
    await rm(fsRoot, { recursive: true, force: true });
  });

  it("the workspace folder itself (., ./, .\\) is no path inside it: writing, editing or reading it is path_escape", async () => {
    const before = await readdir(two);
    for (const path of [".", "./", ".\\", ".//.", "sub/.."]) {
      const escape = new WorkspacePathError(`Path escapes workspace: ${path}`);
      await expect(safePath(two, path)).rejects.toThrow(escape);
      await expect(files.writeFile(two, path, "x")).rejects.toThrow(escape);
      await expect(files.editFile(two, path, "x", "y")).rejects.toThrow(escape);
      await expect(files.readFile(two, path)).rejects.toThrow(escape);
    }
    expect(await readdir(two)).toEqual(before);
  });

  it("a link to the workspace folder names a folder: writing it is Path is a directory, and nothing is created", async () => {
    await symlink(two, join(two, "self"), "junction");
    const before = await readdir(two);
    await expect(files.writeFile(two, "self", "x")).rejects.toThrow(
      new InvalidFilePathError("Path is a directory: self"),
    );
    expect(await readdir(two)).toEqual(before);
    await rm(join(two, "self"));
  });

  it("takes no folder when it is made: one instance serves any workspace it is handed", async () => {
    expect(NodeWorkspaceFileSystem.length).toBe(0);
    expect(await files.readFile(one, "c.md")).toBe("c");
    expect(await files.readFile(two, "c.md")).toBe("the other workspace");
    expect(await files.globFiles(two, "*")).toEqual(["c.md"]);
  });

  it("readFile returns the whole text, or the first limit lines and how many more", async () => {
    expect(await files.readFile(one, "src/a.ts")).toBe("one\ntwo\nthree\n");
    expect(await files.readFile(one, "src/a.ts", 1)).toBe("one\n... (2 more lines)");
    expect(await files.readFile(one, "src/a.ts", 3)).toBe("one\ntwo\nthree\n");
    expect(await files.readFile(one, "src/b.ts", 1)).toBe("");
  });

  it("readFile refuses a limit that is not a positive integer before it touches the disk", async () => {
    for (const limit of [0, -1, 2.5, Number.NaN]) {
      await expect(files.readFile(one, "../outside.txt", limit)).rejects.toThrow(
        new RangeError("limit must be a positive integer"),
      );
    }
  });

  it("readFile reads a file of exactly MAX_FILE_BYTES and refuses one byte more, naming both sizes", async () => {
    await writeFile(join(two, "edge.txt"), "");
    await truncate(join(two, "edge.txt"), MAX_FILE_BYTES);
    expect((await files.readFile(two, "edge.txt")).length).toBe(MAX_FILE_BYTES);
    await truncate(join(two, "edge.txt"), MAX_FILE_BYTES + 1);
    await expect(files.readFile(two, "edge.txt")).rejects.toThrow(
      new FileSystemOperationError("the file is 10485761 bytes; at most 10485760 are read"),
    );
    await rm(join(two, "edge.txt"));
  });

  // Windows has no sparse file without fsutil: truncating would write 8 GiB of zeros to the disk.
  it.skipIf(!posix)(
    "an 8 GiB file with no line break (sparse) is refused from its opened size at once, with or without a limit",
    async () => {
      const handle = await open(join(two, "huge.log"), "w");
      await handle.truncate(8 * 1024 ** 3);
      await handle.close();
      const refused = new FileSystemOperationError("the file is 8589934592 bytes; at most 10485760 are read");
      const started = performance.now();
      await expect(files.readFile(two, "huge.log")).rejects.toThrow(refused);
      await expect(files.readFile(two, "huge.log", 1)).rejects.toThrow(refused);
      await expect(files.editFile(two, "huge.log", "x", "y")).rejects.toThrow(refused);
      // Scanning 8 GiB takes tens of seconds; three stats take milliseconds, on a busy machine too.
      expect(performance.now() - started).toBeLessThan(2_000);
      await rm(join(two, "huge.log"));
    },
  );

  it.skipIf(!existsSync("/proc/self/status"))(
    "a file whose size says 0 but holds more (Linux's /proc) is read to its end, not cut one byte past its size",
    async () => {
      const text = await files.readFile("/proc/self", "status");
      expect(text.startsWith("Name:")).toBe(true);
      expect(text.endsWith("\n")).toBe(true);
    },
  );

  it.skipIf(!posix)(
    "a file that grew past MAX_FILE_BYTES after its size was read is refused without reading on: 8 GiB the size check missed",
    async () => {
      const handle = await open(join(two, "growing.log"), "w");
      await handle.truncate(8 * 1024 ** 3);
      await handle.close();
      // Plays the writer that appended after the size was taken: every opened file's stat says it was empty.
      const prototype = Object.getPrototypeOf(handle) as FileHandle;
      // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with each handle as `this`
      const stat = prototype.stat;
      vi.spyOn(prototype, "stat").mockImplementation(async function (this: FileHandle) {
        return Object.assign(await stat.call(this), { size: 0 });
      });
      try {
        const started = performance.now();
        await expect(files.readFile(two, "growing.log")).rejects.toThrow(
          new FileSystemOperationError("the file grew past 10485760 bytes while it was read"),
        );
        // At most one byte past the cap is read: milliseconds, where reading on to the end would take tens of seconds.
        expect(performance.now() - started).toBeLessThan(2_000);
      } finally {
        vi.restoreAllMocks();
        await rm(join(two, "growing.log"));
      }
    },
  );

  it.skipIf(!posix)(
    "a file that grew from just under MAX_FILE_BYTES to past it after its size was read is refused, not cut at the cap",
    async () => {
      await writeFile(join(two, "edge-grown.log"), "");
      await truncate(join(two, "edge-grown.log"), MAX_FILE_BYTES + 5);
      const probe = await open(join(two, "edge-grown.log"), "r");
      const prototype = Object.getPrototypeOf(probe) as FileHandle;
      await probe.close();
      // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with each handle as `this`
      const stat = prototype.stat;
      // The size said one byte under the cap; by the time it is read the file is five bytes over it.
      vi.spyOn(prototype, "stat").mockImplementation(async function (this: FileHandle) {
        return Object.assign(await stat.call(this), { size: MAX_FILE_BYTES - 1 });
      });
      try {
        await expect(files.readFile(two, "edge-grown.log")).rejects.toThrow(
          new FileSystemOperationError("the file grew past 10485760 bytes while it was read"),
        );
      } finally {
        vi.restoreAllMocks();
        await rm(join(two, "edge-grown.log"));
      }
    },
  );

  it.skipIf(!posix)(
    "reads a file into a buffer of its size and one byte more, and never more than one byte past the cap",
    async () => {
      await writeFile(join(two, "small.txt"), "small\n");
      await writeFile(join(two, "grown.log"), "");
      await truncate(join(two, "grown.log"), 8 * 1024 ** 2 * 3);
      const probe = await open(join(two, "small.txt"), "r");
      const prototype = Object.getPrototypeOf(probe) as FileHandle;
      await probe.close();
      // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with each handle as `this`
      const read = prototype.read;
      const buffers: number[] = [];
      let got = 0;
      vi.spyOn(prototype, "read").mockImplementation(async function (this: FileHandle, ...args: unknown[]) {
        buffers.push((args[0] as Buffer).length);
        const result = await (read as (...all: unknown[]) => Promise<{ bytesRead: number }>).apply(this, args);
        got += result.bytesRead;
        return result;
      } as FileHandle["read"]);
      try {
        expect(await files.readFile(two, "small.txt")).toBe("small\n");
        expect(buffers).toEqual([7, 7]);
        // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with each handle as `this`
        const stat = prototype.stat;
        // A 24 MiB file whose size said 0, or 6 MiB, when it was opened: read up to one byte past the cap, then refused.
        for (const said of [0, 6 * 1024 ** 2]) {
          vi.spyOn(prototype, "stat").mockImplementation(async function (this: FileHandle) {
            return Object.assign(await stat.call(this), { size: said });
          });
          buffers.length = 0;
          got = 0;
          await expect(files.readFile(two, "grown.log")).rejects.toThrow(
            new FileSystemOperationError("the file grew past 10485760 bytes while it was read"),
          );
          expect([said, got, Math.max(...buffers)]).toEqual([said, MAX_FILE_BYTES + 1, MAX_FILE_BYTES + 1]);
        }
      } finally {
        vi.restoreAllMocks();
        await rm(join(two, "small.txt"));
        await rm(join(two, "grown.log"));
      }
    },
  );

  it("turns the platform's errors into the domain's: never an errno", async () => {
    await expect(files.readFile(one, "nope.txt")).rejects.toThrow(new FileNotFoundError("File not found: nope.txt"));
    await expect(files.readFile(one, "c.md/x")).rejects.toThrow(new FileNotFoundError("File not found: c.md/x"));
    await expect(files.readFile(one, "src")).rejects.toThrow(new InvalidFilePathError("Path is a directory: src"));
    await writeFile(join(two, "bad.bin"), Buffer.from([0xc3, 0x28]));
    await expect(files.readFile(two, "bad.bin")).rejects.toThrow(
      new InvalidUtf8Error("File is not valid UTF-8: bad.bin"),
    );
    await rm(join(two, "bad.bin"));
  });

  it.skipIf(!posix)("a FIFO is InvalidFilePathError for a read and for a write, and neither waits", async () => {
    execFileSync("mkfifo", [join(two, "pipe")]);
    const notRegular = new InvalidFilePathError("Path is not a regular file: pipe");
    await expect(files.readFile(two, "pipe")).rejects.toThrow(notRegular);
    await expect(files.writeFile(two, "pipe", "x")).rejects.toThrow(notRegular);
    await rm(join(two, "pipe"));
  });

  it("writeFile returns the UTF-8 bytes written and makes missing folders inside the workspace", async () => {
    expect(await files.writeFile(two, "out/new.txt", "你好")).toBe(6);
    expect(await files.writeFile(two, "out/new.txt", "a")).toBe(1);
    expect(await readFile(join(two, "out", "new.txt"), "utf8")).toBe("a");
    await expect(files.writeFile(two, "../escape.txt", "x")).rejects.toThrow(
      new WorkspacePathError("Path escapes workspace: ../escape.txt"),
    );
    expect((await readdir(fsRoot)).sort()).toEqual(["one", "two"]);
    await rm(join(two, "out"), { recursive: true });
  });

  it("a folder the system refuses to make is filesystem_error; a file where a folder is meant is invalid_path", async () => {
    const refused = vi.spyOn(fs, "mkdirSync").mockImplementation(() => {
      throw Object.assign(new Error("EACCES: permission denied, mkdir"), { code: "EACCES" });
    });
    syncBuiltinESMExports();
    try {
      await expect(files.writeFile(two, "locked/new.txt", "x")).rejects.toThrow(
        new FileSystemOperationError("the operating system refused access"),
      );
    } finally {
      refused.mockRestore();
      syncBuiltinESMExports();
    }
    expect(existsSync(join(two, "locked"))).toBe(false);
    await writeFile(join(two, "plain.txt"), "");
    await expect(files.writeFile(two, "plain.txt/new.txt", "x")).rejects.toThrow(
      new InvalidFilePathError("A parent of the path is not a directory: plain.txt/new.txt"),
    );
    await rm(join(two, "plain.txt"));
  });

  it("editFile resolves to nothing, replaces the first occurrence, and without one throws and writes nothing", async () => {
    await writeFile(join(two, "e.txt"), "x y x");
    expect(await files.editFile(two, "e.txt", "x", "z")).toBeUndefined();
    expect(await readFile(join(two, "e.txt"), "utf8")).toBe("z y x");
    await expect(files.editFile(two, "e.txt", "nope", "z")).rejects.toThrow(
      new TextNotFoundError("Exact text not found in e.txt"),
    );
    expect(await readFile(join(two, "e.txt"), "utf8")).toBe("z y x");
    await rm(join(two, "e.txt"));
  });

  it("globFiles returns sorted workspace-relative / paths of files only", async () => {
    expect(await files.globFiles(one, "**/*")).toEqual(["c.md", "src/a.ts", "src/b.ts"]);
    expect(await files.globFiles(one, "src/*")).toEqual(["src/a.ts", "src/b.ts"]);
    expect(await files.globFiles(one, "*.none")).toEqual([]);
  });
});

describe("shownPath: how a refused path is quoted back", () => {
  it("keeps a path of up to 200 characters whole and cuts a longer one at 200 with …", () => {
    expect(shownPath("a".repeat(200))).toBe("a".repeat(200));
    expect(shownPath("a".repeat(201))).toBe(`${"a".repeat(200)}…`);
  });

  it.each<[string, string, string]>([
    ["a pair that starts at character 200", `${"a".repeat(199)}🙂${"b".repeat(10)}`, `${"a".repeat(199)}…`],
    ["a pair whose high surrogate is D800", `${"a".repeat(199)}\u{10000}b`, `${"a".repeat(199)}…`],
    ["a pair whose high surrogate is DBFF", `${"a".repeat(199)}\u{10ffff}b`, `${"a".repeat(199)}…`],
    ["no pair but a character above the surrogates", `${"a".repeat(199)}！！`, `${"a".repeat(199)}！…`],
    ["a pair just after the cut", `${"a".repeat(200)}🙂`, `${"a".repeat(200)}…`],
    ["a pair two characters after the cut", `${"a".repeat(201)}🙂`, `${"a".repeat(200)}…`],
  ])("cuts at 200 characters, or at 199 before a pair it would split: %s", (_name, text, shown) => {
    expect(shownPath(text)).toBe(shown);
  });

  it("never cuts a surrogate pair in half, so the message stays well-formed", () => {
    const shown = shownPath(`${"a".repeat(199)}${"🙂".repeat(10)}`);
    expect(shown).toBe(`${"a".repeat(199)}…`);
    // A lone surrogate would not survive a UTF-8 round trip.
    expect(Buffer.from(shown, "utf8").toString("utf8")).toBe(shown);
  });
});

describe("globFiles' boundaries", () => {
  let gRoot: string;
  let gws: string;
  const files = new NodeWorkspaceFileSystem();

  beforeAll(async () => {
    gRoot = await realpath(await mkdtemp(join(tmpdir(), "ch02-glob-")));
    gws = join(gRoot, "ws");
    await mkdir(join(gws, "sub"), { recursive: true });
    await mkdir(join(gRoot, "outside"));
    await writeFile(join(gws, "sub", "in.txt"), "in");
    await writeFile(join(gRoot, "outside", "secret.txt"), "secret");
    await symlink(join(gRoot, "outside"), join(gws, "escape"), "junction");
    await symlink(join(gws, "sub"), join(gws, "alias"), "junction");
  });

  afterAll(async () => {
    await rm(gRoot, { recursive: true, force: true });
  });

  it.each(["../*", "..", "sub/../*", "**/../../*", "{..,x}/*", "@(..)/*", "/etc/*", "C:/x", "\\\\server\\share\\*"])(
    "refuses %j before walking anything",
    async (pattern) => {
      await expect(files.globFiles(gws, pattern)).rejects.toThrow(
        new WorkspacePathError(`Path escapes workspace: ${pattern}`),
      );
    },
  );

  // The same characters as in a path: NUL once reached the walk and killed the CLI with a stack trace.
  it.each([
    "a\u0000b",
    "\u0000",
    "**/*\u0000",
    "sub/\u0000*",
    "sub/*.txt\n",
    "\u001b[31m*",
    "*\u007f",
    "\u009b*",
    "a|b",
    "*<x>*",
    '"*"',
    "*:Zone.Identifier",
    "sub/*:stream",
  ])("refuses %j, which holds a character no path may, as path_escape before walking anything", async (pattern) => {
    await expect(files.globFiles(gws, pattern)).rejects.toThrow(
      new WorkspacePathError(`Path escapes workspace: ${pattern}`),
    );
  });

  it("does not refuse ./ before a pattern, though safePath refuses . as a path: the workspace folder adds nothing", async () => {
    for (const pattern of ["./sub/*.txt", ".//sub/*.txt", "./*/in.txt", "./sub/in.txt"]) {
      await expect(files.globFiles(gws, pattern)).resolves.toHaveLength(1);
    }
  });

  it("sends the fixed folders before the first wildcard through safePath: escape/*.txt is refused", async () => {
    for (const pattern of ["escape/*.txt", "escape/**", "escape/secret.txt"]) {
      await expect(files.globFiles(gws, pattern)).rejects.toThrow(
        new WorkspacePathError(`Path escapes workspace: ${pattern}`),
      );
    }
    expect(await files.globFiles(gws, "sub/*.txt")).toEqual(["sub/in.txt"]);
  });

  it("reads \\ as a folder separator, as every other tool does, not as fast-glob's escape", async () => {
    expect(await files.globFiles(gws, "sub\\*.txt")).toEqual(["sub/in.txt"]);
    expect(await files.globFiles(gws, "sub\\in.txt")).toEqual(["sub/in.txt"]);
  });

  it("never enters a linked folder, inside or out, when a wildcard reaches it", async () => {
    expect(await files.globFiles(gws, "**/*")).toEqual(["sub/in.txt"]);
    expect(await files.globFiles(gws, "*/*.txt")).toEqual(["sub/in.txt"]);
    expect(await files.globFiles(gws, "alias/*")).toEqual([]);
  });

  it("refuses a pattern over MAX_GLOB_PATTERN_CHARS and takes one of exactly that length", async () => {
    expect(MAX_GLOB_PATTERN_CHARS).toBe(1_000);
    await expect(files.globFiles(gws, "*".repeat(1_001))).rejects.toThrow(
      new FileSystemOperationError("the pattern is longer than 1000 characters"),
    );
    expect(await files.globFiles(gws, `${"x".repeat(996)}.txt`)).toEqual([]);
  });

  /** Runs `meanwhile` once, as the walk reads its first folder, then lets the read go on (or fail with `failure`). */
  function whileReading(meanwhile: () => void, failure?: Error): void {
    const original = promises.readdir;
    let pending = true;
    vi.spyOn(promises, "readdir").mockImplementation((...args: Parameters<typeof promises.readdir>) => {
      if (pending) {
        pending = false;
        meanwhile();
        if (failure !== undefined) return Promise.reject(failure);
      }
      return original(...args);
    });
    syncBuiltinESMExports();
  }

  it("a folder that moves out of the workspace while the walk reads it is path_escape for the pattern", async () => {
    whileReading(() => renameSync(join(gws, "sub"), join(gRoot, "outside", "moved")));
    try {
      await expect(files.globFiles(gws, "sub/*.txt")).rejects.toThrow(
        new WorkspacePathError("Path escapes workspace: sub/*.txt"),
      );
    } finally {
      vi.restoreAllMocks();
      syncBuiltinESMExports();
      renameSync(join(gRoot, "outside", "moved"), join(gws, "sub"));
    }
    expect(await files.globFiles(gws, "sub/*.txt")).toEqual(["sub/in.txt"]);
  });

  it("a folder that cannot be read for another reason is that error, no path_escape", async () => {
    const eio = Object.assign(new Error("EIO: i/o error, scandir"), { code: "EIO" });
    whileReading(() => undefined, eio);
    try {
      await expect(files.globFiles(gws, "sub/*.txt")).rejects.toBe(eio);
    } finally {
      vi.restoreAllMocks();
      syncBuiltinESMExports();
    }
  });

  it("stops one past MAX_GLOB_RESULTS, so the tool can say more exist without holding them all", async () => {
    expect(MAX_GLOB_RESULTS).toBe(1_000);
    const many = join(gws, "many");
    await mkdir(many);
    await Promise.all(Array.from({ length: 1_500 }, (_, i) => writeFile(join(many, `f${i}.txt`), "")));
    const found = await files.globFiles(gws, "many/*.txt");
    expect(found).toHaveLength(1_001);
    expect(new Set(found).size).toBe(1_001);
    expect(found).toEqual([...found].sort());
    expect(found.every((path) => /^many\/f\d+\.txt$/.test(path))).toBe(true);
    await rm(many, { recursive: true });
  });
});
