import fs, { linkSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { isWindowsReservedComponent } from "../src/core/filesystem.js";
import { toolCall } from "../src/core/messages.js";
import { ToolRegistry, type ToolContext, type ToolResult } from "../src/core/tools.js";
import {
  DEFAULT_MAX_CATALOG_BYTES,
  DEFAULT_MAX_CATALOG_ENTRIES,
  DuplicateSkillError,
  LOAD_SKILL_TOOL_NAME,
  MAX_SKILL_NAME_LENGTH,
  SkillError,
  SkillManifestError,
  SkillPathError,
  SkillRegistry,
} from "../src/features/skills.js";

// The Skill registry on its own, against a real temporary workspace with real links: the scan, the bounded
// catalog, the frontmatter contract, and load_skill through the real ToolRegistry's prepare → invoke path.

const NOT_REGISTERED = "Error [skill_not_found]: Requested Skill is not registered";
const PATH_ESCAPE = "Error [skill_path_escape]: Registered Skill path is no longer safe";
const INVALID_SKILL = "Error [invalid_skill]: Registered Skill manifest is invalid";
const MISMATCH = "Error [skill_workspace_mismatch]: Skill registry belongs to a different workspace";
const UNRESOLVABLE = "Error [skill_workspace_error]: Current workspace could not be resolved";
const INVALID = "Error [invalid_arguments]: Invalid arguments for load_skill: ";
const PATTERN = "Invalid string: must match pattern /^[a-z0-9]+(?:-[a-z0-9]+)*$/u";
const DEVICE = "name must not be a Windows device name";

let base: string;
let workspace: string;
let outside: string;

beforeEach(async () => {
  // Real paths: the registry compares the real workspace, and /tmp may itself be a link (macOS).
  base = await realpath(await mkdtemp(join(tmpdir(), "skills-test-")));
  workspace = join(base, "ws");
  outside = join(base, "outside");
  mkdirSync(workspace);
  mkdirSync(outside);
});

afterEach(async () => {
  vi.restoreAllMocks();
  syncBuiltinESMExports();
  await rm(base, { recursive: true, force: true });
});

/** The book's helper: `skills/<name>/SKILL.md` with `name: <name>`, a one-line description and a body. */
function writeSkill(root: string, name: string, options: { body?: string; description?: string } = {}): string {
  const { body = `# ${name}\n\nBody of ${name}.\n`, description = "A test skill." } = options;
  return writeManifest(root, name, `---\nname: ${name}\ndescription: ${description}\n---\n${body}`);
}

/** A SKILL.md with exactly these bytes, in `skills/<folder>/` (or deeper when `folder` has slashes). */
function writeManifest(root: string, folder: string, content: string | Uint8Array): string {
  const path = join(root, "skills", ...folder.split("/"), "SKILL.md");
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
  return path;
}

/** The registry's error for a scan of `manifest` in `skills/<folder>/`, in a fresh workspace each time. */
function scanError(manifest: string | Uint8Array, folder = "demo"): unknown {
  const root = join(base, `probe-${Math.random().toString(36).slice(2)}`);
  mkdirSync(root);
  writeManifest(root, folder, manifest);
  try {
    SkillRegistry.scan(root);
  } catch (error) {
    return error;
  }
  return undefined;
}

/** `[class name, message]`, so one `toEqual` says both which error and what it says. */
function described(error: unknown): [string, string] | undefined {
  return error instanceof Error ? [error.constructor.name, error.message] : undefined;
}

/** What `promise` rejected with, as `described` shows it. */
async function rejection(promise: Promise<unknown>): Promise<[string, string] | undefined> {
  try {
    await promise;
  } catch (error) {
    return described(error);
  }
  return undefined;
}

/**
 * One load_skill call as the model sent it, through a real ToolRegistry: the prepare error, or the handler's
 * result. With `counted`, the registered definition is a copy whose handler counts its runs (the registry's own
 * is frozen), so a refusal can prove the handler never started; otherwise `toolDefinition` itself is registered.
 */
function loadTool(
  registry: SkillRegistry,
  counted = false,
): {
  call: (argumentsJson: string, context?: Partial<ToolContext>) => Promise<ToolResult>;
  handled: () => number;
} {
  let runs = 0;
  const tools = new ToolRegistry();
  const { handler } = registry.toolDefinition;
  tools.register(
    counted
      ? {
          ...registry.toolDefinition,
          handler: (input: Parameters<typeof handler>[0], context: ToolContext) => {
            runs += 1;
            return handler(input, context);
          },
        }
      : registry.toolDefinition,
  );
  return {
    call: async (argumentsJson, context = {}) => {
      const prepared = tools.prepare(toolCall("skill-1", LOAD_SKILL_TOOL_NAME, argumentsJson));
      if (prepared.error !== undefined) return prepared.error;
      return tools.invoke(prepared, { workspace, identity: "user", ...context });
    },
    handled: () => runs,
  };
}

const args = (value: unknown): string => JSON.stringify(value);

describe("the book's SkillRegistry cases", () => {
  test("an absent Skills directory produces an empty catalog", () => {
    const registry = SkillRegistry.scan(workspace);
    expect(registry.names).toEqual([]);
    expect(registry.catalogEntries).toEqual([]);
    expect(registry.renderCatalog()).toBe("");
  });

  test("the catalog is a snapshot while registered bodies are reread", async () => {
    writeSkill(workspace, "alpha", { body: "first body" });
    const registry = SkillRegistry.scan(workspace);
    writeSkill(workspace, "beta");
    expect(registry.names).toEqual(["alpha"]);
    expect(SkillRegistry.scan(workspace).names).toEqual(["alpha", "beta"]);

    writeSkill(workspace, "alpha", { body: "second body", description: "Changed after the scan." });
    expect(registry.renderCatalog()).toBe("- **alpha**: A test skill.");
    await expect(registry.loadSkill("alpha")).resolves.toBe("second body");
    await expect(registry.loadSkill("beta")).rejects.toThrow(SkillError);
  });

  test("catalog limits must be positive integers", () => {
    writeSkill(workspace, "alpha");
    for (const value of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(described(catching(() => SkillRegistry.scan(workspace, { maxCatalogEntries: value })))).toEqual([
        "RangeError",
        "maxCatalogEntries must be a positive integer",
      ]);
      expect(described(catching(() => SkillRegistry.scan(workspace, { maxCatalogBytes: value })))).toEqual([
        "RangeError",
        "maxCatalogBytes must be a positive integer",
      ]);
    }
    expect(SkillRegistry.scan(workspace, { maxCatalogEntries: 1, maxCatalogBytes: 1_000 }).names).toEqual(["alpha"]);
  });

  test("scans a stable bounded catalog without decoding or exposing bodies", () => {
    writeSkill(workspace, "zeta", { body: "PRIVATE zeta body\n" });
    writeSkill(workspace, "alpha", { body: "PRIVATE alpha body\n" });
    writeManifest(
      workspace,
      "beta",
      Buffer.concat([Buffer.from("---\nname: beta\ndescription: A test skill.\n---\nPRIVATE "), Buffer.from([0xff])]),
    );

    const registry = SkillRegistry.scan(workspace, { maxCatalogEntries: 2 });
    expect(registry.names).toEqual(["alpha", "beta", "zeta"]);
    expect(registry.catalogEntries.map((e) => e.name)).toEqual(["alpha", "beta"]);
    expect(registry.renderCatalog()).toBe("- **alpha**: A test skill.\n- **beta**: A test skill.");
    expect(registry.renderCatalog()).not.toContain("PRIVATE");

    const secondScan = SkillRegistry.scan(workspace, { maxCatalogEntries: 2 });
    expect(secondScan.renderCatalog()).toBe(registry.renderCatalog());
    expect(JSON.stringify(SkillRegistry.scan(workspace))).not.toContain("PRIVATE");
  });

  test("scan reads only frontmatter while explicit loading validates the full UTF-8 document", async () => {
    writeManifest(
      workspace,
      "alpha",
      Buffer.concat([Buffer.from("---\nname: alpha\ndescription: A test skill.\n---\nok "), Buffer.from([0xc3, 0x28])]),
    );
    const registry = SkillRegistry.scan(workspace);
    expect(registry.names).toEqual(["alpha"]);
    expect(await rejection(registry.loadSkill("alpha"))).toEqual([
      "SkillManifestError",
      "Skill manifest is not valid UTF-8: skills/alpha/SKILL.md",
    ]);
    expect(await loadTool(registry).call(args({ name: "alpha" }))).toEqual({
      content: INVALID_SKILL,
      isError: true,
      errorCode: "invalid_skill",
    });
  });

  test("counts UTF-8 bytes and never emits a partial catalog entry", () => {
    writeSkill(workspace, "alpha", { description: "中文说明" });
    writeSkill(workspace, "beta", { description: "short" });
    const alphaLine = "- **alpha**: 中文说明";
    const betaLine = "- **beta**: short";
    expect([alphaLine.length, Buffer.byteLength(alphaLine)]).toEqual([17, 25]);

    const exact = SkillRegistry.scan(workspace, { maxCatalogBytes: Buffer.byteLength(alphaLine) });
    expect(exact.renderCatalog()).toBe(alphaLine);
    // One byte short of the newline plus beta's whole line: beta is left out whole, never cut.
    const almost = SkillRegistry.scan(workspace, { maxCatalogBytes: 25 + 1 + Buffer.byteLength(betaLine) - 1 });
    expect(almost.renderCatalog()).toBe(alphaLine);
    const both = SkillRegistry.scan(workspace, { maxCatalogBytes: 25 + 1 + Buffer.byteLength(betaLine) });
    expect(both.renderCatalog()).toBe(`${alphaLine}\n${betaLine}`);
    // 24 bytes would hold alpha's 17 UTF-16 units; counted in bytes nothing fits, and shorter beta is not tried.
    const none = SkillRegistry.scan(workspace, { maxCatalogBytes: 24 });
    expect(none.catalogEntries).toEqual([]);
    expect(none.renderCatalog()).toBe("");
    expect(none.names).toEqual(["alpha", "beta"]);
  });

  test("load_skill returns only a registered body after explicit tool invocation", async () => {
    writeSkill(workspace, "python-style", {
      description: "Python project conventions",
      body: "# Python Style\n\nUse pathlib for filesystem paths.\n",
    });
    const registry = SkillRegistry.scan(workspace);
    expect(registry.renderCatalog()).toBe("- **python-style**: Python project conventions");
    expect(registry.renderCatalog()).not.toContain("Use pathlib");

    const tool = loadTool(registry, true);
    expect(await tool.call(args({ name: "python-style" }))).toEqual({
      content: "# Python Style\n\nUse pathlib for filesystem paths.\n",
      isError: false,
    });
    expect(tool.handled()).toBe(1);
    await expect(registry.loadSkill("python-style")).resolves.toBe(
      "# Python Style\n\nUse pathlib for filesystem paths.\n",
    );
  });

  test("rejects unknown, traversal, reserved, and extra load arguments before file access", async () => {
    writeSkill(workspace, "known");
    const registry = SkillRegistry.scan(workspace);
    // With the folder gone, any disk access would answer skill_path_escape: none of these may get that far.
    rmSync(join(workspace, "skills"), { recursive: true });
    const tool = loadTool(registry, true);

    expect((await tool.call(args({ name: "../secret" }))).content).toBe(`${INVALID}name: ${PATTERN}`);
    expect((await tool.call(args({ name: "known", path: "secret" }))).content).toBe(
      `${INVALID}(arguments): Unrecognized key: "path"`,
    );
    expect((await tool.call(args({ name: "nul" }))).content).toBe(`${INVALID}name: ${DEVICE}`);
    expect(tool.handled()).toBe(0);

    expect(await tool.call(args({ name: "missing" }))).toEqual({
      content: NOT_REGISTERED,
      isError: true,
      errorCode: "skill_not_found",
    });
    expect((await tool.call(args({ name: "known" }))).content).toBe(PATH_ESCAPE);
  });

  test("rejects malformed frontmatter, unsafe names, and duplicate names", () => {
    expect(described(scanError("---\nname: demo\ndescription: |\n  first\n  second\n---\nbody\n"))).toEqual([
      "SkillManifestError",
      "Skill description must be one non-empty line: skills/demo/SKILL.md",
    ]);
    expect(described(scanError("---\nname: demo\ndescription: ok\n"))).toEqual([
      "SkillManifestError",
      "Skill manifest has no closing frontmatter delimiter: skills/demo/SKILL.md",
    ]);
    expect(described(scanError("---\nname: my_skill\ndescription: ok\n---\nbody\n", "my_skill"))).toEqual([
      "SkillManifestError",
      "Skill frontmatter contains an invalid name: skills/my_skill/SKILL.md",
    ]);
    expect(described(scanError("---\nname: nul\ndescription: ok\n---\nbody\n", "nul"))).toEqual([
      "SkillManifestError",
      "Skill frontmatter contains an invalid name: skills/nul/SKILL.md",
    ]);

    writeSkill(workspace, "alpha");
    writeManifest(workspace, "beta", "---\nname: alpha\ndescription: A test skill.\n---\nbody\n");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual([
      "DuplicateSkillError",
      "Duplicate Skill name: alpha",
    ]);
  });

  test("requires the manifest name to match its directory", () => {
    const error = scanError("---\nname: other\ndescription: ok\n---\nbody\n", "demo");
    expect(error).toBeInstanceOf(SkillManifestError);
    expect(described(error)).toEqual(["SkillManifestError", "Skill name must match its directory: demo"]);
    expect(described(scanError("---\nname: alpha\ndescription: ok\n---\nbody\n", "Alpha"))).toEqual([
      "SkillManifestError",
      "Skill name must match its directory: Alpha",
    ]);
  });

  test("load_skill rejects a ToolContext from another workspace", async () => {
    writeSkill(workspace, "alpha");
    const registry = SkillRegistry.scan(workspace);
    const tool = loadTool(registry);
    expect(await tool.call(args({ name: "alpha" }), { workspace: outside })).toEqual({
      content: MISMATCH,
      isError: true,
      errorCode: "skill_workspace_mismatch",
    });
    // Checked before the name: an unknown name gets the workspace answer too.
    expect((await tool.call(args({ name: "missing" }), { workspace: outside })).content).toBe(MISMATCH);
  });

  test("load_skill reports an unresolvable ToolContext workspace", async () => {
    writeSkill(workspace, "alpha");
    const registry = SkillRegistry.scan(workspace);
    const tool = loadTool(registry);
    const gone = join(base, "does-not-exist");
    expect(await tool.call(args({ name: "alpha" }), { workspace: gone })).toEqual({
      content: UNRESOLVABLE,
      isError: true,
      errorCode: "skill_workspace_error",
    });
    expect((await tool.call(args({ name: "missing" }), { workspace: gone })).content).toBe(UNRESOLVABLE);
  });

  test("rejects unsafe skill roots and directory links that escape the workspace", () => {
    for (const skillsDirectory of ["/abs", "../skills", "a/../b", "nul", "skills/con.txt", "C:\\x", "", "./skills"]) {
      expect(described(catching(() => SkillRegistry.scan(workspace, { skillsDirectory })))).toEqual([
        "SkillPathError",
        `Skills directory must be a plain relative path: ${skillsDirectory}`,
      ]);
    }

    writeSkill(outside, "alpha");
    symlinkSync(join(outside, "skills"), join(workspace, "skills"), "dir");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual([
      "SkillPathError",
      "Skills directory escapes workspace: skills",
    ]);

    rmSync(join(workspace, "skills"));
    mkdirSync(join(workspace, "skills"));
    symlinkSync(join(outside, "skills", "alpha"), join(workspace, "skills", "alpha"), "dir");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual([
      "SkillPathError",
      "Skill directory escapes Skills root: alpha",
    ]);
  });

  test("rechecks path containment when a registered directory becomes an escape link", async () => {
    writeSkill(workspace, "alpha", { body: "inside body\n" });
    const registry = SkillRegistry.scan(workspace);
    writeSkill(outside, "alpha", { body: "OUTSIDE SECRET\n" });
    rmSync(join(workspace, "skills", "alpha"), { recursive: true });
    symlinkSync(join(outside, "skills", "alpha"), join(workspace, "skills", "alpha"), "dir");

    await expect(registry.loadSkill("alpha")).rejects.toBeInstanceOf(SkillPathError);
    expect(await rejection(registry.loadSkill("alpha"))).toEqual([
      "SkillPathError",
      "Registered Skill path is no longer safe: skills/alpha",
    ]);
    const result = await loadTool(registry).call(args({ name: "alpha" }));
    expect(result).toEqual({ content: PATH_ESCAPE, isError: true, errorCode: "skill_path_escape" });
    expect(result.content).not.toContain("OUTSIDE SECRET");
  });
});

/** What `action` threw, or `undefined`. */
function catching(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe("rule 5: the three ways to an empty catalog", () => {
  test("no skills/ folder: no names, no entries, an empty rendering", () => {
    const registry = SkillRegistry.scan(workspace);
    expect([registry.names, registry.catalogEntries, registry.renderCatalog()]).toEqual([[], [], ""]);
  });

  test("a skills/ folder whose entries hold no SKILL.md", () => {
    mkdirSync(join(workspace, "skills", "empty"), { recursive: true });
    writeFileSync(join(workspace, "skills", "README.md"), "not a skill\n");
    const registry = SkillRegistry.scan(workspace);
    expect([registry.names, registry.catalogEntries, registry.renderCatalog()]).toEqual([[], [], ""]);
  });

  test("every entry cut by the byte budget: the catalog is empty, the Skill still registered and loadable", async () => {
    writeSkill(workspace, "typescript-style", { body: "# TypeScript Style\n" });
    const tiny = SkillRegistry.scan(workspace, { maxCatalogBytes: 10 });
    expect([tiny.names, tiny.catalogEntries, tiny.renderCatalog()]).toEqual([["typescript-style"], [], ""]);
    await expect(tiny.loadSkill("typescript-style")).resolves.toBe("# TypeScript Style\n");
    expect((await loadTool(tiny).call(args({ name: "typescript-style" }))).content).toBe("# TypeScript Style\n");
  });
});

describe("rule 7: the body, byte for byte", () => {
  test("every byte after the closing line, a later --- line and odd whitespace included", async () => {
    const body = "  # Título ✓ \t\n\n---\nname: not frontmatter\n\n\n中文 tail without newline";
    writeSkill(workspace, "alpha", { body });
    const registry = SkillRegistry.scan(workspace);
    await expect(registry.loadSkill("alpha")).resolves.toBe(body);
    expect((await loadTool(registry).call(args({ name: "alpha" }))).content).toBe(body);
  });

  test("a CRLF manifest keeps its \\r\\n in the body", async () => {
    writeManifest(workspace, "alpha", "---\r\nname: alpha\r\ndescription: ok\r\n---\r\n# A\r\n\r\nline\r\n");
    const registry = SkillRegistry.scan(workspace);
    expect(registry.renderCatalog()).toBe("- **alpha**: ok");
    await expect(registry.loadSkill("alpha")).resolves.toBe("# A\r\n\r\nline\r\n");
  });

  test("a UTF-8 BOM before the first --- is ignored at scan and at load", async () => {
    writeManifest(
      workspace,
      "alpha",
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("---\nname: alpha\ndescription: ok\n---\nbody\n")]),
    );
    const registry = SkillRegistry.scan(workspace);
    expect(registry.catalogEntries).toEqual([{ name: "alpha", description: "ok" }]);
    await expect(registry.loadSkill("alpha")).resolves.toBe("body\n");
  });
});

describe("rule 9: the schema the model is shown", () => {
  test("load_skill, its description, effect read, frozen, and the exact JSON Schema", () => {
    const registry = SkillRegistry.scan(workspace);
    const { name, description, effect } = registry.toolDefinition;
    expect({ name, description, effect }).toEqual({
      name: "load_skill",
      description: "Load the full instructions for one Skill listed in the workspace catalog.",
      effect: "read",
    });
    expect(Object.isFrozen(registry.toolDefinition)).toBe(true);
    expect(MAX_SKILL_NAME_LENGTH).toBe(64);
    const tools = new ToolRegistry();
    tools.register(registry.toolDefinition);
    expect(JSON.stringify(tools.openAITools()[0]?.function.parameters)).toBe(
      JSON.stringify({
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: {
          name: {
            type: "string",
            minLength: 1,
            maxLength: 64,
            pattern: "^[a-z0-9]+(?:-[a-z0-9]+)*$",
            description: "The exact Skill name from the available catalog.",
          },
        },
        required: ["name"],
        additionalProperties: false,
      }),
    );
  });
});

describe("rule 10: arguments refused before the handler or the disk", () => {
  test("each refused input gets its exact invalid_arguments text, with skills/ deleted after the scan", async () => {
    writeSkill(workspace, "known");
    const registry = SkillRegistry.scan(workspace);
    rmSync(join(workspace, "skills"), { recursive: true });
    const tool = loadTool(registry, true);
    const cases: [unknown, string][] = [
      [{ name: "../secret" }, `name: ${PATTERN}`],
      [{ name: "known", path: "secret" }, `(arguments): Unrecognized key: "path"`],
      [{ name: "nul" }, `name: ${DEVICE}`],
      [{ name: "com1" }, `name: ${DEVICE}`],
      [{ name: "COM1" }, `name: ${PATTERN}; name: ${DEVICE}`],
      [{ name: "a".repeat(65) }, "name: Too big: expected string to have <=64 characters"],
      [{ name: "My_Skill" }, `name: ${PATTERN}`],
      [{ name: "" }, `name: Too small: expected string to have >=1 characters; name: ${PATTERN}`],
      [{}, "name: Invalid input: expected string, received undefined"],
      [{ name: 1 }, "name: Invalid input: expected string, received number"],
      [{ name: "/etc" }, `name: ${PATTERN}`],
      [{ name: "C:\\x" }, `name: ${PATTERN}`],
      [{ name: "\u0430lpha" }, `name: ${PATTERN}`],
    ];
    for (const [input, problem] of cases) {
      expect(await tool.call(args(input))).toEqual({
        content: `${INVALID}${problem}`,
        isError: true,
        errorCode: "invalid_arguments",
      });
    }
    expect(tool.handled()).toBe(0);
    // 64 characters passes the schema and reaches the handler, which answers from the registry, not the disk.
    expect((await tool.call(args({ name: "a".repeat(64) }))).content).toBe(NOT_REGISTERED);
    expect((await tool.call(args({ name: "missing" }))).content).toBe(NOT_REGISTERED);
    expect(tool.handled()).toBe(2);
  });
});

describe("rule 11: a sorted, stable catalog", () => {
  test("written zeta, alpha, beta: sorted names, a prefix under maxCatalogEntries, the same rendering twice", () => {
    for (const name of ["zeta", "alpha", "beta"]) writeSkill(workspace, name, { body: `PRIVATE ${name}\n` });
    const first = SkillRegistry.scan(workspace);
    expect(first.names).toEqual(["alpha", "beta", "zeta"]);
    expect(SkillRegistry.scan(workspace, { maxCatalogEntries: 2 }).catalogEntries.map((e) => e.name)).toEqual([
      "alpha",
      "beta",
    ]);
    expect(first.renderCatalog()).toBe(
      "- **alpha**: A test skill.\n- **beta**: A test skill.\n- **zeta**: A test skill.",
    );
    expect(SkillRegistry.scan(workspace).renderCatalog()).toBe(first.renderCatalog());
  });

  test("digits and hyphens sort by code unit", () => {
    // For [a-z0-9-] the locale's order happens to agree; this pins the code-unit order itself.
    for (const name of ["z9", "ab", "a0", "a-b", "a", "a-1", "0-a"]) writeSkill(workspace, name);
    expect(SkillRegistry.scan(workspace).names).toEqual(["0-a", "a", "a-1", "a-b", "a0", "ab", "z9"]);
  });
});

describe("rule 12: a byte budget of whole entries", () => {
  test("the separator costs one byte and the total never passes the budget", () => {
    for (const name of ["alpha", "beta", "gamma"]) writeSkill(workspace, name, { description: "説明" });
    const lines = ["alpha", "beta", "gamma"].map((name) => `- **${name}**: 説明`);
    const total = (count: number): number => Buffer.byteLength(lines.slice(0, count).join("\n"));
    for (let budget = 1; budget <= total(3) + 1; budget += 1) {
      const rendered = SkillRegistry.scan(workspace, { maxCatalogBytes: budget }).renderCatalog();
      const fits = [1, 2, 3].filter((count) => total(count) <= budget).length;
      expect(rendered).toBe(lines.slice(0, fits).join("\n"));
      expect(Buffer.byteLength(rendered)).toBeLessThanOrEqual(budget);
    }
  });
});

describe("rule 13: the entry cap and the defaults", () => {
  test("defaults are 100 entries and 8,000 bytes", () => {
    expect([DEFAULT_MAX_CATALOG_ENTRIES, DEFAULT_MAX_CATALOG_BYTES]).toEqual([100, 8_000]);
    const names = Array.from({ length: 101 }, (_, index) => `s${String(index).padStart(3, "0")}`);
    for (const name of names) writeSkill(workspace, name, { description: "d" });
    const registry = SkillRegistry.scan(workspace);
    expect(registry.names).toEqual(names);
    expect(registry.catalogEntries.map((e) => e.name)).toEqual(names.slice(0, 100));
  });

  test("the default byte budget keeps 7 lines of 1,011 bytes and drops the eighth", () => {
    const description = "x".repeat(1_000);
    for (let index = 0; index < 9; index += 1) writeSkill(workspace, `s0${index}`, { description });
    const registry = SkillRegistry.scan(workspace);
    expect(registry.catalogEntries.map((e) => e.name)).toEqual(["s00", "s01", "s02", "s03", "s04", "s05", "s06"]);
    expect(Buffer.byteLength(registry.renderCatalog())).toBe(7 * 1_011 + 6);
  });
});

describe("rule 14: the registry beyond the budget", () => {
  test("a Skill left out of the catalog by maxCatalogEntries stays registered and loads", async () => {
    writeSkill(workspace, "alpha");
    writeSkill(workspace, "beta", { body: "beta body\n" });
    const registry = SkillRegistry.scan(workspace, { maxCatalogEntries: 1 });
    expect([registry.names, registry.renderCatalog()]).toEqual([["alpha", "beta"], "- **alpha**: A test skill."]);
    expect((await loadTool(registry).call(args({ name: "beta" }))).content).toBe("beta body\n");
  });
});

describe("rule 15: a snapshot catalog, reread bodies", () => {
  test("a Skill removed after the scan stays in the snapshot and fails its load as a path no longer safe", async () => {
    writeSkill(workspace, "alpha");
    const registry = SkillRegistry.scan(workspace);
    rmSync(join(workspace, "skills", "alpha"), { recursive: true });
    expect(registry.renderCatalog()).toBe("- **alpha**: A test skill.");
    expect((await loadTool(registry).call(args({ name: "alpha" }))).content).toBe(PATH_ESCAPE);
    expect(SkillRegistry.scan(workspace).names).toEqual([]);
  });
});

describe("rule 16: the scan reads only frontmatter", () => {
  test("an 8 MiB body: the scan reads no more than the frontmatter and one 4,096-byte chunk", () => {
    const frontmatter = "---\nname: big\ndescription: A test skill.\n---\n";
    writeManifest(workspace, "big", Buffer.concat([Buffer.from(frontmatter), Buffer.alloc(8 * 1024 * 1024, 0xff)]));
    // The registry imports readSync by name; syncing the builtin's ESM exports makes it see the spy.
    const readSync = vi.spyOn(fs, "readSync");
    syncBuiltinESMExports();
    let registry: SkillRegistry;
    try {
      registry = SkillRegistry.scan(workspace);
    } finally {
      vi.restoreAllMocks();
      syncBuiltinESMExports();
    }

    expect(registry.names).toEqual(["big"]);
    const bytesRead = readSync.mock.results.reduce((sum, result) => sum + (result.value as number), 0);
    expect(readSync).toHaveBeenCalled();
    expect(bytesRead).toBeGreaterThan(0);
    expect(bytesRead).toBeLessThanOrEqual(Buffer.byteLength(frontmatter) + 4_096);
  });

  test("invalid UTF-8 in the body scans, and the load then fails with invalid_skill", async () => {
    writeManifest(workspace, "alpha", Buffer.from("---\nname: alpha\ndescription: ok\n---\n\xff\xfe", "latin1"));
    const registry = SkillRegistry.scan(workspace);
    expect(registry.catalogEntries).toEqual([{ name: "alpha", description: "ok" }]);
    await expect(registry.loadSkill("alpha")).rejects.toThrow(SkillManifestError);
    expect((await loadTool(registry).call(args({ name: "alpha" }))).content).toBe(INVALID_SKILL);
  });
});

describe("rule 17: the frontmatter contract", () => {
  const at = "skills/demo/SKILL.md";
  const manifestError = (message: string): [string, string] => ["SkillManifestError", `${message}: ${at}`];

  test("each manifest message of the contract, with its class", () => {
    const cases: [string | Uint8Array, [string, string]][] = [
      ["\n---\nname: demo\ndescription: ok\n---\n", manifestError("Skill manifest must begin with YAML frontmatter")],
      ["name: demo\ndescription: ok\n", manifestError("Skill manifest must begin with YAML frontmatter")],
      ["", manifestError("Skill manifest must begin with YAML frontmatter")],
      ["---\nname: demo\ndescription: ok\n", manifestError("Skill manifest has no closing frontmatter delimiter")],
      ["---", manifestError("Skill manifest has no closing frontmatter delimiter")],
      ["---\nname: [demo\ndescription: ok\n---\n", manifestError("Skill frontmatter is not valid YAML")],
      ["---\nname: demo\nname: demo\ndescription: ok\n---\n", manifestError("Skill frontmatter is not valid YAML")],
      ["---\nname: &n demo\ndescription: *n\n---\n", manifestError("Skill frontmatter is not valid YAML")],
      ["---\nname: demo\ndescription: !foo ok\n---\n", manifestError("Skill frontmatter is not valid YAML")],
      ["---\nname: demo\ndescription: ok\n...\nname: x\n---\n", manifestError("Skill frontmatter is not valid YAML")],
      ["---\n- name\n- description\n---\n", manifestError("Skill frontmatter must be a mapping")],
      ["---\n---\nbody\n", manifestError("Skill frontmatter must be a mapping")],
      ["---\njust text\n---\n", manifestError("Skill frontmatter must be a mapping")],
      ["---\nname: demo\n---\n", manifestError("Skill frontmatter requires string name and description")],
      ["---\nname: 7\ndescription: ok\n---\n", manifestError("Skill frontmatter requires string name and description")],
      [
        "---\nname: demo\ndescription: true\n---\n",
        manifestError("Skill frontmatter requires string name and description"),
      ],
      ['---\nname: demo\ndescription: ""\n---\n', manifestError("Skill description must be one non-empty line")],
      ['---\nname: demo\ndescription: "   "\n---\n', manifestError("Skill description must be one non-empty line")],
      ['---\nname: demo\ndescription: "a\\0b"\n---\n', manifestError("Skill description must be one non-empty line")],
      ['---\nname: demo\ndescription: "a\\Nb"\n---\n', manifestError("Skill description must be one non-empty line")],
      [
        "---\nname: demo\ndescription: |\n  first\n  second\n---\n",
        manifestError("Skill description must be one non-empty line"),
      ],
      [
        `---\nname: demo\ndescription: ${"x".repeat(1_025)}\n---\n`,
        manifestError("Skill description is longer than 1024 characters"),
      ],
      [`---\n${"# padding\n".repeat(7_000)}`, manifestError("Skill frontmatter is larger than 65536 bytes")],
      [
        Buffer.from("---\nname: demo\ndescription: caf\xe9\n---\n", "latin1"),
        manifestError("Skill manifest is not valid UTF-8"),
      ],
    ];
    for (const [manifest, expected] of cases) expect(described(scanError(manifest))).toEqual(expected);
  });

  test("CRLF scans; --- with a trailing space is no separator; description: > folds to one line", () => {
    expect(described(scanError("---\r\nname: demo\r\ndescription: ok\r\n---\r\nbody\r\n"))).toBeUndefined();
    expect(described(scanError("--- \nname: demo\ndescription: ok\n---\n"))).toEqual(
      manifestError("Skill manifest must begin with YAML frontmatter"),
    );
    expect(described(scanError("---\nname: demo\ndescription: ok\n--- \nbody\n"))).toEqual(
      manifestError("Skill manifest has no closing frontmatter delimiter"),
    );
    writeManifest(workspace, "folded", "---\nname: folded\ndescription: >\n  one\n  line\n---\n");
    writeManifest(workspace, "long", `---\nname: long\ndescription: ${"é".repeat(1_024)}\n---\n`);
    expect(SkillRegistry.scan(workspace).catalogEntries).toEqual([
      { name: "folded", description: "one line" },
      { name: "long", description: "é".repeat(1_024) },
    ]);
  });

  test("a closing --- at the end of the file without a line break counts, and the body is empty", async () => {
    writeManifest(workspace, "alpha", "---\nname: alpha\ndescription: ok\n---");
    writeManifest(workspace, "beta", "---\r\nname: beta\r\ndescription: ok\r\n---\r");
    const registry = SkillRegistry.scan(workspace);
    expect(registry.names).toEqual(["alpha", "beta"]);
    await expect(registry.loadSkill("alpha")).resolves.toBe("");
    await expect(registry.loadSkill("beta")).resolves.toBe("");
  });
});

describe("rule 18: name rules", () => {
  test("64 characters, the pattern, and no Windows device name", () => {
    const long = "a".repeat(64);
    writeSkill(workspace, long);
    writeSkill(workspace, "com1-x");
    writeSkill(workspace, "lpt10");
    expect(SkillRegistry.scan(workspace).names).toEqual([long, "com1-x", "lpt10"]);

    const refused = ["a".repeat(65), "Alpha", "my.skill", "-a", "a-", "a--b", "con", "prn", "aux", "nul"];
    refused.push("com1", "com9", "lpt1", "lpt9", "my_skill");
    for (const name of refused) {
      expect(described(scanError(`---\nname: ${name}\ndescription: ok\n---\n`, name))).toEqual([
        "SkillManifestError",
        `Skill frontmatter contains an invalid name: skills/${name}/SKILL.md`,
      ]);
    }
    for (const device of ["con", "prn", "aux", "nul", "com1", "com9", "lpt1", "lpt9"]) {
      expect(isWindowsReservedComponent(device)).toBe(true);
    }
  });
});

describe("rule 19: folder match and duplicate order", () => {
  test("duplicates are found before any folder name is compared", () => {
    writeManifest(workspace, "beta", "---\nname: alpha\ndescription: ok\n---\n");
    writeManifest(workspace, "gamma", "---\nname: alpha\ndescription: ok\n---\n");
    const error = catching(() => SkillRegistry.scan(workspace));
    expect(error).toBeInstanceOf(DuplicateSkillError);
    expect(error).toBeInstanceOf(SkillError);
    expect(described(error)).toEqual(["DuplicateSkillError", "Duplicate Skill name: alpha"]);
  });

  test("a name must equal its folder exactly", () => {
    expect(described(scanError("---\nname: demo\ndescription: ok\n---\n", "demo-1"))).toEqual([
      "SkillManifestError",
      "Skill name must match its directory: demo-1",
    ]);
  });
});

describe("rule 20: what the scan skips without an error", () => {
  test("a plain file, a folder without SKILL.md, and anything deeper than the first level", () => {
    writeSkill(workspace, "alpha");
    writeFileSync(join(workspace, "skills", "notes.md"), "---\nbroken");
    mkdirSync(join(workspace, "skills", "empty"));
    writeManifest(workspace, "group/nested", "no frontmatter at all");
    writeManifest(workspace, "alpha/sub", "no frontmatter at all");
    const registry = SkillRegistry.scan(workspace);
    expect(registry.names).toEqual(["alpha"]);
    expect(registry.renderCatalog()).toBe("- **alpha**: A test skill.");
  });
});

describe("rule 21: unsafe roots and links at scan", () => {
  const pathError = (message: string): [string, string] => ["SkillPathError", message];

  test("links that leave, dangle or lead to a non-folder throw SkillPathError", () => {
    const skills = join(workspace, "skills");
    symlinkSync(workspace, skills, "dir");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual(
      pathError("Skills directory escapes workspace: skills"),
    );
    rmSync(skills);
    symlinkSync(join(base, "nowhere"), skills, "dir");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual(
      pathError("Skills directory escapes workspace: skills"),
    );
    rmSync(skills);
    writeFileSync(skills, "a file");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual(
      pathError("Skills directory is not a directory: skills"),
    );
    rmSync(skills);

    writeSkill(workspace, "beta");
    symlinkSync(join(base, "nowhere"), join(skills, "alpha"), "dir");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual(
      pathError("Skill directory escapes Skills root: alpha"),
    );
    rmSync(join(skills, "alpha"));
    symlinkSync(join(skills, "beta", "SKILL.md"), join(skills, "alpha"), "file");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual(
      pathError("Skill directory is not a directory: alpha"),
    );
    rmSync(join(skills, "alpha"));

    mkdirSync(join(skills, "alpha"));
    writeFileSync(join(outside, "SKILL.md"), "---\nname: alpha\ndescription: ok\n---\n");
    symlinkSync(join(outside, "SKILL.md"), join(skills, "alpha", "SKILL.md"), "file");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual(
      pathError("Skill manifest escapes its directory: alpha"),
    );
    rmSync(join(skills, "alpha", "SKILL.md"));
    symlinkSync(join(skills, "beta", "SKILL.md"), join(skills, "alpha", "SKILL.md"), "file");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual(
      pathError("Skill manifest escapes its directory: alpha"),
    );
    rmSync(join(skills, "alpha", "SKILL.md"));
    symlinkSync(join(skills, "alpha", "gone.md"), join(skills, "alpha", "SKILL.md"), "file");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual(
      pathError("Skill manifest escapes its directory: alpha"),
    );
    rmSync(join(skills, "alpha", "SKILL.md"));
    writeFileSync(join(skills, "alpha", "SKILL.md"), "---\nname: alpha\ndescription: ok\n---\n");
    linkSync(join(skills, "alpha", "SKILL.md"), join(outside, "second-name.md"));
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual(
      pathError("Skill manifest escapes its directory: alpha"),
    );
  });

  test("links that stay inside are followed, at every level", async () => {
    writeManifest(join(workspace, "config"), ".store/alpha", "---\nname: alpha\ndescription: ok\n---\nalpha body\n");
    writeSkill(join(workspace, "config"), "beta");
    const beta = join(workspace, "config", "skills", "beta");
    writeFileSync(join(beta, "real.md"), "---\nname: beta\ndescription: linked\n---\nbeta body\n");
    rmSync(join(beta, "SKILL.md"));
    symlinkSync("real.md", join(beta, "SKILL.md"), "file");
    symlinkSync(join(workspace, "config", "skills", ".store", "alpha"), join(workspace, "config", "skills", "alpha"));
    symlinkSync(join("config", "skills"), join(workspace, "skills"), "dir");

    const registry = SkillRegistry.scan(workspace);
    expect(registry.catalogEntries).toEqual([
      { name: "alpha", description: "ok" },
      { name: "beta", description: "linked" },
    ]);
    await expect(registry.loadSkill("alpha")).resolves.toBe("alpha body\n");
    await expect(registry.loadSkill("beta")).resolves.toBe("beta body\n");
    expect(SkillRegistry.scan(workspace, { skillsDirectory: "config/skills" }).names).toEqual(["alpha", "beta"]);
  });

  // Node makes a junction on Windows and, ignoring the type, a folder symlink elsewhere: it runs everywhere.
  test("a junction that leaves the workspace is refused like a symlink", () => {
    writeSkill(outside, "alpha");
    mkdirSync(join(workspace, "skills"));
    symlinkSync(join(outside, "skills", "alpha"), join(workspace, "skills", "alpha"), "junction");
    expect(described(catching(() => SkillRegistry.scan(workspace)))).toEqual(
      pathError("Skill directory escapes Skills root: alpha"),
    );
  });
});

describe("rule 22: every level rechecked at load", () => {
  test("a manifest, a folder or the Skills root turned into an escape link: skill_path_escape", async () => {
    writeSkill(workspace, "alpha", { body: "alpha body\n" });
    writeSkill(workspace, "beta", { body: "beta body\n" });
    const registry = SkillRegistry.scan(workspace);
    const tool = loadTool(registry);
    writeSkill(outside, "alpha", { body: "OUTSIDE SECRET\n" });
    writeSkill(outside, "beta", { body: "OUTSIDE SECRET\n" });

    const alphaManifest = join(workspace, "skills", "alpha", "SKILL.md");
    rmSync(alphaManifest);
    symlinkSync(join(outside, "skills", "alpha", "SKILL.md"), alphaManifest, "file");
    expect(await tool.call(args({ name: "alpha" }))).toEqual({
      content: PATH_ESCAPE,
      isError: true,
      errorCode: "skill_path_escape",
    });
    expect(await rejection(registry.loadSkill("alpha"))).toEqual([
      "SkillPathError",
      "Registered Skill path is no longer safe: skills/alpha/SKILL.md",
    ]);
    await expect(registry.loadSkill("beta")).resolves.toBe("beta body\n");

    rmSync(join(workspace, "skills"), { recursive: true });
    symlinkSync(join(outside, "skills"), join(workspace, "skills"), "dir");
    expect((await tool.call(args({ name: "beta" }))).content).toBe(PATH_ESCAPE);
    expect(await rejection(registry.loadSkill("beta"))).toEqual([
      "SkillPathError",
      "Registered Skill path is no longer safe: skills/beta",
    ]);
  });

  test("a manifest that gained a second name after the scan is refused at load", async () => {
    writeSkill(workspace, "alpha");
    const registry = SkillRegistry.scan(workspace);
    linkSync(join(workspace, "skills", "alpha", "SKILL.md"), join(outside, "second-name.md"));
    expect((await loadTool(registry).call(args({ name: "alpha" }))).content).toBe(PATH_ESCAPE);
  });
});

describe("rule 23: the whole manifest revalidated at load", () => {
  test("a manifest rewritten after the scan with more than 64 KiB of frontmatter is invalid_skill, as a scan refuses it", async () => {
    writeSkill(workspace, "alpha");
    const registry = SkillRegistry.scan(workspace);
    const tool = loadTool(registry);
    const padded = `---\nname: alpha\ndescription: ok\n${"# pad\n".repeat(20_000)}---\nbig-frontmatter body\n`;
    writeManifest(workspace, "alpha", padded);
    expect(await rejection(registry.loadSkill("alpha"))).toEqual([
      "SkillManifestError",
      "Skill frontmatter is larger than 65536 bytes: skills/alpha/SKILL.md",
    ]);
    expect(await tool.call(args({ name: "alpha" }))).toEqual({
      content: INVALID_SKILL,
      isError: true,
      errorCode: "invalid_skill",
    });
    expect(() => SkillRegistry.scan(workspace)).toThrow(
      "Skill frontmatter is larger than 65536 bytes: skills/alpha/SKILL.md",
    );
  });

  test("frontmatter broken or a name changed after the scan: invalid_skill", async () => {
    writeSkill(workspace, "alpha");
    writeSkill(workspace, "beta");
    writeSkill(workspace, "gamma");
    const registry = SkillRegistry.scan(workspace);
    const tool = loadTool(registry);
    writeManifest(workspace, "alpha", "---\nname: alpha\ndescription: [broken\n---\nbody\n");
    writeManifest(workspace, "beta", "---\nname: other\ndescription: ok\n---\nbody\n");
    writeManifest(workspace, "gamma", "---\nname: gamma\ndescription: ok\nbody without a closing line\n");

    expect(await rejection(registry.loadSkill("alpha"))).toEqual([
      "SkillManifestError",
      "Skill frontmatter is not valid YAML: skills/alpha/SKILL.md",
    ]);
    expect(await rejection(registry.loadSkill("beta"))).toEqual([
      "SkillManifestError",
      "Skill name must match its directory: beta",
    ]);
    expect(await rejection(registry.loadSkill("gamma"))).toEqual([
      "SkillManifestError",
      "Skill manifest has no closing frontmatter delimiter: skills/gamma/SKILL.md",
    ]);
    for (const name of ["alpha", "beta", "gamma"]) {
      expect(await tool.call(args({ name }))).toEqual({
        content: INVALID_SKILL,
        isError: true,
        errorCode: "invalid_skill",
      });
    }
    expect(await rejection(registry.loadSkill("missing"))).toEqual([
      "SkillNotFoundError",
      "Skill is not registered: missing",
    ]);
  });
});

describe("rule 24: the workspace is checked first", () => {
  test("another workspace or an unresolvable one wins over any name; a link to the same one is the same", async () => {
    writeSkill(workspace, "alpha", { body: "alpha body\n" });
    const registry = SkillRegistry.scan(workspace);
    const tool = loadTool(registry, true);
    for (const name of ["alpha", "missing"]) {
      expect((await tool.call(args({ name }), { workspace: outside })).content).toBe(MISMATCH);
      expect((await tool.call(args({ name }), { workspace: join(base, "gone") })).content).toBe(UNRESOLVABLE);
    }
    const alias = join(base, "alias");
    symlinkSync(workspace, alias, "dir");
    expect((await tool.call(args({ name: "alpha" }), { workspace: alias })).content).toBe("alpha body\n");
    expect(tool.handled()).toBe(5);
  });
});

describe("rule 25: no paths in what the model reads", () => {
  test("every error result is its exact text and names neither the workspace, skills/ nor SKILL.md", async () => {
    writeSkill(workspace, "alpha");
    writeSkill(workspace, "beta");
    writeSkill(workspace, "gamma");
    const registry = SkillRegistry.scan(workspace);
    const tool = loadTool(registry);
    writeManifest(workspace, "beta", "---\nname: beta\n---\n");
    rmSync(join(workspace, "skills", "gamma"), { recursive: true });
    symlinkSync(outside, join(workspace, "skills", "gamma"), "dir");

    const results = [
      await tool.call(args({ name: "missing" })),
      await tool.call(args({ name: "beta" })),
      await tool.call(args({ name: "gamma" })),
      await tool.call(args({ name: "alpha" }), { workspace: outside }),
      await tool.call(args({ name: "alpha" }), { workspace: join(workspace, "gone") }),
      await tool.call(args({ name: "../skills/alpha/SKILL.md" })),
    ];
    expect(results.map((result) => result.content)).toEqual([
      NOT_REGISTERED,
      INVALID_SKILL,
      PATH_ESCAPE,
      MISMATCH,
      UNRESOLVABLE,
      `${INVALID}name: ${PATTERN}`,
    ]);
    for (const { content } of results) {
      expect(content).not.toContain(workspace);
      expect(content).not.toContain(base);
      expect(content).not.toContain("skills/");
      expect(content).not.toContain("SKILL.md");
    }
  });
});

describe("rule 30: a Skill grants nothing (unit half)", () => {
  test("extra frontmatter keys scan and are ignored", async () => {
    writeManifest(
      workspace,
      "alpha",
      "---\nname: alpha\ndescription: ok\nallowed-tools: shell\nmodel: x\nlicense: MIT\nmetadata:\n  owner: me\n---\nbody\n",
    );
    const registry = SkillRegistry.scan(workspace);
    expect(registry.catalogEntries).toEqual([{ name: "alpha", description: "ok" }]);
    expect(Object.keys(registry.catalogEntries[0] ?? {})).toEqual(["name", "description"]);
    expect(registry.renderCatalog()).toBe("- **alpha**: ok");
    expect(registry.toolDefinition.effect).toBe("read");
    await expect(registry.loadSkill("alpha")).resolves.toBe("body\n");
  });
});
