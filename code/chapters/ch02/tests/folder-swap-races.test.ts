import { randomBytes } from "node:crypto";
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { buildAgent } from "../src/bootstrap.js";
import type { RunResult } from "../src/core/loop.js";
import { validateToolPairing } from "../src/core/messages.js";
import { P02 } from "../src/core/profiles.js";
import { CountingAuthorizer, FakeCommandRunner } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";

// Another process may swap a folder for a link between the moment a path is checked and the moment
// it is used. These tests play that process: they let the real adapter run and swap `dir` for a link
// to outside right after the adapter has resolved a given folder to its real path for the n-th time.
// That is the one point they hook (`realpathSync.native`, which safePath looks up at each call); every
// check, folder, open and write is chapter 2's own. POSIX only: the located open reads /proc/self/fd.

const SECRET = `secret-${randomBytes(16).toString("hex")}`;
const roots: string[] = [];

afterEach(() => {
  vi.restoreAllMocks();
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

interface Places {
  readonly root: string;
  readonly ws: string;
  readonly outside: string;
}

/** A workspace holding `dir/sub/`, beside an `outside/` folder that holds the secret. */
function makePlaces(): Places {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "ch02-race-")));
  roots.push(root);
  const ws = join(root, "ws");
  const outside = join(root, "outside");
  mkdirSync(join(ws, "dir", "sub"), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(outside, "secret.txt"), `${SECRET}\n`);
  return { root, ws, outside };
}

interface TreeEntry {
  readonly path: string;
  readonly kind: string;
  readonly size: number;
  readonly mode: number;
  readonly nlink: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly content?: string;
}

/** Everything beside the workspace: names, kinds, sizes, modes, link counts, times, contents, link targets. */
function outsideTree(root: string): { readonly listing: string[]; readonly entries: TreeEntry[] } {
  const entries: TreeEntry[] = [];
  const walk = (folder: string, relative: string): void => {
    for (const name of readdirSync(folder).sort()) {
      if (relative === "" && name === "ws") continue;
      const path = join(folder, name);
      const info = lstatSync(path);
      const kind = info.isSymbolicLink() ? "link" : info.isDirectory() ? "dir" : info.isFile() ? "file" : "other";
      const content = kind === "file" ? readFileSync(path, "base64") : kind === "link" ? readlinkSync(path) : undefined;
      entries.push({
        path: `${relative}${name}`,
        kind,
        size: info.size,
        mode: info.mode,
        nlink: info.nlink,
        mtimeMs: info.mtimeMs,
        ctimeMs: info.ctimeMs,
        ...(content === undefined ? {} : { content }),
      });
      if (kind === "dir") walk(path, `${relative}${name}/`);
    }
  };
  walk(root, "");
  return { listing: readdirSync(root).sort(), entries };
}

/** Without the times: what a create-then-remove in the outside folder is allowed to change. */
const timeless = (tree: ReturnType<typeof outsideTree>) =>
  tree.entries.map(({ mtimeMs: _mtime, ctimeMs: _ctime, ...rest }) => rest);

/**
 * Swaps `ws/dir` for a link to `../outside` right after the adapter has resolved `folder` (a path
 * inside the workspace) to its real path for the `times`-th time. Returns how often it swapped.
 */
function swapAfterResolving({ ws }: Places, folder: string, times: number): () => number {
  const original = realpathSync.native;
  let resolved = 0;
  let swaps = 0;
  vi.spyOn(realpathSync, "native").mockImplementation(((path: string) => {
    const real = original(path);
    if (path === join(ws, folder)) {
      resolved += 1;
      if (resolved === times) {
        renameSync(join(ws, "dir"), join(ws, "dir-moved"));
        symlinkSync("../outside", join(ws, "dir"));
        swaps += 1;
      }
    }
    return real;
  }) as typeof realpathSync.native);
  return () => swaps;
}

/** One call through chapter 2's real agent and its real file system, with the swap armed. */
async function racedRun(
  places: Places,
  tool: string,
  args: Record<string, string>,
): Promise<{ result: RunResult; message: string }> {
  const model = new ScriptedModel([toolTurn(call("c1", tool, args)), textTurn("done")]);
  const runner = new FakeCommandRunner();
  const authorizer = new CountingAuthorizer(false);
  const agent = buildAgent(P02, { model, workspace: places.ws, commandRunner: runner, authorizer });
  const result = await agent.run("go");
  expect(result.finalText).toBe("done");
  expect(() => validateToolPairing(result.history)).not.toThrow();
  expect(authorizer.requests).toEqual([]);
  expect(runner.calls).toEqual([]);
  const messages = toolMessages(result.history);
  expect(messages.map(([id]) => id)).toEqual(["c1"]);
  return { result, message: messages[0]?.[1] ?? "" };
}

describe.skipIf(process.platform === "win32")("a folder swapped for an outside link while a file tool runs", () => {
  // Missing folders are made one level at a time, refusing links, so the swapped-in link is caught there.
  it("a folder swapped for an outside link between the write's first check and its mkdir creates no folder outside", async () => {
    const places = makePlaces();
    const before = outsideTree(places.root);
    const swaps = swapAfterResolving(places, "dir/sub", 1);

    const { message } = await racedRun(places, "write_file", { path: "dir/sub/x.txt", content: "pwned" });

    expect(swaps()).toBe(1);
    expect(lstatSync(join(places.ws, "dir")).isSymbolicLink()).toBe(true);
    expect(message).toBe("Error [path_escape]: Path escapes workspace: dir/sub/x.txt");
    expect(outsideTree(places.root)).toEqual(before);
  });

  // Node has no openat, so a folder swapped after the last check is followed by open(O_CREAT). The opened
  // file is then located (/proc/self/fd), found outside, and removed before anything is written: no content
  // lands outside and no file stays, though the outside folder's times change.
  it("a folder swapped for an outside link between the write's re-check and its open leaves no file outside", async () => {
    const places = makePlaces();
    const before = outsideTree(places.root);
    const swaps = swapAfterResolving(places, "dir", 2);

    const { message } = await racedRun(places, "write_file", { path: "dir/x.txt", content: "pwned" });

    expect(swaps()).toBe(1);
    expect(message).toBe("Error [path_escape]: Path escapes workspace: dir/x.txt");
    const after = outsideTree(places.root);
    expect(after.listing).toEqual(before.listing);
    expect(timeless(after)).toEqual(timeless(before));
    expect(readdirSync(places.outside)).toEqual(["secret.txt"]);
  });

  // O_CREAT|O_EXCL first: an outside file reached through the swap already exists, so it is never taken for
  // one this call created, never truncated (no O_TRUNC) and never removed.
  it("a folder swapped for an outside link before the open leaves an existing outside file exactly as it was", async () => {
    const places = makePlaces();
    const before = outsideTree(places.root);
    const swaps = swapAfterResolving(places, "dir", 2);

    const { message } = await racedRun(places, "write_file", { path: "dir/secret.txt", content: "pwned" });

    expect(swaps()).toBe(1);
    expect(message).toBe("Error [path_escape]: Path escapes workspace: dir/secret.txt");
    expect(readFileSync(join(places.outside, "secret.txt"), "utf8")).toBe(`${SECRET}\n`);
    expect(outsideTree(places.root)).toEqual(before);
  });

  // The opened file is located after the open (/proc/self/fd, or its device and inode) and refused when outside.
  it("a folder swapped for an outside link between a read's check and its open does not leak the outside file", async () => {
    const places = makePlaces();
    const swaps = swapAfterResolving(places, "dir", 1);

    const { result, message } = await racedRun(places, "read_file", { path: "dir/secret.txt" });

    expect(swaps()).toBe(1);
    expect(message).toBe("Error [path_escape]: Path escapes workspace: dir/secret.txt");
    expect(JSON.stringify(result.history).includes(SECRET)).toBe(false);
  });

  it("without a swap the same calls succeed: the races above, not the paths, are what is refused", async () => {
    const places = makePlaces();
    writeFileSync(join(places.ws, "dir", "secret.txt"), "inside copy\n");
    expect((await racedRun(places, "write_file", { path: "dir/sub/x.txt", content: "ok" })).message).toBe(
      "Wrote 2 UTF-8 bytes to dir/sub/x.txt",
    );
    expect((await racedRun(places, "write_file", { path: "dir/x.txt", content: "ok" })).message).toBe(
      "Wrote 2 UTF-8 bytes to dir/x.txt",
    );
    expect((await racedRun(places, "read_file", { path: "dir/secret.txt" })).message).toBe("inside copy\n");
  });
});
