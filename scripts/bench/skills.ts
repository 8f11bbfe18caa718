// skills: chapter 7's SkillRegistry.scan over the most skill folders it accepts (1,000), each SKILL.md with a
// 16 KiB body, side by side with a plain directory read of the same tree and with reading every manifest whole.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_SKILL_DIRECTORIES, SkillRegistry } from "../../code/chapters/ch07/src/features/skills.js";
import { nowNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { ratioText, type Row } from "./table.js";
import { makeTemp, removeTemp } from "./temp.js";

const BODY_BYTES = 16 * 1024;

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
    return { rows, notes };
  } finally {
    removeTemp(workspace);
  }
}
