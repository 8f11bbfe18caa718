import { randomBytes } from "node:crypto";
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it, vi } from "vitest";
import { NodeWorkspaceFileSystem } from "../src/adapters/filesystem.js";
import {
  FileNotFoundError,
  InvalidFilePathError,
  WorkspacePathError,
  type WorkspaceFileSystem,
} from "../src/core/filesystem.js";
import { AgentRunner, type RunResult } from "../src/core/loop.js";
import { toolCall, validateToolPairing } from "../src/core/messages.js";
import { PermissionPolicy } from "../src/core/permissions.js";
import { ToolRegistry, type ToolResult } from "../src/core/tools.js";
import { createChapterTwoTools, createGlobTool } from "../src/features/builtin-tools.js";
import { CountingApproval, FakeCommandRunner } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";
import { outsideTree } from "./support/outside-tree.js";

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
  const approval = new CountingApproval(false);
  // Chapter 2's tools and confirmation, as its profile has them: the shell asks, the file tools do not.
  const agent = new AgentRunner({
    model,
    tools: createChapterTwoTools(runner, new NodeWorkspaceFileSystem()),
    systemPrompt: "s",
    workspace: places.ws,
    permissionPolicy: new PermissionPolicy({ approval }),
  });
  const result = await agent.run("go");
  expect(result.finalText).toBe("done");
  expect(() => validateToolPairing(result.history)).not.toThrow();
  expect(approval.requests).toEqual([]);
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

// The swaps below are not hooked into the adapter: a worker thread (its own OS thread, so truly concurrent) swaps
// `ws/dir` for a link to `../outside` and back as fast as it can while the real adapter runs, call after call. Which
// step a swap lands on differs every time; what must hold, every time, is checked after every call. Between calls
// the worker is paused and the workspace put back as it was.

const RUN = 0;
const PAUSE = 1;
const STOP = 2;

/**
 * The worker: `dir` moved aside and a ready link renamed into its place, then back, until told to pause or stop.
 * A `dir` the adapter made while the name was free is moved to `dir-made-<n>` (inside the workspace), so the
 * swapping never stalls; every other failed step is simply tried again in the next cycle.
 */
const SWAPPER = `
const { workerData, parentPort } = require("node:worker_threads");
const { lstatSync, renameSync, symlinkSync } = require("node:fs");
const { flags, dir, aside, link, target } = workerData;
let swaps = 0;
let made = 0;
const clear = () => { try { if (!lstatSync(dir).isSymbolicLink()) renameSync(dir, dir + "-made-" + made++); } catch {} };
symlinkSync(target, link);
for (;;) {
  const command = Atomics.load(flags, 0);
  if (command === ${STOP}) break;
  if (command === ${PAUSE}) {
    Atomics.store(flags, 1, 1);
    Atomics.notify(flags, 1);
    Atomics.wait(flags, 0, ${PAUSE});
    Atomics.store(flags, 1, 0);
    continue;
  }
  try { renameSync(dir, aside); } catch { continue; }
  try { renameSync(link, dir); swaps += 1; } catch { clear(); continue; }
  try { renameSync(dir, link); } catch {}
  try { renameSync(aside, dir); } catch { clear(); try { renameSync(aside, dir); } catch {} }
}
parentPort.postMessage(swaps);
`;

class FolderSwapper {
  readonly #flags = new Int32Array(new SharedArrayBuffer(8));
  readonly #worker: Worker;
  readonly #swaps: Promise<number>;

  constructor(readonly places: Places) {
    Atomics.store(this.#flags, 0, PAUSE);
    const { ws } = places;
    const workerData = {
      flags: this.#flags,
      dir: join(ws, "dir"),
      aside: join(ws, "dir-aside"),
      link: join(ws, "dir-link"),
      target: "../outside",
    };
    this.#worker = new Worker(SWAPPER, { eval: true, workerData });
    this.#swaps = new Promise((resolve, reject) => {
      this.#worker.once("message", resolve);
      this.#worker.once("error", reject);
    });
    this.#waitPaused();
  }

  run(): void {
    Atomics.store(this.#flags, 0, RUN);
    Atomics.notify(this.#flags, 0);
  }

  /** Stops swapping and puts `ws/dir` back as the plain folder it was (`reset` may empty it), the link beside it. */
  pause(reset: (dir: string) => void = () => undefined): void {
    Atomics.store(this.#flags, 0, PAUSE);
    this.#waitPaused();
    const { ws } = this.places;
    const [dir, aside, link] = ["dir", "dir-aside", "dir-link"].map((name) => join(ws, name)) as [
      string,
      string,
      string,
    ];
    const at = (path: string) => lstatSync(path, { throwIfNoEntry: false });
    // Whichever step the pause fell on: the link goes back to its own name (never followed), the folder to `dir`.
    if (at(dir)?.isSymbolicLink() === true) renameSync(dir, link);
    if (at(aside) !== undefined) {
      if (at(dir) !== undefined) renameSync(dir, join(ws, `dir-made-${randomBytes(4).toString("hex")}`));
      renameSync(aside, dir);
    }
    for (const name of readdirSync(ws)) if (name.startsWith("dir-made-")) rmSync(join(ws, name), { recursive: true });
    if (at(dir) === undefined) mkdirSync(dir);
    reset(dir);
  }

  /** How often it swapped in all. */
  async stop(): Promise<number> {
    Atomics.store(this.#flags, 0, STOP);
    Atomics.notify(this.#flags, 0);
    const swaps = await this.#swaps;
    await this.#worker.terminate();
    return swaps;
  }

  #waitPaused(): void {
    while (Atomics.load(this.#flags, 1) !== 1) Atomics.wait(this.#flags, 1, 0, 50);
  }
}

/** The domain errors a raced file call may end in; anything else (an errno, a plain Error) is a failure. */
function outcome(error: unknown): string {
  if (error instanceof WorkspacePathError) return "path_escape";
  if (error instanceof InvalidFilePathError) return "invalid_path";
  if (error instanceof FileNotFoundError) return "file_not_found";
  throw error;
}

const ROUNDS = 400;

describe.skipIf(process.platform === "win32")("a real concurrent process swapping a folder for an outside link", () => {
  // Folders are made and opened one level at a time inside the level before it (on Linux through
  // /proc/self/fd/<fd>/<name>, as openat would), never by a name resolved again, and only a folder this call made
  // may ever be removed. The old code made each level by name (so a swap sent it outside) and then removed the
  // real path of that name (so a swap the other way removed the outside folder of the same name).
  it("a folder swapped for an outside link while parents are being created leaves no folder outside and never deletes an outside folder that existed before", async () => {
    const places = makePlaces();
    // Outside mirrors the folders written: `sub/a/b/c/leaf` exists there, empty, and so removable by mistake.
    mkdirSync(join(places.outside, "sub", "a", "b", "c", "leaf"), { recursive: true });
    const files = new NodeWorkspaceFileSystem();
    // With nothing swapping, the write lands inside: the refusals below are the races', not a broken write.
    await files.writeFile(places.ws, "dir/sub/a/b/c/leaf/x.txt", "inside");
    expect(readFileSync(join(places.ws, "dir", "sub", "a", "b", "c", "leaf", "x.txt"), "utf8")).toBe("inside");
    rmSync(join(places.ws, "dir", "sub"), { recursive: true });
    const before = timeless(outsideTree(places.root));
    const seen = new Map<string, number>();
    const swapper = new FolderSwapper(places);
    try {
      for (let round = 0; round < ROUNDS; round += 1) {
        // Each level is a moment for a swap. `leaf` exists outside, empty (a swap at the wrong moment used to
        // remove it); `new` does not (a swap used to make it there, and to leave it when it came back too soon).
        const path = round % 2 === 0 ? "dir/sub/a/b/c/leaf/x.txt" : "dir/sub/a/b/new/deeper/x.txt";
        swapper.run();
        const result = await files.writeFile(places.ws, path, "inside").then(() => "wrote", outcome);
        swapper.pause((dir) => {
          for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true });
        });
        seen.set(result, (seen.get(result) ?? 0) + 1);
        expect([round, timeless(outsideTree(places.root))]).toEqual([round, before]);
      }
    } finally {
      expect(await swapper.stop()).toBeGreaterThan(0);
    }
    // The swaps met the writes: some were refused. (How many got through depends on the machine's load.)
    expect(ROUNDS - (seen.get("wrote") ?? 0)).toBeGreaterThan(0);
  }, 120_000);

  // Each folder is listed through a descriptor that was opened without following a link and found inside: a swap
  // cannot put outside names in a listing. The old code listed by name and checked for links afterwards, by name.
  it("glob with a folder swapped for an outside link mid-walk never lists an outside name", async () => {
    const places = makePlaces();
    for (let index = 0; index < 20; index += 1) {
      writeFileSync(join(places.ws, "dir", `inside-${index}.txt`), "");
      writeFileSync(join(places.outside, `${SECRET}-${index}.txt`), "");
    }
    mkdirSync(join(places.outside, "sub", "deeper"), { recursive: true });
    writeFileSync(join(places.outside, "sub", "deeper", `${SECRET}.txt`), "");
    const files = new NodeWorkspaceFileSystem();
    // With nothing swapping, glob lists the inside names: what the rounds below list or refuse is the races'.
    expect(await files.globFiles(places.ws, "dir/*.txt")).toHaveLength(20);
    const patterns = ["dir/*", "dir/**/*", "**/*", "*/*", "*/sub/**", "dir/*.txt"];
    const seen = new Map<string, number>();
    const swapper = new FolderSwapper(places);
    try {
      for (let round = 0; round < ROUNDS; round += 1) {
        const pattern = patterns[round % patterns.length] as string;
        swapper.run();
        const result = await files.globFiles(places.ws, pattern).catch(outcome);
        swapper.pause();
        const listed = typeof result === "string" ? [] : result;
        seen.set(
          typeof result === "string" ? result : "listed",
          (seen.get(typeof result === "string" ? result : "listed") ?? 0) + 1,
        );
        expect([round, pattern, listed.filter((path) => path.includes(SECRET))]).toEqual([round, pattern, []]);
        // Only inside names, under `dir` or under `dir-aside`, where the swap had moved it for a moment.
        expect(listed.filter((path) => !/^dir(-aside)?\/inside-\d+\.txt$/.test(path))).toEqual([]);
      }
    } finally {
      expect(await swapper.stop()).toBeGreaterThan(0);
    }
    // Every round ended in a listing or a refusal; how many of each depends on the machine's load.
    expect([...seen.values()].reduce((sum, count) => sum + count, 0)).toBe(ROUNDS);
  }, 120_000);
});

/** `ws/dir` with WIDE folders of one file each: the walk waits for the kernel to list them, many times. */
const WIDE = 200;

function makeWideDir(places: Places): void {
  for (let index = 0; index < WIDE; index += 1) {
    const folder = join(places.ws, "dir", `f${String(index).padStart(3, "0")}`);
    mkdirSync(folder);
    writeFileSync(join(folder, "in.txt"), "");
  }
}

/** One glob through chapter 2's tool, with `meanwhile` run at the first turn of the event loop after it started. */
async function globWhile(places: Places, pattern: string, meanwhile: () => void): Promise<ToolResult> {
  const tools = new ToolRegistry();
  const fileSystem: WorkspaceFileSystem = new NodeWorkspaceFileSystem();
  tools.register(createGlobTool(fileSystem));
  const prepared = tools.prepare(toolCall("c1", "glob", JSON.stringify({ pattern })));
  if (prepared.error !== undefined) throw new Error(prepared.error.content);
  let ran = false;
  // Nothing before the walk waits for the event loop: this runs inside the walk, while it reads its first folder.
  setImmediate(() => {
    meanwhile();
    ran = true;
  });
  const result = await tools.invoke(prepared, { workspace: places.ws, identity: "user" });
  expect(ran).toBe(true);
  return result;
}

describe.skipIf(process.platform === "win32")("a folder that vanishes while glob reads it", () => {
  // The folder being read is held open: moved out of the workspace, it is found outside before its names are used.
  it("a folder moved out of the workspace while glob reads it is Error [path_escape], and nothing in it is listed", async () => {
    const places = makePlaces();
    makeWideDir(places);
    const result = await globWhile(places, "dir/**/*.txt", () => {
      renameSync(join(places.ws, "dir"), join(places.outside, "moved"));
    });
    expect(result).toEqual({
      content: "Error [path_escape]: Path escapes workspace: dir/**/*.txt",
      isError: true,
      errorCode: "path_escape",
    });
  });

  it("a folder removed while glob reads it is Error [path_escape], not a listing of what was left", async () => {
    const places = makePlaces();
    makeWideDir(places);
    const result = await globWhile(places, "dir/**/*.txt", () => {
      rmSync(join(places.ws, "dir"), { recursive: true });
    });
    expect(result).toEqual({
      content: "Error [path_escape]: Path escapes workspace: dir/**/*.txt",
      isError: true,
      errorCode: "path_escape",
    });
  });

  it("without the move the same globs list every file, so the walk really was inside dir when it moved", async () => {
    const places = makePlaces();
    makeWideDir(places);
    const result = await globWhile(places, "dir/**/*.txt", () => undefined);
    expect(result.content.split("\n")).toHaveLength(WIDE);
  });
});
