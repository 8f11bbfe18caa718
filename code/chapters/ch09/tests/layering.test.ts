import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const src = fileURLToPath(new URL("../src/", import.meta.url));

function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(join(folder, entry.name))
      : entry.name.endsWith(".ts")
        ? [join(folder, entry.name)]
        : [],
  );
}

function importsOf(file: string): string[] {
  return [...readFileSync(file, "utf8").matchAll(/^\s*(?:import|export)[^'"]*?from\s+["']([^"']+)["']/gm)].map(
    (match) => match[1] as string,
  );
}

function isPackage(target: string): boolean {
  return !target.startsWith(".") && !target.startsWith("node:");
}

// core ← features/adapters ← bootstrap ← cli/chapters. A pattern is an allowed import.
// Zod is pure validation, no I/O: core uses it for tool schemas.
const allowed: Record<string, (target: string) => boolean> = {
  core: (target) => /^\.\//.test(target) || target === "zod",
  features: (target) => /^\.\/|^\.\.\/core\//.test(target) || target === "zod",
  adapters: (target) => /^\.\/|^\.\.\/core\/|^node:/.test(target) || isPackage(target),
};

/**
 * The one named exception (chapter 7): the book's `SkillRegistry.scan(workspace)` takes no adapter, so the Skills
 * feature reads files itself, parses YAML, and opens through the same confined open `read_file` uses.
 */
const SKILLS_FEATURE = join("features", "skills.ts");
const SKILLS_EXTRA = new Set(["yaml", "node:fs", "node:fs/promises", "node:path", "../adapters/confined-open.js"]);
/**
 * Chapter 8's (CH08 D5): the book puts artifact and transcript writing in `features/compaction.ts`, which writes
 * into the workspace through the folder handles read_file's confined open uses, never through a link.
 */
const COMPACTION_FEATURE = join("features", "compaction.ts");
const COMPACTION_EXTRA = new Set([
  "node:crypto",
  "node:fs",
  "node:fs/promises",
  "node:path",
  "../adapters/folder-handles.js",
]);
/**
 * Chapter 9's (CH09 D18): the book puts the store, its YAML records and `proper-lockfile` in `features/memory.ts`,
 * which reaches the disk only through the held `.memory` folder and the one lock helper chapter 12 reuses.
 */
const MEMORY_FEATURE = join("features", "memory.ts");
const MEMORY_EXTRA = new Set([
  "node:crypto",
  "node:fs",
  "node:path",
  "yaml",
  "../adapters/file-lock.js",
  "../adapters/held-folder.js",
]);
const EXCEPTIONS = new Map([
  [SKILLS_FEATURE, SKILLS_EXTRA],
  [COMPACTION_FEATURE, COMPACTION_EXTRA],
  [MEMORY_FEATURE, MEMORY_EXTRA],
]);
const isException = (file: string, target: string): boolean =>
  EXCEPTIONS.get(relative(src, file))?.has(target) === true;

describe("layering", () => {
  for (const layer of Object.keys(allowed)) {
    it(`${layer}/ imports only what the layering allows`, () => {
      const offences = sourceFiles(join(src, layer)).flatMap((file) =>
        importsOf(file)
          .filter((target) => !(allowed[layer] as (target: string) => boolean)(target))
          .filter((target) => !isException(file, target))
          .map((target) => `${relative(src, file)} imports ${target}`),
      );
      expect(offences).toEqual([]);
    });
  }

  it("the layering check sees the imports it checks", () => {
    expect(importsOf(join(src, "core", "loop.ts"))).toContain("./messages.js");
    expect(importsOf(join(src, "core", "tools.ts"))).toEqual(["zod", "./messages.js", "./model.js"]);
    expect(importsOf(join(src, "adapters", "openai-chat.ts"))).toContain("openai");
    // The policy takes its write boundary from the file-system port, both in core.
    expect(importsOf(join(src, "core", "permissions.ts"))).toEqual(["./filesystem.js", "./tools.js", "./tools.js"]);
    expect(importsOf(join(src, "core", "filesystem.ts"))).toEqual([]);
  });

  it("the terminal approver and audit, which read stdin, live in cli.ts outside core", () => {
    const cli = importsOf(join(src, "cli.ts"));
    // The answers are read by cli/answer-input.ts, which only cli.ts uses.
    expect(cli).toContain("./cli/answer-input.js");
    expect(cli).toContain("./core/permissions.js");
    const coreNode = sourceFiles(join(src, "core")).flatMap((file) =>
      importsOf(file)
        .filter((target) => target.startsWith("node:"))
        .map((target) => `${relative(src, file)} imports ${target}`),
    );
    expect(coreNode).toEqual([]);
  });

  it("every relative import names a source file that exists, so no import points at a moved file", () => {
    const missing = sourceFiles(src).flatMap((file) =>
      importsOf(file)
        .filter((target) => target.startsWith("."))
        .filter((target) => !existsSync(join(dirname(file), target.replace(/\.js$/, ".ts"))))
        .map((target) => `${relative(src, file)} imports ${target}`),
    );
    expect(missing).toEqual([]);
  });

  it("only bootstrap (the composition root) and adapters themselves import adapters", () => {
    const importers = sourceFiles(src)
      .filter((file) => importsOf(file).some((target) => target.includes("adapters/")))
      .map((file) => relative(src, file));
    expect(importers.filter((file) => !/^(bootstrap\.ts|adapters\/)/.test(file) && !EXCEPTIONS.has(file))).toEqual([]);
    expect(importers).toContain("bootstrap.ts");
  });

  it("the Skills, compaction and memory features' exceptions are exactly their files and imports, and no other feature reads files", () => {
    for (const [file, extras] of EXCEPTIONS) {
      const extra = importsOf(join(src, file)).filter(
        (target) => !(allowed.features as (t: string) => boolean)(target),
      );
      expect(new Set(extra)).toEqual(extras);
    }
    const io = new Set([...SKILLS_EXTRA, ...COMPACTION_EXTRA, ...MEMORY_EXTRA]);
    const others = sourceFiles(join(src, "features"))
      .filter((file) => !EXCEPTIONS.has(relative(src, file)))
      .flatMap((file) => importsOf(file).filter((target) => io.has(target)));
    expect(others).toEqual([]);
  });
});
