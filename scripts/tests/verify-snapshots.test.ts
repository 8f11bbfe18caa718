import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { verifySnapshots, type SnapshotDeclarations } from "../verify-snapshots.js";

const realChapters = fileURLToPath(new URL("../../code/chapters/", import.meta.url));
const declarations = JSON.parse(readFileSync(join(realChapters, "snapshots.json"), "utf8")) as SnapshotDeclarations;

let copy: string;
beforeEach(() => {
  copy = mkdtempSync(join(tmpdir(), "verify-snapshots-"));
  // A copy of the tree, so the test can break it freely.
  cpSync(realChapters, copy, {
    recursive: true,
    filter: (source) => !/[\\/](node_modules|dist)([\\/]|$)/.test(source),
  });
});
afterEach(() => {
  rmSync(copy, { recursive: true, force: true });
});

describe("verify:snapshots", () => {
  it("the checked-in snapshots match their declaration", () => {
    expect(verifySnapshots(realChapters, declarations)).toEqual([]);
    expect(verifySnapshots(copy, declarations)).toEqual([]);
  });

  it("chapter 4 leaves chapter 3's policy, tools and adapters byte for byte as they were", () => {
    const changed = declarations.ch04?.changed ?? [];
    expect(changed).not.toContain("src/core/permissions.ts");
    expect(changed.filter((path) => path.startsWith("src/adapters/") || path.startsWith("src/features/"))).toEqual([]);
    expect(readFileSync(join(realChapters, "ch04/src/core/permissions.ts"), "utf8")).toBe(
      readFileSync(join(realChapters, "ch03/src/core/permissions.ts"), "utf8"),
    );
  });

  it("fails on an undeclared difference between consecutive snapshots", () => {
    const file = join(copy, "ch03", "src", "core", "messages.ts");
    writeFileSync(file, `${readFileSync(file, "utf8")}\n// a drive-by edit\n`);
    expect(verifySnapshots(copy, declarations)).toEqual([
      "ch03: src/core/messages.ts is changed from ch02 but not declared as changed",
    ]);
  });

  it("fails on an undeclared added file", () => {
    writeFileSync(join(copy, "ch02", "src", "core", "extra.ts"), "export {};\n");
    expect(verifySnapshots(copy, declarations)).toEqual([
      "ch02: src/core/extra.ts is added from ch01 but not declared as added",
      "ch03: src/core/extra.ts is removed from ch02 but not declared as removed",
    ]);
  });

  it("fails on a declared change that is not a change", () => {
    const from = join(copy, "ch02", "src", "core", "profiles.ts");
    writeFileSync(join(copy, "ch03", "src", "core", "profiles.ts"), readFileSync(from, "utf8"));
    expect(verifySnapshots(copy, declarations)).toEqual([
      "ch03: src/core/profiles.ts is declared changed but is not changed from ch02",
    ]);
  });

  it("fails when a chapter has no declaration", () => {
    const { ch03: _dropped, ...rest } = declarations;
    expect(verifySnapshots(copy, rest)).toEqual(["ch03: no declaration in snapshots.json"]);
  });
});
