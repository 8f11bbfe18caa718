// SPEC §11: each chapter snapshot differs from the previous one only where code/chapters/snapshots.json
// says so. Usage: `npm run verify:snapshots` (part of `npm test`). After a deliberate change,
// `npm run verify:snapshots -- --write` rewrites the declaration from the tree: review its git diff,
// because that diff is exactly what the chapters now claim to change.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

/** Per chapter, relative to the previous chapter: the files it adds, changes and removes. */
export interface ChapterDeclaration {
  readonly added: readonly string[];
  readonly changed: readonly string[];
  readonly removed: readonly string[];
}

export type SnapshotDeclarations = Readonly<Record<string, ChapterDeclaration>>;

const IGNORED = new Set(["node_modules", "dist"]);

export function snapshotFiles(folder: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (IGNORED.has(entry.name) || entry.name.endsWith(".tsbuildinfo")) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) files.set(relative(folder, path).split(sep).join("/"), readFileSync(path, "utf8"));
    }
  };
  walk(folder);
  return files;
}

/** What really differs between two snapshots, as a declaration would say it. */
export function actualDifferences(previous: Map<string, string>, current: Map<string, string>): ChapterDeclaration {
  const sorted = (paths: Iterable<string>): string[] => [...paths].sort();
  return {
    added: sorted([...current.keys()].filter((path) => !previous.has(path))),
    changed: sorted(
      [...current.keys()].filter((path) => previous.has(path) && previous.get(path) !== current.get(path)),
    ),
    removed: sorted([...previous.keys()].filter((path) => !current.has(path))),
  };
}

/** Every way the snapshots under `chaptersDir` disagree with their declaration; empty when they agree. */
export function verifySnapshots(chaptersDir: string, declarations: SnapshotDeclarations): string[] {
  const chapters = readdirSync(chaptersDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && /^ch\d\d$/.test(entry.name))
    .map((entry) => entry.name)
    .sort();
  const problems: string[] = [];
  for (const name of Object.keys(declarations)) {
    if (!chapters.includes(name)) problems.push(`${name}: declared, but there is no snapshot code/chapters/${name}`);
  }
  for (let i = 1; i < chapters.length; i += 1) {
    const [before, after] = [chapters[i - 1] as string, chapters[i] as string];
    const declared = declarations[after];
    if (declared === undefined) {
      problems.push(`${after}: no declaration in snapshots.json`);
      continue;
    }
    const actual = actualDifferences(snapshotFiles(join(chaptersDir, before)), snapshotFiles(join(chaptersDir, after)));
    for (const kind of ["added", "changed", "removed"] as const) {
      const expected = new Set(declared[kind]);
      for (const path of actual[kind]) {
        if (!expected.has(path))
          problems.push(`${after}: ${path} is ${kind} from ${before} but not declared as ${kind}`);
      }
      for (const path of expected) {
        if (!actual[kind].includes(path))
          problems.push(`${after}: ${path} is declared ${kind} but is not ${kind} from ${before}`);
      }
    }
  }
  return problems;
}

function main(): void {
  const chaptersDir = fileURLToPath(new URL("../code/chapters/", import.meta.url));
  const declarationFile = join(chaptersDir, "snapshots.json");
  if (process.argv.includes("--write")) {
    const chapters = readdirSync(chaptersDir)
      .filter((name) => /^ch\d\d$/.test(name))
      .sort();
    const written: Record<string, ChapterDeclaration> = {};
    for (let i = 1; i < chapters.length; i += 1) {
      const [before, after] = [chapters[i - 1] as string, chapters[i] as string];
      written[after] = actualDifferences(
        snapshotFiles(join(chaptersDir, before)),
        snapshotFiles(join(chaptersDir, after)),
      );
    }
    writeFileSync(declarationFile, `${JSON.stringify(written, null, 2)}\n`);
    console.log(`Wrote ${declarationFile}; review its diff before committing.`);
  }
  const declarations = JSON.parse(readFileSync(declarationFile, "utf8")) as SnapshotDeclarations;
  const problems = verifySnapshots(chaptersDir, declarations);
  if (problems.length > 0) {
    console.error(`Snapshots drift from code/chapters/snapshots.json:\n- ${problems.join("\n- ")}`);
    process.exit(1);
  }
  console.log(`Snapshots match code/chapters/snapshots.json (${Object.keys(declarations).length} chapters declared).`);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) main();
