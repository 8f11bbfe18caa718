import { execFileSync } from "node:child_process";
import fs from "node:fs";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { syncBuiltinESMExports } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { NodeWorkspaceFileSystem } from "../src/adapters/filesystem.js";
import { toolCall, userMessage } from "../src/core/messages.js";
import { ToolRegistry, toolSuccess, type ToolContext, type ToolResult } from "../src/core/tools.js";
import { createChapterTwoTools } from "../src/features/builtin-tools.js";
import {
  ArtifactConflictError,
  CompactionError,
  CompactionManager,
  MAX_TRANSCRIPT_BYTES,
  type HistorySummarizer,
} from "../src/features/compaction.js";
import { TodoTracker } from "../src/features/todos.js";
import { FakeCommandRunner } from "./support/fakes.js";

// Issue 34 E1's nearest variations, tried as an attacker who writes the model's replies: every result whose text the
// model chooses, made as large in UTF-8 as its bound allows (three bytes a unit, `$(…)` in it), stays far under the
// 30,000-byte threshold, and a reply of 32 of the largest beside 224 refused calls saves nothing to disk.

let ws: string;
beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), "round4-artifacts-")));
});
afterEach(() => {
  rmSync(ws, { recursive: true, force: true });
});

const WIDE = "\uffff"; // three UTF-8 bytes in one UTF-16 unit: the most bytes a unit-counted cut lets through
const SHELL = "$(touch pwned)`id`;";
const noSummary: HistorySummarizer = {
  summarize: () => Promise.reject(new Error("no summary in this test")),
};

function registry(): ToolRegistry {
  const tools = createChapterTwoTools(new FakeCommandRunner(), new NodeWorkspaceFileSystem());
  tools.register(new TodoTracker().toolDefinition);
  return tools;
}

/** The result the loop hands the processors for one call: prepare's error, or the handler's result. */
async function run(tools: ToolRegistry, name: string, args: unknown): Promise<ToolResult> {
  const prepared = tools.prepare(toolCall("call_1", name, JSON.stringify(args)));
  if (prepared.error !== undefined) return prepared.error;
  const context: ToolContext = { workspace: ws, identity: "round4" };
  return tools.invoke(prepared, context);
}

const bytes = (result: ToolResult): number => Buffer.byteLength(result.content, "utf8");
const manyKeys = Object.fromEntries(
  Array.from({ length: 2_000 }, (_, index) => [`${SHELL}${WIDE.repeat(40)}${index}`, 1]),
);
const longPath = `${SHELL}${WIDE.repeat(20_000)}`;

describe("every result the model's text can fill is bounded far below what chapter 8 saves", () => {
  it.each([
    [
      "unknown_tool, a 30,000-unit name of wide characters",
      async (tools: ToolRegistry) => run(tools, `${SHELL}${WIDE.repeat(30_000)}`, {}),
    ],
    [
      "invalid_arguments, 2,000 unknown keys of wide characters",
      async (tools: ToolRegistry) => run(tools, "read_file", { path: "a", ...manyKeys }),
    ],
    [
      "invalid_arguments, todo_write's 2,000 unknown keys in one item",
      async (tools: ToolRegistry) =>
        run(tools, "todo_write", { todos: [{ content: "a", status: "pending", ...manyKeys }] }),
    ],
    [
      "file_not_found, a 20,000-unit path of wide characters",
      async (tools: ToolRegistry) => run(tools, "read_file", { path: longPath }),
    ],
    [
      "write_file's error or success, a 20,000-unit path",
      async (tools: ToolRegistry) => run(tools, "write_file", { path: longPath, content: "x" }),
    ],
    [
      "glob, a 20,000-unit pattern of wide characters",
      async (tools: ToolRegistry) => run(tools, "glob", { pattern: longPath }),
    ],
    [
      "todo_write, a list of wide characters just over its bound",
      async (tools: ToolRegistry) =>
        run(tools, "todo_write", { todos: [{ content: WIDE.repeat(683), status: "pending" }] }),
    ],
    [
      "todo_write, lone surrogates at its bound",
      async (tools: ToolRegistry) =>
        run(tools, "todo_write", { todos: [{ content: "\ud800".repeat(681), status: "pending" }] }),
    ],
  ])("%s: at most 4,096 bytes", async (_name, make) => {
    const result = await make(registry());
    expect(bytes(result)).toBeLessThanOrEqual(4_096);
  });

  it("a reply of 32 of the largest such results and 224 refused calls saves no file", async () => {
    const tools = registry();
    const largest = await run(tools, "read_file", { path: "a", ...manyKeys });
    const refused =
      "Error [tool_call_limit]: At most 32 tool calls run per reply; this one did not run. Call it again in the next turn.";
    const results: ToolResult[] = [
      ...Array.from({ length: 32 }, () => largest),
      ...Array.from({ length: 224 }, () => ({ content: refused, isError: true, errorCode: "tool_call_limit" })),
    ];
    const manager = new CompactionManager({ workspace: ws, summarizer: noSummary });
    const outcome = await manager.compactToolResults(results);
    expect(outcome.artifacts).toEqual([]);
    expect(readdirSync(ws)).toEqual([]);
  });
});

// D4's nearest variation: the runtime's folder was there before this run (a run before the ignore file existed, or a
// repository that tracks a file in it), so no folder is made and, before this fix, no ignore file was written either.
describe("an .agent_tutorial that was there before", () => {
  const git = (...args: string[]): string =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.invalid", ...args], {
      cwd: ws,
      encoding: "utf8",
    });
  const state = (): string => join(ws, ".agent_tutorial");
  const manager = (id: () => string = () => "a"): CompactionManager =>
    new CompactionManager({ workspace: ws, summarizer: noSummary, persistThresholdBytes: 10, idGenerator: id });

  it("gets the .gitignore too, so git status offers none of the artifacts (an empty folder, a tracked file in it)", async () => {
    git("init", "--quiet");
    mkdirSync(join(state(), "artifacts"), { recursive: true });
    writeFileSync(join(state(), "artifacts", ".keep"), "");
    git("add", ".agent_tutorial/artifacts/.keep");
    git("commit", "--quiet", "-m", "theirs");
    await manager().compactToolResults([toolSuccess("secret=hunter2 in a long enough result")]);
    expect(readFileSync(join(state(), ".gitignore"), "utf8")).toBe("*\n");
    expect(git("status", "--porcelain", "--untracked-files=all")).toBe("");
    rmSync(state(), { recursive: true });
    git("rm", "--quiet", "-r", "--cached", ".agent_tutorial");
    git("commit", "--quiet", "-m", "gone");
    mkdirSync(state());
    await manager(() => "b").compactToolResults([toolSuccess("secret=hunter2 in a long enough result")]);
    expect(git("status", "--porcelain", "--untracked-files=all")).toBe("");
  });

  it("keeps a .gitignore someone already put there, byte for byte", async () => {
    mkdirSync(state());
    writeFileSync(join(state(), ".gitignore"), "*\n!.gitignore\n");
    await manager().compactToolResults([toolSuccess("a result of some length")]);
    expect(readFileSync(join(state(), ".gitignore"), "utf8")).toBe("*\n!.gitignore\n");
    expect(readdirSync(state()).sort()).toEqual([".gitignore", "artifacts"]);
  });

  it("is left as it was when the batch fails: the .gitignore this batch added is removed again", async () => {
    mkdirSync(state());
    writeFileSync(join(state(), "notes.txt"), "mine");
    const error = await manager()
      .compactToolResults([toolSuccess("first result, long"), toolSuccess("second result, long")])
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ArtifactConflictError);
    if (process.platform === "linux") expect(readdirSync(state()).sort()).toEqual(["notes.txt"]);
  });
});

// D5's nearest variation in chapter 8: the transcript writes every `$` and backtick as a six-byte escape (027fbfc), so
// a reply of them is six times larger on the way to disk. One `todo_write` of 30 MB (refused by the tracker, kept in
// the history) made a 188 MB transcript and peaked at 1,179 MiB; 10.6 MB of `$` (a 64 MiB transcript) at 814 MiB.
describe("one huge todo_write of $ or backticks in chapter 8", () => {
  const probe = fileURLToPath(new URL("./support/round4-transcript-probe.ts", import.meta.url));
  const MiB = 1024 * 1024;
  const runProbe = (...args: string[]): { maxRssBytes: number; outcome: { ended: string; artifacts: number[] } } =>
    JSON.parse(
      execFileSync(process.execPath, ["--import", "tsx", probe, ...args], { encoding: "utf8", timeout: 100_000 }),
    ) as { maxRssBytes: number; outcome: { ended: string; artifacts: number[] } };

  it.each([["$"], ["`"]])(
    "30 MB of %s peaks below 650 MiB in its own process: its transcript is refused before it is made",
    (character) => {
      const run = runProbe("write", "30", character);
      expect(run.maxRssBytes).toBeLessThan(650 * MiB);
      expect(run.outcome).toEqual({
        ended: `Request history processing failed: transcript would be 188744188 bytes, over ${MAX_TRANSCRIPT_BYTES}`,
        artifacts: [],
      });
    },
    120_000,
  );

  it("10.6 MB of $, the most whose transcript fits in its bound, peaks below 650 MiB and is saved whole", () => {
    const run = runProbe("write", "10.6", "$");
    expect(run.maxRssBytes).toBeLessThan(650 * MiB);
    expect(run.outcome).toEqual({ ended: "done", artifacts: [66_689_938] });
  }, 120_000);
});

// The same bound in this process, at its edge: the refusal comes before any file, and a transcript of exactly
// MAX_TRANSCRIPT_BYTES is written whole (6 bytes for each $, 1 for each a, 29 for {"content":"","role":"user"} and \n).
describe("a transcript at its bound of 64 MiB", () => {
  const history = (over: number): ReturnType<typeof userMessage>[] => [
    userMessage(`${"$".repeat(11_184_805)}${"a".repeat(5 + over)}`),
  ];
  const compact = (over: number, asked: unknown[]): Promise<unknown> =>
    new CompactionManager({
      workspace: ws,
      summarizer: { summarize: (input) => (asked.push(input), Promise.reject(new Error("no summary in this test"))) },
    })
      .compactProactively(history(over))
      .catch((caught: unknown) => caught);

  it("one byte over it is refused before any file is made, and no summary is asked for", async () => {
    const asked: unknown[] = [];
    const error = await compact(1, asked);
    expect(error).toBeInstanceOf(CompactionError);
    expect((error as Error).message).toBe(
      `transcript would be ${MAX_TRANSCRIPT_BYTES + 1} bytes, over ${MAX_TRANSCRIPT_BYTES}`,
    );
    expect(readdirSync(ws)).toEqual([]);
    expect(asked).toEqual([]);
  });

  it("exactly it is written whole, each $ as its escape, before the summary is asked for", async () => {
    const asked: unknown[] = [];
    expect(await compact(0, asked)).toEqual(new Error("no summary in this test"));
    expect(asked).toHaveLength(1);
    const folder = join(ws, ".agent_tutorial", "artifacts");
    const [name, ...others] = readdirSync(folder);
    expect(others).toEqual([]);
    const file = readFileSync(join(folder, name as string));
    expect(file.byteLength).toBe(MAX_TRANSCRIPT_BYTES);
    expect(file.subarray(0, 18).toString("latin1")).toBe('{"content":"\\u0024');
    expect(file.subarray(-22).toString("latin1")).toBe('aaaaa","role":"user"}\n');
  });
});

// Item 10's nearest variation: the disk fills (or turns read-only) while the runtime writes its own .gitignore, the
// first file of a first batch, in a folder it just made or in one that was there before.
describe("a disk that fills while the .gitignore is written", () => {
  afterEach(() => {
    vi.restoreAllMocks();
    syncBuiltinESMExports();
  });
  const failIgnoreWrite = (code: string, first: () => void = () => undefined): void => {
    const real = fs.writeSync;
    vi.spyOn(fs, "writeSync").mockImplementation((fd: number, data: unknown, ...rest: unknown[]) => {
      if (data === "*\n") {
        first();
        throw Object.assign(new Error(code), { code });
      }
      return (real as (...args: unknown[]) => number)(fd, data, ...rest);
    });
    syncBuiltinESMExports();
  };
  const batch = (): Promise<unknown> =>
    new CompactionManager({ workspace: ws, summarizer: noSummary, persistThresholdBytes: 10 })
      .compactToolResults([toolSuccess("a result of some length")])
      .catch((caught: unknown) => caught);

  it.each([["ENOSPC"], ["EROFS"]])("%s leaves no .agent_tutorial when the batch made it", async (code) => {
    failIgnoreWrite(code);
    expect(await batch()).toBeInstanceOf(Error);
    if (process.platform === "linux") expect(readdirSync(ws)).toEqual([]);
  });

  it.each([["ENOSPC"], ["EROFS"]])("%s leaves a .agent_tutorial that was there before as it was", async (code) => {
    mkdirSync(join(ws, ".agent_tutorial"));
    failIgnoreWrite(code);
    expect(await batch()).toBeInstanceOf(Error);
    expect(readdirSync(join(ws, ".agent_tutorial"))).toEqual([]);
  });

  const ignoreFile = (): string => join(ws, ".agent_tutorial", ".gitignore");
  /** The error code the batch's error carries, itself or as a cause. */
  const codeOf = (error: unknown): unknown => {
    for (let at: unknown = error; at instanceof Error; at = at.cause) {
      const { code } = at as NodeJS.ErrnoException;
      if (code !== undefined) return code;
    }
    return undefined;
  };

  it("a file put in the .gitignore's place before the write fails is someone else's: it is left, the disk's error is the cause", async () => {
    mkdirSync(join(ws, ".agent_tutorial"));
    failIgnoreWrite("ENOSPC", () => {
      writeFileSync(join(ws, "theirs"), "theirs\n");
      renameSync(join(ws, "theirs"), ignoreFile());
    });
    expect(codeOf(await batch())).toBe("ENOSPC");
    expect(readFileSync(ignoreFile(), "utf8")).toBe("theirs\n");
  });

  it("a .gitignore already gone when the write fails adds no error of its own: the disk's is the cause", async () => {
    failIgnoreWrite("ENOSPC", () => rmSync(ignoreFile()));
    expect(codeOf(await batch())).toBe("ENOSPC");
    if (process.platform === "linux") expect(readdirSync(ws)).toEqual([]);
  });

  it("an fstat that fails on the new .gitignore is the batch's cause, not an error of the cleanup after it", async () => {
    mkdirSync(join(ws, ".agent_tutorial"));
    let ignoreFd: number | undefined;
    const realOpen = fs.openSync;
    vi.spyOn(fs, "openSync").mockImplementation((path: fs.PathLike, ...rest: unknown[]) => {
      const fd = (realOpen as (...args: unknown[]) => number)(path, ...rest);
      if (String(path).endsWith("/.gitignore")) ignoreFd = fd;
      return fd;
    });
    const realFstat = fs.fstatSync;
    vi.spyOn(fs, "fstatSync").mockImplementation(((fd: number, ...rest: unknown[]) => {
      if (fd === ignoreFd) throw Object.assign(new Error("EIO"), { code: "EIO" });
      return (realFstat as (...args: unknown[]) => unknown)(fd, ...rest);
    }) as typeof fs.fstatSync);
    syncBuiltinESMExports();
    expect(codeOf(await batch())).toBe("EIO");
  });
});
