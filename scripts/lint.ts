// `npm run lint`: ESLint over the repository, linting each distinct input once. Snapshots carry most files
// byte-identical from the chapter before; a file whose bytes, import closure (type-aware rules read the types it
// imports), tsconfig and dependency fields are identical to one already linted gets that file's result, reported
// under its own name. Everything else is linted as `eslint .` would lint it, with the same config.
// `npm run lint -- ch05` (or `npm run lint ch05`) lints that one snapshot's files only.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { ESLint } from "eslint";
import type ts from "typescript";
import { snapshotFiles } from "./verify-snapshots.js";
import { chosenChapters } from "./compile.js";
import { importClosure } from "./test-plan/closure.js";
import { chapterNames, dependencyFields } from "./test-plan/plan.js";

const repository = fileURLToPath(new URL("../", import.meta.url));
const LINTED = /\.(?:[cm]?[jt]s)$/;

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");

/** Every file `eslint .` would lint: tracked or new, not ignored by git or by the ESLint config. */
async function lintableFiles(eslint: ESLint): Promise<string[]> {
  const listed = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z"], {
    cwd: repository,
    encoding: "utf8",
  })
    .split("\0")
    .filter((path) => LINTED.test(path));
  const files: string[] = [];
  for (const path of listed) if (!(await eslint.isPathIgnored(join(repository, path)))) files.push(path);
  return files.sort();
}

/**
 * A key per snapshot file: files with equal keys lint alike. Files outside the snapshots key on their own path,
 * so each is linted.
 */
function lintKeys(files: readonly string[]): Map<string, string> {
  const keys = new Map<string, string>(files.map((path) => [path, `own:${path}`]));
  for (const chapter of chapterNames(join(repository, "code", "chapters"))) {
    const prefix = `code/chapters/${chapter}/`;
    const snapshot = snapshotFiles(join(repository, prefix));
    // Global declarations reach every file of the program, so any file holding one is part of every key.
    const global = [...snapshot]
      .filter(([, text]) => /\bdeclare\s+(?:global|module)\b/.test(text))
      .map(([path]) => path);
    for (const path of files.filter((file) => file.startsWith(prefix))) {
      const inside = path.slice(prefix.length);
      const inputs = [...importClosure([inside, ...global], snapshot), "tsconfig.json"].sort();
      const hashes = inputs.map((input) => [input, sha256(snapshot.get(input) ?? "")]);
      keys.set(path, sha256(JSON.stringify([hashes, dependencyFields(snapshot.get("package.json"))])));
    }
  }
  return keys;
}

/**
 * Lints the repository, each distinct input once, and prints the report; false when any file has an error.
 * `programs` (from compile.ts, one per project) give the type-aware rules their types without a second
 * compilation; without them ESLint's project service builds its own.
 */
export async function lint(programs?: readonly ts.Program[], only: readonly string[] = []): Promise<boolean> {
  const started = Date.now();
  const overrideConfig =
    programs === undefined
      ? undefined
      : { files: ["**/*.ts"], languageOptions: { parserOptions: { projectService: false, programs: [...programs] } } };
  const eslint = new ESLint({ cwd: repository, ...(overrideConfig === undefined ? {} : { overrideConfig }) });
  const files = (await lintableFiles(eslint)).filter(
    (path) => only.length === 0 || only.some((chapter) => path.startsWith(`code/chapters/${chapter}/`)),
  );
  const keys = lintKeys(files);
  /** key → every file with that key; the first of each is linted. */
  const groups = new Map<string, string[]>();
  for (const path of files) {
    const key = keys.get(path) ?? path;
    groups.set(key, [...(groups.get(key) ?? []), path]);
  }
  const linted = await eslint.lintFiles([...groups.values()].map((group) => join(repository, group[0] as string)));
  const results: ESLint.LintResult[] = [];
  for (const result of linted) {
    const path = relative(repository, result.filePath).split(sep).join("/");
    const group = groups.get(keys.get(path) ?? path) ?? [path];
    for (const member of group) results.push({ ...result, filePath: join(repository, member) });
  }
  const formatter = await eslint.loadFormatter("stylish");
  const output = await formatter.format(results);
  if (output !== "") console.log(output);
  const errors = results.reduce((sum, result) => sum + result.errorCount + result.fatalErrorCount, 0);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`lint: ${files.length} files, ${groups.size} distinct inputs linted, ${errors} errors (${seconds} s)`);
  return errors === 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const only = chosenChapters(process.argv.slice(2), chapterNames(join(repository, "code", "chapters")));
  if (typeof only === "string") {
    console.error(`${only}\nUsage: npm run lint [-- chNN …]   (no chapter: the whole repository)`);
    process.exitCode = 2;
  } else process.exitCode = (await lint(undefined, only)) ? 0 : 1;
}
