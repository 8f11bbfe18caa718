import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { NodeWorkspaceFileSystem } from "../src/adapters/filesystem.js";
import { PowerShellRunner } from "../src/adapters/powershell.js";
import { AgentRunner, type RunResult } from "../src/core/loop.js";
import { validateToolPairing } from "../src/core/messages.js";
import {
  PermissionPolicy,
  PermissionRule,
  type ApprovalProvider,
  type AuditSink,
  type PermissionDecision,
  type PermissionRequest,
} from "../src/core/permissions.js";
import type { CommandRunner } from "../src/core/commands.js";
import type { WorkspaceFileSystem } from "../src/core/filesystem.js";
import { createChapterTwoTools } from "../src/features/builtin-tools.js";
import { CountingApproval, FakeCommandRunner, type SeenApproval } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";
import { outsideTree, treeOf, type TreeEntry } from "./support/outside-tree.js";

const SETUPS = [
  "link-out-dir",
  "link-out-dir-abs",
  "link-out-file",
  "chain",
  "dangling-out",
  "dangling-out-dir",
  "link-up",
  "link-root",
  "loop",
  "nested-link-out",
  "link-in",
  "prefix-sibling",
  "link-to-ws",
  "fifo",
  "hard-link-out",
  "hard-link-in",
] as const;
type Setup = (typeof SETUPS)[number];

/**
 * One hostile call of a tool chapter 3 decides about, kept as data in fixtures/hostile-calls.json: the
 * writes the boundary judges, the shell every call of which is asked, and calls that never reach the
 * policy. Hostile read_file and glob calls are chapter 2's (hostile-paths.test.ts): the policy lets every
 * read pass, so under chapter 3 they get exactly chapter 2's answers.
 */
const HostileCall = z.strictObject({
  id: z.string().min(1),
  /** The test name: what the call tries and what must happen. */
  why: z.string().min(1),
  tool: z.enum(["write_file", "edit_file", "shell", "<unknown>"]),
  /** The function name the model sends when `tool` is `<unknown>`. */
  name: z.string().optional(),
  /** JSON text as the model sends it (kept verbatim: duplicate keys, bad JSON), or an object to serialise. */
  arguments: z.union([z.string(), z.record(z.string(), z.unknown())]),
  /** The error code of the tool message, or `allowed-inside` for a call that legitimately stays inside. */
  expect: z.enum([
    "permission_denied",
    "file_not_found",
    "invalid_path",
    "text_not_found",
    "invalid_arguments",
    "invalid_json",
    "unknown_tool",
    "allowed-inside",
  ]),
  /** The whole tool message, where the code alone does not say it. */
  message: z.string().optional(),
  /** Workspace-relative file an allowed write or edit must have produced (`{{repeat:…}}` expanded). */
  lands: z.string().optional(),
  setup: z.enum(SETUPS).optional(),
  callId: z.string().optional(),
  /** A flaw in src/ this case exposes: the case runs as `it.fails` until it is fixed. */
  knownFlaw: z.string().optional(),
  /** Why the case cannot run in this process at all (reported, never run). */
  skip: z.string().optional(),
});
type HostileCall = z.infer<typeof HostileCall>;

const corpus: readonly HostileCall[] = z
  .array(HostileCall)
  .parse(JSON.parse(readFileSync(new URL("./fixtures/hostile-calls.json", import.meta.url), "utf8")));

const SECRET = `secret-${randomBytes(16).toString("hex")}`;
const OUTSIDE = "Writing outside the workspace is forbidden";
const HARD_DENY = `Error [permission_denied]: ${OUTSIDE}`;
const APPROVED = "Approved in the test";
const REFUSED = "The user did not approve this tool call";
/** Codes that come back from `prepare()`: such a call never reaches the policy. */
const PREPARE_CODES = new Set(["unknown_tool", "invalid_json", "invalid_arguments"]);
const WRITE_TOOLS = new Set(["write_file", "edit_file"]);
const posix = process.platform !== "win32";

interface Places {
  /** Parent of the workspace: holds `ws/`, `outside/` and `ws-sibling/`. */
  readonly root: string;
  readonly ws: string;
  readonly outside: string;
}

const roots: string[] = [];
const cleanups: (() => void)[] = [];

afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A fresh workspace beside an `outside/` folder holding the secret, and a sibling whose name starts like the workspace's. */
function makePlaces(): Places {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "ch03-hostile-")));
  roots.push(root);
  const ws = join(root, "ws");
  const outside = join(root, "outside");
  mkdirSync(join(ws, "sub"), { recursive: true });
  mkdirSync(outside);
  mkdirSync(join(root, "ws-sibling"));
  writeFileSync(join(ws, "inside.txt"), "inside content\n");
  writeFileSync(join(ws, "sub", "nested.txt"), "nested content\n");
  writeFileSync(join(outside, "secret.txt"), `${SECRET}\n`);
  // A name that carries the secret too: a glob or listing that leaks outside names gives itself away.
  writeFileSync(join(outside, `${SECRET}.txt`), "decoy\n");
  writeFileSync(join(root, "ws-sibling", "f.txt"), `${SECRET}\n`);
  return { root, ws, outside };
}

/** Builds a symlink layout; returns a way to unblock a call the layout can block, if any. */
function buildSetup(setup: Setup, { root, ws, outside }: Places): (() => void) | undefined {
  const link = (target: string, at: string): void => symlinkSync(target, join(ws, at));
  switch (setup) {
    case "link-out-dir":
      link("../outside", "link");
      return undefined;
    case "link-out-dir-abs":
      link(outside, "abs");
      return undefined;
    case "link-out-file":
      link("../outside/secret.txt", "lf");
      return undefined;
    case "chain":
      link("b", "a");
      link("../outside", "b");
      return undefined;
    case "dangling-out":
      link("../outside/new.txt", "dangle");
      return undefined;
    case "dangling-out-dir":
      link("../outside/newdir", "dd");
      return undefined;
    case "link-up":
      link("..", "up");
      return undefined;
    case "link-root":
      link("/", "rootlink");
      return undefined;
    case "loop":
      link("loop", "loop");
      return undefined;
    case "nested-link-out":
      link("../../outside", join("sub", "deep"));
      return undefined;
    case "link-in":
      link("sub", "in");
      return undefined;
    case "prefix-sibling":
      link(join(root, "ws-sibling"), "ps");
      return undefined;
    case "link-to-ws":
      link("..", join("sub", "back"));
      return undefined;
    case "hard-link-out":
      linkSync(join(outside, "secret.txt"), join(ws, "hl.txt"));
      return undefined;
    case "hard-link-in":
      linkSync(join(ws, "inside.txt"), join(ws, "sub", "twin.txt"));
      return undefined;
    case "fifo": {
      const pipe = join(ws, "pipe");
      execFileSync("mkfifo", [pipe]);
      return () => {
        // Opening the read end lets a writer blocked in open() go on.
        const fd = openSync(pipe, constants.O_RDONLY | constants.O_NONBLOCK);
        cleanups.push(() => closeSync(fd));
      };
    }
  }
}

const REPEAT = /\{\{repeat:(\d+):("(?:[^"\\]|\\.)*")\}\}/g;

/** Expands `{{repeat:N:"unit"}}` and the folder placeholders; `escape` prepares a value for JSON text. */
function expand(text: string, places: Places, escape: (value: string) => string = (value) => value): string {
  const withPlaces = text
    .replaceAll("{{OUTSIDE}}", escape(places.outside))
    .replaceAll("{{WS}}", escape(places.ws))
    .replaceAll("{{ROOTREL}}", escape(places.root.replace(/^[\\/]+/, "")))
    .replaceAll("{{ROOT}}", escape(places.root));
  return withPlaces.replace(REPEAT, (_match, times: string, unit: string) =>
    (JSON.parse(unit) as string).repeat(Number(times)),
  );
}

function expandValue(value: unknown, places: Places): unknown {
  if (typeof value === "string") return expand(value, places);
  if (Array.isArray(value)) return value.map((item: unknown) => expandValue(item, places));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, expandValue(item, places)]));
  }
  return value;
}

function argumentsText(hostile: HostileCall, places: Places): string {
  return typeof hostile.arguments === "string"
    ? expand(hostile.arguments, places, (value) => JSON.stringify(value).slice(1, -1))
    : JSON.stringify(expandValue(hostile.arguments, places));
}

interface AuditRecord {
  readonly tool: string;
  readonly behavior: string;
  readonly source: string;
  readonly reason: string;
}

class RecordingAudit implements AuditSink {
  readonly records: AuditRecord[] = [];
  record(request: PermissionRequest, decision: PermissionDecision): void {
    const { behavior, source, reason } = decision;
    this.records.push({ tool: request.toolName, behavior, source, reason });
  }
}

/** What the policy must have done: how many approvals were asked, and what was audited as `[behavior, source, reason]`. */
function expectedPolicy(hostile: HostileCall): { approvals: number; audit: [string, string, string][] } {
  if (hostile.tool === "<unknown>" || PREPARE_CODES.has(hostile.expect)) return { approvals: 0, audit: [] };
  if (hostile.tool === "shell") return { approvals: 1, audit: [["deny", "user", REFUSED]] };
  if (WRITE_TOOLS.has(hostile.tool)) {
    // The book's boundary: every path chapter 2's safePath refuses is outside, so it is denied before anyone is asked.
    return hostile.expect === "permission_denied"
      ? { approvals: 0, audit: [["deny", "workspace-boundary", OUTSIDE]] }
      : { approvals: 1, audit: [["allow", "user", APPROVED]] };
  }
  throw new Error(`case ${hostile.id}: no policy is expected for ${hostile.tool}`);
}

/** A model-supplied path or pattern as the tools quote it: at most 200 characters, then `…`. */
const shown = (text: string): string => (text.length <= 200 ? text : `${text.slice(0, 200)}…`);

/**
 * The whole tool message the call must get, or for invalid_arguments the part of it that is ours
 * (Zod words the rest).
 */
function expectedMessage(
  hostile: HostileCall,
  name: string,
  args: string,
): { whole: string } | { startsWith: string } | { notError: true } {
  if (hostile.message !== undefined) return { whole: hostile.message };
  switch (hostile.expect) {
    case "allowed-inside":
      return { notError: true };
    case "unknown_tool":
      return { whole: `Error [unknown_tool]: Unknown tool: ${name}` };
    case "invalid_json":
      return { whole: `Error [invalid_json]: Arguments of ${name} must be a JSON object` };
    case "invalid_arguments":
      return { startsWith: `Error [invalid_arguments]: Invalid arguments for ${name}: ` };
    case "permission_denied":
      if (WRITE_TOOLS.has(hostile.tool)) return { whole: HARD_DENY };
      break;
    default:
      break;
  }
  // The last of duplicate keys wins, as JSON.parse reads it: that is the value the tool saw.
  const named = shown(String((JSON.parse(args) as { path?: string }).path));
  switch (hostile.expect) {
    case "file_not_found":
      return { whole: `Error [file_not_found]: File not found: ${named}` };
    case "text_not_found":
      return { whole: `Error [text_not_found]: Exact text not found in ${named}` };
    default:
      throw new Error(`case ${hostile.id} needs a message`);
  }
}

/** The first exact occurrence of `oldText` replaced, the rest untouched: what edit_file must write. */
function firstReplaced(text: string, oldText: string, newText: string): string {
  const at = text.indexOf(oldText);
  return at === -1 ? text : text.slice(0, at) + newText + text.slice(at + oldText.length);
}

/** A tree without the entries a landed write may change: the file itself and the folders above it. */
function withoutLanded(tree: ReturnType<typeof treeOf>, landed: string | undefined): TreeEntry[] {
  if (landed === undefined) return tree.entries;
  const parts = landed.split("/");
  const chain = new Set(parts.map((_part, index) => parts.slice(0, index + 1).join("/")));
  return tree.entries.filter((entry) => !chain.has(entry.path));
}

interface Harness {
  readonly agent: AgentRunner;
  readonly approval: CountingApproval;
  readonly audit: RecordingAudit;
  readonly runner: FakeCommandRunner;
}

/**
 * Chapter 3's agent as its composition root builds it, from the modules this file tests: the loop, chapter 2's
 * tools, and the policy with chapter 3's one rule (file writes ask) and the file system as its write boundary.
 * That bootstrap.ts builds exactly this is ch03-permissions.test.ts's to check.
 */
function chapterThreeAgent(
  model: ScriptedModel,
  workspace: string,
  commandRunner: CommandRunner,
  approval: ApprovalProvider,
  audit: AuditSink,
  fileSystem: WorkspaceFileSystem = new NodeWorkspaceFileSystem(),
): AgentRunner {
  const confirmFileWrite = new PermissionRule({
    name: "confirm-file-write",
    behavior: "ask",
    reason: "File writes require explicit approval from chapter 3 onward",
    matches: (request) => ["write_file", "edit_file"].includes(request.prepared.definition.name),
  });
  return new AgentRunner({
    model,
    tools: createChapterTwoTools(commandRunner, fileSystem),
    systemPrompt: "s",
    workspace,
    permissionPolicy: new PermissionPolicy({ rules: [confirmFileWrite], approval, audit, writeBoundary: fileSystem }),
  });
}

/** The real P03 agent: real registry, tools and filesystem; by default every ask is allowed except the shell. */
function harness(
  places: Places,
  model: ScriptedModel,
  fileSystem?: WorkspaceFileSystem,
  approval = new CountingApproval((seen: SeenApproval) => seen.toolName !== "shell"),
): Harness {
  const audit = new RecordingAudit();
  const runner = new FakeCommandRunner();
  const agent = chapterThreeAgent(model, places.ws, runner, approval, audit, fileSystem);
  return { agent, approval, audit, runner };
}

/** Runs `agent` but gives up after `limitMs`: a hung call is a failure, and `release` unblocks it for cleanup. */
async function runWithin(agent: AgentRunner, limitMs: number, release?: () => void): Promise<RunResult> {
  const run = agent.run("Try the call the corpus gives you.");
  let timer: NodeJS.Timeout | undefined;
  const hung = await Promise.race([
    run.then(() => false),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), limitMs))),
  ]).finally(() => clearTimeout(timer));
  if (hung) {
    release?.();
    await run;
    throw new Error(`the tool call did not answer within ${limitMs} ms`);
  }
  return run;
}

async function checkCase(hostile: HostileCall): Promise<void> {
  const places = makePlaces();
  const release = hostile.setup === undefined ? undefined : buildSetup(hostile.setup, places);
  const before = outsideTree(places.root);
  const insideBefore = treeOf(places.ws);
  const name = hostile.tool === "<unknown>" ? expand(hostile.name ?? "", places) : hostile.tool;
  const id = expand(hostile.callId ?? hostile.id, places);
  const args = argumentsText(hostile, places);
  const lands = hostile.lands === undefined ? undefined : expand(hostile.lands, places);
  const landedPath = lands === undefined ? undefined : join(places.ws, lands);
  const landedBefore = landedPath !== undefined && existsSync(landedPath) ? readFileSync(landedPath, "utf8") : "";
  const model = new ScriptedModel([toolTurn(call(id, name, args)), textTurn("done")]);
  const { agent, approval, audit, runner } = harness(places, model);

  const result = await runWithin(agent, release === undefined ? 10_000 : 1_000, release);

  expect(result.finalText).toBe("done");
  expect(() => validateToolPairing(result.history)).not.toThrow();
  const messages = toolMessages(result.history);
  expect(messages.map(([callId]) => callId)).toEqual([id]);
  const content = messages[0]?.[1] ?? "";
  if (hostile.expect === "allowed-inside") expect(content.startsWith("Error [")).toBe(false);
  else expect(content.startsWith(`Error [${hostile.expect}]: `)).toBe(true);
  const expected = expectedMessage(hostile, name, args);
  if ("whole" in expected) expect(content).toBe(expected.whole);
  if ("startsWith" in expected) expect(content.startsWith(expected.startsWith)).toBe(true);

  // Nothing beside the workspace was created, changed or read into the conversation.
  expect(outsideTree(places.root)).toEqual(before);
  expect(JSON.stringify(result.history).includes(SECRET)).toBe(false);
  expect(JSON.stringify(audit.records).includes(SECRET)).toBe(false);

  const policy = expectedPolicy(hostile);
  expect(approval.requests.length).toBe(policy.approvals);
  expect(audit.records.map((record) => [record.behavior, record.source, record.reason])).toEqual(policy.audit);
  expect(audit.records.every((record) => record.tool === name)).toBe(true);
  expect(runner.calls).toEqual([]);

  // Inside, only what a call that lands may change has changed: its own file and the folders above it.
  expect(withoutLanded(treeOf(places.ws), lands)).toEqual(withoutLanded(insideBefore, lands));
  if (lands !== undefined) {
    const landed = join(places.ws, lands);
    expect(realpathSync(landed).startsWith(places.ws + sep)).toBe(true);
    const written = readFileSync(landed, "utf8");
    const parsed = JSON.parse(args) as { path?: string; content?: string; old_text?: string; new_text?: string };
    if (hostile.tool === "write_file") {
      expect(written).toBe(parsed.content);
      expect(content).toBe(`Wrote ${Buffer.byteLength(written, "utf8")} UTF-8 bytes to ${shown(String(parsed.path))}`);
    }
    if (hostile.tool === "edit_file") {
      expect(written).toBe(firstReplaced(landedBefore, String(parsed.old_text), String(parsed.new_text)));
    }
  }
}

const runnable = corpus.filter((hostile) => hostile.skip === undefined && (posix || hostile.setup === undefined));
const cases = (flawed: boolean): [string, HostileCall][] =>
  runnable.filter((hostile) => (hostile.knownFlaw !== undefined) === flawed).map((hostile) => [hostile.why, hostile]);

describe("the hostile corpus", () => {
  it("holds at least 150 cases with unique ids and names, and every <unknown> case names its tool", () => {
    expect(corpus.length).toBeGreaterThanOrEqual(150);
    expect(new Set(corpus.map((hostile) => hostile.id)).size).toBe(corpus.length);
    expect(new Set(corpus.map((hostile) => hostile.why)).size).toBe(corpus.length);
    expect(corpus.filter((hostile) => (hostile.tool === "<unknown>") !== (hostile.name !== undefined))).toEqual([]);
    expect(corpus.filter((hostile) => hostile.skip !== undefined && hostile.knownFlaw === undefined)).toEqual([]);
  });

  it("a refused write path is always the boundary's hard deny: no case expects path_escape or the unresolved deny", () => {
    const codes = new Set(corpus.map((hostile) => hostile.expect));
    expect(codes).toEqual(
      new Set([
        "permission_denied",
        "file_not_found",
        "invalid_path",
        "text_not_found",
        "invalid_arguments",
        "invalid_json",
        "unknown_tool",
        "allowed-inside",
      ]),
    );
    const writes = corpus.filter((hostile) => WRITE_TOOLS.has(hostile.tool) && hostile.expect === "permission_denied");
    expect(writes.length).toBeGreaterThanOrEqual(80);
    expect(writes.filter((hostile) => (hostile.message ?? HARD_DENY) !== HARD_DENY)).toEqual([]);
    // Only the FIFO and the folders are invalid_path: every rule of the path itself is the boundary's,
    // the workspace folder itself (".") included.
    expect(corpus.filter((hostile) => hostile.expect === "invalid_path").map((hostile) => hostile.id)).toEqual([
      "write-fifo",
      "write-existing-folder",
      "write-under-a-file",
    ]);
  });

  it.each(cases(false))("%s", async (_why, hostile) => {
    await checkCase(hostile);
  });

  // Each of these exposes a flaw in src/ (its `knownFlaw` says which); it turns red once the flaw is fixed.
  it.fails.each(cases(true))("%s", async (_why, hostile) => {
    await checkCase(hostile);
  });

  it.skip.each(corpus.filter((hostile) => hostile.skip !== undefined).map((hostile) => [hostile.why, hostile]))(
    "%s",
    () => undefined,
  );
});

/** A workspace filesystem that, on its first write, swaps `dir` for a link to outside and then delegates. */
class SwapBeforeFirstWrite implements WorkspaceFileSystem {
  private swapped = false;
  constructor(
    private readonly inner: WorkspaceFileSystem,
    private readonly swap: () => void,
  ) {}
  readFile(workspace: string, relativePath: string, limit?: number) {
    return this.inner.readFile(workspace, relativePath, limit);
  }
  writeFile(workspace: string, relativePath: string, content: string) {
    if (!this.swapped) {
      this.swapped = true;
      this.swap();
    }
    return this.inner.writeFile(workspace, relativePath, content);
  }
  editFile(workspace: string, relativePath: string, oldText: string, newText: string) {
    return this.inner.editFile(workspace, relativePath, oldText, newText);
  }
  globFiles(workspace: string, pattern: string) {
    return this.inner.globFiles(workspace, pattern);
  }
  /** The policy's boundary is this file system too: it judges the real paths, before and after the swap. */
  isPathWithinWorkspace(workspace: string, relativePath: string) {
    return this.inner.isPathWithinWorkspace(workspace, relativePath);
  }
}

function swapDirForOutsideLink({ ws }: Places): () => void {
  mkdirSync(join(ws, "dir", "sub"), { recursive: true });
  return () => {
    renameSync(join(ws, "dir"), join(ws, "dir-moved"));
    symlinkSync("../outside", join(ws, "dir"));
  };
}

// The folder-swap races inside one file operation are chapter 2's (folder-swap-races.test.ts). This is the
// one chapter 3 adds: a swap after the permission check, which the handler catches and the boundary then sees.
describe.skipIf(!posix)("links swapped in while a turn runs", () => {
  it("a folder swapped for an outside link after the permission check makes the write path_escape, and the next call in the same turn is a hard deny never asked", async () => {
    const places = makePlaces();
    const swap = swapDirForOutsideLink(places);
    const before = outsideTree(places.root);
    const model = new ScriptedModel([
      toolTurn(
        call("w1", "write_file", { path: "dir/a.txt", content: "pwned" }),
        call("w2", "write_file", { path: "dir/b.txt", content: "pwned" }),
      ),
      textTurn("done"),
    ]);
    const fileSystem = new SwapBeforeFirstWrite(new NodeWorkspaceFileSystem(), swap);
    const { agent, approval, audit } = harness(places, model, fileSystem);

    const result = await agent.run("write two files");

    expect(toolMessages(result.history)).toEqual([
      ["w1", "Error [path_escape]: Path escapes workspace: dir/a.txt"],
      ["w2", HARD_DENY],
    ]);
    expect(approval.requests.map((seen) => seen.arguments)).toEqual([{ path: "dir/a.txt", content: "pwned" }]);
    expect(audit.records.map((record) => [record.tool, record.behavior, record.source, record.reason])).toEqual([
      ["write_file", "allow", "user", APPROVED],
      ["write_file", "deny", "workspace-boundary", OUTSIDE],
    ]);
    expect(lstatSync(join(places.ws, "dir")).isSymbolicLink()).toBe(true);
    expect(outsideTree(places.root)).toEqual(before);
    expect(() => validateToolPairing(result.history)).not.toThrow();
  });
});

// Hard links and names the disk cannot take: the boundary denies what it can see before anyone is asked,
// and the open refuses a hard link that appears while the human is being asked. POSIX: links by `link()`.
describe.skipIf(!posix)("hard links, overlong names and the workspace folder itself under the boundary", () => {
  const auditRows = (audit: RecordingAudit) =>
    audit.records.map((record) => [record.tool, record.behavior, record.source, record.reason]);

  it("a write and an edit of a hard link to an outside file are the boundary's hard deny: the approver is called zero times and the outside file is unchanged", async () => {
    const places = makePlaces();
    linkSync(join(places.outside, "secret.txt"), join(places.ws, "hl.txt"));
    const before = outsideTree(places.root);
    const model = new ScriptedModel([
      toolTurn(
        call("w1", "write_file", { path: "hl.txt", content: "pwned" }),
        call("e1", "edit_file", { path: "hl.txt", old_text: SECRET, new_text: "pwned" }),
      ),
      textTurn("done"),
    ]);
    const { agent, approval, audit } = harness(places, model);

    const result = await agent.run("overwrite the notes");

    expect(toolMessages(result.history)).toEqual([
      ["w1", HARD_DENY],
      ["e1", HARD_DENY],
    ]);
    expect(approval.requests).toEqual([]);
    expect(auditRows(audit)).toEqual([
      ["write_file", "deny", "workspace-boundary", OUTSIDE],
      ["edit_file", "deny", "workspace-boundary", OUTSIDE],
    ]);
    expect(outsideTree(places.root)).toEqual(before);
    expect(readFileSync(join(places.outside, "secret.txt"), "utf8")).toBe(`${SECRET}\n`);
  });

  it.each([
    ["write_file", { path: "inside.txt", content: "pwned" }],
    ["edit_file", { path: "inside.txt", old_text: "inside", new_text: "pwned" }],
  ] as const)(
    "a hard link swapped in while the approver is asking about %s is refused at the open, and the outside file is unchanged",
    async (tool, args) => {
      const places = makePlaces();
      const secret = join(places.outside, "secret.txt");
      const untouched = () => ({ content: readFileSync(secret, "utf8"), mtimeMs: statSync(secret).mtimeMs });
      const before = untouched();
      // While the human reads the prompt, another process makes inside.txt a second name of the secret.
      const approval = new CountingApproval(() => {
        unlinkSync(join(places.ws, "inside.txt"));
        linkSync(secret, join(places.ws, "inside.txt"));
        return true;
      });
      const model = new ScriptedModel([toolTurn(call("c1", tool, args)), textTurn("done")]);
      const { agent, audit } = harness(places, model, undefined, approval);

      const result = await agent.run("change inside.txt");

      expect(toolMessages(result.history)).toEqual([["c1", "Error [path_escape]: Path escapes workspace: inside.txt"]]);
      expect(approval.requests.map((seen) => seen.arguments)).toEqual([args]);
      expect(auditRows(audit)).toEqual([[tool, "allow", "user", APPROVED]]);
      expect(statSync(secret).nlink).toBe(2);
      expect(untouched()).toEqual(before);
      expect(JSON.stringify(result.history).includes(SECRET)).toBe(false);
    },
  );

  it("a 600-byte name and the workspace folder itself are denied before any prompt, and nothing is created", async () => {
    const places = makePlaces();
    const name = "中".repeat(200);
    const insideBefore = treeOf(places.ws);
    const model = new ScriptedModel([
      toolTurn(
        call("w1", "write_file", { path: name, content: "pwned" }),
        call("w2", "write_file", { path: `new/${name}`, content: "pwned" }),
        call("e1", "edit_file", { path: name, old_text: "a", new_text: "b" }),
        call("w3", "write_file", { path: ".", content: "pwned" }),
        call("w4", "write_file", { path: "./", content: "pwned" }),
        call("e2", "edit_file", { path: ".", old_text: "a", new_text: "b" }),
      ),
      textTurn("done"),
    ]);
    const { agent, approval, audit } = harness(places, model);

    const result = await agent.run("write them");

    expect(toolMessages(result.history)).toEqual(["w1", "w2", "e1", "w3", "w4", "e2"].map((id) => [id, HARD_DENY]));
    expect(approval.requests).toEqual([]);
    expect(audit.records.map((record) => [record.behavior, record.source, record.reason])).toEqual(
      Array.from({ length: 6 }, () => ["deny", "workspace-boundary", OUTSIDE]),
    );
    expect(treeOf(places.ws)).toEqual(insideBefore);
  });
});

describe.skipIf(!posix)("a shell call the user approves", () => {
  // Long output is cut, never saved: a `.agent` link to outside is a trap nothing walks into.
  it("an approved shell call printing 200 KB gives the model the first 50,000 characters and writes no file anywhere", async () => {
    const places = makePlaces();
    symlinkSync("../outside", join(places.ws, ".agent"));
    // Stands in for pwsh: prints 200 KB, past the 50,000-character cap.
    const executable = join(places.root, "fake-pwsh");
    writeFileSync(executable, `#!${process.execPath}\nprocess.stdout.write("x".repeat(200_000));\n`, {
      mode: 0o755,
    });
    const before = outsideTree(places.root);
    const approval = new CountingApproval(true);
    const model = new ScriptedModel([
      toolTurn(call("s1", "shell", { command: "Get-Content big.log" })),
      textTurn("done"),
    ]);
    const agent = chapterThreeAgent(
      model,
      places.ws,
      new PowerShellRunner({ executable }),
      approval,
      new RecordingAudit(),
    );

    const result = await agent.run("print a lot");

    expect(approval.requests).toHaveLength(1);
    expect(toolMessages(result.history)).toEqual([["s1", `${"x".repeat(50_000)}\n[output truncated]`]]);
    expect(readdirSync(places.ws).sort()).toEqual([".agent", "inside.txt", "sub"]);
    expect(outsideTree(places.root)).toEqual(before);
  });
});
