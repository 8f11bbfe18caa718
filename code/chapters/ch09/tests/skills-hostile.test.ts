import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs, {
  closeSync,
  constants,
  linkSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import fsp, { open } from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Worker } from "node:worker_threads";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { YAMLMap } from "yaml";
import { toolCall } from "../src/core/messages.js";
import { ToolRegistry, type ToolContext, type ToolResult, type ValidToolCall } from "../src/core/tools.js";
import {
  LOAD_SKILL_TOOL_NAME,
  MAX_FRONTMATTER_BYTES,
  MAX_FRONTMATTER_DEPTH,
  MAX_SCAN_FRONTMATTER_BYTES,
  MAX_SKILL_FILE_BYTES,
  SkillError,
  SkillRegistry,
} from "../src/features/skills.js";

// CH07.md §6, row by row: the workspace's `skills/` folder is the attacker's, and each bound the registry promises
// is tried here with real files, real links, FIFOs, sockets and hard links in a temporary workspace. Where a race
// is needed, one builtin call the registry makes is hooked (synced into the builtin's ESM exports, as skills.test
// does) and the swap happens right after it, so the step that must catch it is the registry's own.

const POSIX = process.platform !== "win32";
const SECRET = `secret-${randomBytes(16).toString("hex")}`;
const PATH_ESCAPE = "Error [skill_path_escape]: Registered Skill path is no longer safe";
const INVALID_SKILL = "Error [invalid_skill]: Registered Skill manifest is invalid";
const INVALID = "Error [invalid_arguments]: Invalid arguments for load_skill: ";

let base: string;
let ws: string;
let outside: string;
const fifos: string[] = [];
const servers: Server[] = [];

beforeEach(() => {
  // Real paths: the registry compares real paths, and the temp folder may itself be reached through a link.
  base = realpathSync(mkdtempSync(join(tmpdir(), "skills-hostile-")));
  ws = join(base, "ws");
  outside = join(base, "outside");
  mkdirSync(ws);
  mkdirSync(outside);
});

afterEach(async () => {
  vi.restoreAllMocks();
  syncBuiltinESMExports();
  // A reader stuck on a FIFO (a regression) is released by a writer, so no thread pool slot stays blocked.
  for (const fifo of fifos.splice(0)) {
    try {
      closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // No reader is waiting: nothing to release.
    }
  }
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  rmSync(base, { recursive: true, force: true });
});

/** `<root>/skills/<folder>/SKILL.md` with exactly these bytes. */
function writeManifest(folder: string, content: string | Uint8Array, root = ws): string {
  const path = join(root, "skills", folder, "SKILL.md");
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
  return path;
}

/** A manifest whose frontmatter lines are `lines` and whose body is `body`. */
const manifest = (lines: string, body = "body\n"): string => `---\n${lines}\n---\n${body}`;

/** A valid Skill `name` with `body`. */
const writeSkill = (name: string, body = `${name} body\n`, root = ws): string =>
  writeManifest(name, manifest(`name: ${name}\ndescription: ok`, body), root);

function catching(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** `[class, message]` of what a scan of the workspace threw, or `registered` with the names. */
function scanned(options?: Parameters<typeof SkillRegistry.scan>[1]): [string, string] | ["registered", string[]] {
  try {
    return ["registered", [...SkillRegistry.scan(ws, options).names]];
  } catch (error) {
    return error instanceof Error ? [error.constructor.name, error.message] : ["thrown", String(error)];
  }
}

const manifestError = (message: string): [string, string] => ["SkillManifestError", message];
const pathError = (message: string): [string, string] => ["SkillPathError", message];

/** load_skill through a real ToolRegistry, its handler counted (the registry's own definition is frozen). */
function loadTool(registry: SkillRegistry): {
  call: (argumentsJson: string) => Promise<ToolResult>;
  tools: ToolRegistry;
  handled: () => number;
} {
  let runs = 0;
  const tools = new ToolRegistry();
  const { handler } = registry.toolDefinition;
  tools.register({
    ...registry.toolDefinition,
    handler: (input: Parameters<typeof handler>[0], context: ToolContext) => {
      runs += 1;
      return handler(input, context);
    },
  });
  return {
    tools,
    handled: () => runs,
    call: async (argumentsJson) => {
      const prepared = tools.prepare(toolCall("skill-1", LOAD_SKILL_TOOL_NAME, argumentsJson));
      if (prepared.error !== undefined) return prepared.error;
      return tools.invoke(prepared, { workspace: ws, identity: "user" });
    },
  };
}

const load = async (registry: SkillRegistry, name: string): Promise<ToolResult> =>
  loadTool(registry).call(JSON.stringify({ name }));

/** Every way the yaml library could talk on its own: stdout, stderr, a process warning, the console. */
function quietly<T>(action: () => T): { value: T; spoken: number } {
  const spies = [
    vi.spyOn(process.stderr, "write").mockImplementation(() => true),
    vi.spyOn(process.stdout, "write").mockImplementation(() => true),
    vi.spyOn(process, "emitWarning").mockImplementation(() => undefined),
    vi.spyOn(console, "warn").mockImplementation(() => undefined),
    vi.spyOn(console, "log").mockImplementation(() => undefined),
    vi.spyOn(console, "error").mockImplementation(() => undefined),
  ];
  try {
    const value = action();
    return { value, spoken: spies.reduce((sum, spy) => sum + spy.mock.calls.length, 0) };
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

/** What a scan threw that is no SkillError, as the CLI would print it. */
const crash = (error: unknown): string => (error instanceof Error ? `${error.name}: ${error.message}` : "a non-Error");

function mkfifo(path: string): void {
  execFileSync("mkfifo", [path]);
  fifos.push(path);
}

/** Runs `after` right after the registry resolves `watched` with realpathSync.native, the first time only. */
function afterResolvingSync(watched: string, after: () => void): () => number {
  const original = realpathSync.native;
  let fired = 0;
  vi.spyOn(realpathSync, "native").mockImplementation(((path: string) => {
    const real = original(path);
    if (path === watched && fired === 0) {
      fired += 1;
      after();
    }
    return real;
  }) as typeof realpathSync.native);
  return () => fired;
}

/**
 * The swapping worker: `dir` moved aside and a ready link renamed into its place, then back, a whole cycle at a
 * time until `flags[0]` is set. Only this thread renames, so every step succeeds and the stop leaves `dir` as it was.
 */
const SWAPPER = `
const { workerData, parentPort } = require("node:worker_threads");
const { renameSync, symlinkSync } = require("node:fs");
const { flags, dir, aside, link, target } = workerData;
symlinkSync(target, link);
let swaps = 0;
while (Atomics.load(flags, 0) === 0) {
  renameSync(dir, aside);
  renameSync(link, dir);
  swaps += 1;
  renameSync(dir, link);
  renameSync(aside, dir);
}
parentPort.postMessage(swaps);
`;

/** Moves `skills/<folder>` aside and puts a link to `target` in its place. */
function swapForLink(folder: string, target: string): void {
  renameSync(join(ws, "skills", folder), join(ws, `${folder}-moved`));
  symlinkSync(target, join(ws, "skills", folder), "dir");
}

describe("31: frontmatter with no closing --- within 65,536 bytes", () => {
  it("all Skills' frontmatter together is bounded: 17 of 64 KiB pass 1 MiB and the scan refuses them", () => {
    // Each alone is valid; 1,000 of them would be 64 MiB of YAML to parse before the first model call.
    for (let index = 0; index < 17; index += 1) {
      const name = `s${String(index).padStart(2, "0")}`;
      writeManifest(name, `---\nname: ${name}\ndescription: ok\n#${"x".repeat(64_000)}\n---\nbody\n`);
    }
    expect(MAX_SCAN_FRONTMATTER_BYTES).toBe(1024 * 1024);
    expect(scanned()).toEqual(manifestError("Skill frontmatter totals more than 1048576 bytes in skills"));
  });

  it("a manifest with no second --- in its first 65,536 bytes is refused having read at most 64 KiB + 4 KiB", () => {
    // One megabyte of frontmatter-looking lines and never a closing line: the scan must stop, not read on.
    writeManifest("big", `---\nname: big\ndescription: ok\n${"# line\n".repeat(150_000)}`);
    const readSync = vi.spyOn(fs, "readSync");
    syncBuiltinESMExports();
    const result = scanned();
    vi.restoreAllMocks();
    syncBuiltinESMExports();

    expect(result).toEqual(manifestError("Skill frontmatter is larger than 65536 bytes: skills/big/SKILL.md"));
    const bytesRead = readSync.mock.results.reduce((sum, { value }) => sum + (value as number), 0);
    expect(bytesRead).toBeLessThanOrEqual(MAX_FRONTMATTER_BYTES + 4_096);
  });

  it("a closing --- that starts one byte past 65,536 is refused; at exactly 65,536 bytes of frontmatter it scans", () => {
    // The frontmatter is every byte before the closing line, the opening line included.
    const head = "---\nname: edge\ndescription: ok\n";
    const padTo = (bytes: number): string => `${head}#${"x".repeat(bytes - head.length - 2)}\n`;
    expect(Buffer.byteLength(padTo(MAX_FRONTMATTER_BYTES))).toBe(MAX_FRONTMATTER_BYTES);

    writeManifest("edge", `${padTo(MAX_FRONTMATTER_BYTES)}---\nbody\n`);
    expect(scanned()).toEqual(["registered", ["edge"]]);
    writeManifest("edge", `${padTo(MAX_FRONTMATTER_BYTES + 1)}---\nbody\n`);
    expect(scanned()).toEqual(manifestError("Skill frontmatter is larger than 65536 bytes: skills/edge/SKILL.md"));
    // Inside the last 4 KiB chunk the scan reads past the cap: a closing line there is still too far.
    writeManifest("edge", `${padTo(MAX_FRONTMATTER_BYTES + 3_000)}---\nbody\n`);
    expect(scanned()).toEqual(manifestError("Skill frontmatter is larger than 65536 bytes: skills/edge/SKILL.md"));
  });

  it("just under 64 KiB with no second --- at all is the book's missing closing delimiter", () => {
    const text = `---\nname: short\ndescription: ok\n`;
    writeManifest("short", `${text}${"# line\n".repeat(Math.floor((MAX_FRONTMATTER_BYTES - 100 - text.length) / 7))}`);
    expect(scanned()).toEqual(
      manifestError("Skill manifest has no closing frontmatter delimiter: skills/short/SKILL.md"),
    );
  });

  it("a valid frontmatter of about 60 KiB scans and its body loads", async () => {
    writeManifest("roomy", manifest(`name: roomy\ndescription: ok\nnotes: "${"n".repeat(60 * 1024)}"`, "roomy body\n"));
    const registry = SkillRegistry.scan(ws);
    expect(registry.catalogEntries).toEqual([{ name: "roomy", description: "ok" }]);
    expect(await load(registry, "roomy")).toEqual({ content: "roomy body\n", isError: false });
  });
});

describe("32: YAML is plain data, and the yaml library never speaks", () => {
  const NOT_YAML = "Skill frontmatter is not valid YAML: skills/alpha/SKILL.md";
  const NOT_STRINGS = "Skill frontmatter requires string name and description: skills/alpha/SKILL.md";
  const NOT_SCALAR_KEY = "Skill frontmatter has a key that is not a scalar: skills/alpha/SKILL.md";
  const TOO_DEEP = "Skill frontmatter nests deeper than 64 levels: skills/alpha/SKILL.md";
  const laughs = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
  for (let level = 1; level < 9; level += 1) {
    laughs.push(`l${level}: &l${level} [${Array.from({ length: 9 }, () => `*l${level - 1}`).join(",")}]`);
  }
  const ok = "name: alpha\ndescription: ok";
  const cases: [string, string, string][] = [
    ["a duplicate key", `${ok}\nname: alpha`, NOT_YAML],
    ["a duplicate key spelt with quotes", `${ok}\n"name": alpha`, NOT_YAML],
    ["a second document after ...", `${ok}\n...\nname: alpha\ndescription: second`, NOT_YAML],
    ["a !!js/function tag", "name: alpha\ndescription: !!js/function 'function () {}'", NOT_YAML],
    ["a custom !foo tag", "name: alpha\ndescription: !foo ok", NOT_YAML],
    ["an alias", "text: &a ok\nname: alpha\ndescription: *a", NOT_YAML],
    ["a billion-laughs document", `${ok}\n${laughs.join("\n")}`, NOT_YAML],
    ["[ nested 20,000 deep", `${ok}\ndeep: ${"[".repeat(20_000)}`, NOT_YAML],
    ["[ nested 20,000 deep and closed", `${ok}\ndeep: ${"[".repeat(20_000)}${"]".repeat(20_000)}`, NOT_YAML],
    ["{ nested 20,000 deep", `${ok}\ndeep: ${"{".repeat(20_000)}`, NOT_YAML],
    ["compact block sequences 25,000 deep", `${ok}\ndeep:\n  ${"- ".repeat(25_000)}x`, NOT_YAML],
    ["a %YAML 1.1 directive", `%YAML 1.1\n${ok}`, NOT_YAML],
    ["a %TAG directive", `%TAG !e! tag:example.com,2000:\n${ok}`, NOT_YAML],
    ["a merge key bringing the name", "<<: {name: alpha, description: ok}", NOT_STRINGS],
    ["a __proto__ key bringing the name", "__proto__: {name: alpha, description: ok}", NOT_STRINGS],
    ["a !!binary name", "name: !!binary YWxwaGE=\ndescription: ok", NOT_STRINGS],
    ["name true", "name: true\ndescription: ok", NOT_STRINGS],
    ["description true", "name: alpha\ndescription: true", NOT_STRINGS],
    ["28 nested explicit keys", `${ok}\n${"? ".repeat(28)}x`, NOT_SCALAR_KEY],
    ["28 nested explicit keys under a value", `${ok}\nmeta:\n  ${"? ".repeat(28)}x`, NOT_SCALAR_KEY],
    ["a flow list as a key", `${ok}\n? [a]\n: 1`, NOT_SCALAR_KEY],
    ["a flow mapping as a key inside a list", `${ok}\nlist: [{a: 1}: 1]`, NOT_SCALAR_KEY],
    ["an alias as a key", `${ok}\nx: &k a\n? *k\n: 1`, NOT_YAML],
    ["lists nested 64 deep under the mapping", `${ok}\ndeep: ${"[".repeat(64)}${"]".repeat(64)}`, TOO_DEEP],
    ["a number key and its string spelling", `${ok}\n1: a\n"1": b`, NOT_YAML],
  ];

  for (const [what, lines, message] of cases) {
    it(`${what}: ${message.split(":")[0] ?? ""}, and nothing written to stdout, stderr or as a warning`, () => {
      writeManifest("alpha", manifest(lines));
      const { value, spoken } = quietly(() => scanned());
      expect(value).toEqual(manifestError(message));
      expect(spoken).toBe(0);
    });
  }

  it("a __proto__ key sets no prototype: the name is read from own keys and Object.prototype is untouched", async () => {
    writeManifest("alpha", manifest(`${ok}\n__proto__: {polluted: yes, name: other}`));
    const { value: registry, spoken } = quietly(() => SkillRegistry.scan(ws));
    expect(spoken).toBe(0);
    expect(registry.catalogEntries).toEqual([{ name: "alpha", description: "ok" }]);
    expect((Object.prototype as Record<string, unknown>).polluted).toBeUndefined();
    expect(await load(registry, "alpha")).toEqual({ content: "body\n", isError: false });
  });

  it("an anchor without an alias and a plain merge-looking key are harmless data", () => {
    writeManifest("alpha", manifest(`name: &n alpha\ndescription: ok\n<<: {x: 1}`));
    expect(quietly(() => scanned())).toEqual({ value: ["registered", ["alpha"]], spoken: 0 });
  });

  it("28 and 30 nested explicit keys are refused in milliseconds, and no key is ever turned into text", () => {
    // Before, the duplicate-key check stringified each key, doubling per level: 1.2 GB and 12 s for 28 levels.
    const stringified = vi.spyOn(YAMLMap.prototype, "toString");
    for (const levels of [28, 30]) {
      writeManifest("alpha", manifest(`${ok}\n${"? ".repeat(levels)}x`));
      const started = performance.now();
      expect(scanned()).toEqual(manifestError(NOT_SCALAR_KEY));
      expect(performance.now() - started).toBeLessThan(1_000);
    }
    expect(stringified).not.toHaveBeenCalled();
  });

  it("lists and mappings nested 64 levels deep, the frontmatter's own mapping counted, scan", () => {
    writeManifest("alpha", manifest(`${ok}\ndeep: ${"[".repeat(62)}{a: 1}${"]".repeat(62)}`));
    expect(scanned()).toEqual(["registered", ["alpha"]]);
    expect(MAX_FRONTMATTER_DEPTH).toBe(64);
  });

  it("each worst 64 KiB shape is decided in bounded time: refused, or parsed once and scanned", () => {
    const fill = (head: string, unit: string, tail = ""): string =>
      `${head}${unit.repeat(Math.floor((MAX_FRONTMATTER_BYTES - 100 - head.length - tail.length) / unit.length))}${tail}`;
    const shapes: [string, string, ReturnType<typeof scanned>][] = [
      ["nested explicit keys", fill("", "? ", "x"), manifestError(NOT_YAML)],
      ["nested flow lists", fill("deep: ", "[", "]"), manifestError(NOT_YAML)],
      ["one flow list of one-letter items", fill("list: [", "a,", "a]"), ["registered", ["alpha"]]],
      ["a block list of empty mappings", fill("list:\n", "- {}\n"), ["registered", ["alpha"]]],
      ["6,000 keys", Array.from({ length: 6_000 }, (_, key) => `k${key}: v`).join("\n"), ["registered", ["alpha"]]],
      ["anchors on every item", fill("list: [", "&a b,", "b]"), ["registered", ["alpha"]]],
    ];
    for (const [what, yaml, expected] of shapes) {
      writeManifest("alpha", manifest(`${ok}\n${yaml}`));
      const started = performance.now();
      expect([what, scanned()]).toEqual([what, expected]);
      expect([what, performance.now() - started < 3_000]).toEqual([what, true]);
    }
  });

  it("a billion-laughs document written after the scan is invalid_skill at load, silently", async () => {
    writeSkill("alpha");
    const registry = SkillRegistry.scan(ws);
    writeManifest("alpha", manifest(`${ok}\n${laughs.join("\n")}`, `${SECRET}\n`));
    const stderr = vi.spyOn(process.stderr, "write");
    const warning = vi.spyOn(process, "emitWarning");
    expect(await load(registry, "alpha")).toEqual({
      content: INVALID_SKILL,
      isError: true,
      errorCode: "invalid_skill",
    });
    expect([stderr.mock.calls.length, warning.mock.calls.length]).toEqual([0, 0]);
  });
});

describe("33: a description is one line with no control character", () => {
  const ONE_LINE = "Skill description must be one non-empty line: skills/alpha/SKILL.md";
  const cases: [string, string][] = [
    ["a raw NUL", "a\u0000b"],
    ["a raw ESC", "a\u001b[31mb"],
    ["a raw NEL (U+0085)", "a\u0085b"],
    ["a raw LINE SEPARATOR (U+2028)", "a\u2028b"],
    ["a raw PARAGRAPH SEPARATOR (U+2029)", "a\u2029b"],
    ["a raw tab", "a\tb"],
    ["a raw DEL", "a\u007fb"],
    ["a raw C1 CSI (U+009B)", "a\u009b31mb"],
    ['a quoted "a\\0b"', '"a\\0b"'],
    ['a quoted "a\\Nb"', '"a\\Nb"'],
    ['a quoted "a\\eb"', '"a\\eb"'],
    ['a quoted "a\\Lb"', '"a\\Lb"'],
    ['a quoted "a\\Pb"', '"a\\Pb"'],
    ['a quoted "a\\tb"', '"a\\tb"'],
    ["a literal block of two lines", "|\n  one\n  two"],
    // Text a reader does not see but the model reads, and ill-formed text every request would carry.
    ["a quoted bidi override (U+202E)", '"x \\u202E gnp.exe"'],
    ["a raw zero-width space", "a\u200bb"],
    ["a quoted run of tag characters (U+E0049…)", '"ok\\U000E0049\\U000E0047\\U000E004E"'],
    ["a raw ZERO WIDTH NO-BREAK SPACE inside", "a\ufeffb"],
    ["a quoted lone surrogate (U+D800)", '"a\\uD800b"'],
    // One variation selector per byte: "hi\n" (0x68 0x69 0x0a) written as U+E0158 U+E0159 U+FE0A.
    ["an instruction hidden in variation selectors", "ok\u{e0158}\u{e0159}\ufe0a"],
    ["a quoted variation selector (U+FE0F) after a letter", '"ok\\uFE0F"'],
    ["a raw Hangul filler (U+3164)", "a\u3164b"],
    ["a raw combining grapheme joiner (U+034F)", "a\u034fb"],
    ["a quoted unassigned default-ignorable (U+E0FFF)", '"ok\\U000E0FFF"'],
  ];
  for (const [what, description] of cases) {
    it(`${what} is refused`, () => {
      writeManifest("alpha", manifest(`name: alpha\ndescription: ${description}`));
      expect(scanned()).toEqual(manifestError(ONE_LINE));
    });
  }

  it("every range of Default_Ignorable_Code_Point is refused at both ends, by the property and not a hand list", () => {
    const ends: number[] = [];
    const ignorable = (code: number): boolean => /\p{Default_Ignorable_Code_Point}/u.test(String.fromCodePoint(code));
    for (let code = 0; code <= 0x10ffff; code += 1) {
      if (ignorable(code) && (!ignorable(code - 1) || !ignorable(code + 1))) ends.push(code);
    }
    expect(ends.length).toBeGreaterThan(20);
    const accepted = ends.filter((code) => {
      const escape = `\\U${code.toString(16).padStart(8, "0")}`;
      writeManifest("alpha", manifest(`name: alpha\ndescription: "ok ${escape} ok"`));
      return scanned()[0] !== "SkillManifestError";
    });
    expect(accepted.map((code) => code.toString(16))).toEqual([]);
  });

  it("a folded > scalar becomes one line and scans", () => {
    writeManifest("alpha", manifest("name: alpha\ndescription: >\n  one\n  two\n"));
    expect(SkillRegistry.scan(ws).renderCatalog()).toBe("- **alpha**: one two");
  });
});

describe("34: a description of at most 1,024 characters", () => {
  it("1,025 characters are refused; exactly 1,024 scan", () => {
    writeManifest("alpha", manifest(`name: alpha\ndescription: ${"d".repeat(1_025)}`));
    expect(scanned()).toEqual(manifestError("Skill description is longer than 1024 characters: skills/alpha/SKILL.md"));
    writeManifest("alpha", manifest(`name: alpha\ndescription: ${"d".repeat(1_024)}`));
    expect(SkillRegistry.scan(ws).catalogEntries).toEqual([{ name: "alpha", description: "d".repeat(1_024) }]);
  });

  it("characters are code points: 1,024 astral characters scan, 1,025 do not", () => {
    writeManifest("alpha", manifest(`name: alpha\ndescription: ${"😀".repeat(1_024)}`));
    expect(scanned()).toEqual(["registered", ["alpha"]]);
    writeManifest("alpha", manifest(`name: alpha\ndescription: ${"😀".repeat(1_025)}`));
    expect(scanned()).toEqual(manifestError("Skill description is longer than 1024 characters: skills/alpha/SKILL.md"));
  });
});

describe("35: at most 1,000 entries in skills/", () => {
  it("1,000 Skill folders scan; a 1,001st entry of any kind is SkillPathError", () => {
    for (let index = 0; index < 1_000; index += 1) writeSkill(`s${String(index).padStart(4, "0")}`, "b\n");
    const registry = SkillRegistry.scan(ws);
    expect(registry.names).toHaveLength(1_000);
    expect(registry.catalogEntries).toHaveLength(100);
    // A plain file counts: the bound is on what the scan must look at, not on what turns out to be a Skill.
    writeFileSync(join(ws, "skills", "zz-extra.txt"), "");
    expect(scanned()).toEqual(pathError("Skills directory holds more than 1000 entries"));
  });
});

describe("36: at most 10 MiB of manifest at load", () => {
  it("a registered manifest grown to 10 MiB + 1 byte after the scan is invalid_skill; exactly 10 MiB loads", async () => {
    const path = writeSkill("alpha", "small\n");
    const registry = SkillRegistry.scan(ws);
    // Sparse: the size is real to every reader, the disk holds almost nothing.
    truncateSync(path, MAX_SKILL_FILE_BYTES + 1);
    expect(await load(registry, "alpha")).toEqual({
      content: INVALID_SKILL,
      isError: true,
      errorCode: "invalid_skill",
    });
    truncateSync(path, MAX_SKILL_FILE_BYTES);
    const result = await load(registry, "alpha");
    const head = manifest("name: alpha\ndescription: ok", "");
    expect([result.isError, result.content.length]).toEqual([false, MAX_SKILL_FILE_BYTES - head.length]);
    expect(result.content.startsWith("small\n\u0000")).toBe(true);
  });

  it("a manifest that grows between its size check and its read is invalid_skill, read no further than cap + 1", async () => {
    const path = writeSkill("alpha", "small\n");
    const registry = SkillRegistry.scan(ws);
    // The handle's class is reached through a handle of our own: the registry's stat and read are that class's.
    const probe = await open(path);
    const handleClass = Object.getPrototypeOf(probe) as {
      stat: (...args: unknown[]) => Promise<{ size: number }>;
      read: (...args: unknown[]) => Promise<{ bytesRead: number }>;
    };
    await probe.close();
    const stat = handleClass.stat;
    let stats = 0;
    // The confined open stats the handle first (is it a file, where); the size check is the second stat.
    vi.spyOn(handleClass, "stat").mockImplementation(async function (this: unknown, ...args: unknown[]) {
      const info = await stat.apply(this, args);
      stats += 1;
      if (stats === 2) truncateSync(path, MAX_SKILL_FILE_BYTES * 2);
      return info;
    });
    const read = vi.spyOn(handleClass, "read");

    expect(await load(registry, "alpha")).toEqual({
      content: INVALID_SKILL,
      isError: true,
      errorCode: "invalid_skill",
    });
    const results = await Promise.all(read.mock.results.map(({ value }) => value as Promise<{ bytesRead: number }>));
    const bytesRead = results.reduce((sum, { bytesRead }) => sum + bytesRead, 0);
    expect(stats).toBe(2);
    expect(bytesRead).toBe(MAX_SKILL_FILE_BYTES + 1);
  });
});

describe.skipIf(!POSIX)("37: FIFOs, sockets, hard links and swapped folders", () => {
  it("a FIFO named SKILL.md is refused at scan without ever waiting for a writer", () => {
    mkdirSync(join(ws, "skills", "alpha"), { recursive: true });
    const fifo = join(ws, "skills", "alpha", "SKILL.md");
    mkfifo(fifo);
    // A blocking open of a writer-less FIFO would hang this synchronous scan for good, where no timeout can
    // interrupt it: such an open is refused here instead, so a regression fails rather than hangs.
    const openSyncOriginal = fs.openSync;
    vi.spyOn(fs, "openSync").mockImplementation(((path: fs.PathLike, flags?: fs.OpenMode, mode?: fs.Mode) => {
      if (path === fifo && (typeof flags !== "number" || (flags & constants.O_NONBLOCK) === 0)) {
        throw new Error("the scan opened a FIFO in blocking mode");
      }
      return openSyncOriginal(path, flags ?? "r", mode);
    }) as typeof fs.openSync);
    syncBuiltinESMExports();
    expect(scanned()).toEqual(pathError("Skill manifest is not a regular file: skills/alpha/SKILL.md"));
  }, 5_000);

  it("a manifest replaced by a FIFO after the scan is skill_path_escape at load, and the load does not hang", async () => {
    const path = writeSkill("alpha");
    const registry = SkillRegistry.scan(ws);
    rmSync(path);
    mkfifo(path);
    expect(await load(registry, "alpha")).toEqual({
      content: PATH_ESCAPE,
      isError: true,
      errorCode: "skill_path_escape",
    });
  }, 5_000);

  it("a socket named SKILL.md is SkillPathError at scan", async () => {
    mkdirSync(join(ws, "skills", "alpha"), { recursive: true });
    const server = createServer();
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(join(ws, "skills", "alpha", "SKILL.md"), resolve));
    const result = scanned();
    expect(result[0]).toBe("SkillPathError");
    expect(result[1]).toMatch(
      /^Skill manifest (?:is not a regular file: skills\/alpha\/SKILL\.md|escapes its directory: alpha)$/,
    );
  });

  it("a hard-linked SKILL.md is refused at scan, and one hard-linked after the scan is skill_path_escape", async () => {
    const path = writeSkill("alpha", `${SECRET}\n`);
    linkSync(path, join(outside, "second-name.md"));
    expect(scanned()).toEqual(pathError("Skill manifest escapes its directory: alpha"));
    rmSync(join(outside, "second-name.md"));
    const registry = SkillRegistry.scan(ws);
    linkSync(path, join(outside, "second-name.md"));
    const result = await load(registry, "alpha");
    expect(result).toEqual({ content: PATH_ESCAPE, isError: true, errorCode: "skill_path_escape" });
  });

  it("a Skill folder swapped for a link to an outside folder after the scan is skill_path_escape; no outside body", async () => {
    writeSkill("alpha");
    writeSkill("alpha", `${SECRET}\n`, outside);
    const registry = SkillRegistry.scan(ws);
    swapForLink("alpha", join(outside, "skills", "alpha"));
    const result = await load(registry, "alpha");
    expect(result).toEqual({ content: PATH_ESCAPE, isError: true, errorCode: "skill_path_escape" });
    await expect(registry.loadSkill("alpha")).rejects.toThrow("Registered Skill path is no longer safe: skills/alpha");
  });

  it("a folder swapped for an outside link between the scan's manifest check and its open is refused", () => {
    writeSkill("alpha");
    writeSkill("alpha", `${SECRET}\n`, outside);
    const fired = afterResolvingSync(join(ws, "skills", "alpha", "SKILL.md"), () =>
      swapForLink("alpha", join(outside, "skills", "alpha")),
    );
    expect(scanned()).toEqual(pathError("Skill manifest escapes its directory: alpha"));
    expect(fired()).toBe(1);
  });

  it("a manifest swapped for an outside link, a FIFO or a hard link between the scan's check and its open is refused", () => {
    const manifestPath = writeSkill("alpha");
    writeFileSync(join(outside, "SKILL.md"), manifest("name: alpha\ndescription: outside"));
    const swaps: [() => void, [string, string]][] = [
      [
        () => symlinkSync(join(outside, "SKILL.md"), manifestPath),
        pathError("Skill manifest escapes its directory: alpha"),
      ],
      [() => mkfifo(manifestPath), pathError("Skill manifest is not a regular file: skills/alpha/SKILL.md")],
      [
        () => linkSync(join(outside, "SKILL.md"), manifestPath),
        pathError("Skill manifest escapes its directory: alpha"),
      ],
    ];
    for (const [swap, expected] of swaps) {
      writeSkill("alpha");
      const fired = afterResolvingSync(manifestPath, () => {
        rmSync(manifestPath);
        swap();
      });
      expect(scanned()).toEqual(expected);
      expect(fired()).toBe(1);
      vi.restoreAllMocks();
      rmSync(manifestPath);
    }
  });

  it("a folder swapped for an outside link between the load's manifest check and its open is skill_path_escape", async () => {
    writeSkill("alpha");
    writeSkill("alpha", `${SECRET}\n`, outside);
    const registry = SkillRegistry.scan(ws);
    // The load resolves with the promise API, imported by name: the spy reaches it through the synced exports.
    const watched = join(ws, "skills", "alpha", "SKILL.md");
    const realpath = fsp.realpath;
    let fired = 0;
    vi.spyOn(fsp, "realpath").mockImplementation(async (path: fs.PathLike) => {
      const real = await realpath(path);
      if (path === watched && fired === 0) {
        fired += 1;
        swapForLink("alpha", join(outside, "skills", "alpha"));
      }
      return real;
    });
    syncBuiltinESMExports();

    const result = await load(registry, "alpha");
    expect(fired).toBe(1);
    expect(result).toEqual({ content: PATH_ESCAPE, isError: true, errorCode: "skill_path_escape" });
    expect(JSON.stringify(result)).not.toContain(SECRET);
  });

  // Not hooked: a worker thread (its own OS thread) swaps the folder for the outside link and back as fast as it
  // can while loads run, so the swap lands on whichever step it lands on. Every load must be the inside body or
  // skill_path_escape; the outside body never.
  it("loads raced by a real concurrent swap of the folder for an outside link never return the outside body", async () => {
    writeSkill("alpha", "inside body\n");
    writeSkill("alpha", `${SECRET}\n`, outside);
    const registry = SkillRegistry.scan(ws);
    const tool = loadTool(registry);
    const flags = new Int32Array(new SharedArrayBuffer(8));
    const folder = join(ws, "skills", "alpha");
    const worker = new Worker(SWAPPER, {
      eval: true,
      workerData: {
        flags,
        dir: folder,
        aside: `${folder}-aside`,
        link: `${folder}-link`,
        target: join(outside, "skills", "alpha"),
      },
    });
    const swaps = new Promise<number>((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
    });
    const seen = new Map<string, number>();
    try {
      for (let round = 0; round < 200; round += 1) {
        const { content } = await tool.call(JSON.stringify({ name: "alpha" }));
        seen.set(content, (seen.get(content) ?? 0) + 1);
        expect([round, content.includes(SECRET)]).toEqual([round, false]);
      }
    } finally {
      Atomics.store(flags, 0, 1);
      expect(await swaps).toBeGreaterThan(0);
      await worker.terminate();
    }
    expect([...seen.keys()].filter((content) => content !== "inside body\n" && content !== PATH_ESCAPE)).toEqual([]);
    // The worker stops only after a whole cycle: the folder is back, and loads as before.
    expect(await load(registry, "alpha")).toEqual({ content: "inside body\n", isError: false });
  }, 60_000);

  // Another process may remove a Skill folder while the scan looks at it. The code skips one gone before its
  // lstat ("nothing to register"); gone one step later, it must still end as a SkillError (配置错误, no path) or
  // a skip, never a raw errno whose message holds the absolute path (意外错误, exit 1).
  it("a Skill folder removed right after the scan resolved it is a skip or a SkillError, never a raw errno", () => {
    writeSkill("alpha");
    const fired = afterResolvingSync(join(ws, "skills", "alpha"), () =>
      rmSync(join(ws, "skills", "alpha"), { recursive: true }),
    );
    const error = catching(() => SkillRegistry.scan(ws));
    expect(fired()).toBe(1);
    expect(error === undefined || error instanceof SkillError ? "no crash" : crash(error)).toBe("no crash");
  });

  it("the Skills root removed right after the scan resolved it is an empty catalog or a SkillError, never a raw errno", () => {
    writeSkill("alpha");
    const fired = afterResolvingSync(join(ws, "skills"), () => rmSync(join(ws, "skills"), { recursive: true }));
    const error = catching(() => SkillRegistry.scan(ws));
    expect(fired()).toBe(1);
    expect(error === undefined || error instanceof SkillError ? "no crash" : crash(error)).toBe("no crash");
  });
});

describe.skipIf(!POSIX)("38 and D8: links in skills/", () => {
  it("a dangling link and a link loop as a Skill folder are SkillPathError", () => {
    mkdirSync(join(ws, "skills"));
    symlinkSync(join(base, "nowhere"), join(ws, "skills", "alpha"), "dir");
    expect(scanned()).toEqual(pathError("Skill directory escapes Skills root: alpha"));
    rmSync(join(ws, "skills", "alpha"));
    symlinkSync("beta", join(ws, "skills", "alpha"), "dir");
    symlinkSync("alpha", join(ws, "skills", "beta"), "dir");
    expect(scanned()).toEqual(pathError("Skill directory escapes Skills root: alpha"));
  });

  it("a dangling link and a link loop as SKILL.md are SkillPathError", () => {
    const folder = join(ws, "skills", "alpha");
    mkdirSync(folder, { recursive: true });
    symlinkSync("gone.md", join(folder, "SKILL.md"));
    expect(scanned()).toEqual(pathError("Skill manifest escapes its directory: alpha"));
    rmSync(join(folder, "SKILL.md"));
    symlinkSync("loop.md", join(folder, "SKILL.md"));
    symlinkSync("SKILL.md", join(folder, "loop.md"));
    expect(scanned()).toEqual(pathError("Skill manifest escapes its directory: alpha"));
  });

  it("a link inside the root to another folder holding the Skill is followed, at scan and at load", async () => {
    // `.store` has no SKILL.md of its own, so it is no Skill: only the link names one.
    writeManifest(join(".store", "beta"), manifest("name: beta\ndescription: linked", "beta body\n"));
    symlinkSync(join(".store", "beta"), join(ws, "skills", "beta"), "dir");
    const registry = SkillRegistry.scan(ws);
    expect(registry.catalogEntries).toEqual([{ name: "beta", description: "linked" }]);
    expect(await load(registry, "beta")).toEqual({ content: "beta body\n", isError: false });
  });

  it("a skills that is a file, a dangling link or a loop is SkillPathError", () => {
    const skills = join(ws, "skills");
    writeFileSync(skills, "not a folder");
    expect(scanned()).toEqual(pathError("Skills directory is not a directory: skills"));
    rmSync(skills);
    symlinkSync(join(base, "nowhere"), skills, "dir");
    expect(scanned()).toEqual(pathError("Skills directory escapes workspace: skills"));
    rmSync(skills);
    symlinkSync("skills", skills, "dir");
    expect(scanned()).toEqual(pathError("Skills directory escapes workspace: skills"));
  });

  // The scan refuses a Skills root that is the workspace itself; the recheck at load must hold the same line, or a
  // swapped `skills` turns any folder of the workspace into a loadable Skill.
  it("a skills root turned into a link to the workspace itself after the scan is skill_path_escape", async () => {
    writeSkill("alpha");
    const registry = SkillRegistry.scan(ws);
    mkdirSync(join(ws, "alpha"));
    writeFileSync(join(ws, "alpha", "SKILL.md"), manifest("name: alpha\ndescription: ok", `${SECRET}\n`));
    renameSync(join(ws, "skills"), join(ws, "skills-moved"));
    symlinkSync(".", join(ws, "skills"), "dir");
    expect(scanned()).toEqual(pathError("Skills directory escapes workspace: skills"));
    expect(await load(registry, "alpha")).toEqual({
      content: PATH_ESCAPE,
      isError: true,
      errorCode: "skill_path_escape",
    });
  });
});

describe("— model arguments are refused at prepare", () => {
  const refusals: [string, unknown][] = [
    ["../x", { name: "../x" }],
    ["/etc", { name: "/etc" }],
    ["C:\\x", { name: "C:\\x" }],
    ["nul", { name: "nul" }],
    ["65 characters", { name: "a".repeat(65) }],
    ["a Cyrillic а", { name: "\u0430lpha" }],
    ["an extra field", { name: "alpha", path: "../x" }],
    ["a number", { name: 1 }],
    ["null", { name: null }],
    ["a list", { name: ["alpha"] }],
    ["no name", {}],
  ];

  for (const [what, value] of refusals) {
    it(`${what}: invalid_arguments, and the handler never runs`, async () => {
      writeSkill("alpha");
      const registry = SkillRegistry.scan(ws);
      const tool = loadTool(registry);
      const result = await tool.call(JSON.stringify(value));
      expect(result.errorCode).toBe("invalid_arguments");
      expect(result.content.startsWith(INVALID)).toBe(true);
      // A caller that skips prepare and hands invoke the raw arguments meets the same schema.
      const forged: ValidToolCall = {
        call: toolCall("skill-2", LOAD_SKILL_TOOL_NAME, JSON.stringify(value)),
        definition: registry.toolDefinition as unknown as ValidToolCall["definition"],
        arguments: value as Readonly<Record<string, unknown>>,
      };
      const invoked = await tool.tools.invoke(forged, { workspace: ws, identity: "user" });
      expect(invoked.errorCode).toBe("invalid_arguments");
      expect(tool.handled()).toBe(0);
    });
  }

  it("the look-alike's Latin twin is a valid call: the refusal above is the schema's, not the name's", async () => {
    writeSkill("alpha");
    const tool = loadTool(SkillRegistry.scan(ws));
    expect(await tool.call(JSON.stringify({ name: "alpha" }))).toEqual({ content: "alpha body\n", isError: false });
    expect(tool.handled()).toBe(1);
  });
});

describe("— long names and control characters in messages are cut by shownPath", () => {
  const cut = (text: string): string => `${text.slice(0, 200)}…`;

  it.skipIf(!POSIX)(
    "a 255-byte folder name with control characters is cut to 200 characters in the scan's message",
    () => {
      const folder = `\u001b[2J\u0007${"x".repeat(250)}`;
      expect(Buffer.byteLength(folder)).toBe(255);
      writeManifest(folder, "---\nname: x\ndescription: ok\nno closing line\n");
      const result = scanned();
      expect(result).toEqual(
        manifestError(`Skill manifest has no closing frontmatter delimiter: skills/${cut(folder)}/SKILL.md`),
      );
      writeManifest(folder, manifest("name: x\ndescription: ok"));
      expect(scanned()).toEqual(manifestError(`Skill name must match its directory: ${cut(folder)}`));
    },
  );

  it("a 10,000-character Skills directory or Skill name is cut to 200 characters", async () => {
    const long = "a".repeat(10_000);
    expect(scanned({ skillsDirectory: long })).toEqual(pathError(`Skills directory cannot be read: ${cut(long)}`));
    expect(scanned({ skillsDirectory: `\u001b${long}` })).toEqual(
      pathError(`Skills directory cannot be read: ${cut(`\u001b${long}`)}`),
    );
    writeSkill("alpha");
    const registry = SkillRegistry.scan(ws);
    await expect(registry.loadSkill(long)).rejects.toThrow(`Skill is not registered: ${cut(long)}`);
    const message = await registry.loadSkill(long).catch((error: unknown) => (error as Error).message);
    expect(message.length).toBeLessThanOrEqual("Skill is not registered: ".length + 201);
  });
});

describe("what a load accepts is what a scan accepts", () => {
  it("a manifest rewritten after the scan to begin with two BOMs is invalid_skill, as a scan refuses it", async () => {
    writeSkill("alpha");
    const registry = SkillRegistry.scan(ws);
    const tool = loadTool(registry);
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    writeManifest("alpha", Buffer.concat([bom, bom, Buffer.from(manifest("name: alpha\ndescription: ok", "BODY\n"))]));
    expect((await tool.call(JSON.stringify({ name: "alpha" }))).content).toBe(
      "Error [invalid_skill]: Registered Skill manifest is invalid",
    );
    expect(scanned()).toEqual(manifestError("Skill manifest must begin with YAML frontmatter: skills/alpha/SKILL.md"));
  });

  it("a registered folder swapped after the scan for a link to another folder of the root is skill_path_escape", async () => {
    writeSkill("alpha");
    const registry = SkillRegistry.scan(ws);
    const tool = loadTool(registry);
    // zz is inside the root and declares alpha: a rescan would refuse it, so a load must not return its body.
    writeManifest("zz", manifest("name: alpha\ndescription: ok", "ZZ BODY\n"));
    rmSync(join(ws, "skills", "alpha"), { recursive: true });
    symlinkSync(join(ws, "skills", "zz"), join(ws, "skills", "alpha"));
    const result = await tool.call(JSON.stringify({ name: "alpha" }));
    expect(result.content).toBe("Error [skill_path_escape]: Registered Skill path is no longer safe");
    expect(result.content).not.toContain("ZZ BODY");
  });
});
