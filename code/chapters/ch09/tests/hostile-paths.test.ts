import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  linkSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { NodeWorkspaceFileSystem } from "../src/adapters/filesystem.js";
import { AgentRunner, type RunResult } from "../src/core/loop.js";
import { validateToolPairing } from "../src/core/messages.js";
import { PermissionPolicy } from "../src/core/permissions.js";
import { createChapterTwoTools } from "../src/features/builtin-tools.js";
import { CountingApproval, FakeCommandRunner } from "./support/fakes.js";
import { call, ScriptedModel, textTurn, toolMessages, toolTurn } from "./support/scripted-model.js";
import { globInChild, type ChildGlob } from "./support/glob-child.js";
import { outsideTree } from "./support/outside-tree.js";

const SETUPS = [
  "link-out-dir",
  "link-out-dir-abs",
  "link-out-file",
  "chain",
  "dangling-out",
  "link-up",
  "link-root",
  "loop",
  "nested-link-out",
  "link-in",
  "link-self",
  "prefix-sibling",
  "link-to-ws",
  "fifo",
  "hard-link-out",
  "hard-link-in",
] as const;
type Setup = (typeof SETUPS)[number];

/** One hostile read_file or glob call, kept as data in fixtures/hostile-paths.json. */
const HostileCall = z.strictObject({
  id: z.string().min(1),
  /** The test name: what the call tries and what must happen. */
  why: z.string().min(1),
  tool: z.enum(["read_file", "glob"]),
  /** JSON text as the model sends it (kept verbatim: duplicate keys, bad JSON), or an object to serialise. */
  arguments: z.union([z.string(), z.record(z.string(), z.unknown())]),
  /** The error code of the tool message, or `allowed-inside` for a call that legitimately stays inside. */
  expect: z.enum([
    "path_escape",
    "file_not_found",
    "invalid_path",
    "filesystem_error",
    "invalid_arguments",
    "invalid_json",
    "allowed-inside",
  ]),
  /** The whole tool message, where the code alone does not say it. */
  message: z.string().optional(),
  setup: z.enum(SETUPS).optional(),
  callId: z.string().optional(),
});
type HostileCall = z.infer<typeof HostileCall>;

const corpus: readonly HostileCall[] = z
  .array(HostileCall)
  .parse(JSON.parse(readFileSync(new URL("./fixtures/hostile-paths.json", import.meta.url), "utf8")));

const SECRET = `secret-${randomBytes(16).toString("hex")}`;
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
  const root = realpathSync(mkdtempSync(join(tmpdir(), "ch02-hostile-")));
  roots.push(root);
  const ws = join(root, "ws");
  const outside = join(root, "outside");
  mkdirSync(join(ws, "sub"), { recursive: true });
  mkdirSync(outside);
  mkdirSync(join(root, "ws-sibling"));
  writeFileSync(join(ws, "inside.txt"), "inside content\n");
  writeFileSync(join(ws, "sub", "nested.txt"), "nested content\n");
  writeFileSync(join(outside, "secret.txt"), `${SECRET}\n`);
  // A name that carries the secret too: a glob that lists outside names gives itself away.
  writeFileSync(join(outside, `${SECRET}.txt`), "decoy\n");
  writeFileSync(join(root, "ws-sibling", "f.txt"), `${SECRET}\n`);
  return { root, ws, outside };
}

/** Builds a link layout; returns a way to unblock a call the layout can block, if any. */
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
        // Opening the write end lets a reader blocked in open() go on.
        const fd = openSync(pipe, constants.O_RDWR | constants.O_NONBLOCK);
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

/** A model-supplied path or pattern as the tools quote it: at most 200 characters, then `…`. */
const shown = (text: string): string => (text.length <= 200 ? text : `${text.slice(0, 200)}…`);

/**
 * The whole tool message the call must get, or for invalid_arguments the part of it that is ours
 * (Zod words the rest; ch02-files.test.ts holds those texts).
 */
function expectedMessage(hostile: HostileCall, args: string): { whole: string } | { startsWith: string } {
  if (hostile.message !== undefined) return { whole: hostile.message };
  if (hostile.expect === "invalid_json") {
    return { whole: `Error [invalid_json]: Arguments of ${hostile.tool} must be a JSON object` };
  }
  if (hostile.expect === "invalid_arguments") {
    return { startsWith: `Error [invalid_arguments]: Invalid arguments for ${hostile.tool}: ` };
  }
  // The last of duplicate keys wins, as JSON.parse reads it: that is the value the tool saw.
  const parsed = JSON.parse(args) as { path?: string; pattern?: string };
  const named = shown(hostile.tool === "glob" ? String(parsed.pattern) : String(parsed.path));
  switch (hostile.expect) {
    case "path_escape":
      return { whole: `Error [path_escape]: Path escapes workspace: ${named}` };
    case "file_not_found":
      return { whole: `Error [file_not_found]: File not found: ${named}` };
    case "filesystem_error":
      return {
        whole: `Error [filesystem_error]: Could not list files: ${named} (the pattern is longer than 1000 characters)`,
      };
    default:
      throw new Error(`case ${hostile.id} needs a message`);
  }
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

/** One case through chapter 2's real agent: the loop, the registry, the file tools and the real file system. */
async function checkCase(hostile: HostileCall): Promise<void> {
  const places = makePlaces();
  const release = hostile.setup === undefined ? undefined : buildSetup(hostile.setup, places);
  const before = outsideTree(places.root);
  const id = expand(hostile.callId ?? hostile.id, places);
  const args = argumentsText(hostile, places);
  const model = new ScriptedModel([toolTurn(call(id, hostile.tool, args)), textTurn("done")]);
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

  const result = await runWithin(agent, release === undefined ? 10_000 : 1_000, release);

  // The call is answered once, paired with its id, and the run goes on to its final answer.
  expect(result.finalText).toBe("done");
  expect(() => validateToolPairing(result.history)).not.toThrow();
  const messages = toolMessages(result.history);
  expect(messages.map(([callId]) => callId)).toEqual([id]);
  const content = messages[0]?.[1] ?? "";
  const expected = expectedMessage(hostile, args);
  if ("whole" in expected) expect(content).toBe(expected.whole);
  else expect(content.startsWith(expected.startsWith)).toBe(true);
  if (hostile.expect === "allowed-inside") expect(content.startsWith("Error [")).toBe(false);

  // Nothing beside the workspace was created, changed or read into the conversation.
  expect(outsideTree(places.root)).toEqual(before);
  expect(JSON.stringify(result.history).includes(SECRET)).toBe(false);
  expect(approval.requests).toEqual([]);
  expect(runner.calls).toEqual([]);

  if (hostile.tool === "glob" && !content.startsWith("Error [") && content !== "(no matches)") {
    for (const line of content.split("\n")) {
      expect(realpathSync(join(places.ws, line)).startsWith(places.ws + sep)).toBe(true);
    }
  }
}

const runnable = corpus.filter((hostile) => posix || hostile.setup === undefined);

describe("hostile read_file and glob paths through chapter 2's loop", () => {
  it("the corpus holds at least 240 cases with unique ids and names, each read_file or glob", () => {
    expect(corpus.length).toBeGreaterThanOrEqual(240);
    expect(new Set(corpus.map((hostile) => hostile.id)).size).toBe(corpus.length);
    expect(new Set(corpus.map((hostile) => hostile.why)).size).toBe(corpus.length);
    expect(new Set(corpus.map((hostile) => hostile.tool))).toEqual(new Set(["read_file", "glob"]));
  });

  it("every refusal of the path rules is path_escape: no chapter 3 or older code is left in the corpus", () => {
    const codes = new Set(corpus.map((hostile) => hostile.expect));
    expect(codes).toEqual(
      new Set([
        "path_escape",
        "file_not_found",
        "invalid_path",
        "filesystem_error",
        "invalid_arguments",
        "invalid_json",
        "allowed-inside",
      ]),
    );
    expect(corpus.filter((hostile) => hostile.expect === "invalid_path").map((hostile) => hostile.id)).toEqual([
      "read-fifo",
      "read-folder",
    ]);
  });

  it.each(runnable.map((hostile): [string, HostileCall] => [hostile.why, hostile]))("%s", async (_why, hostile) => {
    await checkCase(hostile);
  });
});

let childRoot = "";
let children: Record<"control" | "braces" | "long", Promise<ChildGlob>> | undefined;

// Started before every other test of this file, so their waits overlap the corpus instead of adding to it.
beforeAll(() => {
  childRoot = realpathSync(mkdtempSync(join(tmpdir(), "ch02-hostile-glob-")));
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

describe("glob patterns that would expand without bound", () => {
  const outcome = (name: "control" | "braces" | "long"): Promise<ChildGlob> => {
    if (children === undefined) throw new Error("children were not started");
    return children[name];
  };

  it("a plain pattern answers in the same child-process harness", async () => {
    expect(await outcome("control")).toEqual({ killed: false, out: 'answered ["sub/a.txt"]' });
  });

  // Brace expansion is off (only *, **, ? and [...]): the braces are literal characters and match nothing.
  it("a brace-expanding glob pattern of 18 characters is answered or refused within 4 seconds", async () => {
    expect(await outcome("braces")).toEqual({ killed: false, out: "answered []" });
  });

  // Patterns over MAX_GLOB_PATTERN_CHARS are refused before fast-glob sees them.
  it("a 200 KB glob pattern of */ is answered or refused within 4 seconds", async () => {
    expect(await outcome("long")).toEqual({
      killed: false,
      out: "refused FileSystemOperationError: the pattern is longer than 1000 characters",
    });
  });
});
