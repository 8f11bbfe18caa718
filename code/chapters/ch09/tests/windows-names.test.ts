import { mkdtemp, readdir, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodeWorkspaceFileSystem } from "../src/adapters/filesystem.js";
import { isWindowsReservedComponent, WorkspacePathError } from "../src/core/filesystem.js";
import { workspaceSegments } from "../src/core/safe-path.js";
import { toolCall } from "../src/core/messages.js";
import { createChapterTwoTools } from "../src/features/builtin-tools.js";
import { FakeCommandRunner, commandResult } from "./support/fakes.js";

// Names Windows reads as something else are refused lexically, on every platform, like the other Windows forms:
// a device name with spaces before its extension, and an 8.3 short name, a second spelling of another entry
// that would get past every rule that looks at names.
const REFUSED = [
  "NUL .txt",
  "CON .txt",
  "com1 .log",
  "lpt2  .md",
  "PROGRA~1",
  "GIT~1/hooks/pre-commit",
  "GENERA~1.TXT",
  "docs/A~1/x.md",
];
// Names with a tilde that no 8.3 name could be, and device-like names that are no device.
const KEPT = ["a~b.txt", "notes~", "v1~draft.md", "~tmp", "backup~12", "x~1.json5", "NULL.txt", "console.log"];

let workspace: string;
beforeAll(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "ch02-windows-names-")));
});
afterAll(async () => {
  await rm(workspace, { recursive: true, force: true });
});

async function write(path: string): Promise<string> {
  const tools = createChapterTwoTools(new FakeCommandRunner(commandResult({})), new NodeWorkspaceFileSystem());
  const prepared = tools.prepare(toolCall("c1", "write_file", JSON.stringify({ path, content: "x" })));
  if (prepared.error !== undefined) return prepared.error.content;
  return (await tools.invoke(prepared, { workspace, identity: "user" })).content;
}

describe("Windows names refused on every platform", () => {
  it.each(REFUSED)("%j is no workspace path: WorkspacePathError, and write_file says path_escape", async (path) => {
    expect(() => workspaceSegments(path)).toThrow(WorkspacePathError);
    expect(await write(path)).toBe(`Error [path_escape]: Path escapes workspace: ${path}`);
  });

  it("nothing refused was written", async () => {
    for (const path of REFUSED) await write(path);
    expect(await readdir(workspace)).toEqual([]);
  });

  it.each(KEPT)("%j stays an ordinary name", async (path) => {
    expect(workspaceSegments(path)).toEqual([path]);
    expect(await write(path)).toBe(`Wrote 1 UTF-8 bytes to ${path}`);
  });
});

describe("isWindowsReservedComponent, the one predicate safePath uses", () => {
  it.each(["nul", "NUL", "Con", "prn.txt", "aux.tar.gz", "COM1", "com¹", "LPT9.log", "CONIN$", "conout$", "NUL .txt"])(
    "%j is a device name, and no workspace path",
    (component) => {
      expect(isWindowsReservedComponent(component)).toBe(true);
      expect(() => workspaceSegments(component)).toThrow(WorkspacePathError);
    },
  );

  it.each(["null", "NULL.txt", "console.log", "com10", "lpt", "xnul", "auxiliary", "con-fig"])(
    "%j is no device name",
    (component) => {
      expect(isWindowsReservedComponent(component)).toBe(false);
    },
  );
});
