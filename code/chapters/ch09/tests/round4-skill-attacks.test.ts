import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MAX_FRONTMATTER_BYTES, SkillRegistry } from "../src/features/skills.js";

// Issue 34's round-4 attacks on the Skill scan, tried again as an attacker who writes the workspace's SKILL.md files:
// the YAML shapes next to D1's nested explicit keys, and the hidden characters next to D2's variation selectors.
// Introduced in ch07 with the code it attacks (src/features/skills.ts), carried as is.

let ws: string;
beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), "round4-skills-")));
  mkdirSync(join(ws, "skills", "a"), { recursive: true });
});
afterEach(() => {
  rmSync(ws, { recursive: true, force: true });
});

/** Scans a workspace whose one Skill has `extra` after its name and description; the error's text, or "accepted". */
function scan(extra: string, description = "Does one thing."): { readonly outcome: string; readonly ms: number } {
  const text = `---\nname: a\ndescription: ${description}\n${extra}\n---\nBody.\n`;
  writeFileSync(join(ws, "skills", "a", "SKILL.md"), text);
  const started = performance.now();
  let outcome = "accepted";
  try {
    SkillRegistry.scan(ws);
  } catch (error) {
    outcome = (error as Error).message;
  }
  return { outcome, ms: performance.now() - started };
}

const nested = (levels: number, wrap: (inner: string) => string): string => {
  let text = "x";
  for (let level = 0; level < levels; level += 1) text = wrap(text);
  return `k: ${text}`;
};
const NOT_SCALAR = "Skill frontmatter has a key that is not a scalar: skills/a/SKILL.md";
const NOT_YAML = "Skill frontmatter is not valid YAML: skills/a/SKILL.md";

describe("the Skill scan against D1's nearest YAML shapes", () => {
  it.each([
    [
      "30 complex keys nested in flow mappings ({? [ … ]: b})",
      nested(30, (inner) => `{ ? [ ${inner} ] : b }`),
      NOT_SCALAR,
    ],
    ["30 explicit keys nested in flow sequences ([? …: x])", nested(30, (inner) => `[ ? ${inner} : x ]`), NOT_SCALAR],
    ["30 flow-sequence keys of flow pairs ([[ … ]: x])", nested(30, (inner) => `[ [ ${inner} ] : x ]`), NOT_SCALAR],
    ["an anchored list as a key", "? &k [a]\n: b", NOT_SCALAR],
    [
      "a billion laughs of ten aliases a level",
      Array.from({ length: 10 }, (_, level) =>
        level === 0
          ? "l0: &l0 [x, x, x, x, x, x, x, x, x, x]"
          : `l${level}: &l${level} [${`*l${level - 1}, `.repeat(9)}*l${level - 1}]`,
      ).join("\n"),
      NOT_YAML,
    ],
    ["a merge key", "b: &b {x: 1}\nc: {<<: *b}", NOT_YAML],
    ["the same key as a number and as text", '1: a\n"1": b', NOT_YAML],
  ])("refuses %s at once", (_shape, extra, error) => {
    const { outcome, ms } = scan(extra);
    expect(outcome).toBe(error);
    expect(ms).toBeLessThan(2_000);
  });

  it.each([
    [
      "a 64 KiB flow list of one-pair mappings",
      (n: number) => `k: [${Array.from({ length: n }, (_, i) => `a${i}: b`).join(", ")}]`,
    ],
    [
      "a 64 KiB mapping of tagged scalars",
      (n: number) => Array.from({ length: n }, (_, i) => `k${i}: !!str v`).join("\n"),
    ],
    ["a 64 KiB double-quoted scalar of escapes", (n: number) => `k: "${"\\u0041".repeat(n)}"`],
  ])("scans %s within its bound of time", (_shape, make) => {
    // The largest count whose manifest's frontmatter still fits in MAX_FRONTMATTER_BYTES.
    let count = 1;
    while (Buffer.byteLength(make(count * 2)) < MAX_FRONTMATTER_BYTES - 100) count *= 2;
    const { outcome, ms } = scan(make(count));
    expect(outcome).toBe("accepted");
    expect(ms).toBeLessThan(5_000);
  });
});

describe("a Skill description against D2's nearest hidden characters", () => {
  it.each([
    ["tag characters spelling an instruction", "Formats code.\u{e0049}\u{e0067}\u{e006e}\u{e006f}\u{e0072}\u{e0065}"],
    ["a right-to-left override", "Formats \u202ecode."],
    ["a Hangul choseong filler (U+115F)", "Formats\u115fcode."],
    ["a Hangul filler (U+3164)", "Formats\u3164code."],
    ["a variation selector above the BMP (U+E0100)", "Formats code.\u{e0100}\u{e0101}"],
    ["a combining grapheme joiner (U+034F)", "Formats\u034f code."],
    ["a soft hyphen (U+00AD)", "For\u00admats code."],
  ])("refuses %s", (_name, description) => {
    expect(scan("", JSON.stringify(description)).outcome).toBe(
      "Skill description must be one non-empty line: skills/a/SKILL.md",
    );
  });
});
