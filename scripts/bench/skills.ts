// skills: chapter 7's SkillRegistry.scan over the most skill folders it accepts (1,000), each SKILL.md with a
// 16 KiB body, side by side with a plain directory read of the same tree and with reading every manifest whole;
// then one Skill whose frontmatter is the worst shape known, side by side with one ordinary Skill.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  MAX_FRONTMATTER_BYTES,
  MAX_SKILL_DIRECTORIES,
  SkillRegistry,
} from "../../code/chapters/ch07/src/features/skills.js";
import { nowNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { ratioText, type Row } from "./table.js";
import { makeTemp, removeTemp } from "./temp.js";

const BODY_BYTES = 16 * 1024;

/** YAML after `name` and `description`: `head`, then `unit` as often as fits in the 64 KiB frontmatter, then `tail`. */
function filled(head: string, unit: string, tail: string): string {
  const room = MAX_FRONTMATTER_BYTES - 100 - head.length - tail.length;
  return `${head}${unit.repeat(Math.floor(room / unit.length))}${tail}`;
}

/**
 * Frontmatter shapes past the ordinary one: issue 34's D1 (28 nested explicit keys, which cost 12 s and 1.2 GB
 * before keys were checked before any was stringified), the worst accepted 64 KiB (a flow list of 32,000
 * one-letter items: the most nodes per byte), and the worst refused (nested flow lists until yaml's own
 * composer runs out of stack and reports it).
 */
const SHAPES = {
  ordinary: "",
  nestedKeys: `${"? ".repeat(28)}x`,
  flowItems: filled("list: [", "a,", "a]"),
  deepLists: filled("deep: ", "[", ""),
} as const;

export async function benchSkills(options: { readonly runs: number }): Promise<{ rows: Row[]; notes: string[] }> {
  const workspace = makeTemp("skills");
  try {
    const skills = join(workspace, "skills");
    const body = `# Body\n\n${"x".repeat(BODY_BYTES - 9)}\n`;
    for (let index = 0; index < MAX_SKILL_DIRECTORIES; index += 1) {
      const name = `skill-${String(index).padStart(4, "0")}`;
      mkdirSync(join(skills, name), { recursive: true });
      const frontmatter = `---\nname: ${name}\ndescription: Use when the bench asks for ${name}.\n---\n`;
      writeFileSync(join(skills, name, "SKILL.md"), frontmatter + body);
    }
    const timed = (work: () => unknown) => (): Promise<number> => {
      const start = nowNs();
      work();
      return Promise.resolve(nowNs() - start);
    };
    // What a scan could not do with less: list the root, then each folder (no file is opened).
    const plainRead = (): number =>
      readdirSync(skills).reduce((count, name) => count + readdirSync(join(skills, name)).length, 0);
    // The naive scan the book warns of: every manifest read and decoded whole.
    const wholeRead = (): number =>
      readdirSync(skills).reduce(
        (bytes, name) => bytes + readFileSync(join(skills, name, "SKILL.md"), "utf8").length,
        0,
      );
    const registry = SkillRegistry.scan(workspace);
    const notes = [
      `skills: ${registry.names.length} skill folders, each SKILL.md a 3-line frontmatter and a ${BODY_BYTES / 1024} KiB body; ` +
        `the catalog keeps ${registry.catalogEntries.length} entries (its 100-entry, 8,000-byte bounds).`,
    ];
    const samples = await rounds(
      { scan: timed(() => SkillRegistry.scan(workspace)), plain: timed(plainRead), whole: timed(wholeRead) },
      { runs: options.runs, warmup: 1 },
    );
    const rows: Row[] = [
      {
        name: `skills: SkillRegistry.scan, ${MAX_SKILL_DIRECTORIES} folders`,
        kind: "time",
        value: summarize(samples.scan),
        ratio: ratioText(ratioOfMedians(samples.scan, samples.plain), "plain directory read"),
      },
      { name: "skills: plain directory read (root + each folder)", kind: "time", value: summarize(samples.plain) },
      {
        name: "skills: every SKILL.md read and decoded whole",
        kind: "time",
        value: summarize(samples.whole),
        ratio: ratioText(ratioOfMedians(samples.whole, samples.plain), "plain directory read"),
      },
    ];
    const shapes = await benchShapes(options);
    return { rows: [...rows, ...shapes.rows], notes: [...notes, ...shapes.notes] };
  } finally {
    removeTemp(workspace);
  }
}

/** One Skill per workspace, its frontmatter each shape of `SHAPES`; the scan's outcome is checked, then timed. */
async function benchShapes(options: { readonly runs: number }): Promise<{ rows: Row[]; notes: string[] }> {
  const workspaces = Object.fromEntries(
    Object.entries(SHAPES).map(([shape, yaml]) => {
      const workspace = makeTemp(`skills-${shape}`);
      mkdirSync(join(workspace, "skills", "alpha"), { recursive: true });
      const manifest = `---\nname: alpha\ndescription: Use when the bench asks.\n${yaml}\n---\n# Body\n`;
      writeFileSync(join(workspace, "skills", "alpha", "SKILL.md"), manifest);
      return [shape, workspace];
    }),
  ) as Record<keyof typeof SHAPES, string>;
  try {
    const outcome = (workspace: string): string => {
      try {
        return `scans (${SkillRegistry.scan(workspace).names.length} Skill)`;
      } catch (error) {
        return `refused: ${(error as Error).message}`;
      }
    };
    const notes = [
      `skills shapes: ordinary ${outcome(workspaces.ordinary)}; 28 nested \`? \` keys (${SHAPES.nestedKeys.length} bytes) ` +
        `${outcome(workspaces.nestedKeys)}; 64 KiB flow list ${outcome(workspaces.flowItems)}; 64 KiB nested \`[\` ` +
        `${outcome(workspaces.deepLists)}. The scan's 1 MiB total bounds a start at 16 such manifests.`,
    ];
    const scan = (workspace: string) => (): Promise<number> => {
      const start = nowNs();
      try {
        SkillRegistry.scan(workspace);
      } catch {
        // The refused shapes are timed up to their refusal, which is what a start pays for them.
      }
      return Promise.resolve(nowNs() - start);
    };
    const samples = await rounds(
      {
        ordinary: scan(workspaces.ordinary),
        nestedKeys: scan(workspaces.nestedKeys),
        flowItems: scan(workspaces.flowItems),
        deepLists: scan(workspaces.deepLists),
      },
      { runs: options.runs, warmup: 1 },
    );
    const versus = (shape: keyof typeof SHAPES): string =>
      ratioText(ratioOfMedians(samples[shape], samples.ordinary), "ordinary SKILL.md");
    const rows: Row[] = [
      { name: "skills: scan, one ordinary SKILL.md", kind: "time", value: summarize(samples.ordinary) },
      {
        name: "skills: scan, 28 nested ? keys (refused)",
        kind: "time",
        value: summarize(samples.nestedKeys),
        ratio: versus("nestedKeys"),
      },
      {
        name: "skills: scan, 64 KiB flow list [a,a,…] (worst accepted)",
        kind: "time",
        value: summarize(samples.flowItems),
        ratio: versus("flowItems"),
      },
      {
        name: "skills: scan, 64 KiB nested [[[… (worst refused)",
        kind: "time",
        value: summarize(samples.deepLists),
        ratio: versus("deepLists"),
      },
    ];
    return { rows, notes };
  } finally {
    for (const workspace of Object.values(workspaces)) removeTemp(workspace);
  }
}
