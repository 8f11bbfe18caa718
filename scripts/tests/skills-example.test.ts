import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { SkillRegistry } from "../../code/chapters/ch07/src/features/skills.js";

// The book ships one Skill at the root of its code folder, which is this repository's root, and chapter 7's demo
// workspace gets a copy from the snapshot's demo/skills/. The two must not drift, and the root one must be what the
// book's experiments print.

const repository = fileURLToPath(new URL("../../", import.meta.url));
const root = `${repository}skills/typescript-style/SKILL.md`;
const demoCopy = `${repository}code/chapters/ch07/demo/skills/typescript-style/SKILL.md`;

describe("skills/typescript-style, the Skill the book ships", () => {
  it("the demo's copy is byte-identical to the root file, LF with one final newline", () => {
    const bytes = readFileSync(root);
    expect(readFileSync(demoCopy).equals(bytes)).toBe(true);
    expect(bytes.includes("\r")).toBe(false);
    expect(bytes.toString("utf8").endsWith("。\n")).toBe(true);
    expect(readdirSync(`${repository}skills`)).toEqual(["typescript-style"]);
  });

  it("scanned from the repository root it is the book's experiment 1: one name, a 155-byte catalog line of 93 units", () => {
    const registry = SkillRegistry.scan(repository);
    expect(registry.names).toEqual(["typescript-style"]);
    const catalog = registry.renderCatalog();
    expect(catalog).toBe(
      "- **typescript-style**: Use when 编写或审查 TypeScript 类型、模块、导入和运行时校验；Don't use for SQL、部署或通用项目规划。",
    );
    expect(Buffer.byteLength(catalog, "utf8")).toBe(155);
    expect(catalog.length).toBe(93);
  });

  it("its body is what load_skill returns, byte for byte", async () => {
    const registry = SkillRegistry.scan(repository);
    await expect(registry.loadSkill("typescript-style")).resolves.toBe(
      "# TypeScript Style\n\n外部输入先按 unknown 处理，通过运行时校验后再进入业务逻辑。\n",
    );
  });
});
