import { execFileSync } from "node:child_process";
import { lstat, mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { MAX_FILE_BYTES } from "../src/adapters/filesystem.js";
import { buildAgent } from "../src/bootstrap.js";
import {
  FileNotFoundError,
  FileSystemOperationError,
  InvalidFilePathError,
  InvalidUtf8Error,
  TextNotFoundError,
  WorkspacePathError,
  type WorkspaceFileSystem,
} from "../src/core/filesystem.js";
import { validateToolPairing, type ChatMessage, type ToolCall } from "../src/core/messages.js";
import { P02 } from "../src/core/profiles.js";
import type { ToolResult } from "../src/core/tools.js";
import {
  createChapterTwoTools,
  createEditFileTool,
  createGlobTool,
  createReadFileTool,
  createWriteFileTool,
  editFileInputSchema,
  globInputSchema,
  readFileInputSchema,
  writeFileInputSchema,
} from "../src/features/builtin-tools.js";
import { CountingApproval, FakeCommandRunner, FakeFileSystem } from "./support/fakes.js";
import { BOOK_DESCRIBE, FILE_TOOLS } from "./support/file-tools.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";

// File symlinks and FIFOs need POSIX (or extra privileges on Windows); folder links are made as junctions,
// which Windows allows without privileges and POSIX ignores as a type, so those tests run everywhere.
const posixOnly = it.skipIf(process.platform === "win32");
const SECRET = "top secret\n";
const CAP_NOTE = "[first 1000 matches shown; narrow the pattern]";

let root: string;
let workspace: string;
let outside: string;
let runner: FakeCommandRunner;
let approval: CountingApproval;

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "ch02-files-")));
  workspace = join(root, "ws");
  outside = join(root, "outside");
  await mkdir(workspace);
  await mkdir(outside);
  await writeFile(join(outside, "secret.txt"), SECRET);
  runner = new FakeCommandRunner();
  approval = new CountingApproval(true);
});

afterEach(async () => {
  // Chapter 2 asks nobody about file tools, and no file call ever reaches PowerShell.
  expect(approval.requests).toEqual([]);
  expect(runner.calls).toEqual([]);
  await rm(root, { recursive: true, force: true });
});

interface Turn {
  /** What each call gave back, in the order of the calls. */
  readonly results: ToolResult[];
  readonly history: readonly ChatMessage[];
  readonly model: ScriptedModel;
}

/**
 * One assistant message asking for `calls`, run by chapter 2's real agent (`buildAgent(P02, …)`: the loop,
 * the registry, the four tools and, unless another is given, the real file system), then a final answer.
 * Checks the pairing every time: each call answered once, in order, by the result the tool returned.
 */
async function turn(calls: readonly ToolCall[], fileSystem?: WorkspaceFileSystem): Promise<Turn> {
  const model = new ScriptedModel([toolTurn(...calls), textTurn("done")]);
  const seen: [string, ToolResult][] = [];
  const agent = buildAgent(P02, {
    model,
    workspace,
    commandRunner: runner,
    approvalProvider: approval,
    ...(fileSystem === undefined ? {} : { fileSystem }),
    onEvent: (event) => {
      if (event.type === "tool_result") seen.push([event.call.id, event.result]);
    },
  });
  const result = await agent.run("Use the file tools.");
  expect(result.finalText).toBe("done");
  expect(() => validateToolPairing(result.history)).not.toThrow();
  expect(seen.map(([id]) => id)).toEqual(calls.map((each) => each.id));
  expect(toolMessages(result.history)).toEqual(seen.map(([id, each]) => [id, each.content]));
  return { results: seen.map(([, each]) => each), history: result.history, model };
}

/** One call of `name` with `args` (an object, or JSON text sent verbatim) through the real agent. */
async function run(name: string, args: unknown, fileSystem?: WorkspaceFileSystem): Promise<ToolResult> {
  const { results } = await turn([call("call_1", name, args)], fileSystem);
  return results[0] as ToolResult;
}

function ok(content: string): ToolResult {
  return { content, isError: false };
}

function failed(code: string, message: string): ToolResult {
  return { content: `Error [${code}]: ${message}`, isError: true, errorCode: code };
}

/** Everything a leak could change: what sits next to the workspace, what the outside folder holds, the secret. */
async function outsideState(): Promise<{ root: string[]; outside: string[]; secret: string }> {
  return {
    root: (await readdir(root)).sort(),
    outside: (await readdir(outside)).sort(),
    secret: await readFile(join(outside, "secret.txt"), "utf8"),
  };
}

const UNTOUCHED = { root: ["outside", "ws"], outside: ["secret.txt"], secret: SECRET };

async function put(relative: string, content: string | Buffer): Promise<void> {
  const target = join(workspace, relative);
  await mkdir(join(target, ".."), { recursive: true });
  await writeFile(target, content);
}

const bytesOf = (relative: string): Promise<Buffer> => readFile(join(workspace, relative));

/** A file of `size` zero bytes that costs no disk (sparse where the file system allows). */
async function sized(relative: string, size: number): Promise<void> {
  await put(relative, "");
  await truncate(join(workspace, relative), size);
}

/** The paths the book refuses (chapter 2, "safePath"), plus their closest relatives; all are path_escape. */
const REFUSED_PATHS = [
  "../secret.txt",
  "nested/../secret.txt",
  "C:\\secret.txt",
  "/etc/passwd",
  "NUL.txt",
  "nested/CON.log",
  "file:stream",
  "trailing.",
  "trailing ",
  "../outside/secret.txt",
  "a/../../outside/secret.txt",
  "..",
  "C:x",
  "\\\\server\\share\\x",
  "lpt9",
  "com1.txt",
  "a<b",
  "what?.txt",
  "a\u0001b",
  "a\u0000b",
];

describe("the book's four-turn example, through the real loop", () => {
  it("write → edit → read → glob: each tool message is exactly the book's, and demo/note.txt holds gamma", async () => {
    const model = new ScriptedModel([
      toolTurn(call("call_1", "write_file", '{"path":"demo/note.txt","content":"alpha"}')),
      toolTurn(call("call_2", "edit_file", '{"path":"demo/note.txt","old_text":"alpha","new_text":"gamma"}')),
      toolTurn(call("call_3", "read_file", '{"path":"demo/note.txt"}')),
      toolTurn(call("call_4", "glob", '{"pattern":"demo/*.txt"}')),
      textTurn("demo/note.txt now holds gamma."),
    ]);
    const agent = buildAgent(P02, { model, workspace, commandRunner: runner, approvalProvider: approval });

    const result = await agent.run(
      "只使用文件工具：写入 demo/note.txt，内容为 alpha；把第一处 alpha 改成 gamma；读取文件并用 glob 列出 demo/*.txt",
    );

    expect(result.finalText).toBe("demo/note.txt now holds gamma.");
    expect(result.turns).toBe(5);
    expect(toolMessages(result.history)).toEqual([
      ["call_1", "Wrote 5 UTF-8 bytes to demo/note.txt"],
      ["call_2", "Edited demo/note.txt"],
      ["call_3", "gamma"],
      ["call_4", "demo/note.txt"],
    ]);
    // One step per turn: each request ends with the result of the call before it.
    expect(model.requests.map((request) => request.messages.at(-1))).toEqual([
      { role: "user", content: result.history[0]?.content },
      { role: "tool", toolCallId: "call_1", content: "Wrote 5 UTF-8 bytes to demo/note.txt" },
      { role: "tool", toolCallId: "call_2", content: "Edited demo/note.txt" },
      { role: "tool", toolCallId: "call_3", content: "gamma" },
      { role: "tool", toolCallId: "call_4", content: "demo/note.txt" },
    ]);
    expect(() => validateToolPairing(result.history)).not.toThrow();
    expect(await readFile(join(workspace, "demo", "note.txt"), "utf8")).toBe("gamma");
    expect(await readdir(workspace)).toEqual(["demo"]);
    expect(await readdir(join(workspace, "demo"))).toEqual(["note.txt"]);
  });

  it("a read of ../secret.txt is the book's paired error result, and the secret next to the workspace stays unread", async () => {
    await writeFile(join(root, "secret.txt"), SECRET);
    const { results, history } = await turn([call("call_9", "read_file", '{"path":"../secret.txt"}')]);
    expect(results).toEqual([failed("path_escape", "Path escapes workspace: ../secret.txt")]);
    expect(toolMessages(history)).toEqual([["call_9", "Error [path_escape]: Path escapes workspace: ../secret.txt"]]);
    expect(JSON.stringify(history)).not.toContain("top secret");
  });
});

describe("write_file", () => {
  it("returns the UTF-8 bytes written, not the characters: 你好 is 6", async () => {
    expect(await run("write_file", { path: "note.txt", content: "你好" })).toEqual(
      ok("Wrote 6 UTF-8 bytes to note.txt"),
    );
    expect(await bytesOf("note.txt")).toEqual(Buffer.from([0xe4, 0xbd, 0xa0, 0xe5, 0xa5, 0xbd]));
  });

  it.each<[string, number]>([
    ["alpha", 5],
    ["café", 5],
    ["🙂", 4],
    ["", 0],
  ])("writing %j reports %i bytes, exactly what is on disk", async (content, bytes) => {
    expect(await run("write_file", { path: "n.txt", content })).toEqual(ok(`Wrote ${bytes} UTF-8 bytes to n.txt`));
    expect((await bytesOf("n.txt")).byteLength).toBe(bytes);
    expect(await readFile(join(workspace, "n.txt"), "utf8")).toBe(content);
  });

  it("creates the missing parent folders inside the workspace", async () => {
    expect(await run("write_file", { path: "demo/sub/note.txt", content: "alpha" })).toEqual(
      ok("Wrote 5 UTF-8 bytes to demo/sub/note.txt"),
    );
    expect(await readFile(join(workspace, "demo", "sub", "note.txt"), "utf8")).toBe("alpha");
    expect(await outsideState()).toEqual(UNTOUCHED);
  });

  it("overwrites an existing file, replacing all of its old content, and an empty string clears it", async () => {
    await put("a.txt", "a much longer original text\n");
    expect(await run("write_file", { path: "a.txt", content: "new" })).toEqual(ok("Wrote 3 UTF-8 bytes to a.txt"));
    expect(await readFile(join(workspace, "a.txt"), "utf8")).toBe("new");
    expect(await run("write_file", { path: "a.txt", content: "" })).toEqual(ok("Wrote 0 UTF-8 bytes to a.txt"));
    expect(await bytesOf("a.txt")).toEqual(Buffer.alloc(0));
  });

  it("writes the text as given: CRLF, a BOM and a NUL stay as they are", async () => {
    const content = "\uFEFFone\r\ntwo\u0000\n";
    expect(await run("write_file", { path: "raw.txt", content })).toEqual(ok("Wrote 13 UTF-8 bytes to raw.txt"));
    expect(await bytesOf("raw.txt")).toEqual(Buffer.from(content, "utf8"));
  });

  it("a folder at the path is invalid_path: Path is a directory", async () => {
    await mkdir(join(workspace, "src"));
    expect(await run("write_file", { path: "src", content: "x" })).toEqual(
      failed("invalid_path", "Path is a directory: src"),
    );
    expect(await readdir(join(workspace, "src"))).toEqual([]);
  });

  it("a file where a parent folder should be is invalid_path, and the file is kept", async () => {
    await put("a.txt", "keep");
    expect(await run("write_file", { path: "a.txt/b.txt", content: "x" })).toEqual(
      failed("invalid_path", "A parent of the path is not a directory: a.txt/b.txt"),
    );
    expect(await readFile(join(workspace, "a.txt"), "utf8")).toBe("keep");
  });

  posixOnly("a named pipe at the path is invalid_path instead of a wait for a reader", async () => {
    execFileSync("mkfifo", [join(workspace, "pipe")]);
    expect(await run("write_file", { path: "pipe", content: "x" })).toEqual(
      failed("invalid_path", "Path is not a regular file: pipe"),
    );
  });

  it.each(REFUSED_PATHS)("refuses %j as path_escape and creates nothing anywhere", async (path) => {
    expect(await run("write_file", { path, content: "leak" })).toEqual(
      failed("path_escape", `Path escapes workspace: ${path}`),
    );
    expect(await readdir(workspace)).toEqual([]);
    expect(await outsideState()).toEqual(UNTOUCHED);
  });

  it("refuses an absolute path even when it names a place inside the workspace", async () => {
    for (const path of [join(outside, "abs.txt"), join(workspace, "abs.txt")]) {
      expect(await run("write_file", { path, content: "x" })).toEqual(
        failed("path_escape", `Path escapes workspace: ${path}`),
      );
    }
    expect(await readdir(workspace)).toEqual([]);
    expect(await outsideState()).toEqual(UNTOUCHED);
  });

  it("refuses a path through a linked folder that points outside, however deep the missing part", async () => {
    await symlink(outside, join(workspace, "escape"), "junction");
    for (const path of ["escape/x.txt", "escape/new/deeper/x.txt", "escape/secret.txt"]) {
      expect(await run("write_file", { path, content: "leak" })).toEqual(
        failed("path_escape", `Path escapes workspace: ${path}`),
      );
    }
    expect(await outsideState()).toEqual(UNTOUCHED);
  });

  posixOnly("refuses a final-component link to an outside file and leaves that file as it was", async () => {
    await symlink(join(outside, "secret.txt"), join(workspace, "link.txt"));
    expect(await run("write_file", { path: "link.txt", content: "overwritten" })).toEqual(
      failed("path_escape", "Path escapes workspace: link.txt"),
    );
    expect(await outsideState()).toEqual(UNTOUCHED);
  });

  posixOnly("refuses a dangling link, whose target would be created wherever it points", async () => {
    await symlink(join(outside, "created.txt"), join(workspace, "dangling.txt"));
    expect(await run("write_file", { path: "dangling.txt", content: "leak" })).toEqual(
      failed("path_escape", "Path escapes workspace: dangling.txt"),
    );
    expect(await outsideState()).toEqual(UNTOUCHED);
  });

  it("follows a linked folder that stays inside the workspace", async () => {
    await mkdir(join(workspace, "real"));
    await symlink(join(workspace, "real"), join(workspace, "alias"), "junction");
    expect(await run("write_file", { path: "alias/n.txt", content: "in" })).toEqual(
      ok("Wrote 2 UTF-8 bytes to alias/n.txt"),
    );
    expect(await readFile(join(workspace, "real", "n.txt"), "utf8")).toBe("in");
  });

  it("quotes a huge refused path cut to 200 characters, so it cannot flood the context", async () => {
    const path = `../${"a".repeat(5_000)}`;
    expect(await run("write_file", { path, content: "x" })).toEqual(
      failed("path_escape", `Path escapes workspace: ${path.slice(0, 200)}…`),
    );
  });
});

describe("read_file", () => {
  it("without limit returns the whole file, its final line break included", async () => {
    await put("three.txt", "one\ntwo\nthree\n");
    expect(await run("read_file", { path: "three.txt" })).toEqual(ok("one\ntwo\nthree\n"));
  });

  it("a three-line file with limit 2 is the first two lines and ... (1 more lines), as the book shows", async () => {
    await put("three.txt", "one\ntwo\nthree\n");
    await put("no-final-break.txt", "one\ntwo\nthree");
    expect(await run("read_file", { path: "three.txt", limit: 2 })).toEqual(ok("one\ntwo\n... (1 more lines)"));
    expect(await run("read_file", { path: "no-final-break.txt", limit: 2 })).toEqual(
      ok("one\ntwo\n... (1 more lines)"),
    );
  });

  it("a limit that covers every line returns the whole file unchanged, with no note", async () => {
    await put("three.txt", "one\ntwo\nthree\n");
    expect(await run("read_file", { path: "three.txt", limit: 3 })).toEqual(ok("one\ntwo\nthree\n"));
    expect(await run("read_file", { path: "three.txt", limit: 1_000_000 })).toEqual(ok("one\ntwo\nthree\n"));
  });

  it("counts the remaining lines exactly, a final line break not being a line of its own", async () => {
    await put("many.txt", Array.from({ length: 5_000 }, (_, i) => `line ${i + 1}`).join("\n") + "\n");
    await put("blank-last.txt", "a\nb\n\n");
    expect(await run("read_file", { path: "many.txt", limit: 3 })).toEqual(
      ok("line 1\nline 2\nline 3\n... (4997 more lines)"),
    );
    expect(await run("read_file", { path: "blank-last.txt", limit: 2 })).toEqual(ok("a\nb\n... (1 more lines)"));
  });

  it("keeps CRLF line endings, with and without a limit", async () => {
    await put("crlf.txt", "first\r\nsecond\r\n");
    expect(await run("read_file", { path: "crlf.txt" })).toEqual(ok("first\r\nsecond\r\n"));
    expect(await run("read_file", { path: "crlf.txt", limit: 1 })).toEqual(ok("first\r\n... (1 more lines)"));
  });

  it("an empty file reads as the empty text", async () => {
    await put("empty.txt", "");
    expect(await run("read_file", { path: "empty.txt" })).toEqual(ok(""));
  });

  it("a UTF-8 byte-order mark is not part of the text read", async () => {
    await put("bom.txt", Buffer.from([0xef, 0xbb, 0xbf, 0x68, 0x69]));
    expect(await run("read_file", { path: "bom.txt" })).toEqual(ok("hi"));
  });

  it.each<[string, number[]]>([
    ["a byte that never starts a character", [0x41, 0xff, 0x42]],
    ["a cut-off three-byte character", [0x41, 0xe4, 0xbd]],
    ["an overlong encoding of /", [0xc0, 0xaf]],
    ["an encoded UTF-16 surrogate", [0xed, 0xa0, 0x80]],
    ["a Latin-1 é", [0x63, 0x61, 0x66, 0xe9]],
  ])("%s is invalid_utf8, never a text with U+FFFD in it", async (_name, bytes) => {
    await put("bin.dat", Buffer.from(bytes));
    const result = await run("read_file", { path: "bin.dat" });
    expect(result).toEqual(failed("invalid_utf8", "File is not valid UTF-8: bin.dat"));
    expect(result.content).not.toContain("\uFFFD");
  });

  it("a U+FFFD that really is in the file is read back as it is", async () => {
    await put("replacement.txt", Buffer.from([0x61, 0xef, 0xbf, 0xbd, 0x62]));
    expect(await run("read_file", { path: "replacement.txt" })).toEqual(ok("a\uFFFDb"));
  });

  it("a missing file is file_not_found, also below a missing or a file parent", async () => {
    await put("a.txt", "a");
    for (const path of ["missing.txt", "no/such/file.txt", "a.txt/b.txt"]) {
      expect(await run("read_file", { path })).toEqual(failed("file_not_found", `File not found: ${path}`));
    }
  });

  it("a folder is invalid_path: Path is a directory", async () => {
    await mkdir(join(workspace, "src"));
    expect(await run("read_file", { path: "src" })).toEqual(failed("invalid_path", "Path is a directory: src"));
  });

  posixOnly("a named pipe is invalid_path instead of a wait for a writer", async () => {
    execFileSync("mkfifo", [join(workspace, "pipe")]);
    expect(await run("read_file", { path: "pipe" })).toEqual(
      failed("invalid_path", "Path is not a regular file: pipe"),
    );
  });

  it("a file over MAX_FILE_BYTES is refused as filesystem_error without being read", async () => {
    expect(MAX_FILE_BYTES).toBe(10 * 1024 * 1024);
    await sized("huge.txt", MAX_FILE_BYTES + 1);
    expect(await run("read_file", { path: "huge.txt", limit: 1 })).toEqual(
      failed(
        "filesystem_error",
        "Could not read file: huge.txt (the file is 10485761 bytes; at most 10485760 are read)",
      ),
    );
  });

  it.each(REFUSED_PATHS)("refuses %j as path_escape", async (path) => {
    expect(await run("read_file", { path })).toEqual(failed("path_escape", `Path escapes workspace: ${path}`));
  });

  it("refuses to read an outside file through a linked folder, and nothing of it reaches the model", async () => {
    await symlink(outside, join(workspace, "escape"), "junction");
    const { results, history } = await turn([
      call("c1", "read_file", { path: "escape/secret.txt" }),
      call("c2", "read_file", { path: "escape" }),
    ]);
    expect(results).toEqual([
      failed("path_escape", "Path escapes workspace: escape/secret.txt"),
      failed("path_escape", "Path escapes workspace: escape"),
    ]);
    expect(JSON.stringify(history)).not.toContain("top secret");
  });

  posixOnly("refuses to read an outside file through a final-component link", async () => {
    await symlink(join(outside, "secret.txt"), join(workspace, "link.txt"));
    expect(await run("read_file", { path: "link.txt" })).toEqual(
      failed("path_escape", "Path escapes workspace: link.txt"),
    );
  });
});

describe("read_file's strict input: refused before the file system is called", () => {
  it.each<[string, string]>([
    ['{"path":"note.txt","limit":"10"}', "limit: Invalid input: expected number, received string"],
    ['{"path":"note.txt","limit":0}', "limit: Too small: expected number to be >0"],
    ['{"path":"note.txt","limit":2.5}', "limit: Invalid input: expected int, received number"],
    ['{"path":"note.txt","limit":-1}', "limit: Too small: expected number to be >0"],
    ['{"path":"note.txt","limit":true}', "limit: Invalid input: expected number, received boolean"],
    ['{"path":"note.txt","encoding":"gbk"}', '(arguments): Unrecognized key: "encoding"'],
    ['{"path":"note.txt","offset":1}', '(arguments): Unrecognized key: "offset"'],
    ['{"path":""}', "path: Too small: expected string to have >=1 characters"],
    ["{}", "path: Invalid input: expected string, received undefined"],
  ])("%s is invalid_arguments and readFile is never called", async (args, problem) => {
    const fileSystem = new FakeFileSystem({ "note.txt": "one\ntwo\n" });
    expect(await run("read_file", args, fileSystem)).toEqual(
      failed("invalid_arguments", `Invalid arguments for read_file: ${problem}`),
    );
    expect(fileSystem.calls).toEqual([]);
  });

  it('{"path":"note.txt","limit":50} and {"path":"note.txt"} pass, and readFile gets the workspace first', async () => {
    const fileSystem = new FakeFileSystem({ "note.txt": "one\ntwo\n" });
    const { results } = await turn(
      [call("c1", "read_file", '{"path":"note.txt","limit":50}'), call("c2", "read_file", '{"path":"note.txt"}')],
      fileSystem,
    );
    expect(results).toEqual([ok("one\ntwo\n"), ok("one\ntwo\n")]);
    expect(fileSystem.calls).toEqual([
      ["readFile", workspace, "note.txt", 50],
      ["readFile", workspace, "note.txt", undefined],
    ]);
  });
});

describe("edit_file", () => {
  it("replaces only the first exact occurrence", async () => {
    await put("note.txt", "alpha beta alpha\n");
    expect(await run("edit_file", { path: "note.txt", old_text: "alpha", new_text: "gamma" })).toEqual(
      ok("Edited note.txt"),
    );
    expect(await readFile(join(workspace, "note.txt"), "utf8")).toBe("gamma beta alpha\n");
  });

  it("the same edit twice: the second is text_not_found and the file stays as the first left it", async () => {
    await put("note.txt", "alpha");
    const { results } = await turn([
      call("e1", "edit_file", { path: "note.txt", old_text: "alpha", new_text: "gamma" }),
      call("e2", "edit_file", { path: "note.txt", old_text: "alpha", new_text: "gamma" }),
    ]);
    expect(results).toEqual([ok("Edited note.txt"), failed("text_not_found", "Exact text not found in note.txt")]);
    expect(await bytesOf("note.txt")).toEqual(Buffer.from("gamma"));
  });

  it("text that is not there exactly is text_not_found, and not one byte of the file changes", async () => {
    const original = Buffer.from("const a = 1;\r\nconst b = 2;\r\n");
    await put("x.ts", original);
    for (const old_text of ["const  a", "CONST a", "const a = 1;\nconst", "a.= 1"]) {
      expect(await run("edit_file", { path: "x.ts", old_text, new_text: "let a" })).toEqual(
        failed("text_not_found", "Exact text not found in x.ts"),
      );
    }
    expect(await bytesOf("x.ts")).toEqual(original);
  });

  it("keeps every CRLF outside the match byte for byte, and can match across one", async () => {
    await put("crlf.txt", "line1\r\nalpha\r\nline3\r\n");
    expect(await run("edit_file", { path: "crlf.txt", old_text: "alpha", new_text: "gamma" })).toEqual(
      ok("Edited crlf.txt"),
    );
    expect(await bytesOf("crlf.txt")).toEqual(Buffer.from("line1\r\ngamma\r\nline3\r\n"));
    expect(await run("edit_file", { path: "crlf.txt", old_text: "gamma\r\nline3", new_text: "g\nl3" })).toEqual(
      ok("Edited crlf.txt"),
    );
    expect(await bytesOf("crlf.txt")).toEqual(Buffer.from("line1\r\ng\nl3\r\n"));
  });

  it("keeps a UTF-8 byte-order mark", async () => {
    await put("bom.txt", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("alpha\n")]));
    expect(await run("edit_file", { path: "bom.txt", old_text: "alpha", new_text: "gamma" })).toEqual(
      ok("Edited bom.txt"),
    );
    expect(await bytesOf("bom.txt")).toEqual(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("gamma\n")]));
  });

  it("matches text, not a pattern: a dot is a dot, and $& in new_text stays literal", async () => {
    await put("t.txt", "axb a.b price: 10\n");
    expect(await run("edit_file", { path: "t.txt", old_text: "a.b", new_text: "[$&$1$$]" })).toEqual(
      ok("Edited t.txt"),
    );
    expect(await readFile(join(workspace, "t.txt"), "utf8")).toBe("axb [$&$1$$] price: 10\n");
  });

  it("an empty new_text deletes the matched text", async () => {
    await put("t.txt", "keep DELETE keep");
    expect(await run("edit_file", { path: "t.txt", old_text: " DELETE", new_text: "" })).toEqual(ok("Edited t.txt"));
    expect(await readFile(join(workspace, "t.txt"), "utf8")).toBe("keep keep");
  });

  it("invalid UTF-8 is invalid_utf8 and the file is not rewritten", async () => {
    const original = Buffer.from([0x61, 0x6c, 0x70, 0x68, 0x61, 0xff]);
    await put("bin.dat", original);
    expect(await run("edit_file", { path: "bin.dat", old_text: "alpha", new_text: "gamma" })).toEqual(
      failed("invalid_utf8", "File is not valid UTF-8: bin.dat"),
    );
    expect(await bytesOf("bin.dat")).toEqual(original);
  });

  it("a missing file is file_not_found and nothing is created", async () => {
    expect(await run("edit_file", { path: "nope.txt", old_text: "a", new_text: "b" })).toEqual(
      failed("file_not_found", "File not found: nope.txt"),
    );
    expect(await readdir(workspace)).toEqual([]);
  });

  it("a folder is invalid_path: Path is a directory", async () => {
    await mkdir(join(workspace, "src"));
    expect(await run("edit_file", { path: "src", old_text: "a", new_text: "b" })).toEqual(
      failed("invalid_path", "Path is a directory: src"),
    );
  });

  it("a file over MAX_FILE_BYTES is filesystem_error and is left as it was", async () => {
    await sized("huge.txt", MAX_FILE_BYTES + 1);
    expect(await run("edit_file", { path: "huge.txt", old_text: "\u0000", new_text: "x" })).toEqual(
      failed(
        "filesystem_error",
        "Could not edit file: huge.txt (the file is 10485761 bytes; at most 10485760 are read)",
      ),
    );
    expect((await lstat(join(workspace, "huge.txt"))).size).toBe(MAX_FILE_BYTES + 1);
  });

  it.each(REFUSED_PATHS)("refuses %j as path_escape and changes nothing outside", async (path) => {
    expect(await run("edit_file", { path, old_text: "top", new_text: "no" })).toEqual(
      failed("path_escape", `Path escapes workspace: ${path}`),
    );
    expect(await outsideState()).toEqual(UNTOUCHED);
  });

  it("refuses to edit an outside file through a linked folder, and leaves it unchanged", async () => {
    await symlink(outside, join(workspace, "escape"), "junction");
    expect(await run("edit_file", { path: "escape/secret.txt", old_text: "top", new_text: "no" })).toEqual(
      failed("path_escape", "Path escapes workspace: escape/secret.txt"),
    );
    expect(await outsideState()).toEqual(UNTOUCHED);
  });

  posixOnly("refuses to edit an outside file through a final-component link", async () => {
    await symlink(join(outside, "secret.txt"), join(workspace, "link.txt"));
    expect(await run("edit_file", { path: "link.txt", old_text: "top", new_text: "no" })).toEqual(
      failed("path_escape", "Path escapes workspace: link.txt"),
    );
    expect(await outsideState()).toEqual(UNTOUCHED);
  });

  it.each<[Record<string, unknown>, string]>([
    [{ path: "t.txt", old_text: "", new_text: "y" }, "old_text: Too small: expected string to have >=1 characters"],
    [{ path: "", old_text: "x", new_text: "y" }, "path: Too small: expected string to have >=1 characters"],
    [{ path: "t.txt", old_text: "x" }, "new_text: Invalid input: expected string, received undefined"],
    [{ path: "t.txt", old_text: "x", new_text: "y", line: 1 }, '(arguments): Unrecognized key: "line"'],
    [
      { path: "t.txt", old_string: "x", new_string: "y" },
      "old_text: Invalid input: expected string, received undefined; " +
        "new_text: Invalid input: expected string, received undefined; " +
        '(arguments): Unrecognized keys: "old_string", "new_string"',
    ],
  ])("refuses %j as invalid_arguments and leaves the file alone", async (args, problem) => {
    await put("t.txt", "x\n");
    expect(await run("edit_file", args)).toEqual(
      failed("invalid_arguments", `Invalid arguments for edit_file: ${problem}`),
    );
    expect(await readFile(join(workspace, "t.txt"), "utf8")).toBe("x\n");
  });
});

describe("glob", () => {
  beforeEach(async () => {
    await put("b.ts", "");
    await put("src/z.ts", "");
    await put("src/core/a.ts", "");
    await put("src/core/notes.txt", "");
    await put("README.md", "");
  });

  it("finds nested files as workspace-relative / paths, sorted, one per line", async () => {
    expect(await run("glob", { pattern: "**/*.ts" })).toEqual(ok("b.ts\nsrc/core/a.ts\nsrc/z.ts"));
    expect(await run("glob", { pattern: "src/**/*" })).toEqual(ok("src/core/a.ts\nsrc/core/notes.txt\nsrc/z.ts"));
  });

  it("matches one character with ? and a set with [...]", async () => {
    expect(await run("glob", { pattern: "?.ts" })).toEqual(ok("b.ts"));
    expect(await run("glob", { pattern: "src/[xyz].ts" })).toEqual(ok("src/z.ts"));
  });

  it("answers (no matches), not an empty text, when nothing matches", async () => {
    expect(await run("glob", { pattern: "**/*.none" })).toEqual(ok("(no matches)"));
    expect(await run("glob", { pattern: "missing/*.ts" })).toEqual(ok("(no matches)"));
  });

  it("lists files only, not folders", async () => {
    expect(await run("glob", { pattern: "src/*" })).toEqual(ok("src/z.ts"));
  });

  it("treats braces as literal characters: nothing to expand and blow up", async () => {
    await put("{a,b}.txt", "literal");
    await put("a.txt", "a");
    expect(await run("glob", { pattern: "{a,b}.txt" })).toEqual(ok("{a,b}.txt"));
    expect(await run("glob", { pattern: "{1..1000}{1..1000}" })).toEqual(ok("(no matches)"));
  });

  it.each([
    ["../*"],
    ["../outside/*"],
    [".."],
    ["a/../../*"],
    ["src/../b.ts"],
    ["**/../*"],
    ["{..,a}/*"],
    ["@(..)/*"],
    ["/etc/*"],
    ["\\..\\*"],
    ["C:/x"],
    ["c:\\**"],
  ])("refuses the pattern %s as path_escape", async (pattern) => {
    expect(await run("glob", { pattern })).toEqual(failed("path_escape", `Path escapes workspace: ${pattern}`));
  });

  it("refuses escape/*.txt when escape is a link out: the fixed folders go through safePath", async () => {
    await writeFile(join(outside, "loot.txt"), "x");
    await symlink(outside, join(workspace, "escape"), "junction");
    for (const pattern of ["escape/*.txt", "escape/**/*", "escape/secret.txt", "escape\\*"]) {
      expect(await run("glob", { pattern })).toEqual(failed("path_escape", `Path escapes workspace: ${pattern}`));
    }
  });

  it("never enters a linked folder when a wildcard walks past it", async () => {
    await symlink(outside, join(workspace, "link"), "junction");
    await mkdir(join(workspace, "inner"));
    await symlink(join(workspace, "src"), join(workspace, "inner", "alias"), "junction");
    expect(await run("glob", { pattern: "**/*" })).toEqual(
      ok("README.md\nb.ts\nsrc/core/a.ts\nsrc/core/notes.txt\nsrc/z.ts"),
    );
    expect(await run("glob", { pattern: "*/secret.txt" })).toEqual(ok("(no matches)"));
    expect(await run("glob", { pattern: "**/secret.txt" })).toEqual(ok("(no matches)"));
    expect(await run("glob", { pattern: "inner/*/*.ts" })).toEqual(ok("(no matches)"));
  });

  it("a linked folder that stays inside may be named, but its files are not listed through it", async () => {
    await symlink(join(workspace, "src"), join(workspace, "alias"), "junction");
    expect(await run("glob", { pattern: "alias/*.ts" })).toEqual(ok("(no matches)"));
  });

  it("refuses a pattern over 1,000 characters as filesystem_error, quoting it cut to 200", async () => {
    const pattern = "*/".repeat(501);
    expect(await run("glob", { pattern })).toEqual(
      failed(
        "filesystem_error",
        `Could not list files: ${pattern.slice(0, 200)}… (the pattern is longer than 1000 characters)`,
      ),
    );
    expect(await run("glob", { pattern: `${"x".repeat(997)}.ts` })).toEqual(ok("(no matches)"));
  });

  it("with more than 1,000 matches shows the first 1,000 sorted and says to narrow the pattern", async () => {
    await Promise.all(Array.from({ length: 1_001 }, (_, i) => put(`many/f${String(i).padStart(4, "0")}.txt`, "")));
    const result = await run("glob", { pattern: "many/*.txt" });
    expect(result.isError).toBe(false);
    const lines = result.content.split("\n");
    expect(lines).toHaveLength(1_001);
    expect(lines[1_000]).toBe(CAP_NOTE);
    const paths = lines.slice(0, 1_000);
    expect(paths.every((path) => /^many\/f\d{4}\.txt$/.test(path))).toBe(true);
    expect(new Set(paths).size).toBe(1_000);
    expect(paths).toEqual([...paths].sort());
  });

  it("exactly 1,000 matches come back whole, with no note", async () => {
    const expected = Array.from({ length: 1_000 }, (_, i) => `many/f${String(i).padStart(4, "0")}.txt`);
    await Promise.all(expected.map((path) => put(path, "")));
    expect(await run("glob", { pattern: "many/*.txt" })).toEqual(ok(expected.join("\n")));
  });

  it.each<[Record<string, unknown>, string]>([
    [{ pattern: "" }, "pattern: Too small: expected string to have >=1 characters"],
    [{ pattern: "*", cwd: ".." }, '(arguments): Unrecognized key: "cwd"'],
    [{ pattern: 5 }, "pattern: Invalid input: expected string, received number"],
  ])("refuses %j as invalid_arguments before any listing", async (args, problem) => {
    const fileSystem = new FakeFileSystem({ "a.txt": "a" });
    expect(await run("glob", args, fileSystem)).toEqual(
      failed("invalid_arguments", `Invalid arguments for glob: ${problem}`),
    );
    expect(fileSystem.calls).toEqual([]);
  });
});

describe("error codes: the tools map what the file system names, and nothing else", () => {
  const CALLS: Record<string, [Record<string, unknown>, string]> = {
    read_file: [{ path: "p.txt" }, "Could not read file: p.txt"],
    write_file: [{ path: "p.txt", content: "x" }, "Could not write file: p.txt"],
    edit_file: [{ path: "p.txt", old_text: "a", new_text: "b" }, "Could not edit file: p.txt"],
    glob: [{ pattern: "p.txt" }, "Could not list files: p.txt"],
  };
  const NAMED: [string, Error, string][] = [
    ["WorkspacePathError", new WorkspacePathError("Path escapes workspace: p.txt"), "path_escape"],
    ["FileNotFoundError", new FileNotFoundError("File not found: p.txt"), "file_not_found"],
    ["InvalidFilePathError", new InvalidFilePathError("Path is a directory: p.txt"), "invalid_path"],
    ["InvalidUtf8Error", new InvalidUtf8Error("File is not valid UTF-8: p.txt"), "invalid_utf8"],
    ["TextNotFoundError", new TextNotFoundError("Exact text not found in p.txt"), "text_not_found"],
  ];
  const cases = Object.keys(CALLS).flatMap((tool) =>
    NAMED.map(([name, error, code]): [string, string, Error, string] => [tool, name, error, code]),
  );

  it.each(cases)("%s: a %s becomes %s with its message", async (tool, _name, error, code) => {
    const [args] = CALLS[tool] ?? [{}, ""];
    const fileSystem = new FakeFileSystem();
    fileSystem.failures.set("p.txt", error);
    expect(await run(tool, args, fileSystem)).toEqual(failed(code, error.message));
    expect(fileSystem.calls).toHaveLength(1);
  });

  it.each(Object.keys(CALLS))(
    "%s: a FileSystemOperationError becomes filesystem_error with its detail",
    async (tool) => {
      const [args, failure] = CALLS[tool] ?? [{}, ""];
      const fileSystem = new FakeFileSystem();
      fileSystem.failures.set("p.txt", new FileSystemOperationError("the disk is full"));
      expect(await run(tool, args, fileSystem)).toEqual(failed("filesystem_error", `${failure} (the disk is full)`));
    },
  );

  it.each(Object.keys(CALLS))(
    "%s: an error nobody named is not passed off as a file error: it becomes tool_execution_error",
    async (tool) => {
      const [args] = CALLS[tool] ?? [{}, ""];
      const fileSystem = new FakeFileSystem();
      fileSystem.failures.set("p.txt", new Error("EIO: /home/me/secret internal detail"));
      const result = await run(tool, args, fileSystem);
      expect(result).toEqual(failed("tool_execution_error", `Tool ${tool} failed unexpectedly`));
      expect(result.content).not.toContain("secret internal detail");
    },
  );
});

describe("several file calls in one assistant message", () => {
  it("the book's write-1 then read-1 run in order, each result paired with its id and nothing between them", async () => {
    const { results, history, model } = await turn([
      call("write-1", "write_file", '{"path":"note.txt","content":"value"}'),
      call("read-1", "read_file", '{"path":"note.txt"}'),
    ]);
    expect(results).toEqual([ok("Wrote 5 UTF-8 bytes to note.txt"), ok("value")]);
    expect(history.map((message) => message.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
    expect(model.requests[1]?.messages.slice(-3)).toEqual([
      history[1],
      { role: "tool", toolCallId: "write-1", content: "Wrote 5 UTF-8 bytes to note.txt" },
      { role: "tool", toolCallId: "read-1", content: "value" },
    ]);
  });

  it("failed calls are answered too: bad JSON, bad arguments, an escape and an unknown tool keep their places", async () => {
    const { results } = await turn([
      call("c1", "write_file", { path: "a.txt", content: "a" }),
      call("c2", "read_file", "{not json"),
      call("c3", "read_file", { path: "a.txt", limit: 0 }),
      call("c4", "read_file", { path: "../outside/secret.txt" }),
      call("c5", "delete_file", { path: "a.txt" }),
      call("c6", "glob", { pattern: "*.txt" }),
    ]);
    expect(results).toEqual([
      ok("Wrote 1 UTF-8 bytes to a.txt"),
      failed("invalid_json", "Arguments of read_file must be a JSON object"),
      failed("invalid_arguments", "Invalid arguments for read_file: limit: Too small: expected number to be >0"),
      failed("path_escape", "Path escapes workspace: ../outside/secret.txt"),
      failed("unknown_tool", "Unknown tool: delete_file"),
      ok("a.txt"),
    ]);
  });

  it("every call reaches the injected file system with the run's workspace first, in order", async () => {
    const fileSystem = new FakeFileSystem({ "src/app.ts": "export {};\n" });
    const { results } = await turn(
      [
        call("c1", "glob", { pattern: "**/*.ts" }),
        call("c2", "read_file", { path: "src/app.ts", limit: 5 }),
        call("c3", "edit_file", { path: "src/app.ts", old_text: "{}", new_text: "{ x }" }),
        call("c4", "write_file", { path: "notes.md", content: "n" }),
      ],
      fileSystem,
    );
    expect(results).toEqual([
      ok("src/app.ts"),
      ok("export {};\n"),
      ok("Edited src/app.ts"),
      ok("Wrote 1 UTF-8 bytes to notes.md"),
    ]);
    expect(fileSystem.calls).toEqual([
      ["globFiles", workspace, "**/*.ts"],
      ["readFile", workspace, "src/app.ts", 5],
      ["editFile", workspace, "src/app.ts", "{}", "{ x }"],
      ["writeFile", workspace, "notes.md", "n"],
    ]);
    // Nothing went around the port to the disk.
    expect(await readdir(workspace)).toEqual([]);
  });
});

describe("what the model is shown", () => {
  it("every turn offers shell, then read_file, write_file, edit_file and glob with their exact JSON Schemas", async () => {
    const { model } = await turn([call("c1", "glob", { pattern: "*" })]);
    expect(model.requests).toHaveLength(2);
    for (const request of model.requests) expect(request.tools.slice(1)).toStrictEqual(FILE_TOOLS);
    expect(model.requests.map((request) => request.tools.map((tool) => tool.function.name))).toEqual([
      ["shell", "read_file", "write_file", "edit_file", "glob"],
      ["shell", "read_file", "write_file", "edit_file", "glob"],
    ]);
  });

  it("the schema constants carry the book's .describe() texts word for word", () => {
    const describe = (schema: z.ZodObject, field: string): string | undefined =>
      (schema.shape as Record<string, z.ZodType>)[field]?.description;
    expect({
      readPath: describe(readFileInputSchema, "path"),
      readLimit: describe(readFileInputSchema, "limit"),
      writePath: describe(writeFileInputSchema, "path"),
      writeContent: describe(writeFileInputSchema, "content"),
      editPath: describe(editFileInputSchema, "path"),
      editOldText: describe(editFileInputSchema, "old_text"),
      editNewText: describe(editFileInputSchema, "new_text"),
      globPattern: describe(globInputSchema, "pattern"),
    }).toEqual(BOOK_DESCRIBE);
  });

  it("the JSON Schema the model reads is the schema constant itself, exported once", () => {
    expect(
      [readFileInputSchema, writeFileInputSchema, editFileInputSchema, globInputSchema].map((schema) =>
        z.toJSONSchema(schema),
      ),
    ).toEqual(FILE_TOOLS.map((tool) => tool.function.parameters));
  });

  it("each create…Tool names its tool, uses its schema constant and declares its effect", () => {
    const fileSystem = new FakeFileSystem();
    const tools = [
      createReadFileTool(fileSystem),
      createWriteFileTool(fileSystem),
      createEditFileTool(fileSystem),
      createGlobTool(fileSystem),
    ];
    expect(tools.map(({ name, inputSchema, effect }) => ({ name, inputSchema, effect }))).toEqual([
      { name: "read_file", inputSchema: readFileInputSchema, effect: "read" },
      { name: "write_file", inputSchema: writeFileInputSchema, effect: "write" },
      { name: "edit_file", inputSchema: editFileInputSchema, effect: "write" },
      { name: "glob", inputSchema: globInputSchema, effect: "read" },
    ]);
    expect(tools.map((tool) => tool.description)).toEqual(FILE_TOOLS.map((tool) => tool.function.description));
  });

  it("createChapterTwoTools is chapter 1's registry with the four file tools added after shell", () => {
    const registry = createChapterTwoTools(new FakeCommandRunner(), new FakeFileSystem());
    expect(registry.openAITools().map((tool) => tool.function.name)).toEqual([
      "shell",
      "read_file",
      "write_file",
      "edit_file",
      "glob",
    ]);
  });
});
