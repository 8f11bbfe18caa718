import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
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

// SPEC §2: core ← adapters/features ← bootstrap ← cli/chapters. An arrow is an allowed import.
// Zod (from chapter 2) is pure validation, no I/O: core may use it for tool schemas.
const allowed: Record<string, RegExp> = {
  core: /^\.\/|^zod$/,
  features: /^\.\/|^\.\.\/core\/|^zod$/,
  adapters: /^\.\/|^\.\.\/core\/|^node:|^openai$|^fast-glob$/,
};

describe("layering", () => {
  for (const layer of Object.keys(allowed)) {
    it(`${layer}/ imports only what the layering allows`, () => {
      const offences = sourceFiles(join(src, layer)).flatMap((file) =>
        importsOf(file)
          .filter((target) => !(allowed[layer] as RegExp).test(target) && !(layer === "adapters" && isPackage(target)))
          .map((target) => `${relative(src, file)} imports ${target}`),
      );
      expect(offences).toEqual([]);
    });
  }

  it("core imports no Node module at all", () => {
    const offences = sourceFiles(join(src, "core")).flatMap((file) =>
      importsOf(file).filter((target) => !target.startsWith(".") && target !== "zod"),
    );
    expect(offences).toEqual([]);
  });

  it("only bootstrap (the composition root) and adapters themselves import adapters", () => {
    const importers = sourceFiles(src)
      .filter((file) => importsOf(file).some((target) => target.includes("adapters/")))
      .map((file) => relative(src, file));
    expect(importers.filter((file) => !/^(bootstrap\.ts|adapters\/)/.test(file))).toEqual([]);
  });
});

function isPackage(target: string): boolean {
  return !target.startsWith(".") && !target.startsWith("node:");
}
