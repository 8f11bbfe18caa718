import { randomBytes } from "node:crypto";
import {
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { openConfined } from "../src/adapters/confined-open.js";
import { NodeWorkspaceFileSystem, safePath } from "../src/adapters/filesystem.js";
import { WorkspacePathError } from "../src/core/filesystem.js";

// A hard link is a second name for the same file, and nothing on the path shows it: `ws/notes.txt`
// can be the very file `~/.ssh/id_rsa` is. Every check by path or by where the opened file lies sees a
// plain file inside the workspace. So the opened file itself is asked how many names it has (fstat's
// nlink), and a regular file with more than one is refused as an escape: the other name may be outside.

const SECRET = `secret-${randomBytes(16).toString("hex")}`;
const roots: string[] = [];
const files = new NodeWorkspaceFileSystem();

/** Whether this system lets us make hard links here (NTFS does without privileges; some file systems never). */
const canLink = ((): boolean => {
  const folder = mkdtempSync(join(tmpdir(), "ch02-can-link-"));
  try {
    writeFileSync(join(folder, "a"), "");
    linkSync(join(folder, "a"), join(folder, "b"));
    return true;
  } catch {
    return false;
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
})();

afterEach(() => {
  vi.restoreAllMocks();
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

interface Places {
  readonly ws: string;
  /** The file outside the workspace that the link reaches. */
  readonly secret: string;
}

/** A workspace holding `plain.txt`, beside an outside file with the secret; `link` names it inside. */
function makePlaces(link?: string): Places {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "ch02-hard-links-")));
  roots.push(root);
  const ws = join(root, "ws");
  mkdirSync(join(ws, "sub"), { recursive: true });
  mkdirSync(join(root, "outside"));
  const secret = join(root, "outside", "secret.txt");
  writeFileSync(secret, `${SECRET}\n`);
  writeFileSync(join(ws, "plain.txt"), "plain\n");
  if (link !== undefined) linkSync(secret, join(ws, link));
  return { ws, secret };
}

/** What must not change about the outside file: its bytes and when they were last written. */
function untouched(secret: string): { content: string; mtimeMs: number; size: number } {
  const { mtimeMs, size } = statSync(secret);
  return { content: readFileSync(secret, "utf8"), mtimeMs, size };
}

const escapes = (path: string) => new WorkspacePathError(`Path escapes workspace: ${path}`);

describe.skipIf(!canLink)("a file with a second name (a hard link) is refused, read or written", () => {
  it("read_file of a hard link to an outside file is path_escape, and the outside bytes never come back", async () => {
    const { ws } = makePlaces("notes.txt");
    await expect(files.readFile(ws, "notes.txt")).rejects.toThrow(escapes("notes.txt"));
    await expect(files.readFile(ws, "notes.txt", 1)).rejects.toThrow(escapes("notes.txt"));
    await expect(files.readFile(ws, "plain.txt")).resolves.toBe("plain\n");
  });

  it("write_file and edit_file of a hard link to an outside file are path_escape, and the outside file is unchanged", async () => {
    const { ws, secret } = makePlaces("sub/notes.txt");
    const before = untouched(secret);
    await expect(files.writeFile(ws, "sub/notes.txt", "pwned")).rejects.toThrow(escapes("sub/notes.txt"));
    await expect(files.writeFile(ws, "sub/notes.txt", "")).rejects.toThrow(escapes("sub/notes.txt"));
    await expect(files.editFile(ws, "sub/notes.txt", SECRET, "pwned")).rejects.toThrow(escapes("sub/notes.txt"));
    expect(untouched(secret)).toEqual(before);
  });

  it("both names inside the workspace (cp -al, a pnpm store) are refused too: a name cannot say where the other is", async () => {
    const { ws } = makePlaces();
    linkSync(join(ws, "plain.txt"), join(ws, "sub", "twin.txt"));
    for (const path of ["plain.txt", "sub/twin.txt"]) {
      await expect(files.readFile(ws, path)).rejects.toThrow(escapes(path));
      await expect(files.writeFile(ws, path, "x")).rejects.toThrow(escapes(path));
    }
    expect(readFileSync(join(ws, "plain.txt"), "utf8")).toBe("plain\n");
    // With its second name gone, the file is an ordinary one again.
    unlinkSync(join(ws, "sub", "twin.txt"));
    await expect(files.readFile(ws, "plain.txt")).resolves.toBe("plain\n");
    await expect(files.writeFile(ws, "plain.txt", "x")).resolves.toBe(1);
  });

  it("the path rules alone do not see a hard link: safePath resolves it, and only the opened file tells", async () => {
    const { ws, secret } = makePlaces("notes.txt");
    expect(await safePath(ws, "notes.txt")).toBe(join(ws, "notes.txt"));
    const before = untouched(secret);
    for (const mode of ["read", "write"] as const) {
      await expect(openConfined(ws, join(ws, "notes.txt"), "notes.txt", mode)).rejects.toThrow(escapes("notes.txt"));
    }
    expect(untouched(secret)).toEqual(before);
  });
});

/**
 * Plays another process: right after the adapter has resolved `ws/<file>` to its real path for the
 * `times`-th time, replaces that file with a hard link to the outside file. The path checks are done
 * by then; only the open is left. Returns how often it swapped.
 */
function linkInAfterResolving({ ws, secret }: Places, file: string, times: number): () => number {
  const original = realpathSync.native;
  let resolved = 0;
  let swaps = 0;
  vi.spyOn(realpathSync, "native").mockImplementation(((path: string) => {
    const real = original(path);
    if (path === join(ws, file)) {
      resolved += 1;
      if (resolved === times) {
        unlinkSync(join(ws, file));
        linkSync(secret, join(ws, file));
        swaps += 1;
      }
    }
    return real;
  }) as typeof realpathSync.native);
  return () => swaps;
}

describe.skipIf(!canLink)("a hard link swapped in after the path was checked is still refused at the open", () => {
  it("read_file: the file becomes a hard link to outside after its last check, and the open refuses it", async () => {
    const places = makePlaces();
    const swaps = linkInAfterResolving(places, "plain.txt", 1);
    await expect(files.readFile(places.ws, "plain.txt")).rejects.toThrow(escapes("plain.txt"));
    expect(swaps()).toBe(1);
  });

  it("write_file: the file becomes a hard link to outside after its last check, and the outside file is unchanged", async () => {
    const places = makePlaces();
    // A write resolves the path twice (before making folders, and again before opening): swap after the second.
    const swaps = linkInAfterResolving(places, "plain.txt", 2);
    const before = untouched(places.secret);
    await expect(files.writeFile(places.ws, "plain.txt", "pwned")).rejects.toThrow(escapes("plain.txt"));
    expect(swaps()).toBe(1);
    expect(untouched(places.secret)).toEqual(before);
  });

  it("edit_file: the file becomes a hard link to outside between the read and the write, and the outside file is unchanged", async () => {
    const places = makePlaces();
    // Once for the read, twice for the write: after the third, the edit's own read is already done.
    const swaps = linkInAfterResolving(places, "plain.txt", 3);
    const before = untouched(places.secret);
    await expect(files.editFile(places.ws, "plain.txt", "plain", "pwned")).rejects.toThrow(escapes("plain.txt"));
    expect(swaps()).toBe(1);
    expect(untouched(places.secret)).toEqual(before);
  });
});
