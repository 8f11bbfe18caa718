import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { NodeWorkspaceFileSystem } from "../src/adapters/filesystem.js";
import { PowerShellRunner } from "../src/adapters/powershell.js";
import { buildAgent } from "../src/bootstrap.js";
import type { AgentRunner, RunResult } from "../src/core/loop.js";
import { validateToolPairing } from "../src/core/messages.js";
import type { AuditSink, PermissionDecision, PermissionRequest } from "../src/core/permissions.js";
import { P03 } from "../src/core/profiles.js";
import type { WorkspaceFileSystem } from "../src/core/workspace-fs.js";
import { CountingApproval, FakeCommandRunner, type SeenApproval } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";

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
  "link-self",
  "prefix-sibling",
  "link-to-ws",
  "fifo",
] as const;
type Setup = (typeof SETUPS)[number];

/** One hostile tool call, kept as data in fixtures/hostile-calls.json. */
const HostileCall = z.strictObject({
  id: z.string().min(1),
  /** The test name: what the call tries and what must happen. */
  why: z.string().min(1),
  tool: z.enum(["write_file", "edit_file", "read_file", "glob", "shell", "<unknown>"]),
  /** The function name the model sends when `tool` is `<unknown>`. */
  name: z.string().optional(),
  /** JSON text as the model sends it (kept verbatim: duplicate keys, bad JSON), or an object to serialise. */
  arguments: z.union([z.string(), z.record(z.string(), z.unknown())]),
  /** The error code of the tool message, or `allowed-inside` for a call that legitimately stays inside. */
  expect: z.string().min(1),
  /** The whole tool message, where it is stable. */
  message: z.string().optional(),
  /** Workspace-relative file an allowed write or edit must have produced. */
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
const HARD_DENY = "Error [permission_denied]: Writing outside the workspace is forbidden";
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
    case "link-self":
      link(".", "self");
      return undefined;
    case "prefix-sibling":
      link(join(root, "ws-sibling"), "ps");
      return undefined;
    case "link-to-ws":
      link("..", join("sub", "back"));
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

/** What the policy must have done: how many approvals were asked, and what was audited. */
function expectedPolicy(hostile: HostileCall): { approvals: number; audit: [string, string][] } {
  if (hostile.tool === "<unknown>" || PREPARE_CODES.has(hostile.expect)) return { approvals: 0, audit: [] };
  if (hostile.tool === "shell") return { approvals: 1, audit: [["deny", "user"]] };
  if (WRITE_TOOLS.has(hostile.tool)) {
    return hostile.expect === "permission_denied"
      ? { approvals: 0, audit: [["deny", "workspace-boundary"]] }
      : { approvals: 1, audit: [["allow", "user"]] };
  }
  return { approvals: 0, audit: [["allow", "default"]] };
}

interface Harness {
  readonly agent: AgentRunner;
  readonly approval: CountingApproval;
  readonly audit: RecordingAudit;
  readonly runner: FakeCommandRunner;
}

/** The real P03 agent: real registry, tools and filesystem; every ask is allowed except the shell. */
function harness(places: Places, model: ScriptedModel, fileSystem?: WorkspaceFileSystem): Harness {
  const approval = new CountingApproval((seen: SeenApproval) => seen.toolName !== "shell");
  const audit = new RecordingAudit();
  const runner = new FakeCommandRunner();
  const agent = buildAgent(P03, {
    model,
    workspace: places.ws,
    commandRunner: runner,
    approvalProvider: approval,
    auditSink: audit,
    ...(fileSystem === undefined ? {} : { fileSystem }),
  });
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
  const name = hostile.tool === "<unknown>" ? expand(hostile.name ?? "", places) : hostile.tool;
  const id = expand(hostile.callId ?? hostile.id, places);
  const args = argumentsText(hostile, places);
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
  if (hostile.message !== undefined) expect(content).toBe(hostile.message);

  // Nothing beside the workspace was created, changed or read into the conversation.
  expect(outsideTree(places.root)).toEqual(before);
  expect(JSON.stringify(result.history).includes(SECRET)).toBe(false);
  expect(JSON.stringify(audit.records).includes(SECRET)).toBe(false);

  const policy = expectedPolicy(hostile);
  expect(approval.requests.length).toBe(policy.approvals);
  expect(audit.records.map((record) => [record.behavior, record.source])).toEqual(policy.audit);
  expect(audit.records.every((record) => record.tool === name)).toBe(true);
  expect(runner.calls).toEqual([]);

  if (hostile.lands !== undefined) {
    const landed = join(places.ws, hostile.lands);
    expect(realpathSync(landed).startsWith(places.ws + sep)).toBe(true);
    const written = readFileSync(landed, "utf8");
    const parsed = JSON.parse(args) as Record<string, unknown>;
    if (hostile.tool === "write_file") expect(written).toBe(parsed.content);
    if (hostile.tool === "edit_file") expect(written).toContain(String(parsed.new_string));
  }
  if (hostile.tool === "glob" && !content.startsWith("Error [") && content !== "(no matches)") {
    for (const line of content.split("\n")) {
      expect(realpathSync(join(places.ws, line)).startsWith(places.ws + sep)).toBe(true);
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
  readText(path: string, page: { offset: number; limit: number }) {
    return this.inner.readText(path, page);
  }
  readWhole(path: string, maxBytes: number) {
    return this.inner.readWhole(path, maxBytes);
  }
  writeText(path: string, content: string) {
    if (!this.swapped) {
      this.swapped = true;
      this.swap();
    }
    return this.inner.writeText(path, content);
  }
  glob(pattern: string, limit: number) {
    return this.inner.glob(pattern, limit);
  }
}

/**
 * The real adapter with a concurrent attacker: right after its `n`th path check returns, `dir` becomes
 * a link to outside. It models another process winning a race between the check and the use.
 */
class RacedFileSystem extends NodeWorkspaceFileSystem {
  private checks = 0;
  constructor(
    workspace: string,
    private readonly swapAfterCheck: number,
    private readonly swap: () => void,
  ) {
    super(workspace);
  }
  override resolve(relative: string): string {
    const resolved = super.resolve(relative);
    this.checks += 1;
    if (this.checks === this.swapAfterCheck) this.swap();
    return resolved;
  }
}

function swapDirForOutsideLink({ ws }: Places): () => void {
  mkdirSync(join(ws, "dir", "sub"), { recursive: true });
  return () => {
    renameSync(join(ws, "dir"), join(ws, "dir-moved"));
    symlinkSync("../outside", join(ws, "dir"));
  };
}

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
    const fileSystem = new SwapBeforeFirstWrite(new NodeWorkspaceFileSystem(places.ws), swap);
    const { agent, approval, audit } = harness(places, model, fileSystem);

    const result = await agent.run("write two files");

    expect(toolMessages(result.history)).toEqual([
      ["w1", 'Error [path_escape]: path resolves outside the workspace: "dir/a.txt"'],
      ["w2", HARD_DENY],
    ]);
    expect(approval.requests.map((seen) => seen.arguments)).toEqual([{ path: "dir/a.txt", content: "pwned" }]);
    expect(audit.records.map((record) => [record.behavior, record.source])).toEqual([
      ["allow", "user"],
      ["deny", "workspace-boundary"],
    ]);
    expect(lstatSync(join(places.ws, "dir")).isSymbolicLink()).toBe(true);
    expect(outsideTree(places.root)).toEqual(before);
    expect(() => validateToolPairing(result.history)).not.toThrow();
  });

  async function racedRun(
    swapAfterCheck: number,
    tool: string,
    args: Record<string, string>,
  ): Promise<{ places: Places; before: ReturnType<typeof outsideTree>; result: RunResult }> {
    const places = makePlaces();
    const swap = swapDirForOutsideLink(places);
    const before = outsideTree(places.root);
    const model = new ScriptedModel([toolTurn(call("c1", tool, args)), textTurn("done")]);
    const { agent } = harness(places, model, new RacedFileSystem(places.ws, swapAfterCheck, swap));
    return { places, before, result: await agent.run("go") };
  }

  // Missing folders are made one level at a time, refusing links, so the swapped-in link is caught there.
  it("a folder swapped for an outside link between the write's first check and its mkdir creates no folder outside", async () => {
    const { places, before, result } = await racedRun(1, "write_file", { path: "dir/sub/x.txt", content: "pwned" });
    expect(toolMessages(result.history)[0]?.[1]).toMatch(/^Error \[path_escape\]: /);
    expect(outsideTree(places.root)).toEqual(before);
  });

  // The documented limit (docs/security.md): Node has no openat, so a folder swapped after the last check is
  // followed by open(O_CREAT). The opened file is then located (/proc/self/fd), found outside, and removed before
  // anything is written: no content lands outside and no file stays, though the outside folder's times change.
  it("a folder swapped for an outside link between the write's re-check and its open leaves no file outside", async () => {
    const { places, before, result } = await racedRun(2, "write_file", { path: "dir/x.txt", content: "pwned" });
    expect(toolMessages(result.history)[0]?.[1]).toMatch(/^Error \[path_escape\]: /);
    const timeless = (tree: ReturnType<typeof outsideTree>) =>
      tree.entries.map(({ mtimeMs: _m, ctimeMs: _c, ...rest }) => rest);
    const after = outsideTree(places.root);
    expect(after.listing).toEqual(before.listing);
    expect(timeless(after)).toEqual(timeless(before));
  });

  // O_CREAT|O_EXCL first: an outside file reached through the swap already exists, so it is never taken for
  // one this call created, never truncated (no O_TRUNC) and never removed.
  it("a folder swapped for an outside link before the open leaves an existing outside file exactly as it was", async () => {
    const { places, before, result } = await racedRun(2, "write_file", { path: "dir/secret.txt", content: "pwned" });
    expect(toolMessages(result.history)[0]?.[1]).toMatch(/^Error \[path_escape\]: /);
    expect(readFileSync(join(places.outside, "secret.txt"), "utf8")).toBe(`${SECRET}\n`);
    expect(outsideTree(places.root)).toEqual(before);
  });

  // The opened file is located after the open (/proc/self/fd, or its device and inode) and refused when outside.
  it("a folder swapped for an outside link between a read's check and its open does not leak the outside file", async () => {
    const { result } = await racedRun(1, "read_file", { path: "dir/secret.txt" });
    expect(JSON.stringify(result.history).includes(SECRET)).toBe(false);
    expect(toolMessages(result.history)[0]?.[1]).toMatch(/^Error \[/);
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
    const agent = buildAgent(P03, {
      model,
      workspace: places.ws,
      commandRunner: new PowerShellRunner({ executable }),
      approvalProvider: approval,
      auditSink: new RecordingAudit(),
    });

    const result = await agent.run("print a lot");

    expect(approval.requests).toHaveLength(1);
    expect(toolMessages(result.history)).toEqual([["s1", `${"x".repeat(50_000)}\n[output truncated]`]]);
    expect(readdirSync(places.ws).sort()).toEqual([".agent", "inside.txt", "sub"]);
    expect(outsideTree(places.root)).toEqual(before);
  });
});

interface ChildGlob {
  readonly killed: boolean;
  readonly out: string;
}

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const adapterUrl = pathToFileURL(fileURLToPath(new URL("../src/adapters/filesystem.ts", import.meta.url))).href;

/** Runs one glob in a child process, so a pattern that blocks the event loop cannot block the tests. */
function globInChild(ws: string, pattern: string, limitMs: number): Promise<ChildGlob> {
  const script = join(ws, "..", `glob-${randomBytes(4).toString("hex")}.mts`);
  writeFileSync(
    script,
    [
      `import { NodeWorkspaceFileSystem } from ${JSON.stringify(adapterUrl)};`,
      `const fs = new NodeWorkspaceFileSystem(${JSON.stringify(ws)});`,
      `try { await fs.glob(${JSON.stringify(pattern)}, 1000); process.stdout.write("answered"); }`,
      `catch (error) { process.stdout.write("refused " + String(error?.name)); }`,
    ].join("\n"),
  );
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", tsx, script], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    let killed = false;
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    const timer = setTimeout(() => {
      killed = true;
      child.kill("SIGKILL");
    }, limitMs);
    child.on("error", reject);
    child.on("close", () => {
      clearTimeout(timer);
      resolve({ killed, out });
    });
  });
}

let childRoot = "";
let children: Record<"control" | "braces" | "long", Promise<ChildGlob>> | undefined;

// Started before every other test of this file, so their waits overlap the corpus instead of adding to it.
beforeAll(() => {
  childRoot = realpathSync(mkdtempSync(join(tmpdir(), "ch03-hostile-glob-")));
  const ws = join(childRoot, "ws");
  mkdirSync(join(ws, "sub"), { recursive: true });
  writeFileSync(join(ws, "sub", "a.txt"), "a");
  children = {
    control: globInChild(ws, "**/*.txt", 20_000),
    braces: globInChild(ws, "{1..1000}{1..1000}", 4_000),
    long: globInChild(ws, "*/".repeat(100_000), 4_000),
  };
});
afterAll(async () => {
  if (children !== undefined) await Promise.all(Object.values(children));
  rmSync(childRoot, { recursive: true, force: true });
});

describe("glob patterns that expand without bound", () => {
  const outcome = (name: "control" | "braces" | "long"): Promise<ChildGlob> => {
    if (children === undefined) throw new Error("children were not started");
    return children[name];
  };

  it("a plain pattern answers in the same child-process harness", async () => {
    expect(await outcome("control")).toEqual({ killed: false, out: "answered" });
  });

  // Brace expansion is off (SPEC §6 names only *, **, ? and [...]): the braces are literal characters.
  it("a brace-expanding glob pattern of 18 characters is answered or refused within 4 seconds", async () => {
    const result = await outcome("braces");
    expect(result.killed).toBe(false);
    expect(result.out).toMatch(/^(answered|refused )/);
  });

  // Patterns over MAX_GLOB_PATTERN_CHARS are refused before fast-glob sees them.
  it("a 200 KB glob pattern of */ is answered or refused within 4 seconds", async () => {
    const result = await outcome("long");
    expect(result.killed).toBe(false);
    expect(result.out).toMatch(/^(answered|refused )/);
  });
});
