import { mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodeWorkspaceFileSystem, safePath } from "../src/adapters/filesystem.js";
import {
  FileNotFoundError,
  FileTooLargeError,
  NotAFileError,
  WorkspacePathError,
  type WorkspacePathProblem,
} from "../src/core/workspace-fs.js";

let root: string;
let ws: string;
const posixLinks = process.platform !== "win32";

beforeAll(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch02-safe-path-")));
  ws = join(root, "ws");
  await mkdir(join(ws, "a", "deep"), { recursive: true });
  await mkdir(join(root, "outside"));
  await writeFile(join(ws, "a", "b.txt"), "inside");
  await writeFile(join(root, "outside", "secret.txt"), "secret");
  if (!posixLinks) return;
  await symlink(join(ws, "a", "b.txt"), join(ws, "link-in-file"));
  await symlink(join(ws, "a"), join(ws, "link-in-dir"));
  await symlink("a", join(ws, "relative-link-in"));
  await symlink(join(root, "outside", "secret.txt"), join(ws, "link-out-file"));
  await symlink(join(root, "outside"), join(ws, "link-out-dir"));
  await symlink("../outside", join(ws, "relative-link-out"));
  await symlink(join(root, "outside"), join(ws, "chain2"));
  await symlink(join(ws, "chain2"), join(ws, "chain1"));
  await symlink(join(ws, "a"), join(ws, "chain-in2"));
  await symlink(join(ws, "chain-in2"), join(ws, "chain-in1"));
  await symlink(join(root, "outside", "missing.txt"), join(ws, "dangling-out"));
  await symlink(join(ws, "nothing-here.txt"), join(ws, "dangling-in"));
  await symlink(join(ws, "link-out-dir"), join(ws, "a", "nested-out"));
  await symlink(root, join(ws, "link-to-parent"));
  await symlink(ws, join(ws, "link-to-self"));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

type Expected = { inside: string } | WorkspacePathProblem;

// [model-supplied path, expected: a path relative to the workspace's real path, or the refusal]
const lexical: [string, Expected][] = [
  ["a/b.txt", { inside: "a/b.txt" }],
  ["./a/./b.txt", { inside: "a/b.txt" }],
  ["a\\b.txt", { inside: "a/b.txt" }],
  ["a//b.txt", { inside: "a/b.txt" }],
  ["a/deep/../b.txt", { inside: "a/b.txt" }],
  ["new/folder/file.txt", { inside: "new/folder/file.txt" }],
  ["", { inside: "" }],
  [".", { inside: "" }],
  ["中文 名字.txt", { inside: "中文 名字.txt" }],
  ["‥/x", { inside: "‥/x" }], // U+2025 is a name, not `..`
  ["%2e%2e/x", { inside: "%2e%2e/x" }], // no URL decoding: a literal name
  ["．．/x", { inside: "．．/x" }], // full-width dots are a literal name
  ["..", "escape"],
  ["../x", "escape"],
  ["..\\x", "escape"],
  ["a/../../x", "escape"],
  ["a\\..\\..\\x", "escape"],
  ["a/deep/../../../x", "escape"],
  ["/etc/passwd", "escape"],
  ["\\Windows\\win.ini", "escape"],
  ["C:\\Windows", "escape"],
  ["c:/windows", "escape"],
  ["C:x", "escape"],
  ["\\\\server\\share\\x", "escape"],
  ["//server/share/x", "escape"],
  ["\\\\?\\C:\\x", "escape"],
  ["\\\\.\\PhysicalDrive0", "escape"],
  ["a\u0000b", "invalid"],
  ["a\nb", "invalid"],
  ["a\u001fb", "invalid"],
  ["a\u007fb", "invalid"],
  ["a\u0085b", "invalid"], // C1 controls too: U+009B is a terminal's CSI
  ["\u009b31m.txt", "invalid"],
  ["a<b", "invalid"],
  ["a>b", "invalid"],
  ["a:b", "escape"], // drive-relative on Windows: drive A
  ["ab:c", "invalid"],
  ["file.txt:secret", "invalid"], // NTFS alternate data stream
  ['a"b', "invalid"],
  ["a|b", "invalid"],
  ["a?b", "invalid"],
  ["a*b", "invalid"],
  ["CON", "invalid"],
  ["con.txt", "invalid"],
  ["a/Nul.tar.gz", "invalid"],
  ["PRN", "invalid"],
  ["aux.md", "invalid"],
  ["COM1", "invalid"],
  ["com9.log", "invalid"],
  ["LPT1", "invalid"],
  ["lpt9.txt", "invalid"],
  ["COM¹", "invalid"],
  ["CONIN$", "invalid"],
  ["console.txt", { inside: "console.txt" }],
  ["com10", { inside: "com10" }],
  ["file.", "invalid"],
  ["file ", "invalid"],
  ["dir./x", "invalid"],
  ["...", "invalid"],
  ["x".repeat(256), "invalid"],
  [`${"a/".repeat(2100)}x`, "invalid"],
];

const links: [string, Expected][] = [
  ["link-in-file", { inside: "a/b.txt" }],
  ["link-in-dir/b.txt", { inside: "a/b.txt" }],
  ["link-in-dir/new.txt", { inside: "a/new.txt" }],
  ["relative-link-in/b.txt", { inside: "a/b.txt" }],
  ["chain-in1/b.txt", { inside: "a/b.txt" }],
  ["link-to-self/a/b.txt", { inside: "a/b.txt" }],
  ["link-out-file", "escape"],
  ["link-out-dir", "escape"],
  ["link-out-dir/secret.txt", "escape"],
  ["link-out-dir/new.txt", "escape"],
  ["link-out-dir/new/deeper/file.txt", "escape"],
  ["relative-link-out/secret.txt", "escape"],
  ["chain1/secret.txt", "escape"],
  ["a/nested-out/secret.txt", "escape"],
  ["link-to-parent/outside/secret.txt", "escape"],
  ["link-to-parent/ws/a/b.txt", { inside: "a/b.txt" }], // out and back in: only the real path counts
  ["dangling-out", "escape"],
  ["dangling-in", "escape"],
];

function outcome(relative: string): Expected {
  try {
    const resolved = safePath(ws, relative);
    return {
      inside:
        resolved === ws
          ? ""
          : resolved
              .slice(ws.length + 1)
              .split("\\")
              .join("/"),
    };
  } catch (error) {
    if (error instanceof WorkspacePathError) return error.problem;
    throw error;
  }
}

describe("safePath: rules that need no disk", () => {
  it.each(lexical)("%j → %j", (relative, expected) => {
    expect(outcome(relative)).toEqual(expected);
  });
});

describe.skipIf(!posixLinks)("safePath: real paths through symlinks", () => {
  it.each(links)("%j → %j", (relative, expected) => {
    expect(outcome(relative)).toEqual(expected);
  });

  it("has more than 40 cases in all", () => {
    expect(lexical.length + links.length).toBeGreaterThan(40);
  });
});

describe("NodeWorkspaceFileSystem: the port on the real disk", () => {
  let fsRoot: string;
  let fsWs: string;
  let files: NodeWorkspaceFileSystem;

  beforeAll(async () => {
    fsRoot = await realpath(await mkdtemp(join(tmpdir(), "ch02-node-fs-")));
    fsWs = join(fsRoot, "ws");
    await mkdir(join(fsWs, "src"), { recursive: true });
    await writeFile(join(fsWs, "src", "a.ts"), "one\ntwo\nthree\n");
    await writeFile(join(fsWs, "src", "b.ts"), "");
    await writeFile(join(fsWs, "c.md"), "c");
    files = new NodeWorkspaceFileSystem(fsWs);
  });

  afterAll(async () => {
    await rm(fsRoot, { recursive: true, force: true });
  });

  it("resolve gives the absolute path that safePath gives, and refuses the same paths", () => {
    expect(files.resolve("src/a.ts")).toBe(join(fsWs, "src", "a.ts"));
    expect(files.resolve("src/../c.md")).toBe(safePath(fsWs, "src/../c.md"));
    expect(() => files.resolve("../x")).toThrow(new WorkspacePathError("escape", 'path leaves the workspace: "../x"'));
  });

  it("readText returns the page asked for, where it starts, how many lines, and whether more follow", async () => {
    expect(await files.readText("src/a.ts", { offset: 2, limit: 1 })).toEqual({
      text: "two",
      firstLine: 2,
      lineCount: 1,
      more: true,
    });
    expect(await files.readText("src/a.ts", { offset: 1, limit: 10 })).toEqual({
      text: "one\ntwo\nthree",
      firstLine: 1,
      lineCount: 3,
      more: false,
    });
  });

  it("readWhole returns the whole text and refuses a file over maxBytes", async () => {
    expect(await files.readWhole("src/a.ts", 14)).toBe("one\ntwo\nthree\n");
    await expect(files.readWhole("src/a.ts", 13)).rejects.toThrow(
      new FileTooLargeError("src/a.ts is 14 bytes; the limit is 13"),
    );
  });

  it("reading a missing file or a folder throws the domain error, not an errno", async () => {
    await expect(files.readText("nope.txt", { offset: 1, limit: 1 })).rejects.toThrow(
      new FileNotFoundError("nope.txt does not exist"),
    );
    await expect(files.readWhole("src", 100)).rejects.toThrow(new NotAFileError("src is a folder, not a file"));
  });

  it("writeText says whether it created the file, and creates missing folders inside the workspace", async () => {
    expect(await files.writeText("out/new.txt", "first")).toEqual({ created: true });
    expect(await files.writeText("out/new.txt", "2nd")).toEqual({ created: false });
    expect(await readFile(join(fsWs, "out", "new.txt"), "utf8")).toBe("2nd");
    await expect(files.writeText("../escape.txt", "x")).rejects.toThrow(
      new WorkspacePathError("escape", 'path leaves the workspace: "../escape.txt"'),
    );
    expect((await readdir(fsRoot)).sort()).toEqual(["ws"]);
    await rm(join(fsWs, "out"), { recursive: true });
  });

  it("glob returns sorted workspace-relative paths and says when the limit cut it short", async () => {
    expect(await files.glob("**/*", 10)).toEqual({ paths: ["c.md", "src/a.ts", "src/b.ts"], capped: false });
    expect(await files.glob("**/*", 3)).toEqual({ paths: ["c.md", "src/a.ts", "src/b.ts"], capped: false });
    const capped = await files.glob("**/*", 2);
    expect(capped.capped).toBe(true);
    expect(capped.paths).toHaveLength(2);
    expect(await files.glob("*.none", 10)).toEqual({ paths: [], capped: false });
  });

  it("glob refuses patterns that climb out or are too long, before walking anything", async () => {
    await expect(files.glob("../*", 10)).rejects.toThrow(
      new WorkspacePathError("escape", 'glob patterns must stay inside the workspace: "../*"'),
    );
    await expect(files.glob("*".repeat(1_001), 10)).rejects.toThrow(
      new WorkspacePathError("invalid", "glob patterns are limited to 1000 characters"),
    );
  });
});
